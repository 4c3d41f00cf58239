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

mod attempt;
mod payload;

use std::sync::Arc;
use std::time::Duration;

use taskgate_core::{Clock, DeliveryStatus, RunnerId, Timestamp};
use taskgate_store::{
    ClaimedDelivery, DeliveryOutcome, Store, TaskRecord, WebhookDelivery, WebhookEndpoint,
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
/// Deliveries claimed in one round at most.
const CLAIM_AT_MOST: i64 = 64;
/// Attempts in flight on this instance at most.
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
            config: Arc::new(config),
            runner,
            clock,
            slots: Arc::new(Semaphore::new(IN_FLIGHT_AT_MOST)),
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
    slots: Arc<Semaphore>,
}

impl Sender {
    async fn run(self, outbox: Arc<Outbox>, shutdown: CancellationToken) {
        let me = Arc::new(self);
        // This instance's previous life's holdings are taken back at once.
        let mut reclaim = Some(me.runner.clone());
        let mut pause = POLL_EVERY;
        loop {
            let free = me.slots.available_permits().min(CLAIM_AT_MOST as usize) as i64;
            if free > 0 {
                let now = me.clock.now();
                let claimed = me
                    .store
                    .claim_deliveries(
                        &me.runner,
                        now,
                        me.lease_end(now),
                        free,
                        me.config.max_concurrency_per_endpoint as i64,
                        reclaim.as_ref(),
                    )
                    .await;
                match claimed {
                    Ok(list) => {
                        reclaim = None;
                        pause = if list.is_empty() {
                            (pause * 2).min(POLL_IDLE)
                        } else {
                            POLL_EVERY
                        };
                        for d in list {
                            let Ok(slot) = me.slots.clone().acquire_owned().await else {
                                return;
                            };
                            let sender = me.clone();
                            let stop = shutdown.clone();
                            let outbox = outbox.clone();
                            // Abandoned at a stop: sent again once its lease ends.
                            tokio::spawn(async move {
                                let done = tokio::select! {
                                    () = stop.cancelled() => false,
                                    () = sender.deliver(d, now) => true,
                                };
                                drop(slot);
                                // Its destination has a turn free: the next
                                // of its backlog goes now, not at the next
                                // poll (wake-ups coalesce into one claim).
                                if done {
                                    outbox.wake();
                                }
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot claim webhook deliveries"),
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = outbox.wake.notified() => pause = POLL_EVERY,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// A claim holds a delivery long enough for one attempt and its writes.
    fn lease_end(&self, now: Timestamp) -> Timestamp {
        let ms = (self.config.timeout_ms as i64).saturating_mul(2) + 30_000;
        Timestamp::from_unix_ms(now.unix_ms() + ms)
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
        if let Err(e) = self.store.record_delivery(d, &self.runner, &outcome).await {
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
