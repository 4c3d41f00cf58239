//! A circuit breaker per target (provider and model).
//!
//! Closed: requests flow; `failures` consecutive failures open it. Open: the
//! target is skipped for `cooldown`. Then half-open: one probe request may
//! go; its success closes the circuit, its failure opens it again. A probe
//! that never reports (its task was cancelled) frees the slot after another
//! cooldown.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    cooldown: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    failures: u32,
    open_until: Option<Instant>,
    probe_until: Option<Instant>,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cooldown,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Whether a request may go to the target now.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let mut s = self.inner.lock();
        match s.open_until {
            None => true,
            Some(until) if now < until => false,
            Some(_) => match s.probe_until {
                Some(p) if now < p => false,
                _ => {
                    s.probe_until = Some(now + self.cooldown);
                    true
                }
            },
        }
    }

    pub fn success(&self) {
        let mut s = self.inner.lock();
        *s = Inner::default();
    }

    pub fn failure(&self) {
        self.failure_at(Instant::now());
    }

    fn failure_at(&self, now: Instant) {
        let mut s = self.inner.lock();
        s.failures = s.failures.saturating_add(1);
        if s.open_until.is_some() || s.failures >= self.threshold {
            s.open_until = Some(now + self.cooldown);
            s.probe_until = None;
        }
    }

    pub fn state(&self) -> BreakerState {
        self.state_at(Instant::now())
    }

    fn state_at(&self, now: Instant) -> BreakerState {
        match self.inner.lock().open_until {
            None => BreakerState::Closed,
            Some(until) if now < until => BreakerState::Open,
            Some(_) => BreakerState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_probes_after_the_cooldown() {
        let b = Breaker::new(3, Duration::from_secs(10));
        let t = Instant::now();
        b.failure_at(t);
        b.failure_at(t);
        assert_eq!(b.state_at(t), BreakerState::Closed);
        assert!(b.allow_at(t));
        b.failure_at(t);
        assert_eq!(b.state_at(t), BreakerState::Open);
        assert!(!b.allow_at(t + Duration::from_secs(9)));
        let later = t + Duration::from_secs(10);
        assert_eq!(b.state_at(later), BreakerState::HalfOpen);
        assert!(b.allow_at(later), "one probe");
        assert!(!b.allow_at(later), "only one probe at a time");
        b.failure_at(later);
        assert_eq!(
            b.state_at(later),
            BreakerState::Open,
            "a failed probe reopens"
        );
        let again = later + Duration::from_secs(10);
        assert!(b.allow_at(again));
        b.success();
        assert_eq!(b.state_at(again), BreakerState::Closed);
        assert!(b.allow_at(again) && b.allow_at(again));
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = Breaker::new(2, Duration::from_secs(10));
        let t = Instant::now();
        b.failure_at(t);
        b.success();
        b.failure_at(t);
        assert_eq!(b.state_at(t), BreakerState::Closed);
    }

    #[test]
    fn a_lost_probe_frees_its_slot_after_a_cooldown() {
        let b = Breaker::new(1, Duration::from_secs(10));
        let t = Instant::now();
        b.failure_at(t);
        let half = t + Duration::from_secs(10);
        assert!(b.allow_at(half));
        assert!(!b.allow_at(half + Duration::from_secs(9)));
        assert!(b.allow_at(half + Duration::from_secs(10)));
    }
}
