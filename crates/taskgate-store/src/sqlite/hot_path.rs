//! SQLite's [`HotPath`]: the task operations of a call, on rusqlite. Writes
//! go through the writer thread (`writer.rs`), which commits each alone when
//! nothing else is writing and in batches under load; reads run on read-only
//! connections (`readers.rs`). Sync calls' tasks are held back from the table
//! until they end (`held.rs`); every operation that could find a held task
//! writes it first.

use taskgate_core::{
    AccountId, DeliveryAttempts, DeliveryStatus, Mode, RunnerId, TaskEvent, TaskId, TaskStatus,
    Timestamp, Transition, WebhookEvent, WebhookEvents,
};

use std::sync::atomic::{AtomicBool, Ordering};

use super::handoff;
use super::held::Held;
use super::writer::bind;
use super::{STATEMENTS, SqliteStore};
use crate::backend::HotPath;
use crate::sql::Param;
use crate::{
    ClaimedDelivery, DeliveryOutcome, Destination, StoreError, StoreResult, TaskFinish, TaskQuery,
    TaskRecord, WebhookDelivery, WebhookEndpoint,
};

impl HotPath for SqliteStore {
    /// Every held task written, before a read or write that might look for
    /// one.
    async fn hot_visible(&self) -> StoreResult<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.write_held().await
    }

    /// Task `id` written if it is held, before it is read.
    async fn hot_visible_task(&self, id: TaskId) -> StoreResult<()> {
        if !self.held.holds(id) {
            return Ok(());
        }
        self.write_held().await
    }

    async fn hot_insert_task(&self, t: &TaskRecord) -> StoreResult<()> {
        let t = t.clone();
        self.tasks.run(move |conn| insert_row(conn, &t)).await
    }

    /// Held back from the table until its end, or until something else
    /// might look for it (`held.rs`).
    async fn hot_insert_task_unflushed(&self, t: &TaskRecord) -> StoreResult<()> {
        if self.held.try_hold(t) {
            return Ok(());
        }
        self.hot_insert_task(t).await
    }

    async fn hot_settle_task(&self, id: TaskId) -> StoreResult<Option<TaskRecord>> {
        use crate::ClientTasks;
        self.get_task_by_id(id).await
    }

    async fn hot_get_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
    ) -> StoreResult<Option<TaskRecord>> {
        self.hot_visible_task(id).await?;
        self.task_reads
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(crate::sql::GET_TASK)?;
                bind(&mut stmt, &[&id, &account_id, &mode])?;
                let mut rows = stmt.raw_query();
                rows.next()?.map(task_from_row).transpose()
            })
            .await
    }

    async fn hot_list_tasks(&self, q: &TaskQuery) -> StoreResult<Vec<TaskRecord>> {
        let (sql, params) = crate::sql::list_tasks_sql(q);
        if self.held.holds_any_of(q.account_id, q.mode) {
            self.write_held().await?;
        }
        self.task_reads
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(&sql)?;
                let values: Vec<&dyn rusqlite::ToSql> = params
                    .iter()
                    .map(|p| match p {
                        Param::Account(v) => v as &dyn rusqlite::ToSql,
                        Param::Mode(v) => v,
                        Param::Api(v) => v,
                        Param::Task(v) => v,
                        Param::Int(v) => v,
                    })
                    .collect();
                bind(&mut stmt, &values)?;
                let mut rows = stmt.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(task_from_row(row)?);
                }
                Ok(out)
            })
            .await
    }

    async fn hot_claim_task(
        &self,
        id: TaskId,
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
    ) -> StoreResult<Option<TaskRecord>> {
        self.tasks
            .run(move |conn| claim_row(conn, id, &runner, now, lease_until, &event))
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn hot_claim_task_capped(
        &self,
        id: TaskId,
        (account, mode): (AccountId, Mode),
        runner: RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        event: TaskEvent,
        max_running: u32,
    ) -> StoreResult<crate::Claim> {
        let held = self.held.clone();
        self.tasks
            .run(move |conn| {
                after_held(conn, &held, None, || {
                    if running_of(conn, account, mode)? >= i64::from(max_running) {
                        return Ok(crate::Claim::AtCap);
                    }
                    Ok(
                        match claim_row(conn, id, &runner, now, lease_until, &event)? {
                            Some(t) => crate::Claim::Claimed(Box::new(t)),
                            None => crate::Claim::Gone,
                        },
                    )
                })
            })
            .await
    }

    async fn hot_insert_running_capped(
        &self,
        t: &TaskRecord,
        max_running: u32,
    ) -> StoreResult<bool> {
        let t = t.clone();
        let held = self.held.clone();
        self.tasks
            .run(move |conn| {
                after_held(conn, &held, None, || {
                    if running_of(conn, t.account_id, t.mode)? >= i64::from(max_running) {
                        return Ok(false);
                    }
                    insert_row(conn, &t)?;
                    Ok(true)
                })
            })
            .await
    }

    async fn hot_finish_task(
        &self,
        id: TaskId,
        transition: Transition,
        f: &TaskFinish,
    ) -> StoreResult<bool> {
        let f = f.clone();
        let held = self.held.clone();
        self.tasks
            .run(move |conn| match held.take(id) {
                // A held task is inserted here, as it ends, in the commit of its end.
                Some((at, task)) if transition.check(task.status).is_ok() => {
                    end_held(conn, &held, at, task, &f)
                }
                other => {
                    held.restore(other.into_iter().collect());
                    after_held(conn, &held, Some(id), || end_row(conn, id, transition, &f))
                }
            })
            .await
    }

    async fn hot_cancel_task(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: TaskId,
        now: Timestamp,
        event: TaskEvent,
    ) -> StoreResult<Option<TaskRecord>> {
        let held = self.held.clone();
        self.tasks
            .run(move |conn| {
                after_held(conn, &held, None, || {
                    let mut stmt = conn.prepare_cached(&STATEMENTS.cancel)?;
                    bind(&mut stmt, &[&id, &account_id, &mode, &now, &event])?;
                    let cancelled = {
                        let mut rows = stmt.raw_query();
                        rows.next()?.map(task_from_row).transpose()?
                    };
                    if let Some(t) = &cancelled {
                        let bit = WebhookEvent::TaskCancelled.bit();
                        enqueue_webhooks(conn, t.account_id, t.mode, t.id, Some(t), bit, now)?;
                        if t.reserved_micros > 0 {
                            release(conn, t.account_id, t.created_at, t.reserved_micros)?;
                        }
                    }
                    Ok(cancelled)
                })
            })
            .await
    }

    /// On the writer's connection, in steps (`claim.rs`): its pages stay
    /// cached (a read connection finds its cache stale after every commit of
    /// the writer's) and its statements are prepared once; no round trip
    /// through sqlx's thread.
    async fn hot_claim_deliveries(
        &self,
        runner: &RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
        per_destination: i64,
        reclaim: Option<&RunnerId>,
    ) -> StoreResult<crate::DeliveryClaim> {
        let runner = runner.clone();
        let reclaim = reclaim.cloned();
        self.tasks
            .run(move |conn| {
                let (claimed, more) = super::claim::claim_deliveries(
                    conn,
                    &runner,
                    now,
                    lease_until,
                    limit,
                    per_destination,
                    reclaim.as_ref(),
                )?;
                let deliveries = claimed
                    .into_iter()
                    .map(|d| with_sources(conn, d))
                    .collect::<StoreResult<_>>()?;
                Ok(crate::DeliveryClaim { deliveries, more })
            })
            .await
    }

    /// The writer holds them for `sink` (`handoff.rs`).
    fn hot_deliver_fresh_to(&self, sink: std::sync::Arc<dyn crate::DeliverySink>) -> bool {
        self.tasks.deliver_to(sink)
    }

    /// On the writer's connection, as the claim.
    async fn hot_record_delivery(
        &self,
        claimed: &WebhookDelivery,
        runner: &RunnerId,
        o: &DeliveryOutcome,
    ) -> StoreResult<bool> {
        let record = recorded(claimed, runner, o);
        self.tasks.run(move |conn| record(conn)).await
    }

    /// With the writer's next transaction: an attempt's outcome no caller
    /// waits for, written without a commit of its own (each cost about as
    /// much again as the statement: `bench/RESULTS.md`).
    async fn hot_record_delivery_soon(
        &self,
        claimed: &WebhookDelivery,
        runner: &RunnerId,
        o: &DeliveryOutcome,
    ) -> StoreResult<()> {
        let record = recorded(claimed, runner, o);
        self.tasks.run_soon(move |conn| record(conn).map(drop));
        Ok(())
    }

    /// An empty write, whose transaction makes the waiting ones first.
    async fn hot_visible_deliveries(&self) -> StoreResult<()> {
        if !self.tasks.has_soon() {
            return Ok(());
        }
        self.tasks.run(|_| Ok(())).await
    }
}

