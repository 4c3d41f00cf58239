//! One task's end: its outcome and cost (only live, successful tasks are
//! charged), written if the task is still running (retried a while when the
//! store fails), and handed to its waiters.

use std::time::Duration;

use taskgate_core::{Attempts, Mode, TaskError, TaskStatus, Timestamp};
use taskgate_providers::{Attempt, ExecError, Execution};
use taskgate_store::{TaskFinish, TaskRecord};

use super::Executor;

/// A result the store refused is written again after this pause, doubled
/// each time up to [`FINISH_RETRY_LAST`], for [`FINISH_RETRY_FOR`] in all.
const FINISH_RETRY_FIRST: Duration = Duration::from_millis(100);
const FINISH_RETRY_LAST: Duration = Duration::from_secs(2);

/// How long a result the store refuses is tried again: long enough for a
/// database restart or a failover (the task's lease is renewed meanwhile),
/// and bounded, so a write that can never succeed does not hold the result
/// for ever. Past it the task is left running; it ends `interrupted` once
/// its lease lapses.
const FINISH_RETRY_FOR: Duration = Duration::from_secs(30);

impl Executor {
    pub(super) async fn finish(
        &self,
        task: TaskRecord,
        result: Result<Execution, ExecError>,
        attempts: Vec<Attempt>,
    ) {
        let started_at = task.started_at.unwrap_or(Timestamp::UNIX_EPOCH);
        let completed_at = self.clock.now().max(started_at);
        let live = task.mode == Mode::Live;
        let entry = self.catalog.get(task.api.as_str());
        let (status, output, error, usage) = match result {
            Ok(x) => (
                TaskStatus::Succeeded,
                Some(taskgate_core::json_text(&x.output)),
                None,
                x.usage,
            ),
            Err(e) => {
                let error = TaskError {
                    code: e.code,
                    message: e.message,
                    upstream_status: e.upstream_status,
                };
                (TaskStatus::Failed, None, Some(error), Default::default())
            }
        };
        // Only live, successful tasks are charged.
        let cost = match (entry, live && status == TaskStatus::Succeeded) {
            (Some(entry), true) => entry.cost(&usage).0,
            _ => 0,
        };
        let finish = TaskFinish {
            status,
            output,
            message: error.as_ref().map(|_| "execution failed".to_owned()),
            error,
            units: usage.units,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            cost_micros: cost,
            attempts: Attempts(attempts),
            completed_at,
            charge_account: live.then_some(task.account_id),
        };
        // A result that cannot be written leaves the task running (and its
        // lease renewed: the caller keeps it among the running tasks until
        // this returns), so a passing storage failure is retried a while.
        let mut written = self.store.finish_task(task.id, &finish).await;
        let mut pause = FINISH_RETRY_FIRST;
        let until = tokio::time::Instant::now() + FINISH_RETRY_FOR;
        while written.is_err() && tokio::time::Instant::now() + pause <= until {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(FINISH_RETRY_LAST);
            written = self.store.finish_task(task.id, &finish).await;
        }
        match written {
            Ok(true) => {
                crate::metrics::record_task(&task.api, task.mode, status);
                let id = task.id;
                match task.finished(&finish) {
                    Ok(done) => self.notify(&done),
                    // The record given to `finish` is the claimed one, so this
                    // does not happen; if it did, waiters get what is stored.
                    Err(e) => {
                        tracing::error!(error = %e, task = %id, "a finished task was not running");
                        if let Ok(Some(current)) = self.store.get_task_by_id(id).await {
                            self.notify(&current);
                        }
                    }
                }
                self.streams.close(id);
            }
            Ok(false) => {
                // Cancelled or interrupted meanwhile: show waiters what is stored.
                match self.store.get_task_by_id(task.id).await {
                    Ok(Some(current)) => self.notify(&current),
                    // Not stored at all: its unflushed insert was lost in a
                    // database crash. Waiters are let go, to find it gone.
                    Ok(None) => drop(self.waiters.lock().remove(&task.id)),
                    Err(_) => {}
                }
                self.streams.close(task.id);
            }
            Err(e) => {
                self.streams.close(task.id);
                tracing::error!(error = %e, task = %task.id, "cannot record a task's result")
            }
        }
    }
}
