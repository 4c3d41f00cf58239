//! The executor: bounded pools of workers fed from the store, one for live
//! tasks and one for test tasks (`fair.rs`: test tasks never take a live
//! task's worker, nor count against its cap).
//!
//! A task is stored before it runs. When a worker is free at once, it is
//! stored already claimed by that worker and runs straight away. Otherwise it
//! is stored `queued` and the dispatcher is nudged with its id; the dispatcher
//! also polls the store, so a nudge lost to a full channel or a restart still
//! gets the task run. A worker claims a queued task (`queued → running`, conditional, so exactly one
//! claim wins), runs it under its deadline and a cancellation token, and
//! writes the result only if the task is still `running`: a task cancelled
//! meanwhile keeps `cancelled` and its late result is dropped.
//!
//! Running tasks carry a lease renewed by their instance. A lease that runs
//! out means the instance died: the sweeper ends such tasks `failed` with
//! `interrupted`. At start an instance also ends at once the tasks its own
//! previous life left running.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use taskgate_core::task::error_code;
use taskgate_core::{
    AttemptOutcome, Attempts, Mode, PlanName, RunnerId, SandboxOutcome, TaskError, TaskId,
    TaskStatus, Timestamp,
};
use taskgate_providers::{Attempt, ExecContext, ExecError, Execution, LocalClock};
use taskgate_store::prelude::*;
use taskgate_store::{Claim, StoreResult, TaskEnd, TaskFinish, TaskRecord};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::catalog::{ApiEntry, Catalog};
use crate::config::PlanLimits;
use crate::fair::{Fair, Lane, Workers};
use crate::streams::Streams;

const POLL_EVERY: Duration = Duration::from_secs(1);
/// Queued tasks read from the store per poll: of one account, and in all.
const POLL_PER_ACCOUNT: i64 = 64;
const POLL_LIMIT: i64 = 1024;
/// With tasks waiting here already, the store is read every this many polls.
const BUSY_POLL_TICKS: u64 = 10;

/// When the caller of [`Executor::enqueue`] tells anyone of the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    /// As soon as it is stored (an async call's `202`, a stream's first
    /// event): it must be durable by then.
    AtOnce,
    /// At its end (a sync call's answer), or after reading it with
    /// `TaskStore::settle_task`.
    AtEnd,
}