/// [`crate::webhooks::RECORD_DELIVERY`] of `o`, bound, to run on the
/// writer's connection: whether `runner` still held the delivery.
fn recorded(
    claimed: &WebhookDelivery,
    runner: &RunnerId,
    o: &DeliveryOutcome,
) -> impl FnOnce(&rusqlite::Connection) -> StoreResult<bool> + Send + 'static {
    let attempts = crate::webhooks::attempts_after(claimed, o);
    let (seq, runner, status) = (claimed.seq, runner.clone(), o.status);
    let (payload, next, claimed_at) = (o.payload.clone(), o.next_attempt_at, o.claimed_at);
    move |conn| {
        let mut stmt = conn.prepare_cached(crate::webhooks::RECORD_DELIVERY)?;
        bind(
            &mut stmt,
            &[
                &seq,
                &runner,
                &status,
                &attempts,
                &payload,
                &next,
                &claimed_at,
            ],
        )?;
        Ok(stmt.raw_execute()? == 1)
    }
}

impl SqliteStore {
    async fn write_held(&self) -> StoreResult<()> {
        let held = self.held.clone();
        self.tasks
            .run(move |conn| held.write_all(conn, None).map(drop))
            .await
    }
}

/// A held task's end: the task inserted as it ends, in one statement. Its
/// running state never reaches the table, nor the indexes of unfinished
/// tasks: fewer pages to write than an insert and an update (the profile,
/// `bench/RESULTS.md`). If that fails, it is held again.
fn end_held(
    conn: &rusqlite::Connection,
    held: &Held,
    at: std::time::Instant,
    task: TaskRecord,
    f: &TaskFinish,
) -> StoreResult<bool> {
    let (account, reserved, created_at) = (task.account_id, task.reserved_micros, task.created_at);
    let written = task
        .clone()
        .finished(f)
        .map_err(StoreError::from)
        .and_then(|ended| insert_row(conn, &ended))
        .and_then(|()| charge(conn, account, reserved, created_at, f));
    if let Err(e) = written {
        held.restore(vec![(at, task)]);
        return Err(e);
    }
    Ok(true)
}

