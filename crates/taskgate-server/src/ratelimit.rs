//! Rate limits: per account by plan (a rolling minute and the UTC day), and
//! failed authentications per client address.
//!
//! The minute is a sliding log of accepted requests, so no 60 s span ever
//! holds more than the limit (a fixed window or a token bucket would allow up
//! to twice the limit across a boundary). Each account's state sits under one
//! lock, so a decision and its count are one atomic step.
//!
//! [`RateLimiter`] is an enum of backends; callers never ask which is active.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

use parking_lot::Mutex;
use taskgate_core::{AccountId, Timestamp};

use crate::config::PlanLimits;

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;
const SHARDS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Minute,
    Day,
}

impl Window {
    pub fn name(self) -> &'static str {
        match self {
            Window::Minute => "minute",
            Window::Day => "day",
        }
    }
    pub fn seconds(self) -> u64 {
        match self {
            Window::Minute => 60,
            Window::Day => 86_400,
        }
    }
}

/// One window's state after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    pub window: Window,
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until a request will be accepted again (when exhausted) or the
    /// window frees capacity (otherwise); at least 1.
    pub reset_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The limited windows of the plan, minute first.
    pub windows: Vec<WindowState>,
}

impl Decision {
    /// The window closest to exhaustion: the one refusing, else the one with
    /// the fewest remaining.
    pub fn tightest(&self) -> Option<&WindowState> {
        if !self.allowed {
            return self
                .windows
                .iter()
                .filter(|w| w.remaining == 0)
                .max_by_key(|w| w.reset_secs);
        }
        self.windows.iter().min_by_key(|w| w.remaining)
    }
}

pub enum RateLimiter {
    Memory(MemoryLimiter),
}

impl RateLimiter {
    pub fn memory() -> Self {
        RateLimiter::Memory(MemoryLimiter::default())
    }

    /// Decides on one request of `account` and counts it if accepted.
    pub fn check(&self, account: AccountId, limits: PlanLimits) -> Decision {
        match self {
            RateLimiter::Memory(m) => m.decide(account, limits, now_ms(), true),
        }
    }

    /// The windows of `account` as they stand, counting nothing (what the
    /// next request would be told; the dashboard shows it).
    pub fn peek(&self, account: AccountId, limits: PlanLimits) -> Decision {
        match self {
            RateLimiter::Memory(m) => m.decide(account, limits, now_ms(), false),
        }
    }
}

#[derive(Default)]
struct AccountWindows {
    minute: VecDeque<i64>,
    day: i64,
    day_count: u32,
}

pub struct MemoryLimiter {
    shards: Vec<Mutex<HashMap<AccountId, AccountWindows>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for MemoryLimiter {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }
}

impl MemoryLimiter {
    fn shard<K: Hash + ?Sized>(&self, key: &K) -> &Mutex<HashMap<AccountId, AccountWindows>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    pub fn check(&self, account: AccountId, limits: PlanLimits, now: i64) -> Decision {
        self.decide(account, limits, now, true)
    }

