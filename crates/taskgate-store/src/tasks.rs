//! Tasks, behind two traits cut by who asks:
//!
//! - [`ClientTasks`], what the doors (the API, the dashboard, the CLI) read
//!   and write about tasks a client owns: one task, a page of the list, a
//!   cancel. Each call names the task's account and mode, or reads by id
//!   for a caller that checks ownership itself.
//! - [`TaskQueue`], the executor's work: storing tasks queued or already
//!   running, claiming them under each account's cap, renewing leases,
//!   sweeping the tasks whose runner stopped, finishing them, and deleting
//!   ended ones past retention.
//!
//! Code that only shows tasks to a client can take `&dyn ClientTasks` and
//! cannot claim or finish one by mistake. Every change of state is a
//! [`Transition`], applied only from its source states.

use async_trait::async_trait;
use taskgate_core::{AccountId, Attempts, Mode, RunnerId, TaskId, Timestamp};

use crate::{StoreResult, TaskFinish, TaskQuery, TaskRecord};

// The doc links' only use: every change of state is named by its transition.
#[cfg(doc)]
use crate::Transition;

/// Tasks as their owners see them. The reads find every task stored,
/// [`TaskQueue::insert_task_unflushed`]'s included.
#[async_trait]
pub trait ClientTasks: Send + Sync {
    /// The task `id` if it is the account's, of `mode`.
    async fn get_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
    ) -> StoreResult<Option<TaskRecord>>;
    /// The task `id`, whoever owns it: for callers that check ownership
    /// themselves (the dashboard shows both modes) or own every task (the
    /// executor).
    async fn get_task_by_id(&self, id: TaskId) -> StoreResult<Option<TaskRecord>>;
    /// One page of the account's tasks of one mode (without their input
    /// and output documents).
    async fn list_tasks(&self, query: &TaskQuery) -> StoreResult<Vec<TaskRecord>>;
    /// [`Transition::Cancel`]. Returns the task as it stands afterwards.
    async fn cancel_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
        now: Timestamp,
    ) -> StoreResult<Option<TaskRecord>>;
}

