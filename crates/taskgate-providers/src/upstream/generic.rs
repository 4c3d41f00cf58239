//! Any JSON HTTP service, described by the API's `http` section alone (see
//! [`HttpApiConfig`] and the template language in `template.rs`): one
//! request and its answer mapped into the kind's output, or an asynchronous
//! job (Replicate's predictions, fal's queue) submitted, polled until it
//! ends, and cancelled upstream when the task stops waiting for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, RequestBuilder};
use serde_json::{Map, Value, json};
use taskgate_core::task::error_code;

use super::config::{HttpApiConfig, JobConfig};
use super::http::{Class, Conn, UpstreamError, error_message};
use super::redact::Redactor;
use super::template::{self, render, render_path, render_str};
use super::{Adapter, Call};
use crate::kinds::Kind;
use crate::{Execution, Usage};

const DEFAULT_POLL_MS: u64 = 1_000;
/// A floor on the poll interval, so a `0` cannot hammer the provider.
const MIN_POLL_MS: u64 = 10;
/// Polls in a row that may fail in passing (connection, 429, 5xx) while the
/// job runs on upstream.
const POLL_RETRIES: u32 = 3;
const MAX_POLL_PAUSE: Duration = Duration::from_secs(60);
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
const USAGE_KEYS: [&str; 3] = ["input_tokens", "output_tokens", "units"];

pub(crate) struct Generic {
    conn: Conn,
}

impl Generic {
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }

    /// Follows the job submitted with `cx["response"]` to its end; leaves the
    /// final response in `cx["response"]` and the job in `cx["job"]`.
    async fn run_job(
        &self,
        job: &JobConfig,
        cx: &mut Value,
        progress: &AtomicU64,
    ) -> Result<(), UpstreamError> {
        let id = match render_str(&job.id, cx) {
            r if !r.missing.is_empty() => Value::Null,
            r => r.value,
        };
        let id = match id {
            Value::String(s) if !s.is_empty() => s,
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(UpstreamError::invalid(format!(
                    "The provider {} answered without a job id (`{}`).",
                    self.conn.name, job.id
                )));
            }
        };
        cx["job"] = json!({ "id": id });
        let path = |p: &str, cx: &Value| -> Result<String, UpstreamError> {
            render_path(p, cx).map_err(|e| {
                UpstreamError::invalid(self.conn.scrub(&format!(
                    "Taskgate cannot follow the job {id} of the provider {}: {e}",
                    self.conn.name
                )))
            })
        };
        let cancel_method = match job.cancel_method.as_deref().map(str::to_ascii_uppercase) {
            Some(m) if m == "PUT" => Method::PUT,
            _ => Method::POST,
        };
        let cancel = match &job.cancel_path {
            // Empty, unless the provider takes fields in every body.
            Some(p) if !self.conn.body.is_empty() => Some(self.conn.built(self.conn.json(
                cancel_method,
                &path(p, cx)?,
                Value::Object(Map::new()),
            ))),
            Some(p) => Some(self.conn.request(cancel_method, &path(p, cx)?).body("")),
            None => None,
        };
        let mut guard = CancelGuard {
            request: cancel.map(|rb| rb.timeout(CANCEL_TIMEOUT)),
            redactor: self.conn.redactor.clone(),
            provider: self.conn.name.clone(),
            job: id.clone(),
        };
        let status_path = path(&job.status_path, cx)?;
        let result_path = job
            .result_path
            .as_deref()
            .map(|p| path(p, cx))
            .transpose()?;
        tracing::debug!(provider = %self.conn.name, job = %id, "upstream job submitted");
        let interval = Duration::from_millis(
            job.poll_interval_ms
                .unwrap_or(DEFAULT_POLL_MS)
                .max(MIN_POLL_MS),
        );
        // The submit answer may already be final; a poll answer must say.
        let mut polled = false;
        loop {
            match self.state(job, cx, polled)? {
                State::Running => {}
                State::Done => {
                    guard.disarm();
                    if let Some(p) = &result_path {
                        cx["response"] = self.get_json(p, interval).await?;
                    }
                    return Ok(());
                }
                State::Failed(status) => {
                    guard.disarm();
                    let why = match error_message(&cx["response"]) {
                        Some(m) => format!(": {m}"),
                        None => format!(" with the status {status}."),
                    };
                    return Err(UpstreamError {
                        // The provider works; the job itself failed, which
                        // another target may not.
                        class: Class::Next,
                        code: error_code::UPSTREAM_ERROR,
                        message: self.conn.scrub(&format!(
                            "The job {id} of the provider {} failed{why}",
                            self.conn.name
                        )),
                        status: None,
                        retry_after: None,
                        breaker: false,
                    });
                }
            }
            tokio::time::sleep(interval).await;
            cx["response"] = self.get_json(&status_path, interval).await?;
            polled = true;
            // A job that answers its polls is not stalled, however long it
            // runs: this keeps the attempt timeout from cutting it off.
            progress.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The job's state in `cx["response"]`.
    fn state(&self, job: &JobConfig, cx: &Value, required: bool) -> Result<State, UpstreamError> {
        let status = match render_str(&job.status, cx) {
            r if !r.missing.is_empty() => Value::Null,
            r => r.value,
        };
        let status = match status {
            Value::Null if required => {
                return Err(UpstreamError::invalid(format!(
                    "The provider {} answered a poll without the job's status (`{}`).",
                    self.conn.name, job.status
                )));
            }
            Value::Null => return Ok(State::Running),
            Value::String(s) => s,
            other => other.to_string(),
        };
        Ok(if job.done.contains(&status) {
            State::Done
        } else if job.failed.contains(&status) {
            State::Failed(status)
        } else {
            State::Running
        })
    }

    /// GETs `path`, riding out a few passing failures.
    async fn get_json(&self, path: &str, pause: Duration) -> Result<Value, UpstreamError> {
        let mut failures = 0;
        loop {
            match self.conn.send_json(self.conn.api(Method::GET, path)).await {
                Err(e) if e.class == Class::Retry && failures < POLL_RETRIES => {
                    failures += 1;
                    tracing::debug!(provider = %self.conn.name, error = %self.conn.scrub(&e.message), "job poll failed, retrying");
                    tokio::time::sleep(e.retry_after.unwrap_or(pause).min(MAX_POLL_PAUSE)).await;
                }
                r => return r,
            }
        }
    }
}