pub struct Executor {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    runner: RunnerId,
    /// How long a claim holds without renewal: a task whose instance died
    /// is taken back this long after its last renewal.
    lease_ms: i64,
    /// Queued tasks by account and mode, taking turns within each plan's
    /// caps; and the workers of each mode, busy or free.
    fair: Fair,
    /// Wakes the dispatcher: a task was queued or one ended.
    wake: Notify,
    /// Each plan's caps of an account's running tasks.
    plans: BTreeMap<PlanName, PlanLimits>,
    /// Ids this instance is handling now, so the poller does not claim twice.
    inflight: Mutex<HashSet<TaskId>>,
    running: Mutex<HashMap<TaskId, CancellationToken>>,
    waiters: Mutex<HashMap<TaskId, Vec<oneshot::Sender<TaskRecord>>>>,
    /// Output of the streaming tasks running here.
    pub streams: Streams,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Executor {
    pub async fn start(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        runner: RunnerId,
        workers: Workers,
        plans: BTreeMap<PlanName, PlanLimits>,
        redis: Option<Arc<crate::redis::Redis>>,
        lease: Duration,
    ) -> anyhow::Result<Arc<Self>> {
        let interrupted = store
            .interrupt_expired(Timestamp::now(), Some(&runner))
            .await?;
        if !interrupted.is_empty() {
            tracing::warn!(
                count = interrupted.len(),
                "tasks interrupted by a previous stop ended failed"
            );
        }
        let executor = Arc::new(Self {
            store,
            catalog,
            runner,
            lease_ms: lease.as_millis().clamp(300, i64::MAX as u128) as i64,
            fair: Fair::new(workers),
            wake: Notify::new(),
            plans,
            inflight: Mutex::new(HashSet::new()),
            running: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            streams: Streams::new(redis),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        });
        tokio::spawn(executor.clone().dispatch());
        tokio::spawn(executor.clone().maintain());
        // Ends written by other instances sharing the store.
        match executor.store.task_ends().await {
            Ok(Some(ends)) => {
                tokio::spawn(executor.clone().follow_ends(ends));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %e,
                "cannot follow other instances' task ends; cancels and waits across instances fall back to the store's sweeps"
            ),
        }
        Ok(executor)
    }

    /// Acts on tasks that ended anywhere: a task cancelled elsewhere stops
    /// here if it runs here (its upstream request is aborted), and whoever
    /// waits here for a task that ended elsewhere gets it.
    async fn follow_ends(self: Arc<Self>, mut ends: mpsc::Receiver<TaskEnd>) {
        loop {
            let end = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                end = ends.recv() => match end {
                    Some(end) => end,
                    None => return,
                },
            };
            if end.status == TaskStatus::Cancelled {
                self.cancel_running(end.id);
            }
            // A running task of the account may have ended: room under its cap.
            if self.fair.unblock(end.account) {
                self.wake.notify_one();
            }
            // A task running here hands its end to its waiters itself (the
            // notice often comes first), unless it was cancelled elsewhere:
            // then its execution just stops.
            let ends_here =
                end.status != TaskStatus::Cancelled && self.inflight.lock().contains(&end.id);
            if !ends_here && self.waiters.lock().contains_key(&end.id) {
                match self.store.get_task_by_id(end.id).await {
                    Ok(Some(task)) if task.status.is_terminal() => self.notify(&task),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, task = %end.id, "cannot read an ended task")
                    }
                }
            }
        }
    }

    /// Asks for queued task `id` of `lane` to run soon, in its turn.
    fn submit(&self, id: TaskId, lane: Lane) {
        if !self.inflight.lock().contains(&id) && self.fair.push(lane, id) {
            self.wake.notify_one();
        }
    }

    /// A task of `lane` that counted as running has ended: its lane and a
    /// worker are free for the next.
    fn ended(&self, lane: Lane) {
        // The dispatcher is woken only if a task waits for it: at each end
        // it was a wake-up of another task, often of the other worker too,
        // for nothing (bench/RESULTS.md). A task queued after this looks
        // wakes it itself (`submit`).
        if self.fair.done(lane) {
            self.wake.notify_one();
        }
    }

    /// A receiver for the task's final state. Register before submitting.
    pub fn wait(&self, id: TaskId) -> oneshot::Receiver<TaskRecord> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().entry(id).or_default().push(tx);
        rx
    }

    /// Drops the waiters of `id` that stopped waiting (dropped their
    /// receiver): a sync call that gave up, a stream whose reader left.
    pub fn forget(&self, id: TaskId) {
        let mut waiters = self.waiters.lock();
        if let Some(list) = waiters.get_mut(&id) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                waiters.remove(&id);
            }
        }
    }

    /// Stops the running execution of `id` at once, if this instance runs it.
    pub fn cancel_running(&self, id: TaskId) {
        if let Some(token) = self.running.lock().get(&id) {
            token.cancel();
        }
    }

    /// Hands a task's final state to whoever waits for it.
    pub fn notify(&self, task: &TaskRecord) {
        if let Some(waiters) = self.waiters.lock().remove(&task.id) {
            for w in waiters {
                let _ = w.send(task.clone());
            }
        }
    }

    /// Stops taking tasks and waits (at most `grace`) for running ones.
    ///
    /// Queued tasks are left queued in the store, for another instance (or
    /// this one's next start). Tasks still running at the end of the grace
    /// end `interrupted` now, their executions are stopped (upstream
    /// requests aborted), and whoever waits for them here is told.
    pub async fn shutdown(&self, grace: Duration) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return;
        }
        match self
            .store
            .interrupt_expired(Timestamp::now(), Some(&self.runner))
            .await
        {
            Ok(ids) => {
                tracing::warn!(
                    count = ids.len(),
                    "tasks still running at the end of the shutdown grace ended interrupted"
                );
                for id in ids {
                    if let Ok(Some(task)) = self.store.get_task_by_id(id).await {
                        self.notify(&task);
                    }
                }
            }
            Err(e) => tracing::warn!(
                error = %e,
                "cannot end the tasks still running at shutdown; they end `interrupted` when their lease lapses"
            ),
        }
        let running: Vec<CancellationToken> = self.running.lock().values().cloned().collect();
        for token in running {
            token.cancel();
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tracker.wait()).await;
    }

    /// Starts queued tasks as workers free up, lanes taking turns within
    /// their plans' caps. The store is polled too, so tasks queued before a
    /// restart (or by another instance) are found.
    async fn dispatch(self: Arc<Self>) {
        let mut poll = tokio::time::interval(POLL_EVERY);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u64;
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            // A task may start when its lane is under its cap and a worker
            // of its mode is free; each end wakes this if a task waits.
            while !self.fair.has_runnable() {
                tokio::select! {
                    _ = self.shutdown.cancelled() => return,
                    _ = self.wake.notified() => {}
                    _ = poll.tick() => {
                        // Tasks queued here are in the turns already; the
                        // store is read for the others (a restart, another
                        // instance). While a backlog waits on its caps, less
                        // often: the read scans every queued task.
                        ticks += 1;
                        // Accounts found at their cap try again: an end
                        // whose notice was missed holds them a second at most.
                        self.fair.unblock_all();
                        if self.fair.is_empty() || ticks.is_multiple_of(BUSY_POLL_TICKS) {
                            self.poll().await;
                        }
                    }
                }
            }
            // Taken meanwhile (a task started at once): the turn may have changed.
            let Some((id, lane)) = self.fair.next() else {
                continue;
            };
            if !self.inflight.lock().insert(id) {
                self.ended(lane);
                continue;
            }
            let me = self.clone();
            self.tracker.spawn(async move {
                me.run(id, lane).await;
                me.inflight.lock().remove(&id);
                me.ended(lane);
            });
        }
    }

    /// Reads queued tasks from the store into the turns.
    async fn poll(&self) {
        let queued = match self.store.queued_tasks(POLL_PER_ACCOUNT, POLL_LIMIT).await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(error = %e, "cannot poll queued tasks");
                return;
            }
        };
        for (id, account, mode) in queued {
            if self.inflight.lock().contains(&id) || self.fair.is_queued(id) {
                continue;
            }
            let lane = Lane::new(account, mode);
            if !self.fair.knows_cap(lane) {
                let cap = match self.store.get_account(account).await {
                    Ok(Some(a)) => self.cap_of(&a.plan, mode),
                    // Unknown account or plan: one task at a time.
                    Ok(None) => Some(1),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read a queued task's account");
                        continue;
                    }
                };
                self.fair.set_cap(lane, cap);
            }
            self.submit(id, lane);
        }
    }

    /// A plan's cap of running tasks of `mode`.
    fn cap_of(&self, plan: &PlanName, mode: Mode) -> Option<usize> {
        PlanLimits::of(&self.plans, plan)
            .running_cap(mode)
            .map(|n| n as usize)
    }

    async fn maintain(self: Arc<Self>) {
        // Renewed three times per lease: a late renewal or two never lets it lapse.
        let mut tick = tokio::time::interval(Duration::from_millis(self.lease_ms as u64 / 3));
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Timestamp::now();
            let executing: Vec<TaskId> = self.running.lock().keys().copied().collect();
            match self
                .store
                .renew_leases(&self.runner, &executing, now.plus_ms(self.lease_ms))
                .await
            {
                // A lease not renewed is a task that ended meanwhile: one
                // cancelled by an instance whose notice did not arrive
                // stops here now.
                Ok(renewed) if (renewed as usize) < executing.len() => {
                    self.stop_ended(&executing).await
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot renew task leases"),
            }
            match self.store.interrupt_expired(now, None).await {
                Ok(ids) if !ids.is_empty() => {
                    tracing::warn!(
                        count = ids.len(),
                        "tasks of a stopped instance ended interrupted"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot sweep expired leases"),
            }
            if let Err(e) = self.store.idempotency_purge(now.minus_ms(86_400_000)).await {
                tracing::warn!(error = %e, "cannot purge idempotency keys");
            }
        }
    }

    /// Stops the executions among `ids` whose task is cancelled in the store.
    async fn stop_ended(&self, ids: &[TaskId]) {
        for &id in ids {
            if let Ok(Some(task)) = self.store.get_task_by_id(id).await
                && task.status == TaskStatus::Cancelled
                && self.running.lock().contains_key(&id)
            {
                tracing::info!(task = %id, "a task cancelled elsewhere stops here");
                self.cancel_running(id);
            }
        }
    }

    /// Stores a new task and gets it run. When a worker is free at once, the
    /// task is stored already claimed by it: committed before it runs, in one
    /// write instead of an insert and a claim. Otherwise it is stored queued
    /// and the dispatcher runs it when a worker frees up. Returns the task as
    /// stored.
    ///
    /// `max_running` is the account's plan's cap of running tasks of the
    /// task's mode (test tasks have a cap of their own). `told`
    /// says when the caller tells anyone of the task: one told of only at its
    /// end is stored claimed without waiting for durability (its end's
    /// durable commit covers both writes).
    pub async fn enqueue(
        self: &Arc<Self>,
        task: TaskRecord,
        max_running: Option<u32>,
        told: Told,
    ) -> StoreResult<TaskRecord> {
        self.fair.set_cap(
            Lane::new(task.account_id, task.mode),
            max_running.map(|n| n as usize),
        );
        // If the caller goes away (a client hanging up drops its handler), a
        // task already stored must still get run: what is not done in one go
        // here goes on in a task of its own. Most often it is done in one go
        // (a sync call's task held by SQLite until its end): then neither a
        // task of its own nor the wake-up of this one at its end is paid for
        // (bench/RESULTS.md).
        let me = self.clone();
        let mut storing = Box::pin(async move { me.store_and_start(task, told).await });
        if let Some(stored) = (&mut storing).now_or_never() {
            return stored;
        }
        tokio::spawn(storing)
            .await
            .unwrap_or(Err(taskgate_store::StoreError::WriterStopped))
    }

    async fn store_and_start(
        self: &Arc<Self>,
        task: TaskRecord,
        told: Told,
    ) -> StoreResult<TaskRecord> {
        let lane = Lane::new(task.account_id, task.mode);
        // A worker of its mode free at once, and the lane under its cap
        // with nothing of its own waiting: start now. Else wait in the
        // lane's turn.
        if !self.fair.try_start(lane) {
            self.store.insert_task(&task).await?;
            self.submit(task.id, lane);
            return Ok(task);
        }
        let now = task.created_at;
        // With a cap, the store checks it over every instance's tasks; at
        // the cap the task is stored queued instead.
        let cap = self.fair.cap(lane);
        let unclaimed = cap.is_some().then(|| task.clone());
        let task = task.claimed(&self.runner, now, now.plus_ms(self.lease_ms))?;
        let token = CancellationToken::new();
        self.running.lock().insert(task.id, token.clone());
        self.inflight.lock().insert(task.id);
        let stored = match cap {
            Some(cap) => self.store.insert_running_capped(&task, cap as u32).await,
            None if told == Told::AtEnd => {
                self.store.insert_task_unflushed(&task).await.map(|()| true)
            }
            None => self.store.insert_task(&task).await.map(|()| true),
        };
        if !matches!(stored, Ok(true)) {
            self.running.lock().remove(&task.id);
            self.inflight.lock().remove(&task.id);
            self.fair.done(lane);
            if let Err(e) = stored {
                self.wake.notify_one();
                return Err(e);
            }
            let queued = unclaimed.expect("only a capped insert is refused");
            self.store.insert_task(&queued).await?;
            self.fair.block(lane, queued.id);
            self.wake.notify_one();
            return Ok(queued);
        }
        let me = self.clone();
        let claimed = task.clone();
        self.tracker.spawn(async move {
            let id = claimed.id;
            me.execute_claimed(claimed, token).await;
            me.inflight.lock().remove(&id);
            me.ended(lane);
        });
        Ok(task)
    }

    async fn run(&self, id: TaskId, lane: Lane) {
        // The token is registered before the claim: a cancel that lands right
        // after the claim commits must find it, or the execution would go on
        // (holding a worker) until its result is dropped.
        let token = CancellationToken::new();
        self.running.lock().insert(id, token.clone());
        let now = Timestamp::now();
        let lease_until = now.plus_ms(self.lease_ms);
        let claimed = match self.fair.cap(lane) {
            Some(cap) => self
                .store
                .claim_task_capped(
                    id,
                    lane.account,
                    lane.mode,
                    &self.runner,
                    now,
                    lease_until,
                    cap as u32,
                )
                .await
                .map(|claim| match claim {
                    Claim::Claimed(task) => Some(*task),
                    Claim::Gone => None,
                    Claim::AtCap => {
                        // Other instances run the lane's cap: wait for an end.
                        self.fair.block(lane, id);
                        None
                    }
                }),
            None => {
                self.store
                    .claim_task(id, &self.runner, now, lease_until)
                    .await
            }
        };
        let task = match claimed {
            Ok(Some(task)) => task,
            Ok(None) => {
                self.running.lock().remove(&id);
                return; // claimed elsewhere, cancelled while queued, or at the cap
            }
            Err(e) => {
                self.running.lock().remove(&id);
                tracing::warn!(error = %e, task = %id, "cannot claim task");
                return;
            }
        };
        self.execute_claimed(task, token).await;
    }

    /// Runs a task this instance has claimed, under its deadline and token.
    async fn execute_claimed(&self, task: TaskRecord, token: CancellationToken) {
        let deadline = Duration::from_millis(task.timeout_ms.max(1) as u64);
        let mut ctx = ExecContext::with_timeout(deadline);
        let entry = self.catalog.get(task.api.as_str());
        if entry.is_some_and(|e| e.spec.kind == "chat") {
            let hub = self.streams.open(task.id);
            ctx = ctx.stream_to(Arc::new(move |delta: &str| hub.push(delta)));
        }
        let result = match entry {
            Some(entry) => {
                tokio::select! {
                    biased;
                    _ = token.cancelled() => None,
                    r = tokio::time::timeout(deadline, execute_guarded(entry, &task, &mut ctx)) => Some(match r {
                        Ok(r) => r.and_then(|x| check_output(entry, x)),
                        Err(_) => {
                            ctx.abandon(AttemptOutcome::Timeout);
                            Err(ExecError::new(
                                error_code::TIMEOUT,
                                format!("The task did not finish within its timeout of {} ms.", task.timeout_ms),
                            ))
                        }
                    }),
                }
            }
            None => Some(Err(ExecError::new(
                error_code::INTERNAL_ERROR,
                "The API of this task is no longer in the catalog.",
            ))),
        };
        self.running.lock().remove(&task.id);
        if result.is_none() {
            ctx.abandon(AttemptOutcome::Cancelled);
        }
        let attempts = ctx.into_attempts();
        for a in &attempts {
            crate::metrics::record_attempt(a);
        }
        let Some(result) = result else {
            // Cancelled: the cancel already wrote the task's state; the
            // attempts made until then are added to it.
            self.streams.close(task.id);
            let attempts = Attempts(attempts);
            if let Err(e) = self
                .store
                .record_cancelled_attempts(task.id, &attempts)
                .await
            {
                tracing::warn!(error = %e, task = %task.id, "cannot record a cancelled task's attempts");
            }
            return;
        };
        self.finish(task, result, attempts).await;
    }

    async fn finish(
        &self,
        task: TaskRecord,
        result: Result<Execution, ExecError>,
        attempts: Vec<Attempt>,
    ) {
        let started_at = task.started_at.unwrap_or(Timestamp::UNIX_EPOCH);
        let completed_at = Timestamp::now().max(started_at);
        let live = task.mode == Mode::Live;
        let entry = self.catalog.get(task.api.as_str());
        let (status, output, error, usage) = match result {
            Ok(x) => (
                TaskStatus::Succeeded,
                Some(x.output.to_string()),
                None,
                x.usage,
            ),
            Err(e) => {
                let error = TaskError {
                    code: e.code,
                    message: e.message,
                    upstream_status: e.upstream_status,
                };
                (TaskStatus::Failed, None, Some(error), Default::default())
            }
        };
        // Only live, successful tasks are charged.
        let cost = match (entry, live && status == TaskStatus::Succeeded) {
            (Some(entry), true) => entry.cost(&usage).0,
            _ => 0,
        };
        let finish = TaskFinish {
            status,
            output,
            message: error.as_ref().map(|_| "execution failed".to_owned()),
            error,
            units: usage.units,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_micros: cost,
            attempts: Attempts(attempts),
            completed_at,
            charge_account: live.then_some(task.account_id),
        };
        // A result that cannot be written leaves the task running (and its
        // lease renewed), so a passing storage failure is retried a while.
        let mut written = self.store.finish_task(task.id, &finish).await;
        let mut pause = Duration::from_millis(100);
        while written.is_err() && pause <= Duration::from_secs(2) {
            tokio::time::sleep(pause).await;
            pause *= 2;
            written = self.store.finish_task(task.id, &finish).await;
        }
        match written {
            Ok(true) => {
                crate::metrics::record_task(&task.api, task.mode, status);
                let id = task.id;
                match task.finished(&finish) {
                    Ok(done) => self.notify(&done),
                    // The record given to `finish` is the claimed one, so this
                    // does not happen; if it did, waiters get what is stored.
                    Err(e) => {
                        tracing::error!(error = %e, task = %id, "a finished task was not running");
                        if let Ok(Some(current)) = self.store.get_task_by_id(id).await {
                            self.notify(&current);
                        }
                    }
                }
                self.streams.close(id);
            }
            Ok(false) => {
                // Cancelled or interrupted meanwhile: show waiters what is stored.
                match self.store.get_task_by_id(task.id).await {
                    Ok(Some(current)) => self.notify(&current),
                    // Not stored at all: its unflushed insert was lost in a
                    // database crash. Waiters are let go, to find it gone.
                    Ok(None) => drop(self.waiters.lock().remove(&task.id)),
                    Err(_) => {}
                }
                self.streams.close(task.id);
            }
            Err(e) => {
                self.streams.close(task.id);
                tracing::error!(error = %e, task = %task.id, "cannot record a task's result")
            }
        }
    }
}

/// [`execute`], with a panic of the provider (a bug) turned into the task's
/// failure: the task ends `failed` with `internal_error` like any other, its
/// lease and stream are released, and the worker goes on.
async fn execute_guarded(
    entry: &ApiEntry,
    task: &TaskRecord,
    ctx: &mut ExecContext,
) -> Result<Execution, ExecError> {
    match AssertUnwindSafe(execute(entry, task, ctx))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(_) => {
            tracing::error!(task = %task.id, api = %task.api, "the execution of a task panicked");
            Err(ExecError::new(
                error_code::INTERNAL_ERROR,
                "The execution failed unexpectedly.",
            ))
        }
    }
}