/// `id`'s end written (inside the open transaction); false if it was no
/// longer running.
fn end_row(
    conn: &rusqlite::Connection,
    id: TaskId,
    transition: Transition,
    f: &TaskFinish,
) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(STATEMENTS.ending(transition))?;
    bind(
        &mut stmt,
        &[
            &id,
            &transition.to(),
            &f.output,
            &f.error,
            &f.units,
            &f.input_tokens,
            &f.output_tokens,
            &f.cost_micros,
            &f.attempts,
            &f.completed_at,
            &f.event(),
            &f.reasoning_tokens,
            &f.cached_input_tokens,
        ],
    )?;
    let done: Option<(AccountId, i64, Timestamp, Mode)> = {
        let mut rows = stmt.raw_query();
        match rows.next()? {
            Some(r) => Some((column(r, 0)?, column(r, 1)?, column(r, 2)?, column(r, 3)?)),
            None => None,
        }
    };
    let Some((account, reserved, created_at, mode)) = done else {
        // Cancelled (or ended by the sweeper) meanwhile: drop the result.
        return Ok(false);
    };
    if let Some(event) = WebhookEvent::of_status(transition.to()) {
        enqueue_webhooks(conn, account, mode, id, None, event.bit(), f.completed_at)?;
    }
    charge(conn, account, reserved, created_at, f)?;
    Ok(true)
}

/// An ended task's reservation given back and its cost counted toward its
/// account's spend.
fn charge(
    conn: &rusqlite::Connection,
    account: AccountId,
    reserved: i64,
    created_at: Timestamp,
    f: &TaskFinish,
) -> StoreResult<()> {
    if reserved > 0 {
        release(conn, account, created_at, reserved)?;
    }
    if let (Some(account), true) = (&f.charge_account, f.cost_micros > 0) {
        let mut spend = conn.prepare_cached(crate::sql::UPSERT_SPEND)?;
        let month = f.completed_at.month_key();
        bind(&mut spend, &[account, &month, &f.cost_micros])?;
        spend.raw_execute()?;
    }
    Ok(())
}

/// `work` inside the open transaction, after the held task `only` (or every
/// held task) is written: what it reads or counts of tasks includes them. If
/// `work` fails, they are held again.
fn after_held<T>(
    conn: &rusqlite::Connection,
    held: &Held,
    only: Option<TaskId>,
    work: impl FnOnce() -> StoreResult<T>,
) -> StoreResult<T> {
    let written = match only {
        Some(id) => held.write_one(conn, id)?,
        None => held.write_all(conn, None)?,
    };
    let result = work();
    if result.is_err() {
        held.restore(written);
    }
    result
}

