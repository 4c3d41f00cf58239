//! Google's Gemini API (Generative Language API): `generateContent`
//! (streamed with `streamGenerateContent?alt=sse`), `embedContent` and
//! `batchEmbedContents`.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Map, Value, json};
use taskgate_core::task::error_code;

use super::http::{Conn, UpstreamError, error_message, merge_options, read_sse, split_system};
use super::{Adapter, Call};
use crate::kinds::Kind;
use crate::{Execution, Usage};

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
        let body = chat_body(call.input, call.options());
        let model = call.model;
        if !conn.stream {
            let path = format!("/v1beta/models/{}:generateContent", segment(model));
            let v = conn.send_json(conn.json(Method::POST, &path, body)).await?;
            let mut answer = Answer::default();
            answer.absorb(&v, &mut |_| {});
            return answer.finish(model);
        }
        let path = format!("/v1beta/models/{}:streamGenerateContent", segment(model));
        let rb = conn
            .json(Method::POST, &path, body)
            .query(&[("alt", "sse")]);
        let resp = conn.send(rb).await?;
        let mut answer = Answer::default();
        let ctx = &mut *call.ctx;
        read_sse(conn, resp, |event| {
            let chunk: Value = serde_json::from_str(&event.data).map_err(|_| {
                UpstreamError::invalid("The provider streamed a chunk that is not JSON.")
            })?;
            if chunk.get("error").is_some() {
                let message = error_message(&chunk).unwrap_or_else(|| "unknown error".to_owned());
                return Err(conn.stream_error(&message));
            }
            answer.absorb(&chunk, &mut |t| ctx.delta(t));
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
        answer.finish(model)
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

/// The `generateContent` request: system messages become
/// `systemInstruction`, assistant turns are the `model` role.
fn chat_body(input: &Value, options: Option<&Value>) -> Value {
    let (system, turns) = split_system(input);
    let contents: Vec<Value> = turns
        .into_iter()
        .map(|m| {
            let role = if m["role"] == "assistant" {
                "model"
            } else {
                "user"
            };
            json!({ "role": role, "parts": [{ "text": m["content"] }] })
        })
        .collect();
    let mut body = json!({ "contents": contents });
    if let Some(system) = system {
        body["systemInstruction"] = json!({ "parts": [{ "text": system }] });
    }
    let mut config = Map::new();
    for (from, to) in [
        ("max_tokens", "maxOutputTokens"),
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("stop", "stopSequences"),
    ] {
        if let Some(v) = input.get(from) {
            config.insert(to.to_owned(), v.clone());
        }
    }
    if !config.is_empty() {
        body["generationConfig"] = Value::Object(config);
    }
    merge_options(&mut body, options);
    body
}

/// What the chunks of an answer (or the one answer) add up to.
#[derive(Default)]
struct Answer {
    text: String,
    /// Whether any chunk had a candidate.
    candidates: bool,
    finish: Option<String>,
    /// The prompt itself was blocked: there is no candidate.
    blocked: bool,
    usage: Option<Value>,
    model: Option<String>,
}

impl Answer {
    fn absorb(&mut self, chunk: &Value, on_text: &mut dyn FnMut(&str)) {
        if let Some(candidate) = chunk.pointer("/candidates/0") {
            self.candidates = true;
            let parts = candidate
                .pointer("/content/parts")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            for p in parts {
                // Thought summaries are not the reply.
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    self.text.push_str(t);
                    on_text(t);
                }
            }
            if let Some(f) = candidate.get("finishReason").and_then(Value::as_str) {
                self.finish = Some(f.to_owned());
            }
        }
        if chunk.pointer("/promptFeedback/blockReason").is_some() {
            self.blocked = true;
        }
        // Each chunk's counts are the totals so far: the last one wins.
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        if let Some(m) = chunk.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(m.to_owned());
        }
    }

    fn finish(self, model: &str) -> Result<Execution, UpstreamError> {
        if !self.candidates && !self.blocked {
            return Err(UpstreamError::invalid("The answer has no `candidates`."));
        }
        let finish_reason = if self.blocked && !self.candidates {
            "content_filter"
        } else {
            finish_reason(self.finish.as_deref())
        };
        let u = self.usage.unwrap_or(Value::Null);
        let n = |k: &str| u.get(k).and_then(Value::as_i64).filter(|n| *n >= 0);
        // Google bills thinking tokens as output.
        let output = match (n("candidatesTokenCount"), n("thoughtsTokenCount")) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Ok(Execution {
            output: json!({
                "text": self.text,
                "finish_reason": finish_reason,
                "model": self.model.unwrap_or_else(|| model.to_owned()),
            }),
            usage: Usage {
                units: 1,
                input_tokens: n("promptTokenCount"),
                output_tokens: output,
                ..Usage::default()
            },
        })
    }
}

fn finish_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("STOP") | None => "stop",
        Some("MAX_TOKENS") => "length",
        Some(
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY",
        ) => "content_filter",
        Some(_) => "other",
    }
}

#[cfg(test)]
mod tests;
