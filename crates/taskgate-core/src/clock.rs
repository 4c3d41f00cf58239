//! Where the service reads the time: the system's clock, or in tests a clock
//! they move forward, so that a key's expiry, a session's end, a lease's
//! lapse, a limiter's window or a sandbox's delay is reached without waiting
//! for it on the wall clock.
//!
//! What waits for a time the clock decides sleeps on [`Clock::sleep`]: the
//! runtime's timer for the rest of the wait, woken early when a test moves
//! the clock. Timers that only pace a loop stay on the runtime's time.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::Timestamp;

/// The time, as the service sees it. Cloned cheaply; clones share the
/// time they are moved by.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// How far an adjustable clock was moved ahead; `None` for the system's
    /// clock.
    moved: Option<Arc<Moved>>,
}

#[derive(Debug, Default)]
struct Moved {
    /// Milliseconds ahead of the system's clock.
    ahead_ms: AtomicI64,
    /// Wakes the sleepers at each move.
    moves: Notify,
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that goes on with the system's and is moved ahead by
    /// [`Clock::advance`] (tests).
    pub fn adjustable() -> Self {
        Clock {
            moved: Some(Arc::default()),
        }
    }

    /// Moves an adjustable clock ahead by `by`, waking whoever sleeps on it.
    /// The system's clock is not moved: this is for tests, and a test that
    /// moves it by mistake finds out by its assertions.
    pub fn advance(&self, by: Duration) {
        if let Some(moved) = &self.moved {
            moved
                .ahead_ms
                .fetch_add(by.as_millis() as i64, Ordering::Relaxed);
            moved.moves.notify_waiters();
        }
    }

    fn ahead_ms(&self) -> i64 {
        self.moved
            .as_ref()
            .map_or(0, |m| m.ahead_ms.load(Ordering::Relaxed))
    }

    /// Now, as a timestamp.
    pub fn now(&self) -> Timestamp {
        match self.ahead_ms() {
            0 => Timestamp::now(),
            ms => Timestamp::now().plus_ms(ms),
        }
    }

    /// Now, as a monotonic instant: for lifetimes kept in memory.
    pub fn instant(&self) -> Instant {
        match self.ahead_ms() {
            0 => Instant::now(),
            ms => Instant::now() + Duration::from_millis(ms as u64),
        }
    }

    /// Waits until `d` has passed on this clock.
    pub async fn sleep(&self, d: Duration) {
        self.sleep_until(self.instant() + d).await
    }

    /// Waits until this clock reaches `until` (an instant of
    /// [`Clock::instant`]).
    pub async fn sleep_until(&self, until: Instant) {
        let Some(moved) = &self.moved else {
            return tokio::time::sleep_until(until.into()).await;
        };
        loop {
            // Registered before the time is read: a move in between wakes it.
            let next_move = moved.moves.notified();
            tokio::pin!(next_move);
            next_move.as_mut().enable();
            let left = until.saturating_duration_since(self.instant());
            if left.is_zero() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(left) => {}
                _ = next_move => {}
            }
        }
    }

    /// `f`'s output, or `None` if `d` passes on this clock first.
    pub async fn timeout<F: Future>(&self, d: Duration, f: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            out = f => Some(out),
            _ = self.sleep(d) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adjustable_clock_moves_and_its_clones_with_it() {
        let clock = Clock::adjustable();
        let clone = clock.clone();
        let before = clock.now();
        clock.advance(Duration::from_secs(60));
        assert!(clone.now().unix_ms() >= before.unix_ms() + 60_000);
        assert!(clone.instant() >= Instant::now() + Duration::from_secs(59));
    }

    #[test]
    fn the_system_clock_is_not_moved() {
        let clock = Clock::system();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now().unix_ms() <= Timestamp::now().unix_ms() + 1_000);
    }

    #[tokio::test]
    async fn a_sleep_ends_when_the_clock_is_moved_past_it() {
        let clock = Clock::adjustable();
        let sleep = clock.sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        let brief = Duration::from_millis(10);
        assert!(tokio::time::timeout(brief, &mut sleep).await.is_err());
        clock.advance(Duration::from_secs(1800));
        assert!(
            tokio::time::timeout(brief, &mut sleep).await.is_err(),
            "moved short of its end: still asleep"
        );
        clock.advance(Duration::from_secs(1800));
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("woken by the move");
    }

    #[tokio::test]
    async fn a_timeout_runs_out_on_the_clock() {
        let clock = Clock::adjustable();
        let minute = Duration::from_secs(60);
        assert_eq!(clock.timeout(minute, async { 7 }).await, Some(7));
        let wait = clock.timeout(minute, std::future::pending::<()>());
        tokio::pin!(wait);
        let brief = Duration::from_millis(10);
        assert!(tokio::time::timeout(brief, &mut wait).await.is_err());
        clock.advance(minute);
        let out = tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .expect("ended by the move");
        assert_eq!(out, None);
    }

    #[tokio::test]
    async fn the_system_clock_sleeps_on_the_runtimes_time() {
        let clock = Clock::system();
        let started = Instant::now();
        clock.sleep(Duration::from_millis(20)).await;
        assert!(started.elapsed() >= Duration::from_millis(20));
    }
}
