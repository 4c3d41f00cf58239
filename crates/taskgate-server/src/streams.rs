//! Output of running tasks as it is generated, for `GET /tasks/{id}/stream`.
//!
//! While a streaming task runs, its execution appends text to the task's
//! hub; readers follow the hub's length and send what they have not sent
//! yet. A slow reader therefore never loses text (it gets larger deltas),
//! and a reader that arrives late first gets everything generated so far.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use taskgate_core::TaskId;
use tokio::sync::{mpsc, watch};

use crate::redis::{Redis, Reply};

/// How long a stream's text stays in Redis after its last piece.
const REMOTE_TEXT_TTL_MS: &str = "600000";

/// The text generated so far by one task.
pub struct Hub {
    text: Mutex<String>,
    len: watch::Sender<usize>,
    /// Set when the task has ended: no more text.
    finished: AtomicBool,
}

impl Hub {
    fn new() -> Self {
        Self {
            text: Mutex::new(String::new()),
            len: watch::Sender::new(0),
            finished: AtomicBool::new(false),
        }
    }

    fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.len.send_modify(|_| {});
    }

    /// Appends generated text.
    pub fn push(&self, delta: &str) {
        let mut text = self.text.lock();
        text.push_str(delta);
        self.len.send_replace(text.len());
    }

    /// The text from byte `from` on (always a character boundary: it is a
    /// length this hub reported).
    pub fn since(&self, from: usize) -> String {
        let text = self.text.lock();
        text.get(from..).unwrap_or("").to_owned()
    }

    /// Wakes when text is appended.
    pub fn watch(&self) -> watch::Receiver<usize> {
        self.len.subscribe()
    }
}

/// The hubs of the tasks this instance is running; with Redis, their text is
/// also kept there as it grows, for readers on other instances.
#[derive(Default)]
pub struct Streams {
    hubs: Mutex<HashMap<TaskId, Arc<Hub>>>,
    redis: Option<Arc<Redis>>,
}

impl Streams {
    pub fn new(redis: Option<Arc<Redis>>) -> Self {
        Self {
            hubs: Mutex::default(),
            redis,
        }
    }

    /// Opens the hub of a task that starts running here.
    pub fn open(&self, id: TaskId) -> Arc<Hub> {
        let hub = Arc::new(Hub::new());
        self.hubs.lock().insert(id, hub.clone());
        if let Some(redis) = &self.redis {
            tokio::spawn(forward(hub.clone(), id, redis.clone()));
        }
        hub
    }

    pub fn get(&self, id: TaskId) -> Option<Arc<Hub>> {
        self.hubs.lock().get(&id).cloned()
    }

    /// Forgets the hub of a task that has ended (readers keep their copy).
    pub fn close(&self, id: TaskId) {
        if let Some(hub) = self.hubs.lock().remove(&id) {
            hub.finish();
        }
    }

    /// The text of a task running on another instance, as it grows there
    /// (`None` without Redis, or if Redis cannot be reached).
    pub async fn remote(&self, id: TaskId) -> Option<RemoteText> {
        let redis = self.redis.clone()?;
        let mut subscription = redis.subscribe(&channel(id)).await.ok()?;
        // Each message only says "there is more": the text is read from the
        // key, from where this reader is, so nothing is missed or repeated.
        let (tx, rx) = mpsc::channel(1);
        // What was generated before the subscription is read at once.
        let _ = tx.try_send(());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    m = subscription.next() => match m {
                        Ok(_) => { let _ = tx.try_send(()); }
                        Err(_) => return,
                    },
                }
            }
        });
        Some(RemoteText {
            redis,
            id,
            more: rx,
        })
    }
}

fn key(id: TaskId) -> String {
    format!("taskgate:{{stream:{id}}}:text")
}

fn channel(id: TaskId) -> String {
    format!("taskgate:stream:{id}")
}

/// Copies a hub's text to Redis as it grows (APPEND, then PUBLISH the new
/// length), until the task ends. A failure stops the copy: local readers
/// are unaffected, remote ones get the task's end.
async fn forward(hub: Arc<Hub>, id: TaskId, redis: Arc<Redis>) {
    let (key, channel) = (key(id), channel(id));
    let mut watch = hub.watch();
    let mut sent = 0;
    loop {
        let finished = hub.finished.load(Ordering::SeqCst);
        let text = hub.since(sent);
        if !text.is_empty() {
            sent += text.len();
            let copied = async {
                redis.command(&["APPEND", &key, &text]).await?;
                redis
                    .command(&["PEXPIRE", &key, REMOTE_TEXT_TTL_MS])
                    .await?;
                redis
                    .command(&["PUBLISH", &channel, &sent.to_string()])
                    .await
            };
            if let Err(e) = copied.await {
                tracing::warn!(task = %id, error = %e, "cannot share a stream's text through Redis");
                return;
            }
        }
        if finished || watch.changed().await.is_err() {
            return;
        }
    }
}

/// A stream's text as another instance generates it.
pub struct RemoteText {
    redis: Arc<Redis>,
    id: TaskId,
    more: mpsc::Receiver<()>,
}

impl RemoteText {
    /// Waits for more text (cancel-safe).
    pub async fn changed(&mut self) -> bool {
        self.more.recv().await.is_some()
    }

    /// The text from byte `from` on (a length this stream reported, so a
    /// character boundary).
    pub async fn since(&self, from: usize) -> String {
        match self
            .redis
            .on_key(&["GETRANGE", &key(self.id), &from.to_string(), "-1"])
            .await
        {
            Ok(Reply::Text(t)) => t,
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_readers_get_everything_and_deltas_split_on_characters() {
        let streams = Streams::default();
        let t = TaskId::new();
        let hub = streams.open(t);
        hub.push("Héllo");
        let mut rx = hub.watch();
        let seen = *rx.borrow_and_update();
        assert_eq!(hub.since(0), "Héllo");
        hub.push(", wörld");
        assert!(rx.has_changed().unwrap());
        assert_eq!(hub.since(seen), ", wörld");
        streams.close(t);
        assert!(streams.get(t).is_none());
        assert_eq!(hub.since(0), "Héllo, wörld");
    }
}