/// Stores `t` as it is (the hot path's insert).
pub(super) fn insert_row(conn: &rusqlite::Connection, t: &TaskRecord) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(crate::sql::INSERT_TASK)?;
    bind(
        &mut stmt,
        &[
            &t.id,
            &t.account_id,
            &t.mode,
            &t.api,
            &t.status,
            &t.input,
            &t.output,
            &t.error,
            &t.units,
            &t.input_tokens,
            &t.output_tokens,
            &t.cost_micros,
            &t.metadata,
            &t.key_id,
            &t.idempotency_key,
            &t.timeout_ms,
            &t.sandbox,
            &t.events,
            &t.attempts,
            &t.created_at,
            &t.started_at,
            &t.completed_at,
            &t.runner,
            &t.lease_until,
            &t.reserved_micros,
            &t.reasoning_tokens,
            &t.cached_input_tokens,
        ],
    )?;
    stmt.raw_execute()?;
    // Its webhooks: a task stored as it runs, or as it ends, had its start
    // and (then) its end in this commit.
    let ran = t.started_at.map(|_| WebhookEvent::TaskRunning.bit());
    let ended = match t.status {
        TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled => {
            WebhookEvent::of_status(t.status).map(WebhookEvent::bit)
        }
        _ => None,
    };
    let bits = ran.unwrap_or(0) | ended.unwrap_or(0);
    if bits != 0 {
        let at = t.completed_at.or(t.started_at).unwrap_or(t.created_at);
        enqueue_webhooks(conn, t.account_id, t.mode, t.id, Some(t), bits, at)?;
    }
    Ok(())
}

/// Whether any SQLite store of this process has had a webhook endpoint or
/// a call's webhook: until then a task's change runs no webhook statement
/// (a process owns its SQLite stores; set before the first is written, and
/// at start when the database holds one).
pub(super) static WEBHOOKS_IN_USE: AtomicBool = AtomicBool::new(false);

/// The deliveries of task `task`'s events `bits` at `at`, in the open
/// transaction ([`crate::ENQUEUE_WEBHOOKS`]). In a transaction of the
/// writer's with a sink whose sender has room (`handoff.rs`), each is held
/// for it if the sender takes it ([`crate::DeliverySink::take_turn`]), with its endpoint and task
/// (`record`, the task as it is written, when at hand) for the handoff.
fn enqueue_webhooks(
    conn: &rusqlite::Connection,
    account: AccountId,
    mode: Mode,
    task_id: TaskId,
    record: Option<&TaskRecord>,
    bits: i64,
    at: Timestamp,
) -> StoreResult<()> {
    if !WEBHOOKS_IN_USE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let holder = handoff::with_open(|h| {
        h.sink
            .has_room()
            .then(|| (h.sink.runner().clone(), h.sink.lease_end(at)))
    });
    let Some((runner, lease_until)) = holder.flatten() else {
        // No sender to hand them to: one statement writes them all, unheld.
        let mut stmt = conn.prepare_cached(crate::ENQUEUE_WEBHOOKS)?;
        bind(&mut stmt, &[&account, &mode, &task_id, &bits, &at])?;
        stmt.raw_execute()?;
        return Ok(());
    };
    // The same deliveries, one by one: each held if the sender takes it,
    // else written unheld for the claim.
    let wanted = destinations_wanting(conn, account, mode, task_id, bits)?;
    let mut record = record.filter(|t| t.id == task_id).cloned();
    for (events, to, endpoint) in wanted {
        for event in WebhookEvent::ALL
            .into_iter()
            .filter(|e| events & e.bit() != 0)
        {
            let task = match &record {
                Some(t) => Some(t.clone()),
                None => {
                    record = read_one(conn, crate::sql::GET_TASK_BY_ID, &task_id, task_from_row)?;
                    record.clone()
                }
            };
            let mut d = WebhookDelivery {
                seq: 0,
                account_id: account,
                mode,
                event_type: event,
                task_id: Some(task_id),
                endpoint_id: None,
                url: None,
                status: DeliveryStatus::Pending,
                attempts: DeliveryAttempts::default(),
                payload: None,
                next_attempt_at: Some(at),
                created_at: at,
            };
            match &to {
                Destination::Endpoint(id) => d.endpoint_id = Some(*id),
                Destination::Url(url) => d.url = Some(url.clone()),
            }
            let held = handoff::with_open(|h| h.sink.take_turn(&to)).unwrap_or(false);
            let (holder, until) = if held {
                (Some(&runner), Some(lease_until))
            } else {
                (None, None)
            };
            let mut stmt = conn.prepare_cached(crate::webhooks::INSERT_DELIVERY)?;
            let written = bind(
                &mut stmt,
                &[
                    &account,
                    &mode,
                    &event.as_str(),
                    &task_id,
                    &d.endpoint_id,
                    &d.url,
                    &at,
                    &holder,
                    &until,
                ],
            )
            .and_then(|()| stmt.raw_execute())
            .map_err(StoreError::from);
            let c = ClaimedDelivery {
                delivery: d,
                endpoint: endpoint.clone(),
                task,
            };
            match (written, held) {
                (Err(e), true) => {
                    handoff::with_open(|h| h.sink.give_back(vec![c]));
                    return Err(e);
                }
                (Err(e), false) => return Err(e),
                (Ok(_), true) => {
                    let mut c = c;
                    c.delivery.seq = conn.last_insert_rowid();
                    handoff::with_open(|h| h.held.push(c));
                }
                (Ok(_), false) => {
                    handoff::with_open(|h| h.waiting = true);
                }
            }
        }
    }
    Ok(())
}

