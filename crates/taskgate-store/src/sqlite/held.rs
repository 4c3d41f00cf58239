//! Tasks of sync calls held back from the table while they run, and written
//! with their end in one commit.
//!
//! Why: a sync call tells of its task only at its end (the `200`), so no
//! client can ask for the task before. Stored running and then ended, each
//! such call made two commits that wrote the task's row and its indexes twice
//! (18 WAL frames with the default indexes), the largest part of SQLite's
//! share of a call at one connection (`bench/RESULTS.md`). Held until its end,
//! the task is inserted as it ends, in the commit of its end: one commit, one
//! statement, and neither its row nor the indexes of unfinished tasks written
//! twice.
//!
//! A held task gets into the table on its own, in a commit with whatever
//! else is written then, when anything else might look for it:
//! - any other write of tasks that might find a running one (a cancel, a
//!   cap's count of running tasks, leases, the sweeper) and the usage reports,
//!   which write every held task first (a claim takes a queued task, never a
//!   held one); a read of one task writes it if it is held, and a page
//!   writes the held tasks if one is of its account and mode, so reads do not
//!   wait for writes they do not need;
//! - [`HOLD_AT_MOST`] after it was held (the checkpoint thread's round), so a
//!   long call shows as running in pages and the dashboard within that time.
//!
//! What holding gives up: a process that dies while such a call runs loses
//! the task if it was still held (its client got no answer, and nothing was
//! charged for it); otherwise the sweeper ends it as interrupted, as before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::Connection;
use taskgate_core::{AccountId, Mode, TaskId};

use crate::{StoreResult, TaskRecord};

/// How long a task stays held at most before it is written as it is.
pub const HOLD_AT_MOST: Duration = Duration::from_millis(100);

/// How many tasks are held at most. With more calls in flight, the writer
/// thread's batches share each commit among many calls already, and holding
/// more only moves their inserts into the bulk writes of held tasks: with
/// 1,000 calls in flight, most outlived [`HOLD_AT_MOST`] and were written
/// running by the checkpoint thread anyway, with fewer calls/s and a longer
/// tail than inserting them at once (`bench/RESULTS.md`).
pub const HOLD_AT_MOST_TASKS: usize = 64;

#[derive(Default)]
pub struct Held {
    rows: Mutex<HashMap<TaskId, (Instant, TaskRecord)>>,
    /// The number of rows, read without the lock on every task operation.
    count: AtomicUsize,
}

impl Held {
    /// `change` applied to the rows, with their count kept.
    fn with_rows<R>(
        &self,
        change: impl FnOnce(&mut HashMap<TaskId, (Instant, TaskRecord)>) -> R,
    ) -> R {
        let mut rows = self.rows.lock();
        let out = change(&mut rows);
        self.count.store(rows.len(), Ordering::Release);
        out
    }

    /// Holds `task`, unless [`HOLD_AT_MOST_TASKS`] are held already: false
    /// then, and the caller inserts it at once.
    pub fn try_hold(&self, task: &TaskRecord) -> bool {
        if self.count.load(Ordering::Acquire) >= HOLD_AT_MOST_TASKS {
            return false;
        }
        self.with_rows(|rows| rows.insert(task.id, (Instant::now(), task.clone())));
        true
    }

    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Whether `id` is held.
    pub fn holds(&self, id: TaskId) -> bool {
        !self.is_empty() && self.rows.lock().contains_key(&id)
    }

    /// `id`'s task taken out, if it is held: the caller writes it, or holds
    /// it again with [`Held::restore`].
    pub fn take(&self, id: TaskId) -> Option<(Instant, TaskRecord)> {
        if self.is_empty() {
            return None;
        }
        self.with_rows(|rows| rows.remove(&id))
    }

    /// Whether a task of `account` in `mode` is held.
    pub fn holds_any_of(&self, account: AccountId, mode: Mode) -> bool {
        !self.is_empty()
            && self
                .rows
                .lock()
                .values()
                .any(|(_, t)| t.account_id == account && t.mode == mode)
    }

    /// Whether a task has been held since `before` or earlier.
    pub fn any_since(&self, before: Instant) -> bool {
        !self.is_empty() && self.rows.lock().values().any(|(at, _)| *at <= before)
    }

    /// Inside `conn`'s open transaction: `id`'s task inserted if it is held.
    /// What is written is returned, to be held again with [`Held::restore`]
    /// if the job fails (a failed commit loses it, as any write it was in).
    pub fn write_one(
        &self,
        conn: &Connection,
        id: TaskId,
    ) -> StoreResult<Vec<(Instant, TaskRecord)>> {
        let taken = self.take(id);
        self.insert(conn, taken.into_iter().collect())
    }

    /// Inside `conn`'s open transaction: every held task inserted, or only
    /// those held since `before` or earlier. Returned as [`Held::write_one`]'s.
    pub fn write_all(
        &self,
        conn: &Connection,
        before: Option<Instant>,
    ) -> StoreResult<Vec<(Instant, TaskRecord)>> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let taken = self.with_rows(|rows| {
            let ids: Vec<TaskId> = rows
                .iter()
                .filter(|(_, (at, _))| before.is_none_or(|b| *at <= b))
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| rows.remove(id)).collect()
        });
        self.insert(conn, taken)
    }

    /// `taken` inserted; held again if one fails.
    fn insert(
        &self,
        conn: &Connection,
        taken: Vec<(Instant, TaskRecord)>,
    ) -> StoreResult<Vec<(Instant, TaskRecord)>> {
        for (_, task) in &taken {
            if let Err(e) = super::hot_path::insert_row(conn, task) {
                self.restore(taken);
                return Err(e);
            }
        }
        Ok(taken)
    }

    /// Holds again tasks whose writing was not committed.
    pub fn restore(&self, tasks: Vec<(Instant, TaskRecord)>) {
        if tasks.is_empty() {
            return;
        }
        self.with_rows(|rows| {
            for (at, task) in tasks {
                rows.entry(task.id).or_insert((at, task));
            }
        });
    }
}
