//! The rate limiter's windows in this process: each account's sliding
//! minute and UTC day, on the service's clock.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

use parking_lot::Mutex;
use taskgate_core::{AccountId, Clock};

use super::{DAY_MS, Decision, MINUTE_MS, Window, WindowState, ceil_secs};
use crate::config::PlanLimits;

const SHARDS: usize = 32;

#[derive(Default)]
struct AccountWindows {
    minute: VecDeque<i64>,
    day: i64,
    day_count: u32,
}

pub struct MemoryLimiter {
    clock: Clock,
    shards: Vec<Mutex<HashMap<AccountId, AccountWindows>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for MemoryLimiter {
    fn default() -> Self {
        Self::new(Clock::system())
    }
}

impl MemoryLimiter {
    /// A limiter whose windows are read on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }

    fn shard<K: Hash + ?Sized>(&self, key: &K) -> &Mutex<HashMap<AccountId, AccountWindows>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    /// A decision on a request at `now` (Unix milliseconds), counted if
    /// accepted.
    pub fn check(&self, account: AccountId, limits: PlanLimits, now: i64) -> Decision {
        self.decide(account, limits, now, true)
    }

    /// A decision on a request now, on the limiter's clock.
    pub(super) fn decide_now(
        &self,
        account: AccountId,
        limits: PlanLimits,
        count: bool,
    ) -> Decision {
        self.decide(account, limits, self.clock.now().unix_ms(), count)
    }

    /// A decision on a request at `now`, counted if `count` and accepted.
    fn decide(&self, account: AccountId, limits: PlanLimits, now: i64, count: bool) -> Decision {
        if limits.per_minute.is_none() && limits.per_day.is_none() {
            return Decision::unlimited();
        }
        let mut shard = self.shard(&account).lock();
        let w = shard.entry(account).or_default();
        while w.minute.front().is_some_and(|&t| t <= now - MINUTE_MS) {
            w.minute.pop_front();
        }
        let today = now.div_euclid(DAY_MS);
        if w.day != today {
            w.day = today;
            w.day_count = 0;
        }
        let minute_full = limits
            .per_minute
            .is_some_and(|l| w.minute.len() as u64 >= l as u64);
        let day_full = limits.per_day.is_some_and(|l| w.day_count >= l);
        let allowed = !minute_full && !day_full;
        if allowed && count {
            if limits.per_minute.is_some() {
                w.minute.push_back(now);
            }
            w.day_count += 1;
        }
        let mut windows = Vec::with_capacity(2);
        if let Some(limit) = limits.per_minute {
            let used = w.minute.len() as u32;
            // Capacity comes back when the oldest accepted request leaves the window.
            let reset_ms = w.minute.front().map_or(MINUTE_MS, |&t| t + MINUTE_MS - now);
            windows.push(WindowState {
                window: Window::Minute,
                limit,
                remaining: limit.saturating_sub(used),
                reset_secs: ceil_secs(reset_ms),
            });
        }
        if let Some(limit) = limits.per_day {
            windows.push(WindowState {
                window: Window::Day,
                limit,
                remaining: limit.saturating_sub(w.day_count),
                reset_secs: ceil_secs((today + 1) * DAY_MS - now),
            });
        }
        Decision { allowed, windows }
    }

    /// Drops accounts idle for over a day, so memory follows active accounts.
    pub fn prune(&self, now: i64) {
        let today = now.div_euclid(DAY_MS);
        for shard in &self.shards {
            shard.lock().retain(|_, w| {
                w.day == today || w.minute.back().is_some_and(|&t| t > now - MINUTE_MS)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: PlanLimits = PlanLimits {
        per_minute: Some(3),
        per_day: Some(5),
        max_running_tasks: None,
        max_running_test_tasks: None,
    };

    #[test]
    fn idle_accounts_are_forgotten_and_active_ones_kept() {
        let m = MemoryLimiter::default();
        let (idle, active) = (AccountId::new(), AccountId::new());
        let day0 = 10 * DAY_MS;
        m.check(idle, FREE, day0 + 1_000);
        m.check(active, FREE, day0 + 1_000);
        m.check(active, FREE, day0 + DAY_MS + 30_000);
        m.prune(day0 + DAY_MS + 60_000);
        let accounts = |m: &MemoryLimiter| m.shards.iter().map(|s| s.lock().len()).sum::<usize>();
        assert_eq!(accounts(&m), 1);
        // What the active account used today still counts.
        let d = m.check(active, FREE, day0 + DAY_MS + 61_000);
        assert_eq!(d.windows[1].remaining, 3);
    }

    #[test]
    fn no_rolling_minute_holds_more_than_the_limit() {
        let m = MemoryLimiter::default();
        let (a, b) = (AccountId::new(), AccountId::new());
        let t0 = 1_000_000_000_000;
        assert!(m.check(a, FREE, t0).allowed);
        assert!(m.check(a, FREE, t0 + 30_000).allowed);
        assert!(m.check(a, FREE, t0 + 59_000).allowed);
        let refused = m.check(a, FREE, t0 + 59_500);
        assert!(!refused.allowed);
        assert_eq!(refused.tightest().unwrap().reset_secs, 1);
        // The first request leaves the window at t0 + 60 s.
        assert!(m.check(a, FREE, t0 + 60_000).allowed);
        assert!(!m.check(a, FREE, t0 + 60_001).allowed);
        // Other accounts are independent.
        assert!(m.check(b, FREE, t0 + 60_001).allowed);
    }

    #[test]
    fn refused_requests_do_not_count_and_the_day_resets_at_midnight() {
        let m = MemoryLimiter::default();
        let a = AccountId::new();
        let midnight = 20_000 * DAY_MS;
        let mut t = midnight - 10 * MINUTE_MS;
        for _ in 0..5 {
            assert!(m.check(a, FREE, t).allowed);
            t += 2 * MINUTE_MS;
        }
        let refused = m.check(a, FREE, midnight - 1_000);
        assert!(!refused.allowed);
        assert_eq!(refused.tightest().unwrap().window, Window::Day);
        assert_eq!(refused.tightest().unwrap().reset_secs, 1);
        let d = m.check(a, FREE, midnight + 1);
        assert!(d.allowed);
        assert_eq!(d.windows[1].remaining, 4);
    }

    #[test]
    fn unlimited_plans_have_no_windows() {
        let m = MemoryLimiter::default();
        let d = m.check(
            AccountId::new(),
            PlanLimits {
                per_minute: None,
                per_day: None,
                max_running_tasks: None,
                max_running_test_tasks: None,
            },
            0,
        );
        assert!(d.allowed && d.windows.is_empty());
    }

    #[test]
    fn the_windows_are_read_on_the_limiters_clock() {
        let clock = Clock::adjustable();
        let m = MemoryLimiter::new(clock.clone());
        let a = AccountId::new();
        for _ in 0..3 {
            assert!(m.decide_now(a, FREE, true).allowed);
        }
        assert!(!m.decide_now(a, FREE, true).allowed);
        clock.advance(std::time::Duration::from_secs(60));
        assert!(
            m.decide_now(a, FREE, true).allowed,
            "the minute has passed on the clock"
        );
    }
}
