//! Failures in a sliding minute, of whoever failed (an address, an email, a
//! pair of both): the local count of the API's failed authentications and
//! the dashboard's failed sign-ins. Read on the service's clock.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use taskgate_core::Clock;

use super::{MINUTE_MS, ceil_secs};

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
    clock: Clock,
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
    /// At most `limit` failures in a minute on `clock` (0: no limit).
    pub fn new(limit: u32, clock: Clock) -> Self {
        Self {
            limit,
            clock,
            log: Mutex::new(FailureLog::default()),
        }
    }

    /// Seconds until `addr` may try again, if it is blocked now.
    pub fn blocked(&self, addr: &K) -> Option<u64> {
        if self.limit == 0 {
            return None; // the limit is off
        }
        let now = self.clock.now().unix_ms();
        let mut state = self.log.lock();
        state.expire(now);
        state.blocked(addr, now, self.limit)
    }

    pub fn record(&self, addr: K) {
        if self.limit == 0 {
            return;
        }
        let now = self.clock.now().unix_ms();
        let mut state = self.log.lock();
        state.expire(now);
        state.push(now, addr, self.limit);
    }

    /// Reserves one attempt of `addr` in one step with the check: counted as
    /// a failure from now on (so attempts in flight at once count against
    /// the limit together), unless [`AuthFailures::release`]d when it
    /// succeeds. `Err`: seconds until `addr` may try again.
    pub fn reserve(&self, addr: K) -> Result<Reservation, u64> {
        if self.limit == 0 {
            return Ok(Reservation(None));
        }
        let now = self.clock.now().unix_ms();
        let mut state = self.log.lock();
        state.expire(now);
        if let Some(secs) = state.blocked(&addr, now, self.limit) {
            return Err(secs);
        }
        state.push(now, addr, self.limit);
        Ok(Reservation(Some(now)))
    }

    /// Takes back a reservation: the attempt succeeded (or never ran).
    pub fn release(&self, addr: &K, reservation: Reservation) {
        let Reservation(Some(at)) = reservation else {
            return;
        };
        let mut state = self.log.lock();
        if let Some(log) = state.by_addr.get_mut(addr)
            && let Some(i) = log.iter().rposition(|&t| t == at)
        {
            log.remove(i);
            if log.is_empty() {
                state.by_addr.remove(addr);
            }
        }
    }

    /// Whether `addr` failed at all in the last minute.
    pub fn failed_lately(&self, addr: &K) -> bool {
        if self.limit == 0 {
            return false;
        }
        let now = self.clock.now().unix_ms();
        let mut state = self.log.lock();
        state.expire(now);
        state.by_addr.contains_key(addr)
    }

    /// Addresses tracked now (for tests and metrics).
    pub fn tracked(&self) -> usize {
        self.log.lock().by_addr.len()
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
}

/// An attempt counted ahead by [`AuthFailures::reserve`]: when it was
/// counted (`None` when the limit is off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a reservation is a failure unless it is released"]
pub struct Reservation(Option<i64>);

impl<K: std::hash::Hash + Eq + Clone> FailureLog<K> {
    /// Seconds until `addr` may try again, if its failures fill the limit.
    fn blocked(&self, addr: &K, now: i64, limit: u32) -> Option<u64> {
        let log = self.by_addr.get(addr)?;
        let recent = log.iter().filter(|&&t| t > now - MINUTE_MS).count();
        if recent as u32 >= limit {
            // Blocked until the minute after the failure that filled it has passed.
            let first_of_limit = log[log.len() - limit as usize];
            return Some(ceil_secs(first_of_limit + MINUTE_MS - now));
        }
        None
    }

    fn push(&mut self, now: i64, addr: K, limit: u32) {
        self.order.push_back((now, addr.clone()));
        let log = self.by_addr.entry(addr).or_default();
        log.push_back(now);
        // Only the last `limit` failures matter.
        while log.len() > limit as usize {
            log.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn auth_failures_block_after_the_limit() {
        let f = AuthFailures::new(3, Clock::system());
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..3 {
            assert!(f.blocked(&ip).is_none());
            f.record(ip);
        }
        let secs = f.blocked(&ip).expect("blocked");
        assert!((1..=60).contains(&secs));
    }

    #[test]
    fn reservations_count_at_once_and_a_released_one_does_not() {
        let f = AuthFailures::new(3, Clock::system());
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        // Three attempts in flight at once fill the limit before any ends.
        let held: Vec<_> = (0..3).map(|_| f.reserve(ip).expect("room")).collect();
        assert!(
            f.reserve(ip).is_err(),
            "a fourth is refused while three run"
        );
        // One succeeds: its slot is freed; the others stay failures.
        f.release(&ip, held[0]);
        let again = f.reserve(ip).expect("the released slot");
        assert!(f.reserve(ip).is_err());
        f.release(&ip, again);
        assert!(f.failed_lately(&ip));
        let other: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        assert!(!f.failed_lately(&other));
        // Off: always room.
        let off = AuthFailures::new(0, Clock::system());
        for _ in 0..10 {
            let _ = off.reserve(ip).expect("no limit");
        }
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded() {
        let f = AuthFailures::new(3, Clock::system());
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
        let f = AuthFailures::new(0, Clock::system());
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            assert!(f.blocked(&ip).is_none());
            f.record(ip);
        }
    }

    #[test]
    fn failures_are_forgotten_a_minute_later_on_the_clock() {
        let clock = Clock::adjustable();
        let f = AuthFailures::new(2, clock.clone());
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        f.record(ip);
        f.record(ip);
        assert!(f.blocked(&ip).is_some());
        clock.advance(Duration::from_secs(59));
        assert!(f.blocked(&ip).is_some(), "still within the minute");
        clock.advance(Duration::from_secs(1));
        assert!(f.blocked(&ip).is_none());
        assert!(!f.failed_lately(&ip));
    }
}
