//! POST /openai/v1/chat/completions: a `chat` task, answered as a
//! `chat.completion`, or with `"stream": true` as `chat.completion.chunk`
//! server-sent events ending with `data: [DONE]`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use taskgate_core::TaskStatus;
use taskgate_providers::kinds::Kind;
use taskgate_store::TaskRecord;

use super::request::ChatRequest;
use super::{
    OpenAiError, call_body, model_entry, output_of, start_call, task_answer, task_header,
    unix_seconds, until_end,
};
use crate::auth::{Auth, TasksWrite};
use crate::body::JsonObject;
use crate::envelope::Raw;
use crate::executor::Told;
use crate::service::calls::Started;
use crate::service::stream::{Reader, StreamEvent};
use crate::service::tasks::CancelOnDrop;
use crate::state::AppState;

pub(super) async fn completions(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    body: JsonObject,
) -> Result<Response, OpenAiError> {
    let request = ChatRequest::parse(body.map)?;
    model_entry(&app, &principal, &request.model, Kind::Chat)?;
    let call = call_body(
        &request.model,
        request.input,
        request.metadata,
        request.extras,
    );
    // A stream tells of the task at once (its id is in every chunk).
    let told = if request.stream {
        Told::AtOnce
    } else {
        Told::AtEnd
    };
    // A stream takes one of the key's stream slots before its task exists:
    // a key at its cap is refused without a task.
    let slot = if request.stream {
        Some(app.stream_slots.open(principal.key_id)?)
    } else {
        None
    };
    let started = start_call(&app, &principal, call, told).await?;
    let Some(slot) = slot else {
        let task = until_end(&app, &principal, started).await?;
        return Ok(completion(&task, &request.model));
    };
    let mut guard = CancelOnDrop::new(&app, &principal, started.task.id);

    let Started { task, done, .. } = started;
    let mut reader = Reader::follow(&app, principal, task.clone(), done, slot);
    // The first event decides the status: a task that failed before any
    // output is an error answer, not a stream.
    let first = reader.next().await;
    if let Some(StreamEvent::Done(t)) = &first
        && t.status != TaskStatus::Succeeded
    {
        guard.disarm();
        return Err(OpenAiError::of_task(t));
    }
    let chunks = Chunks {
        id: task.id.to_string(),
        created: unix_seconds(&task),
        model: request.model,
        include_usage: request.include_usage,
        sent_role: false,
        sent_text: false,
        sent_reasoning: false,
        sent_calls: false,
        ended: false,
        first,
        reader,
        max_seconds: app.stream_slots.lifetime().as_secs(),
        guard,
    };
    let body = Body::from_stream(futures_util::stream::unfold(chunks, |mut c| async move {
        c.next().await.map(|b| (Ok::<_, Infallible>(b), c))
    }));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.extend(task_header(task.id));
    response.extensions_mut().insert(Raw);
    Ok(response)
}

/// A finished chat task as a `chat.completion`.
fn completion(task: &TaskRecord, model: &str) -> Response {
    let output = output_of(task);
    let text = output.get("text").and_then(Value::as_str).unwrap_or("");
    let calls = tool_calls(&output);
    let mut message = json!({
        "role": "assistant",
        // OpenAI's `null` content of an answer that only calls tools.
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if let Some(r) = output.get("reasoning").filter(|r| r.is_string()) {
        message["reasoning_content"] = r.clone();
    }
    // Taskgate's own field: sent back in the assistant message, it carries
    // a provider's signed reasoning into the next turn.
    if let Some(d) = output.get("reasoning_details").filter(|d| d.is_array()) {
        message["reasoning_details"] = d.clone();
    }
    task_answer(
        task,
        json!({
            "id": task.id,
            "object": "chat.completion",
            "created": unix_seconds(task),
            "model": model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason(&output),
            }],
            "usage": usage(task),
            "system_fingerprint": null,
        }),
    )
}

/// The output's tool calls in OpenAI's shape, their arguments a JSON string.
fn tool_calls(output: &Map<String, Value>) -> Vec<Value> {
    let Some(Value::Array(calls)) = output.get("tool_calls") else {
        return Vec::new();
    };
    calls
        .iter()
        .map(|c| {
            json!({
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c.get("arguments").map_or_else(|| "{}".to_owned(), Value::to_string),
                },
            })
        })
        .collect()
}

/// OpenAI's finish reasons: the kind's `other` is `stop`.
fn finish_reason(output: &Map<String, Value>) -> &str {
    match output.get("finish_reason").and_then(Value::as_str) {
        Some(r @ ("length" | "content_filter" | "tool_calls")) => r,
        _ => "stop",
    }
}

