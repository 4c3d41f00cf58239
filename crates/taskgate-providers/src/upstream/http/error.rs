//! A failed attempt: how it is classified for the retry loop, the message it
//! carries (without credentials), and the pause an upstream asks for.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;
use taskgate_core::task::error_code;

use super::body::read_limited;
use super::{Answer, Conn};
use crate::upstream::redact::Transport;

/// The longest message of a provider's quoted in a task's error, in characters.
const MESSAGE_CHARS: usize = 300;

/// The errors a connection makes of a request that failed.
impl Conn {
    /// A request that got no whole answer. The HTTP client's own account
    /// (redacted) is logged; the task's error says what happened.
    pub fn transport_error(&self, e: Transport) -> UpstreamError {
        tracing::debug!(provider = %self.name, error = %e.detail, "upstream transport error");
        UpstreamError {
            class: Class::Retry,
            code: error_code::UPSTREAM_ERROR,
            message: format!("Taskgate {} the provider {}.", e.what, self.name),
            status: None,
            retry_after: None,
            breaker: true,
        }
    }

    /// Classifies an unsuccessful answer, with the provider's own message
    /// where it is safe to show.
    pub async fn status_error(&self, answer: Answer) -> UpstreamError {
        let status = answer.status();
        let retry_after = retry_after(answer.headers());
        let body = read_limited(answer, &self.redactor)
            .await
            .unwrap_or_default();
        let upstream_message = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| error_message(&v));
        let class = classify(status);
        let message = match (status.as_u16(), upstream_message) {
            // Messages about credentials can quote part of the key.
            (401 | 403, _) => format!(
                "The provider {} refused Taskgate's credentials (HTTP {}).",
                self.name,
                status.as_u16()
            ),
            (_, Some(m)) => format!(
                "The provider {} answered HTTP {}: {}",
                self.name,
                status.as_u16(),
                self.scrub(&m)
            ),
            (_, None) => format!(
                "The provider {} answered HTTP {}.",
                self.name,
                status.as_u16()
            ),
        };
        UpstreamError {
            class,
            code: error_code::UPSTREAM_ERROR,
            message,
            status: Some(status.as_u16()),
            retry_after,
            breaker: matches!(class, Class::Retry),
        }
    }

    /// An error sent inside a stream that had started with 200 (an overload,
    /// say): a passing failure. The route loop will not retry it once text
    /// has reached a listener.
    pub fn stream_error(&self, message: &str) -> UpstreamError {
        UpstreamError {
            class: Class::Retry,
            code: error_code::UPSTREAM_ERROR,
            message: format!(
                "The provider {} failed while streaming: {}",
                self.name,
                self.scrub(message)
            ),
            status: None,
            retry_after: None,
            breaker: true,
        }
    }

    /// `message` without the credentials and cut to a readable length.
    pub fn scrub(&self, message: &str) -> String {
        let m = self.redactor.scrub(message);
        let mut out: String = m.chars().take(MESSAGE_CHARS).collect();
        if m.chars().count() > MESSAGE_CHARS {
            out.push('…');
        }
        out
    }

    /// `e` as it may leave the adapter: its message without the credentials,
    /// whichever path made it (a provider's message quoted, a value of its
    /// answer shown).
    pub fn redacted(&self, mut e: UpstreamError) -> UpstreamError {
        e.message = self.redactor.scrub(&e.message);
        e
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A passing failure: retry this target after a pause, then move on.
    Retry,
    /// This target cannot serve the request (credentials, unknown model):
    /// move on to the next one at once.
    Next,
    /// The request itself is wrong: no other target would do better.
    Fatal,
}

fn classify(status: StatusCode) -> Class {
    match status.as_u16() {
        408 | 409 | 425 | 429 | 500..=599 => Class::Retry,
        401..=404 => Class::Next,
        _ => Class::Fatal,
    }
}

/// A failed attempt, as the retry loop sees it.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamError {
    pub class: Class,
    /// The task error code it becomes.
    pub code: &'static str,
    pub message: String,
    pub status: Option<u16>,
    pub retry_after: Option<Duration>,
    /// Whether it counts against the target's circuit breaker.
    pub breaker: bool,
}

impl UpstreamError {
    /// The provider answered something this adapter cannot read.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            class: Class::Next,
            code: error_code::INVALID_UPSTREAM_RESPONSE,
            message: message.into(),
            status: None,
            retry_after: None,
            breaker: true,
        }
    }

    /// A request that no target can serve (a bad input file, say).
    pub fn fatal(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            class: Class::Fatal,
            code,
            message: message.into(),
            status: None,
            retry_after: None,
            breaker: false,
        }
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn into_exec(self) -> crate::ExecError {
        crate::ExecError::new(self.code, self.message).with_status(self.status)
    }
}

/// The provider's error message in the common shapes: `{"error": {"message"}}`
/// (OpenAI, Anthropic, Gemini), `{"error": "…"}`, `{"message"}`, `{"detail"}`.
pub(crate) fn error_message(v: &Value) -> Option<String> {
    let e = v.get("error").unwrap_or(v);
    e.get("message")
        .or_else(|| e.get("detail"))
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .map(str::to_owned)
}

/// The longest pause an upstream can ask for; longer asks are this. (A pause
/// past the task's deadline is not taken anyway: the next target is tried.)
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// `Retry-After` in seconds or as an HTTP date, or OpenAI's `retry-after-ms`.
/// Whatever the upstream sends (huge, negative, not a number, a date far
/// away), the answer is at most [`MAX_RETRY_AFTER`] or `None`, never a panic.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |v: f64| {
        (v.is_finite() && v >= 0.0)
            .then(|| Duration::from_secs_f64(v.min(MAX_RETRY_AFTER.as_secs_f64())))
    };
    if let Some(pause) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|ms| seconds(ms / 1000.0))
    {
        return Some(pause);
    }
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return seconds(secs);
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn retry_after_of_any_size_or_form_is_clamped_or_ignored() {
        let one = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_static(value));
            retry_after(&h)
        };
        for name in ["retry-after", "retry-after-ms"] {
            assert_eq!(one(name, "1e20"), Some(MAX_RETRY_AFTER), "{name}");
            assert_eq!(one(name, "1e400"), None, "{name}: infinite");
            assert_eq!(one(name, "NaN"), None, "{name}");
            assert_eq!(one(name, "-1"), None, "{name}");
            assert_eq!(one(name, "-1e20"), None, "{name}");
            assert_eq!(one(name, "0x10"), None, "{name}");
            assert_eq!(one(name, ""), None, "{name}");
        }
        assert_eq!(
            one("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            one("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn upstream_errors_are_classified() {
        assert_eq!(classify(StatusCode::TOO_MANY_REQUESTS), Class::Retry);
        assert_eq!(classify(StatusCode::from_u16(529).unwrap()), Class::Retry);
        assert_eq!(classify(StatusCode::UNAUTHORIZED), Class::Next);
        assert_eq!(classify(StatusCode::BAD_REQUEST), Class::Fatal);
        assert_eq!(
            error_message(&json!({"error": {"message": "m", "type": "t"}})).as_deref(),
            Some("m")
        );
        assert_eq!(error_message(&json!({"detail": "d"})).as_deref(), Some("d"));
    }
}
