//! What every adapter shares: the connection to one provider, sending a
//! request, classifying a failure, reading `Retry-After`, decoding SSE.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use taskgate_core::task::error_code;

use super::config::{Protocol, ProviderConfig, Secret};
use super::redact::{Redactor, Transport};

/// Largest upstream response body read into memory.
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
const MESSAGE_CHARS: usize = 300;

/// One provider as configured: where it is and how to sign requests.
pub(crate) struct Conn {
    pub name: String,
    pub protocol: Protocol,
    pub base_url: String,
    pub client: reqwest::Client,
    pub headers: HeaderMap,
    pub query: Vec<(String, String)>,
    /// Fields added to every request body (JSON or multipart).
    pub body: Vec<(String, String)>,
    /// The credential and the values of the configured headers, query
    /// parameters and body fields, kept out of any message and log line.
    pub redactor: Redactor,
    pub attempt_timeout: Duration,
    pub max_retries: u32,
    pub stream: bool,
}

impl Conn {
    /// Builds the connection. `api_key` was resolved from the file or the
    /// environment by the caller; `default_base` is the provider's own address.
    pub fn new(
        name: &str,
        cfg: &ProviderConfig,
        api_key: Option<String>,
        default_base: Option<&str>,
        client: reqwest::Client,
    ) -> Result<Self, String> {
        let base_url = cfg
            .base_url
            .as_deref()
            .or(default_base)
            .ok_or_else(|| format!("providers.{name}: base_url is required"))?
            .trim_end_matches('/')
            .to_owned();
        let parsed = reqwest::Url::parse(&base_url)
            .map_err(|e| format!("providers.{name}.base_url: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("providers.{name}.base_url: must be http or https"));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let key = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("providers.{name}.headers: bad header name {k:?}"))?;
            let mut value = HeaderValue::from_str(v.expose())
                .map_err(|_| format!("providers.{name}.headers.{k}: bad header value"))?;
            value.set_sensitive(true);
            headers.insert(key, value);
        }
        if let Some(key) = &api_key {
            let default_header = match cfg.protocol {
                Protocol::Openai | Protocol::Http => "authorization",
                Protocol::Anthropic => "x-api-key",
                Protocol::Gemini => "x-goog-api-key",
            };
            let header = cfg
                .auth_header
                .as_deref()
                .unwrap_or(default_header)
                .to_ascii_lowercase();
            let value = if header == "authorization" {
                format!("Bearer {key}")
            } else {
                key.clone()
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!("providers.{name}: the API key has characters a header cannot carry")
            })?;
            value.set_sensitive(true);
            let header = HeaderName::from_bytes(header.as_bytes())
                .map_err(|_| format!("providers.{name}.auth_header: bad header name"))?;
            headers.insert(header, value);
        }
        Ok(Self {
            name: name.to_owned(),
            protocol: cfg.protocol,
            base_url,
            client,
            headers,
            query: cfg
                .query
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
            body: cfg
                .body
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
            redactor: Redactor::new(
                api_key
                    .iter()
                    .map(String::as_str)
                    .chain(cfg.headers.values().map(Secret::expose))
                    .chain(cfg.query.values().map(Secret::expose))
                    .chain(cfg.body.values().map(Secret::expose))
                    .chain(parsed.password())
                    .chain(Some(parsed.username()).filter(|u| !u.is_empty())),
            ),
            attempt_timeout: Duration::from_millis(cfg.timeout_ms.unwrap_or(60_000).max(1)),
            max_retries: cfg.max_retries.unwrap_or(2),
            stream: cfg.stream.unwrap_or(true),
        })
    }

