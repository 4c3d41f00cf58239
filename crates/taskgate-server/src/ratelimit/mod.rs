//! Rate limits: per account by plan (a rolling minute and the UTC day), and
//! failed authentications per client address.
//!
//! The minute is a sliding log of accepted requests, so no 60 s span ever
//! holds more than the limit (a fixed window or a token bucket would allow up
//! to twice the limit across a boundary). Each account's state sits under one
//! lock, so a decision and its count are one atomic step.
//!
//! [`RateLimiter`] is an enum of backends; callers never ask which is active.
//! A module each:
//! - `memory`: the windows in this process, on the service's clock;
//! - `redis`: the same windows in Redis, shared by every instance, on
//!   Redis's clock (one script run a decision);
//! - `failures`: failures in a sliding minute (of an address, an email);
//! - `auth`: the API's failed authentications per address, in Redis or here;
//! - `sign_in`: the dashboard's failed sign-ins.

mod auth;
mod failures;
mod memory;
mod redis;
mod sign_in;

use taskgate_core::{AccountId, Clock};

use crate::config::PlanLimits;

pub use self::redis::RedisLimiter;
pub use auth::AuthLimiter;
pub use failures::{AuthFailures, MAX_TRACKED_FAILURES, Reservation};
pub use memory::MemoryLimiter;
pub use sign_in::SignInFailures;

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

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
    /// The limiter in this process, its windows on `clock`.
    pub fn memory(clock: Clock) -> Self {
        RateLimiter::Memory(MemoryLimiter::new(clock))
    }

    /// Decides on one request of `account` and counts it if accepted.
    pub async fn check(
        &self,
        account: AccountId,
        limits: PlanLimits,
    ) -> Result<Decision, LimiterUnavailable> {
        match self {
            RateLimiter::Memory(m) => Ok(m.decide_now(account, limits, true)),
            // Boxed: its future is about 5 KB, which every request's
            // authentication would otherwise carry while the request runs,
            // Redis or not (a heap profile at 1,000 calls in flight).
            RateLimiter::Redis(r) => Box::pin(r.decide(account, limits, true)).await,
        }
    }

    /// Whether the limiter's Redis answers; `None` for the in-memory limiter.
    pub async fn ping(&self) -> Option<bool> {
        match self {
            RateLimiter::Memory(_) => None,
            RateLimiter::Redis(r) => Some(r.ping().await),
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
            RateLimiter::Memory(m) => Ok(m.decide_now(account, limits, false)),
            RateLimiter::Redis(r) => Box::pin(r.decide(account, limits, false)).await,
        }
    }
}

/// Milliseconds as whole seconds, rounded up, at least 1.
fn ceil_secs(ms: i64) -> u64 {
    (ms.max(0) as u64).div_ceil(1000).max(1)
}