#[async_trait]
impl Adapter for Generic {
    fn conn(&self) -> &Conn {
        &self.conn
    }

    fn supports(&self, _kind: Kind) -> bool {
        true
    }

    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let http = call
            .http
            .ok_or_else(|| config_error("the API has no `http` section".to_owned()))?;
        let method = check(http).map_err(config_error)?;
        let mut cx = Value::Object(Map::from_iter([
            ("input".to_owned(), call.input.clone()),
            ("model".to_owned(), Value::String(call.model.to_owned())),
        ]));
        let path = render_path(&http.path, &cx).map_err(config_error)?;
        let rb = match &http.body {
            Some(body) if method != Method::GET => {
                self.conn
                    .json(method.clone(), &path, render(body, &cx).value)
            }
            // The provider's own fields make a body of their own.
            None if method != Method::GET && !self.conn.body.is_empty() => {
                self.conn
                    .json(method.clone(), &path, Value::Object(Map::new()))
            }
            _ => self.conn.api(method.clone(), &path),
        };
        cx["response"] = self.conn.send_json(rb).await?;
        if let Some(job) = &http.job {
            let progress = call.ctx.progress();
            self.run_job(job, &mut cx, &progress).await?;
        }
        let mut output = render(&http.output, &cx).value;
        // Templates written before chat carried tool calls have none: a
        // chat reply without them called no tool.
        if call.kind == Kind::Chat
            && let Value::Object(o) = &mut output
        {
            o.entry("tool_calls")
                .or_insert_with(|| Value::Array(Vec::new()));
        }
        Ok(Execution {
            output,
            usage: Usage {
                units: count(http, "units", &cx)?.unwrap_or(1),
                input_tokens: count(http, "input_tokens", &cx)?,
                output_tokens: count(http, "output_tokens", &cx)?,
                ..Usage::default()
            },
        })
    }
}

