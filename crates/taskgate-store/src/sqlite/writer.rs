//! The SQLite writer: one connection for the writes of the hot path (tasks
//! created, claimed, finished, cancelled), committed by the caller itself when
//! nothing else is being written, and in batches by a thread of its own under
//! load.
//!
//! Why: SQLite has one writer at a time anyway, and through sqlx every
//! statement is a round trip to the driver's thread and back; under load the
//! service spent its time switching threads, not writing. Under load, callers
//! queue a job and await its answer; the thread takes every job waiting, runs
//! them in one transaction (each in a savepoint, so one job's failure undoes
//! only that job), commits once, and only then answers each caller: an answer
//! always means the write is committed.
//!
//! When no job is queued and the connection is free, a caller commits its own
//! job on its own thread instead (a few tens of µs: WAL mode with
//! `synchronous = NORMAL` writes no fsync in a commit). Handing that commit to
//! the thread cost more than the commit: the thread's wake-up, then the
//! caller's (the profile of sync calls at one connection, `bench/RESULTS.md`).
//! Such a commit never waits for SQLite's lock: if another connection holds
//! it, the job goes to the thread, which waits as long as the busy timeout.
//!
//! Checkpoints (copying the WAL back into the database file, and its fsync)
//! run on a thread of their own, not in a commit: with SQLite's automatic
//! checkpoint, the commit that crossed 1,000 pages of WAL waited for the
//! copy and the fsync, the p99 of sync calls at concurrency 1 (4–5 ms
//! against a p50 of 0.6 ms). That thread also keeps the WAL from growing
//! without end under steady writes (see [`checkpoint_loop`]).

use std::ffi::c_int;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use rusqlite::hooks::{CheckpointMode, Wal};
use rusqlite::{Connection, Statement, ToSql};
use tokio::sync::oneshot;

use super::handoff;
use super::held::{HOLD_AT_MOST, Held};
use crate::{DeliverySink, StoreError, StoreResult};

const MAX_BATCH: usize = 512;

/// How long a write may wait for another connection's lock (on the thread).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

trait Job: Send {
    /// Runs the job's statements inside the open transaction.
    fn run(&mut self, conn: &Connection);
    /// Answers the caller once the batch's fate is known.
    fn answer(self: Box<Self>, committed: Result<(), &StoreError>);
}

struct Typed<T, F> {
    work: Option<F>,
    result: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> Job for Typed<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
{
    fn run(&mut self, conn: &Connection) {
        let Some(work) = self.work.take() else { return };
        self.result = Some(in_savepoint(conn, work));
    }

    fn answer(self: Box<Self>, committed: Result<(), &StoreError>) {
        let outcome = match (committed, self.result) {
            (Ok(()), Some(Ok(v))) => Ok(v),
            (Ok(()), Some(Err(e))) => Err(e),
            (Err(e), _) => Err(e.for_each_job()),
            (Ok(()), None) => Err(StoreError::WriterStopped),
        };
        let _ = self.reply.send(outcome);
    }
}

/// What the writer thread and the callers share.
struct Shared {
    /// The write connection, held by whoever is writing.
    conn: Mutex<Connection>,
    /// Jobs sent to the thread and not yet taken by it.
    queued: AtomicUsize,
    /// This process's webhook sender, once it takes deliveries as they are
    /// written (`handoff.rs`).
    sink: OnceLock<Arc<dyn DeliverySink>>,
    /// Writes no caller waits for, run at the start of the next transaction
    /// ([`Writer::run_soon`]).
    soon: Mutex<Vec<Soon>>,
}

/// A write made with the next transaction, whoever begins it.
type Soon = Box<dyn FnOnce(&Connection) -> StoreResult<()> + Send>;

impl Shared {
    /// The connection, with no transaction left open: one whose holder
    /// panicked in the middle of a job is rolled back first.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        ready(self.conn.lock())
    }
}

