//! `[database]`: PostgreSQL's pool size and timeouts.

use serde::{Deserialize, Serialize};

/// `[database]`: the PostgreSQL connection pool (SQLite keeps its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connections per instance at most.
    pub max_connections: u32,
    /// Longest wait for a connection; past it the request is answered 503
    /// `storage_unavailable`, so a database that is down is never a hang.
    pub acquire_timeout_ms: u64,
    /// Longest run of one statement before PostgreSQL cancels it.
    pub statement_timeout_ms: u64,
    /// Times a batch of task writes that met a serialization failure or a
    /// deadlock is run again before its writes fail.
    pub retries: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        let d = taskgate_store::PoolOptions::default();
        Self {
            max_connections: d.max_connections,
            acquire_timeout_ms: d.acquire_timeout.as_millis() as u64,
            statement_timeout_ms: d.statement_timeout.as_millis() as u64,
            retries: d.retries,
        }
    }
}

impl DatabaseConfig {
    pub fn pool(&self) -> taskgate_store::PoolOptions {
        taskgate_store::PoolOptions {
            max_connections: self.max_connections,
            acquire_timeout: std::time::Duration::from_millis(self.acquire_timeout_ms),
            statement_timeout: std::time::Duration::from_millis(self.statement_timeout_ms),
            retries: self.retries,
        }
    }
}
