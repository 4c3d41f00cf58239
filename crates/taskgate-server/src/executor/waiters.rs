//! Waiters and cancellation: who waits here for a task's end is handed it,
//! whichever instance ran it; a task cancelled anywhere stops here if it
//! runs here.

use std::sync::Arc;

use taskgate_core::{TaskId, TaskStatus};
use taskgate_store::{TaskEnd, TaskRecord};
use tokio::sync::{mpsc, oneshot};

use super::Executor;

impl Executor {
    /// Acts on tasks that ended anywhere: a task cancelled elsewhere stops
    /// here if it runs here (its upstream request is aborted), and whoever
    /// waits here for a task that ended elsewhere gets it.
    pub(super) async fn follow_ends(self: Arc<Self>, mut ends: mpsc::Receiver<TaskEnd>) {
        loop {
            let end = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                end = ends.recv() => match end {
                    Some(end) => end,
                    None => return,
                },
            };
            if end.status == TaskStatus::Cancelled {
                self.cancel_running(end.id);
            }
            // A running task of the account may have ended: room under its cap.
            if self.fair.unblock(end.account) {
                self.wake.notify_one();
            }
            // A task running here hands its end to its waiters itself (the
            // notice often comes first), unless it was cancelled elsewhere:
            // then its execution just stops.
            let ends_here =
                end.status != TaskStatus::Cancelled && self.inflight.lock().contains(&end.id);
            if !ends_here && self.waiters.lock().contains_key(&end.id) {
                match self.store.get_task_by_id(end.id).await {
                    Ok(Some(task)) if task.status.is_terminal() => self.notify(&task),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, task = %end.id, "cannot read an ended task")
                    }
                }
            }
        }
    }

    /// A receiver for the task's final state. Register before submitting.
    pub fn wait(&self, id: TaskId) -> oneshot::Receiver<TaskRecord> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().entry(id).or_default().push(tx);
        rx
    }

    /// Drops the waiters of `id` that stopped waiting (dropped their
    /// receiver): a sync call that gave up, a stream whose reader left.
    pub fn forget(&self, id: TaskId) {
        let mut waiters = self.waiters.lock();
        if let Some(list) = waiters.get_mut(&id) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                waiters.remove(&id);
            }
        }
    }

    /// Stops the running execution of `id` at once, if this instance runs it.
    pub fn cancel_running(&self, id: TaskId) {
        if let Some(token) = self.running.lock().get(&id) {
            token.cancel();
        }
    }

    /// Hands a task's final state to whoever waits for it.
    pub fn notify(&self, task: &TaskRecord) {
        if let Some(waiters) = self.waiters.lock().remove(&task.id) {
            for w in waiters {
                let _ = w.send(task.clone());
            }
        }
    }

    /// Stops the executions among `ids` whose task is cancelled in the store.
    pub(super) async fn stop_ended(&self, ids: &[TaskId]) {
        for &id in ids {
            if let Ok(Some(task)) = self.store.get_task_by_id(id).await
                && task.status == TaskStatus::Cancelled
                && self.running.lock().contains_key(&id)
            {
                tracing::info!(task = %id, "a task cancelled elsewhere stops here");
                self.cancel_running(id);
            }
        }
    }
}
