//! POST /anthropic/v1/messages: a `chat` task, answered as a `message`, or
//! with `"stream": true` as Anthropic's server-sent events (`stream.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use taskgate_core::TaskStatus;
use taskgate_providers::kinds::Kind;
use taskgate_store::TaskRecord;

use super::request::MessagesRequest;
use super::stream::Events;
use super::{AnthropicError, task_header};
use crate::auth::{Auth, TasksWrite};
use crate::body::JsonObject;
use crate::envelope::Raw;
use crate::error::ApiError;
use crate::executor::Told;
use crate::service::calls::{self, End, Started};
use crate::service::stream::{Reader, StreamEvent};
use crate::service::tasks::CancelOnDrop;
use crate::state::AppState;

pub(super) async fn create(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    body: JsonObject,
) -> Result<Response, AnthropicError> {
    let request = MessagesRequest::parse(body.map)?;
    chat_api(&app, &request.model)?;
    let mut call = Map::new();
    call.insert("api".to_owned(), json!(request.model));
    call.insert("input".to_owned(), Value::Object(request.input));
    call.insert("metadata".to_owned(), request.metadata);
    if let Some(sandbox) = request.sandbox {
        call.insert("sandbox".to_owned(), sandbox);
    }
    let call = calls::validate(&app.catalog, &principal, call).map_err(ApiError::from)?;
    // A stream takes one of the key's stream slots before its task exists,
    // and tells of the task at once.
    let slot = if request.stream {
        Some(app.stream_slots.open(principal.key_id)?)
    } else {
        None
    };
    let told = if slot.is_some() {
        Told::AtOnce
    } else {
        Told::AtEnd
    };
    let started = calls::start(&app, &principal, call, told)
        .await
        .map_err(ApiError::from)?;
    let id = started.task.id;
    // A client that leaves before the answer takes its task with it.
    let mut guard = CancelOnDrop::new(&app, &principal, id);
    if let Some(slot) = slot {
        let Started { task, done, .. } = started;
        let mut reader = Reader::follow(&app, principal, task.clone(), done, slot);
        // The first event decides the status: a task that failed before any
        // output is an error answer, not a stream.
        let first = reader.next().await;
        if let Some(StreamEvent::Done(t)) = &first
            && t.status != TaskStatus::Succeeded
        {
            guard.disarm();
            return Err(AnthropicError::of_task(t));
        }
        return Ok(Events::new(request.model, task, first, reader, guard).into_response());
    }
    let limit =
        Duration::from_millis(started.task.timeout_ms.max(0) as u64) + Duration::from_secs(30);
    let end = calls::end_of(&app, started, limit).await;
    guard.disarm();
    let task = match end.map_err(ApiError::from)? {
        End::Ended(task) => task,
        End::WaitPassed(task) => task.filter(|t| t.status.is_terminal()).ok_or_else(|| {
            let mut e = AnthropicError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!("Task {id} did not finish in time; read it at /api/v1/tasks/{id}."),
            );
            e.headers = Some(Box::new(task_header(id)));
            e
        })?,
    };
    if task.status != TaskStatus::Succeeded {
        return Err(AnthropicError::of_task(&task));
    }
    let mut response = Json(message_of(&task, &request.model)).into_response();
    response.headers_mut().extend(task_header(task.id));
    response.extensions_mut().insert(Raw);
    Ok(response)
}

/// Anthropic's own thinking blocks, signed, as the output's
/// `reasoning_details` recorded them.
pub(super) fn thinking_blocks(output: &Map<String, Value>) -> Vec<Value> {
    let details = output.get("reasoning_details").and_then(Value::as_array);
    details
        .into_iter()
        .flatten()
        .filter(|d| d["format"] == "anthropic")
        .filter_map(|d| match d["type"].as_str() {
            Some("thinking") => Some(json!({"type": "thinking", "thinking": d["text"],
                                            "signature": d["signature"].as_str().unwrap_or("")})),
            Some("redacted") => Some(json!({"type": "redacted_thinking", "data": d["data"]})),
            _ => None,
        })
        .collect()
}

/// `model` must name a chat API of the catalog.
fn chat_api(app: &AppState, model: &str) -> Result<(), AnthropicError> {
    let is_chat = |e: &Arc<crate::catalog::ApiEntry>| e.spec.kind == Kind::Chat.as_str();
    if app.catalog.get(model).is_none_or(|e| !is_chat(e)) {
        let shown: String = model.chars().take(64).collect();
        return Err(AnthropicError::new(
            StatusCode::NOT_FOUND,
            format!("model: {shown:?} is not a chat API of this Taskgate."),
        ));
    }
    Ok(())
}

/// POST /anthropic/v1/messages/count_tokens: `{input_tokens}` of a
/// request (`max_tokens` not needed), estimated by Taskgate without any
/// provider; no task is made and nothing is spent.
pub(super) async fn count_tokens(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    body: JsonObject,
) -> Result<Response, AnthropicError> {
    let mut body = body.map;
    body.entry("max_tokens").or_insert(json!(1));
    let request = MessagesRequest::parse(body)?;
    chat_api(&app, &request.model)?;
    let mut call = Map::new();
    call.insert("api".to_owned(), json!(request.model));
    call.insert("input".to_owned(), Value::Object(request.input));
    let call = calls::validate(&app.catalog, &principal, call).map_err(ApiError::from)?;
    let tokens = calls::count_input_tokens(call)
        .await
        .map_err(ApiError::from)?;
    let mut response = Json(json!({"input_tokens": tokens})).into_response();
    response.extensions_mut().insert(Raw);
    Ok(response)
}

/// A finished chat task as a `message`. Its id is the task's with `msg_`
/// for `task_`, so one tells the other.
pub(super) fn message_of(task: &TaskRecord, model: &str) -> Value {
    let output = match task.output.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    };
    let mut content = thinking_blocks(&output);
    if content.is_empty()
        && let Some(r) = output.get("reasoning").and_then(Value::as_str)
    {
        // Reasoning another family gave, unsigned: an empty signature,
        // which a client sending the block back to Taskgate needs no more.
        content.push(json!({"type": "thinking", "thinking": r, "signature": ""}));
    }
    let text = output.get("text").and_then(Value::as_str).unwrap_or("");
    let calls = output.get("tool_calls").and_then(Value::as_array);
    if !text.is_empty() || calls.is_none_or(|c| c.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for c in calls.into_iter().flatten() {
        content.push(json!({"type": "tool_use", "id": c["id"], "name": c["name"],
                            "input": c.get("arguments").cloned().unwrap_or_else(|| json!({}))}));
    }
    let stop_reason = match output.get("finish_reason").and_then(Value::as_str) {
        Some("tool_calls") => "tool_use",
        Some("length") => "max_tokens",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    };
    let id = task.id.to_string();
    json!({
        "id": format!("msg_{}", id.strip_prefix("task_").unwrap_or(&id)),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage(task),
    })
}

/// The task's usage as Anthropic counts it: the task's `input_tokens` is the
/// whole input, Anthropic's leaves out what was read from the cache
/// (`cache_read_input_tokens`, there when the task knows it).
fn usage(task: &TaskRecord) -> Value {
    let input = task.input_tokens.unwrap_or(0);
    let mut usage = json!({"output_tokens": task.output_tokens.unwrap_or(0)});
    match task.cached_input_tokens {
        Some(cached) => {
            let cached = cached.clamp(0, input);
            usage["input_tokens"] = json!(input - cached);
            usage["cache_read_input_tokens"] = json!(cached);
        }
        None => usage["input_tokens"] = json!(input),
    }
    usage
}
