//! Group commit for PostgreSQL: the writes of the hot path (a task stored,
//! claimed, finished) are queued and committed in batches, one transaction
//! and one WAL flush for every write waiting, instead of one each.
//!
//! Two writers, one for stores and claims and one for finishes, each take
//! every job waiting in their queue (up to [`MAX_BATCH`]), write them on a
//! connection they keep while work comes (many rows per statement; one
//! statement alone needs no `BEGIN` and `COMMIT`), commit, and only then
//! answer each caller: an answer always means the write is committed. A job whose statement fails would abort the whole
//! transaction, so the batch is rolled back and its jobs are run again one
//! by one: one job's failure is that job's alone. A batch that meets a
//! serialization failure or a deadlock (other instances write the same rows)
//! is run again, up to the configured number of retries.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use taskgate_core::column::TextColumn;
use taskgate_core::{AccountId, Mode, RunnerId, TaskEvent, TaskId, TaskStatus, Timestamp};
use tokio::sync::{mpsc, oneshot};

use super::STATEMENTS;
use crate::{StoreError, StoreResult, TaskFinish, TaskRecord};

/// Jobs committed together at most.
const MAX_BATCH: usize = 256;

pub(super) enum Work {
    /// With a cap: only while the account has fewer running tasks of the
    /// task's mode. Without `flush`, a batch of such inserts alone commits without
    /// waiting for the WAL flush (`TaskQueue::insert_task_unflushed`).
    Insert {
        task: Box<TaskRecord>,
        cap: Option<u32>,
        flush: bool,
    },
    /// With a cap: only while the account has fewer running tasks of the
    /// mode (the task's account and mode, and the cap).
    Claim {
        id: TaskId,
        cap: Option<((AccountId, Mode), u32)>,
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
    },
    /// Of a running task: the only finish the store's callers make.
    Finish { id: TaskId, finish: Box<TaskFinish> },
}

pub(super) enum Done {
    Inserted,
    /// Nothing written: the account has its cap of running tasks.
    AtCap,
    Claimed(Option<Box<TaskRecord>>),
    Finished(bool),
}

struct Job {
    work: Work,
    reply: oneshot::Sender<StoreResult<Done>>,
}

/// Why a batch did not commit.
enum Failed {
    /// A job's statement failed: the batch was rolled back.
    Statement(sqlx::Error),
    /// No connection, or the commit itself failed: the outcome is the
    /// answer for every job (after a failed commit it is not known).
    Batch(sqlx::Error),
}

pub(super) struct Batcher {
    /// Stores and claims: one writer.
    starts: mpsc::UnboundedSender<Job>,
    /// Finishes: one writer. Each finish moves its account's spend row,
    /// locked until its batch commits, so finish batches run one after the
    /// other anyway; with one writer they grow instead of waiting.
    finishes: mpsc::UnboundedSender<Job>,
}

impl Work {
    /// The account whose running tasks the write counts under a lock.
    fn capped_account(&self) -> Option<AccountId> {
        match self {
            Work::Insert {
                task, cap: Some(_), ..
            } => Some(task.account_id),
            Work::Claim {
                cap: Some(((account, _), _)),
                ..
            } => Some(*account),
            _ => None,
        }
    }
}

impl Batcher {
    /// Starts the writers on `pool`; a batch hit by a serialization failure
    /// or a deadlock is run again up to `retries` times.
    ///
    /// One writer per queue: while a batch commits the next one grows, and
    /// bigger batches beat more of them (measured on two cores, c=32: one
    /// writer of each 3,600 calls/s; two, three and five writers of stores
    /// 3,400, 3,100 and 2,700).
    pub fn start(pool: PgPool, retries: u32) -> Self {
        let queue = || {
            let (jobs, queue) = mpsc::unbounded_channel();
            tokio::spawn(write_loop(pool.clone(), queue, retries));
            jobs
        };
        Self {
            starts: queue(),
            finishes: queue(),
        }
    }

