//! The embedded default: SQLite in WAL mode.
//!
//! The hot path (tasks created, claimed, finished, cancelled, read and
//! listed; `hot_path.rs`) runs on rusqlite: writes on one connection,
//! committed by their caller when nothing else is writing and in batches by a
//! writer thread under load (`writer.rs`), reads on read-only connections
//! (`readers.rs`). Everything
//! else goes through sqlx: writes through a pool of one connection, reads
//! through their own pool (WAL lets readers run beside the writer).

use std::str::FromStr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::backend::SqlBackend;
use crate::sql::{Dialect, Statements, impl_store};
use crate::{StoreError, StoreResult};

mod claim;
mod handoff;
mod held;
mod hot_path;
mod readers;
mod writer;

use held::Held;
use readers::Readers;
use writer::Writer;

static STATEMENTS: LazyLock<Statements> = LazyLock::new(|| {
    Statements::new(&Dialect {
        append_before: "json_insert(events, '$[#]', json(",
        append_after: "))",
    })
});

pub struct SqliteStore {
    /// Writes off the hot path (accounts, keys, idempotency, leases).
    write: SqlitePool,
    read: SqlitePool,
    /// The hot path's task writes, batched.
    tasks: Writer,
    /// The hot path's task reads.
    task_reads: Readers,
    /// Sync calls' tasks not yet in the table (`held.rs`).
    held: Arc<Held>,
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
            // The writer's checkpoint thread copies the WAL back, not a
            // commit that happens to cross a size (see `writer`).
            .pragma("wal_autocheckpoint", "0")
            .foreign_keys(true);
        private_files(options.get_filename())?;
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone().read_only(true))
            .await?;
        let held = Arc::new(Held::default());
        let tasks = Writer::open(options.get_filename(), held.clone())?;
        let task_reads = Readers::new(options.get_filename());
        Ok(Self {
            write,
            read,
            tasks,
            task_reads,
            held,
        })
    }
}

/// The database holds inputs, outputs and password hashes: its directory is
/// created `0700` and the database `0600` before SQLite opens it (SQLite
/// gives its `-wal` and `-shm` files the database's mode). Files an older
/// version left readable by others are made `0600`; a directory that exists
/// is the operator's and keeps its mode.
fn private_files(db: &std::path::Path) -> StoreResult<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if db.as_os_str().is_empty() || db == std::path::Path::new(":memory:") {
        return Ok(());
    }
    let failed = |what: &std::path::Path, e: std::io::Error| {
        StoreError::InvalidUrl(format!("cannot create {}: {e}", what.display()))
    };
    if let Some(dir) = db.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| failed(dir, e))?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(db)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(db, e)),
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = std::path::PathBuf::from(name);
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.permissions().mode() & 0o077 != 0
            && let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        {
            tracing::warn!(file = %path.display(), error = %e, "cannot make a database file private (0600)");
        }
    }
    Ok(())
}

impl SqlBackend for SqliteStore {
    type Db = sqlx::Sqlite;

    const NAME: &'static str = "sqlite";

    fn statements() -> &'static Statements {
        &STATEMENTS
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
        let (any,): (bool,) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM webhook_endpoints) OR EXISTS (SELECT 1 FROM task_webhooks)",
        )
        .fetch_one(&self.read)
        .await?;
        if any {
            self.webhooks_in_use();
        }
        Ok(())
    }

    fn webhooks_in_use(&self) {
        hot_path::WEBHOOKS_IN_USE.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// One process owns a SQLite store: it knows its own tasks' ends.
    async fn listen_task_ends(
        &self,
    ) -> StoreResult<Option<tokio::sync::mpsc::Receiver<crate::TaskEnd>>> {
        Ok(None)
    }
}

impl_store!(SqliteStore);

#[cfg(test)]
mod statement_tests;
