//! Google's Gemini API (Generative Language API): `generateContent`
//! (streamed with `streamGenerateContent?alt=sse`), `embedContent` and
//! `batchEmbedContents`.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};
use taskgate_core::task::error_code;

use super::http::{Conn, UpstreamError, error_message, merge_options, read_sse};
use super::{Adapter, Call};
use crate::chat::ChatInput;
use crate::kinds::Kind;
use crate::{Execution, Unsupported, Usage};

mod chat;

pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

pub(crate) struct Gemini {
    conn: Conn,
}

impl Gemini {
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }

    async fn chat(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let conn = &self.conn;
        let Some(input) = call.chat else {
            return Err(UpstreamError::invalid("The chat input was not parsed."));
        };
        let mut body = chat::request_body(input);
        merge_options(&mut body, input.options.clone().map(Value::Object).as_ref());
        let model = call.model;
        if !conn.stream {
            let path = format!("/v1beta/models/{}:generateContent", segment(model));
            let v = conn.send_json(conn.json(Method::POST, &path, body)).await?;
            crate::trace::note_response_id(call.ctx, &v, "responseId");
            let mut answer = chat::Answer::default();
            answer.absorb(&v, None);
            return answer.finish(input, model);
        }
        let path = format!(
            "/v1beta/models/{}:streamGenerateContent?alt=sse",
            segment(model)
        );
        let resp = conn.send(conn.json(Method::POST, &path, body)).await?;
        let mut answer = chat::Answer::default();
        let ctx = &mut *call.ctx;
        read_sse(conn, resp, |event| {
            let chunk: Value = serde_json::from_str(&event.data).map_err(|_| {
                UpstreamError::invalid("The provider streamed a chunk that is not JSON.")
            })?;
            if chunk.get("error").is_some() {
                let message = error_message(&chunk).unwrap_or_else(|| "unknown error".to_owned());
                return Err(conn.stream_error(&message));
            }
            crate::trace::note_response_id(ctx, &chunk, "responseId");
            answer.absorb(&chunk, Some(&mut *ctx));
            Ok(true)
        })
        .await?;
        // The last chunk carries the finish reason: without it the reply was
        // cut off.
        if answer.finish.is_none() && !answer.blocked {
            return Err(UpstreamError::invalid(
                "The provider's stream ended before the reply was complete.",
            ));
        }
        answer.finish(input, model)
    }

    async fn embedding(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let conn = &self.conn;
        let model = call.model;
        let name = format!("models/{}", model.trim_start_matches("models/"));
        // The client's options (`taskType`, `title`…) are fields of each
        // text's request, in a batch as well.
        let request = |text: &Value| {
            let mut r = json!({ "model": name, "content": { "parts": [{ "text": text }] } });
            if let Some(d) = call.input.get("dimensions").filter(|d| !d.is_null()) {
                r["outputDimensionality"] = d.clone();
            }
            merge_options(&mut r, call.options());
            r
        };
        let (path, body, expected) = match &call.input["input"] {
            Value::Array(texts) => (
                format!("/v1beta/models/{}:batchEmbedContents", segment(model)),
                json!({ "requests": texts.iter().map(request).collect::<Vec<_>>() }),
                texts.len(),
            ),
            text => (
                format!("/v1beta/models/{}:embedContent", segment(model)),
                request(text),
                1,
            ),
        };
        let v = conn.send_json(conn.json(Method::POST, &path, body)).await?;
        let vectors: Vec<Value> = match v.get("embeddings").and_then(Value::as_array) {
            Some(list) => list
                .iter()
                .map(|e| e.get("values").cloned().unwrap_or(Value::Null))
                .collect(),
            None => v
                .pointer("/embedding/values")
                .cloned()
                .into_iter()
                .collect(),
        };
        if vectors.len() != expected || vectors.iter().any(|e| !e.is_array()) {
            return Err(UpstreamError::invalid(format!(
                "The embedding answer has {} vectors for {expected} texts.",
                vectors.iter().filter(|e| e.is_array()).count()
            )));
        }
        let dimensions = vectors[0].as_array().map_or(0, Vec::len);
        Ok(Execution {
            output: json!({ "embeddings": vectors, "dimensions": dimensions, "model": model }),
            // Gemini reports no token counts for embeddings.
            usage: Usage {
                units: 1,
                ..Usage::default()
            },
        })
    }
}

#[async_trait]
impl Adapter for Gemini {
    fn conn(&self) -> &Conn {
        &self.conn
    }

    fn supports(&self, kind: Kind) -> bool {
        matches!(kind, Kind::Chat | Kind::Embedding)
    }

    fn unsupported(&self, input: &ChatInput) -> Option<Unsupported> {
        chat::unsupported(&self.conn.name, input)
    }

    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        match call.kind {
            Kind::Chat => self.chat(call).await,
            Kind::Embedding => self.embedding(call).await,
            other => Err(UpstreamError::fatal(
                error_code::INTERNAL_ERROR,
                format!("Gemini does not serve {}", other.as_str()),
            )),
        }
    }
}

/// A model name as one path segment (`models/` prefixes are dropped).
fn segment(model: &str) -> String {
    model.trim_start_matches("models/").replace('/', "%2F")
}

#[cfg(test)]
mod tests;