    /// Runs `work` in the next batch; answers once it is committed.
    pub async fn run(&self, work: Work) -> StoreResult<Done> {
        let (reply, answer) = oneshot::channel();
        let queue = match work {
            Work::Finish { .. } => &self.finishes,
            _ => &self.starts,
        };
        queue
            .send(Job { work, reply })
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

/// How long a writer keeps its connection without work before giving it
/// back to the pool.
const IDLE: Duration = Duration::from_secs(1);

/// Rows a writer writes before its statements are planned again the first
/// time; then each time the rows it wrote have doubled.
const FIRST_REPLAN: u64 = 1_000;

/// A writer's connection, held from batch to batch while work keeps coming:
/// a connection given back to the pool costs a round trip (sqlx checks it),
/// as much as a statement.
///
/// Its connections come from a pool whose sessions use one generic plan per
/// prepared statement (`plan_cache_mode = force_generic_plan`). Left to
/// choose, PostgreSQL planned the writes anew at every execution: the plan
/// of a batch of 2 rows looks cheaper than the generic one (made for the 100
/// rows it assumes of an `UNNEST`), though both look each task up by its
/// key. That planning was a sixth of PostgreSQL's CPU per sync call
/// (2026-11-24, perf at 8 connections).
///
/// The statements are planned again (closed, prepared anew) when the writer
/// takes a connection and whenever the rows it wrote have doubled: a generic
/// plan is otherwise made again only when the table's statistics change. A
/// finish's plan made while `tasks` was small (every new install) scans and
/// hashes the whole table, and where statistics lag (autovacuum off, or
/// before its first analyze) it would do so at a million rows: a third of
/// the sync calls/s measured. Planned anew, the estimate follows the table's
/// size on disk and the plan looks each task up by its key.
struct Writer {
    pool: PgPool,
    conn: Option<PoolConnection<Postgres>>,
    retries: u32,
    /// Rows written since the writer started.
    written: u64,
    /// When `written` reaches it, the statements are planned again.
    replan_at: u64,
}

impl Writer {
    fn new(pool: PgPool, retries: u32) -> Self {
        Self {
            pool,
            conn: None,
            retries,
            written: 0,
            replan_at: FIRST_REPLAN,
        }
    }

    async fn connection(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let mut conn = self.pool.acquire().await?;
                conn.clear_cached_statements().await?;
                conn
            }
        };
        Ok(&mut **self.conn.insert(conn))
    }

    /// Counts `rows` written; plans the statements again when they doubled.
    async fn wrote(&mut self, rows: usize) {
        self.written += rows as u64;
        if self.written < self.replan_at {
            return;
        }
        self.replan_at = self.written.saturating_mul(2);
        if let Some(conn) = self.conn.as_mut()
            && conn.clear_cached_statements().await.is_err()
        {
            self.discard();
        }
    }

    /// Closes the connection: lost, or in a state not known.
    fn discard(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.close_on_drop();
        }
    }
}

async fn write_loop(pool: PgPool, mut queue: mpsc::UnboundedReceiver<Job>, retries: u32) {
    let mut writer = Writer::new(pool, retries);
    loop {
        let mut batch = Vec::new();
        let first = match writer.conn {
            Some(_) => match tokio::time::timeout(IDLE, queue.recv()).await {
                Ok(job) => job,
                Err(_) => {
                    writer.conn = None; // back to the pool
                    queue.recv().await
                }
            },
            None => queue.recv().await,
        };
        match first {
            Some(job) => batch.push(job),
            None => return, // the store was dropped
        }
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // Accounts' locks are taken in one order by every batch, so two
        // batches never wait for each other's.
        batch.sort_by_key(|job| job.work.capped_account().map(|a| a.to_string()));
        commit(&mut writer, batch).await;
    }
}

