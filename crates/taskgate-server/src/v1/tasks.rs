//! GET /tasks (the history), GET /tasks/{id} (details), POST /tasks/{id}/cancel,
//! GET /tasks/{id}/stream (output as it is generated).

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use taskgate_core::TaskId;
use taskgate_store::{TaskQuery, TaskRecord};

use crate::auth::{Auth, TasksRead, TasksWrite};
use crate::envelope::{Data, Raw};
use crate::error::{ApiError, ApiResult};
use crate::principal::Principal;
use crate::query::{self, QueryPairs, cursor};
use crate::service::stream::{Reader, StreamEvent};
use crate::service::tasks::{self, Holder};
use crate::state::AppState;
use crate::v1::Page;
use crate::views::{TaskDetailsView, TaskView};

pub async fn list(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksRead>,
    query: QueryPairs,
) -> ApiResult<Data> {
    let Some(q) = list_query(&principal, &query)? else {
        // An `api` that cannot be a slug names no task: an empty page.
        return Data::ok(&Page::<TaskView> {
            object: "list",
            items: Vec::new(),
            has_more: false,
            next_cursor: None,
        });
    };
    let (rows, has_more) = tasks::list(&app, &q).await.map_err(ApiError::from)?;
    let next_cursor = if has_more {
        rows.last().map(|t| cursor::after_task(q.descending, t.id))
    } else {
        None
    };
    Data::ok(&Page {
        object: "list",
        items: rows.iter().map(|t| TaskView::new(t, false)).collect(),
        has_more,
        next_cursor,
    })
}

/// GET /tasks's query: the page to read (one more than asked, to tell
/// whether there are more), `None` when it can hold nothing (an `api` that
/// cannot be a slug), or the 400 to answer.
pub fn list_query(principal: &Principal, query: &QueryPairs) -> ApiResult<Option<TaskQuery>> {
    // A restricted key sees only the tasks of the APIs it may call.
    let apis = principal.allowed_apis.as_deref();
    query::task_query(principal.account_id, principal.mode, apis, query)
}

/// The caller's task `id` (as the client wrote it), or 404.
pub async fn find(app: &AppState, principal: &Principal, id: &str) -> ApiResult<TaskRecord> {
    let task_id = TaskId::parse(id).map_err(|_| ApiError::task_not_found(id))?;
    tasks::find(app, Holder::of(principal), task_id)
        .await
        .map_err(|e| ApiError::of_task(e, id))
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksRead>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let task = find(&app, &principal, &id).await?;
    Data::ok(&TaskDetailsView::new(&task))
}

pub async fn cancel(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let task_id = TaskId::parse(&id).map_err(|_| ApiError::task_not_found(&id))?;
    let task = tasks::cancel(&app, Holder::of(&principal), task_id)
        .await
        .map_err(|e| ApiError::of_task(e, &id))?;
    Data::ok(&TaskView::new(&task, true))
}

/// GET /tasks/{id}/stream: the task's output as Server-Sent Events while it
/// is generated (`event: delta`, data `{"text": "…"}`; `event: reasoning`,
/// the same; `event: tool_call`, `{index, id, name, arguments_delta}` with
/// `id` and `name` on an index's first fragment only), then the final task
/// object (`event: done`). A finished task answers with `done` at once. A
/// key holds at most `limits.max_streams_per_key` streams open (else 429
/// `too_many_streams`); one that reaches `limits.stream_max_seconds` ends
/// with `event: expired`, and its reader reconnects.
pub async fn stream(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksRead>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    // Before the task is read: a key at its cap costs the store nothing.
    let slot = app.stream_slots.open(principal.key_id)?;
    let task = find(&app, &principal, &id).await?;
    let task_id = task.id;
    let reader = Reader::follow(&app, principal, task, None, slot);
    let max_seconds = app.stream_slots.lifetime().as_secs();
    let body = Body::from_stream(futures_util::stream::unfold(
        reader,
        move |mut reader| async move {
            let bytes = match reader.next().await? {
                StreamEvent::Delta(text) => sse("delta", &json!({ "text": text })),
                StreamEvent::Reasoning(text) => sse("reasoning", &json!({ "text": text })),
                StreamEvent::ReasoningSignature(sig) => {
                    sse("reasoning", &json!({ "text": "", "signature": sig }))
                }
                StreamEvent::RedactedReasoning(data) => {
                    sse("reasoning", &json!({ "text": "", "redacted": data }))
                }
                StreamEvent::ToolCall {
                    index,
                    id,
                    name,
                    arguments_delta,
                } => sse("tool_call", &tool_call(index, id, name, arguments_delta)),
                StreamEvent::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
                StreamEvent::Done(task) => sse("done", &TaskView::new(&task, true)),
                StreamEvent::Expired => sse(
                    "expired",
                    &json!({
                        "task_id": task_id,
                        "reason": "stream_max_seconds",
                        "max_seconds": max_seconds,
                        "message": "The stream reached its maximum duration; reconnect to go on following the task.",
                    }),
                ),
            };
            Some((Ok::<_, Infallible>(bytes), reader))
        },
    ));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response.extensions_mut().insert(Raw);
    Ok(response)
}

/// A `tool_call` event's data: `id` and `name` only where the fragment has
/// them (an index's first).
fn tool_call(
    index: u32,
    id: Option<String>,
    name: Option<String>,
    arguments_delta: String,
) -> serde_json::Value {
    let mut data = json!({ "index": index, "arguments_delta": arguments_delta });
    if let Some(id) = id {
        data["id"] = json!(id);
    }
    if let Some(name) = name {
        data["name"] = json!(name);
    }
    data
}

fn sse(event: &str, data: &impl Serialize) -> Bytes {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}
