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
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use taskgate_core::{AccountId, Email, Timestamp};

use crate::config::{DashboardConfig, PlanLimits};
use crate::redis::{Redis, RedisError, Script};

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
    /// No limit applies: allowed, and no window to report.
    pub fn unlimited() -> Self {
        Self {
            allowed: true,
            windows: Vec::new(),
        }
    }

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
    Redis(RedisLimiter),
}

/// The limiter's state could not be read (Redis is unreachable) and the
/// setting is to refuse rather than serve without limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterUnavailable;

impl RateLimiter {
    pub fn memory() -> Self {
        RateLimiter::Memory(MemoryLimiter::default())
    }

    /// Decides on one request of `account` and counts it if accepted.
    pub async fn check(
        &self,
        account: AccountId,
        limits: PlanLimits,
    ) -> Result<Decision, LimiterUnavailable> {
        match self {
            RateLimiter::Memory(m) => Ok(m.decide(account, limits, now_ms(), true)),
            RateLimiter::Redis(r) => r.decide(account, limits, true).await,
        }
    }

    /// Whether the limiter's Redis answers; `None` for the in-memory limiter.
    pub async fn ping(&self) -> Option<bool> {
        match self {
            RateLimiter::Memory(_) => None,
            RateLimiter::Redis(r) => Some(r.redis.command::<()>(&["PING"]).await.is_ok()),
        }
    }

    /// The windows of `account` as they stand, counting nothing (what the
    /// next request would be told; the dashboard shows it).
    pub async fn peek(
        &self,
        account: AccountId,
        limits: PlanLimits,
    ) -> Result<Decision, LimiterUnavailable> {
        match self {
            RateLimiter::Memory(m) => Ok(m.decide(account, limits, now_ms(), false)),
            RateLimiter::Redis(r) => r.decide(account, limits, false).await,
        }
    }
}

/// The same windows as [`MemoryLimiter`], kept in Redis so that every
/// instance sharing it counts against one state: each decision is one
/// script run (atomic in Redis, on Redis's clock). An account's keys share
/// a hash tag, so they sit in one slot of a Redis Cluster.
pub struct RedisLimiter {
    redis: Arc<Redis>,
    script: Script,
    fail_open: bool,
    /// When the last failure was logged, to log one per few seconds.
    last_logged: Mutex<Option<std::time::Instant>>,
}

/// KEYS: the minute's log (a sorted set of accepted requests by time) and
/// the day's count (a hash of `day` and `n`). ARGV: the minute's limit and
/// the day's (-1: none), 1 to count an accepted request, a unique member.
/// Returns {allowed, used in the minute, used today, ms until the minute
/// frees capacity, ms until the day ends}.
const DECIDE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local per_minute = tonumber(ARGV[1])
local per_day = tonumber(ARGV[2])
local day_ms = 86400000
local today = math.floor(now / day_ms)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
local minute = redis.call('ZCARD', KEYS[1])
local stored = redis.call('HMGET', KEYS[2], 'day', 'n')
local day = 0
if tonumber(stored[1]) == today then day = tonumber(stored[2]) end
local allowed = (per_minute < 0 or minute < per_minute) and (per_day < 0 or day < per_day)
if allowed and ARGV[3] == '1' then
  if per_minute >= 0 then
    redis.call('ZADD', KEYS[1], now, ARGV[4])
    redis.call('PEXPIRE', KEYS[1], 60000)
    minute = minute + 1
  end
  day = day + 1
  redis.call('HSET', KEYS[2], 'day', today, 'n', day)
  redis.call('PEXPIREAT', KEYS[2], (today + 1) * day_ms)
end
local reset = 60000
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] then reset = tonumber(oldest[2]) + 60000 - now end
return {allowed and 1 or 0, minute, day, reset, (today + 1) * day_ms - now}
"#;

impl RedisLimiter {
    pub fn new(redis: Arc<Redis>, fail_open: bool) -> Self {
        Self {
            redis,
            script: Script::new(DECIDE),
            fail_open,
            last_logged: Mutex::new(None),
        }
    }

    async fn decide(
        &self,
        account: AccountId,
        limits: PlanLimits,
        count: bool,
    ) -> Result<Decision, LimiterUnavailable> {
        if limits.per_minute.is_none() && limits.per_day.is_none() {
            return Ok(Decision::unlimited());
        }
        let minute_key = format!("taskgate:{{{account}}}:minute");
        let day_key = format!("taskgate:{{{account}}}:day");
        let limit = |l: Option<u32>| l.map_or("-1".to_owned(), |l| l.to_string());
        let member = format!("{}-{:016x}", now_ms(), rand::random::<u64>());
        let reply: Result<Vec<i64>, RedisError> = self
            .redis
            .eval(
                &self.script,
                &[&minute_key, &day_key],
                &[
                    &limit(limits.per_minute),
                    &limit(limits.per_day),
                    if count { "1" } else { "0" },
                    &member,
                ],
            )
            .await;
        let Some([allowed, minute, day, minute_reset, day_reset]) = reply
            .as_ref()
            .ok()
            .and_then(|v| <[i64; 5]>::try_from(v.as_slice()).ok())
        else {
            return self.unavailable(reply.err());
        };
        let mut windows = Vec::with_capacity(2);
        if let Some(limit) = limits.per_minute {
            windows.push(WindowState {
                window: Window::Minute,
                limit,
                remaining: limit.saturating_sub(minute.max(0) as u32),
                reset_secs: ceil_secs(minute_reset),
            });
        }
        if let Some(limit) = limits.per_day {
            windows.push(WindowState {
                window: Window::Day,
                limit,
                remaining: limit.saturating_sub(day.max(0) as u32),
                reset_secs: ceil_secs(day_reset),
            });
        }
        Ok(Decision {
            allowed: allowed == 1,
            windows,
        })
    }

