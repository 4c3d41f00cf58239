//! A task's execution handed to the caller that waits for its end, to run
//! in the caller's own task while it waits; one left unfinished by its
//! caller (the sync wait passed, the client hung up, nobody drove it) goes
//! on in a task of its own.
//!
//! Why: run in a task of its own, a sync call's execution told its caller
//! of the end through a channel, and that wake-up came while the upstream
//! connection's task was waiting to run on the same worker; tokio then woke
//! the other worker to take one of the two (a `futex` wake-up and a context
//! switch pair on every sync call at one connection, bench/RESULTS.md). Run
//! in the caller's task, the end is in hand when the execution returns.

use std::future::Future;
use std::pin::Pin;

use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An execution not started yet, or under way in its caller's task.
pub struct Execution {
    work: Option<Work>,
    tracker: TaskTracker,
    /// Counts in the executor's tracker while the work is here: a shutdown
    /// waits for it as for a task of its own.
    _token: TaskTrackerToken,
}

impl Execution {
    pub(super) fn new(
        work: impl Future<Output = ()> + Send + 'static,
        tracker: &TaskTracker,
    ) -> Self {
        Self {
            work: Some(Box::pin(work)),
            tracker: tracker.clone(),
            _token: tracker.token(),
        }
    }

    /// Awaits `until` while running the execution; what is left of the
    /// execution when this returns (or is dropped) goes on on its own.
    pub async fn alongside<F: Future>(mut self, until: F) -> F::Output {
        let mut until = std::pin::pin!(until);
        std::future::poll_fn(|cx| {
            if let Some(work) = self.work.as_mut()
                && work.as_mut().poll(cx).is_ready()
            {
                self.work = None;
            }
            until.as_mut().poll(cx)
        })
        .await
    }

    /// Sends the execution off to run on its own now.
    pub fn detach(self) {}
}

impl Drop for Execution {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else { return };
        // Outside a runtime (it is shutting down) nothing could run it.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.tracker.spawn(work);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_execution_left_unfinished_goes_on_on_its_own() {
        let tracker = TaskTracker::new();
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let execution = Execution::new(
            async move {
                let _ = rx.await;
                flag.store(true, Ordering::SeqCst);
            },
            &tracker,
        );
        // The caller gives up waiting before the end.
        let waited = tokio::time::timeout(
            Duration::from_millis(20),
            execution.alongside(std::future::pending::<()>()),
        )
        .await;
        assert!(waited.is_err());
        assert!(!ended.load(Ordering::SeqCst));
        tx.send(()).unwrap();
        tracker.close();
        tokio::time::timeout(Duration::from_secs(5), tracker.wait())
            .await
            .expect("the execution ends on its own");
        assert!(ended.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_shutdown_waits_for_an_execution_in_its_callers_hands() {
        let tracker = TaskTracker::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let execution = Execution::new(
            async move {
                let _ = rx.await;
            },
            &tracker,
        );
        tracker.close();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), tracker.wait())
                .await
                .is_err(),
            "an execution not run yet counts as running"
        );
        let waited = execution
            .alongside(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                tx.send(()).unwrap();
                7
            })
            .await;
        assert_eq!(waited, 7);
        tokio::time::timeout(Duration::from_secs(5), tracker.wait())
            .await
            .expect("nothing left running");
    }

    #[tokio::test]
    async fn an_execution_driven_to_its_end_is_not_run_again() {
        let tracker = TaskTracker::new();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let execution = Execution::new(
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send(3);
            },
            &tracker,
        );
        assert_eq!(execution.alongside(rx).await.unwrap(), 3);
        tracker.close();
        tracker.wait().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
