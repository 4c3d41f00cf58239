//! PostgreSQL, for several instances sharing one store.

mod batch;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::mpsc;

use crate::backend::{HotPath, SqlBackend};
use crate::sql::{Dialect, Statements, impl_store};
use crate::{PoolOptions, StoreError, StoreResult, TaskEnd};
use batch::{Batcher, Done, Work};

/// Connections of the task writers' own pool (one per queue of the
/// batcher), taken from `max_connections`: their sessions plan each statement
/// once (`plan_cache_mode = force_generic_plan`, see `batch::writer::Writer`), a
/// setting the other queries must not inherit.
const BATCH_WRITERS: u32 = 2;

/// The channel of migration 0007's notifications.
const TASK_ENDED: &str = "taskgate_task_ended";
/// The channel of migration 0016's notifications.
const DELIVERIES_WRITTEN: &str = "taskgate_deliveries_written";

static STATEMENTS: LazyLock<Statements> = LazyLock::new(|| {
    Statements::new(&Dialect {
        append_before: "(events::jsonb || jsonb_build_array(",
        append_after: "::jsonb))::text",
    })
});

pub struct PgStore {
    pool: PgPool,
    /// The hot path's task writes, committed in batches.
    batcher: Batcher,
}

impl PgStore {
    pub async fn connect(url: &str, settings: PoolOptions) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::InvalidUrl(e.to_string()))?
            .options([(
                "statement_timeout",
                settings.statement_timeout.as_millis().to_string(),
            )]);
        let (pool, writing) = pools(options, &settings).await?;
        let batcher = Batcher::start(writing, settings.retries);
        Ok(Self { pool, batcher })
    }
}

/// The pool of every query, and that of the task writers: `settings`'
/// connections in all.
async fn pools(options: PgConnectOptions, settings: &PoolOptions) -> StoreResult<(PgPool, PgPool)> {
    // Every statement here is short; compiling one (PostgreSQL's JIT, for a
    // plan it estimates costly) takes 50 ms or more, longer than any of them
    // runs.
    let options = options.options([("jit", "off")]);
    // No ping before each use: a round trip per statement on the hot path.
    // A connection lost meanwhile fails its statement (503) and is dropped
    // from the pool.
    let pool_of = |size: u32| {
        PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(settings.acquire_timeout)
            .test_before_acquire(false)
    };
    // Below three connections everything shares one pool: the writers would
    // leave none to read with.
    if settings.max_connections <= BATCH_WRITERS {
        let pool = pool_of(settings.max_connections.max(1))
            .connect_with(options)
            .await?;
        return Ok((pool.clone(), pool));
    }
    let pool = pool_of(settings.max_connections - BATCH_WRITERS)
        .connect_with(options.clone())
        .await?;
    // Lazily: the pool above has just shown the server answers.
    let writing = pool_of(BATCH_WRITERS)
        .connect_lazy_with(options.options([("plan_cache_mode", "force_generic_plan")]));
    Ok((pool, writing))
}

impl SqlBackend for PgStore {
    type Db = sqlx::Postgres;

    const NAME: &'static str = "postgres";

    fn statements() -> &'static Statements {
        &STATEMENTS
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// Follows the `taskgate_task_ended` notifications (migration 0007) on a
    /// connection of its own, re-made after a loss, until the receiver is
    /// dropped.
    async fn listen_task_ends(&self) -> StoreResult<Option<mpsc::Receiver<TaskEnd>>> {
        let follow = Follow {
            channel: TASK_ENDED,
            what: "task ends",
            full: WhenFull::Wait(1024),
            read: TaskEnd::parse,
            on_loss: None,
        };
        follow.start(&self.pool).await.map(Some)
    }

