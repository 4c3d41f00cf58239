//! GET /tasks (the history), GET /tasks/{id} (details), POST /tasks/{id}/cancel,
//! GET /tasks/{id}/stream (output as it is generated).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use taskgate_core::{AccountId, ApiList, ApiSlug, Mode, TaskId, TaskStatus, Timestamp, Transition};
use taskgate_store::{TaskQuery, TaskRecord};
use tokio::sync::{mpsc, oneshot};

use crate::auth::{Auth, Principal, TasksRead, TasksWrite};
use crate::envelope::{Data, Raw};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::stream_slots::StreamSlot;
use crate::streams::{Hub, RemoteText};
use crate::v1::call::find;
use crate::v1::{QueryPairs, cursor};
use crate::views::{TaskDetailsView, TaskView};

const PARAMS: [&str; 7] = [
    "status",
    "api",
    "created_after",
    "created_before",
    "order",
    "limit",
    "cursor",
];

#[derive(Serialize)]
struct Page<T> {
    object: &'static str,
    items: Vec<T>,
    has_more: bool,
    next_cursor: Option<String>,
}

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
    let limit = (q.limit - 1) as usize;
    let mut rows = app.store.list_tasks(&q).await?;
    let has_more = rows.len() > limit;
    rows.truncate(limit);
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
    list_query_of(principal.account_id, principal.mode, apis, query)
}

/// [`list_query`] for an account's tasks of one mode, of `apis` only when
/// given (the dashboard reads with it too).
pub fn list_query_of(
    account_id: AccountId,
    mode: Mode,
    apis: Option<&ApiList>,
    query: &QueryPairs,
) -> ApiResult<Option<TaskQuery>> {
    query.check(&PARAMS)?;
    let mut q = TaskQuery::new(account_id, mode, query.limit()? + 1);
    q.apis = apis.map(|list| list.0.clone());
    if let Some(s) = query.get("status") {
        for part in s.split(',').map(|p| p.trim_matches(' ')) {
            let status: TaskStatus = part.parse().map_err(|_| {
                ApiError::invalid_parameter(
                    "status",
                    format!(
                        "status must be one or more of {}, comma-separated.",
                        TaskStatus::names()
                    ),
                )
            })?;
            if !q.statuses.contains(&status) {
                q.statuses.push(status);
            }
        }
    }
    let mut unknown_api = false;
    if let Some(api) = query.get("api") {
        if api.is_empty() {
            return Err(ApiError::invalid_parameter(
                "api",
                "api must be an API slug.",
            ));
        }
        // A name that cannot be a slug names no task: an empty page.
        match ApiSlug::parse(api) {
            Ok(slug) => q.api = Some(slug),
            Err(_) => unknown_api = true,
        }
    }
    // Ids sort by creation time, so time bounds become id bounds.
    if let Some(t) = query.get("created_after") {
        let at = time_param("created_after", t)?;
        q.id_after = Some(TaskId::floor(at.plus_ms(1)));
    }
    if let Some(t) = query.get("created_before") {
        let at = time_param("created_before", t)?;
        q.id_before = Some(TaskId::floor(at));
    }
    match query.get("order") {
        None | Some("desc") => {}
        Some("asc") => q.descending = false,
        Some(_) => {
            return Err(ApiError::invalid_parameter(
                "order",
                "order must be \"asc\" or \"desc\".",
            ));
        }
    }
    if let Some(c) = query.get("cursor") {
        let bad =
            || ApiError::invalid_parameter("cursor", "cursor is not a cursor from next_cursor.");
        let (descending, last) = cursor::task(c).ok_or_else(bad)?;
        if query.get("order").is_some() && descending != q.descending {
            return Err(ApiError::invalid_parameter(
                "cursor",
                "cursor was made for the other order.",
            ));
        }
        q.descending = descending;
        let bound = if descending {
            &mut q.id_before
        } else {
            &mut q.id_after
        };
        // The tighter of the time bound and the cursor.
        let tighter = match bound.take() {
            Some(b) if (descending && b < last) || (!descending && b > last) => b,
            _ => last,
        };
        *bound = Some(tighter);
    }
    Ok((!unknown_api).then_some(q))
}

