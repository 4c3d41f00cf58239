//! The embedded default: SQLite in WAL mode.
//!
//! Writes go through a pool of one connection, so they queue in-process instead
//! of contending for SQLite's lock; reads use their own pool (WAL lets them run
//! beside the writer).

use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::sql::impl_store;
use crate::{StoreError, StoreResult};

mod dialect {
    crate::sql::dialect_statements!("json_insert(events, '$[#]', json(", "))");
}

pub struct SqliteStore {
    write: SqlitePool,
    read: SqlitePool,
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
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self { write, read })
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
