//! Where the service reads the time: the system's clock, or in tests a clock
//! they move forward, so that a key's expiry, a session's end or a cache's
//! lifetime is reached without waiting for it on the wall clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crate::Timestamp;

/// The time, as the service sees it. Cloned cheaply; clones share the
/// time they are moved by.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// How far an adjustable clock was moved ahead, in milliseconds; `None`
    /// for the system's clock.
    ahead_ms: Option<Arc<AtomicI64>>,
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
            ahead_ms: Some(Arc::new(AtomicI64::new(0))),
        }
    }

    /// Moves an adjustable clock ahead by `by`. The system's clock is not
    /// moved: this is for tests, and a test that moves it by mistake finds
    /// out by its assertions.
    pub fn advance(&self, by: Duration) {
        if let Some(ahead) = &self.ahead_ms {
            ahead.fetch_add(by.as_millis() as i64, Ordering::Relaxed);
        }
    }

    fn ahead_ms(&self) -> i64 {
        self.ahead_ms
            .as_ref()
            .map_or(0, |a| a.load(Ordering::Relaxed))
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
}
