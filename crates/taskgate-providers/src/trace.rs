//! What an upstream attempt's span says, in the OpenTelemetry GenAI
//! conventions (`gen_ai.*`), and the `traceparent` an upstream request
//! carries. Message contents are never recorded.

use reqwest::RequestBuilder;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use taskgate_core::trace::{ActiveSpan, Scope};

use crate::Usage;
use crate::upstream::config::Protocol;

/// `gen_ai.provider.name` of a provider: the convention's name for the
/// protocols it knows, else the provider's configured name.
pub fn provider_name(protocol: Protocol, configured: &str) -> &str {
    match protocol {
        Protocol::Openai => "openai",
        Protocol::Anthropic => "anthropic",
        Protocol::Gemini => "gcp.gemini",
        Protocol::Http => configured,
    }
}

/// The token counts of a successful attempt.
pub fn usage(span: &mut ActiveSpan, usage: &Usage) {
    if let Some(n) = usage.input_tokens {
        span.set("gen_ai.usage.input_tokens", n);
    }
    if let Some(n) = usage.output_tokens {
        span.set("gen_ai.usage.output_tokens", n);
    }
}

/// What a successful attempt's output says of the answer: the model that
/// gave it and why it stopped (a chat output's `model` and
/// `finish_reason`).
pub fn response(span: &mut ActiveSpan, output: &Value) {
    if let Some(model) = output.get("model").and_then(Value::as_str) {
        span.set_with("gen_ai.response.model", || model);
    }
    if let Some(reason) = output.get("finish_reason").and_then(Value::as_str) {
        span.set_with("gen_ai.response.finish_reasons", || vec![reason.to_owned()]);
    }
}

/// `rb` with the current span's `traceparent` (and `tracestate`), when the
/// work is traced.
pub fn propagate(rb: RequestBuilder) -> RequestBuilder {
    let mut headers = HeaderMap::new();
    propagate_headers(&mut headers);
    if headers.is_empty() {
        rb
    } else {
        rb.headers(headers)
    }
}

/// The same for a request's own headers.
pub fn propagate_headers(headers: &mut HeaderMap) {
    let Some(span) = Scope::current_span() else {
        return;
    };
    if let Ok(v) = HeaderValue::try_from(span.traceparent()) {
        headers.insert("traceparent", v);
    }
    if let Some(v) = span
        .state
        .as_deref()
        .and_then(|s| HeaderValue::try_from(s).ok())
    {
        headers.insert("tracestate", v);
    }
}

/// The span of an upstream attempt (`number`, from 1) at `model` through
/// `conn`, under the current span; `None` when not traced.
pub(crate) fn attempt_span(
    ctx: &crate::ExecContext,
    kind: crate::kinds::Kind,
    conn: &crate::upstream::http::Conn,
    model: &str,
    chat: Option<&crate::chat::ChatInput>,
    number: u32,
) -> Option<ActiveSpan> {
    let tracer = ctx.tracer()?;
    let operation = crate::kinds::operation_name(kind.as_str());
    let mut span = tracer.in_current(
        format!("{operation} {model}"),
        taskgate_core::trace::SpanKind::Client,
    );
    if span.is_recording() {
        span.set("gen_ai.operation.name", operation);
        span.set(
            "gen_ai.provider.name",
            provider_name(conn.protocol, &conn.name),
        );
        span.set("gen_ai.request.model", model);
        if let Some(n) = chat.and_then(|c| c.max_tokens) {
            span.set("gen_ai.request.max_tokens", n);
        }
        if let Ok(url) = reqwest::Url::parse(&conn.base_url) {
            if let Some(host) = url.host_str() {
                span.set("server.address", host);
            }
            if let Some(port) = url.port_or_known_default() {
                span.set("server.port", port);
            }
        }
        span.set("taskgate.attempt", number);
    }
    Some(span)
}

/// Ends a successful attempt's span.
pub(crate) fn attempt_succeeded(
    span: Option<ActiveSpan>,
    x: &crate::Execution,
    response_id: Option<String>,
) {
    let Some(mut span) = span else { return };
    if let Some(id) = response_id {
        span.set("gen_ai.response.id", id);
    }
    response(&mut span, &x.output);
    usage(&mut span, &x.usage);
    span.end();
}

/// Ends a failed attempt's span: `error.type` is the failure's code.
pub(crate) fn attempt_failed(span: Option<ActiveSpan>, code: &str, http_status: Option<u16>) {
    let Some(mut span) = span else { return };
    if let Some(status) = http_status {
        span.set("http.response.status_code", status);
    }
    span.set("error.type", code);
    span.fail(code.to_owned());
    span.end();
}

/// Notes `v[key]`, the upstream's id of its answer, for the attempt's span
/// (nothing is looked up when not traced).
pub(crate) fn note_response_id(ctx: &mut crate::ExecContext, v: &Value, key: &str) {
    if ctx.tracer().is_some()
        && let Some(id) = v.get(key).and_then(Value::as_str)
    {
        ctx.response_id(id);
    }
}
