//! Leases and sweeping: this instance renews the leases of the tasks it
//! runs, ends `interrupted` the tasks whose instance stopped renewing theirs,
//! and reads the store for queued tasks it was not handed (queued before a
//! restart, or by another instance).

use std::sync::Arc;
use std::time::Duration;

use taskgate_core::{Mode, PlanName, TaskId};

use super::Executor;
use super::fair::Lane;
use crate::config::PlanLimits;

/// Leases are renewed this many times per lease: a late renewal or two
/// never lets one lapse.
const RENEWALS_PER_LEASE: u64 = 3;
/// Queued tasks read from the store per poll: of one account, and in all.
const POLL_PER_ACCOUNT: i64 = 64;
const POLL_LIMIT: i64 = 1024;

impl Executor {
    pub(super) async fn maintain(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(
            self.lease_ms as u64 / RENEWALS_PER_LEASE,
        ));
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Renewed and swept by the clock: a test moves it past a lease.
            let now = self.clock.now();
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
        }
    }

    /// Reads queued tasks from the store into the turns.
    pub(super) async fn poll(&self) {
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
}