    /// Follows the `taskgate_deliveries_written` notifications (migration
    /// 0016) on a connection of its own, re-made after a loss, until the
    /// receiver is dropped. Words not yet taken fold into one; a loss is a
    /// word too (some may have been missed).
    async fn listen_deliveries_written(&self) -> StoreResult<Option<mpsc::Receiver<()>>> {
        let follow = Follow {
            channel: DELIVERIES_WRITTEN,
            what: "webhook deliveries",
            full: WhenFull::Fold,
            read: |_| Some(()),
            on_loss: Some(()),
        };
        follow.start(&self.pool).await.map(Some)
    }

    async fn run_migrations(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        Ok(())
    }
}

impl_store!(PgStore);

/// A channel's notifications followed on a connection of its own.
struct Follow<T> {
    channel: &'static str,
    /// What the warnings call them.
    what: &'static str,
    /// What an item meets when the items not yet taken fill the channel.
    full: WhenFull,
    /// A notification's item; none for an unreadable payload (warned).
    read: fn(&str) -> Option<T>,
    /// The item a lost connection sends (some may have been missed), if any.
    on_loss: Option<T>,
}

/// How a [`Follow`]'s channel takes an item while full.
#[derive(Clone, Copy)]
enum WhenFull {
    /// One item waits at most; another one meanwhile is the same news and
    /// is dropped (a wake-up).
    Fold,
    /// Up to this many items wait; the next one waits for room (each item
    /// is news of its own).
    Wait(usize),
}

impl<T: Clone + Send + 'static> Follow<T> {
    /// Listens now (an error if it cannot), then follows in a task of its
    /// own, re-making the connection after a loss, until the receiver is
    /// dropped.
    async fn start(self, pool: &PgPool) -> StoreResult<mpsc::Receiver<T>> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(self.channel).await?;
        let capacity = match self.full {
            WhenFull::Fold => 1,
            WhenFull::Wait(n) => n,
        };
        let (tx, rx) = mpsc::channel(capacity);
        tokio::spawn(async move {
            loop {
                let got = listener.try_recv().await;
                if tx.is_closed() {
                    return;
                }
                let item = match got {
                    Ok(Some(n)) => {
                        let item = (self.read)(n.payload());
                        if item.is_none() {
                            tracing::warn!(
                                payload = n.payload(),
                                what = self.what,
                                "an unreadable notification"
                            );
                        }
                        item
                    }
                    // The connection was lost; the next call re-makes it.
                    Ok(None) => {
                        tracing::warn!(what = self.what, "lost the notifications; reconnecting");
                        self.on_loss.clone()
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, what = self.what, "cannot follow the notifications; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        None
                    }
                };
                let Some(item) = item else { continue };
                let sent = match self.full {
                    WhenFull::Fold => {
                        !matches!(tx.try_send(item), Err(mpsc::error::TrySendError::Closed(_)))
                    }
                    WhenFull::Wait(_) => tx.send(item).await.is_ok(),
                };
                if !sent {
                    return;
                }
            }
        });
        Ok(rx)
    }
}

/// [`HotPath::hot_settle_task`]'s write.
const SETTLE_TASK: &str = concat!(
    "UPDATE tasks SET lease_until = lease_until WHERE id = $1 RETURNING ",
    crate::sql::task_columns!()
);

