//! Many tasks inserted in one statement, an array of values per column.

use std::sync::LazyLock;

use sqlx::PgConnection;
use taskgate_core::Timestamp;
use taskgate_core::column::TextColumn;

use crate::TaskRecord;

pub(super) fn text<T: TextColumn>(v: &T) -> String {
    v.to_text().into_owned()
}

fn texts<'a, T: TextColumn + 'a>(v: impl Iterator<Item = Option<&'a T>>) -> Vec<Option<String>> {
    v.map(|x| x.map(text)).collect()
}

/// Many tasks in one statement: an array of values per column.
pub(super) async fn insert_many(
    conn: &mut PgConnection,
    tasks: &[&TaskRecord],
    flush: bool,
) -> Result<(), sqlx::Error> {
    let strings = |f: fn(&TaskRecord) -> String| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    let ints = |f: fn(&TaskRecord) -> i64| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    let some_ints =
        |f: fn(&TaskRecord) -> Option<i64>| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    sqlx::query(if flush {
        INSERT_MANY.as_str()
    } else {
        INSERT_MANY_UNFLUSHED.as_str()
    })
    .bind(strings(|t| t.id.to_string()))
    .bind(strings(|t| t.account_id.to_string()))
    .bind(strings(|t| text(&t.mode)))
    .bind(strings(|t| text(&t.api)))
    .bind(strings(|t| text(&t.status)))
    .bind(strings(|t| t.input.clone()))
    .bind(tasks.iter().map(|t| t.output.clone()).collect::<Vec<_>>())
    .bind(texts(tasks.iter().map(|t| t.error.as_ref())))
    .bind(ints(|t| t.units))
    .bind(some_ints(|t| t.input_tokens))
    .bind(some_ints(|t| t.output_tokens))
    .bind(ints(|t| t.cost_micros))
    .bind(strings(|t| t.metadata.clone()))
    .bind(strings(|t| t.key_id.to_string()))
    .bind(texts(tasks.iter().map(|t| t.idempotency_key.as_ref())))
    .bind(ints(|t| t.timeout_ms))
    .bind(texts(tasks.iter().map(|t| t.sandbox.as_ref())))
    .bind(strings(|t| text(&t.events)))
    .bind(strings(|t| text(&t.attempts)))
    .bind(ints(|t| t.created_at.unix_ms()))
    .bind(some_ints(|t| t.started_at.map(Timestamp::unix_ms)))
    .bind(some_ints(|t| t.completed_at.map(Timestamp::unix_ms)))
    .bind(texts(tasks.iter().map(|t| t.runner.as_ref())))
    .bind(some_ints(|t| t.lease_until.map(Timestamp::unix_ms)))
    .bind(ints(|t| t.reserved_micros))
    .bind(some_ints(|t| t.reasoning_tokens))
    .bind(some_ints(|t| t.cached_input_tokens))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The insert of many tasks, with a `WHERE` clause.
macro_rules! insert_rows {
    ($where:literal) => { concat!("INSERT INTO tasks (id, account_id, mode, api, status, input, output, error, \
     units, input_tokens, output_tokens, cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, \
     events, attempts, created_at, started_at, completed_at, runner, lease_until, reserved_micros, \
     reasoning_tokens, cached_input_tokens) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
     $7::text[], $8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], \
     $14::text[], $15::text[], $16::bigint[], $17::text[], $18::text[], $19::text[], $20::bigint[], \
     $21::bigint[], $22::bigint[], $23::text[], $24::bigint[], $25::bigint[], $26::bigint[], \
     $27::bigint[])", $where) };
}

/// [`crate::sql::INSERT_TASK`]'s columns, from one array each, with the
/// deliveries of the webhooks of tasks stored running (or ended).
static INSERT_MANY: LazyLock<String> = LazyLock::new(|| with_webhooks(insert_rows!("")));

/// [`INSERT_MANY`], its transaction committed without waiting for the WAL
/// flush: `set_config(…, true)` is `SET LOCAL` inside the statement, so no
/// round trip is added (a statement alone is its own transaction). The
/// setting is read at commit; the rows are visible to every session at
/// once either way.
static INSERT_MANY_UNFLUSHED: LazyLock<String> = LazyLock::new(|| {
    with_webhooks(insert_rows!(
        " WHERE set_config('synchronous_commit', 'off', true) = 'off'"
    ))
});

/// `insert` and, in the same statement, the deliveries of the start (and
/// end) of each task it stores already running (or ended).
fn with_webhooks(insert: &str) -> String {
    format!(
        "WITH ins AS ({insert} RETURNING id, account_id, mode, status, started_at, completed_at), \
         hooks AS ({}) SELECT 1",
        crate::webhooks::enqueue_from(
            "(SELECT id, account_id, mode, 'task.running' AS event, started_at AS at FROM ins \
             WHERE started_at IS NOT NULL UNION ALL SELECT id, account_id, mode, \
             'task.' || status, completed_at FROM ins \
             WHERE status IN ('succeeded', 'failed', 'cancelled'))"
        )
    )
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use super::*;
    use crate::postgres::batch::testing::task;

    /// The unflushed insert turns `synchronous_commit` off for its own
    /// transaction only; the other leaves the session's setting alone.
    #[tokio::test]
    async fn the_unflushed_insert_commits_asynchronously_and_the_other_does_not() {
        let mut conn = match PgConnection::connect_with(&crate::postgres::test_server()).await {
            Ok(conn) => conn,
            Err(e) => return crate::postgres::without_server("the unflushed insert's check", e),
        };
        // A table of this session's own, shadowing `tasks`, with its columns.
        sqlx::raw_sql(
            "CREATE TEMP TABLE tasks (id text, account_id text, mode text, api text, \
             status text, input text, output text, error text, units bigint, \
             input_tokens bigint, output_tokens bigint, cost_micros bigint, metadata text, \
             key_id text, idempotency_key text, timeout_ms bigint, sandbox text, events text, \
             attempts text, created_at bigint, started_at bigint, completed_at bigint, \
             runner text, lease_until bigint, reserved_micros bigint, \
             reasoning_tokens bigint, cached_input_tokens bigint); \
             CREATE TEMP TABLE webhook_endpoints (id text, account_id text, mode text, \
             events bigint, disabled text); \
             CREATE TEMP TABLE task_webhooks (task_id text, account_id text, mode text, \
             url text, events bigint); \
             CREATE TEMP TABLE webhook_event_types (bit bigint, name text); \
             CREATE TEMP TABLE webhook_deliveries (account_id text, mode text, event_type text, \
             task_id text, endpoint_id text, url text, status text, attempts text, \
             next_attempt_at bigint, created_at bigint)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        let setting = async |conn: &mut PgConnection| -> String {
            sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
                .fetch_one(conn)
                .await
                .unwrap()
        };
        let session = setting(&mut conn).await;
        assert_ne!(session, "off", "the test needs a server that flushes");
        for (flush, within) in [(false, "off"), (true, session.as_str())] {
            let (a, b) = (task(), task());
            sqlx::raw_sql("BEGIN").execute(&mut conn).await.unwrap();
            insert_many(&mut conn, &[&a, &b], flush).await.unwrap();
            assert_eq!(setting(&mut conn).await, within, "flush: {flush}");
            sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
            assert_eq!(setting(&mut conn).await, session, "after the transaction");
        }
        let (stored,): (i64,) = sqlx::query_as("SELECT count(*) FROM tasks")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(stored, 4);
    }
}
