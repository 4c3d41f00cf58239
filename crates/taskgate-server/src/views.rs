//! How stored rows are shown to clients.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use taskgate_core::Micros;
use taskgate_core::timefmt::format_ms;
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
    pub id: &'a str,
    pub object: &'static str,
    pub api: &'a str,
    pub mode: &'a str,
    pub status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Option<&'a RawValue>>,
    pub error: Option<&'a RawValue>,
    pub usage: UsageView,
    pub metadata: Option<&'a RawValue>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub duration_ms: Option<i64>,
}

impl<'a> TaskView<'a> {
    pub fn new(t: &'a TaskRecord, with_output: bool) -> Self {
        TaskView {
            id: &t.id,
            object: "task",
            api: &t.api,
            mode: &t.mode,
            status: &t.status,
            output: with_output.then(|| t.output.as_deref().and_then(raw)),
            error: t.error.as_deref().and_then(raw),
            usage: UsageView {
                units: t.units,
                input_tokens: t.input_tokens,
                output_tokens: t.output_tokens,
                cost_usd: Micros(t.cost_micros).to_usd_string(),
            },
            metadata: raw(&t.metadata),
            created_at: format_ms(t.created_at),
            started_at: t.started_at.map(format_ms),
            completed_at: t.completed_at.map(format_ms),
            duration_ms: match (t.started_at, t.completed_at) {
                (Some(s), Some(c)) => Some((c - s).max(0)),
                _ => None,
            },
        }
    }
}

/// GET /tasks/{id}: the task object plus its history.
#[derive(Serialize)]
pub struct TaskDetailsView<'a> {
    #[serde(flatten)]
    pub task: TaskView<'a>,
    pub input: Option<&'a RawValue>,
    pub key_id: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub events: Vec<Value>,
    pub attempts: Option<&'a RawValue>,
}

impl<'a> TaskDetailsView<'a> {
    pub fn new(t: &'a TaskRecord) -> Self {
        TaskDetailsView {
            task: TaskView::new(t, true),
            input: raw(&t.input),
            key_id: &t.key_id,
            idempotency_key: t.idempotency_key.as_deref(),
            events: events(&t.events),
            attempts: raw(&t.attempts),
        }
    }
}

/// Stored events carry Unix milliseconds; clients see RFC 3339.
fn events(stored: &str) -> Vec<Value> {
    let list: Vec<Value> = serde_json::from_str(stored).unwrap_or_default();
    list.into_iter()
        .map(|mut e| {
            if let Some(ms) = e.get("at").and_then(Value::as_i64) {
                e["at"] = json!(format_ms(ms));
            }
            e
        })
        .collect()
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
        "created_at": format_ms(a.created_at),
    })
}

pub fn key_json(k: &KeyRecord) -> Value {
    let scopes: Value = serde_json::from_str(&k.scopes).unwrap_or_else(|_| json!([]));
    let allowed: Value = k
        .allowed_apis
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null);
    json!({
        "id": k.id,
        "object": "api_key",
        "account_id": k.account_id,
        "name": k.name,
        "type": k.key_type,
        "mode": k.mode,
        "scopes": scopes,
        "allowed_apis": allowed,
        "hint": k.hint,
        "created_at": format_ms(k.created_at),
        "expires_at": k.expires_at.map(format_ms),
        "last_used_at": k.last_used_at.map(format_ms),
        "revoked_at": k.revoked_at.map(format_ms),
    })
}