/// Checks what can be checked of an `http` section before any request, and
/// returns its method.
pub(crate) fn check(http: &HttpApiConfig) -> Result<Method, String> {
    let method = match http.method.as_deref().map(str::to_ascii_uppercase) {
        None => Method::POST,
        Some(m) => match m.as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            _ => return Err(format!("http.method {m:?} is not GET, POST, PUT or PATCH")),
        },
    };
    if let Some(k) = http
        .usage
        .keys()
        .find(|k| !USAGE_KEYS.contains(&k.as_str()))
    {
        return Err(format!(
            "http.usage.{k} is not one of {}",
            USAGE_KEYS.join(", ")
        ));
    }
    let templates = [("body", http.body.as_ref()), ("output", Some(&http.output))];
    for (name, t) in templates {
        if t.is_some_and(|t| template::depth(t) > template::MAX_DEPTH) {
            return Err(format!(
                "http.{name} nests deeper than {} levels",
                template::MAX_DEPTH
            ));
        }
    }
    let mut paths = vec![("path", Some(&http.path))];
    if let Some(job) = &http.job {
        if job.done.is_empty() {
            return Err("http.job.done lists no status".to_owned());
        }
        if let Some(m) = &job.cancel_method
            && !matches!(m.to_ascii_uppercase().as_str(), "POST" | "PUT")
        {
            return Err(format!("http.job.cancel_method {m:?} is not POST or PUT"));
        }
        paths.push(("job.status_path", Some(&job.status_path)));
        paths.push(("job.result_path", job.result_path.as_ref()));
        paths.push(("job.cancel_path", job.cancel_path.as_ref()));
    }
    for (name, p) in paths {
        if p.is_some_and(|p| !p.starts_with('/')) {
            return Err(format!("http.{name} does not start with `/`"));
        }
    }
    Ok(method)
}

fn config_error(e: String) -> UpstreamError {
    UpstreamError::fatal(
        error_code::INTERNAL_ERROR,
        format!("The API's `http` configuration cannot be used: {e}"),
    )
}

/// The usage count `key` as a whole number; `None` when not configured or
/// not in the answer.
fn count(http: &HttpApiConfig, key: &str, cx: &Value) -> Result<Option<i64>, UpstreamError> {
    let Some(t) = http.usage.get(key) else {
        return Ok(None);
    };
    let r = render_str(t, cx);
    if !r.missing.is_empty() {
        return Ok(None);
    }
    let n = match &r.value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f < i64::MAX as f64)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if n >= 0 => Ok(Some(n)),
        _ => Err(UpstreamError::invalid(format!(
            "The provider's usage.{key} (`{t}`) is not a whole number: {}",
            r.value
        ))),
    }
}

enum State {
    Running,
    Done,
    /// With the status that says so.
    Failed(String),
}

/// Cancels a submitted job when its attempt ends before the job did: the
/// future was dropped (the task was cancelled or timed out) or failed. The
/// cancel request is built (and signed) up front, since `Drop` cannot wait.
struct CancelGuard {
    request: Option<RequestBuilder>,
    /// The cancel's failure names its URL, whose query may carry a credential.
    redactor: Redactor,
    provider: String,
    job: String,
}

impl CancelGuard {
    fn disarm(&mut self) {
        self.request = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some(request) = self.request.take() else {
            return;
        };
        // Outside a runtime (it is shutting down) nothing can be sent.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let provider = std::mem::take(&mut self.provider);
        let job = std::mem::take(&mut self.job);
        let redactor = self.redactor.clone();
        runtime.spawn(async move {
            match redactor.send(request).await {
                Ok(r) => {
                    tracing::info!(%provider, %job, status = r.status().as_u16(), "upstream job cancelled")
                }
                Err(e) => {
                    tracing::warn!(%provider, %job, error = %e.detail, "could not cancel the upstream job")
                }
            }
        });
    }
}

#[cfg(test)]
mod chat_tests;
#[cfg(test)]
mod tests;