/// The outbox's claim: due webhook deliveries held by a sender. `$1`
/// runner, `$2` now, `$3` lease, `$4` limit, `$5` the runner whose holdings
/// are taken back, `$6` held at once per destination at most. Its work
/// follows the destinations (endpoints and calls' URLs) that have
/// deliveries waiting and what it takes, never the backlog: the
/// destinations are found by skipping through the index of waiting
/// deliveries by destination (one probe each), each one's held deliveries
/// are counted in the index of held ones, and each gives one more than `$6`
/// less those of its earliest due ones, not held, from the first index. All
/// but that one more are ranked (destinations taking turns) and the first
/// `$4` are held, skipping rows another sender is claiming. Each row is a
/// delivery held with `found`, the count of those given: more than were
/// held, and some are left due; with none held, one row of NULLs and
/// `found`. The destinations' turns free are counted once each (`dests`
/// materialized): inlined, the count ran again for every row picked, and
/// PostgreSQL's plan for any values (the one it keeps for a statement run
/// often) was estimated so costly that it compiled it (JIT) at every claim,
/// 50 ms each (bench/RESULTS.md, issue 30, ninth session). The locking part
/// tests each row again (PostgreSQL reads a row another claim changed and
/// committed meanwhile as it is now, and only the locking part's conditions
/// are tested on it): without that, a claim that read a delivery as free
/// before another claim's commit held it too, and it was sent twice.
/// SQLite claims in steps of its own (`sqlite/claim.rs`).
const CLAIM_DELIVERIES: &str = concat!(
    "WITH RECURSIVE waiting(dest) AS (",
    "SELECT MIN(COALESCE(endpoint_id, url)) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL ",
    "UNION ALL SELECT (SELECT MIN(COALESCE(endpoint_id, url)) FROM webhook_deliveries ",
    "WHERE next_attempt_at IS NOT NULL AND COALESCE(endpoint_id, url) > waiting.dest) ",
    "FROM waiting WHERE waiting.dest IS NOT NULL), ",
    "dests AS MATERIALIZED (SELECT dest, GREATEST($6 - (SELECT COUNT(*) FROM webhook_deliveries h ",
    "WHERE COALESCE(h.endpoint_id, h.url) = waiting.dest AND h.lease_until >= $2 ",
    "AND NOT ($5 IS NOT NULL AND h.runner = $5)), 0) AS free FROM waiting WHERE dest IS NOT NULL), ",
    "picked AS (SELECT w.seq, w.next_attempt_at, dests.free, ROW_NUMBER() OVER ",
    "(PARTITION BY dests.dest ORDER BY w.next_attempt_at, w.seq) AS turn FROM dests CROSS JOIN LATERAL (",
    "SELECT y.seq, y.next_attempt_at FROM webhook_deliveries y ",
    "WHERE COALESCE(y.endpoint_id, y.url) = dests.dest AND y.next_attempt_at <= $2 ",
    "AND (y.lease_until IS NULL OR y.lease_until < $2 OR ($5 IS NOT NULL AND y.runner = $5)) ",
    "ORDER BY y.next_attempt_at LIMIT dests.free + 1) w), ",
    "taken AS (UPDATE webhook_deliveries SET runner = $1, lease_until = $3 WHERE seq IN ",
    "(SELECT seq FROM webhook_deliveries WHERE seq IN (SELECT seq FROM picked ",
    "WHERE turn <= free ORDER BY turn, next_attempt_at LIMIT $4) AND next_attempt_at <= $2 ",
    "AND (lease_until IS NULL OR lease_until < $2 OR ($5 IS NOT NULL AND runner = $5)) ",
    "FOR UPDATE SKIP LOCKED) RETURNING ",
    crate::webhooks::delivery_columns!(),
    ") SELECT taken.*, found.n AS found FROM (SELECT COUNT(*) AS n FROM picked) found ",
    "LEFT JOIN taken ON true"
);

/// The endpoints of a claim's deliveries, by id: `$1` the ids.
const CLAIMED_ENDPOINTS: &str = concat!(
    "SELECT ",
    crate::webhooks::endpoint_columns!(),
    " FROM webhook_endpoints WHERE id = ANY($1)"
);

/// The tasks of a claim's deliveries whose bodies are not made yet: `$1` the
/// ids.
const CLAIMED_TASKS: &str = concat!(
    "SELECT ",
    crate::sql::task_columns!(),
    " FROM tasks WHERE id = ANY($1)"
);

