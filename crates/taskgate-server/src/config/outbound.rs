//! `[outbound]`: what URLs that users put in task inputs may reach.

use serde::{Deserialize, Serialize};
use taskgate_providers::upstream::fetch::Cidr;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboundConfig {
    /// Networks (CIDR) that user-supplied URLs may reach although they are
    /// not public, e.g. `["10.20.0.0/16"]`. Empty by default.
    pub allow_networks: Vec<Cidr>,
    /// Largest file fetched from a user-supplied URL.
    pub max_fetch_bytes: usize,
    /// Deadline of such a fetch.
    pub fetch_timeout_ms: u64,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        Self {
            allow_networks: Vec::new(),
            max_fetch_bytes: 25 * 1024 * 1024,
            fetch_timeout_ms: 30_000,
        }
    }
}
