//! How SQLite runs the store's statements whose cost could grow unseen: the
//! outbox's claim with a long backlog, and statements run again with new
//! values (each must not be prepared again, `sql/mod.rs`).

use rusqlite::{Connection, StatementStatus, named_params, params};

use super::STATEMENTS;
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

/// `n` deliveries to `dest`, due at 1..=n.
fn waiting(conn: &Connection, dest: &str, n: i64) {
    let mut insert = conn
        .prepare(
            "INSERT INTO webhook_deliveries (account_id, mode, event_type, endpoint_id, status, \
             attempts, next_attempt_at, created_at) \
             VALUES ('acct_1', 'live', 'task.succeeded', ?1, 'pending', '[]', ?2, ?2)",
        )
        .unwrap();
    for at in 1..=n {
        insert.execute(params![dest, at]).unwrap();
    }
}

/// The claim, run with these values: the destinations of the deliveries it
/// held, and the statement's VM steps.
fn claim(
    stmt: &mut rusqlite::Statement<'_>,
    runner: &str,
    now: i64,
    limit: i64,
) -> (Vec<String>, i32) {
    stmt.reset_status(StatementStatus::VmStep);
    let got = stmt
        .query_map(
            named_params! {
                "$1": runner, "$2": now, "$3": now + 60_000, "$4": limit,
                "$5": None::<String>, "$6": 8,
            },
            |r| r.get::<_, String>("endpoint_id"),
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (got, stmt.get_status(StatementStatus::VmStep))
}

/// With 20,000 deliveries waiting for one endpoint, a claim still takes
/// another endpoint's at once, and its work is that of what it takes, not
/// of the backlog: before issue 30 it ranked and sorted every due delivery.
#[test]
fn the_claim_does_not_read_the_backlog() {
    let conn = migrated();
    waiting(&conn, "we_slow", 20_000);
    waiting(&conn, "we_other", 1);
    let mut stmt = conn.prepare(&STATEMENTS.claim_deliveries).unwrap();
    let (first, steps) = claim(&mut stmt, "r1", 30_000, 64);
    assert_eq!(first.iter().filter(|d| *d == "we_slow").count(), 8);
    assert_eq!(first.iter().filter(|d| *d == "we_other").count(), 1);
    assert!(steps < 5_000, "{steps} VM steps for 9 deliveries of 20,001");
    // The slow endpoint's eight are held: nothing more of it, and little work.
    let (second, steps) = claim(&mut stmt, "r1", 30_001, 32);
    assert!(second.is_empty(), "{second:?}");
    assert!(steps < 1_000, "{steps} VM steps for none of 20,001");
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
