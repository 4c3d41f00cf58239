//! Black-box tests: a real server on port 0, over HTTP, on SQLite and
//! PostgreSQL both. One binary, so the build is shared.

mod ops;
mod utils;

mod anthropic_door;
mod audit;
mod auth;
mod call;
mod cancel;
mod catalog;
mod chaos;
mod chat_checks;
mod chat_families;
mod chat_streams;
mod dashboard;
mod dashboard_webhooks;
mod envelope;
mod hardening;
mod idempotency;
mod instances;
mod limits;
mod openai_compat;
mod openai_tools;
mod openapi;
mod operator;
mod secrets;
mod streams;
mod tasks;
mod telemetry;
mod test_mode;
mod token_usage;
mod upstream;
mod webhooks;