fn ready(conn: MutexGuard<'_, Connection>) -> MutexGuard<'_, Connection> {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    conn
}

pub struct Writer {
    shared: Arc<Shared>,
    jobs: mpsc::Sender<Box<dyn Job>>,
    /// Dropped with the writer: the checkpoint thread then ends.
    _checkpoints: mpsc::Sender<()>,
}

/// Prepared statements the writer's connection keeps.
const STATEMENTS_KEPT: usize = 64;

/// How often the checkpoint thread copies the WAL into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// How soon the next checkpoint comes while the WAL is a quarter of
/// [`RESTART_FRAMES`] or more.
const CHECKPOINT_SOON: Duration = Duration::from_millis(10);

/// The WAL's size (in pages) past which a checkpoint holds the writes to let
/// the WAL start over: 16 MB with SQLite's 4 KB pages.
const RESTART_FRAMES: i64 = 4_096;

/// The WAL's size (in pages) at which a commit itself copies the whole WAL
/// into the database before it returns: 64 MB with 4 KB pages. The checkpoint
/// thread keeps the WAL far below it; this is the ceiling when that thread
/// falls behind (its passive checkpoint, copying and syncing the WAL while
/// the writes go on, can take longer than the writes take to fill as much
/// again, on a disk shared with other work).
const CEILING_FRAMES: i32 = 4 * RESTART_FRAMES as i32;

/// How often a commit past [`CEILING_FRAMES`] tries its full checkpoint again
/// while another checkpoint runs (see [`hold_to_ceiling`]).
const CEILING_RETRY: Duration = Duration::from_millis(2);

/// How much lower the checkpoint thread's priority is than the rest of the
/// process's (a nice value added to the process's own). Its copying and its
/// `fsync`s are background work: at its own priority it took the CPU from a
/// request in the middle of its call, and the slowest calls at one
/// connection came from that (`bench/RESULTS.md`: p99.5 added about 1.1 ms
/// against about 0.9 ms niced by 10). Niced, it still runs whenever a core
/// is free, and a few per cent of a busy one; while it holds the writer
/// (the WAL's restart, the held tasks' write) the writes it keeps waiting
/// free their cores for it. Not lower still: it must keep up under steady
/// writes, or the commits take its work over at [`CEILING_FRAMES`].
const CHECKPOINT_NICE: i32 = 10;

impl Writer {
    /// `held`'s tasks are written by the checkpoint thread once held for
    /// [`HOLD_AT_MOST`], and all of them when the writer is dropped.
    pub fn open(path: &Path, held: Arc<Held>) -> StoreResult<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA wal_autocheckpoint = 0;",
        )?;
        conn.wal_hook(Some(hold_to_ceiling));
        // Every statement of the hot path stays prepared (rusqlite keeps 16
        // by default; the writer runs about as many, with its transactions').
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        let checkpointer = Connection::open(path)?;
        checkpointer.busy_timeout(BUSY_TIMEOUT)?;
        let shared = Arc::new(Shared {
            conn: Mutex::new(conn),
            queued: AtomicUsize::new(0),
            sink: OnceLock::new(),
            soon: Mutex::new(Vec::new()),
        });
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        let on_thread = shared.clone();
        std::thread::Builder::new()
            .name("taskgate-sqlite-writer".to_owned())
            .spawn(move || write_loop(&on_thread, queue))
            .map_err(|_| StoreError::WriterStopped)?;
        let (checkpoints, stop) = mpsc::channel();
        let on_checkpoints = shared.clone();
        std::thread::Builder::new()
            .name("taskgate-sqlite-checkpoint".to_owned())
            .spawn(move || checkpoint_loop(checkpointer, &on_checkpoints, &held, stop))
            .map_err(|_| StoreError::WriterStopped)?;
        Ok(Self {
            shared,
            jobs,
            _checkpoints: checkpoints,
        })
    }

    /// Runs `work` and returns its result once committed: at once on this
    /// thread when nothing else is being written, else in the thread's next
    /// batch.
    pub async fn run<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let work = match self.alone(work) {
            Ok(done) => return done,
            Err(work) => work,
        };
        let (reply, answer) = oneshot::channel();
        let job = Typed {
            work: Some(work),
            result: None,
            reply,
        };
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        if self.jobs.send(Box::new(job)).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(StoreError::WriterStopped);
        }
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// From now on, the deliveries the writer's transactions write are held
    /// for `sink` and handed to it as they commit (`handoff.rs`); false if
    /// another sink has them already.
    pub fn deliver_to(&self, sink: Arc<dyn DeliverySink>) -> bool {
        self.shared.sink.set(sink).is_ok()
    }

    /// Makes `work` in the writer's next transaction, whoever begins it (a
    /// caller's commit, the thread's batch, or at the latest the checkpoint
    /// thread's round, every [`CHECKPOINT_EVERY`]), and does not wait for
    /// it: for a write whose loss to a crash or a failed commit costs
    /// nothing but doing it again (a webhook attempt's outcome: the delivery
    /// is sent again once its lease ends). A failure is logged.
    pub fn run_soon(&self, work: impl FnOnce(&Connection) -> StoreResult<()> + Send + 'static) {
        self.shared.soon.lock().push(Box::new(work));
    }

    /// Whether writes made with [`Writer::run_soon`] are still waiting.
    pub fn has_soon(&self) -> bool {
        !self.shared.soon.lock().is_empty()
    }

    /// Commits `work` in a transaction of its own on the calling thread, if
    /// no job is queued, the connection is free and SQLite's write lock can be
    /// had without waiting. Otherwise gives `work` back, not run.
    fn alone<T, F>(&self, work: F) -> Result<StoreResult<T>, F>
    where
        F: FnOnce(&Connection) -> StoreResult<T>,
    {
        if self.shared.queued.load(Ordering::SeqCst) > 0 {
            return Err(work);
        }
        let Some(conn) = self.shared.conn.try_lock().map(ready) else {
            return Err(work);
        };
        // Another connection (the sqlx pool's) writing: leave the wait to the
        // thread rather than block this one.
        let begun = conn
            .busy_timeout(Duration::ZERO)
            .and_then(|()| exec(&conn, "BEGIN IMMEDIATE"));
        let restored = conn.busy_timeout(BUSY_TIMEOUT);
        match (begun, restored) {
            (Ok(()), Ok(())) => {}
            (Ok(()), Err(e)) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Ok(Err(e.into()));
            }
            (Err(_), _) => return Err(work),
        }
        let handoff = handoff::begin(self.shared.sink.get());
        // The waiting writes first (a claim counts what they end); then
        // `work` in a savepoint of its own, so that its failure does not
        // undo them.
        let done = if run_waiting(&self.shared, &conn) {
            let done = in_savepoint(&conn, work);
            match exec(&conn, "COMMIT") {
                Ok(()) => done,
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Err(e.into())
                }
            }
        } else {
            commit(&conn, work)
        };
        if done.is_ok() {
            handoff.committed();
        }
        Ok(done)
    }
}

