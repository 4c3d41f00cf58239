//! Housekeeping: what the store keeps past its time goes. Idempotency keys
//! after [`IDEMPOTENCY_TTL_MS`]; ended tasks after their retention, when one
//! is set.

use std::sync::Arc;
use std::time::Duration;

use taskgate_core::{Mode, Timestamp};

use super::Executor;

/// How long an idempotency key holds its first answer (api-v1: 24 hours).
/// A call treats an older key as new; the purge deletes it.
pub const IDEMPOTENCY_TTL_MS: i64 = 86_400_000;
/// How often expired idempotency keys are deleted (and at start).
const IDEMPOTENCY_PURGE_EVERY: Duration = Duration::from_secs(10);
/// How often ended tasks past their retention are deleted (and at start).
const TASK_PURGE_EVERY: Duration = Duration::from_secs(600);
/// Tasks deleted per write: a short write each, so the hot path's writes
/// are not held up.
const TASK_PURGE_SLICE: i64 = 1_000;
/// The longest a round of task deletion goes on: what is left goes in the
/// next round.
const TASK_PURGE_BUDGET: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;

/// How long ended tasks are kept, in days (0: for ever).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Every task (`task_retention_days`).
    pub days: u32,
    /// Test tasks, when shorter (`test_task_retention_days`).
    pub test_days: u32,
}

impl Executor {
    /// Deletes expired idempotency keys every [`IDEMPOTENCY_PURGE_EVERY`],
    /// until the executor stops.
    pub(super) async fn purge_idempotency_keys(self: Arc<Self>) {
        let mut tick = tokio::time::interval(IDEMPOTENCY_PURGE_EVERY);
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let expired_before = self.clock.now().minus_ms(IDEMPOTENCY_TTL_MS);
            if let Err(e) = self.store.idempotency_purge(expired_before).await {
                tracing::warn!(error = %e, "cannot purge idempotency keys");
            }
        }
    }

    /// Deletes ended tasks past `retention`, now and every
    /// [`TASK_PURGE_EVERY`], until the executor stops.
    pub fn purge_tasks_past(self: &Arc<Self>, retention: Retention) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TASK_PURGE_EVERY);
            loop {
                tokio::select! {
                    _ = me.shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                me.purge_tasks_once(retention).await;
            }
        });
    }

    async fn purge_tasks_once(&self, retention: Retention) {
        let now = self.clock.now();
        if retention.days > 0 {
            self.purge_tasks(now, retention.days, None).await;
        }
        // Test tasks cost nothing, so only their retention bounds what they
        // store (a chat input is up to 4 MiB): they go after their own
        // retention when it is the shorter.
        if retention.test_days > 0 && (retention.days == 0 || retention.test_days < retention.days)
        {
            self.purge_tasks(now, retention.test_days, Some(Mode::Test))
                .await;
        }
    }

    /// Ended tasks past `days` (of `only` that mode, or every mode), in
    /// slices of [`TASK_PURGE_SLICE`], at most for [`TASK_PURGE_BUDGET`].
    async fn purge_tasks(&self, now: Timestamp, days: u32, only: Option<Mode>) {
        let cutoff = now.minus_ms(i64::from(days) * DAY_MS);
        let started = std::time::Instant::now();
        let mut purged = 0;
        while started.elapsed() < TASK_PURGE_BUDGET {
            match self.store.purge_tasks(cutoff, only, TASK_PURGE_SLICE).await {
                Ok(n) => {
                    purged += n;
                    if n < TASK_PURGE_SLICE as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot delete tasks past their retention");
                    break;
                }
            }
            tokio::task::yield_now().await;
        }
        if purged > 0 {
            let mode = only.map_or("any", |m| m.as_str());
            tracing::info!(purged, mode, "tasks past their retention deleted");
        }
    }
}
