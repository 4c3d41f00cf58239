//! Storage failures are classified by the database's own codes: what
//! passes by itself or by an operator's hand (a lost connection, a shutdown,
//! no resources, a busy or read-only file) is `Unavailable` (the server's
//! `503 storage_unavailable`), a statement's own fault is not. Real errors
//! of each backend, raised beside the store, and sessions of the store's own
//! ended under it as `pg_ctl stop -m fast` ends them.

use std::sync::Arc;

use sqlx::{AssertSqlSafe, Connection, PgConnection, SqliteConnection};
use taskgate_store::{Store, StoreError};

use crate::fixtures::{fetch, insert, new_account, task};

/// `sql`'s error, through the store's classification.
async fn error_of(url: &str, sql: &str) -> StoreError {
    let result = if url.starts_with("sqlite:") {
        let mut conn = SqliteConnection::connect(url).await.expect("open sqlite");
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .map(drop)
    } else {
        let mut conn = PgConnection::connect(url).await.expect("open postgres");
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .map(drop)
    };
    StoreError::from(result.expect_err(sql))
}

pub async fn driver_errors_are_classified(store: Arc<dyn Store>, url: String) {
    new_account(&*store, "acct_a").await;
    if url.starts_with("sqlite:") {
        // A file that cannot be written (`query_only` stands in for a
        // read-only mount): SQLITE_READONLY.
        let e = error_of(
            &url,
            "PRAGMA query_only = ON; UPDATE accounts SET name = 'x'",
        )
        .await;
        assert!(e.is_unavailable(), "{e}");
        for sql in [
            "INSERT INTO accounts SELECT * FROM accounts",
            "SELECT * FROM no_such_table",
        ] {
            let e = error_of(&url, sql).await;
            assert!(!e.is_unavailable(), "{sql}: {e}");
        }
        return;
    }
    let raise = |code: &str| {
        format!("DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '{code}'; END $$")
    };
    for code in [
        "08006", "08001", "53100", "53200", "53300", "57P01", "57P02", "57P03", "57014", "58030",
        "25006",
    ] {
        let e = error_of(&url, &raise(code)).await;
        assert!(e.is_unavailable(), "{code}: {e}");
    }
    for code in ["23505", "22P02", "42601", "XX000", "P0001"] {
        let e = error_of(&url, &raise(code)).await;
        assert!(!e.is_unavailable(), "{code}: {e}");
    }

    // The store's sessions ended under it, as a fast shutdown ends them
    // (`57P01 terminating connection due to administrator command`): each
    // operation succeeds (on a new connection) or is unavailable, never
    // another error.
    let t = insert(&*store, task("acct_a", "live", "sentiment")).await;
    for round in 0..3 {
        let mut admin = PgConnection::connect(&url).await.expect("open postgres");
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .execute(&mut admin)
        .await
        .expect("terminate the store's sessions");
        let _ = admin.close().await;
        let inserted = store
            .insert_task(&task("acct_a", "live", "sentiment"))
            .await;
        let read = store.get_task_by_id(t.id).await;
        let listed = store.list_accounts().await;
        for (what, e) in [
            ("insert", inserted.err()),
            ("read", read.err()),
            ("list", listed.err()),
        ] {
            if let Some(e) = e {
                assert!(e.is_unavailable(), "round {round}, {what}: {e}");
            }
        }
    }
    // And the store serves again by itself.
    let again = insert(&*store, task("acct_a", "live", "sentiment")).await;
    assert_eq!(fetch(&*store, again.id).await.id, again.id);
}
