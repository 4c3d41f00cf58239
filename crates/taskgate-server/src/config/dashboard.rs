//! `[dashboard]`: the web dashboard's sessions and sign-in.

use serde::{Deserialize, Serialize};

/// `[dashboard]`: how long sessions last, how sign-in is limited, and whether
/// cookies are marked `Secure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DashboardConfig {
    /// A session unused for this long ends.
    pub session_idle_minutes: u64,
    /// A session ends this long after sign-in, however it is used.
    pub session_max_hours: u64,
    /// Failed sign-ins per minute from one address, and for one email,
    /// before sign-in is refused for a while (`0`: no limit).
    pub sign_in_failures_per_minute: u32,
    /// Mark cookies `Secure` always. Without it they are `Secure` when the
    /// request came over HTTPS (from a trusted proxy: `X-Forwarded-Proto`).
    pub secure_cookies: bool,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        Self {
            session_idle_minutes: 120,
            session_max_hours: 12,
            sign_in_failures_per_minute: 10,
            secure_cookies: false,
        }
    }
}