    /// A decision on a request at `now`, counted if `count` and accepted.
    fn decide(&self, account: AccountId, limits: PlanLimits, now: i64, count: bool) -> Decision {
        if limits.per_minute.is_none() && limits.per_day.is_none() {
            return Decision {
                allowed: true,
                windows: Vec::new(),
            };
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

/// Failed authentications per client address in a sliding minute.
///
/// Bounded in memory and in work per request whatever the number of
/// addresses: each address keeps at most `limit` failures, every failure is
/// also queued in the order it happened, and each call forgets (from the
/// front of that queue) the failures whose minute has passed: constant work
/// per call, amortized, never a scan of every address. Past
/// [`MAX_TRACKED_FAILURES`] failures in one minute (a flood from that many
/// addresses) the oldest are forgotten early.
pub struct AuthFailures<K = std::net::IpAddr> {
    limit: u32,
    log: Mutex<FailureLog<K>>,
}

/// Failures of the last minute kept at most (about 6 MB).
pub const MAX_TRACKED_FAILURES: usize = 100_000;

/// Failures by who failed (an address, or an email for sign-in).
struct FailureLog<K> {
    by_addr: HashMap<K, VecDeque<i64>>,
    /// Every failure recorded, oldest first.
    order: VecDeque<(i64, K)>,
}

impl<K> Default for FailureLog<K> {
    fn default() -> Self {
        Self {
            by_addr: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> FailureLog<K> {
    /// Forgets the failures older than a minute (and the oldest beyond the cap).
    fn expire(&mut self, now: i64) {
        while let Some((at, _)) = self.order.front() {
            if *at > now - MINUTE_MS && self.order.len() < MAX_TRACKED_FAILURES {
                break;
            }
            let Some((at, addr)) = self.order.pop_front() else {
                break;
            };
            if let Some(log) = self.by_addr.get_mut(&addr) {
                while log.front().is_some_and(|&t| t <= at) {
                    log.pop_front();
                }
                if log.is_empty() {
                    self.by_addr.remove(&addr);
                }
            }
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> AuthFailures<K> {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            log: Mutex::new(FailureLog::default()),
        }
    }

    /// Seconds until `addr` may try again, if it is blocked now.
    pub fn blocked(&self, addr: &K) -> Option<u64> {
        if self.limit == 0 {
            return None; // the limit is off
        }
        let now = now_ms();
        let mut state = self.log.lock();
        state.expire(now);
        let log = state.by_addr.get(addr)?;
        let recent = log.iter().filter(|&&t| t > now - MINUTE_MS).count();
        if recent as u32 >= self.limit {
            // Blocked until the minute after the last failure that filled it has passed.
            let first_of_limit = log[log.len() - self.limit as usize];
            return Some(ceil_secs(first_of_limit + MINUTE_MS - now));
        }
        None
    }

    pub fn record(&self, addr: K) {
        if self.limit == 0 {
            return;
        }
        let now = now_ms();
        let mut state = self.log.lock();
        state.expire(now);
        state.order.push_back((now, addr.clone()));
        let log = state.by_addr.entry(addr).or_default();
        log.push_back(now);
        // Only the last `limit` failures matter.
        while log.len() > self.limit as usize {
            log.pop_front();
        }
    }

    /// Addresses tracked now (for tests and metrics).
    pub fn tracked(&self) -> usize {
        self.log.lock().by_addr.len()
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
}

fn ceil_secs(ms: i64) -> u64 {
    (ms.max(0) as u64).div_ceil(1000).max(1)
}

/// The limiter's clock: Unix milliseconds.
pub fn now_ms() -> i64 {
    Timestamp::now().unix_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: PlanLimits = PlanLimits {
        per_minute: Some(3),
        per_day: Some(5),
        max_running_tasks: None,
    };

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
            },
            0,
        );
        assert!(d.allowed && d.windows.is_empty());
    }

    #[test]
    fn auth_failures_block_after_the_limit() {
        let f = AuthFailures::new(3);
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..3 {
            assert!(f.blocked(&ip).is_none());
            f.record(ip);
        }
        let secs = f.blocked(&ip).expect("blocked");
        assert!((1..=60).contains(&secs));
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded() {
        let f = AuthFailures::new(3);
        for i in 0..(MAX_TRACKED_FAILURES as u32 + 5_000) {
            f.record(std::net::IpAddr::V4(std::net::Ipv4Addr::from(i)));
        }
        assert!(f.tracked() <= MAX_TRACKED_FAILURES);
        // The newest addresses are still counted.
        let last = std::net::IpAddr::V4(std::net::Ipv4Addr::from(
            MAX_TRACKED_FAILURES as u32 + 4_999,
        ));
        f.record(last);
        f.record(last);
        assert!(f.blocked(&last).is_some());
    }

    #[test]
    fn a_limit_of_zero_is_off() {
        let f = AuthFailures::new(0);
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            assert!(f.blocked(&ip).is_none());
            f.record(ip);
        }
    }
}
