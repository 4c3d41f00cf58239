//! The API's failed authentications per client address, in Redis when the
//! limits are there.

use std::net::IpAddr;
use std::sync::Arc;

use taskgate_core::{Clock, Timestamp};

use super::{AuthFailures, ceil_secs};
use crate::redis::{Redis, Script};

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
    /// This instance's own count on `clock`; Redis's on its own clock.
    pub fn new(limit: u32, redis: Option<Arc<Redis>>, clock: Clock) -> Self {
        Self {
            local: AuthFailures::new(limit, clock),
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
        // Unique in the address's set; its score is Redis's time, not this.
        let member = format!(
            "{}-{:016x}",
            Timestamp::now().unix_ms(),
            rand::random::<u64>()
        );
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
