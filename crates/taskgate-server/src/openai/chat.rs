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

use super::{
    CancelOnDrop, OpenAiError, call_body, metadata_of, model_entry, model_of, output_of,
    start_call, task_answer, task_header, unix_seconds, until_end,
};
use crate::auth::{Auth, TasksWrite};
use crate::body::JsonObject;
use crate::envelope::Raw;
use crate::executor::Told;
use crate::service::calls::Started;
use crate::service::stream::{Reader, StreamEvent};
use crate::state::AppState;

/// Request fields whose answers a normalized `chat` task cannot carry:
/// refused unless absent, `null` or `false`.
const UNSUPPORTED: [(&str, &str); 9] = [
    ("tools", "Tool calling (`tools`)"),
    ("tool_choice", "`tool_choice`"),
    ("functions", "Function calling (`functions`)"),
    ("function_call", "`function_call`"),
    ("logprobs", "`logprobs`"),
    ("top_logprobs", "`top_logprobs`"),
    ("audio", "Audio output (`audio`)"),
    ("modalities", "`modalities`"),
    ("prediction", "`prediction`"),
];

/// Request fields that concern OpenAI's own service, not the model's answer.
const DROPPED: [&str; 3] = ["user", "store", "parallel_tool_calls"];

/// A chat completion request, as the task's input and how to answer it.
struct ChatRequest {
    model: String,
    input: Map<String, Value>,
    metadata: Value,
    sandbox: Option<Value>,
    stream: bool,
    include_usage: bool,
}

impl ChatRequest {
    fn parse(mut body: Map<String, Value>) -> Result<Self, OpenAiError> {
        let model = model_of(&mut body)?;
        let metadata = metadata_of(&mut body);
        let sandbox = body.remove("sandbox");
        for (field, what) in UNSUPPORTED {
            if body
                .remove(field)
                .is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false)))
            {
                return Err(OpenAiError::unsupported(field, what));
            }
        }
        for field in DROPPED {
            body.remove(field);
        }
        let stream = match body.remove("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(OpenAiError::invalid("stream", "stream must be a boolean.")),
        };
        let include_usage = match body.remove("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => o.get("include_usage") == Some(&Value::Bool(true)),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "stream_options",
                    "stream_options must be an object.",
                ));
            }
        };
        match body.remove("n") {
            None | Some(Value::Null) => {}
            Some(n) if n.as_f64() == Some(1.0) => {}
            Some(_) => return Err(OpenAiError::unsupported("n", "More than one choice (`n`)")),
        }
        let mut input = Map::new();
        let messages = match body.remove("messages") {
            Some(Value::Array(ms)) => ms
                .into_iter()
                .enumerate()
                .map(|(i, m)| message(i, m))
                .collect::<Result<Vec<Value>, _>>()?,
            None => return Err(OpenAiError::invalid("messages", "messages is required.")),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "messages",
                    "messages must be an array.",
                ));
            }
        };
        input.insert("messages".to_owned(), Value::Array(messages));
        // `max_completion_tokens` is the newer name of `max_tokens`.
        let max_completion = body.remove("max_completion_tokens");
        let max = body.remove("max_tokens");
        if let Some(v) = max_completion.or(max).filter(|v| !v.is_null()) {
            input.insert("max_tokens".to_owned(), v);
        }
        for field in ["temperature", "top_p"] {
            if let Some(v) = body.remove(field).filter(|v| !v.is_null()) {
                input.insert(field.to_owned(), v);
            }
        }
        match body.remove("stop") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                input.insert("stop".to_owned(), json!([s]));
            }
            Some(v) => {
                input.insert("stop".to_owned(), v);
            }
        }
        // Everything else (seed, response_format, penalties, a provider's
        // own fields) goes to the upstream request as it is.
        if !body.is_empty() {
            input.insert("options".to_owned(), Value::Object(body));
        }
        Ok(Self {
            model,
            input,
            metadata,
            sandbox,
            stream,
            include_usage,
        })
    }
}

/// One message, as the `chat` kind takes it: `developer` is `system`, and a
/// content of text parts is their text.
fn message(i: usize, m: Value) -> Result<Value, OpenAiError> {
    let param = |field: &str| format!("messages[{i}].{field}");
    let Value::Object(mut m) = m else {
        return Err(OpenAiError::invalid(
            &format!("messages[{i}]"),
            "Each message must be an object.",
        ));
    };
    if m.get("tool_calls").is_some_and(|v| !v.is_null()) {
        return Err(OpenAiError::unsupported(&param("tool_calls"), "Tool calls"));
    }
    let role = match m.remove("role") {
        Some(Value::String(r)) => match r.as_str() {
            "developer" => "system".to_owned(),
            "system" | "user" | "assistant" => r,
            "tool" | "function" => {
                return Err(OpenAiError::unsupported(
                    &param("role"),
                    "A message of role \"tool\" or \"function\"",
                ));
            }
            _ => {
                return Err(OpenAiError::invalid(
                    &param("role"),
                    "role must be \"system\", \"developer\", \"user\" or \"assistant\".",
                ));
            }
        },
        _ => return Err(OpenAiError::invalid(&param("role"), "role is required.")),
    };
    let content = match m.remove("content") {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(t))) => texts.push(t.clone()),
                    _ => {
                        return Err(OpenAiError::unsupported(
                            &format!("messages[{i}].content[{j}]"),
                            "A content part other than text",
                        ));
                    }
                }
            }
            texts.join("\n")
        }
        _ => {
            return Err(OpenAiError::invalid(
                &param("content"),
                "content must be a string or an array of text parts.",
            ));
        }
    };
    Ok(json!({"role": role, "content": content}))
}

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
        request.sandbox,
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

    let Started { task, done } = started;
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
    task_answer(
        task,
        json!({
            "id": task.id,
            "object": "chat.completion",
            "created": unix_seconds(task),
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "logprobs": null,
                "finish_reason": finish_reason(&output),
            }],
            "usage": usage(task),
            "system_fingerprint": null,
        }),
    )
}

/// OpenAI's finish reasons. This endpoint refuses tools, so an answer has no
/// tool calls to point to: `tool_calls`, like the kind's `other`, is `stop`.
fn finish_reason(output: &Map<String, Value>) -> &str {
    match output.get("finish_reason").and_then(Value::as_str) {
        Some(r @ ("length" | "content_filter")) => r,
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
            // This door streams text only (for now): its other pieces are
            // left out, as before the stream carried them.
            StreamEvent::Reasoning(_) | StreamEvent::ToolCall { .. } => {
                Bytes::from_static(b": \n\n")
            }
            StreamEvent::Done(task) => {
                self.ended = true;
                self.guard.disarm();
                if task.status != TaskStatus::Succeeded {
                    return Some(data(&OpenAiError::of_task(&task).body()));
                }
                let output = output_of(&task);
                let mut out = Vec::new();
                if !self.sent_text {
                    let text = output.get("text").and_then(Value::as_str).unwrap_or("");
                    out.extend_from_slice(&self.delta(text));
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
