//! Storage behind one trait, with an SQLite backend (the default, embedded) and
//! a PostgreSQL backend. Both run the same SQL text (see `sql.rs`) except for
//! the few statements whose dialects differ, and both pass one conformance
//! suite (`tests/conformance.rs`).
//!
//! Times are Unix milliseconds, JSON documents are stored as text, and money is
//! integer micro-USD, so one row type decodes from either database.

mod postgres;
mod records;
mod sql;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

pub use records::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("invalid database url: {0}")]
    InvalidUrl(String),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("sqlite error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the store's writer has stopped")]
    WriterStopped,
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Every durable operation the service performs.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    async fn migrate(&self) -> StoreResult<()>;
    async fn ping(&self) -> StoreResult<()>;

    // Accounts.
    async fn create_account(&self, account: &Account) -> StoreResult<()>;
    async fn get_account(&self, id: &str) -> StoreResult<Option<Account>>;
    async fn list_accounts(&self) -> StoreResult<Vec<Account>>;
    async fn count_accounts(&self) -> StoreResult<i64>;
    async fn update_account(
        &self,
        id: &str,
        update: &AccountUpdate,
    ) -> StoreResult<Option<Account>>;

    // API keys.
    async fn create_key(&self, key: &KeyRecord, key_hash: &str) -> StoreResult<()>;
    async fn get_key(&self, id: &str) -> StoreResult<Option<KeyRecord>>;
    /// The key with this hash and its account, whatever their state.
    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<(KeyRecord, Account)>>;
    async fn list_keys(&self, account_id: &str) -> StoreResult<Vec<KeyRecord>>;
    async fn revoke_key(&self, id: &str, at: i64) -> StoreResult<Option<KeyRecord>>;
    /// Creates `new` and makes `old_id` expire at `old_expires_at`, atomically.
    async fn roll_key(
        &self,
        old_id: &str,
        new: &KeyRecord,
        new_hash: &str,
        old_expires_at: i64,
    ) -> StoreResult<()>;
    async fn touch_keys(&self, used: &[(String, i64)]) -> StoreResult<()>;

    // Tasks.
    async fn insert_task(&self, task: &TaskRecord) -> StoreResult<()>;
    async fn get_task(
        &self,
        account_id: &str,
        mode: &str,
        id: &str,
    ) -> StoreResult<Option<TaskRecord>>;
    async fn get_task_by_id(&self, id: &str) -> StoreResult<Option<TaskRecord>>;
    async fn list_tasks(&self, query: &TaskQuery) -> StoreResult<Vec<TaskRecord>>;
    /// `queued → running` if the task is still queued; the claimed task.
    async fn claim_task(
        &self,
        id: &str,
        runner: &str,
        now: i64,
        lease_until: i64,
    ) -> StoreResult<Option<TaskRecord>>;
    /// `running → succeeded|failed`, only if the task is still running (a
    /// cancelled task's late result is dropped). Adds `finish.cost_micros` to
    /// the account's spend for the month of `finish.completed_at` when live.
    async fn finish_task(&self, id: &str, finish: &TaskFinish) -> StoreResult<bool>;
    /// `queued|running → cancelled`. Returns the task as it stands afterwards.
    async fn cancel_task(
        &self,
        account_id: &str,
        mode: &str,
        id: &str,
        now: i64,
    ) -> StoreResult<Option<TaskRecord>>;
    /// Records the attempts of a task cancelled while it ran (its execution
    /// learns of the cancel only after the cancel is stored). Changes nothing
    /// unless the task is `cancelled`; returns whether it did.
    async fn record_cancelled_attempts(&self, id: &str, attempts: &str) -> StoreResult<bool>;
    /// Ids of queued tasks, oldest first.
    async fn queued_task_ids(&self, limit: i64) -> StoreResult<Vec<String>>;
    /// Extends the leases of those of `ids` that `runner` is running: the
    /// tasks it is executing now, so a task whose execution was lost stops
    /// being renewed and the sweeper ends it.
    async fn renew_leases(
        &self,
        runner: &str,
        ids: &[String],
        lease_until: i64,
    ) -> StoreResult<u64>;
    /// Running tasks whose runner stopped renewing its lease, or whose runner
    /// is `dead_runner` (this instance's previous life), end `failed` with
    /// `interrupted`. Returns their ids.
    async fn interrupt_expired(
        &self,
        now: i64,
        dead_runner: Option<&str>,
    ) -> StoreResult<Vec<String>>;

    // Idempotency keys.
    async fn idempotency_begin(&self, begin: &IdempotencyBegin) -> StoreResult<IdempotencyState>;
    async fn idempotency_complete(
        &self,
        account_id: &str,
        mode: &str,
        key: &str,
        status_code: i64,
        response: &str,
    ) -> StoreResult<()>;
    async fn idempotency_abandon(&self, account_id: &str, mode: &str, key: &str)
    -> StoreResult<()>;
    async fn idempotency_purge(&self, created_before: i64) -> StoreResult<u64>;

    // Spend.
    async fn month_spend(&self, account_id: &str, month: &str) -> StoreResult<i64>;
}

/// Opens the store named by `url`: `sqlite://path/to/file.db` (created with its
/// directory if missing) or `postgres://…`.
pub async fn connect(url: &str) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgStore::connect(url).await?))
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
