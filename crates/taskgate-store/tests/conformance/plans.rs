//! PostgreSQL keeps one generic plan per prepared statement and makes it
//! again only when a table's statistics change. The store's writers plan
//! theirs again as `tasks` grows, so ending a task looks it up by its key
//! at any size, even where statistics never change (autovacuum off).
//!
//! SQLite: commits only append to the WAL; a thread of the store copies it
//! back into the database file, so no commit waits for that. A write commits
//! on its caller's thread only when SQLite's lock is free at once; a write that
//! has to wait for it waits on the store's writer thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use taskgate_core::AccountId;
use taskgate_store::Store;

use crate::fixtures::{T0, at, finish, new_account, runner, task_of};

/// A SQLite store's database file and its WAL, from the store's URL.
fn sqlite_files(url: &str) -> (PathBuf, PathBuf) {
    let db = PathBuf::from(url.trim_start_matches("sqlite://"));
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    (db, wal.into())
}

/// A file's size, 0 while it does not exist.
fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Stores `n` running tasks and ends each, one at a time.
async fn start_and_end(store: &dyn Store, account: AccountId, n: usize) {
    for _ in 0..n {
        let t = task_of(account, "live", "language")
            .claimed(&runner("runner-1"), at(T0 + 1), at(T0 + 60_000))
            .unwrap();
        store.insert_task(&t).await.unwrap();
        let ended = store
            .finish_task(t.id, &finish("succeeded", 0, T0 + 2, None))
            .await
            .unwrap();
        assert!(ended);
    }
}

/// Full scans of `tasks` so far. A server process reports its statistics
/// when it ends (or, idle, up to ten seconds late): the store's are ended.
async fn full_scans(admin: &mut PgConnection) -> i64 {
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut *admin)
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query_scalar("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'tasks'")
        .fetch_one(admin)
        .await
        .unwrap()
}

/// One task at a time, each finish is a statement of its own. Its plan is
/// made on an empty table (a scan and a hash), and made again once the
/// writer wrote 1,000 rows, when the table is big enough for the planner to
/// look tasks up by key (from about 600). Kept, it would scan the table for
/// each of the 3,000.
pub async fn finishes_look_tasks_up_by_key_as_the_table_grows(store: Arc<dyn Store>, url: String) {
    let mut admin = PgConnection::connect(&url).await.unwrap();
    // The statistics stay those of an empty table.
    sqlx::query("ALTER TABLE tasks SET (autovacuum_enabled = false)")
        .execute(&mut admin)
        .await
        .unwrap();
    let acme = new_account(&*store, "Acme").await.id;
    start_and_end(&*store, acme, 3_000).await;
    let scans = full_scans(&mut admin).await;
    assert!(
        scans < 1_500,
        "3,000 finishes scanned the whole table {scans} times"
    );
}

/// Tasks written through the store reach the database file itself within a
/// second, by the store's checkpoints alone: no commit checkpoints (SQLite's
/// automatic checkpoint is off), and this check never does one either.
pub async fn sqlite_copies_the_wal_into_the_database_beside_the_writer(
    store: Arc<dyn Store>,
    url: String,
) {
    let (path, wal) = sqlite_files(&url);
    let before = size(&path);
    let account = new_account(&*store, "wal").await.id;
    let text = "x".repeat(4_000);
    for _ in 0..300 {
        let mut t = task_of(account, "live", "language");
        t.input = serde_json::json!({ "text": text }).to_string();
        store.insert_task(&t).await.unwrap();
    }
    assert!(size(&wal) > 1_000_000, "the tasks are in the WAL first");
    let mut grown = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        grown = size(&path) - before;
        if grown > 1_000_000 {
            break;
        }
    }
    assert!(
        grown > 1_000_000,
        "the database file grew by {grown} bytes: the WAL was not copied back"
    );
}

