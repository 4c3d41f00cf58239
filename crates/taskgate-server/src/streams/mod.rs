//! Output of running tasks as it is generated, for `GET /tasks/{id}/stream`.
//!
//! While a streaming task runs, its execution appends its pieces to the
//! task's hub: text to one buffer, the other pieces (reasoning, tool-call
//! fragments) to a list, each with the text offset it came at, so their
//! order is kept and a text-only stream costs what it did before pieces.
//! Readers follow a [`Cursor`] and send what they have not sent yet. A slow
//! reader therefore never loses output (it gets larger deltas), and a
//! reader that arrives late first gets everything generated so far.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use taskgate_core::TaskId;
use taskgate_providers::Piece;
use tokio::sync::watch;

use crate::redis::{Redis, Script};

mod pieces;

pub use pieces::Cursor;
use pieces::{decode, encode, merge};

/// How long a stream's text stays in Redis after its last piece.
const REMOTE_TEXT_TTL_MS: &str = "600000";

/// The output generated so far by one task.
pub struct Hub {
    out: Mutex<Output>,
    /// The text's length, bumped on other pieces too: it wakes readers.
    len: watch::Sender<usize>,
    /// Set when the task has ended: no more text.
    finished: AtomicBool,
}

impl Hub {
    fn new() -> Self {
        Self {
            out: Mutex::default(),
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
        let mut out = self.out.lock();
        out.text.push_str(delta);
        self.len.send_replace(out.text.len());
    }

    /// Appends a generated piece, after the text so far.
    pub fn push_piece(&self, piece: Piece) {
        let other = match piece {
            Piece::Text(delta) => return self.push(&delta),
            other => other,
        };
        let mut out = self.out.lock();
        let at = out.text.len();
        out.others.push((at, other));
        self.len.send_modify(|_| {});
    }

    /// The text from byte `from` on (always a character boundary: it is a
    /// length this hub reported), the other pieces left out.
    pub fn since(&self, from: usize) -> String {
        let out = self.out.lock();
        out.text.get(from..).unwrap_or("").to_owned()
    }

    /// Every piece past `cursor`, in the order generated, appended to
    /// `into` (text between other pieces as one [`Piece::Text`] each); the
    /// cursor moves past them. A text-only stream gives one text piece.
    pub fn read(&self, cursor: &mut Cursor, into: &mut Vec<Piece>) {
        let out = self.out.lock();
        let text = out.text.get(cursor.text..).unwrap_or("");
        let others = out.others.get(cursor.pieces..).unwrap_or(&[]);
        merge(
            text,
            others.iter().map(|(at, p)| (*at, Some(p.clone()))),
            cursor,
            into,
        );
    }

    /// The text from byte `text` on and the other pieces from `pieces` on
    /// (encoded), read at one moment: a piece never misses text that came
    /// before it, nor is text read past a piece not read.
    fn since_both(&self, text: usize, pieces: usize) -> (String, Vec<String>) {
        let out = self.out.lock();
        let others = match out.others.get(pieces..) {
            Some(others) => others.iter().map(|(at, p)| encode(*at, p)).collect(),
            None => Vec::new(),
        };
        (out.text.get(text..).unwrap_or("").to_owned(), others)
    }

    /// Wakes when text is appended.
    pub fn watch(&self) -> watch::Receiver<usize> {
        self.len.subscribe()
    }
}

/// A hub's content: the text, and the other pieces at the text offsets
/// they came at.
#[derive(Default)]
struct Output {
    text: String,
    others: Vec<(usize, Piece)>,
}

/// The hubs of the tasks this instance is running; with Redis, their output
/// is also kept there as it grows, for readers on other instances.
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
        Some(RemoteText {
            redis,
            id,
            more,
            read: Script::new(READ),
        })
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

/// The other pieces' list (the same hash tag: one cluster slot with the text).
fn pieces_key(id: TaskId) -> String {
    format!("taskgate:{{stream:{id}}}:pieces")
}

/// A remote reader's read: the text and the other pieces past its cursor,
/// at one instant, so a piece is never seen before the text it follows.
const READ: &str = r"
return {redis.call('GETRANGE', KEYS[1], ARGV[1], -1), redis.call('LRANGE', KEYS[2], ARGV[2], -1)}
";

fn channel(id: TaskId) -> String {
    format!("taskgate:stream:{id}")
}

/// Copies a hub's output to Redis as it grows (the other pieces RPUSHed to
/// their list, the text APPENDed, then PUBLISH the new length), until the
/// task ends. A failure stops the copy: local readers are unaffected,
/// remote ones get the task's end.
async fn forward(hub: Arc<Hub>, id: TaskId, redis: Arc<Redis>) {
    let (key, pieces_key, channel) = (key(id), pieces_key(id), channel(id));
    let mut watch = hub.watch();
    let mut sent = 0;
    let mut sent_others = 0;
    loop {
        let finished = hub.finished.load(Ordering::SeqCst);
        let (text, others) = hub.since_both(sent, sent_others);
        if !text.is_empty() || !others.is_empty() {
            sent += text.len();
            sent_others += others.len();
            let copied = async {
                if !others.is_empty() {
                    let mut push = vec!["RPUSH", &pieces_key];
                    push.extend(others.iter().map(String::as_str));
                    redis.command::<()>(&push).await?;
                    redis
                        .command::<()>(&["PEXPIRE", &pieces_key, REMOTE_TEXT_TTL_MS])
                        .await?;
                }
                if !text.is_empty() {
                    redis.command::<()>(&["APPEND", &key, &text]).await?;
                    redis
                        .command::<()>(&["PEXPIRE", &key, REMOTE_TEXT_TTL_MS])
                        .await?;
                }
                redis
                    .command::<()>(&["PUBLISH", &channel, &sent.to_string()])
                    .await
            };
            if let Err(e) = copied.await {
                tracing::warn!(task = %id, error = %e, "cannot share a stream's output through Redis");
                return;
            }
        }
        if finished || watch.changed().await.is_err() {
            return;
        }
    }
}

/// A stream's output as another instance generates it.
pub struct RemoteText {
    redis: Arc<Redis>,
    id: TaskId,
    more: watch::Receiver<u64>,
    read: Script,
}

impl RemoteText {
    /// Waits for more output (cancel-safe); `false` once the subscription
    /// has ended (Redis failed).
    pub async fn changed(&mut self) -> bool {
        self.more.changed().await.is_ok()
    }

