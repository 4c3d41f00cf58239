//! The rate limiter's windows in Redis, shared by every instance: the same
//! sliding minute and UTC day as `memory`, decided by one script run each.
//! The windows are read on Redis's clock (`TIME`), not on an instance's: the
//! instances sharing them need one clock, and Redis is the one they share.

use std::sync::Arc;

use parking_lot::Mutex;
use taskgate_core::{AccountId, Timestamp};

use super::{Decision, LimiterUnavailable, Window, WindowState, ceil_secs};
use crate::config::PlanLimits;
use crate::redis::{Redis, RedisError, Script};
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

    /// Whether Redis answers.
    pub(super) async fn ping(&self) -> bool {
        self.redis.command::<()>(&["PING"]).await.is_ok()
    }

    pub(super) async fn decide(
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
        // Unique in the minute's set; its score is Redis's time, not this.
        let member = format!(
            "{}-{:016x}",
            Timestamp::now().unix_ms(),
            rand::random::<u64>()
        );
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
