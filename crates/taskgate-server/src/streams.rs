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
use tokio::sync::watch;

use crate::redis::Redis;

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
    /// One Redis subscription per task followed from here, shared by its
    /// readers: each message bumps the count.
    remotes: Remotes,
}

type Remotes = Arc<Mutex<HashMap<TaskId, watch::Sender<u64>>>>;

impl Streams {
    pub fn new(redis: Option<Arc<Redis>>) -> Self {
        Self {
            hubs: Mutex::default(),
            redis,
            remotes: Remotes::default(),
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
    /// (`None` without Redis). The readers of one task share one
    /// subscription; if Redis cannot be reached it ends, and
    /// [`RemoteText::changed`] says so.
    pub fn remote(&self, id: TaskId) -> Option<RemoteText> {
        let redis = self.redis.clone()?;
        let mut more = {
            let mut remotes = self.remotes.lock();
            match remotes.get(&id) {
                Some(tx) => tx.subscribe(),
                None => {
                    let (tx, rx) = watch::channel(0);
                    remotes.insert(id, tx.clone());
                    let remotes = self.remotes.clone();
                    let redis = redis.clone();
                    tokio::spawn(async move {
                        subscribe(&redis, &remotes, id, &tx).await;
                        remotes.lock().remove(&id);
                    });
                    rx
                }
            }
        };
        // What was generated before this reader came is read at once.
        more.mark_changed();
        Some(RemoteText { redis, id, more })
    }

    /// Tasks whose text is followed through Redis from here now.
    pub fn subscriptions(&self) -> usize {
        self.remotes.lock().len()
    }
}

/// Passes on each message of a task's channel to its readers (as a bump of
/// the count: each message only says "there is more", the text is read from
/// the key, from where each reader is, so nothing is missed or repeated),
/// until its last reader leaves or Redis fails.
async fn subscribe(redis: &Redis, remotes: &Remotes, id: TaskId, tx: &watch::Sender<u64>) {
    let Ok(mut subscription) = redis.subscribe(&channel(id)).await else {
        return;
    };
    // Readers that came before the subscription read again after it.
    tx.send_modify(|n| *n += 1);
    loop {
        tokio::select! {
            _ = tx.closed() => {
                // Checked under the lock readers subscribe under.
                let guard = remotes.lock();
                if tx.receiver_count() == 0 {
                    drop(guard);
                    return;
                }
            }
            m = subscription.next() => match m {
                Ok(_) => { tx.send_modify(|n| *n += 1); }
                Err(_) => return,
            },
        }
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
                redis.command::<()>(&["APPEND", &key, &text]).await?;
                redis
                    .command::<()>(&["PEXPIRE", &key, REMOTE_TEXT_TTL_MS])
                    .await?;
                redis
                    .command::<()>(&["PUBLISH", &channel, &sent.to_string()])
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
    more: watch::Receiver<u64>,
}

impl RemoteText {
    /// Waits for more text (cancel-safe); `false` once the subscription has
    /// ended (Redis failed).
    pub async fn changed(&mut self) -> bool {
        self.more.changed().await.is_ok()
    }

    /// The text from byte `from` on (a length this stream reported, so a
    /// character boundary).
    pub async fn since(&self, from: usize) -> String {
        self.redis
            .command::<String>(&["GETRANGE", &key(self.id), &from.to_string(), "-1"])
            .await
            .unwrap_or_default()
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