impl PgStore {
    /// The rows of `sql` for `ids` (bound as `$1`, a text array); none
    /// without a round trip when there are no ids.
    async fn rows_of<T, I>(
        &self,
        sql: &'static str,
        ids: impl Iterator<Item = I>,
    ) -> StoreResult<Vec<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
        I: std::fmt::Display,
    {
        let ids: Vec<String> = ids.map(|id| id.to_string()).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_as(sql).bind(ids).fetch_all(&self.pool).await?)
    }

    /// Each claimed delivery with its endpoint and the task its body needs:
    /// one read of all the endpoints, one of all the tasks.
    async fn with_sources(
        &self,
        claimed: Vec<crate::WebhookDelivery>,
    ) -> StoreResult<Vec<crate::ClaimedDelivery>> {
        let endpoint_ids = claimed.iter().filter_map(|d| d.endpoint_id);
        let endpoints: Vec<crate::WebhookEndpoint> =
            self.rows_of(CLAIMED_ENDPOINTS, endpoint_ids).await?;
        let endpoints: HashMap<_, _> = endpoints.into_iter().map(|e| (e.id, e)).collect();
        let task_ids = claimed
            .iter()
            .filter_map(crate::ClaimedDelivery::task_to_read);
        let tasks: Vec<crate::TaskRecord> = self.rows_of(CLAIMED_TASKS, task_ids).await?;
        let tasks: HashMap<_, _> = tasks.into_iter().map(|t| (t.id, t)).collect();
        Ok(claimed
            .into_iter()
            .map(|d| crate::ClaimedDelivery {
                endpoint: d.endpoint_id.and_then(|id| endpoints.get(&id).cloned()),
                task: crate::ClaimedDelivery::task_to_read(&d)
                    .and_then(|id| tasks.get(&id).cloned()),
                delivery: d,
            })
            .collect())
    }
}

