//! The outbox's sender: it claims the deliveries that are due (the store
//! writes them in the commit of each task's change), sends each as a signed
//! Standard Webhooks message, writes the attempt, and schedules the next one
//! by `webhooks.retry_schedule`.
//!
//! One sender per instance. The store's claim holds a delivery under a
//! lease, so with several instances each attempt is made by one; a sender
//! that stops mid-attempt leaves its deliveries to be claimed again when
//! the lease ends (or at once by itself, restarted): at least once, with the
//! same `webhook-id`. The claim takes at most
//! `webhooks.max_concurrency_per_endpoint` deliveries of one destination at
//! a time, counting those already being sent, so a slow endpoint holds its
//! own turns only and never delays another's.
//!
//! Where the store can (SQLite: one process owns it), the deliveries this
//! process writes skip the claim: the store holds each for the sender in
//! the commit that writes it, if the sender has room for it, and hands it
//! over once that commit is done (`Lane`, the store's `DeliverySink`). It
//! goes out at once, with the task as written and its endpoint as read in
//! that commit, or, when its destination's turns are all taken, as soon as
//! one of its deliveries being sent ends (at most as many wait as the
//! destination has turns). The claim then only looks when
//! something is left for it: a delivery written unheld, one due again, one
//! whose lease ran out. Where instances share the store (PostgreSQL), each
//! commit of deliveries wakes every instance's claim instead.

mod attempt;
mod payload;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use taskgate_core::{Clock, DeliveryStatus, RunnerId, Timestamp};
use taskgate_store::{
    ClaimedDelivery, DeliveryOutcome, DeliverySink, Destination, Store, TaskRecord,
    WebhookDelivery, WebhookEndpoint,
};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::WebhooksConfig;
use attempt::{Client, Sent};

/// How often the sender looks for due deliveries when nothing woke it
/// (another instance's events, retries coming due, leases run out): at
/// first, and after any claim that found some ...
const POLL_EVERY: Duration = Duration::from_millis(250);
/// ... and, doubling after each claim that found none, at most this far
/// apart: an instance without webhooks looks every 2 s, not four
/// times a second.
const POLL_IDLE: Duration = Duration::from_secs(2);
/// How long the sender waits, told that deliveries were written (PostgreSQL),
/// before it claims them: the commits of that time are claimed together. A
/// claim is a transaction of its own; one per call would cost more than the
/// call itself (bench/RESULTS.md, issue 30, eighth session).
const GATHER: Duration = Duration::from_millis(25);
/// Deliveries claimed in one round at most.
const CLAIM_AT_MOST: i64 = 64;
/// Deliveries held on this instance (being sent, or waiting for a turn) at
/// most.
const IN_FLIGHT_AT_MOST: usize = 256;

pub struct Outbox {
    wake: Notify,
}

impl Outbox {
    /// Starts the sender; it stops with `shutdown` (an attempt in flight is
    /// abandoned and sent again after its lease).
    pub fn start(
        store: Arc<dyn Store>,
        config: WebhooksConfig,
        runner: RunnerId,
        clock: Clock,
        shutdown: CancellationToken,
        tracer: Option<taskgate_core::trace::Tracer>,
    ) -> anyhow::Result<Arc<Outbox>> {
        let outbox = Arc::new(Outbox {
            wake: Notify::new(),
        });
        let sender = Sender {
            client: Client::new(&config, tracer).map_err(anyhow::Error::msg)?,
            store,
            per_destination: config.max_concurrency_per_endpoint,
            config: Arc::new(config),
            runner,
            clock,
            slots: Semaphore::new(IN_FLIGHT_AT_MOST),
            turns: Mutex::new(HashMap::new()),
            backlog: AtomicBool::new(true),
        };
        tokio::spawn(sender.run(outbox.clone(), shutdown));
        Ok(outbox)
    }