/// SQLite: the store commits a write on the caller's thread only when it can
/// take SQLite's write lock at once. While another connection holds the lock,
/// the write waits for it on the store's writer thread, not on the caller's
/// (on a one-thread runtime, a write that waited there would stop the
/// runtime, and the lock's holder with it), and commits once it is released.
pub async fn sqlite_a_locked_database_never_blocks_the_callers_thread(
    store: Arc<dyn Store>,
    url: String,
) {
    let (path, _) = sqlite_files(&url);
    let account = new_account(&*store, "locked").await.id;
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let task = task_of(account, "live", "language");
    let id = task.id;
    let writes = store.clone();
    let insert = tokio::spawn(async move { writes.insert_task(&task).await });
    // A write waiting on this thread would hold it for the whole busy
    // timeout (10 s), this pause with it.
    let paused = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        paused.elapsed() < Duration::from_secs(5),
        "the write held the caller's thread while it waited for the lock"
    );
    assert!(!insert.is_finished(), "the write waits for the lock");
    holder.execute_batch("COMMIT").unwrap();
    tokio::time::timeout(Duration::from_secs(5), insert)
        .await
        .expect("the write commits once the lock is released")
        .unwrap()
        .unwrap();
    assert!(store.get_task_by_id(id).await.unwrap().is_some());
}

/// SQLite: under writes that never pause, the WAL still starts over from its
/// beginning now and then, so it stays far smaller than what was written
/// (SQLite starts it over only at a write that finds all of it copied, which
/// steady writes alone never give).
pub async fn sqlite_the_wal_stays_bounded_under_steady_writes(store: Arc<dyn Store>, url: String) {
    let (_, wal) = sqlite_files(&url);
    let account = new_account(&*store, "steady").await.id;
    let input = serde_json::json!({ "text": "x".repeat(64_000) }).to_string();
    const WRITERS: usize = 4;
    const EACH: usize = 1_600; // 4 × 1,600 × 64 KB: about 400 MB written
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (store, input) = (store.clone(), input.clone());
            tokio::spawn(async move {
                for _ in 0..EACH {
                    let mut t = task_of(account, "live", "language");
                    t.input = input.clone();
                    store.insert_task(&t).await.unwrap();
                }
            })
        })
        .collect();
    let mut largest = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        largest = largest.max(size(&wal));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for w in writers {
        w.await.unwrap();
    }
    let written = (WRITERS * EACH * input.len()) as u64;
    println!("WAL at most {largest} bytes, {written} bytes written");
    assert!(
        largest < written / 2,
        "the WAL grew to {largest} bytes for {written} bytes written: it never started over"
    );
}

/// The rows of `tasks` as another connection sees them.
fn rows_in_table(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .unwrap()
}

/// The rows of `tasks` once they are `want`, or after 5 s.
async fn rows_within_5s(path: &Path, want: i64) -> i64 {
    let mut seen = rows_in_table(path);
    for _ in 0..100 {
        if seen == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        seen = rows_in_table(path);
    }
    seen
}

/// SQLite: a sync call's task (told of only at its end) is held out of the
/// table and inserted in the commit of its end, so a fast call costs one
/// commit, not two. One that runs on is in the table within a moment of its
/// start, and one still held when the store closes is written then.
pub async fn sqlite_a_sync_calls_task_is_written_with_its_end(store: Arc<dyn Store>, url: String) {
    let (path, wal) = sqlite_files(&url);
    let account = new_account(&*store, "held").await.id;
    let untold = || {
        task_of(account, "live", "language")
            .claimed(&runner("runner-1"), at(T0 + 1), at(T0 + 60_000))
            .unwrap()
    };
    // One start and end: a single commit, so the WAL grows by the frames of
    // one transaction (its last frame marks the commit).
    let warm = untold();
    store.insert_task_unflushed(&warm).await.unwrap();
    store
        .finish_task(warm.id, &finish("succeeded", 0, T0 + 2, None))
        .await
        .unwrap();
    let fast = untold();
    let wal_before = size(&wal);
    store.insert_task_unflushed(&fast).await.unwrap();
    assert_eq!(rows_in_table(&path), 1, "held, not in the table");
    assert_eq!(size(&wal), wal_before, "nothing written at its start");
    assert!(
        store
            .finish_task(fast.id, &finish("succeeded", 0, T0 + 2, None))
            .await
            .unwrap()
    );
    assert_eq!(rows_in_table(&path), 2, "written with its end");

    // A call that runs on: in the table soon after its start, by itself.
    let slow = untold();
    store.insert_task_unflushed(&slow).await.unwrap();
    assert_eq!(
        rows_within_5s(&path, 3).await,
        3,
        "a task held on is written by itself"
    );
    assert!(
        store
            .finish_task(slow.id, &finish("failed", 0, T0 + 2, None))
            .await
            .unwrap()
    );

    // Still held when the store closes: written as it is.
    let last = untold();
    store.insert_task_unflushed(&last).await.unwrap();
    drop(store);
    assert_eq!(
        rows_within_5s(&path, 4).await,
        4,
        "written when the store closed"
    );
}

