//! Taskgate's domain types. Nothing here does I/O: ids, timestamps, the API key
//! format, scopes, money, accounts and plans, and the task state machine with
//! the events and attempts a task records.
//!
//! How each type is stored in a database column is defined here too, once per
//! type ([`column`]); the features `sqlx` and `rusqlite` derive the drivers'
//! traits from it, so the store binds and reads these types directly.

pub mod account;
pub mod attempt;
pub mod audit;
pub mod clock;
pub mod column;
pub mod duration;
pub mod ids;
pub mod key;
pub mod money;
mod newtype;
pub mod task;
pub mod timestamp;
pub mod trace;
pub mod user;
pub mod webhook;

pub use account::{AccountStatus, ApiList, ApiSlug, PlanName};
pub use attempt::{Attempt, AttemptOutcome, Attempts};
pub use audit::{
    ActorType, AuditAction, AuditActor, AuditContext, AuditEntry, AuditEvent, AuditTarget, Changes,
};
pub use clock::Clock;
pub use ids::{
    AccountId, AuditId, IdError, KeyId, RequestId, RunnerId, TaskId, UserId, WebhookDeliveryId,
    WebhookEndpointId,
};
pub use key::{ApiKeySecret, KeyType, Mode, Scope, Scopes};
pub use money::{Micros, Nanos};
pub use task::{
    ForbiddenTransition, IdempotencyKey, SandboxControls, SandboxOutcome, TaskError, TaskEvent,
    TaskEvents, TaskStatus, Transition,
};
pub use timestamp::Timestamp;
pub use user::{Email, Role, UserStatus};
pub use webhook::{
    DeliveryAttempt, DeliveryAttempts, DeliveryStatus, WebhookEvent, WebhookEvents, WebhookSecret,
};

/// A JSON document's compact text, as stored in a column or sent as a body:
/// the same text as `value.to_string()`, written straight into a byte buffer
/// rather than through the formatting machinery, which checked each piece as
/// UTF-8 and grew the string from nothing (9.4k instructions a chat call for
/// its input, metadata and output: bench/RESULTS.md, fifth session).
pub fn json_text(value: &serde_json::Value) -> String {
    // Serializing a `Value` cannot fail: its keys are strings and its
    // numbers finite.
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod json_text_tests {
    use serde_json::json;

    #[test]
    fn json_text_is_the_displayed_text() {
        for v in [
            json!(null),
            json!({"messages": [{"role": "user", "content": "hé \"quoted\"\n\u{1}"}], "n": 1.5e300, "k": -3}),
            json!([]),
            json!({}),
            json!("plain"),
        ] {
            assert_eq!(super::json_text(&v), v.to_string());
        }
    }
}