    /// No decision from Redis: refuse, or serve without limits, as set;
    /// said in the log at most every 10 s.
    fn unavailable(&self, error: Option<RedisError>) -> Result<Decision, LimiterUnavailable> {
        let reason = error.map_or_else(|| "an unexpected answer".to_owned(), |e| e.to_string());
        let mut last = self.last_logged.lock();
        if last.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
            *last = Some(std::time::Instant::now());
            if self.fail_open {
                tracing::error!(redis = self.redis.address(), %reason,
                    "rate limiter unavailable: serving WITHOUT rate limits (redis_failure = \"open\")");
            } else {
                tracing::warn!(redis = self.redis.address(), %reason,
                    "rate limiter unavailable: refusing requests with 503 (redis_failure = \"closed\")");
            }
        }
        drop(last);
        if self.fail_open {
            Ok(Decision::unlimited())
        } else {
            Err(LimiterUnavailable)
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

/// The failed-authentication limit of the API: per client address in a
/// sliding minute, in Redis when the limits are (one count across
/// instances), else in memory. If Redis cannot be reached, this instance's
/// own count applies meanwhile: an address is never let through unlimited.
pub struct AuthLimiter {
    local: AuthFailures,
    redis: Option<(Arc<Redis>, Script, Script)>,
}

/// KEYS: the address's failures (a sorted set by time). ARGV: the limit.
/// Returns ms until the address may try again, or -1 if it may now.
const AUTH_BLOCKED: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
local limit = tonumber(ARGV[1])
if redis.call('ZCARD', KEYS[1]) < limit then return -1 end
local first = redis.call('ZRANGE', KEYS[1], -limit, -limit, 'WITHSCORES')
return tonumber(first[2]) + 60000 - now
"#;

/// KEYS: the address's failures. ARGV: the limit, a unique member. Records
/// one failure, keeping the last `limit` of the minute.
const AUTH_RECORD: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[1]) - 1)
redis.call('PEXPIRE', KEYS[1], 60000)
return 1
"#;

impl AuthLimiter {
    pub fn new(limit: u32, redis: Option<Arc<Redis>>) -> Self {
        Self {
            local: AuthFailures::new(limit),
            redis: redis.map(|r| (r, Script::new(AUTH_BLOCKED), Script::new(AUTH_RECORD))),
        }
    }

    fn key(addr: &IpAddr) -> String {
        format!("taskgate:{{auth:{addr}}}:failures")
    }

    /// Seconds until `addr` may try again, if it is blocked now.
    pub async fn blocked(&self, addr: &IpAddr) -> Option<u64> {
        let limit = self.local.limit();
        let Some((redis, blocked, _)) = self.redis.as_ref().filter(|_| limit > 0) else {
            return self.local.blocked(addr);
        };
        let key = Self::key(addr);
        match redis
            .eval::<i64>(blocked, &[&key], &[&limit.to_string()])
            .await
        {
            Ok(ms) if ms >= 0 => Some(ceil_secs(ms)),
            Ok(_) => None,
            Err(_) => self.local.blocked(addr),
        }
    }

    pub async fn record(&self, addr: IpAddr) {
        let limit = self.local.limit();
        // The local count too: it is what holds while Redis is away.
        self.local.record(addr);
        let Some((redis, _, record)) = self.redis.as_ref().filter(|_| limit > 0) else {
            return;
        };
        let member = format!("{}-{:016x}", now_ms(), rand::random::<u64>());
        if let Err(e) = redis
            .eval::<()>(record, &[&Self::key(&addr)], &[&limit.to_string(), &member])
            .await
        {
            tracing::debug!(error = %e, "cannot record a failed authentication in Redis");
        }
    }

    pub fn limit(&self) -> u32 {
        self.local.limit()
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
        state.blocked(addr, now, self.limit)
    }

    pub fn record(&self, addr: K) {
        if self.limit == 0 {
            return;
        }
        let now = now_ms();
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
        let now = now_ms();
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
        let now = now_ms();
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

fn ceil_secs(ms: i64) -> u64 {
    (ms.max(0) as u64).div_ceil(1000).max(1)
}

/// The limiter's clock: Unix milliseconds.
pub fn now_ms() -> i64 {
    Timestamp::now().unix_ms()
}

/// Failed sign-ins (of the dashboard, and of a password change) by
/// address, by email, and by the pair (which addresses failed for an email).
pub struct SignInFailures {
    pub failures_by_addr: AuthFailures<IpAddr>,
    pub failures_by_email: AuthFailures<Email>,
    pub failures_by_pair: AuthFailures<(Email, IpAddr)>,
}

impl SignInFailures {
    pub fn new(config: &DashboardConfig) -> Self {
        let limit = config.sign_in_failures_per_minute;
        Self {
            failures_by_addr: AuthFailures::new(limit),
            failures_by_email: AuthFailures::new(limit),
            failures_by_pair: AuthFailures::new(limit),
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
    fn reservations_count_at_once_and_a_released_one_does_not() {
        let f = AuthFailures::new(3);
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
        let off = AuthFailures::new(0);
        for _ in 0..10 {
            let _ = off.reserve(ip).expect("no limit");
        }
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