/// The executor's side of tasks: queue, claim, lease, sweep, finish, and the
/// retention of ended tasks.
#[async_trait]
pub trait TaskQueue: Send + Sync {
    async fn insert_task(&self, task: &TaskRecord) -> StoreResult<()>;
    /// [`TaskQueue::insert_task`] of a task nobody is told of before its
    /// end (a sync call's): every read and write of tasks finds it, but it
    /// is not waited for until durable. The next durable write covers it:
    /// the task's finish, or [`TaskQueue::settle_task`] when it must be told
    /// of earlier. A crash in between loses only a task whose caller gets an
    /// error. PostgreSQL commits it without waiting for the WAL flush, so
    /// every instance sees it at once. SQLite (one process) holds it back
    /// and inserts it in the commit of its end, or before any other use of
    /// tasks, or once held for 0.1 s (`sqlite/held.rs`).
    async fn insert_task_unflushed(&self, task: &TaskRecord) -> StoreResult<()>;
    /// The task as stored once every write of it is durable: what a caller
    /// of [`TaskQueue::insert_task_unflushed`] reads before telling anyone
    /// of the task. `None` if it is not stored.
    async fn settle_task(&self, id: TaskId) -> StoreResult<Option<TaskRecord>>;
    /// Stores `task`, already claimed (`running`), only while its account
    /// has fewer than `max_running` running tasks of the task's mode in the
    /// whole store (every instance's): `false`, and nothing stored, at the
    /// cap. Live and test tasks are counted apart (each mode has its own
    /// cap). Callers on several instances at once never overshoot it.
    async fn insert_running_capped(&self, task: &TaskRecord, max_running: u32)
    -> StoreResult<bool>;
    /// Ids of queued tasks, oldest first.
    async fn queued_task_ids(&self, limit: i64) -> StoreResult<Vec<TaskId>>;
    /// Queued tasks with their accounts and modes, taking turns: the oldest
    /// of every account's live tasks and of its test tasks, then the second
    /// oldest of each, …, at most `per_lane` of one account's tasks of one
    /// mode and `limit` in all. What fair dispatch reads: a backlog of test
    /// tasks never hides the account's live ones.
    async fn queued_tasks(
        &self,
        per_lane: i64,
        limit: i64,
    ) -> StoreResult<Vec<(TaskId, AccountId, Mode)>>;
    /// [`Transition::Claim`] if the task is still queued; the claimed task.
    async fn claim_task(
        &self,
        id: TaskId,
        runner: &RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<TaskRecord>>;
    /// [`TaskQueue::claim_task`], only while `account` has fewer than
    /// `max_running` running tasks of `mode` in the whole store (`account`
    /// and `mode` are the task's).
    #[allow(clippy::too_many_arguments)]
    async fn claim_task_capped(
        &self,
        id: TaskId,
        account: AccountId,
        mode: Mode,
        runner: &RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        max_running: u32,
    ) -> StoreResult<Claim>;
    /// Extends the leases of those of `ids` that `runner` is running: the
    /// tasks it is executing now, so a task whose execution was lost stops
    /// being renewed and the sweeper ends it.
    async fn renew_leases(
        &self,
        runner: &RunnerId,
        ids: &[TaskId],
        lease_until: Timestamp,
    ) -> StoreResult<u64>;
    /// [`Transition::Interrupt`]: running tasks whose runner stopped renewing
    /// its lease, or whose runner is `dead_runner` (this instance's previous
    /// life), end `failed` with `interrupted`. Returns their ids.
    async fn interrupt_expired(
        &self,
        now: Timestamp,
        dead_runner: Option<&RunnerId>,
    ) -> StoreResult<Vec<TaskId>>;
    /// [`Transition::Succeed`] or [`Transition::Fail`] (by `finish.status`;
    /// any other status is [`crate::StoreError::Forbidden`]), only if the
    /// task is still running (a cancelled task's late result is dropped).
    /// Adds `finish.cost_micros` to the account's spend for the month of
    /// `finish.completed_at` when live, and gives back the task's
    /// reservation (cancel and interrupt give it back too), in one
    /// transaction.
    async fn finish_task(&self, id: TaskId, finish: &TaskFinish) -> StoreResult<bool>;
    /// Records the attempts of a task cancelled while it ran (its execution
    /// learns of the cancel only after the cancel is stored). Changes nothing
    /// unless the task is `cancelled`; returns whether it did.
    async fn record_cancelled_attempts(&self, id: TaskId, attempts: &Attempts)
    -> StoreResult<bool>;
    /// Deletes up to `limit` ended tasks (succeeded, failed, cancelled)
    /// created before `created_before`, oldest first, of every mode or of
    /// `only` that one; how many. For `task_retention_days` (every mode) and
    /// `test_task_retention_days` (test tasks): called again while it
    /// deletes `limit`.
    async fn purge_tasks(
        &self,
        created_before: Timestamp,
        only: Option<Mode>,
        limit: i64,
    ) -> StoreResult<u64>;
}

/// What [`TaskQueue::claim_task_capped`] did.
#[derive(Debug)]
pub enum Claim {
    Claimed(Box<TaskRecord>),
    /// Not queued any more: claimed elsewhere, or cancelled.
    Gone,
    /// Still queued: its account has its cap of running tasks of its mode.
    AtCap,
}

/// A task that reached a terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskEnd {
    pub id: TaskId,
    pub status: taskgate_core::TaskStatus,
    pub account: AccountId,
}

impl TaskEnd {
    /// A notification's payload, `"<id> <status> <account>"`.
    pub fn parse(payload: &str) -> Option<Self> {
        let mut parts = payload.split(' ');
        let end = Self {
            id: TaskId::parse(parts.next()?).ok()?,
            status: parts.next()?.parse().ok()?,
            account: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(end)
    }
}