    /// Looks for due deliveries now (one was just made due here).
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

struct Sender {
    client: Client,
    store: Arc<dyn Store>,
    config: Arc<WebhooksConfig>,
    runner: RunnerId,
    clock: Clock,
    /// The sender's slots: deliveries held here (being sent, or waiting for
    /// a turn) at most.
    slots: Semaphore,
    /// What each destination's deliveries held here are doing.
    turns: Mutex<HashMap<Destination, Held>>,
    per_destination: usize,
    /// Whether the claim may find deliveries (the last one left some due, one
    /// is running, or some were written unheld since): a delivery done then
    /// lets the claim look again at once.
    backlog: AtomicBool,
}

/// A destination's deliveries this sender holds, each with a slot of the
/// sender's.
#[derive(Default)]
struct Held {
    /// Being sent: each has a turn of the destination
    /// (`max_concurrency_per_endpoint`).
    sending: usize,
    /// Held by the store for the sender in a commit not done yet.
    promised: usize,
    /// Held while every turn was taken, oldest first: each goes when a
    /// delivery being sent ends, which passes its turn on (a claim in a
    /// backlog takes up to twice the turns, so the turns go round without a
    /// claim each). At most `max_concurrency_per_endpoint` wait, so each
    /// waits for less than one attempt's time-out, well within its lease
    /// (twice the time-out and 30 s); the store writes a delivery past that
    /// bound unheld, and the claim leaves it.
    queued: VecDeque<(ClaimedDelivery, Timestamp)>,
}

impl Held {
    fn count(&self) -> usize {
        self.sending + self.promised + self.queued.len()
    }
}

/// A turn of a destination (and the slot of the sender of the delivery
/// being sent with it), passed on to the destination's next queued
/// delivery or given back when that is done, or when abandoned.
struct Turn {
    sender: Arc<Sender>,
    to: Option<Destination>,
    /// Not given back yet.
    live: bool,
}

impl Turn {
    /// The delivery sent with this turn is done: the destination's next
    /// queued one, which takes the turn over, or none (the turn given back).
    fn pass_on(&mut self) -> Option<(ClaimedDelivery, Timestamp)> {
        if let Some(to) = &self.to {
            let mut turns = self.sender.turns.lock();
            if let Some(next) = turns.get_mut(to).and_then(|h| h.queued.pop_front()) {
                drop(turns);
                // The done delivery's slot; the next one holds its own.
                self.sender.slots.add_permits(1);
                return Some(next);
            }
        }
        self.give_back();
        None
    }

