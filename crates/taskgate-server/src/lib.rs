//! Taskgate's HTTP server: its doors (`v1`, `openai`, `dashboard`), the
//! services under them (`service`), auth and limits, the executor.
//!
//! [`start`] is the whole service; the binary and the tests both call it.
//! docs/architecture.md shows the layers and which module owns what.

pub mod anthropic;
pub mod api_errors;
pub mod app;
pub mod auth;
pub mod body;
pub mod catalog;
pub mod client_addr;
pub mod config;
pub mod dashboard;
pub mod envelope;
pub mod error;
pub mod executor;
pub mod follow;
pub mod meta;
pub mod metrics;
pub mod openai;
pub mod openapi;
pub mod outbox;
pub mod password;
pub mod principal;
#[cfg(test)]
mod props;
pub mod query;
pub mod ratelimit;
pub mod redis;
mod repoll;
pub mod router;
pub mod serve;
pub mod service;
pub mod state;
pub mod stream_slots;
pub mod streams;
pub mod telemetry;
pub mod usage;
pub mod v1;
pub mod views;

pub use app::{
    Server, open_store, redact_url, start, start_with, start_with_catalog, start_with_env,
};
pub use config::Config;
pub use principal::Principal;
pub use state::AppState;