fn time_param(name: &str, value: &str) -> ApiResult<Timestamp> {
    Timestamp::parse_rfc3339(value).ok_or_else(|| {
        ApiError::invalid_parameter(
            name,
            format!("{name} must be an RFC 3339 timestamp, e.g. 2026-11-21T13:45:12Z."),
        )
    })
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
    if principal.allowed_apis.is_some() {
        // Another API's task is not this key's to see, nor to cancel.
        find(&app, &principal, &id).await?;
    }
    let task = cancel_and_stop(&app, principal.account_id, principal.mode, task_id)
        .await?
        .ok_or_else(|| ApiError::task_not_found(&id))?;
    match task.status {
        TaskStatus::Cancelled => Data::ok(&TaskView::new(&task, true)),
        status => Err(ApiError::conflict(
            "task_not_cancellable",
            format!(
                "The task has already {status}; only {} tasks can be cancelled.",
                Transition::Cancel
                    .from()
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )),
    }
}

/// Cancels a task of the account and mode (if it is queued or running), then
/// stops its execution and answers whoever waits for it. The task as it
/// stands afterwards; `None` when there is no such task.
pub async fn cancel_and_stop(
    app: &AppState,
    account_id: AccountId,
    mode: Mode,
    id: TaskId,
) -> Result<Option<TaskRecord>, taskgate_store::StoreError> {
    let task = app
        .store
        .cancel_task(account_id, mode, id, Timestamp::now())
        .await?;
    if let Some(t) = &task
        && t.status == TaskStatus::Cancelled
    {
        app.executor.cancel_running(t.id);
        app.executor.notify(t);
    }
    Ok(task)
}

/// Pause between looks for a running task's output when it is not (yet)
/// running here. (Its end is looked for in the store by one poller per
/// task, shared by its readers: [`crate::follow`].)
const STREAM_LOOK_EVERY: Duration = Duration::from_millis(100);
const STREAM_KEEPALIVE: Duration = Duration::from_secs(15);

/// GET /tasks/{id}/stream: the task's output as Server-Sent Events while it
/// is generated (`event: delta`, data `{"text": "…"}`), then the final task
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

fn sse(event: &str, data: &impl Serialize) -> Bytes {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// What a reader of a task's output gets, in order: the text as it is
/// generated (each delta is what was added since the last one), keep-alives
/// in long silences, then the finished task; or, when the stream has lasted
/// `limits.stream_max_seconds`, `Expired` instead of what would follow.
pub(crate) enum StreamEvent {
    Delta(String),
    KeepAlive,
    Done(Box<TaskRecord>),
    Expired,
}

/// One reader of a task's stream: its events, until the task's end or the
/// stream's deadline, holding the key's stream slot as long as it lives.
pub(crate) struct Reader {
    rx: mpsc::Receiver<StreamEvent>,
    slot: StreamSlot,
    ended: bool,
}

impl Reader {
    /// Starts following `task` for `principal` (see [`follow_with`]).
    pub(crate) fn follow(
        app: &Arc<AppState>,
        principal: Principal,
        task: TaskRecord,
        done: Option<oneshot::Receiver<TaskRecord>>,
        slot: StreamSlot,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<StreamEvent>(64);
        tokio::spawn(follow_with(app.clone(), principal, task, done, tx));
        Self {
            rx,
            slot,
            ended: false,
        }
    }

    /// The next event; `None` after the last one (or when the follower
    /// stopped without the task's end: the store could not be read).
    pub(crate) async fn next(&mut self) -> Option<StreamEvent> {
        if self.ended {
            return None;
        }
        let event = match tokio::time::timeout_at(self.slot.deadline(), self.rx.recv()).await {
            Ok(e) => e,
            Err(_) => Some(StreamEvent::Expired),
        };
        self.ended = matches!(
            event,
            None | Some(StreamEvent::Done(_) | StreamEvent::Expired)
        );
        event
    }
}

/// Feeds one reader of a task's stream until the task ends or the reader
/// leaves (drops its receiver). `done`, when given, is the wait for the task
/// registered before it was created (a fast task may end before `follow`
/// starts); otherwise one is registered here.
async fn follow_with(
    app: Arc<AppState>,
    principal: Principal,
    task: TaskRecord,
    done: Option<oneshot::Receiver<TaskRecord>>,
    tx: mpsc::Sender<StreamEvent>,
) {
    let id = task.id;
    if task.status.is_terminal() {
        let _ = tx.send(StreamEvent::Done(Box::new(task))).await;
        return;
    }
    let mut done = done.unwrap_or_else(|| app.executor.wait(id));
    let mut hub: Option<Arc<Hub>> = None;
    let mut watch = None;
    let mut sent = 0usize;
    let mut last_write = tokio::time::Instant::now();
    let mut finished: Option<TaskRecord> = None;
    // With Redis, the text of a chat task running on another instance.
    let mut remote: Option<RemoteText> = None;
    let mut remote_tried = app
        .catalog
        .get(task.api.as_str())
        .is_none_or(|e| e.spec.kind != "chat");
    // Between `find` and `wait` the task may have ended: look once more.
    if let Ok(Some(t)) = app
        .store
        .get_task(principal.account_id, principal.mode, id)
        .await
        && t.status.is_terminal()
    {
        finished = Some(t);
    }
    // The task may run on another instance: its end shows in the store,
    // where one poller per task looks for it.
    let mut end = (finished.is_none()).then(|| {
        app.followers
            .end_of(principal.account_id, principal.mode, id)
    });
    while finished.is_none() {
        if hub.is_none()
            && let Some(h) = app.executor.streams.get(id)
        {
            watch = Some(h.watch());
            hub = Some(h);
        }
        if hub.is_none() && !remote_tried {
            remote_tried = true;
            remote = app.executor.streams.remote(id);
        }
        tokio::select! {
            more = async { remote.as_mut().expect("guarded").changed().await }, if remote.is_some() => {
                let text = match (more, &remote) {
                    (true, Some(r)) => r.since(sent).await,
                    _ => {
                        remote = None;
                        String::new()
                    }
                };
                if !text.is_empty() {
                    sent += text.len();
                    last_write = tokio::time::Instant::now();
                    if tx.send(StreamEvent::Delta(text)).await.is_err() {
                        break;
                    }
                }
            }
            r = &mut done => {
                finished = match r {
                    Ok(t) => Some(t),
                    Err(_) => app.store.get_task(principal.account_id, principal.mode, id).await.ok().flatten(),
                };
                if finished.is_none() {
                    break;
                }
            }
            changed = async { end.as_mut().expect("guarded").changed().await }, if end.is_some() => {
                let seen = end.as_ref().and_then(|e| e.borrow().clone());
                match seen {
                    Some(t) => finished = Some((*t).clone()),
                    None if changed.is_err() => end = None,
                    None => {}
                }
            }
            changed = async { watch.as_mut().map(|w| w.changed()).expect("guarded").await }, if watch.is_some() => {
                if changed.is_err() {
                    watch = None;
                }
            }
            _ = tx.closed() => break,
            _ = tokio::time::sleep(STREAM_LOOK_EVERY) => {
                if last_write.elapsed() >= STREAM_KEEPALIVE {
                    last_write = tokio::time::Instant::now();
                    if tx.send(StreamEvent::KeepAlive).await.is_err() {
                        break;
                    }
                }
            }
        }
        if let Some(h) = &hub {
            let text = h.since(sent);
            if !text.is_empty() {
                sent += text.len();
                last_write = tokio::time::Instant::now();
                if tx.send(StreamEvent::Delta(text)).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(done);
    drop(end);
    app.executor.forget(id);
    if let Some(t) = finished {
        // A reader that was following the text gets all of it before the
        // end, even when the last pieces had not reached it (through Redis,
        // from another instance): the stored output is the whole text.
        if sent > 0
            && let Some(text) = t
                .output
                .as_deref()
                .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
                .and_then(|o| o.get("text").and_then(|v| v.as_str().map(str::to_owned)))
            && sent < text.len()
            && text.is_char_boundary(sent)
        {
            let _ = tx.send(StreamEvent::Delta(text[sent..].to_owned())).await;
        }
        let _ = tx.send(StreamEvent::Done(Box::new(t))).await;
    }
}
