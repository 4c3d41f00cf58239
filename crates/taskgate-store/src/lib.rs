//! Storage behind traits, with an SQLite backend (the default, embedded) and
//! a PostgreSQL backend. Both run the same SQL text (see `sql/`) except for
//! the few statements whose dialects differ, and both pass one conformance
//! suite (`tests/conformance.rs`). What the shared SQL needs of a backend is
//! declared in `backend.rs`: a new backend implements those traits.
//!
//! Rows are domain types (`records.rs`): statuses, modes and key types are
//! enums, ids are typed, times are [`Timestamp`]s, events and attempts are
//! structs. Each type's column form is defined once in
//! `taskgate_core::column`; a value that does not decode is
//! [`StoreError::Corrupt`], naming the column. Times are stored as Unix
//! milliseconds, documents as JSON text, money as integer micro-USD.
//!
//! A task changes state only by a [`Transition`] of the core's state machine:
//! the conditional updates of `sql/` name their source states from
//! [`Transition::from`], so the machine and the SQL cannot disagree.
//!
//! **One trait per aggregate.** The operations are grouped by what they act
//! on: [`AccountStore`], [`KeyStore`], [`IdempotencyStore`] and
//! [`UsageStore`]; tasks have two, cut by who asks (`tasks.rs`): what clients
//! read and write ([`ClientTasks`]) and the executor's queue, claims, leases
//! and sweeps ([`TaskQueue`]). [`Store`] is all of them plus the backend's own
//! upkeep, and each backend type implements every one. Small traits rather
//! than sections of one: each stays short as the service grows (users and
//! sessions are traits of their own, in `users.rs`), code that needs one
//! aggregate can say so (`&dyn KeyStore`, which a `&dyn Store` coerces to),
//! and a later backend may serve an aggregate from elsewhere. Calls through
//! `dyn Store` need no import; code generic over a backend takes the traits
//! from [`prelude`].

pub mod audit;
mod backend;
mod postgres;
mod records;
mod sql;
mod sqlite;
mod tasks;
mod unavailable;
mod usage;
mod users;
mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;
use taskgate_core::{
    AccountId, AuditContext, ForbiddenTransition, IdempotencyKey, KeyId, Mode, RequestId, TaskId,
    Timestamp,
};

pub use audit::{AuditBreak, AuditCheckpoint, AuditQuery, AuditStore, AuditVerification};
pub use records::*;
pub use taskgate_core::{Attempts, TaskStatus, Transition};
pub use tasks::{Claim, ClientTasks, TaskEnd, TaskQueue};
pub use usage::{RequestBucket, RequestCount, RequestStore, TaskCount};
pub use users::{SessionRecord, SessionStore, UserRecord, UserStore};
pub use webhooks::{
    DeliverySink, Destination, ENQUEUE as ENQUEUE_WEBHOOKS, MAX_ATTEMPTS_KEPT, WebhookStore,
};

/// The store's traits, for `use taskgate_store::prelude::*`.
pub mod prelude {
    pub use crate::{
        AccountStore, AuditStore, ClientTasks, IdempotencyStore, KeyStore, RequestStore,
        SessionStore, Store, TaskQueue, UsageStore, UserStore, WebhookStore,
    };
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    /// A state change the task's state machine forbids, refused before any
    /// write.
    #[error(transparent)]
    Forbidden(#[from] ForbiddenTransition),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("invalid database url: {0}")]
    InvalidUrl(String),
    /// A stored value that does not decode as its column's type.
    #[error("corrupt row: column {column}: {message}")]
    Corrupt { column: String, message: String },
    #[error("sqlite error: {0}")]
    Sqlite(rusqlite::Error),
    /// The writer's transaction did not commit; no write of its batch holds.
    #[error("batch not committed: {0}")]
    Batch(String),
    #[error("the store's writer has stopped")]
    WriterStopped,
    /// The database cannot serve just now (lost, shutting down, out of
    /// connections or disk, busy): classified once, where a driver's error
    /// becomes a `StoreError` (see `unavailable.rs`). Its text is the
    /// driver's, for the log.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// Whether the failure passes by itself or by an operator's hand, not by
    /// changing the request: callers answer `503 storage_unavailable` with
    /// `Retry-After`, never `500`. A writer that has stopped (the store is
    /// shutting down) is one too.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::WriterStopped)
    }

