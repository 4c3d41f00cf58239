//! `[http]`: what a connection may take of the server.

use serde::{Deserialize, Serialize};

/// `[http]`: what a connection may take of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// A request's headers must arrive within this (and so must the next
    /// request's on a kept-alive connection); else the connection is closed.
    pub header_read_timeout_ms: u64,
    /// A request's whole body must arrive within this; else `408
    /// request_timeout` and the connection is closed.
    pub body_read_timeout_ms: u64,
    /// A kept-alive connection with no request in flight for this long is
    /// closed.
    pub idle_timeout_ms: u64,
    /// Open connections at most; more wait to be accepted.
    pub max_connections: usize,
    /// Bytes of large request bodies (over 256 KiB) read and parsed at once
    /// at most; a body past it waits its turn up to half the body time-out,
    /// then gets 503 `server_busy`.
    pub max_large_body_bytes_in_flight: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 10_000,
            max_large_body_bytes_in_flight: 64 * 1024 * 1024,
        }
    }
}