/// `work` run in the open transaction, then committed; rolled back if either
/// fails.
fn commit<T>(
    conn: &Connection,
    work: impl FnOnce(&Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    let result = work(conn).and_then(|v| {
        exec(conn, "COMMIT")?;
        Ok(v)
    });
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// `work` in a savepoint of the open transaction: undone alone if it fails,
/// with the deliveries it held for the sender given back.
fn in_savepoint<T>(
    conn: &Connection,
    work: impl FnOnce(&Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    let mark = handoff::mark();
    let result = exec(conn, "SAVEPOINT job")
        .map_err(StoreError::from)
        .and_then(|()| match work(conn) {
            Ok(v) => exec(conn, "RELEASE job").map(|()| v).map_err(Into::into),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                Err(e)
            }
        });
    if result.is_err() {
        handoff::undo_to(mark);
    }
    result
}

/// The writes waiting for a transaction ([`Writer::run_soon`]), made in the
/// one open on `conn`, each in a savepoint: one that fails is undone alone
/// and logged. Called where nothing after it can undo the transaction but
/// its commit failing (then they are lost: each is one whose loss costs
/// only doing it again). Whether there were any.
fn run_waiting(shared: &Shared, conn: &Connection) -> bool {
    let waiting = std::mem::take(&mut *shared.soon.lock());
    let any = !waiting.is_empty();
    for work in waiting {
        let done = exec(conn, "SAVEPOINT soon")
            .map_err(StoreError::from)
            .and_then(|()| work(conn))
            .and_then(|()| exec(conn, "RELEASE soon").map_err(StoreError::from));
        if let Err(e) = done {
            let _ = conn.execute_batch("ROLLBACK TO soon; RELEASE soon");
            tracing::warn!(error = %e, "a deferred write failed and was dropped");
        }
    }
    any
}

/// Runs `sql`, a statement without values (`BEGIN IMMEDIATE`, `COMMIT`, a
/// savepoint's), prepared once on `conn`: `execute_batch` would prepare it
/// again at every call, a few thousand instructions each, several times a
/// call (`bench/RESULTS.md`).
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn write_loop(shared: &Shared, queue: mpsc::Receiver<Box<dyn Job>>) {
    // Ends when every Writer handle is dropped.
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let conn = shared.lock();
        shared.queued.fetch_sub(batch.len(), Ordering::SeqCst);
        let handoff = handoff::begin(shared.sink.get());
        let committed = match exec(&conn, "BEGIN IMMEDIATE") {
            Ok(()) => {
                run_waiting(shared, &conn);
                for job in batch.iter_mut() {
                    job.run(&conn);
                }
                exec(&conn, "COMMIT").map_err(|e| {
                    let _ = conn.execute_batch("ROLLBACK");
                    StoreError::from(e)
                })
            }
            Err(e) => Err(StoreError::from(e)),
        };
        if committed.is_ok() {
            handoff.committed();
        } else {
            drop(handoff);
        }
        drop(conn);
        for job in batch {
            job.answer(committed.as_ref().map(|_| ()));
        }
    }
}

/// Copies the WAL into the database every [`CHECKPOINT_EVERY`], beside the
/// writer (a passive checkpoint waits for no one, and no one waits for it),
/// until the [`Writer`] is dropped; every [`CHECKPOINT_SOON`] while the WAL
/// grows fast.
///
/// SQLite starts the WAL over from its beginning only when a write begins
/// with all of it copied. Under steady writes that never happens by itself:
/// commits land while a checkpoint runs, so it ends a few frames short, and
/// the WAL would grow without end. So once the WAL passes [`RESTART_FRAMES`],
/// what a checkpoint left is copied with the writer's connection held (a few
/// ms: only the frames written during that checkpoint), and the next write
/// starts the WAL over.
fn checkpoint_loop(conn: Connection, shared: &Shared, held: &Held, stop: mpsc::Receiver<()>) {
    lower_priority(CHECKPOINT_NICE);
    let mut pause = CHECKPOINT_EVERY;
    // The WAL's frames at the last checkpoint: unchanged, nothing was written.
    let mut last = 0;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(pause) {
        let waiting = !shared.soon.lock().is_empty();
        if let Some(before) = Instant::now().checked_sub(HOLD_AT_MOST)
            && (waiting || held.any_since(before))
        {
            write_held(shared, held, Some(before));
        }
        let Some(mut frames) = checkpoint(&conn) else {
            pause = CHECKPOINT_EVERY;
            continue;
        };
        let written = frames != last;
        if frames >= RESTART_FRAMES && written {
            let _writes_held = shared.conn.lock();
            frames = checkpoint(&conn).unwrap_or(frames);
        }
        pause = if frames >= RESTART_FRAMES / 4 && written {
            CHECKPOINT_SOON
        } else {
            CHECKPOINT_EVERY
        };
        last = frames;
    }
    write_held(shared, held, None);
}

/// The calling thread's nice value raised by `by` (at most to 19), on Linux,
/// where each thread has its own; elsewhere it would be the whole process's,
/// so nothing is done. A failure is logged and changes nothing else.
fn lower_priority(by: i32) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = rustix::thread::gettid();
        let lowered = getpriority_process(Some(me))
            .and_then(|nice| setpriority_process(Some(me), (nice + by).min(19)));
        if let Err(e) = lowered {
            tracing::debug!(error = %e, "the checkpoint thread keeps its priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = by;
}

/// Held tasks (those held since `before`, or all) written in a commit of
/// their own, with the writes waiting for a transaction
/// ([`Writer::run_soon`]); if a statement fails they stay held (logged) for
/// the next round.
fn write_held(shared: &Shared, held: &Held, before: Option<Instant>) {
    if held.is_empty() && shared.soon.lock().is_empty() {
        return;
    }
    let conn = shared.lock();
    // The last write, as the writer is dropped, hands nothing over: the
    // sender is stopping too, and its held deliveries are claimed later.
    let handoff = handoff::begin(before.and(shared.sink.get()));
    let written = exec(&conn, "BEGIN IMMEDIATE")
        .map_err(StoreError::from)
        .and_then(|()| {
            commit(&conn, |conn| {
                let written = held.write_all(conn, before)?;
                run_waiting(shared, conn);
                Ok(written)
            })
        });
    match written {
        Ok(_) => handoff.committed(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot write the tasks of running sync calls; trying again");
        }
    }
}

/// Run after each commit of the writer's connection, which is held meanwhile
/// (no other write can begin): once the WAL has [`CEILING_FRAMES`], a full
/// checkpoint copies all of it, so the next write starts it over.
///
/// A full checkpoint waits (within the busy timeout) for readers, but not
/// for another checkpoint: SQLite answers `SQLITE_BUSY` at once, without its
/// busy handler, while the checkpoint thread's passive checkpoint runs. Under
/// a saturated CPU that thread (niced) can be starved in the middle of its
/// checkpoint for as long as the writes keep the cores, so every commit's
/// full checkpoint found it running and the WAL grew without bound (361 MB
/// for 410 MB written, in a test run beside the whole suite). So a busy full
/// checkpoint is tried again, every [`CEILING_RETRY`], for as long as the busy
/// timeout: the writes wait meanwhile, their cores go to the checkpoint
/// thread, and its checkpoint ends.
///
/// The commit has happened whatever this returns: a failure is logged, never
/// passed on as the commit's.
fn hold_to_ceiling(wal: &Wal, frames: c_int) -> rusqlite::Result<()> {
    if frames < CEILING_FRAMES {
        return Ok(());
    }
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match wal.checkpoint_v2(CheckpointMode::FULL) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(CEILING_RETRY);
            }
            Err(e) => {
                tracing::warn!(error = %e, frames, "the WAL is past its ceiling and cannot be copied yet");
                return Ok(());
            }
        }
    }
}

