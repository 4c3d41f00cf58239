//! A queue's writer: it takes every job waiting, commits them together on
//! a connection it keeps while work comes, answers each job, and runs a
//! batch again on a conflict, or job by job when a statement failed.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use tokio::sync::mpsc;

use super::writes::{run_all, single_statement};
use super::{Done, Job, MAX_BATCH, Work};
use crate::StoreError;

/// Why a batch did not commit.
enum Failed {
    /// A job's statement failed: the batch was rolled back.
    Statement(sqlx::Error),
    /// No connection, or the commit itself failed: the outcome is the
    /// answer for every job (after a failed commit it is not known).
    Batch(sqlx::Error),
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

pub(super) async fn write_loop(
    pool: PgPool,
    mut queue: mpsc::UnboundedReceiver<Job>,
    retries: u32,
) {
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
