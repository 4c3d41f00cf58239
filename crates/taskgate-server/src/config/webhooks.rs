//! `[webhooks]`: how task events are delivered to the endpoints accounts
//! register and to calls' own webhooks.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use taskgate_core::duration::parse_duration_ms;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// The wait before each attempt: the first is the first attempt's
    /// (`0s`: at once), each next one the wait after the attempt before.
    /// After the last, a delivery that never succeeded is `exhausted`.
    pub retry_schedule: Vec<Span>,
    /// How long one attempt may take, connection and answer included.
    pub timeout_ms: u64,
    /// A task's output larger than this (as JSON) is left out of the event
    /// (`output_omitted: true`); the receiver fetches the task.
    pub max_output_bytes: usize,
    /// How long a rotated secret keeps signing beside the new one.
    pub rotation_overlap: Span,
    /// An endpoint at which every attempt has failed for this long is
    /// disabled.
    pub disable_after: Span,
    /// Lets endpoints and calls' webhooks reach loopback and private
    /// networks: for local development only (a URL could then reach
    /// services behind the server's firewall).
    pub allow_private_networks: bool,
    /// Attempts in flight at once to one endpoint (or one call's URL), on
    /// one instance.
    pub max_concurrency_per_endpoint: usize,
    /// Deliveries (and their attempts' log) are deleted this many days after
    /// they were made.
    pub retention_days: u32,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        let s = |text: &str| Span::parse(text).unwrap_or_else(|e| unreachable!("{e}"));
        Self {
            retry_schedule: ["0s", "5s", "5m", "30m", "2h", "5h", "10h", "10h"]
                .into_iter()
                .map(s)
                .collect(),
            timeout_ms: 15_000,
            max_output_bytes: 16 * 1024,
            rotation_overlap: s("24h"),
            disable_after: s("5d"),
            allow_private_networks: false,
            max_concurrency_per_endpoint: 8,
            retention_days: 30,
        }
    }
}

impl WebhooksConfig {
    /// The schedule's longest wait: what a receiver's `Retry-After` is
    /// clamped to.
    pub fn longest_wait(&self) -> Duration {
        self.retry_schedule
            .iter()
            .map(|s| s.0)
            .max()
            .unwrap_or_default()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.retry_schedule.is_empty() {
            return Err("config: webhooks.retry_schedule needs at least one step".to_owned());
        }
        if self.retry_schedule.len() > 30 {
            return Err("config: webhooks.retry_schedule has at most 30 steps".to_owned());
        }
        if !(100..=120_000).contains(&self.timeout_ms) {
            return Err("config: webhooks.timeout_ms must be 100 to 120000".to_owned());
        }
        if !(1..=1_000).contains(&self.max_concurrency_per_endpoint) {
            return Err(
                "config: webhooks.max_concurrency_per_endpoint must be 1 to 1000".to_owned(),
            );
        }
        if !(1..=3_650).contains(&self.retention_days) {
            return Err("config: webhooks.retention_days must be 1 to 3650".to_owned());
        }
        Ok(())
    }
}

/// A length of time written as a duration (`5s`, `30m`, `2h`, `5d`, `1h30m`,
/// `0s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl Span {
    pub fn parse(text: &str) -> Result<Self, String> {
        let ms = parse_duration_ms(text)?;
        u64::try_from(ms)
            .map(|ms| Span(Duration::from_millis(ms)))
            .map_err(|_| format!("invalid duration {text:?}"))
    }

    pub fn as_millis(self) -> i64 {
        i64::try_from(self.0.as_millis()).unwrap_or(i64::MAX)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        let units: [(u128, &str); 4] = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ];
        for (size, unit) in units {
            if ms >= size && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        if ms == 0 {
            f.write_str("0s")
        } else {
            write!(f, "{}s", ms as f64 / 1000.0)
        }
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Span::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_and_show_as_written() {
        for text in ["0s", "5s", "5m", "30m", "2h", "10h", "5d"] {
            assert_eq!(Span::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Span::parse("1h30m").unwrap().0, Duration::from_secs(5_400));
        assert!(Span::parse("5 parsecs").is_err());
        let c = WebhooksConfig::default();
        assert_eq!(c.longest_wait(), Duration::from_secs(36_000));
        assert!(c.validate().is_ok());
    }
}
