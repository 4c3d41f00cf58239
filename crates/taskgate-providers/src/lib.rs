//! Providers: where a task's work is done.
//!
//! Every AI API in the catalog is served by one [`Provider`]. The executor never
//! asks which provider it holds: it calls [`Provider::execute`] for live tasks and
//! [`Provider::sandbox`] for test-mode tasks. Built-in providers compute their
//! answers inside the process; the upstream provider ([`upstream`]) speaks the
//! wire protocols of the big AI API families over HTTP.

pub mod builtin;
pub mod chat;
mod context;
pub mod kinds;
pub mod sandbox;
pub mod schema;
pub mod trace;
pub mod upstream;

pub use context::{DeltaSink, ExecContext, Piece};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use taskgate_core::Timestamp;
pub use taskgate_core::{Attempt, AttemptOutcome};

/// How an API is priced. Prices are in nano-USD (1e-9 USD) so that sub-cent
/// prices stay exact integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pricing {
    /// A fixed price for every successful call.
    PerCall { price_nanos: i64 },
    /// A price per 1,000 input tokens and per 1,000 output tokens, and
    /// optionally a lower price per 1,000 input tokens read from the
    /// provider's prompt cache (`None`: cached input costs the full input
    /// price).
    PerKiloTokens {
        input_nanos: i64,
        output_nanos: i64,
        cached_input_nanos: Option<i64>,
    },
}

/// One worked example of an API: an input and the output it produces.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    pub input: Value,
    pub output: Value,
}

/// Everything the catalog shows about an API.
#[derive(Debug, Clone)]
pub struct ApiSpec {
    /// URL-safe identifier, e.g. `sentiment`.
    pub slug: String,
    pub name: String,
    pub description: String,
    /// The normalized kind: `tokenization`, `classification`, `chat`, …
    pub kind: String,
    /// The provider's name as shown in the catalog, e.g. `builtin`.
    pub provider: String,
    pub pricing: Pricing,
    pub input_schema: Value,
    pub output_schema: Value,
    pub examples: Vec<Example>,
    /// Default and maximum execution deadline.
    pub timeout_ms: u64,
    /// Largest accepted `input`, serialized as JSON.
    pub max_input_bytes: u64,
}

/// An API's health, from the circuit breakers of the targets behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiStatus {
    Available,
    Degraded,
    Unavailable,
}

impl ApiStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Degraded => "degraded",
            Self::Unavailable => "unavailable",
        }
    }
}

/// What a task consumed; the executor turns it into cost with the API's pricing.
///
/// `output_tokens` is every generated token billed as output, reasoning
/// included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub units: i64,
    /// The whole input, its cached part included, however the provider
    /// counts it.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The part of `output_tokens` spent reasoning, where the provider
    /// counts it.
    pub reasoning_tokens: Option<i64>,
    /// The part of `input_tokens` read from the provider's prompt cache.
    pub cached_input_tokens: Option<i64>,
}

/// A successful execution.
#[derive(Debug, Clone)]
pub struct Execution {
    pub output: Value,
    pub usage: Usage,
}

/// Times a piece of work (an attempt), for its [`Attempt`].
pub struct LocalClock {
    started_at: Timestamp,
    clock: std::time::Instant,
}

impl LocalClock {
    pub fn start() -> Self {
        Self {
            started_at: Timestamp::now(),
            clock: std::time::Instant::now(),
        }
    }

    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The attempt this work was: `succeeded` or `failed`, no HTTP status.
    pub fn attempt(self, provider: &str, target: String, succeeded: bool) -> Attempt {
        self.finished(provider, target, AttemptOutcome::of(succeeded), None)
    }

    /// The attempt that started at this clock and ended now.
    pub fn finished(
        &self,
        provider: &str,
        target: String,
        outcome: AttemptOutcome,
        http_status: Option<u16>,
    ) -> Attempt {
        Attempt {
            provider: provider.to_owned(),
            target,
            started_at: self.started_at,
            duration_ms: self.elapsed_ms(),
            outcome,
            http_status,
        }
    }
}

/// Why an execution failed. `code` is one of the task error codes of the
/// contract (`upstream_error`, `upstream_timeout`, `invalid_upstream_response`,
/// `timeout`, `internal_error`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ExecError {
    pub code: String,
    pub message: String,
    pub upstream_status: Option<u16>,
}

impl ExecError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            upstream_status: None,
        }
    }

    pub fn with_status(mut self, status: Option<u16>) -> Self {
        self.upstream_status = status;
        self
    }
}

/// Something in a call's input that an API's provider cannot carry: the
/// server answers `400 unsupported_parameter` with it before any upstream
/// call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Where in the input, e.g. `tool_choice` or `messages[2].content[1]`.
    pub field: String,
    /// Why, naming the provider that cannot carry it.
    pub message: String,
}

/// A source of AI APIs.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The provider's name, e.g. `builtin`.
    fn name(&self) -> &str;

    /// The APIs this provider offers.
    fn apis(&self) -> Vec<ApiSpec>;

    /// Runs a live task. `input` has already been validated against the API's
    /// input schema. Each attempt made is recorded in `ctx`, and a streaming
    /// API sends its output there as it is generated. Dropping the returned
    /// future must stop the work (that is how cancel and timeouts work).
    async fn execute(
        &self,
        api: &str,
        input: &Value,
        ctx: &mut ExecContext,
    ) -> Result<Execution, ExecError>;

    /// What in a chat `input` this API's provider cannot carry, if anything.
    /// An API served by several targets refuses what any of them cannot.
    fn unsupported(&self, _api: &str, _input: &chat::ChatInput) -> Option<Unsupported> {
        None
    }

    /// The API's health as the catalog shows it.
    fn status(&self, _api: &str) -> ApiStatus {
        ApiStatus::Available
    }

    /// Runs a test-mode task: deterministic, free, and never leaves the
    /// process. The default derives an output from the API's output schema.
    async fn sandbox(&self, api: &ApiSpec, input: &Value) -> Result<Execution, ExecError> {
        Ok(sandbox::simulate(api, input))
    }
}
