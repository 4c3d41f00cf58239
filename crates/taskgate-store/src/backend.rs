//! What a backend provides so that the shared SQL can implement the store
//! on it: the interface each backend implements, declared in one place.
//!
//! The store's traits are implemented once for both backends by macros
//! (`sql/`, `users.rs`, `usage.rs`) that run one SQL text through sqlx. That
//! code needs three things of a backend, and calls nothing else of it:
//!
//! - [`SqlBackend`]: its sqlx pools, its migrations, its name, its dialect's
//!   task statements, and how it follows the ends of tasks other processes
//!   write;
//! - [`HotPath`]: the task operations a call makes (store, claim, finish,
//!   cancel, read, list), which each backend runs its own way: SQLite on
//!   rusqlite through its writer thread, with sync calls' tasks held back
//!   from the table until they end (`sqlite/`); PostgreSQL through its group
//!   commit (`postgres/batch.rs`).
//!
//! A new backend implements these two traits and invokes
//! `sql::impl_store!`; the compiler then says what is missing.
//!
//! Plain `async fn`s, not `async_trait`: the macros expand for each backend's
//! own type, so these calls are static and their futures are not boxed. The
//! store's traits keep the one box per call that `async_trait` makes for
//! `dyn Store`; nothing is added under it.
//!
//! Why macros and not generic code over these traits: a function generic
//! over the sqlx database must state, at every use, that each type it binds
//! encodes and each row it reads decodes for that database (Rust does not
//! carry such bounds from a trait to its users). Expanded for each backend's
//! concrete type, the same SQL text needs none of them.

use taskgate_core::{AccountId, Mode, RunnerId, TaskEvent, TaskId, Timestamp, Transition};
use tokio::sync::mpsc;

use crate::sql::Statements;
use crate::{Claim, StoreResult, TaskEnd, TaskFinish, TaskQuery, TaskRecord};

// The doc links' only use.
#[cfg(doc)]
use crate::{ClientTasks, Store, TaskQueue};

/// A backend's pools and upkeep, for the SQL both backends share.
pub(crate) trait SqlBackend: Send + Sync + 'static {
    /// The database its pools speak to.
    type Db: sqlx::Database;

    /// What [`Store::backend`] answers: `sqlite` or `postgres`.
    const NAME: &'static str;

    /// The statements that read or change task states, in this backend's
    /// [`crate::sql::Dialect`], built once.
    fn statements() -> &'static Statements;

    /// Where the shared SQL writes (accounts, keys, idempotency, spend,
    /// leases, users, sessions, request counts). SQLite: a pool of one
    /// connection, beside the writer thread of the hot path.
    fn writer(&self) -> &sqlx::Pool<Self::Db>;

    /// Where the shared SQL reads. SQLite: read-only connections, which WAL
    /// lets run beside the writers.
    fn reader(&self) -> &sqlx::Pool<Self::Db>;

    /// Brings the schema up to date from the backend's own migrations
    /// folder ([`Store::migrate`]).
    async fn run_migrations(&self) -> StoreResult<()>;

    /// [`Store::task_ends`]: the ends of tasks other processes sharing the
    /// store write, or `None` where one process owns it.
    async fn listen_task_ends(&self) -> StoreResult<Option<mpsc::Receiver<TaskEnd>>>;

    /// [`crate::WebhookStore::deliveries_written`]: a word each time any
    /// process sharing the store commits deliveries, or `None` where one
    /// process owns it (its writer tells its sender itself).
    async fn listen_deliveries_written(&self) -> StoreResult<Option<mpsc::Receiver<()>>> {
        Ok(None)
    }

    /// Told before a webhook endpoint or a call's webhook is first written:
    /// a backend whose hot path skips the webhooks' statement while there
    /// are none starts running it from here on.
    fn webhooks_in_use(&self) {}
}

/// The task operations of a call's path, each run the backend's own way. The
/// shared code checks the arguments and makes the task's event before it
/// calls them; each must keep the contract of the store's method it serves.
///
/// A backend may hold tasks back from the table
/// ([`TaskQueue::insert_task_unflushed`]); then every method here that reads,
/// counts or changes tasks writes the held ones it could find first, and
/// [`HotPath::hot_visible`] and [`HotPath::hot_visible_task`] do it for the
/// shared SQL.
pub(crate) trait HotPath: SqlBackend {
    /// Every task held back written to the table, before shared SQL reads,
    /// counts or changes tasks among which a held one could be. A backend
    /// that holds nothing back returns at once.
    async fn hot_visible(&self) -> StoreResult<()>;

    /// Task `id` written to the table if it is held back, before shared SQL
    /// reads it.
    async fn hot_visible_task(&self, id: TaskId) -> StoreResult<()>;

