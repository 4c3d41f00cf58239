//! Anthropic's Messages API (`POST /v1/messages`), streamed or not.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::Value;

use super::http::{Conn, UpstreamError, error_message, merge_options, read_sse};
use super::{Adapter, Call};
use crate::chat::ChatInput;
use crate::kinds::Kind;
use crate::{Execution, Unsupported};

mod chat;

/// The SDK's `ANTHROPIC_BASE_URL` is the host; the version is in the path.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";

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

    fn unsupported(&self, input: &ChatInput) -> Option<Unsupported> {
        chat::unsupported(&self.conn.name, input)
    }

    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let conn = &self.conn;
        let Some(input) = call.chat else {
            return Err(UpstreamError::invalid("The chat input was not parsed."));
        };
        let mut body = chat::request_body(input, call.model, conn.stream);
        merge_options(&mut body, input.options.clone().map(Value::Object).as_ref());
        let rb = conn
            .json(Method::POST, "/v1/messages", body)
            .header("anthropic-version", API_VERSION);
        if !conn.stream {
            let v = conn.send_json(rb).await?;
            crate::trace::note_response_id(call.ctx, &v, "id");
            return chat::Reply::new(input).message(&v, call.model);
        }
        let resp = conn.send(rb).await?;
        let mut reply = chat::Reply::new(input);
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
            let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
            match kind {
                "message_start" => {
                    let m = &data["message"];
                    crate::trace::note_response_id(ctx, m, "id");
                    reply.model = m.get("model").and_then(Value::as_str).map(str::to_owned);
                    reply.counts.absorb(&m["usage"]);
                }
                "content_block_start" => reply.start(index, &data["content_block"], &mut Some(ctx)),
                "content_block_delta" => reply.delta(index, &data["delta"], ctx),
                "message_delta" => reply.message_delta(&data),
                "message_stop" => {
                    complete = true;
                    return Ok(false);
                }
                "error" => {
                    let message =
                        error_message(&data).unwrap_or_else(|| "unknown error".to_owned());
                    return Err(conn.stream_error(&message));
                }
                _ => {} // ping, content_block_stop
            }
            Ok(true)
        })
        .await?;
        if !complete {
            return Err(UpstreamError::invalid(
                "The provider's stream ended before the message was complete.",
            ));
        }
        reply.finish(call.model)
    }
}

#[cfg(test)]
mod tests;
