//! PostgreSQL, for several instances sharing one store.

use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::mpsc;

use crate::{PoolOptions, StoreError, StoreResult, TaskEnd};

/// The channel of migration 0007's notifications.
const TASK_ENDED: &str = "taskgate_task_ended";
use crate::sql::{Dialect, Statements, impl_sqlx_hot_writes, impl_store};

static STATEMENTS: LazyLock<Statements> = LazyLock::new(|| {
    Statements::new(&Dialect {
        append_before: "(events::jsonb || jsonb_build_array(",
        append_after: "::jsonb))::text",
    })
});

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub async fn connect(url: &str, settings: PoolOptions) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::InvalidUrl(e.to_string()))?
            .options([(
                "statement_timeout",
                settings.statement_timeout.as_millis().to_string(),
            )]);
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// Follows the `taskgate_task_ended` notifications (migration 0007) on a
    /// connection of its own, re-made after a loss, until the receiver is
    /// dropped.
    async fn listen_task_ends(&self) -> StoreResult<Option<mpsc::Receiver<TaskEnd>>> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(TASK_ENDED).await?;
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(n)) => match TaskEnd::parse(n.payload()) {
                        Some(end) => {
                            if tx.send(end).await.is_err() {
                                return;
                            }
                        }
                        None => tracing::warn!(payload = n.payload(), "unreadable task end"),
                    },
                    // The connection was lost; the next call re-makes it.
                    Ok(None) => tracing::warn!("lost the task-end notifications; reconnecting"),
                    Err(e) => {
                        if tx.is_closed() {
                            return;
                        }
                        tracing::warn!(error = %e, "cannot follow task ends; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(Some(rx))
    }

    async fn run_migrations(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        Ok(())
    }
}

impl_store!(PgStore, "postgres", STATEMENTS);
crate::users::impl_users!(PgStore);
crate::usage::impl_requests!(PgStore);
impl_sqlx_hot_writes!(PgStore, STATEMENTS);
