//! PostgreSQL, for several instances sharing one store.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::StoreResult;
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
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(Self { pool })
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
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