/// A passive checkpoint; the frames the WAL held when it began, or `None`
/// (logged) if it failed: the next one tries again.
fn checkpoint(conn: &Connection) -> Option<i64> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
        .inspect_err(
            |e| tracing::warn!(error = %e, "a WAL checkpoint failed; the next one tries again"),
        )
        .ok()
}

/// Binds `params` to the statement's `$1`, `$2`, … wherever they appear, so
/// the SQL shared with the sqlx backends runs unchanged.
///
/// SQLite numbers named parameters in the order they first appear, so each
/// of the statement's parameters is read back by its number and given its
/// value: one pass over the statement's parameters. (Looking each value's
/// name up instead formatted the name and compared it with every name
/// before it: a call's 27-column insert spent 31k instructions binding.)
/// A value with no parameter is not bound; a parameter with no value, or
/// not named `$N`, is an error.
pub fn bind(stmt: &mut Statement<'_>, params: &[&dyn ToSql]) -> rusqlite::Result<()> {
    for index in 1..=stmt.parameter_count() {
        let name = stmt.parameter_name(index).unwrap_or("?");
        let Some(value) = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .and_then(|n| params.get(n))
        else {
            return Err(rusqlite::Error::InvalidParameterName(name.to_owned()));
        };
        stmt.raw_bind_parameter(index, value)?;
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use rustix::process::getpriority_process;
    use rustix::thread::gettid;

    /// Only the calling thread is lowered, by the amount asked and never
    /// past 19: the request handlers' threads keep their priority.
    #[test]
    fn a_thread_lowers_its_own_priority_and_no_other() {
        let here = getpriority_process(Some(gettid())).unwrap();
        let (before, after) = std::thread::spawn(|| {
            let me = gettid();
            let before = getpriority_process(Some(me)).unwrap();
            super::lower_priority(3);
            let after = getpriority_process(Some(me)).unwrap();
            super::lower_priority(super::CHECKPOINT_NICE * 3);
            (before, (after, getpriority_process(Some(me)).unwrap()))
        })
        .join()
        .unwrap();
        assert_eq!(after.0, (before + 3).min(19));
        assert_eq!(after.1, 19);
        assert_eq!(getpriority_process(Some(gettid())).unwrap(), here);
    }
}

/// A directory of this test process's own, emptied, and the path of a
/// database in it: `(dir, dir/name.db)`.
#[cfg(test)]
fn fresh_db(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("taskgate_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.db"));
    (dir, path)
}

