//! Group commit for PostgreSQL: the writes of the hot path (a task stored,
//! claimed, finished) are queued and committed in batches, one transaction
//! and one WAL flush for every write waiting, instead of one each.
//!
//! Two writers, one for stores and claims and one for finishes, each take
//! every job waiting in their queue (up to [`MAX_BATCH`]), write them on a
//! connection they keep while work comes (many rows per statement; one
//! statement alone needs no `BEGIN` and `COMMIT`), commit, and only then
//! answer each caller: an answer always means the write is committed. A
//! job whose statement fails would abort the whole transaction, so the
//! batch is rolled back and its jobs are run again one by one: one job's
//! failure is that job's alone. A batch that meets a serialization failure
//! or a deadlock (other instances write the same rows) is run again, up to
//! the configured number of retries.
//!
//! The queues and their jobs are here. `writer` takes a queue's jobs and
//! commits them (its connection, retries, a failed batch run again job by
//! job); `writes` turns a batch's jobs into statements, `insert` and
//! `finish` writing many tasks with one statement each.

mod finish;
mod insert;
mod writer;
mod writes;

use sqlx::PgPool;
use taskgate_core::{AccountId, Mode, RunnerId, TaskEvent, TaskId, Timestamp};
use tokio::sync::{mpsc, oneshot};

use crate::{StoreError, StoreResult, TaskFinish, TaskRecord};
use writer::write_loop;

/// Jobs committed together at most.
const MAX_BATCH: usize = 256;

pub(super) enum Work {
    /// With a cap: only while the account has fewer running tasks of the
    /// task's mode. Without `flush`, a batch of such inserts alone commits without
    /// waiting for the WAL flush (`TaskQueue::insert_task_unflushed`).
    Insert {
        task: Box<TaskRecord>,
        cap: Option<u32>,
        flush: bool,
    },
    /// With a cap: only while the account has fewer running tasks of the
    /// mode (the task's account and mode, and the cap).
    Claim {
        id: TaskId,
        cap: Option<((AccountId, Mode), u32)>,
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
    },
    /// Of a running task: the only finish the store's callers make.
    Finish { id: TaskId, finish: Box<TaskFinish> },
}

pub(super) enum Done {
    Inserted,
    /// Nothing written: the account has its cap of running tasks.
    AtCap,
    Claimed(Option<Box<TaskRecord>>),
    Finished(bool),
}

struct Job {
    work: Work,
    reply: oneshot::Sender<StoreResult<Done>>,
}

pub(super) struct Batcher {
    /// Stores and claims: one writer.
    starts: mpsc::UnboundedSender<Job>,
    /// Finishes: one writer. Each finish moves its account's spend row,
    /// locked until its batch commits, so finish batches run one after the
    /// other anyway; with one writer they grow instead of waiting.
    finishes: mpsc::UnboundedSender<Job>,
}

impl Work {
    /// The account whose running tasks the write counts under a lock.
    fn capped_account(&self) -> Option<AccountId> {
        match self {
            Work::Insert {
                task, cap: Some(_), ..
            } => Some(task.account_id),
            Work::Claim {
                cap: Some(((account, _), _)),
                ..
            } => Some(*account),
            _ => None,
        }
    }
}

impl Batcher {
    /// Starts the writers on `pool`; a batch hit by a serialization failure
    /// or a deadlock is run again up to `retries` times.
    ///
    /// One writer per queue: while a batch commits the next one grows, and
    /// bigger batches beat more of them (measured on two cores, c=32: one
    /// writer of each 3,600 calls/s; two, three and five writers of stores
    /// 3,400, 3,100 and 2,700).
    pub fn start(pool: PgPool, retries: u32) -> Self {
        let queue = || {
            let (jobs, queue) = mpsc::unbounded_channel();
            tokio::spawn(write_loop(pool.clone(), queue, retries));
            jobs
        };
        Self {
            starts: queue(),
            finishes: queue(),
        }
    }

    /// Runs `work` in the next batch; answers once it is committed.
    pub async fn run(&self, work: Work) -> StoreResult<Done> {
        let (reply, answer) = oneshot::channel();
        let queue = match work {
            Work::Finish { .. } => &self.finishes,
            _ => &self.starts,
        };
        queue
            .send(Job { work, reply })
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

#[cfg(test)]
mod testing {
    use taskgate_core::{ApiSlug, KeyId};

    use super::*;

    pub(super) fn task() -> TaskRecord {
        TaskRecord::queued(
            TaskId::new(),
            AccountId::new(),
            Mode::Live,
            ApiSlug::parse("sentiment").unwrap(),
            KeyId::new(),
            Timestamp::now(),
        )
    }
}
