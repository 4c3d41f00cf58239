//! Read-only SQLite connections for the hot reads (a task, a page of tasks).
//!
//! Each query runs whole on a blocking thread: one hand-off per query, where
//! sqlx would hand every row across threads. WAL lets readers run beside the
//! writer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use std::sync::Mutex;

use crate::{StoreError, StoreResult};

const KEEP: usize = 8;

pub struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(conn)
    }

    pub async fn run<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let conn = match self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            Some(c) => c,
            None => self.open()?,
        };
        let (conn, result) = tokio::task::spawn_blocking(move || {
            let result = work(&conn);
            (conn, result)
        })
        .await
        .map_err(|_| StoreError::WriterStopped)?;
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < KEEP {
            idle.push(conn);
        }
        result
    }
}
