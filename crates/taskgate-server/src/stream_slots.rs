//! How many event streams one key holds open on this instance, and how long
//! each may last (`[limits]`).
//!
//! A stream holds a connection, a follower task and a little memory for as
//! long as its reader keeps it, so without a cap one key could hold them by
//! the thousand, and without a lifetime a forgotten reader never lets go.
//! The count is this instance's own: what a stream costs is this instance's
//! resources, and a count kept here cannot outlive a crashed instance (one
//! kept in Redis would need leases to forget the streams of an instance that
//! died).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use parking_lot::Mutex;
use taskgate_core::KeyId;
use tokio::time::Instant;

use crate::config::LimitsConfig;
use crate::error::ApiError;

/// The streams open per key.
pub struct StreamSlots {
    max_per_key: u32,
    lifetime: Duration,
    open: Mutex<HashMap<KeyId, u32>>,
}

/// One open stream of a key: its place in the count, given back on drop,
/// and the moment it must end.
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    key: KeyId,
    deadline: Instant,
}

impl StreamSlots {
    pub fn new(limits: &LimitsConfig) -> Arc<Self> {
        Arc::new(Self {
            max_per_key: limits.max_streams_per_key,
            lifetime: Duration::from_secs(limits.stream_max_seconds),
            open: Mutex::default(),
        })
    }

    /// A slot for one more stream of `key`, or the `429 too_many_streams`
    /// to answer when it already holds the most it may.
    pub fn open(self: &Arc<Self>, key: KeyId) -> Result<StreamSlot, ApiError> {
        let mut open = self.open.lock();
        let n = open.entry(key).or_insert(0);
        if *n >= self.max_per_key {
            let max = self.max_per_key;
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                format!(
                    "This API key already has {max} streams open, the most it may hold at once. \
                     Close one, then retry."
                ),
            )
            .with_header("retry-after", "1")
            .with_details(serde_json::json!([{ "window": "streams", "limit": max }])));
        }
        *n += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            key,
            deadline: Instant::now() + self.lifetime,
        })
    }

    /// The streams `key` holds open now.
    pub fn open_of(&self, key: KeyId) -> u32 {
        self.open.lock().get(&key).copied().unwrap_or(0)
    }

    /// The streams open now, of every key.
    pub fn open_total(&self) -> u32 {
        self.open.lock().values().sum()
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }
}

impl StreamSlot {
    /// When the stream must end, whatever its task is doing.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_cap_and_a_closed_stream_frees_its_slot() {
        let slots = StreamSlots::new(&LimitsConfig {
            max_streams_per_key: 2,
            stream_max_seconds: 60,
        });
        let (a, b) = (KeyId::new(), KeyId::new());
        let first = slots.open(a).unwrap();
        let _second = slots.open(a).unwrap();
        let refused = slots.open(a).err().unwrap();
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.code, "too_many_streams");
        // Another key is counted apart.
        let _other = slots.open(b).unwrap();
        drop(first);
        assert_eq!(slots.open_of(a), 1);
        let _third = slots.open(a).unwrap();
        assert_eq!(slots.open_of(a), 2);
    }

    #[test]
    fn the_count_is_forgotten_when_a_key_holds_none() {
        let slots = StreamSlots::new(&LimitsConfig::default());
        let k = KeyId::new();
        drop(slots.open(k).unwrap());
        assert!(slots.open.lock().is_empty());
    }
}
