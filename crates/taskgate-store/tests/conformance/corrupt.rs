//! A stored value that is not a value of its column's type is an error that
//! names the column, on every read path: never a default, never a panic.

use std::sync::Arc;

use sqlx::{AssertSqlSafe, Connection, PgConnection, SqliteConnection};
use taskgate_core::Mode;
use taskgate_store::{Store, StoreError};

use crate::fixtures::{acct, fetch, hash_of, insert, key, new_account, new_key, query, task};

/// Runs one statement on the store's database, beside the store.
async fn raw(url: &str, sql: String) {
    if url.starts_with("sqlite:") {
        let mut conn = SqliteConnection::connect(url).await.expect("open sqlite");
        sqlx::query(AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .expect("raw update");
    } else {
        let mut conn = PgConnection::connect(url).await.expect("open postgres");
        sqlx::query(AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .expect("raw update");
    }
}

fn corrupt_column<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Err(StoreError::Corrupt { column, message }) => {
            assert!(!message.is_empty());
            column
        }
        other => panic!("expected a corrupt column, got {other:?}"),
    }
}

pub async fn corrupt_values_name_their_column(store: Arc<dyn Store>, url: String) {
    let a = acct("acct_a");
    // A task whose status is not a state, through every task read.
    let t = insert(&*store, task("acct_a", "live", "language")).await;
    raw(
        &url,
        format!("UPDATE tasks SET status = 'runing' WHERE id = '{}'", t.id),
    )
    .await;
    assert_eq!(corrupt_column(store.get_task_by_id(t.id).await), "status");
    assert_eq!(
        corrupt_column(store.get_task(a, Mode::Live, t.id).await),
        "status"
    );
    assert_eq!(
        corrupt_column(store.list_tasks(&query("acct_a", "live")).await),
        "status"
    );
    assert_eq!(
        corrupt_column(store.cancel_task(a, Mode::Live, t.id, t.created_at).await),
        "status"
    );

    // Events that are not a list of events; a malformed id.
    let e = insert(&*store, task("acct_a", "test", "language")).await;
    raw(
        &url,
        format!(
            "UPDATE tasks SET events = '[{{\"status\":\"queued\"}}]' WHERE id = '{}'",
            e.id
        ),
    )
    .await;
    assert_eq!(corrupt_column(store.get_task_by_id(e.id).await), "events");
    assert_eq!(
        corrupt_column(store.get_task(a, Mode::Test, e.id).await),
        "events"
    );
    let k = insert(&*store, task("acct_a", "test", "sentiment")).await;
    raw(
        &url,
        format!("UPDATE tasks SET key_id = 'key_nope' WHERE id = '{}'", k.id),
    )
    .await;
    assert_eq!(corrupt_column(store.get_task_by_id(k.id).await), "key_id");

    // An account whose status is neither active nor suspended.
    let acme = new_account(&*store, "Acme").await;
    raw(
        &url,
        format!(
            "UPDATE accounts SET status = 'closed' WHERE id = '{}'",
            acme.id
        ),
    )
    .await;
    assert_eq!(corrupt_column(store.get_account(acme.id).await), "status");
    assert_eq!(corrupt_column(store.list_accounts().await), "status");

    // A key whose scopes or allowed APIs cannot be read is not usable: the
    // look-up fails (it never falls back to "every scope" or "every API").
    let k1 = new_key(&*store, key(acme.id)).await;
    raw(
        &url,
        format!(
            "UPDATE api_keys SET scopes = '[\"tasks:read\",\"root\"]' WHERE id = '{}'",
            k1.id
        ),
    )
    .await;
    assert_eq!(
        corrupt_column(store.find_key_by_hash(&hash_of(&k1)).await),
        "scopes"
    );
    let k2 = new_key(&*store, key(acme.id)).await;
    raw(
        &url,
        format!(
            "UPDATE api_keys SET allowed_apis = 'sentiment' WHERE id = '{}'",
            k2.id
        ),
    )
    .await;
    assert_eq!(corrupt_column(store.get_key(k2.id).await), "allowed_apis");

    // Rows that are sound still read.
    let fine = insert(&*store, task("acct_b", "live", "language")).await;
    assert_eq!(fetch(&*store, fine.id).await, fine);
}