    /// The failure of a whole batch, for each of its jobs (drivers' errors
    /// are not `Clone`): the same class, the same text.
    pub(crate) fn for_each_job(&self) -> StoreError {
        match self {
            StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
            StoreError::WriterStopped => StoreError::WriterStopped,
            e => StoreError::Batch(e.to_string()),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::ColumnDecode { index, source } => StoreError::Corrupt {
                column: index.trim_matches('"').to_owned(),
                message: source.to_string(),
            },
            e if unavailable::sqlx_unavailable(&e) => StoreError::Unavailable(e.to_string()),
            e => StoreError::Database(e),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if unavailable::rusqlite_unavailable(&e) {
            return StoreError::Unavailable(e.to_string());
        }
        StoreError::Sqlite(e)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Accounts.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Writes `account.created` by `audit`'s actor.
    async fn create_account(&self, account: &Account, audit: &AuditContext) -> StoreResult<()>;
    async fn get_account(&self, id: AccountId) -> StoreResult<Option<Account>>;
    async fn list_accounts(&self) -> StoreResult<Vec<Account>>;
    async fn count_accounts(&self) -> StoreResult<i64>;
    /// Writes `account.updated` with the fields that changed (none if
    /// nothing did).
    async fn update_account(
        &self,
        id: AccountId,
        update: &AccountUpdate,
        audit: &AuditContext,
    ) -> StoreResult<Option<Account>>;
}

/// API keys (their records; secrets are stored only as hashes).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Writes `key.created` (the key's hint, never its secret nor hash).
    async fn create_key(
        &self,
        key: &KeyRecord,
        key_hash: &str,
        audit: &AuditContext,
    ) -> StoreResult<()>;
    async fn get_key(&self, id: KeyId) -> StoreResult<Option<KeyRecord>>;
    /// The key with this hash and its account, whatever their state.
    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<(KeyRecord, Account)>>;
    async fn list_keys(&self, account_id: AccountId) -> StoreResult<Vec<KeyRecord>>;
    /// The account's keys of `mode` after `after` (by id, oldest first), at
    /// most `limit`: a page of a long list.
    async fn list_keys_page(
        &self,
        account_id: AccountId,
        mode: Mode,
        after: Option<KeyId>,
        limit: i64,
    ) -> StoreResult<Vec<KeyRecord>>;
    /// How many keys of `mode` the account has, and how many of them work at
    /// `now` (neither revoked nor expired).
    async fn count_keys(
        &self,
        account_id: AccountId,
        mode: Mode,
        now: Timestamp,
    ) -> StoreResult<(i64, i64)>;
    /// Writes `key.revoked` unless it was revoked already.
    async fn revoke_key(
        &self,
        id: KeyId,
        at: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<Option<KeyRecord>>;
    /// Creates `new` and makes `old_id` expire at `old_expires_at`,
    /// atomically; writes `key.rolled` of the old key.
    async fn roll_key(
        &self,
        old_id: KeyId,
        new: &KeyRecord,
        new_hash: &str,
        old_expires_at: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<()>;
    async fn touch_keys(&self, used: &[(KeyId, Timestamp)]) -> StoreResult<()>;
}

/// Idempotency keys and the answers they replay. A record is fenced by its
/// `owner`, the request holding the key: attach, complete and abandon change
/// it only for that request, so a request whose key was taken over (it was
/// presumed dead) cannot overwrite or free its successor's record.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    async fn idempotency_begin(&self, begin: &IdempotencyBegin) -> StoreResult<IdempotencyState>;
    /// Records the task `owner` created for the key, as soon as it exists.
    /// Whether `owner` still holds the key.
    async fn idempotency_attach(
        &self,
        account_id: AccountId,
        mode: Mode,
        key: &IdempotencyKey,
        owner: RequestId,
        task_id: TaskId,
    ) -> StoreResult<bool>;
    /// Stores the answer to replay. Whether `owner` still held the key.
    async fn idempotency_complete(
        &self,
        account_id: AccountId,
        mode: Mode,
        key: &IdempotencyKey,
        owner: RequestId,
        status_code: i64,
        response: &str,
    ) -> StoreResult<bool>;
    /// Frees the key of a request refused before it made a task: only while
    /// `owner` holds it, unanswered and without a task.
    async fn idempotency_abandon(
        &self,
        account_id: AccountId,
        mode: Mode,
        key: &IdempotencyKey,
        owner: RequestId,
    ) -> StoreResult<()>;
    async fn idempotency_purge(&self, created_before: Timestamp) -> StoreResult<u64>;
}

/// What accounts have spent (written as tasks finish, see
/// [`TaskQueue::finish_task`]).
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Micro-USD spent by the account in `month` (`YYYY-MM`, UTC).
    async fn month_spend(&self, account_id: AccountId, month: &str) -> StoreResult<i64>;
    /// Micro-USD reserved in `month` by the account's calls still running.
    async fn month_reserved(&self, account_id: AccountId, month: &str) -> StoreResult<i64>;
    /// Reserves `amount` of the account's spend in `month`, if its spend and
    /// reservations are below `limit` and stay within it with this one: the
    /// check and the reservation are one atomic step. Whether it reserved.
    /// The task made for the call carries the amount (`reserved_micros`), and
    /// its end gives it back ([`TaskQueue::finish_task`], cancel, interrupt).
    async fn reserve_spend(
        &self,
        account_id: AccountId,
        month: &str,
        amount: i64,
        limit: i64,
    ) -> StoreResult<bool>;
    /// Gives back a reservation no task holds (its call was refused after
    /// reserving).
    async fn release_spend(
        &self,
        account_id: AccountId,
        month: &str,
        amount: i64,
    ) -> StoreResult<()>;
}

/// Every durable operation the service performs, on one backend.
#[async_trait]
pub trait Store:
    AccountStore
    + KeyStore
    + ClientTasks
    + TaskQueue
    + IdempotencyStore
    + UsageStore
    + UserStore
    + SessionStore
    + RequestStore
    + WebhookStore
    + AuditStore
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    async fn migrate(&self) -> StoreResult<()>;
    async fn ping(&self) -> StoreResult<()>;
    /// The ends of tasks (succeeded, failed, cancelled) written by any process
    /// sharing this store, from now on, as they commit; `None` where one
    /// process owns the store (SQLite), which knows its own. Ends that
    /// commit while the connection is being re-made are missed: callers keep
    /// a slower way to learn of them.
    async fn task_ends(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<TaskEnd>>>;
}

/// How the store's connections are pooled (PostgreSQL; SQLite has its own
/// fixed pools).
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Connections kept at most.
    pub max_connections: u32,
    /// Longest wait for a connection: past it, the operation fails (503), so
    /// a database that is down is an answer, not a hang.
    pub acquire_timeout: std::time::Duration,
    /// Longest run of one statement before the database cancels it.
    pub statement_timeout: std::time::Duration,
    /// How many times a batch of writes that met a serialization failure or
    /// a deadlock (other instances writing the same rows) is run again.
    pub retries: u32,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: std::time::Duration::from_secs(3),
            statement_timeout: std::time::Duration::from_secs(30),
            retries: 3,
        }
    }
}

/// Opens the store named by `url`: `sqlite://path/to/file.db` (created with its
/// directory if missing) or `postgres://…`.
pub async fn connect(url: &str) -> StoreResult<Arc<dyn Store>> {
    connect_with(url, PoolOptions::default()).await
}

/// [`connect`] with pool settings.
pub async fn connect_with(url: &str, pool: PoolOptions) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgStore::connect(url, pool).await?))
    } else {
        Err(StoreError::InvalidUrl(
            "expected sqlite://PATH or postgres://…".to_owned(),
        ))
    }
}

/// The database driver's error type, for callers that classify failures.
pub mod sqlx_error {
    pub use sqlx::Error;
}
