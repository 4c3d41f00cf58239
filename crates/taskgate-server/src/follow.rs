//! The readers of one task's stream share one look at the store for its end.
//!
//! A task may run on another instance, where its end shows only in the store
//! (or, on PostgreSQL, in a notification the executor passes on). Each
//! reader used to read the task once a second on its own, so a thousand
//! readers of one task made a thousand reads a second. Now the first reader
//! of a task starts one poller, the others subscribe to it, and it stops
//! when the last one leaves or when it has seen the end.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use taskgate_core::{AccountId, Mode, TaskId};
use taskgate_store::{Store, TaskRecord};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

/// How often a task's end is looked for in the store.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Reads a task (`None`: not found, or the store could not be read).
type Look =
    Arc<dyn Fn(AccountId, Mode, TaskId) -> BoxFuture<'static, Option<TaskRecord>> + Send + Sync>;

/// What a reader waits on: `Some` once the task has ended.
pub type End = watch::Receiver<Option<Arc<TaskRecord>>>;

type Pollers = Arc<Mutex<HashMap<TaskId, watch::Sender<Option<Arc<TaskRecord>>>>>>;

/// One poller per followed task.
pub struct Followers {
    pollers: Pollers,
    look: Look,
    every: Duration,
}

impl Followers {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let look: Look = Arc::new(move |account, mode, id| {
            let store = store.clone();
            Box::pin(async move { store.get_task(account, mode, id).await.ok().flatten() })
        });
        Self::with_look(look, LOOK_EVERY)
    }

    fn with_look(look: Look, every: Duration) -> Self {
        Self {
            pollers: Arc::default(),
            look,
            every,
        }
    }

    /// The end of task `id` (of `account` and `mode`, which every reader of
    /// one task shares), as the task's one poller sees it. The first look
    /// is one interval away: a reader has just read the task itself.
    pub fn end_of(&self, account: AccountId, mode: Mode, id: TaskId) -> End {
        let mut pollers = self.pollers.lock();
        if let Some(tx) = pollers.get(&id) {
            return tx.subscribe();
        }
        let (tx, rx) = watch::channel(None);
        pollers.insert(id, tx.clone());
        let look = self.look.clone();
        let every = self.every;
        let pollers = self.pollers.clone();
        tokio::spawn(async move {
            poll(&tx, &pollers, every, || look(account, mode, id)).await;
            // Under the lock, so that no reader subscribes to a poller
            // that is going away.
            pollers.lock().remove(&id);
        });
        rx
    }

    /// Tasks polled now.
    pub fn polled(&self) -> usize {
        self.pollers.lock().len()
    }
}

/// Looks every `every` until the task has ended (and tells the readers) or
/// no reader is left. Returns holding nothing; the caller forgets the poller.
async fn poll<F>(
    tx: &watch::Sender<Option<Arc<TaskRecord>>>,
    pollers: &Pollers,
    every: Duration,
    look: impl Fn() -> F,
) where
    F: std::future::Future<Output = Option<TaskRecord>>,
{
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(t) = look().await
                    && t.status.is_terminal()
                {
                    tx.send_replace(Some(Arc::new(t)));
                    return;
                }
            }
            _ = tx.closed() => {}
        }
        // Nobody reads any more: stop (checked under the lock that readers
        // subscribe under, so a reader arriving now gets a new poller).
        let guard = pollers.lock();
        if tx.receiver_count() == 0 {
            drop(guard);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use taskgate_core::{ApiSlug, KeyId, TaskStatus, Timestamp};

    use super::*;

    fn counting(status: Arc<Mutex<TaskStatus>>, looks: Arc<AtomicUsize>) -> Followers {
        let look: Look = Arc::new(move |account, mode, id| {
            looks.fetch_add(1, Ordering::SeqCst);
            let status = *status.lock();
            Box::pin(async move {
                let chat = ApiSlug::parse("chat").unwrap();
                let mut t =
                    TaskRecord::queued(id, account, mode, chat, KeyId::new(), Timestamp::now());
                t.status = status;
                Some(t)
            })
        });
        Followers::with_look(look, LOOK_EVERY)
    }

    #[tokio::test(start_paused = true)]
    async fn readers_of_one_task_share_one_look_an_interval() {
        let status = Arc::new(Mutex::new(TaskStatus::Running));
        let looks = Arc::new(AtomicUsize::new(0));
        let followers = counting(status.clone(), looks.clone());
        let (account, id) = (AccountId::new(), TaskId::new());
        let mut readers: Vec<End> = (0..50)
            .map(|_| followers.end_of(account, Mode::Live, id))
            .collect();
        assert_eq!(followers.polled(), 1);

        tokio::time::sleep(Duration::from_millis(5_500)).await;
        assert_eq!(
            looks.load(Ordering::SeqCst),
            5,
            "one look a second, not one a reader"
        );

        // Another task has its own poller.
        let other = followers.end_of(account, Mode::Live, TaskId::new());
        assert_eq!(followers.polled(), 2);
        drop(other);

        // The end reaches every reader, and the poller goes.
        *status.lock() = TaskStatus::Succeeded;
        for r in &mut readers {
            r.changed().await.unwrap();
            assert_eq!(r.borrow().as_ref().unwrap().status, TaskStatus::Succeeded);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(followers.polled(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_poller_stops_when_its_last_reader_leaves() {
        let status = Arc::new(Mutex::new(TaskStatus::Running));
        let looks = Arc::new(AtomicUsize::new(0));
        let followers = counting(status, looks.clone());
        let (account, id) = (AccountId::new(), TaskId::new());
        let readers: Vec<End> = (0..3)
            .map(|_| followers.end_of(account, Mode::Test, id))
            .collect();
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        drop(readers);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(followers.polled(), 0);
        let before = looks.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            looks.load(Ordering::SeqCst),
            before,
            "no look without readers"
        );

        // A reader coming later starts a poller again.
        let _late = followers.end_of(account, Mode::Test, id);
        assert_eq!(followers.polled(), 1);
    }
}
