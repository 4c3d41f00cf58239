//! The dashboard's failed sign-ins.

use std::net::IpAddr;

use taskgate_core::{Clock, Email};

use super::AuthFailures;
use crate::config::DashboardConfig;

/// Failed sign-ins (of the dashboard, and of a password change) by
/// address, by email, and by the pair (which addresses failed for an email).
pub struct SignInFailures {
    pub failures_by_addr: AuthFailures<IpAddr>,
    pub failures_by_email: AuthFailures<Email>,
    pub failures_by_pair: AuthFailures<(Email, IpAddr)>,
}

impl SignInFailures {
    /// The limits of `config`, their minutes on `clock`.
    pub fn new(config: &DashboardConfig, clock: &Clock) -> Self {
        let limit = config.sign_in_failures_per_minute;
        Self {
            failures_by_addr: AuthFailures::new(limit, clock.clone()),
            failures_by_email: AuthFailures::new(limit, clock.clone()),
            failures_by_pair: AuthFailures::new(limit, clock.clone()),
        }
    }
}
