//! The OpenAI REST API and everything compatible with it (Azure OpenAI,
//! Groq, Together, Mistral, DeepSeek, Fireworks, OpenRouter, vLLM, Ollama,
//! LM Studio): chat completions (streamed), embeddings, image generations,
//! audio transcriptions and moderations.

use async_trait::async_trait;
use base64::Engine;
use reqwest::Method;
use serde_json::{Map, Value, json};
use taskgate_core::task::error_code;

use super::http::{Conn, UpstreamError, is_json, merge_options, read_sse};
use super::{Adapter, Call};
use crate::chat::ChatInput;
use crate::kinds::Kind;
use crate::{Execution, Unsupported, Usage};

mod chat;

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub(crate) struct OpenAi {
    conn: Conn,
}

impl OpenAi {
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }

    async fn chat(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let Some(input) = call.chat else {
            return Err(UpstreamError::invalid("The chat input was not parsed."));
        };
        let stream = self.conn.stream;
        let mut body = chat::request_body(input, call.model, stream);
        merge_options(&mut body, input.options.clone().map(Value::Object).as_ref());
        let rb = self.conn.json(Method::POST, "/chat/completions", body);
        if !stream {
            let v = self.conn.send_json(rb).await?;
            crate::trace::note_response_id(call.ctx, &v, "id");
            return chat::answer(&v, input, call.model);
        }
        let resp = self.conn.send(rb).await?;
        // Some OpenAI-compatible servers ignore `stream` and answer whole:
        // read by what the answer says it is, and hand it to stream readers
        // in one go.
        if is_json(&resp) {
            let v = self.conn.read_json(resp).await?;
            crate::trace::note_response_id(call.ctx, &v, "id");
            let x = chat::answer(&v, input, call.model)?;
            chat::replay(&x, call.ctx);
            return Ok(x);
        }
        let mut answer = chat::Streamed::default();
        let mut done = false;
        let ctx = &mut *call.ctx;
        read_sse(&self.conn, resp, |event| {
            if event.data.trim() == "[DONE]" {
                done = true;
                return Ok(false);
            }
            let chunk: Value = serde_json::from_str(&event.data).map_err(|_| {
                UpstreamError::invalid("The provider streamed a chunk that is not JSON.")
            })?;
            if let Some(message) = chunk
                .get("error")
                .and_then(|_| super::http::error_message(&chunk))
            {
                return Err(self.conn.stream_error(&message));
            }
            crate::trace::note_response_id(ctx, &chunk, "id");
            answer.absorb(&chunk, ctx);
            Ok(true)
        })
        .await?;
        if !done && !answer.finished() {
            return Err(UpstreamError::invalid(
                "The provider's stream ended before the reply was complete.",
            ));
        }
        answer.finish(input, call.model)
    }

    async fn embedding(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let mut body = json!({
            "model": call.model,
            "input": call.input["input"],
            "encoding_format": "float",
        });
        copy_fields(call.input, &mut body, &["dimensions"]);
        merge_options(&mut body, call.options());
        let v = self
            .conn
            .send_json(self.conn.json(Method::POST, "/embeddings", body))
            .await?;
        let mut items: Vec<(i64, Value)> = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| UpstreamError::invalid("The embeddings answer has no `data`."))?
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let index = d.get("index").and_then(Value::as_i64).unwrap_or(i as i64);
                (index, d.get("embedding").cloned().unwrap_or(Value::Null))
            })
            .collect();
        items.sort_by_key(|(i, _)| *i);
        let embeddings: Vec<Value> = items.into_iter().map(|(_, e)| e).collect();
        if embeddings.iter().any(|e| !e.is_array()) {
            return Err(UpstreamError::invalid(
                "The embeddings answer is not a list of float vectors (base64 is not supported).",
            ));
        }
        let dimensions = embeddings
            .first()
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let mut usage = v.get("usage").map(token_usage).unwrap_or_default();
        usage.output_tokens = None;
        Ok(Execution {
            output: json!({
                "embeddings": embeddings,
                "dimensions": dimensions,
                "model": model_of(&v, call.model),
            }),
            usage,
        })
    }

    async fn image(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let mut body = json!({ "model": call.model, "prompt": call.input["prompt"] });
        copy_fields(call.input, &mut body, &["n", "size"]);
        merge_options(&mut body, call.options());
        let v = self
            .conn
            .send_json(self.conn.json(Method::POST, "/images/generations", body))
            .await?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| UpstreamError::invalid("The images answer has no `data`."))?;
        let images: Vec<Value> = data
            .iter()
            .map(|d| {
                let mut out = Map::new();
                for k in ["url", "b64_json", "revised_prompt"] {
                    if let Some(s) = d.get(k).and_then(Value::as_str) {
                        out.insert(k.to_owned(), json!(s));
                    }
                }
                Value::Object(out)
            })
            .collect();
        let mut usage = v.get("usage").map(token_usage).unwrap_or_default();
        usage.units = images.len() as i64;
        Ok(Execution {
            output: json!({ "images": images, "model": model_of(&v, call.model) }),
            usage,
        })
    }

    async fn transcription(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let input = call.input;
        let (audio, name_from_url) = match input.get("audio_url").and_then(Value::as_str) {
            Some(url) => call.fetcher.fetch(url).await?,
            None => {
                let b64 = input
                    .get("audio_base64")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|_| {
                        UpstreamError::fatal(
                            error_code::UPSTREAM_ERROR,
                            "input.audio_base64 is not valid base64.",
                        )
                    })?;
                (bytes.into(), None)
            }
        };
        let filename = input
            .get("filename")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(name_from_url)
            .unwrap_or_else(|| "audio.mp3".to_owned());
        let part = reqwest::multipart::Part::bytes(audio.to_vec()).file_name(filename);
        let mut form = reqwest::multipart::Form::new()
            .part("file", part)
            .text("model", call.model.to_owned())
            .text("response_format", "json");
        for k in ["language", "prompt"] {
            if let Some(s) = input.get(k).and_then(Value::as_str) {
                form = form.text(k, s.to_owned());
            }
        }
        if let Some(Value::Object(options)) = call.options() {
            for (k, v) in options {
                if matches!(k.as_str(), "file" | "model" | "language" | "prompt") {
                    continue;
                }
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                form = form.text(k.clone(), text);
            }
        }
        let v = self
            .conn
            .send_json(
                self.conn
                    .request(Method::POST, "/audio/transcriptions")
                    .multipart(self.conn.form(form)),
            )
            .await?;
        let text = v
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| UpstreamError::invalid("The transcription answer has no `text`."))?;
        let mut output = json!({ "text": text, "model": model_of(&v, call.model) });
        if let Some(l) = v.get("language").and_then(Value::as_str) {
            output["language"] = json!(l);
        }
        if let Some(d) = v
            .get("duration")
            .and_then(Value::as_f64)
            .filter(|d| *d >= 0.0)
        {
            output["duration_s"] = json!(d);
        }
        let mut usage = v
            .get("usage")
            .filter(|u| u.get("input_tokens").is_some())
            .map(token_usage)
            .unwrap_or_default();
        usage.units = 1;
        Ok(Execution { output, usage })
    }

    async fn moderation(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        let mut body = json!({ "model": call.model, "input": call.input["text"] });
        merge_options(&mut body, call.options());
        let v = self
            .conn
            .send_json(self.conn.json(Method::POST, "/moderations", body))
            .await?;
        let result = v
            .pointer("/results/0")
            .ok_or_else(|| UpstreamError::invalid("The moderation answer has no `results`."))?;
        let flagged = result
            .get("flagged")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let flags = result.get("categories").and_then(Value::as_object);
        let mut labels: Vec<(String, f64, bool)> = result
            .get("category_scores")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, s)| {
                        let on = flags
                            .and_then(|f| f.get(k))
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        s.as_f64().map(|s| (k.clone(), s.clamp(0.0, 1.0), on))
                    })
                    .collect()
            })
            .unwrap_or_default();
        labels.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let top = labels.iter().find(|l| l.2).or(labels.first());
        let (label, score) = match top {
            Some((l, s, _)) if flagged => (l.clone(), *s),
            _ => ("safe".to_owned(), 1.0 - labels.first().map_or(0.0, |l| l.1)),
        };
        Ok(Execution {
            output: json!({
                "label": label,
                "score": score,
                "labels": labels.iter().map(|(l, s, _)| json!({"label": l, "score": s})).collect::<Vec<_>>(),
                "flagged": flagged,
                "model": model_of(&v, call.model),
            }),
            usage: Usage {
                units: 1,
                ..Usage::default()
            },
        })
    }
}