    fn give_back(&mut self) {
        if std::mem::take(&mut self.live) {
            self.sender.release(self.to.as_ref(), |h| h.sending -= 1);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl Sender {
    async fn run(self, outbox: Arc<Outbox>, shutdown: CancellationToken) {
        let me = Arc::new(self);
        // This instance's previous life's holdings are taken back at once;
        // only then does the store hand deliveries over (the reclaim would
        // take those too).
        let mut reclaim = Some(me.runner.clone());
        let mut lane = Some(Arc::new(Lane {
            sender: Arc::downgrade(&me),
            runner: me.runner.clone(),
            config: me.config.clone(),
            outbox: outbox.clone(),
            shutdown: shutdown.clone(),
            runtime: tokio::runtime::Handle::current(),
        }));
        // Where instances share the store, every one's commits of deliveries
        // wake every sender (PostgreSQL's notifications).
        let mut written = match me.store.deliveries_written().await {
            Ok(words) => words,
            Err(e) => {
                tracing::warn!(error = %e, "cannot follow webhook deliveries as they are written; they wait for the sender's poll");
                None
            }
        };
        let mut pause = POLL_EVERY;
        loop {
            let free = me.slots.available_permits().min(CLAIM_AT_MOST as usize) as i64;
            if free > 0 {
                // A delivery ending while the claim runs frees a turn it may
                // have counted as taken: it wakes the claim again.
                me.backlog.store(true, Ordering::SeqCst);
                let now = me.clock.now();
                let claimed = me
                    .store
                    .claim_deliveries(
                        &me.runner,
                        now,
                        me.lease_end(now),
                        free,
                        // As many more as may wait here for a turn.
                        2 * me.per_destination as i64,
                        reclaim.as_ref(),
                    )
                    .await;
                match claimed {
                    Ok(claim) => {
                        reclaim = None;
                        if let Some(lane) = lane.take()
                            && !me.store.deliver_fresh_to(lane)
                        {
                            tracing::debug!("the store hands no deliveries over: each is claimed");
                        }
                        // Nothing taken: the poll slows (a destination whose
                        // turns are all taken goes on as they end).
                        pause = if claim.deliveries.is_empty() {
                            (pause * 2).min(POLL_IDLE)
                        } else {
                            POLL_EVERY
                        };
                        // Whether a delivery's end (a turn freed) lets the
                        // next claim find some: only if this one left some.
                        // Known before any of them ends.
                        me.backlog.store(claim.more, Ordering::SeqCst);
                        for d in claim.deliveries {
                            let Ok(slot) = me.slots.acquire().await else {
                                return;
                            };
                            slot.forget();
                            if let Some((turn, d)) = me.turn_for(d, now, false) {
                                me.spawn_delivery(
                                    &tokio::runtime::Handle::current(),
                                    d,
                                    now,
                                    turn,
                                    &outbox,
                                    &shutdown,
                                );
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot claim webhook deliveries"),
                }
            }
            // Until the next claim: a wake (a turn freed with a backlog, a
            // retry asked for), the poll, or GATHER after a word.
            let polled = tokio::time::Instant::now() + pause;
            let mut gathered: Option<tokio::time::Instant> = None;
            loop {
                let until = gathered.map_or(polled, |g| g.min(polled));
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = outbox.wake.notified() => {
                        pause = POLL_EVERY;
                        break;
                    }
                    () = next_word(&mut written) => {
                        pause = POLL_EVERY;
                        gathered.get_or_insert_with(|| tokio::time::Instant::now() + GATHER);
                    }
                    () = tokio::time::sleep_until(until) => break,
                }
            }
        }
    }

    /// Sends `d` (held since `claimed_at`) with its `turn`, then the
    /// destination's deliveries waiting here, each as the one before ends.
    /// Abandoned at a stop: sent again once its lease ends.
    fn spawn_delivery(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        d: ClaimedDelivery,
        claimed_at: Timestamp,
        turn: Turn,
        outbox: &Arc<Outbox>,
        stop: &CancellationToken,
    ) {
        let sender = self.clone();
        let stop = stop.clone();
        let outbox = outbox.clone();
        let mut turn = turn;
        runtime.spawn(async move {
            let mut next = Some((d, claimed_at));
            let mut done = false;
            while let Some((d, claimed_at)) = next.take() {
                done = tokio::select! {
                    () = stop.cancelled() => false,
                    () = sender.deliver(d, claimed_at) => true,
                };
                if done {
                    next = turn.pass_on();
                }
            }
            drop(turn);
            // Its destination has a turn free and none waiting here: if the
            // last claim left some, the next goes now, not at the next poll
            // (wake-ups coalesce into one claim). Not otherwise: a claim a
            // delivery would cost more than the delivery.
            if done && sender.backlog.load(Ordering::SeqCst) {
                outbox.wake();
            }
        });
    }

    /// Whether the sender takes one more delivery of `to` from the store:
    /// with a slot of its own free, and a turn of `to` or a place in its
    /// queue (the delivery is then promised until its commit is done).
    fn try_promise(&self, to: &Destination) -> bool {
        let mut turns = self.turns.lock();
        if turns.get(to).map_or(0, Held::count) >= 2 * self.per_destination {
            return false;
        }
        let Ok(slot) = self.slots.try_acquire() else {
            return false;
        };
        slot.forget();
        turns.entry(to.clone()).or_default().promised += 1;
        true
    }

    /// The turn `d` (held since `held_at`, its slot taken; `promised` if the
    /// store handed it over, else the claim gave it) is sent with, or none:
    /// queued, as every turn of its destination is taken; the next of them
    /// to end passes its turn on.
    fn turn_for(
        self: &Arc<Self>,
        d: ClaimedDelivery,
        held_at: Timestamp,
        promised: bool,
    ) -> Option<(Turn, ClaimedDelivery)> {
        let to = d.delivery.destination();
        if let Some(to) = &to {
            let mut turns = self.turns.lock();
            let h = turns.entry(to.clone()).or_default();
            if promised {
                h.promised = h.promised.saturating_sub(1);
            }
            if h.sending >= self.per_destination {
                h.queued.push_back((d, held_at));
                return None;
            }
            h.sending += 1;
        }
        Some((
            Turn {
                sender: self.clone(),
                to,
                live: true,
            },
            d,
        ))
    }

    /// One delivery of `to` no longer held (`less` says which kind): its
    /// slot back.
    fn release(&self, to: Option<&Destination>, less: impl FnOnce(&mut Held)) {
        if let Some(to) = to {
            let mut turns = self.turns.lock();
            if let Some(h) = turns.get_mut(to) {
                less(h);
                if h.count() == 0 {
                    turns.remove(to);
                }
            }
        }
        self.slots.add_permits(1);
    }

    /// A claim holds a delivery long enough for one attempt and its writes.
    fn lease_end(&self, now: Timestamp) -> Timestamp {
        lease_end(&self.config, now)
    }

    /// One attempt at `c`, claimed at `claimed_at`, and its outcome written.
    async fn deliver(&self, c: ClaimedDelivery, claimed_at: Timestamp) {
        let ClaimedDelivery {
            delivery: ref d,
            endpoint,
            task,
        } = c;
        let outcome = match self.attempt(d, endpoint.as_ref(), task, claimed_at).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, delivery = %d.id(), "a webhook delivery could not be made");
                return;
            }
        };
        // With the store's next commit where it can (no one waits for it:
        // lost, the delivery is sent again after its lease).
        if let Err(e) = self
            .store
            .record_delivery_soon(d, &self.runner, &outcome)
            .await
        {
            tracing::warn!(error = %e, delivery = %d.id(), "cannot record a webhook attempt");
        }
    }

    /// One attempt at `d`, with its endpoint and task as claimed.
    async fn attempt(
        &self,
        d: &WebhookDelivery,
        endpoint: Option<&WebhookEndpoint>,
        task: Option<TaskRecord>,
        claimed_at: Timestamp,
    ) -> Result<DeliveryOutcome, taskgate_store::StoreError> {
        let now = self.clock.now();
        let target = payload::target(&*self.store, d, endpoint, now).await?;
        let body = match &d.payload {
            Some(body) => body.clone(),
            None => payload::body(d, task, self.config.max_output_bytes),
        };
        let sent = match &target {
            payload::Target::Stopped(why) => Sent::not_sent(why),
            payload::Target::Send { url, secrets, .. } => {
                let secrets: Vec<_> = secrets.iter().collect();
                self.client
                    .send(url, &d.message_id(), &secrets, &body, &self.clock)
                    .await
            }
        };
        crate::metrics::record_webhook_attempt(sent.outcome_label(), sent.elapsed);
        let at = self.clock.now();
        let (status, next) = self.next_step(d, &sent, at);
        // What the endpoint learnt: 410 disables it; a run of failures
        // past `disable_after` too; a success ends a run (nothing to write
        // when there was none).
        let failing = matches!(target, payload::Target::Send { failing: true, .. });
        if let (Some(endpoint), true) = (d.endpoint_id, sent.was_sent()) {
            if sent.gone {
                self.store
                    .disable_endpoint(endpoint, taskgate_store::WebhookEndpoint::DISABLED_GONE)
                    .await?;
            } else if !sent.ok || failing {
                let cutoff = at.unix_ms() - self.config.disable_after.as_millis();
                self.store
                    .endpoint_attempted(endpoint, sent.ok, at, Timestamp::from_unix_ms(cutoff))
                    .await?;
            }
        }
        Ok(DeliveryOutcome {
            attempt: sent.attempt(now),
            status,
            next_attempt_at: next,
            payload: body,
            claimed_at,
        })
    }

    /// The delivery's state after `sent`, and its next attempt's time.
    fn next_step(
        &self,
        d: &WebhookDelivery,
        sent: &Sent,
        at: Timestamp,
    ) -> (DeliveryStatus, Option<Timestamp>) {
        if sent.ok {
            return (DeliveryStatus::Succeeded, None);
        }
        if sent.gone || !sent.was_sent() {
            return (DeliveryStatus::Failed, None);
        }
        // A replay of a delivery whose schedule had ended is one attempt.
        if matches!(
            d.status,
            DeliveryStatus::Exhausted | DeliveryStatus::Succeeded
        ) {
            return (d.status, None);
        }
        let made = d.attempts.0.len() + 1;
        let Some(wait) = self.config.retry_schedule.get(made) else {
            return (DeliveryStatus::Exhausted, None);
        };
        let longest = self.config.longest_wait();
        let wait = match sent.retry_after {
            Some(asked) => asked.min(longest).max(wait.0),
            None => wait.0,
        };
        let next = at.unix_ms() + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2);
        (DeliveryStatus::Failed, Some(Timestamp::from_unix_ms(next)))
    }
}

/// The next word that deliveries were written; never, without words (or
/// once they end).
async fn next_word(words: &mut Option<tokio::sync::mpsc::Receiver<()>>) {
    if let Some(rx) = words
        && rx.recv().await.is_some()
    {
        return;
    }
    *words = None;
    std::future::pending().await
}

/// Until when a delivery held at `now` is held: long enough for one
/// attempt and its writes.
fn lease_end(config: &WebhooksConfig, now: Timestamp) -> Timestamp {
    let ms = (config.timeout_ms as i64).saturating_mul(2) + 30_000;
    Timestamp::from_unix_ms(now.unix_ms() + ms)
}

/// The sender as the store sees it: it takes the deliveries this process
/// writes as their commit is done (`DeliverySink`).
struct Lane {
    /// Not kept alive by the store, which the sender keeps alive.
    sender: Weak<Sender>,
    runner: RunnerId,
    config: Arc<WebhooksConfig>,
    outbox: Arc<Outbox>,
    shutdown: CancellationToken,
    /// Deliveries are handed over on the store's threads too.
    runtime: tokio::runtime::Handle,
}

impl DeliverySink for Lane {
    fn runner(&self) -> &RunnerId {
        &self.runner
    }