#[cfg(test)]
mod ceiling_tests {
    use std::time::{Duration, Instant};

    use rusqlite::Connection;

    /// The frames in the WAL (what a passive checkpoint reports).
    fn wal_frames(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
            .unwrap()
    }

    /// Past the ceiling, a commit copies the whole WAL even when another
    /// connection's checkpoint holds SQLite's checkpoint lock at that moment
    /// (as the checkpoint thread's does while starved of CPU): it waits for
    /// that checkpoint to end, where it used to give up at once and leave
    /// the WAL to grow. Here the other checkpoint is a full one that waits,
    /// holding the lock, for an old reader, and gives up after 300 ms.
    #[test]
    fn past_the_ceiling_a_commit_waits_out_another_checkpoint() {
        let (dir, path) = super::fresh_db("ceiling");
        let open = || {
            let conn = Connection::open(&path).unwrap();
            conn.busy_timeout(super::BUSY_TIMEOUT).unwrap();
            conn
        };
        let writer = open();
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; \
                 CREATE TABLE t (b BLOB NOT NULL);",
            )
            .unwrap();
        writer.wal_hook(Some(super::hold_to_ceiling));
        // A reader on the snapshot before the big write.
        let reader = open();
        reader
            .execute_batch("BEGIN; SELECT COUNT(*) FROM t;")
            .unwrap();
        // More pages than the ceiling, written but not committed yet.
        writer.execute_batch("BEGIN IMMEDIATE").unwrap();
        let rows = i64::from(super::CEILING_FRAMES) / 256 + 8;
        writer
            .execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
                 INSERT INTO t SELECT zeroblob(1048576) FROM n",
                [rows],
            )
            .unwrap();
        // The other checkpoint: it takes the checkpoint lock, waits for the
        // write lock, then for the reader, and gives up; then the reader ends.
        let other = open();
        other.busy_timeout(Duration::from_millis(300)).unwrap();
        let checkpointing = std::thread::spawn(move || {
            let busy: i64 = other
                .query_row("PRAGMA wal_checkpoint(FULL)", [], |r| r.get(0))
                .unwrap();
            let ended = Instant::now();
            reader.execute_batch("COMMIT").unwrap();
            (busy, ended)
        });
        std::thread::sleep(Duration::from_millis(100));
        let committing = Instant::now();
        writer.execute_batch("COMMIT").unwrap();
        let (busy, ended) = checkpointing.join().unwrap();
        assert_eq!(busy, 1, "the other checkpoint gave up");
        assert!(
            ended > committing,
            "the other checkpoint held its lock while the commit ran"
        );

        // The commit copied the whole WAL, so the next write starts it over.
        writer.execute("INSERT INTO t VALUES (x'00')", []).unwrap();
        let frames = wal_frames(&writer);
        assert!(frames < 16, "the WAL started over: {frames} frames");
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod soon_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::Writer;
    use crate::sqlite::held::Held;

    fn rows(path: &std::path::Path) -> i64 {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    /// A write made "soon" rides the next transaction, whoever begins it;
    /// with none, the checkpoint thread's round makes it; one that fails is
    /// undone alone.
    #[test]
    fn a_soon_write_rides_the_next_commit_or_the_round() {
        let (dir, path) = super::fresh_db("soon");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (v INTEGER NOT NULL)")
            .unwrap();
        let writer = Writer::open(&path, Arc::new(Held::default())).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();

        writer.run_soon(|conn| Ok(conn.execute("INSERT INTO t VALUES (1)", []).map(drop)?));
        writer.run_soon(|conn| Ok(conn.execute("INSERT INTO t VALUES (NULL)", []).map(drop)?));
        assert!(writer.has_soon());
        assert_eq!(rows(&path), 0, "not yet");
        runtime
            .block_on(writer.run(|conn| Ok(conn.execute("INSERT INTO t VALUES (2)", [])?)))
            .unwrap();
        assert!(!writer.has_soon());
        assert_eq!(
            rows(&path),
            2,
            "with that commit; the failing one undone alone"
        );

        // A job that fails undoes its transaction, not the waiting writes.
        writer.run_soon(|conn| Ok(conn.execute("INSERT INTO t VALUES (3)", []).map(drop)?));
        let failed = runtime.block_on(writer.run(|conn| {
            conn.execute("INSERT INTO t VALUES (NULL)", [])?;
            Ok(())
        }));
        assert!(failed.is_err());
        let started = Instant::now();
        while rows(&path) < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "made by the round"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