/// OpenAI's usage object: the details of the prompt's cached tokens and the
/// completion's reasoning tokens appear only where the task knows them (as
/// OpenAI leaves them out where it does not count them).
fn usage(task: &TaskRecord) -> Value {
    let prompt = task.input_tokens.unwrap_or(0);
    let completion = task.output_tokens.unwrap_or(0);
    let mut u = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if let Some(cached) = task.cached_input_tokens {
        u["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    if let Some(reasoning) = task.reasoning_tokens {
        u["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
    }
    u
}

/// The events of a streamed answer, as the task's output arrives.
struct Chunks {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
    sent_role: bool,
    /// Whether any text was sent: a task that streamed nothing (a provider
    /// without streaming) sends its whole text when it ends.
    sent_text: bool,
    sent_reasoning: bool,
    sent_calls: bool,
    ended: bool,
    first: Option<StreamEvent>,
    reader: Reader,
    /// `limits.stream_max_seconds`, for the message of an expired stream.
    max_seconds: u64,
    /// Cancels the task if the reader leaves before its end.
    guard: CancelOnDrop,
}

impl Chunks {
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        let event = match self.first.take() {
            Some(e) => e,
            None => match self.reader.next().await {
                Some(e) => e,
                None => {
                    // The follower stopped without the task's end (the
                    // store could not be read): say so rather than cut off.
                    self.ended = true;
                    let err = OpenAiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal_error",
                        format!("The stream of task {} was interrupted.", self.id),
                    );
                    return Some(data(&err.body()));
                }
            },
        };
        Some(match event {
            StreamEvent::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
            StreamEvent::Expired => {
                // The stream has lasted its most; the task goes on (its
                // reader is told where to find its result), so it is not
                // cancelled as when a reader leaves.
                self.ended = true;
                self.guard.disarm();
                let err = OpenAiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "stream_expired",
                    format!(
                        "The stream reached its maximum duration of {} s. Task {} goes on; \
                         read its result at /api/v1/tasks/{}.",
                        self.max_seconds, self.id, self.id
                    ),
                );
                data(&err.body())
            }
            StreamEvent::Delta(text) => {
                self.sent_text = true;
                self.delta(&text)
            }
            // OpenAI's format has no place for a provider's signatures.
            StreamEvent::ReasoningSignature(_) | StreamEvent::RedactedReasoning(_) => Bytes::new(),
            StreamEvent::Reasoning(text) => {
                self.sent_reasoning = true;
                self.piece(json!({"reasoning_content": text}))
            }
            // OpenAI's fragments: the first of a call has its id, type and
            // name; every one a piece of the arguments' JSON text.
            StreamEvent::ToolCall {
                index,
                id,
                name,
                arguments_delta,
            } => {
                self.sent_calls = true;
                let mut call = json!({"index": index, "function": {"arguments": arguments_delta}});
                if let Some(id) = id {
                    call["id"] = json!(id);
                    call["type"] = json!("function");
                }
                if let Some(name) = name {
                    call["function"]["name"] = json!(name);
                }
                self.piece(json!({"tool_calls": [call]}))
            }
            StreamEvent::Done(task) => {
                self.ended = true;
                self.guard.disarm();
                if task.status != TaskStatus::Succeeded {
                    return Some(data(&OpenAiError::of_task(&task).body()));
                }
                let output = output_of(&task);
                let mut out = Vec::new();
                // A task that streamed none of its pieces (a provider without
                // streaming) sends them whole: each call one chunk of its own
                // index, as OpenAI's first fragment of a call is.
                if !self.sent_reasoning
                    && let Some(r) = output.get("reasoning").and_then(Value::as_str)
                {
                    out.extend_from_slice(&self.piece(json!({"reasoning_content": r})));
                }
                let calls = if self.sent_calls {
                    Vec::new()
                } else {
                    tool_calls(&output)
                };
                if !self.sent_text {
                    let text = output.get("text").and_then(Value::as_str).unwrap_or("");
                    if !text.is_empty() || calls.is_empty() {
                        out.extend_from_slice(&self.delta(text));
                    }
                }
                for (index, mut call) in calls.into_iter().enumerate() {
                    call["index"] = json!(index);
                    out.extend_from_slice(&self.piece(json!({"tool_calls": [call]})));
                }
                // The provider's signed reasoning, whole, in the last delta
                // (its pieces have no place in OpenAI's chunks), for the
                // client to send back on the assistant message.
                if let Some(d) = output.get("reasoning_details").filter(|d| d.is_array()) {
                    out.extend_from_slice(&self.piece(json!({"reasoning_details": d})));
                }
                let last = json!([{
                    "index": 0,
                    "delta": {},
                    "logprobs": null,
                    "finish_reason": finish_reason(&output),
                }]);
                out.extend_from_slice(&self.chunk(last, Value::Null));
                if self.include_usage {
                    out.extend_from_slice(&self.chunk(json!([]), usage(&task)));
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
                Bytes::from(out)
            }
        })
    }

    fn delta(&mut self, text: &str) -> Bytes {
        let delta = if self.sent_role {
            json!({"content": text})
        } else {
            self.sent_role = true;
            json!({"role": "assistant", "content": text, "refusal": null})
        };
        self.chunk(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    }

    /// A delta of other than text (the role sent first if not yet).
    fn piece(&mut self, mut delta: Value) -> Bytes {
        if !self.sent_role {
            self.sent_role = true;
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
        }
        self.chunk(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    }

    fn chunk(&self, choices: Value, usage: Value) -> Bytes {
        let mut c = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
        });
        if self.include_usage {
            c["usage"] = usage;
        }
        data(&c)
    }
}

fn data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}