/// The destinations of task `task_id`'s events `bits`, as
/// [`crate::ENQUEUE_WEBHOOKS`] finds them: each enabled endpoint of the
/// account and mode wanting one of the events (with the endpoint, for the
/// handoff), then the call's own webhook; each with the events it wants.
fn destinations_wanting(
    conn: &rusqlite::Connection,
    account: AccountId,
    mode: Mode,
    task_id: TaskId,
    bits: i64,
) -> StoreResult<Vec<(i64, Destination, Option<WebhookEndpoint>)>> {
    let mut wanted = Vec::new();
    {
        let mut stmt = conn.prepare_cached(crate::webhooks::ENDPOINTS_WANTING)?;
        bind(&mut stmt, &[&account, &mode, &bits])?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            let e = endpoint_from_row(row)?;
            wanted.push((e.events.bits() & bits, Destination::Endpoint(e.id), Some(e)));
        }
    }
    let mut stmt = conn.prepare_cached(crate::webhooks::TASK_WEBHOOK)?;
    bind(&mut stmt, &[&task_id])?;
    let mut rows = stmt.raw_query();
    if let Some(row) = rows.next()? {
        let (url, events): (String, i64) = (column(row, 0)?, column(row, 1)?);
        wanted.push((events & bits, Destination::Url(url), None));
    }
    Ok(wanted)
}

/// [`Transition::Claim`] of a queued task: the claimed task, if it was.
fn claim_row(
    conn: &rusqlite::Connection,
    id: TaskId,
    runner: &RunnerId,
    now: Timestamp,
    lease_until: Timestamp,
    event: &TaskEvent,
) -> StoreResult<Option<TaskRecord>> {
    let mut stmt = conn.prepare_cached(&STATEMENTS.claim)?;
    bind(&mut stmt, &[&id, &now, runner, &lease_until, event])?;
    let claimed = {
        let mut rows = stmt.raw_query();
        rows.next()?.map(task_from_row).transpose()?
    };
    if let Some(t) = &claimed {
        let bit = WebhookEvent::TaskRunning.bit();
        enqueue_webhooks(conn, t.account_id, t.mode, t.id, Some(t), bit, now)?;
    }
    Ok(claimed)
}

/// The account's running tasks of `mode`.
fn running_of(conn: &rusqlite::Connection, account: AccountId, mode: Mode) -> StoreResult<i64> {
    let mut stmt = conn.prepare_cached(crate::sql::COUNT_RUNNING)?;
    bind(&mut stmt, &[&account, &mode])?;
    let mut rows = stmt.raw_query();
    match rows.next()? {
        Some(r) => column(r, 0),
        None => Ok(0),
    }
}

/// Column `i` of `r`; a value that does not decode is [`StoreError::Corrupt`]
/// naming the column.
fn column<T: rusqlite::types::FromSql>(r: &rusqlite::Row<'_>, i: usize) -> StoreResult<T> {
    r.get(i).map_err(|e| match e {
        rusqlite::Error::FromSqlConversionFailure(_, _, source) => StoreError::Corrupt {
            column: r.as_ref().column_name(i).unwrap_or("?").to_owned(),
            message: source.to_string(),
        },
        rusqlite::Error::InvalidColumnType(_, name, ty) => StoreError::Corrupt {
            column: name,
            message: format!("unexpected {ty} value"),
        },
        e => StoreError::from(e),
    })
}