/// SQLite: at most 64 tasks are held (`held.rs`, `HOLD_AT_MOST_TASKS`); past
/// that, a sync call's task is inserted at once, as any other. Holding is
/// in memory and takes microseconds, so the 64 are still held when the 65th
/// comes (none is 0.1 s old); a round where the thread was kept off the CPU
/// that long is started over.
pub async fn sqlite_at_most_64_tasks_are_held(store: Arc<dyn Store>, url: String) {
    let (path, _) = sqlite_files(&url);
    let account = new_account(&*store, "many held").await.id;
    let in_table = |id: taskgate_core::TaskId| -> i64 {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row(
            "SELECT COUNT(*) FROM tasks WHERE id = ?1 AND status = 'running'",
            [id.to_string()],
            |r| r.get(0),
        )
        .unwrap()
    };
    for round in 0.. {
        assert!(round < 5, "never held 64 tasks within 0.1 s");
        let started = std::time::Instant::now();
        let tasks: Vec<_> = (0..65)
            .map(|_| {
                task_of(account, "live", "language")
                    .claimed(&runner("runner-1"), at(T0 + 1), at(T0 + 60_000))
                    .unwrap()
            })
            .collect();
        for t in &tasks {
            store.insert_task_unflushed(t).await.unwrap();
        }
        let (first, last) = (in_table(tasks[0].id), in_table(tasks[64].id));
        let quick = started.elapsed() < Duration::from_millis(90);
        for t in &tasks {
            assert!(
                store
                    .finish_task(t.id, &finish("succeeded", 0, T0 + 2, None))
                    .await
                    .unwrap(),
                "every task ends, held or not"
            );
        }
        if quick {
            assert_eq!(first, 0, "the first is held");
            assert_eq!(last, 1, "the 65th is in the table, running, at once");
            break;
        }
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (all, ended): (i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), SUM(status = 'succeeded') FROM tasks WHERE account_id = ?1",
            [account.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(all, ended, "every task in the table has ended");
    assert_eq!(all % 65, 0, "65 tasks a round, each once");
}

/// SQLite: the dispatcher's poll for queued tasks (taking turns by account
/// and mode) reads the small index of queued tasks alone, not every task's
/// row: a scan of the whole table each poll cost time and filled each read
/// connection's page cache (issue 25's memory, `bench/RESULTS.md`).
pub async fn sqlite_the_dispatchers_poll_reads_only_the_queued_index(
    store: Arc<dyn Store>,
    url: String,
) {
    let acme = new_account(&*store, "Acme").await;
    start_and_end(&*store, acme.id, 50).await;
    let (path, _) = sqlite_files(&url);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    // The statement of `Statements::queued_by_turn`.
    let poll = "EXPLAIN QUERY PLAN SELECT id, account_id, mode FROM (SELECT id, account_id, \
         mode, ROW_NUMBER() OVER (PARTITION BY account_id, mode ORDER BY id) AS turn FROM tasks \
         WHERE status = 'queued') queued WHERE turn <= 8 ORDER BY turn, id LIMIT 64";
    let mut stmt = conn.prepare(poll).unwrap();
    let plan: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        plan.iter()
            .any(|step| step.contains("COVERING INDEX tasks_queued_lane")),
        "{plan:?}"
    );
}
