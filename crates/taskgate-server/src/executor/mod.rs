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
//!
//! What decides an outcome by the time (a lease's lapse, a task's deadline,
//! a sandbox's delay, a retention's cut-off, the times a task records) reads
//! the executor's [`Clock`], which tests move; the timers that only pace a
//! loop (renewals, polls, purges) run on the runtime's time.
//!
//! One `Executor`, its parts in a module each:
//! - `dispatch`: storing a new task, the turns of `fair`, the dispatcher;
//! - `leases`: renewing this instance's leases, sweeping those of dead
//!   instances, polling the store for queued tasks;
//! - `run` and `finish`: one task's claim, execution, cost and end;
//! - `waiters`: who waits for a task's end, cancels, and the ends written by
//!   other instances;
//! - `housekeeping`: what the store keeps past its time (idempotency keys,
//!   ended tasks past their retention).

mod dispatch;
mod execution;
mod fair;
mod finish;
mod housekeeping;
mod leases;
mod run;
mod waiters;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use taskgate_core::{Clock, PlanName, RunnerId, TaskId};
use taskgate_store::TaskRecord;
use taskgate_store::prelude::*;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use execution::Execution;
pub use fair::Workers;
pub use housekeeping::{IDEMPOTENCY_TTL_MS, Retention};

use crate::catalog::Catalog;
use crate::config::PlanLimits;
use crate::streams::Streams;
use crate::telemetry::Telemetry;
use fair::Fair;

/// The shortest lease: a shorter setting is taken as this, so renewals
/// (three per lease) stay 100 ms apart at least.
const MIN_LEASE_MS: u128 = 300;
/// After the shutdown grace, how long stopped executions get to write their
/// end.
const STOPPED_WAIT: Duration = Duration::from_secs(2);

/// When the caller of [`Executor::enqueue`] tells anyone of the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    /// As soon as it is stored (an async call's `202`, a stream's first
    /// event): it must be durable by then.
    AtOnce,
    /// At its end (a sync call's answer), or after reading it with
    /// `TaskQueue::settle_task`.
    AtEnd,
}

pub struct Executor {
    store: Arc<dyn Store>,
    /// Where the time is read.
    clock: Clock,
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
    /// Tasks' spans, when traces are exported.
    telemetry: Arc<Telemetry>,
}

/// How an executor runs, from the configuration.
pub struct Settings {
    /// This instance's name on the tasks it claims.
    pub runner: RunnerId,
    pub workers: Workers,
    /// Each plan's caps of an account's running tasks.
    pub plans: BTreeMap<PlanName, PlanLimits>,
    /// How long a claim holds without renewal.
    pub lease: Duration,
    pub telemetry: Arc<Telemetry>,
}

impl Executor {
    /// Ends the tasks a previous stop of this runner left running, and starts
    /// dispatching; the time is read from `clock` (tests move it).
    pub async fn start(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        settings: Settings,
        redis: Option<Arc<crate::redis::Redis>>,
        clock: Clock,
    ) -> anyhow::Result<Arc<Self>> {
        let Settings {
            runner,
            workers,
            plans,
            lease,
            telemetry,
        } = settings;
        let interrupted = store.interrupt_expired(clock.now(), Some(&runner)).await?;
        if !interrupted.is_empty() {
            tracing::warn!(
                count = interrupted.len(),
                "tasks interrupted by a previous stop ended failed"
            );
        }
        let executor = Arc::new(Self {
            store,
            clock,
            catalog,
            runner,
            lease_ms: lease.as_millis().clamp(MIN_LEASE_MS, i64::MAX as u128) as i64,
            fair: Fair::new(workers),
            wake: Notify::new(),
            plans,
            inflight: Mutex::new(HashSet::new()),
            running: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            streams: Streams::new(redis),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            telemetry,
        });
        tokio::spawn(executor.clone().dispatch());
        tokio::spawn(executor.clone().maintain());
        tokio::spawn(executor.clone().purge_idempotency_keys());
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
            .interrupt_expired(self.clock.now(), Some(&self.runner))
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
        let _ = tokio::time::timeout(STOPPED_WAIT, self.tracker.wait()).await;
    }
}
