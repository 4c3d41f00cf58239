//! The executor: a bounded pool of workers fed from the store.
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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use taskgate_core::task::error_code;
use taskgate_core::timefmt::format_ms;
use taskgate_providers::{Attempt, ExecContext, ExecError, Execution, LocalClock};
use taskgate_store::{Store, StoreResult, TaskFinish, TaskRecord};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::catalog::{ApiEntry, Catalog};
use crate::ratelimit::now_ms;
use crate::streams::Streams;

const LEASE_MS: i64 = 30_000;
const LEASE_RENEW_EVERY: Duration = Duration::from_secs(10);
const POLL_EVERY: Duration = Duration::from_secs(1);
const QUEUE_CAPACITY: usize = 10_000;

/// The `sandbox` controls of a test-mode task.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SandboxControls {
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default = "default_outcome")]
    pub outcome: String,
    #[serde(default)]
    pub error_code: Option<String>,
}

fn default_outcome() -> String {
    "succeeded".to_owned()
}

pub struct Executor {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    runner: String,
    permits: Arc<Semaphore>,
    queue: mpsc::Sender<String>,
    /// Ids this instance is handling now, so the poller does not claim twice.
    inflight: Mutex<HashSet<String>>,
    running: Mutex<HashMap<String, CancellationToken>>,
    waiters: Mutex<HashMap<String, Vec<oneshot::Sender<TaskRecord>>>>,
    /// Output of the streaming tasks running here.
    pub streams: Streams,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Executor {
    pub async fn start(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        runner: String,
        workers: usize,
    ) -> anyhow::Result<Arc<Self>> {
        let interrupted = store.interrupt_expired(now_ms(), Some(&runner)).await?;
        if !interrupted.is_empty() {
            tracing::warn!(
                count = interrupted.len(),
                "tasks interrupted by a previous stop ended failed"
            );
        }
        let (queue, rx) = mpsc::channel(QUEUE_CAPACITY);
        let executor = Arc::new(Self {
            store,
            catalog,
            runner,
            permits: Arc::new(Semaphore::new(workers)),
            queue,
            inflight: Mutex::new(HashSet::new()),
            running: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            streams: Streams::default(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        });
        tokio::spawn(executor.clone().dispatch(rx));
        tokio::spawn(executor.clone().maintain());
        Ok(executor)
    }

    /// Asks for `id` to run soon. The task is already durable: if the nudge
    /// cannot be queued the poller finds the task.
    pub fn submit(&self, id: String) {
        let _ = self.queue.try_send(id);
    }

    /// A receiver for the task's final state. Register before submitting.
    pub fn wait(&self, id: &str) -> oneshot::Receiver<TaskRecord> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .entry(id.to_owned())
            .or_default()
            .push(tx);
        rx
    }

    /// Drops the waiters of `id` that stopped waiting (dropped their
    /// receiver): a sync call that gave up, a stream whose reader left.
    pub fn forget(&self, id: &str) {
        let mut waiters = self.waiters.lock();
        if let Some(list) = waiters.get_mut(id) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                waiters.remove(id);
            }
        }
    }

    /// Stops the running execution of `id` at once, if this instance runs it.
    pub fn cancel_running(&self, id: &str) {
        if let Some(token) = self.running.lock().get(id) {
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
    pub async fn shutdown(&self, grace: Duration) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("tasks still running at shutdown; they end `interrupted` at next start");
        }
    }

    async fn dispatch(self: Arc<Self>, mut rx: mpsc::Receiver<String>) {
        let mut poll = tokio::time::interval(POLL_EVERY);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let ids: Vec<String> = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                id = rx.recv() => match id { Some(id) => vec![id], None => return },
                _ = poll.tick() => match self.store.queued_task_ids(256).await {
                    Ok(ids) => ids,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot poll queued tasks");
                        Vec::new()
                    }
                },
            };
            for id in ids {
                if !self.inflight.lock().insert(id.clone()) {
                    continue;
                }
                let permit = tokio::select! {
                    _ = self.shutdown.cancelled() => return,
                    p = self.permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                };
                let me = self.clone();
                self.tracker.spawn(async move {
                    me.run(&id).await;
                    me.inflight.lock().remove(&id);
                    drop(permit);
                });
            }
        }
    }

    async fn maintain(self: Arc<Self>) {
        let mut tick = tokio::time::interval(LEASE_RENEW_EVERY);
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = now_ms();
            let executing: Vec<String> = self.running.lock().keys().cloned().collect();
            if let Err(e) = self
                .store
                .renew_leases(&self.runner, &executing, now + LEASE_MS)
                .await
            {
                tracing::warn!(error = %e, "cannot renew task leases");
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
            if let Err(e) = self.store.idempotency_purge(now - 86_400_000).await {
                tracing::warn!(error = %e, "cannot purge idempotency keys");
            }
        }
    }

    /// Stores a new task and gets it run. When a worker is free at once, the
    /// task is stored already claimed by it: durable before it runs, in one
    /// write instead of an insert and a claim. Otherwise it is stored queued
    /// and the dispatcher runs it when a worker frees up. Returns the task as
    /// stored.
    pub async fn enqueue(self: &Arc<Self>, task: TaskRecord) -> StoreResult<TaskRecord> {
        // In a task of its own: if the caller goes away (a client hanging up
        // drops its handler), a task already stored must still get run.
        let me = self.clone();
        tokio::spawn(async move { me.store_and_start(task).await })
            .await
            .unwrap_or(Err(taskgate_store::StoreError::WriterStopped))
    }

    async fn store_and_start(self: &Arc<Self>, mut task: TaskRecord) -> StoreResult<TaskRecord> {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            self.store.insert_task(&task).await?;
            self.submit(task.id.clone());
            return Ok(task);
        };
        let now = task.created_at;
        task.status = "running".to_owned();
        task.started_at = Some(now);
        task.runner = Some(self.runner.clone());
        task.lease_until = Some(now + LEASE_MS);
        task.events =
            format!(r#"[{{"status":"queued","at":{now}}},{{"status":"running","at":{now}}}]"#);
        let token = CancellationToken::new();
        self.running.lock().insert(task.id.clone(), token.clone());
        self.inflight.lock().insert(task.id.clone());
        if let Err(e) = self.store.insert_task(&task).await {
            self.running.lock().remove(&task.id);
            self.inflight.lock().remove(&task.id);
            return Err(e);
        }
        let me = self.clone();
        let claimed = task.clone();
        self.tracker.spawn(async move {
            let id = claimed.id.clone();
            me.execute_claimed(claimed, token).await;
            me.inflight.lock().remove(&id);
            drop(permit);
        });
        Ok(task)
    }

    async fn run(&self, id: &str) {
        // The token is registered before the claim: a cancel that lands right
        // after the claim commits must find it, or the execution would go on
        // (holding a worker) until its result is dropped.
        let token = CancellationToken::new();
        self.running.lock().insert(id.to_owned(), token.clone());
        let now = now_ms();
        let task = match self
            .store
            .claim_task(id, &self.runner, now, now + LEASE_MS)
            .await
        {
            Ok(Some(task)) => task,
            Ok(None) => {
                self.running.lock().remove(id);
                return; // claimed elsewhere, or cancelled while queued
            }
            Err(e) => {
                self.running.lock().remove(id);
                tracing::warn!(error = %e, task = id, "cannot claim task");
                return;
            }
        };
        self.execute_claimed(task, token).await;
    }

    /// Runs a task this instance has claimed, under its deadline and token.
    async fn execute_claimed(&self, task: TaskRecord, token: CancellationToken) {
        let deadline = Duration::from_millis(task.timeout_ms.max(1) as u64);
        let mut ctx = ExecContext::with_timeout(deadline);
        let entry = self.catalog.get(&task.api);
        if entry.is_some_and(|e| e.spec.kind == "chat") {
            let hub = self.streams.open(&task.id);
            ctx = ctx.stream_to(Arc::new(move |delta: &str| hub.push(delta)));
        }
        let result = match entry {
            Some(entry) => {
                tokio::select! {
                    biased;
                    _ = token.cancelled() => None,
                    r = tokio::time::timeout(deadline, execute(entry, &task, &mut ctx)) => Some(match r {
                        Ok(r) => r.and_then(|x| check_output(entry, x)),
                        Err(_) => {
                            ctx.abandon("timeout");
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
            ctx.abandon("cancelled");
        }
        let attempts = ctx.into_attempts();
        for a in &attempts {
            crate::metrics::record_attempt(a);
        }
        let Some(result) = result else {
            // Cancelled: the cancel already wrote the task's state; the
            // attempts made until then are added to it.
            self.streams.close(&task.id);
            let attempts = attempts_json(&attempts);
            if let Err(e) = self
                .store
                .record_cancelled_attempts(&task.id, &attempts)
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
        let completed_at = now_ms().max(task.started_at.unwrap_or(0));
        let live = task.mode == "live";
        let entry = self.catalog.get(&task.api);
        let (status, output, error, usage) = match result {
            Ok(x) => ("succeeded", Some(x.output.to_string()), None, x.usage),
            Err(e) => {
                let mut err = json!({ "code": e.code, "message": e.message });
                if let Some(s) = e.upstream_status {
                    err["upstream_status"] = json!(s);
                }
                ("failed", None, Some(err.to_string()), Default::default())
            }
        };
        // Only live, successful tasks are charged.
        let cost = match (entry, live && status == "succeeded") {
            (Some(entry), true) => entry.cost(&usage).0,
            _ => 0,
        };
        let event = match &error {
            None => json!({ "status": status, "at": completed_at }),
            Some(_) => {
                json!({ "status": status, "at": completed_at, "message": "execution failed" })
            }
        };
        let finish = TaskFinish {
            status: status.to_owned(),
            output,
            error,
            units: usage.units,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_micros: cost,
            attempts: attempts_json(&attempts),
            completed_at,
            event: event.to_string(),
            charge_account: live.then(|| task.account_id.clone()),
        };
        // A result that cannot be written leaves the task running (and its
        // lease renewed), so a passing storage failure is retried a while.
        let mut written = self.store.finish_task(&task.id, &finish).await;
        let mut pause = Duration::from_millis(100);
        while written.is_err() && pause <= Duration::from_secs(2) {
            tokio::time::sleep(pause).await;
            pause *= 2;
            written = self.store.finish_task(&task.id, &finish).await;
        }
        match written {
            Ok(true) => {
                crate::metrics::record_task(&task.api, &task.mode, status);
                let done = finished_record(task, finish);
                self.notify(&done);
                self.streams.close(&done.id);
            }
            Ok(false) => {
                // Cancelled or interrupted meanwhile: show waiters what is stored.
                if let Ok(Some(current)) = self.store.get_task_by_id(&task.id).await {
                    self.notify(&current);
                }
                self.streams.close(&task.id);
            }
            Err(e) => {
                self.streams.close(&task.id);
                tracing::error!(error = %e, task = %task.id, "cannot record a task's result")
            }
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
    if task.mode != "test" {
        return entry.provider.execute(&entry.spec.slug, &input, ctx).await;
    }
    // Test mode never leaves the process: the API's sandbox behaviour, shaped
    // by the task's sandbox controls.
    let controls: SandboxControls = task
        .sandbox
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| SandboxControls {
            outcome: default_outcome(),
            ..Default::default()
        });
    let clock = LocalClock::start();
    if controls.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(controls.delay_ms)).await;
    }
    let result = match controls.outcome.as_str() {
        "failed" => Err(ExecError::new(
            controls
                .error_code
                .as_deref()
                .unwrap_or(error_code::UPSTREAM_ERROR),
            "Simulated failure (test mode sandbox).",
        )),
        // A hang: the task's own deadline ends it with `timeout`.
        "timeout" => std::future::pending().await,
        _ => entry.provider.sandbox(&entry.spec, &input).await,
    };
    // A simulated chat reply streams like a real one, word by word.
    if let Ok(x) = &result
        && let Some(text) = x.output.get("text").and_then(Value::as_str)
        && entry.spec.kind == "chat"
    {
        for word in text.split_inclusive(' ') {
            ctx.delta(word);
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

/// The attempts as stored on the task.
fn attempts_json(attempts: &[Attempt]) -> String {
    let list: Vec<Value> = attempts
        .iter()
        .map(|a| {
            let started = (a.started_at.unix_timestamp_nanos() / 1_000_000) as i64;
            let mut v = json!({
                "provider": a.provider,
                "target": a.target,
                "started_at": format_ms(started),
                "duration_ms": a.duration_ms,
                "outcome": a.outcome,
            });
            if let Some(s) = a.http_status {
                v["http_status"] = json!(s);
            }
            v
        })
        .collect();
    Value::Array(list).to_string()
}

/// The task as stored after `finish`, built without reading it back.
fn finished_record(mut task: TaskRecord, f: TaskFinish) -> TaskRecord {
    task.status = f.status;
    task.output = f.output;
    task.error = f.error;
    task.units = f.units;
    task.input_tokens = f.input_tokens;
    task.output_tokens = f.output_tokens;
    task.cost_micros = f.cost_micros;
    task.attempts = f.attempts;
    task.completed_at = Some(f.completed_at);
    task.lease_until = None;
    if let Some(rest) = task.events.strip_suffix(']') {
        let sep = if rest.trim_end().ends_with('[') {
            ""
        } else {
            ","
        };
        task.events = format!("{rest}{sep}{}]", f.event);
    }
    task
}
