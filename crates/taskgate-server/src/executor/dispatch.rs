//! Dispatch and fairness: a new task is stored claimed and started at once
//! when a worker of its mode is free and its lane under its cap; else it
//! waits in its lane's turn (`fair.rs`) for the dispatcher, which starts
//! queued tasks as workers free up.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use taskgate_core::TaskId;
use taskgate_store::{StoreResult, TaskRecord};
use tokio_util::sync::CancellationToken;

use super::execution::Execution;
use super::fair::Lane;
use super::{Executor, Told};

/// How often the dispatcher looks at the store for queued tasks it was not
/// told of (a restart, another instance), and unblocks lanes found at their
/// cap.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// With tasks waiting here already, the store is read every this many polls.
const BUSY_POLL_TICKS: u64 = 10;

impl Executor {
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
        let (task, execution) = self.enqueue_here(task, max_running, told).await?;
        if let Some(execution) = execution {
            execution.detach();
        }
        Ok(task)
    }

    /// [`Self::enqueue`], with the execution of a task started at once
    /// handed to the caller, to run in the caller's task while the caller
    /// waits for the end ([`Execution::alongside`]); dropped, it runs on
    /// its own.
    pub async fn enqueue_here(
        self: &Arc<Self>,
        task: TaskRecord,
        max_running: Option<u32>,
        told: Told,
    ) -> StoreResult<(TaskRecord, Option<Execution>)> {
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
    ) -> StoreResult<(TaskRecord, Option<Execution>)> {
        let lane = Lane::new(task.account_id, task.mode);
        // A worker of its mode free at once, and the lane under its cap
        // with nothing of its own waiting: start now. Else wait in the
        // lane's turn.
        if !self.fair.try_start(lane) {
            self.store.insert_task(&task).await?;
            self.submit(task.id, lane);
            return Ok((task, None));
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
            return Ok((queued, None));
        }
        let me = self.clone();
        let claimed = task.clone();
        let execution = Execution::new(
            async move {
                let id = claimed.id;
                me.execute_claimed(claimed, token).await;
                me.inflight.lock().remove(&id);
                me.ended(lane);
            },
            &self.tracker,
        );
        Ok((task, Some(execution)))
    }

    /// Asks for queued task `id` of `lane` to run soon, in its turn.
    pub(super) fn submit(&self, id: TaskId, lane: Lane) {
        if !self.inflight.lock().contains(&id) && self.fair.push(lane, id) {
            self.wake.notify_one();
        }
    }

    /// A task of `lane` that counted as running has ended: its lane and a
    /// worker are free for the next.
    pub(super) fn ended(&self, lane: Lane) {
        // The dispatcher is woken only if a task waits for it: at each end
        // it was a wake-up of another task, often of the other worker too,
        // for nothing (bench/RESULTS.md). A task queued after this looks
        // wakes it itself (`submit`).
        if self.fair.done(lane) {
            self.wake.notify_one();
        }
    }

    /// Starts queued tasks as workers free up, lanes taking turns within
    /// their plans' caps. The store is polled too, so tasks queued before a
    /// restart (or by another instance) are found.
    pub(super) async fn dispatch(self: Arc<Self>) {
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
}