/// Commits `batch` and answers its jobs; on a statement's failure, runs
/// each job again alone.
async fn commit(writer: &mut Writer, batch: Vec<Job>) {
    let mut tries = 0;
    loop {
        let works: Vec<&Work> = batch.iter().map(|j| &j.work).collect();
        match attempt(writer, &works).await {
            Ok(done) => {
                let rows = batch.len();
                for (job, done) in batch.into_iter().zip(done) {
                    let _ = job.reply.send(Ok(done));
                }
                writer.wrote(rows).await;
                return;
            }
            Err(Failed::Statement(e)) if is_retryable(&e) && tries < writer.retries => {
                tries += 1;
                tracing::debug!(error = %e, tries, "a batch of task writes met a conflict; again");
                tokio::time::sleep(Duration::from_millis(5 * u64::from(tries))).await;
            }
            Err(Failed::Statement(e)) if batch.len() == 1 => {
                let job = batch.into_iter().next().expect("one job");
                let _ = job.reply.send(Err(e.into()));
                return;
            }
            Err(Failed::Statement(_)) => {
                for job in batch {
                    Box::pin(commit(writer, vec![job])).await;
                }
                return;
            }
            Err(Failed::Batch(e)) => {
                // Classified once: a database out of reach is `503` for
                // every job of the batch.
                let e = StoreError::from(e);
                for job in batch {
                    let _ = job.reply.send(Err(e.for_each_job()));
                }
                return;
            }
        }
    }
}

/// The connection or the database went away (not a statement's own fault):
/// I/O, or PostgreSQL's classes 08 (connection) and 57 (shut down).
fn is_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed => true,
        e => e
            .as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
    }
}

/// Serialization failures and deadlocks: the same writes may succeed again.
fn is_retryable(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "40001" || code == "40P01")
}

/// One transaction for all of `works`. A lone write of one statement runs
/// without `BEGIN` and `COMMIT`: two round trips fewer when load is light.
async fn attempt(writer: &mut Writer, works: &[&Work]) -> Result<Vec<Done>, Failed> {
    let conn = writer.connection().await.map_err(Failed::Batch)?;
    transact(conn, works).await.map_err(|(failed, reusable)| {
        if !reusable {
            writer.discard();
        }
        failed
    })
}

/// [`attempt`] on `conn`; on failure, whether the connection may be used
/// again.
async fn transact(conn: &mut PgConnection, works: &[&Work]) -> Result<Vec<Done>, (Failed, bool)> {
    if single_statement(works) {
        return run_all(conn, works).await.map_err(|e| {
            if is_lost(&e) {
                (Failed::Batch(e), false)
            } else {
                (Failed::Statement(e), true)
            }
        });
    }
    sqlx::raw_sql("BEGIN")
        .execute(&mut *conn)
        .await
        .map_err(|e| (Failed::Batch(e), false))?;
    let done = match run_all(conn, works).await {
        Ok(done) => done,
        // Run one by one, each would wait for the database again.
        Err(e) if is_lost(&e) => return Err((Failed::Batch(e), false)),
        Err(e) => {
            // A connection that cannot roll back is not used again.
            let rolled_back = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.is_ok();
            return Err((Failed::Statement(e), rolled_back));
        }
    };
    if let Err(e) = sqlx::raw_sql("COMMIT").execute(&mut *conn).await {
        return Err((Failed::Batch(e), false));
    }
    Ok(done)
}

/// Whether [`run_all`] writes `works` with one statement, atomic on its
/// own: then no `BEGIN` and `COMMIT`, two round trips fewer. Stores without
/// a cap are one statement, so are finishes (their spend with them), so is
/// a claim; a capped write takes its account's lock first.
fn single_statement(works: &[&Work]) -> bool {
    if works.iter().any(|w| w.capped_account().is_some()) {
        return false;
    }
    let inserts = works
        .iter()
        .filter(|w| matches!(w, Work::Insert { .. }))
        .count();
    let finishes = finish_groups(works);
    match (inserts, finishes.as_slice()) {
        (n, []) if n == works.len() => true,
        (0, []) => works.len() == 1, // a claim
        (0, [all]) => all.len() == works.len(),
        _ => false,
    }
}

/// Whether `account` has `cap` running tasks of `mode` or more, counted
/// under the account's lock (held until the transaction ends): writers of
/// every instance count and write one after the other.
async fn at_cap(
    conn: &mut PgConnection,
    account: AccountId,
    mode: Mode,
    cap: u32,
) -> Result<bool, sqlx::Error> {
    sqlx::query(LOCK_ACCOUNT)
        .bind(account)
        .execute(&mut *conn)
        .await?;
    let (running,): (i64,) = sqlx::query_as(crate::sql::COUNT_RUNNING)
        .bind(account)
        .bind(mode)
        .fetch_one(&mut *conn)
        .await?;
    Ok(running >= i64::from(cap))
}

