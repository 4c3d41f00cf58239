//! A task's output as it is generated, for whoever follows it (the API's
//! event stream, the OpenAI endpoint's streamed answer): the text of the
//! instance running it (or, with Redis, of another), the end as the
//! executor or the store tells it, keep-alives in long silences, and the
//! stream's deadline.

use std::sync::Arc;
use std::time::Duration;

use taskgate_providers::Piece;
use taskgate_store::TaskRecord;
use tokio::sync::{mpsc, oneshot};

use crate::principal::Principal;
use crate::state::AppState;
use crate::stream_slots::StreamSlot;
use crate::streams::{Cursor, Hub, RemoteText};

/// Pause between looks for a running task's output when it is not (yet)
/// running here. (Its end is looked for in the store by one poller per
/// task, shared by its readers: [`crate::follow`].)
const STREAM_LOOK_EVERY: Duration = Duration::from_millis(100);
const STREAM_KEEPALIVE: Duration = Duration::from_secs(15);

/// What a reader of a task's output gets, in order: the output as it is
/// generated (each delta is what was added since the last one: text,
/// reasoning, tool-call fragments), keep-alives in long silences, then the
/// finished task; or, when the stream has lasted
/// `limits.stream_max_seconds`, `Expired` instead of what would follow.
pub enum StreamEvent {
    Delta(String),
    Reasoning(String),
    /// The provider's signature over the reasoning since the last one.
    ReasoningSignature(String),
    /// A block of reasoning the provider gives encrypted only.
    RedactedReasoning(String),
    /// A fragment of the tool call at `index`: its first carries the
    /// call's `id` and `name`; the `arguments_delta`s joined are its
    /// arguments (a JSON object).
    ToolCall {
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments_delta: String,
    },
    KeepAlive,
    Done(Box<TaskRecord>),
    Expired,
}

/// One reader of a task's stream: its events, until the task's end or the
/// stream's deadline, holding the key's stream slot as long as it lives.
pub struct Reader {
    rx: mpsc::Receiver<StreamEvent>,
    slot: StreamSlot,
    ended: bool,
}

impl Reader {
    /// Starts following `task` for `principal` (see [`follow_with`]).
    pub fn follow(
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
    pub async fn next(&mut self) -> Option<StreamEvent> {
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
    let mut cursor = Cursor::default();
    // Reused from read to read: a text-only stream allocates no more than
    // its text.
    let mut pieces: Vec<Piece> = Vec::new();
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
                match (more, &remote) {
                    (true, Some(r)) => r.read(&mut cursor, &mut pieces).await,
                    _ => remote = None,
                }
                if !pieces.is_empty() {
                    last_write = tokio::time::Instant::now();
                    if !send_all(&tx, &mut pieces).await {
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
            h.read(&mut cursor, &mut pieces);
            if !pieces.is_empty() {
                last_write = tokio::time::Instant::now();
                if !send_all(&tx, &mut pieces).await {
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
        let sent = cursor.text;
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

/// Sends each piece read as its event, emptying `pieces`; `false` once the
/// reader has left.
async fn send_all(tx: &mpsc::Sender<StreamEvent>, pieces: &mut Vec<Piece>) -> bool {
    for piece in pieces.drain(..) {
        let event = match piece {
            Piece::Text(text) => StreamEvent::Delta(text),
            Piece::Reasoning(text) => StreamEvent::Reasoning(text),
            Piece::ReasoningSignature(sig) => StreamEvent::ReasoningSignature(sig),
            Piece::RedactedReasoning(data) => StreamEvent::RedactedReasoning(data),
            Piece::ToolCall {
                index,
                id,
                name,
                arguments,
            } => StreamEvent::ToolCall {
                index,
                id,
                name,
                arguments_delta: arguments,
            },
        };
        if tx.send(event).await.is_err() {
            return false;
        }
    }
    true
}