/// The task reads and writes of the hot path: writes through the batcher,
/// reads straight from the pool.
impl HotPath for PgStore {
    async fn hot_claim_deliveries(
        &self,
        runner: &taskgate_core::RunnerId,
        now: taskgate_core::Timestamp,
        lease_until: taskgate_core::Timestamp,
        limit: i64,
        per_destination: i64,
        reclaim: Option<&taskgate_core::RunnerId>,
    ) -> StoreResult<crate::DeliveryClaim> {
        use sqlx::{FromRow, Row};
        let rows = sqlx::query(CLAIM_DELIVERIES)
            .bind(runner)
            .bind(now)
            .bind(lease_until)
            .bind(limit)
            .bind(reclaim)
            .bind(per_destination)
            .fetch_all(&self.pool)
            .await?;
        // One row at least: without a delivery taken, its columns are NULL.
        let mut found = 0;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            found = row.try_get::<i64, _>("found")?;
            if row.try_get::<Option<i64>, _>("seq")?.is_some() {
                claimed.push(crate::WebhookDelivery::from_row(row)?);
            }
        }
        let more = found > claimed.len() as i64;
        Ok(crate::DeliveryClaim {
            deliveries: self.with_sources(claimed).await?,
            more,
        })
    }

    async fn hot_record_delivery(
        &self,
        claimed: &crate::WebhookDelivery,
        runner: &taskgate_core::RunnerId,
        o: &crate::DeliveryOutcome,
    ) -> StoreResult<bool> {
        let done = sqlx::query(crate::webhooks::RECORD_DELIVERY)
            .bind(claimed.seq)
            .bind(runner)
            .bind(o.status)
            .bind(crate::webhooks::attempts_after(claimed, o))
            .bind(&o.payload)
            .bind(o.next_attempt_at)
            .bind(o.claimed_at)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn hot_record_delivery_soon(
        &self,
        claimed: &crate::WebhookDelivery,
        runner: &taskgate_core::RunnerId,
        o: &crate::DeliveryOutcome,
    ) -> StoreResult<()> {
        self.hot_record_delivery(claimed, runner, o).await.map(drop)
    }

    /// Every outcome is written when it is made.
    async fn hot_visible_deliveries(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Instances share the outbox here: each sender claims.
    fn hot_deliver_fresh_to(&self, _sink: std::sync::Arc<dyn crate::DeliverySink>) -> bool {
        false
    }

    async fn hot_insert_task(&self, t: &crate::TaskRecord) -> StoreResult<()> {
        self.insert_uncapped(t, true).await
    }

    async fn hot_insert_task_unflushed(&self, t: &crate::TaskRecord) -> StoreResult<()> {
        self.insert_uncapped(t, false).await
    }

    /// Nothing is held back here: every task is in its table.
    async fn hot_visible(&self) -> StoreResult<()> {
        Ok(())
    }

    async fn hot_visible_task(&self, _id: taskgate_core::TaskId) -> StoreResult<()> {
        Ok(())
    }

    /// A write of the task's row that changes nothing, committed durably
    /// (the session's `synchronous_commit`): its commit waits for the WAL
    /// to be flushed up to its own record, so up to every earlier write of
    /// the task too. If another write changed the row meanwhile, that
    /// write came after the insert and was durable itself.
    async fn hot_settle_task(
        &self,
        id: taskgate_core::TaskId,
    ) -> StoreResult<Option<crate::TaskRecord>> {
        Ok(sqlx::query_as(SETTLE_TASK)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn hot_insert_running_capped(
        &self,
        t: &crate::TaskRecord,
        max_running: u32,
    ) -> StoreResult<bool> {
        let work = Work::Insert {
            task: Box::new(t.clone()),
            cap: Some(max_running),
            flush: true,
        };
        Ok(matches!(self.batcher.run(work).await?, Done::Inserted))
    }

    #[allow(clippy::too_many_arguments)]
    async fn hot_claim_task_capped(
        &self,
        id: taskgate_core::TaskId,
        lane: (taskgate_core::AccountId, taskgate_core::Mode),
        runner: taskgate_core::RunnerId,
        now: taskgate_core::Timestamp,
        lease_until: taskgate_core::Timestamp,
        event: taskgate_core::TaskEvent,
        max_running: u32,
    ) -> StoreResult<crate::Claim> {
        let work = Work::Claim {
            id,
            cap: Some((lane, max_running)),
            runner,
            now,
            lease_until,
            event,
        };
        Ok(match self.batcher.run(work).await? {
            Done::Claimed(Some(task)) => crate::Claim::Claimed(task),
            Done::Claimed(None) => crate::Claim::Gone,
            _ => crate::Claim::AtCap,
        })
    }

    async fn hot_claim_task(
        &self,
        id: taskgate_core::TaskId,
        runner: taskgate_core::RunnerId,
        now: taskgate_core::Timestamp,
        lease_until: taskgate_core::Timestamp,
        event: taskgate_core::TaskEvent,
    ) -> StoreResult<Option<crate::TaskRecord>> {
        let work = Work::Claim {
            id,
            cap: None,
            runner,
            now,
            lease_until,
            event,
        };
        match self.batcher.run(work).await? {
            Done::Claimed(task) => Ok(task.map(|t| *t)),
            _ => unreachable!("a claim answers Claimed"),
        }
    }

    async fn hot_finish_task(
        &self,
        id: taskgate_core::TaskId,
        transition: crate::Transition,
        f: &crate::TaskFinish,
    ) -> StoreResult<bool> {
        // The batch ends running tasks only (its statement's `was`).
        debug_assert_eq!(transition.from(), [taskgate_core::TaskStatus::Running]);
        let work = Work::Finish {
            id,
            finish: Box::new(f.clone()),
        };
        match self.batcher.run(work).await? {
            Done::Finished(ended) => Ok(ended),
            _ => unreachable!("a finish answers Finished"),
        }
    }

    async fn hot_get_task(
        &self,
        account_id: taskgate_core::AccountId,
        mode: taskgate_core::Mode,
        id: taskgate_core::TaskId,
    ) -> StoreResult<Option<crate::TaskRecord>> {
        Ok(sqlx::query_as(crate::sql::GET_TASK)
            .bind(id)
            .bind(account_id)
            .bind(mode)
            .fetch_optional(self.reader())
            .await?)
    }

    async fn hot_list_tasks(&self, q: &crate::TaskQuery) -> StoreResult<Vec<crate::TaskRecord>> {
        use crate::sql::Param;
        let (sql, params) = crate::sql::list_tasks_sql(q);
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for p in params {
            query = match p {
                Param::Account(v) => query.bind(v),
                Param::Mode(v) => query.bind(v),
                Param::Api(v) => query.bind(v),
                Param::Task(v) => query.bind(v),
                Param::Int(v) => query.bind(v),
            };
        }
        Ok(query.fetch_all(self.reader()).await?)
    }

    async fn hot_cancel_task(
        &self,
        account_id: taskgate_core::AccountId,
        mode: taskgate_core::Mode,
        id: taskgate_core::TaskId,
        now: taskgate_core::Timestamp,
        event: taskgate_core::TaskEvent,
    ) -> StoreResult<Option<crate::TaskRecord>> {
        let mut tx = self.writer().begin().await?;
        let cancelled: Option<crate::TaskRecord> = sqlx::query_as(STATEMENTS.cancel.as_str())
            .bind(id)
            .bind(account_id)
            .bind(mode)
            .bind(now)
            .bind(event)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(t) = &cancelled {
            sqlx::query(crate::ENQUEUE_WEBHOOKS)
                .bind(t.account_id)
                .bind(t.mode)
                .bind(t.id)
                .bind(taskgate_core::WebhookEvent::TaskCancelled.bit())
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(t) = cancelled.as_ref().filter(|t| t.reserved_micros > 0) {
            sqlx::query(crate::sql::RELEASE_SPEND)
                .bind(t.account_id)
                .bind(t.created_at.month_key())
                .bind(t.reserved_micros)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(cancelled)
    }
}

impl PgStore {
    async fn insert_uncapped(&self, t: &crate::TaskRecord, flush: bool) -> StoreResult<()> {
        let work = Work::Insert {
            task: Box::new(t.clone()),
            cap: None,
            flush,
        };
        self.batcher.run(work).await?;
        Ok(())
    }
}

/// The server of the unit tests: `TASKGATE_TEST_POSTGRES_URL`, or the
/// local one.
#[cfg(test)]
fn test_server() -> PgConnectOptions {
    let url = std::env::var("TASKGATE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    PgConnectOptions::from_str(&url).unwrap()
}

/// A unit test without its server: skipped, and says so; under `CI=true`
/// it fails instead.
#[cfg(test)]
fn without_server(check: &str, e: impl std::fmt::Display) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("no PostgreSQL for {check} ({e}); CI=true requires one")
    }
    eprintln!("SKIPPED: {check} (no PostgreSQL: {e})");
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn setting(pool: &PgPool) -> String {
        sqlx::query_scalar("SELECT current_setting('plan_cache_mode')")
            .fetch_one(pool)
            .await
            .unwrap()
    }

    /// The task writers plan each statement once, in a pool of their own, and
    /// no other query inherits their setting; the two pools hold
    /// `max_connections` in all; no statement is compiled (JIT) in either.
    #[tokio::test]
    async fn the_task_writers_have_a_pool_of_their_own_that_plans_once() {
        let options = test_server();
        let settings = PoolOptions {
            max_connections: 5,
            ..PoolOptions::default()
        };
        let (pool, writing) = match pools(options.clone(), &settings).await {
            Ok(pools) => pools,
            Err(e) => return without_server("the writers' pool check", e),
        };
        assert_eq!(setting(&writing).await, "force_generic_plan");
        assert_eq!(setting(&pool).await, "auto");
        for p in [&pool, &writing] {
            let jit: String = sqlx::query_scalar("SELECT current_setting('jit')")
                .fetch_one(p)
                .await
                .unwrap();
            assert_eq!(jit, "off", "no statement compiled");
        }
        assert_eq!(writing.options().get_max_connections(), BATCH_WRITERS);
        assert_eq!(pool.options().get_max_connections(), 5 - BATCH_WRITERS);

        let small = PoolOptions {
            max_connections: 2,
            ..settings
        };
        let (pool, writing) = pools(options, &small).await.unwrap();
        assert_eq!(setting(&writing).await, "auto", "one shared pool");
        assert_eq!(pool.options().get_max_connections(), 2);
    }
}