/// A row of `task_columns!()`, in that order.
/// A row of `delivery_columns!`.
pub(super) fn delivery_from_row(r: &rusqlite::Row<'_>) -> StoreResult<WebhookDelivery> {
    Ok(WebhookDelivery {
        seq: column(r, 0)?,
        account_id: column(r, 1)?,
        mode: column(r, 2)?,
        event_type: column(r, 3)?,
        task_id: column(r, 4)?,
        endpoint_id: column(r, 5)?,
        url: column(r, 6)?,
        status: column(r, 7)?,
        attempts: column(r, 8)?,
        payload: column(r, 9)?,
        next_attempt_at: column(r, 10)?,
        created_at: column(r, 11)?,
    })
}

/// A claimed delivery with its endpoint and, until its body is made, its
/// task, read in the claim's transaction.
fn with_sources(conn: &rusqlite::Connection, d: WebhookDelivery) -> StoreResult<ClaimedDelivery> {
    let endpoint = match d.endpoint_id {
        Some(id) => read_one(
            conn,
            crate::webhooks::GET_ENDPOINT_BY_ID,
            &id,
            endpoint_from_row,
        )?,
        None => None,
    };
    let task = match ClaimedDelivery::task_to_read(&d) {
        Some(id) => read_one(conn, crate::sql::GET_TASK_BY_ID, &id, task_from_row)?,
        None => None,
    };
    Ok(ClaimedDelivery {
        delivery: d,
        endpoint,
        task,
    })
}

/// The row of `sql` (a read by one key, `$1`), if any.
fn read_one<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    key: &dyn rusqlite::ToSql,
    from_row: fn(&rusqlite::Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    bind(&mut stmt, &[key])?;
    let mut rows = stmt.raw_query();
    rows.next()?.map(from_row).transpose()
}

/// A row of `endpoint_columns!`.
fn endpoint_from_row(r: &rusqlite::Row<'_>) -> StoreResult<WebhookEndpoint> {
    let events: i64 = column(r, 4)?;
    Ok(WebhookEndpoint {
        id: column(r, 0)?,
        account_id: column(r, 1)?,
        mode: column(r, 2)?,
        url: column(r, 3)?,
        events: WebhookEvents::try_from(events).map_err(|e| StoreError::Corrupt {
            column: "events".to_owned(),
            message: e,
        })?,
        description: column(r, 5)?,
        disabled: column(r, 6)?,
        secret: column(r, 7)?,
        previous_secret: column(r, 8)?,
        previous_until: column(r, 9)?,
        failing_since: column(r, 10)?,
        created_at: column(r, 11)?,
    })
}

fn task_from_row(r: &rusqlite::Row<'_>) -> StoreResult<TaskRecord> {
    Ok(TaskRecord {
        id: column(r, 0)?,
        account_id: column(r, 1)?,
        mode: column(r, 2)?,
        api: column(r, 3)?,
        status: column(r, 4)?,
        input: column(r, 5)?,
        output: column(r, 6)?,
        error: column(r, 7)?,
        units: column(r, 8)?,
        input_tokens: column(r, 9)?,
        output_tokens: column(r, 10)?,
        cost_micros: column(r, 11)?,
        metadata: column(r, 12)?,
        key_id: column(r, 13)?,
        idempotency_key: column(r, 14)?,
        timeout_ms: column(r, 15)?,
        sandbox: column(r, 16)?,
        events: column(r, 17)?,
        attempts: column(r, 18)?,
        created_at: column(r, 19)?,
        started_at: column(r, 20)?,
        completed_at: column(r, 21)?,
        runner: column(r, 22)?,
        lease_until: column(r, 23)?,
        reserved_micros: column(r, 24)?,
        reasoning_tokens: column(r, 25)?,
        cached_input_tokens: column(r, 26)?,
    })
}

/// Gives back a task's reservation, in the writer's transaction.
fn release(
    conn: &rusqlite::Connection,
    account: AccountId,
    created_at: Timestamp,
    reserved: i64,
) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(crate::sql::RELEASE_SPEND)?;
    let month = created_at.month_key();
    bind(&mut stmt, &[&account, &month, &reserved])?;
    stmt.raw_execute()?;
    Ok(())
}