/// A transaction-scoped lock per account.
const LOCK_ACCOUNT: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/// Every write of a batch. Inserts without a cap are one statement for
/// them all, so are the finishes (and their spend); claims and capped
/// inserts are one statement or two each.
async fn run_all(conn: &mut PgConnection, works: &[&Work]) -> Result<Vec<Done>, sqlx::Error> {
    let mut done: Vec<Option<Done>> = works.iter().map(|_| None).collect();
    let inserts: Vec<usize> = (0..works.len())
        .filter(|&i| matches!(works[i], Work::Insert { cap: None, .. }))
        .collect();
    if !inserts.is_empty() {
        let tasks: Vec<&TaskRecord> = inserts
            .iter()
            .map(|&i| match works[i] {
                Work::Insert { task, .. } => &**task,
                _ => unreachable!("an insert"),
            })
            .collect();
        insert_many(conn, &tasks, flushes(works)).await?;
        for i in inserts {
            done[i] = Some(Done::Inserted);
        }
    }
    for group in finish_groups(works) {
        let list: Vec<(TaskId, &TaskFinish)> = group.iter().map(|&i| finish_of(works[i])).collect();
        let ended = finish_many(conn, &list).await?;
        for i in group {
            done[i] = Some(Done::Finished(ended.contains(&finish_of(works[i]).0)));
        }
    }
    let mut all = Vec::with_capacity(works.len());
    for (work, done) in works.iter().zip(done) {
        all.push(match done {
            Some(d) => d,
            None => run(conn, work).await?,
        });
    }
    Ok(all)
}

/// Whether the transaction of `works` waits for the WAL flush when it
/// commits: unless every write of it is an insert that need not.
fn flushes(works: &[&Work]) -> bool {
    !works.iter().all(|w| {
        matches!(
            w,
            Work::Insert {
                cap: None,
                flush: false,
                ..
            }
        )
    })
}

/// The finishes of `works`, in groups written by one statement each: all
/// of them, or one by one, as sent, if a task is finished twice.
fn finish_groups(works: &[&Work]) -> Vec<Vec<usize>> {
    let finishes: Vec<usize> = (0..works.len())
        .filter(|&i| matches!(works[i], Work::Finish { .. }))
        .collect();
    let ids: HashSet<TaskId> = finishes.iter().map(|&i| finish_of(works[i]).0).collect();
    if finishes.is_empty() {
        Vec::new()
    } else if ids.len() == finishes.len() {
        vec![finishes]
    } else {
        finishes.into_iter().map(|i| vec![i]).collect()
    }
}

fn finish_of(work: &Work) -> (TaskId, &TaskFinish) {
    match work {
        Work::Finish { id, finish } => (*id, &**finish),
        _ => unreachable!("a finish"),
    }
}

fn text<T: TextColumn>(v: &T) -> String {
    v.to_text().into_owned()
}

fn texts<'a, T: TextColumn + 'a>(v: impl Iterator<Item = Option<&'a T>>) -> Vec<Option<String>> {
    v.map(|x| x.map(text)).collect()
}

