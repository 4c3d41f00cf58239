//! The embedded default: SQLite in WAL mode.
//!
//! The hot path (tasks created, claimed, finished, cancelled, read and
//! listed) runs on rusqlite: writes through one batching writer thread
//! (`writer.rs`), reads on read-only connections (`readers.rs`). Everything
//! else goes through sqlx: writes through a pool of one connection, reads
//! through their own pool (WAL lets readers run beside the writer).

use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::sql::Param;
use crate::sql::impl_store;
use crate::{StoreError, StoreResult, TaskFinish, TaskQuery, TaskRecord};

mod readers;
mod writer;

use readers::Readers;
use writer::{Writer, bind};

mod dialect {
    crate::sql::dialect_statements!("json_insert(events, '$[#]', json(", "))");
}

pub struct SqliteStore {
    /// Writes off the hot path (accounts, keys, idempotency, leases).
    write: SqlitePool,
    read: SqlitePool,
    /// The hot path's task writes, batched.
    tasks: Writer,
    /// The hot path's task reads.
    task_reads: Readers,
}

impl SqliteStore {
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::InvalidUrl(e.to_string()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL in WAL mode: a commit survives a crash of the process
            // (kill -9); only an OS crash or power loss can lose the last ones.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        if let Some(dir) = options.get_filename().parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::InvalidUrl(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone().read_only(true))
            .await?;
        let tasks = Writer::open(options.get_filename())?;
        let task_reads = Readers::new(options.get_filename());
        Ok(Self {
            write,
            read,
            tasks,
            task_reads,
        })
    }

    fn writer(&self) -> &SqlitePool {
        &self.write
    }

    fn reader(&self) -> &SqlitePool {
        &self.read
    }

    async fn run_migrations(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.write)
            .await?;
        Ok(())
    }
}

impl_store!(SqliteStore, sqlx::Sqlite, "sqlite", dialect);

/// The hot-path task writes, through the batching writer with the same SQL
/// text as the other backends.
impl SqliteStore {
    async fn hot_insert_task(&self, t: &TaskRecord) -> StoreResult<()> {
        let t = t.clone();
        self.tasks
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(crate::sql::INSERT_TASK)?;
                bind(
                    &mut stmt,
                    &[
                        &t.id,
                        &t.account_id,
                        &t.mode,
                        &t.api,
                        &t.status,
                        &t.input,
                        &t.output,
                        &t.error,
                        &t.units,
                        &t.input_tokens,
                        &t.output_tokens,
                        &t.cost_micros,
                        &t.metadata,
                        &t.key_id,
                        &t.idempotency_key,
                        &t.timeout_ms,
                        &t.sandbox,
                        &t.events,
                        &t.attempts,
                        &t.created_at,
                        &t.started_at,
                        &t.completed_at,
                        &t.runner,
                        &t.lease_until,
                    ],
                )?;
                stmt.raw_execute()?;
                Ok(())
            })
            .await
    }

    async fn hot_claim_task(
        &self,
        id: &str,
        runner: &str,
        now: i64,
        lease_until: i64,
        event: String,
    ) -> StoreResult<Option<TaskRecord>> {
        let (id, runner) = (id.to_owned(), runner.to_owned());
        self.tasks
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(dialect::CLAIM_TASK)?;
                bind(&mut stmt, &[&id, &now, &runner, &lease_until, &event])?;
                let mut rows = stmt.raw_query();
                rows.next()?.map(task_from_row).transpose()
            })
            .await
    }

    async fn hot_finish_task(&self, id: &str, f: &TaskFinish) -> StoreResult<bool> {
        let (id, f) = (id.to_owned(), f.clone());
        self.tasks
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(dialect::FINISH_TASK)?;
                bind(
                    &mut stmt,
                    &[
                        &id,
                        &f.status,
                        &f.output,
                        &f.error,
                        &f.units,
                        &f.input_tokens,
                        &f.output_tokens,
                        &f.cost_micros,
                        &f.attempts,
                        &f.completed_at,
                        &f.event,
                    ],
                )?;
                if stmt.raw_execute()? != 1 {
                    // Cancelled (or ended by the sweeper) meanwhile: drop the result.
                    return Ok(false);
                }
                if let (Some(account), true) = (&f.charge_account, f.cost_micros > 0) {
                    let mut spend = conn.prepare_cached(crate::sql::UPSERT_SPEND)?;
                    let month = taskgate_core::timefmt::month_key(f.completed_at);
                    bind(&mut spend, &[account, &month, &f.cost_micros])?;
                    spend.raw_execute()?;
                }
                Ok(true)
            })
            .await
    }

    async fn hot_cancel_task(
        &self,
        account_id: &str,
        mode: &str,
        id: &str,
        now: i64,
        event: String,
    ) -> StoreResult<Option<TaskRecord>> {
        let (account_id, mode, id) = (account_id.to_owned(), mode.to_owned(), id.to_owned());
        self.tasks
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(dialect::CANCEL_TASK)?;
                bind(&mut stmt, &[&id, &account_id, &mode, &now, &event])?;
                let mut rows = stmt.raw_query();
                rows.next()?.map(task_from_row).transpose()
            })
            .await
    }
}

impl SqliteStore {
    async fn hot_get_task(
        &self,
        account_id: &str,
        mode: &str,
        id: &str,
    ) -> StoreResult<Option<TaskRecord>> {
        let (account_id, mode, id) = (account_id.to_owned(), mode.to_owned(), id.to_owned());
        self.task_reads
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(crate::sql::GET_TASK)?;
                bind(&mut stmt, &[&id, &account_id, &mode])?;
                let mut rows = stmt.raw_query();
                rows.next()?.map(task_from_row).transpose()
            })
            .await
    }

    async fn hot_list_tasks(&self, q: &TaskQuery) -> StoreResult<Vec<TaskRecord>> {
        let (sql, params) = crate::sql::list_tasks_sql(q);
        self.task_reads
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(&sql)?;
                let values: Vec<&dyn rusqlite::ToSql> = params
                    .iter()
                    .map(|p| match p {
                        Param::Text(s) => s as &dyn rusqlite::ToSql,
                        Param::Int(i) => i as &dyn rusqlite::ToSql,
                    })
                    .collect();
                bind(&mut stmt, &values)?;
                let mut rows = stmt.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(task_from_row(row)?);
                }
                Ok(out)
            })
            .await
    }
}

/// A row of `task_columns!()`, in that order.
fn task_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: r.get(0)?,
        account_id: r.get(1)?,
        mode: r.get(2)?,
        api: r.get(3)?,
        status: r.get(4)?,
        input: r.get(5)?,
        output: r.get(6)?,
        error: r.get(7)?,
        units: r.get(8)?,
        input_tokens: r.get(9)?,
        output_tokens: r.get(10)?,
        cost_micros: r.get(11)?,
        metadata: r.get(12)?,
        key_id: r.get(13)?,
        idempotency_key: r.get(14)?,
        timeout_ms: r.get(15)?,
        sandbox: r.get(16)?,
        events: r.get(17)?,
        attempts: r.get(18)?,
        created_at: r.get(19)?,
        started_at: r.get(20)?,
        completed_at: r.get(21)?,
        runner: r.get(22)?,
        lease_until: r.get(23)?,
    })
}
