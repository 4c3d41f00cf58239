//! Black-box tests: a real server on port 0, over HTTP, on SQLite and
//! PostgreSQL both. One binary, so the build is shared.

mod utils;

mod call;
mod envelope;
mod tasks;
mod cancel;
mod catalog;
mod auth;
mod limits;
mod idempotency;
