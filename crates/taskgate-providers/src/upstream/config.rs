//! How an operator declares upstream providers and the targets of an API.
//! These types are read straight from the TOML file (and `TASKGATE_*`
//! variables) by the server's configuration.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A credential. It never shows in `Debug` output or when serialized, so a
/// configuration dump or a log line cannot leak it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Serialized as `***`: only defaults (which hold no secret) are ever
/// serialized back into a configuration.
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// OpenAI's REST API and everything compatible with it.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API (Generative Language API).
    Gemini,
    /// Any JSON HTTP service, described by templates.
    Http,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Http => "http",
        }
    }
}

/// `[providers.NAME]`: one upstream account at one address.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    #[serde(rename = "type")]
    pub protocol: Protocol,
    /// Defaults to the provider's public address (`http` has none).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The credential itself. Prefer `api_key_env`.
    #[serde(default)]
    pub api_key: Option<Secret>,
    /// The environment variable that holds the credential.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The header that carries the credential: `authorization` (as
    /// `Bearer KEY`, the default for `openai` and `http`), or any other
    /// header name, which then carries the bare key (`api-key` for Azure).
    #[serde(default)]
    pub auth_header: Option<String>,
    /// Extra headers sent with every request. Their values are treated as
    /// credentials: never logged, shown or echoed in an error.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// Extra query parameters sent with every request (`api-version` for
    /// Azure); their values are treated as credentials too.
    #[serde(default)]
    pub query: BTreeMap<String, Secret>,
    /// Extra fields set at the top level of every request body (JSON, or
    /// the form of an audio upload), for services that take a credential
    /// there; they replace a field of the same name, and their values are
    /// treated as credentials too.
    #[serde(default)]
    pub body: BTreeMap<String, Secret>,
    /// How long one attempt may go without progress: until its answer
    /// starts, then between two streamed pieces (default 60 000 ms; the
    /// task's own timeout bounds the whole execution).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Retries of one target after a connection error, a timeout, 408, 409,
    /// 429 or 5xx (default 2).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Ask for streamed chat output (default true).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Consecutive failures that open a target's circuit (default 5).
    #[serde(default)]
    pub breaker_failures: Option<u32>,
    /// How long an open circuit stays open before one probe (default 30 000 ms).
    #[serde(default)]
    pub breaker_cooldown_ms: Option<u64>,
}

/// A deployment or a fallback of an API: which provider, which model.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    pub provider: String,
    /// Defaults to the API's model.
    #[serde(default)]
    pub model: Option<String>,
    /// Share of the traffic among the API's deployments (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
}

/// How a generic `http` provider serves one API: templates of the request
/// and of the output, and optionally the polling of an asynchronous job.
///
/// Templates are JSON values in which a string `"{{path}}"` is replaced by
/// the value found at `path` (`input.prompt`, `model`, `response.output.0`,
/// `job.id`), keeping its JSON type, and `{{path}}` inside a longer string is
/// replaced by its text.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpApiConfig {
    /// `POST` (default), `GET`, `PUT` or `PATCH`.
    #[serde(default)]
    pub method: Option<String>,
    /// Path under the provider's base URL, a template (`/models/{{model}}/predictions`).
    pub path: String,
    /// The request body, a template over `input`, `model`.
    #[serde(default)]
    pub body: Option<Value>,
    /// The task's output, a template over `response` (the final response
    /// body), `input` and `model`.
    pub output: Value,
    /// Where usage is read from: `input_tokens`, `output_tokens`, `units`
    /// as templates over `response`, `input`, `model` (and `job.id`).
    #[serde(default)]
    pub usage: BTreeMap<String, String>,
    /// Present when the service answers with a job to poll.
    #[serde(default)]
    pub job: Option<JobConfig>,
}

/// An asynchronous job: submit, poll its status, fetch the result, cancel.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// The job's id in the submit response, a template over `response`
    /// (and `input`, `model`).
    pub id: String,
    /// Path polled for the job's status, a template over `job.id`.
    pub status_path: String,
    /// The status value in a poll response, a template over `response`.
    /// Values in neither `done` nor `failed` mean: poll again.
    pub status: String,
    /// Status values that mean the job is done.
    pub done: Vec<String>,
    /// Status values that mean the job failed.
    #[serde(default)]
    pub failed: Vec<String>,
    /// Path of the result, when it is not the last poll response itself.
    #[serde(default)]
    pub result_path: Option<String>,
    /// Path that cancels the job, called when the task is cancelled or
    /// times out (or the attempt fails while the job runs).
    #[serde(default)]
    pub cancel_path: Option<String>,
    /// Method of the cancel request: `POST` (default, Replicate) or `PUT` (fal).
    #[serde(default)]
    pub cancel_method: Option<String>,
    /// Pause between polls (default 1 000 ms).
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
}