async fn execute(
    entry: &ApiEntry,
    task: &TaskRecord,
    ctx: &mut ExecContext,
) -> Result<Execution, ExecError> {
    let input: Value = serde_json::from_str(&task.input).map_err(|_| {
        ExecError::new(
            error_code::INTERNAL_ERROR,
            "The stored input is unreadable.",
        )
    })?;
    if task.mode != Mode::Test {
        return entry.provider.execute(&entry.spec.slug, &input, ctx).await;
    }
    // Test mode never leaves the process: the API's sandbox behaviour, shaped
    // by the task's sandbox controls.
    let controls = task.sandbox.clone().unwrap_or_default();
    let clock = LocalClock::start();
    let chat = entry.spec.kind == "chat";
    let streamed = chat && controls.outcome == SandboxOutcome::Succeeded;
    if controls.delay_ms > 0 && !streamed {
        tokio::time::sleep(Duration::from_millis(controls.delay_ms)).await;
    }
    let result = match controls.outcome {
        SandboxOutcome::Failed => Err(ExecError::new(
            controls
                .error_code
                .as_deref()
                .unwrap_or(error_code::UPSTREAM_ERROR),
            "Simulated failure (test mode sandbox).",
        )),
        // A hang: the task's own deadline ends it with `timeout`.
        SandboxOutcome::Timeout => std::future::pending().await,
        SandboxOutcome::Succeeded => entry.provider.sandbox(&entry.spec, &input).await,
    };
    // A simulated chat reply streams like a real one, word by word, spread
    // over the delay when there is one.
    if let Ok(x) = &result
        && let Some(text) = x.output.get("text").and_then(Value::as_str)
        && chat
    {
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        let pause = Duration::from_millis(controls.delay_ms) / words.len().max(1) as u32;
        for (i, word) in words.iter().enumerate() {
            if i > 0 && streamed && !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            ctx.delta(word);
        }
        if streamed && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    ctx.push(clock.attempt("sandbox", entry.spec.slug.clone(), result.is_ok()));
    result
}

/// A provider's output must satisfy the API's output schema.
fn check_output(entry: &ApiEntry, x: Execution) -> Result<Execution, ExecError> {
    let violations = entry.output_schema.violations(&x.output);
    match violations.first() {
        None => Ok(x),
        Some(v) => {
            tracing::warn!(api = %entry.spec.slug, path = %v.path, "provider output violates the output schema");
            Err(ExecError::new(
                error_code::INVALID_UPSTREAM_RESPONSE,
                "The provider returned an output that does not match the API's output schema.",
            ))
        }
    }
}
