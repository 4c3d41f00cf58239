//! Handlers of `/api/v1`.

pub mod apis;
pub mod call;
pub mod tasks;
pub mod webhooks;
