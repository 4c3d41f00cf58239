//! `[limits]`: what one key may hold open at once.

use serde::{Deserialize, Serialize};

/// `[limits]`: server-sent event streams (`GET /api/v1/tasks/{id}/stream`
/// and `stream: true` on `/openai/v1/chat/completions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Streams one key may hold open at once on one instance; one more is
    /// `429 too_many_streams`.
    pub max_streams_per_key: u32,
    /// A stream is ended (with an `expired` event) this long after it
    /// opened, so a forgotten reader cannot hold its slot forever.
    pub stream_max_seconds: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_streams_per_key: 32,
            stream_max_seconds: 3_600,
        }
    }
}
