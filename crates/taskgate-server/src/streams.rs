//! Output of running tasks as it is generated, for `GET /tasks/{id}/stream`.
//!
//! While a streaming task runs, its execution appends text to the task's
//! hub; readers follow the hub's length and send what they have not sent
//! yet. A slow reader therefore never loses text (it gets larger deltas),
//! and a reader that arrives late first gets everything generated so far.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use taskgate_core::TaskId;
use tokio::sync::watch;

/// The text generated so far by one task.
pub struct Hub {
    text: Mutex<String>,
    len: watch::Sender<usize>,
}

impl Hub {
    fn new() -> Self {
        Self {
            text: Mutex::new(String::new()),
            len: watch::Sender::new(0),
        }
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

/// The hubs of the tasks this instance is running.
#[derive(Default)]
pub struct Streams {
    hubs: Mutex<HashMap<TaskId, Arc<Hub>>>,
}

impl Streams {
    /// Opens the hub of a task that starts running here.
    pub fn open(&self, id: TaskId) -> Arc<Hub> {
        let hub = Arc::new(Hub::new());
        self.hubs.lock().insert(id, hub.clone());
        hub
    }

    pub fn get(&self, id: TaskId) -> Option<Arc<Hub>> {
        self.hubs.lock().get(&id).cloned()
    }

    /// Forgets the hub of a task that has ended (readers keep their copy).
    pub fn close(&self, id: TaskId) {
        self.hubs.lock().remove(&id);
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