/// Many tasks in one statement: an array of values per column.
async fn insert_many(
    conn: &mut PgConnection,
    tasks: &[&TaskRecord],
    flush: bool,
) -> Result<(), sqlx::Error> {
    let strings = |f: fn(&TaskRecord) -> String| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    let ints = |f: fn(&TaskRecord) -> i64| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    let some_ints =
        |f: fn(&TaskRecord) -> Option<i64>| tasks.iter().map(|t| f(t)).collect::<Vec<_>>();
    sqlx::query(if flush {
        INSERT_MANY
    } else {
        INSERT_MANY_UNFLUSHED
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
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The insert of many tasks, with a `WHERE` clause.
macro_rules! insert_rows {
    ($where:literal) => { concat!("INSERT INTO tasks (id, account_id, mode, api, status, input, output, error, \
     units, input_tokens, output_tokens, cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, \
     events, attempts, created_at, started_at, completed_at, runner, lease_until, reserved_micros) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
     $7::text[], $8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], \
     $14::text[], $15::text[], $16::bigint[], $17::text[], $18::text[], $19::text[], $20::bigint[], \
     $21::bigint[], $22::bigint[], $23::text[], $24::bigint[], $25::bigint[])", $where) };
}

/// [`crate::sql::INSERT_TASK`]'s columns, from one array each.
const INSERT_MANY: &str = insert_rows!("");

/// [`INSERT_MANY`], its transaction committed without waiting for the WAL
/// flush: `set_config(…, true)` is `SET LOCAL` inside the statement, so no
/// round trip is added (a statement alone is its own transaction). The
/// setting is read at commit; the rows are visible to every session at
/// once either way.
const INSERT_MANY_UNFLUSHED: &str =
    insert_rows!(" WHERE set_config('synchronous_commit', 'off', true) = 'off'");

/// Many ends of running tasks in one statement, with the spend they move
/// (what [`crate::sql::Statements`]'s `ending`, [`crate::sql::RELEASE_SPEND`]
/// and [`crate::sql::UPSERT_SPEND`] do one by one); the tasks that were
/// still running.
async fn finish_many(
    conn: &mut PgConnection,
    list: &[(TaskId, &TaskFinish)],
) -> Result<HashSet<TaskId>, sqlx::Error> {
    fn column<T>(list: &[(TaskId, &TaskFinish)], f: impl Fn(&TaskFinish) -> T) -> Vec<T> {
        list.iter().map(|(_, x)| f(x)).collect()
    }
    let ids: Vec<(TaskId,)> = sqlx::query_as(FINISH_MANY)
        .bind(
            list.iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>(),
        )
        .bind(column(list, |f| text(&f.status)))
        .bind(column(list, |f| f.output.clone()))
        .bind(column(list, |f| f.error.as_ref().map(text)))
        .bind(column(list, |f| f.units))
        .bind(column(list, |f| f.input_tokens))
        .bind(column(list, |f| f.output_tokens))
        .bind(column(list, |f| f.cost_micros))
        .bind(column(list, |f| text(&f.attempts)))
        .bind(column(list, |f| f.completed_at.unix_ms()))
        .bind(column(list, |f| text(&f.event())))
        .bind(column(list, |f| f.charge_account.map(|a| a.to_string())))
        .bind(column(list, |f| f.completed_at.month_key()))
        .bind(column(list, |_| text(&TaskStatus::Running)))
        .fetch_all(&mut *conn)
        .await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// Ends running tasks from one array per column, and moves their spend: a
/// reservation given back in the month the task was created, a cost
/// charged in the month it completed. Both are summed per account and
/// month, so each row changes once (a row cannot change twice in one
/// statement), in key order, so that concurrent writers lock rows in one
/// order. A reservation's month has its row already.
///
/// The state each task must be in comes as a column (`was`), not a
/// constant: with `status = 'running'` the planner may scan every running
/// task (dead index entries included) and hash them, instead of looking
/// each task up by its key.
const FINISH_MANY: &str = "WITH ended AS (\
     UPDATE tasks SET status = u.status, output = u.output, error = u.error, units = u.units, \
     input_tokens = u.input_tokens, output_tokens = u.output_tokens, cost_micros = u.cost_micros, \
     attempts = u.attempts, completed_at = u.completed_at, lease_until = NULL, \
     events = (tasks.events::jsonb || jsonb_build_array(u.event::jsonb))::text \
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], \
     $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::text[], $12::text[], $13::text[], \
     $14::text[]) AS u(id, status, output, error, units, input_tokens, output_tokens, cost_micros, \
     attempts, completed_at, event, charge_account, charge_month, was) \
     WHERE tasks.id = u.id AND tasks.status = u.was \
     RETURNING tasks.id, tasks.account_id, tasks.reserved_micros, tasks.created_at, \
     u.charge_account, u.charge_month, u.cost_micros), \
     moves (account_id, month, released, charged) AS (\
     SELECT account_id, to_char(timestamp 'epoch' + created_at * interval '1 millisecond', 'YYYY-MM'), \
     reserved_micros, 0 FROM ended WHERE reserved_micros > 0 \
     UNION ALL SELECT charge_account, charge_month, 0, cost_micros FROM ended \
     WHERE charge_account IS NOT NULL AND cost_micros > 0), \
     sums AS (SELECT account_id, month, SUM(released)::bigint AS released, \
     SUM(charged)::bigint AS charged FROM moves GROUP BY account_id, month), \
     spend AS (INSERT INTO account_spend AS s (account_id, month, micros) \
     SELECT account_id, month, charged FROM sums ORDER BY account_id, month \
     ON CONFLICT (account_id, month) DO UPDATE SET micros = s.micros + excluded.micros, \
     reserved = GREATEST(s.reserved - (SELECT released FROM sums \
     WHERE sums.account_id = excluded.account_id AND sums.month = excluded.month), 0)) \
     SELECT id FROM ended";

/// A store or a claim on its own: alone in its batch, or capped.
async fn run(conn: &mut PgConnection, work: &Work) -> Result<Done, sqlx::Error> {
    match work {
        Work::Insert { task: t, cap, .. } => {
            if let Some(cap) = *cap
                && at_cap(conn, t.account_id, t.mode, cap).await?
            {
                return Ok(Done::AtCap);
            }
            insert_many(conn, &[&**t], true).await?;
            Ok(Done::Inserted)
        }
        Work::Claim {
            id,
            cap,
            runner,
            now,
            lease_until,
            event,
        } => {
            if let Some(((account, mode), cap)) = *cap
                && at_cap(conn, account, mode, cap).await?
            {
                return Ok(Done::AtCap);
            }
            Ok(Done::Claimed(
                sqlx::query_as::<_, TaskRecord>(STATEMENTS.claim.as_str())
                    .bind(id)
                    .bind(now)
                    .bind(runner)
                    .bind(lease_until)
                    .bind(event)
                    .fetch_optional(&mut *conn)
                    .await?
                    .map(Box::new),
            ))
        }
        Work::Finish { .. } => unreachable!("finishes are written by run_all"),
    }
}

#[cfg(test)]
mod tests {
    use taskgate_core::{ApiSlug, KeyId};

    use super::*;

    fn task() -> TaskRecord {
        TaskRecord::queued(
            TaskId::new(),
            AccountId::new(),
            Mode::Live,
            ApiSlug::parse("sentiment").unwrap(),
            KeyId::new(),
            Timestamp::now(),
        )
    }

    fn insert(flush: bool) -> Work {
        Work::Insert {
            task: Box::new(task()),
            cap: None,
            flush,
        }
    }

    /// A batch skips the flush only when every write in it may.
    #[test]
    fn only_a_batch_of_unflushed_inserts_commits_without_the_flush() {
        let (a, b) = (insert(false), insert(false));
        assert!(!flushes(&[&a, &b]));
        let durable = insert(true);
        assert!(flushes(&[&a, &durable]));
        let capped = Work::Insert {
            task: Box::new(task()),
            cap: Some(3),
            flush: false,
        };
        assert!(flushes(&[&a, &capped]));
        let claim = Work::Claim {
            id: TaskId::new(),
            cap: None,
            runner: RunnerId::host_port("test", 1),
            now: Timestamp::now(),
            lease_until: Timestamp::now(),
            event: TaskEvent::new(TaskStatus::Running, Timestamp::now()),
        };
        assert!(flushes(&[&a, &claim]));
    }

    /// The unflushed insert turns `synchronous_commit` off for its own
    /// transaction only; the other leaves the session's setting alone.
    #[tokio::test]
    async fn the_unflushed_insert_commits_asynchronously_and_the_other_does_not() {
        let mut conn = match PgConnection::connect_with(&super::super::test_server()).await {
            Ok(conn) => conn,
            Err(e) => return super::super::without_server("the unflushed insert's check", e),
        };
        // A table of this session's own, shadowing `tasks`, with its columns.
        sqlx::raw_sql(
            "CREATE TEMP TABLE tasks (id text, account_id text, mode text, api text, \
             status text, input text, output text, error text, units bigint, \
             input_tokens bigint, output_tokens bigint, cost_micros bigint, metadata text, \
             key_id text, idempotency_key text, timeout_ms bigint, sandbox text, events text, \
             attempts text, created_at bigint, started_at bigint, completed_at bigint, \
             runner text, lease_until bigint, reserved_micros bigint)",
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