    /// [`TaskQueue::insert_task`]: stored and durable.
    async fn hot_insert_task(&self, task: &TaskRecord) -> StoreResult<()>;

    /// [`TaskQueue::insert_task_unflushed`].
    async fn hot_insert_task_unflushed(&self, task: &TaskRecord) -> StoreResult<()>;

    /// [`TaskQueue::settle_task`].
    async fn hot_settle_task(&self, id: TaskId) -> StoreResult<Option<TaskRecord>>;

    /// [`ClientTasks::get_task`], a held task included.
    async fn hot_get_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
    ) -> StoreResult<Option<TaskRecord>>;

    /// [`ClientTasks::list_tasks`] (`sql::list_tasks_sql`), the held tasks of
    /// the query's account and mode included.
    async fn hot_list_tasks(&self, query: &TaskQuery) -> StoreResult<Vec<TaskRecord>>;

    /// [`TaskQueue::claim_task`], with `event` (the claim's) appended to the
    /// task's events: the statement `statements().claim`.
    async fn hot_claim_task(
        &self,
        id: TaskId,
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
    ) -> StoreResult<Option<TaskRecord>>;

    /// [`TaskQueue::claim_task_capped`] of a task of `lane` (its account and
    /// mode), with `event` as in [`HotPath::hot_claim_task`]. The count of
    /// running tasks and the claim are one atomic step, across instances.
    #[allow(clippy::too_many_arguments)]
    async fn hot_claim_task_capped(
        &self,
        id: TaskId,
        lane: (AccountId, Mode),
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
        max_running: u32,
    ) -> StoreResult<Claim>;

    /// [`TaskQueue::insert_running_capped`] of a task already checked to be
    /// `running`.
    async fn hot_insert_running_capped(
        &self,
        task: &TaskRecord,
        max_running: u32,
    ) -> StoreResult<bool>;

    /// [`TaskQueue::finish_task`] by `transition` (Succeed or Fail, already
    /// checked against the finish's status): the statement
    /// `statements().ending(transition)`, the reservation given back and the
    /// cost charged in the same commit.
    async fn hot_finish_task(
        &self,
        id: TaskId,
        transition: Transition,
        finish: &TaskFinish,
    ) -> StoreResult<bool>;

    /// [`Transition::Cancel`] of the account's task of `mode` if it is still
    /// queued or running, with `event` appended and its reservation given
    /// back in the same commit: the statement `statements().cancel`. The
    /// cancelled task, or `None` if nothing was cancelled (the shared code
    /// then reads the task as it stands).
    async fn hot_cancel_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
        now: Timestamp,
        event: TaskEvent,
    ) -> StoreResult<Option<TaskRecord>>;

    /// [`crate::WebhookStore::claim_deliveries`], then each delivery's
    /// endpoint and task read. SQLite claims in steps on the writer's
    /// connection (warm, prepared once; `sqlite/claim.rs`), not through
    /// sqlx; PostgreSQL in one statement, then reads the endpoints and the
    /// tasks of a whole claim in one statement each.
    #[allow(clippy::too_many_arguments)]
    async fn hot_claim_deliveries(
        &self,
        runner: &taskgate_core::RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
        per_destination: i64,
        reclaim: Option<&taskgate_core::RunnerId>,
    ) -> StoreResult<crate::DeliveryClaim>;

    /// [`crate::WebhookStore::record_delivery`]: the statement
    /// [`crate::webhooks::RECORD_DELIVERY`], bound by
    /// [`crate::webhooks::attempts_after`].
    async fn hot_record_delivery(
        &self,
        claimed: &crate::WebhookDelivery,
        runner: &taskgate_core::RunnerId,
        outcome: &crate::DeliveryOutcome,
    ) -> StoreResult<bool>;

    /// [`crate::WebhookStore::record_delivery_soon`]: SQLite's writer makes
    /// it with its next transaction; PostgreSQL now.
    async fn hot_record_delivery_soon(
        &self,
        claimed: &crate::WebhookDelivery,
        runner: &taskgate_core::RunnerId,
        outcome: &crate::DeliveryOutcome,
    ) -> StoreResult<()>;

    /// Outcomes not yet written made, before deliveries are read.
    async fn hot_visible_deliveries(&self) -> StoreResult<()>;

    /// [`crate::WebhookStore::deliver_fresh_to`]: SQLite's writer holds the
    /// deliveries it writes for `sink` (`sqlite/handoff.rs`); PostgreSQL
    /// cannot.
    fn hot_deliver_fresh_to(&self, sink: std::sync::Arc<dyn crate::DeliverySink>) -> bool;
}
