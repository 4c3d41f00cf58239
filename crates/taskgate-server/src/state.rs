//! The state every door shares: the store, the catalog, the executor, the
//! limiters and caches, built once at start and handed to each
//! handler behind an `Arc`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use taskgate_core::Clock;
use taskgate_store::Store;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::executor::Executor;
use crate::outbox::Outbox;
use crate::principal::KeyCache;
use crate::ratelimit::{self, RateLimiter};
use crate::{body, client_addr, follow, openapi, stream_slots, usage};

pub struct AppState {
    /// Where the time is read: the system's, or a test's that it moves.
    pub clock: Clock,
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub catalog: Arc<Catalog>,
    pub executor: Arc<Executor>,
    /// The sender of webhook deliveries.
    pub outbox: Arc<Outbox>,
    /// Traces (when exported) and the requests' scopes.
    pub telemetry: Arc<crate::telemetry::Telemetry>,
    pub limiter: RateLimiter,
    pub auth_failures: ratelimit::AuthLimiter,
    pub trusted_proxies: client_addr::TrustedProxies,
    pub keys: KeyCache,
    pub openapi: openapi::Documents,
    /// Failed sign-ins, for the dashboard's limits on them.
    pub sign_in_failures: ratelimit::SignInFailures,
    /// Requests per key and minute, for the dashboard's Usage.
    pub requests: usage::RequestCounter,
    /// How call bodies are read: their limit, time-out, and the large
    /// ones being read and parsed, by their bytes.
    pub call_bodies: body::CallBodies,
    /// Event streams open per key (`[limits]`).
    pub stream_slots: Arc<stream_slots::StreamSlots>,
    /// One look at the store per followed task, shared by its readers.
    pub followers: follow::Followers,
    pub draining: AtomicBool,
}

impl body::HasCallBodies for AppState {
    fn call_bodies(&self) -> &body::CallBodies {
        &self.call_bodies
    }
}
