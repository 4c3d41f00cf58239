//! Anthropic's Messages API (`POST /v1/messages`), streamed or not.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};

use super::http::{Conn, UpstreamError, error_message, merge_options, read_sse, split_system};
use super::{Adapter, Call};
use crate::kinds::Kind;
use crate::{Execution, Usage};

/// The SDK's `ANTHROPIC_BASE_URL` is the host; the version is in the path.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; this is used when the input has none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

pub(crate) struct Anthropic {
    conn: Conn,
}

impl Anthropic {
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }
}

#[async_trait]
impl Adapter for Anthropic {
    fn conn(&self) -> &Conn {
        &self.conn
    }

    fn supports(&self, kind: Kind) -> bool {
        kind == Kind::Chat
    }

    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let conn = &self.conn;
        let body = request_body(call.input, call.model, conn.stream, call.options());
        let rb = conn
            .json(Method::POST, "/v1/messages", body)
            .header("anthropic-version", API_VERSION);
        if !conn.stream {
            let v = conn.send_json(rb).await?;
            return message_result(&v, call.model);
        }
        let resp = conn.send(rb).await?;
        let mut text = String::new();
        let mut stop: Option<String> = None;
        let mut model: Option<String> = None;
        let mut usage = Usage {
            units: 1,
            ..Usage::default()
        };
        let mut complete = false;
        let ctx = &mut *call.ctx;
        read_sse(conn, resp, |event| {
            let data: Value = serde_json::from_str(&event.data).map_err(|_| {
                UpstreamError::invalid("The provider streamed an event that is not JSON.")
            })?;
            let kind = data
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or(&event.event);
            match kind {
                "message_start" => {
                    let m = &data["message"];
                    model = m.get("model").and_then(Value::as_str).map(str::to_owned);
                    usage.input_tokens = count(&m["usage"], "input_tokens");
                    usage.output_tokens = count(&m["usage"], "output_tokens");
                }
                "content_block_delta" => {
                    // Only text is the reply: thinking, signatures and tool
                    // input JSON are not.
                    if data.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta")
                        && let Some(t) = data.pointer("/delta/text").and_then(Value::as_str)
                    {
                        text.push_str(t);
                        ctx.delta(t);
                    }
                }
                "message_delta" => {
                    if let Some(s) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                        stop = Some(s.to_owned());
                    }
                    // These counts are cumulative: the last one is the total.
                    if let Some(n) = count(&data["usage"], "output_tokens") {
                        usage.output_tokens = Some(n);
                    }
                    if let Some(n) = count(&data["usage"], "input_tokens") {
                        usage.input_tokens = Some(n);
                    }
                }
                "message_stop" => {
                    complete = true;
                    return Ok(false);
                }
                "error" => {
                    let message =
                        error_message(&data).unwrap_or_else(|| "unknown error".to_owned());
                    return Err(conn.stream_error(&message));
                }
                _ => {} // ping, content_block_start, content_block_stop, other deltas
            }
            Ok(true)
        })
        .await?;
        if !complete {
            return Err(UpstreamError::invalid(
                "The provider's stream ended before the message was complete.",
            ));
        }
        Ok(Execution {
            output: json!({
                "text": text,
                "finish_reason": finish_reason(stop.as_deref()),
                "model": model.unwrap_or_else(|| call.model.to_owned()),
            }),
            usage,
        })
    }
}

/// The Messages request: system messages go to `system`, the rest stay in
/// order.
fn request_body(input: &Value, model: &str, stream: bool, options: Option<&Value>) -> Value {
    let (system, turns) = split_system(input);
    let turns: Vec<Value> = turns
        .into_iter()
        .map(|m| json!({ "role": m["role"], "content": m["content"] }))
        .collect();
    let max_tokens = input
        .get("max_tokens")
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or(json!(DEFAULT_MAX_TOKENS));
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": turns,
    });
    if let Some(system) = system {
        body["system"] = json!(system);
    }
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop", "stop_sequences"),
    ] {
        if let Some(v) = input.get(from).filter(|v| !v.is_null()) {
            body[to] = v.clone();
        }
    }
    // Set either way, so that `options` cannot change how the answer comes.
    body["stream"] = json!(stream);
    merge_options(&mut body, options);
    body
}

/// A non-streamed message.
fn message_result(v: &Value, model: &str) -> Result<Execution, UpstreamError> {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| UpstreamError::invalid("The message has no `content`."))?;
    let text: String = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    Ok(Execution {
        output: json!({
            "text": text,
            "finish_reason": finish_reason(v.get("stop_reason").and_then(Value::as_str)),
            "model": v.get("model").and_then(Value::as_str).unwrap_or(model),
        }),
        usage: Usage {
            units: 1,
            input_tokens: count(&v["usage"], "input_tokens"),
            output_tokens: count(&v["usage"], "output_tokens"),
            ..Usage::default()
        },
    })
}

fn count(usage: &Value, key: &str) -> Option<i64> {
    usage.get(key).and_then(Value::as_i64).filter(|n| *n >= 0)
}

fn finish_reason(stop: Option<&str>) -> &'static str {
    match stop {
        Some("end_turn" | "stop_sequence") | None => "stop",
        // The second: the model's context window, not `max_tokens`, ran out.
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        Some(_) => "other",
    }
}

#[cfg(test)]
mod tests;