    /// A request to `path` under the base URL, signed, with the extra query.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{}", self.base_url, path);
        let mut rb = self
            .client
            .request(method, url)
            .headers(self.headers.clone());
        if !self.query.is_empty() {
            rb = rb.query(&self.query);
        }
        rb
    }

    /// A request with a JSON body: `body` and the configured body fields,
    /// which replace any field of the same name.
    pub fn json(&self, method: Method, path: &str, mut body: Value) -> RequestBuilder {
        if let Value::Object(fields) = &mut body {
            for (k, v) in &self.body {
                fields.insert(k.clone(), Value::String(v.clone()));
            }
        }
        self.request(method, path).json(&body)
    }

    /// A multipart form with the configured body fields added.
    pub fn form(&self, mut form: reqwest::multipart::Form) -> reqwest::multipart::Form {
        for (k, v) in &self.body {
            form = form.text(k.clone(), v.clone());
        }
        form
    }

    /// Sends a request and returns the response if its status is a success;
    /// any failure is classified for the retry loop.
    pub async fn send(&self, rb: RequestBuilder) -> Result<Response, UpstreamError> {
        let resp = self
            .redactor
            .send(rb)
            .await
            .map_err(|e| self.transport_error(e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(self.status_error(resp).await)
    }

    /// Sends a request and reads its JSON body.
    pub async fn send_json(&self, rb: RequestBuilder) -> Result<Value, UpstreamError> {
        let resp = self.send(rb).await?;
        self.read_json(resp).await
    }

    /// Reads a successful answer's JSON body.
    pub async fn read_json(&self, resp: Response) -> Result<Value, UpstreamError> {
        let status = resp.status().as_u16();
        let body = read_limited(resp)
            .await
            .map_err(|e| self.transport_error(self.redactor.transport(&e)))?;
        serde_json::from_slice(&body).map_err(|_| {
            UpstreamError::invalid(format!(
                "{} answered with a body that is not JSON",
                self.name
            ))
            .status(status)
        })
    }

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
    pub async fn status_error(&self, resp: Response) -> UpstreamError {
        let status = resp.status();
        let retry_after = retry_after(resp.headers());
        let body = read_limited(resp).await.unwrap_or_default();
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

/// Reads a body, refusing more than [`MAX_RESPONSE_BYTES`].
pub(crate) async fn read_limited(resp: Response) -> Result<Bytes, reqwest::Error> {
    let mut stream = resp.bytes_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
            break;
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Adds the client's `options` to a request body: fields Taskgate did not
/// set are added, objects present in both are merged the same way, and
/// Taskgate's own fields win.
pub(crate) fn merge_options(body: &mut Value, options: Option<&Value>) {
    let (Value::Object(body), Some(Value::Object(options))) = (body, options) else {
        return;
    };
    for (k, v) in options {
        match body.get_mut(k) {
            None => {
                body.insert(k.clone(), v.clone());
            }
            Some(existing @ Value::Object(_)) if v.is_object() => {
                merge_options(existing, Some(v));
            }
            Some(_) => {}
        }
    }
}

/// A chat input's messages split for the APIs that take the instructions
/// apart: the system messages' texts joined by a blank line (`None` when
/// there are none), and the other turns in order.
pub(crate) fn split_system(input: &Value) -> (Option<String>, Vec<&Value>) {
    let messages = input["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let turns = messages.iter().filter(|m| m["role"] != "system").collect();
    ((!system.is_empty()).then(|| system.join("\n\n")), turns)
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Splits a byte stream into Server-Sent Events (the WHATWG rules: lines
/// end with LF, CRLF or CR; `data:` lines join with LF; a blank line ends an
/// event; comments start with `:`).
#[derive(Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    current: SseEvent,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A CR at the very end may be the first half of a CRLF.
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[pos] == b'\r' && self.buf.get(pos + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buf.drain(..pos + skip).take(pos).collect();
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.current));
                    self.has_data = false;
                } else {
                    self.current = SseEvent::default();
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.find(':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(' ').unwrap_or(v))
                }
                None => (&line[..], ""),
            };
            match field {
                "event" => self.current.event = value.to_owned(),
                "data" => {
                    if self.has_data {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(value);
                    self.has_data = true;
                }
                _ => {}
            }
        }
        events
    }
}

/// Reads an SSE response to its end, handing each event to `on_event`, which
/// returns `false` to stop reading.
pub(crate) async fn read_sse(
    conn: &Conn,
    resp: Response,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, UpstreamError>,
) -> Result<(), UpstreamError> {
    let mut decoder = SseDecoder::default();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| conn.transport_error(conn.redactor.transport(&e)))?;
        for event in decoder.feed(&chunk) {
            if !on_event(event)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Whether an answer says its body is JSON (`application/json`, or a
/// `+json` type), whatever was asked for.
pub fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| essence == "application/json" || essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configured_header_and_query_values_are_credentials() {
        let mut cfg = crate::upstream::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        cfg.api_key = Some(crate::upstream::Secret::new("sk-KEYSECRET-1"));
        cfg.headers.insert(
            "x-extra-key".to_owned(),
            crate::upstream::Secret::new("HEADERSECRET-2"),
        );
        cfg.query.insert(
            "key".to_owned(),
            crate::upstream::Secret::new("QUERYSECRET-3"),
        );
        let shown = format!("{cfg:?} {}", serde_json::to_string(&cfg).unwrap());
        let conn = Conn::new(
            "p",
            &cfg,
            Some("sk-KEYSECRET-1".to_owned()),
            None,
            reqwest::Client::new(),
        )
        .unwrap();
        let scrubbed = conn
            .scrub("bad key sk-KEYSECRET-1 for https://h/v1?key=QUERYSECRET-3 with HEADERSECRET-2");
        for secret in ["KEYSECRET", "HEADERSECRET", "QUERYSECRET"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
        assert!(conn.headers["x-extra-key"].is_sensitive());
    }

    #[test]
    fn sse_splits_events_across_chunks_and_line_ends() {
        let mut d = SseDecoder::default();
        let mut all = d.feed(b"event: a\r\ndata: {\"x\"");
        all.extend(d.feed(b":1}\r"));
        all.extend(d.feed(b"\n\r\n: comment\n\ndata: one\ndata: two\n\n"));
        assert_eq!(
            all,
            vec![
                SseEvent {
                    event: "a".into(),
                    data: "{\"x\":1}".into()
                },
                SseEvent {
                    event: "".into(),
                    data: "one\ntwo".into()
                },
            ]
        );
    }

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
    fn the_providers_body_fields_are_in_every_body_and_win() {
        let mut cfg = super::super::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        cfg.body = [("account_token".to_owned(), Secret::new("tok-1234"))].into();
        let conn = Conn::new("p", &cfg, None, None, reqwest::Client::new()).unwrap();
        let request = conn
            .json(
                Method::POST,
                "/x",
                json!({"account_token": "the client's", "model": "m"}),
            )
            .build()
            .unwrap();
        let body: Value =
            serde_json::from_slice(request.body().unwrap().as_bytes().unwrap()).unwrap();
        assert_eq!(body, json!({"account_token": "tok-1234", "model": "m"}));
        assert_eq!(conn.scrub("echo: tok-1234"), "echo: ***");
    }

    #[test]
    fn options_never_replace_taskgate_fields() {
        let mut body = json!({"model": "m", "generationConfig": {"temperature": 0.5}});
        merge_options(
            &mut body,
            Some(
                &json!({"model": "evil", "seed": 7, "generationConfig": {"temperature": 2, "topK": 3}}),
            ),
        );
        assert_eq!(
            body,
            json!({"model": "m", "seed": 7, "generationConfig": {"temperature": 0.5, "topK": 3}})
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