    /// The text from byte `from` on (a length this stream reported, so a
    /// character boundary), the other pieces left out.
    pub async fn since(&self, from: usize) -> String {
        self.redis
            .command::<String>(&["GETRANGE", &key(self.id), &from.to_string(), "-1"])
            .await
            .unwrap_or_default()
    }

    /// Every piece past `cursor`, as [`Hub::read`]. The other pieces are
    /// written before the text they precede, and read after it: a piece
    /// seen past the text read waits for the next read.
    pub async fn read(&self, cursor: &mut Cursor, into: &mut Vec<Piece>) {
        let (text_key, pieces_key) = (key(self.id), pieces_key(self.id));
        let (from, from_piece) = (cursor.text.to_string(), cursor.pieces.to_string());
        let read: Result<(String, Vec<String>), _> = self
            .redis
            .eval(&self.read, &[&text_key, &pieces_key], &[&from, &from_piece])
            .await;
        let Ok((text, others)) = read else { return };
        merge(&text, others.iter().map(|o| decode(o)), cursor, into);
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

    #[test]
    fn pieces_are_read_in_order_from_a_cursor() {
        let hub = Hub::new();
        let call = |arguments: &str| Piece::ToolCall {
            index: 0,
            id: None,
            name: None,
            arguments: arguments.to_owned(),
        };
        hub.push_piece(Piece::Reasoning("Hm.".to_owned()));
        hub.push_piece(Piece::Text("Ok".to_owned()));
        hub.push_piece(call("{\"a\""));
        let (mut cursor, mut out) = (Cursor::default(), Vec::new());
        hub.read(&mut cursor, &mut out);
        assert_eq!(
            out,
            [
                Piece::Reasoning("Hm.".to_owned()),
                Piece::Text("Ok".to_owned()),
                call("{\"a\"")
            ]
        );
        out.clear();
        hub.push_piece(call(":1}"));
        hub.push("!");
        hub.read(&mut cursor, &mut out);
        assert_eq!(out, [call(":1}"), Piece::Text("!".to_owned())]);
        out.clear();
        hub.read(&mut cursor, &mut out);
        assert!(out.is_empty());
        assert_eq!(hub.since(0), "Ok!", "text readers see the text alone");
    }
}
