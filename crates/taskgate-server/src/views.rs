//! How stored rows are shown to clients.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use taskgate_core::timestamp::rfc3339;
use taskgate_core::{
    ApiSlug, Attempts, IdempotencyKey, KeyId, Micros, Mode, TaskError, TaskEvent, TaskId,
    TaskStatus, Timestamp,
};
use taskgate_store::{Account, KeyRecord, TaskRecord};

fn raw(s: &str) -> Option<&RawValue> {
    serde_json::from_str::<&RawValue>(s).ok()
}

#[derive(Serialize)]
pub struct UsageView {
    pub units: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: String,
}

/// The task object of the contract. `output` is left out of list items.
#[derive(Serialize)]
pub struct TaskView<'a> {
    pub id: TaskId,
    pub object: &'static str,
    pub api: &'a ApiSlug,
    pub mode: Mode,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Option<&'a RawValue>>,
    pub error: Option<&'a TaskError>,
    pub usage: UsageView,
    pub metadata: Option<&'a RawValue>,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub started_at: Option<Timestamp>,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub completed_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
}

impl<'a> TaskView<'a> {
    pub fn new(t: &'a TaskRecord, with_output: bool) -> Self {
        TaskView {
            id: t.id,
            object: "task",
            api: &t.api,
            mode: t.mode,
            status: t.status,
            output: with_output.then(|| t.output.as_deref().and_then(raw)),
            error: t.error.as_ref(),
            usage: UsageView {
                units: t.units,
                input_tokens: t.input_tokens,
                output_tokens: t.output_tokens,
                cost_usd: Micros(t.cost_micros).to_usd_string(),
            },
            metadata: raw(&t.metadata),
            created_at: t.created_at,
            started_at: t.started_at,
            completed_at: t.completed_at,
            duration_ms: t.duration_ms(),
        }
    }
}

/// GET /tasks/{id}: the task object plus its history.
#[derive(Serialize)]
pub struct TaskDetailsView<'a> {
    #[serde(flatten)]
    pub task: TaskView<'a>,
    pub input: Option<&'a RawValue>,
    pub key_id: KeyId,
    pub idempotency_key: Option<&'a IdempotencyKey>,
    pub events: Vec<EventView<'a>>,
    pub attempts: &'a Attempts,
}

impl<'a> TaskDetailsView<'a> {
    pub fn new(t: &'a TaskRecord) -> Self {
        TaskDetailsView {
            task: TaskView::new(t, true),
            input: raw(&t.input),
            key_id: t.key_id,
            idempotency_key: t.idempotency_key.as_ref(),
            events: t.events.iter().map(EventView::from).collect(),
            attempts: &t.attempts,
        }
    }
}

/// An event as clients see it: `at` in RFC 3339 (stored in milliseconds).
#[derive(Serialize)]
pub struct EventView<'a> {
    pub status: TaskStatus,
    #[serde(with = "rfc3339")]
    pub at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

impl<'a> From<&'a TaskEvent> for EventView<'a> {
    fn from(e: &'a TaskEvent) -> Self {
        EventView {
            status: e.status,
            at: e.at,
            message: e.message.as_deref(),
        }
    }
}

/// `25.00`: limits show cents, and more decimals only when they have them.
pub fn usd_limit(micros: i64) -> String {
    let mut s = Micros(micros).to_usd_string();
    while s.ends_with('0') && s.len() > s.find('.').unwrap_or(0) + 3 {
        s.pop();
    }
    s
}

pub fn account_json(a: &Account) -> Value {
    json!({
        "id": a.id,
        "object": "account",
        "name": a.name,
        "plan": a.plan,
        "status": a.status,
        "monthly_spend_limit_usd": a.monthly_spend_limit_micros.map(usd_limit),
        "max_monthly_spend_limit_usd": a.max_monthly_spend_limit_micros.map(usd_limit),
        "created_at": a.created_at.rfc3339(),
    })
}

pub fn key_json(k: &KeyRecord) -> Value {
    json!({
        "id": k.id,
        "object": "api_key",
        "account_id": k.account_id,
        "name": k.name,
        "type": k.key_type,
        "mode": k.mode,
        "scopes": k.scopes,
        "allowed_apis": k.allowed_apis,
        "hint": k.hint,
        "created_at": k.created_at.rfc3339(),
        "expires_at": k.expires_at.map(Timestamp::rfc3339),
        "last_used_at": k.last_used_at.map(Timestamp::rfc3339),
        "revoked_at": k.revoked_at.map(Timestamp::rfc3339),
    })
}