#[async_trait]
impl Adapter for OpenAi {
    fn conn(&self) -> &Conn {
        &self.conn
    }

    fn supports(&self, _kind: Kind) -> bool {
        true
    }

    fn unsupported(&self, input: &ChatInput) -> Option<Unsupported> {
        chat::unsupported(&self.conn.name, input)
    }

    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        match call.kind {
            Kind::Chat => self.chat(call).await,
            Kind::Embedding => self.embedding(call).await,
            Kind::ImageGeneration => self.image(call).await,
            Kind::Transcription => self.transcription(call).await,
            Kind::Classification => self.moderation(call).await,
        }
    }
}

/// `usage` in OpenAI's shapes: `prompt_tokens`/`completion_tokens` (chat,
/// embeddings) or `input_tokens`/`output_tokens` (images, audio). The
/// prompt's count includes its cached part (`prompt_tokens_details.
/// cached_tokens`) and the completion's its reasoning
/// (`completion_tokens_details.reasoning_tokens`), as Taskgate counts them.
pub(crate) fn token_usage(u: &Value) -> Usage {
    let count = |v: Option<&Value>| v.and_then(Value::as_i64).filter(|n| *n >= 0);
    let get = |a: &str, b: &str| count(u.get(a).or_else(|| u.get(b)));
    Usage {
        units: 1,
        input_tokens: get("prompt_tokens", "input_tokens"),
        output_tokens: get("completion_tokens", "output_tokens"),
        // `get` twice, not `pointer`, which splits and unescapes its path
        // each time (about 1.2k instructions a lookup, on every call).
        reasoning_tokens: count(
            u.get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
        cached_input_tokens: count(
            u.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
    }
}

pub(crate) fn model_of(v: &Value, requested: &str) -> String {
    v.get("model")
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_owned()
}

fn copy_fields(from: &Value, to: &mut Value, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            to[*k] = v.clone();
        }
    }
}
