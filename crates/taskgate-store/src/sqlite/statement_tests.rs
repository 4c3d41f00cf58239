//! How SQLite runs the store's statements whose cost could grow unseen: the
//! outbox's claim with a long backlog, and statements run again with new
//! values (each must not be prepared again, `sql/mod.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{Connection, StatementStatus, params};
use taskgate_core::{AccountId, RunnerId, Timestamp, WebhookEndpointId};

use crate::TaskQuery;
use crate::sql::{Param, list_tasks_sql};

/// An in-memory database with every migration applied.
fn migrated() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    for f in files {
        conn.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    conn
}

/// `n` deliveries of `account` to `dest`, due at 1..=n.
fn waiting(conn: &Connection, account: AccountId, dest: WebhookEndpointId, n: i64) {
    let mut insert = conn
        .prepare(
            "INSERT INTO webhook_deliveries (account_id, mode, event_type, endpoint_id, status, \
             attempts, next_attempt_at, created_at) \
             VALUES (?1, 'live', 'task.succeeded', ?2, 'pending', '[]', ?3, ?3)",
        )
        .unwrap();
    for at in 1..=n {
        insert.execute(params![account, dest, at]).unwrap();
    }
}

/// What `run` gives, and the VM steps of the statements it ran on `conn`.
fn counting_steps<T>(conn: &Connection, run: impl FnOnce() -> T) -> (T, usize) {
    let steps = Arc::new(AtomicUsize::new(0));
    let counted = steps.clone();
    conn.progress_handler(
        1,
        Some(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            false
        }),
    )
    .unwrap();
    let got = run();
    conn.progress_handler(1, None::<fn() -> bool>).unwrap();
    (got, steps.load(Ordering::Relaxed))
}

/// The claim (`claim.rs`), run with these values in a transaction of its
/// own: the destinations of the deliveries it held, and the VM steps of all
/// its statements.
fn claim(conn: &Connection, runner: &str, now: i64, limit: i64) -> (Vec<String>, usize) {
    let runner = RunnerId::parse(runner).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (got, steps) = counting_steps(conn, || {
        super::claim::claim_deliveries(
            conn,
            &runner,
            Timestamp::from_unix_ms(now),
            Timestamp::from_unix_ms(now + 60_000),
            limit,
            8,
            None,
        )
        .unwrap()
    });
    conn.execute_batch("COMMIT").unwrap();
    let dests = got
        .0
        .into_iter()
        .map(|d| d.endpoint_id.unwrap().to_string())
        .collect();
    (dests, steps)
}

/// With 20,000 deliveries waiting for one endpoint, a claim still takes
/// another endpoint's at once, and its work is that of what it takes, not
/// of the backlog: before issue 30 it ranked and sorted every due delivery.
#[test]
fn the_claim_does_not_read_the_backlog() {
    let conn = migrated();
    let (account, slow, other) = (
        AccountId::new(),
        WebhookEndpointId::new(),
        WebhookEndpointId::new(),
    );
    waiting(&conn, account, slow, 20_000);
    waiting(&conn, account, other, 1);
    let count = |list: &[String], e: WebhookEndpointId| {
        list.iter().filter(|d| **d == e.to_string()).count()
    };
    // Destinations take turns: with room for two, one of each.
    let (turns, _) = claim(&conn, "r1", 30_000, 2);
    assert_eq!((count(&turns, slow), count(&turns, other)), (1, 1));
    let (first, steps) = claim(&conn, "r1", 30_000, 64);
    assert_eq!(count(&first, slow), 7, "eight held at once, one already");
    assert_eq!(count(&first, other), 0, "its one is held already");
    assert!(steps < 5_000, "{steps} VM steps for 7 deliveries of 20,001");
    // The slow endpoint's eight are held: nothing more of it, and little work.
    let (second, steps) = claim(&conn, "r1", 30_001, 32);
    assert!(second.is_empty(), "{second:?}");
    assert!(steps < 1_000, "{steps} VM steps for none of 20,001");
    // Planned once, whatever its limit (`LIMIT $4`).
    let stmt = conn.prepare_cached(super::claim::EARLIEST).unwrap();
    assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
}