    fn lease_end(&self, now: Timestamp) -> Timestamp {
        lease_end(&self.config, now)
    }

    fn has_room(&self) -> bool {
        self.running()
            .is_some_and(|sender| sender.slots.available_permits() > 0)
    }

    fn take_turn(&self, to: &Destination) -> bool {
        self.running().is_some_and(|sender| sender.try_promise(to))
    }

    fn committed(&self, deliveries: Vec<ClaimedDelivery>) {
        let Some(sender) = self.sender.upgrade() else {
            return;
        };
        for d in deliveries {
            // What the claim's time is to its outcome: when it was due.
            let held_at = d.delivery.next_attempt_at.unwrap_or(d.delivery.created_at);
            let Some((turn, d)) = sender.turn_for(d, held_at, true) else {
                continue;
            };
            sender.spawn_delivery(
                &self.runtime,
                d,
                held_at,
                turn,
                &self.outbox,
                &self.shutdown,
            );
        }
    }

    fn give_back(&self, deliveries: Vec<ClaimedDelivery>) {
        let Some(sender) = self.sender.upgrade() else {
            return;
        };
        for d in deliveries {
            sender.release(d.delivery.destination().as_ref(), |h| {
                h.promised = h.promised.saturating_sub(1);
            });
        }
    }

    fn waiting(&self) {
        if let Some(sender) = self.sender.upgrade() {
            sender.backlog.store(true, Ordering::SeqCst);
        }
        self.outbox.wake();
    }
}

impl Lane {
    /// The sender, unless it has stopped.
    fn running(&self) -> Option<Arc<Sender>> {
        self.sender
            .upgrade()
            .filter(|_| !self.shutdown.is_cancelled())
    }
}
