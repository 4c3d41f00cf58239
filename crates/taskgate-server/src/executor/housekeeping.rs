//! Housekeeping: what the store keeps past its time goes. Idempotency keys
//! after [`IDEMPOTENCY_TTL_MS`].

use std::sync::Arc;
use std::time::Duration;

use taskgate_core::Timestamp;

use super::Executor;

/// How long an idempotency key holds its first answer (api-v1: 24 hours).
/// `POST /call` treats older keys as new; the purge deletes them.
pub const IDEMPOTENCY_TTL_MS: i64 = 86_400_000;
/// How often expired idempotency keys are deleted (and at start).
const IDEMPOTENCY_PURGE_EVERY: Duration = Duration::from_secs(10);

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
            let expired_before = Timestamp::now().minus_ms(IDEMPOTENCY_TTL_MS);
            if let Err(e) = self.store.idempotency_purge(expired_before).await {
                tracing::warn!(error = %e, "cannot purge idempotency keys");
            }
        }
    }
}