/// A page of tasks, read again with another limit, is not prepared again:
/// without the query planner stability guarantee (`.cargo/config.toml`)
/// SQLite does it at every run, for its `LIMIT $N` and for its `mode = $N`
/// beside the partial index of test tasks (`mode = 'test'`).
#[test]
fn a_page_of_tasks_is_prepared_once() {
    let conn = migrated();
    let account = taskgate_core::AccountId::new();
    for limit in [10, 20, 30] {
        let mut q = TaskQuery::new(account, taskgate_core::Mode::Live, limit);
        q.statuses = vec![taskgate_core::TaskStatus::Queued];
        let (sql, values) = list_tasks_sql(&q);
        let mut stmt = conn.prepare_cached(&sql).unwrap();
        for (i, v) in values.iter().enumerate() {
            let i = i + 1;
            match v {
                Param::Account(v) => stmt.raw_bind_parameter(i, v),
                Param::Mode(v) => stmt.raw_bind_parameter(i, v),
                Param::Api(v) => stmt.raw_bind_parameter(i, v),
                Param::Task(v) => stmt.raw_bind_parameter(i, v),
                Param::Int(v) => stmt.raw_bind_parameter(i, v),
            }
            .unwrap();
        }
        let mut rows = stmt.raw_query();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0, "{sql}");
    }
}

/// A page of the delivery log (`webhooks::DeliveryPage`) with these values:
/// how many deliveries it found, and the VM steps it took.
fn page(conn: &Connection, q: &crate::DeliveryQuery) -> (usize, usize) {
    use crate::webhooks::DeliveryPage;
    let p = DeliveryPage::of(q);
    let before = q.before.unwrap_or(i64::MAX);
    let status = q.status.map(|s| s.as_str());
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&q.account_id, &q.mode];
    match p {
        DeliveryPage::Task => values.extend([
            &q.task_id as &dyn rusqlite::ToSql,
            &before,
            &q.endpoint_id,
            &status,
        ]),
        DeliveryPage::Endpoint => {
            values.extend([&q.endpoint_id as &dyn rusqlite::ToSql, &before, &status])
        }
        DeliveryPage::Account => values.extend([&before as &dyn rusqlite::ToSql, &status]),
    }
    values.push(&q.limit);
    let mut stmt = conn.prepare_cached(p.sql()).unwrap();
    counting_steps(conn, || {
        stmt.query_map(values.as_slice(), |_| Ok(()))
            .unwrap()
            .count()
    })
}

/// A task's deliveries, or a quiet endpoint's, are found by their own index,
/// not by reading the account's whole log back from its newest: before
/// issue 30 every filter was `($N IS NULL OR column = $N)`, which no index
/// serves, so SQLite read the 20,000 deliveries newer than the first task's.
#[test]
fn a_page_of_the_delivery_log_reads_what_it_shows() {
    let conn = migrated();
    let (account, busy, quiet) = (
        AccountId::new(),
        WebhookEndpointId::new(),
        WebhookEndpointId::new(),
    );
    let first = taskgate_core::TaskId::new();
    let mut insert = conn
        .prepare(
            "INSERT INTO webhook_deliveries (account_id, mode, event_type, task_id, endpoint_id, \
             status, attempts, created_at) VALUES (?1, 'live', 'task.succeeded', ?2, ?3, \
             'succeeded', '[]', ?4)",
        )
        .unwrap();
    insert.execute(params![account, first, quiet, 0]).unwrap();
    for at in 1..=20_000 {
        let task = taskgate_core::TaskId::new();
        insert.execute(params![account, task, busy, at]).unwrap();
    }
    drop(insert);
    let mut q = crate::DeliveryQuery {
        account_id: account,
        mode: taskgate_core::Mode::Live,
        endpoint_id: None,
        task_id: Some(first),
        status: None,
        before: None,
        limit: 10,
    };
    let (found, steps) = page(&conn, &q);
    assert_eq!(found, 1);
    assert!(steps < 200, "{steps} VM steps for a task's one delivery");
    q.task_id = None;
    q.endpoint_id = Some(quiet);
    let (found, steps) = page(&conn, &q);
    assert_eq!(found, 1);
    assert!(
        steps < 200,
        "{steps} VM steps for a quiet endpoint's one delivery"
    );
    q.endpoint_id = Some(busy);
    q.before = Some(10_000);
    let (found, steps) = page(&conn, &q);
    assert_eq!(found, 10);
    assert!(
        steps < 1_000,
        "{steps} VM steps for a page of a busy endpoint's"
    );
    q.endpoint_id = None;
    let (found, steps) = page(&conn, &q);
    assert_eq!(found, 10);
    assert!(
        steps < 1_000,
        "{steps} VM steps for a page of the account's"
    );
}
