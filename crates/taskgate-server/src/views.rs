//! How stored rows are shown to clients.

use serde::Serialize;
use serde_json::value::RawValue;

use taskgate_core::timestamp::rfc3339;
use taskgate_core::{
    AccountId, AccountStatus, ApiList, KeyType, PlanName, Role, Scopes, UserId, UserStatus,
};
use taskgate_core::{
    ApiSlug, Attempts, IdempotencyKey, KeyId, Micros, Mode, TaskError, TaskEvent, TaskId,
    TaskStatus, Timestamp,
};
use taskgate_store::{Account, KeyRecord, TaskRecord, UserRecord};

use crate::service::keys::{CreatedKey, RolledKey};
use crate::service::users::WithPassword;

fn raw(s: &str) -> Option<&RawValue> {
    serde_json::from_str::<&RawValue>(s).ok()
}

#[derive(Serialize)]
pub struct UsageView {
    pub units: i64,
    /// The whole input, its cached part included.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The part of `output_tokens` spent reasoning; null when unknown.
    pub reasoning_tokens: Option<i64>,
    /// The part of `input_tokens` read from the provider's cache; null when
    /// unknown.
    pub cached_input_tokens: Option<i64>,
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
                reasoning_tokens: t.reasoning_tokens,
                cached_input_tokens: t.cached_input_tokens,
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

/// An account as the operator's tools show it (`taskgate accounts …`).
#[derive(Serialize)]
pub struct AccountView<'a> {
    pub id: AccountId,
    pub object: &'static str,
    pub name: &'a str,
    pub plan: &'a PlanName,
    pub status: AccountStatus,
    pub monthly_spend_limit_usd: Option<String>,
    pub max_monthly_spend_limit_usd: Option<String>,
    #[serde(serialize_with = "rfc3339::serialize")]
    pub created_at: Timestamp,
}

impl<'a> AccountView<'a> {
    pub fn new(a: &'a Account) -> Self {
        AccountView {
            id: a.id,
            object: "account",
            name: &a.name,
            plan: &a.plan,
            status: a.status,
            monthly_spend_limit_usd: a.monthly_spend_limit_micros.map(usd_limit),
            max_monthly_spend_limit_usd: a.max_monthly_spend_limit_micros.map(usd_limit),
            created_at: a.created_at,
        }
    }
}

/// An API key as the operator's tools show it; with its whole `secret`
/// only when it was just made (shown this once), and `rolled_from` when it
/// replaced another.
#[derive(Serialize)]
pub struct KeyView<'a> {
    pub id: KeyId,
    pub object: &'static str,
    pub account_id: AccountId,
    pub name: &'a str,
    #[serde(rename = "type")]
    pub key_type: KeyType,
    pub mode: Mode,
    pub scopes: &'a Scopes,
    pub allowed_apis: Option<&'a ApiList>,
    pub hint: &'a str,
    #[serde(serialize_with = "rfc3339::serialize")]
    pub created_at: Timestamp,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub expires_at: Option<Timestamp>,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub last_used_at: Option<Timestamp>,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub revoked_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_from: Option<KeyId>,
}

impl<'a> KeyView<'a> {
    pub fn new(k: &'a KeyRecord) -> Self {
        KeyView {
            id: k.id,
            object: "api_key",
            account_id: k.account_id,
            name: &k.name,
            key_type: k.key_type,
            mode: k.mode,
            scopes: &k.scopes,
            allowed_apis: k.allowed_apis.as_ref(),
            hint: &k.hint,
            created_at: k.created_at,
            expires_at: k.expires_at,
            last_used_at: k.last_used_at,
            revoked_at: k.revoked_at,
            secret: None,
            rolled_from: None,
        }
    }

    /// A key just made, with its secret.
    pub fn created(made: &'a CreatedKey) -> Self {
        KeyView {
            secret: Some(made.secret.expose()),
            ..KeyView::new(&made.key)
        }
    }

    /// A key made to replace another, with its secret.
    pub fn rolled(rolled: &'a RolledKey) -> Self {
        KeyView {
            secret: Some(rolled.secret.expose()),
            rolled_from: Some(rolled.rolled_from),
            ..KeyView::new(&rolled.key)
        }
    }
}

/// A dashboard user as the operator's tools show it; with `password` only
/// when one was generated (shown this once).
#[derive(Serialize)]
pub struct UserView<'a> {
    pub id: UserId,
    pub object: &'static str,
    pub account_id: AccountId,
    pub email: &'a str,
    pub role: Role,
    pub status: UserStatus,
    #[serde(serialize_with = "rfc3339::serialize")]
    pub created_at: Timestamp,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub last_sign_in_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<&'a str>,
}

impl<'a> UserView<'a> {
    pub fn new(u: &'a UserRecord) -> Self {
        UserView {
            id: u.id,
            object: "user",
            account_id: u.account_id,
            email: u.email.as_str(),
            role: u.role,
            status: u.status,
            created_at: u.created_at,
            last_sign_in_at: u.last_sign_in_at,
            password: None,
        }
    }

    pub fn with_password(made: &'a WithPassword) -> Self {
        UserView {
            password: made.generated_password.as_deref(),
            ..UserView::new(&made.user)
        }
    }
}

/// A webhook endpoint as its owners see it; `secret` only when it is made.
#[derive(Serialize)]
pub struct WebhookEndpointView<'a> {
    pub id: taskgate_core::WebhookEndpointId,
    pub object: &'static str,
    pub url: &'a str,
    pub events: taskgate_core::WebhookEvents,
    pub description: Option<&'a str>,
    pub enabled: bool,
    /// Why it is disabled: `owner`, `gone` (its receiver answered 410) or
    /// `failing` (every attempt failed for `webhooks.disable_after`).
    pub disabled_reason: Option<&'a str>,
    pub mode: Mode,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl<'a> WebhookEndpointView<'a> {
    pub fn new(e: &'a taskgate_store::WebhookEndpoint) -> Self {
        WebhookEndpointView {
            id: e.id,
            object: "webhook_endpoint",
            url: &e.url,
            events: e.events,
            description: e.description.as_deref(),
            enabled: e.disabled.is_none(),
            disabled_reason: e.disabled.as_deref(),
            mode: e.mode,
            created_at: e.created_at,
            secret: None,
        }
    }

    /// As made: its secret shown this once.
    pub fn created(e: &'a taskgate_store::WebhookEndpoint) -> Self {
        WebhookEndpointView {
            secret: Some(e.secret.expose()),
            ..Self::new(e)
        }
    }
}

/// One delivery of an event, with its attempts.
#[derive(Serialize)]
pub struct WebhookDeliveryView<'a> {
    pub id: taskgate_core::WebhookDeliveryId,
    pub object: &'static str,
    pub message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<taskgate_core::WebhookEndpointId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<&'a str>,
    pub event_type: taskgate_core::WebhookEvent,
    pub task_id: Option<TaskId>,
    pub mode: Mode,
    pub status: taskgate_core::DeliveryStatus,
    pub attempts: Vec<DeliveryAttemptView<'a>>,
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub next_attempt_at: Option<Timestamp>,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
}

#[derive(Serialize)]
pub struct DeliveryAttemptView<'a> {
    #[serde(with = "rfc3339")]
    pub at: Timestamp,
    pub http_status: Option<u16>,
    pub duration_ms: u64,
    pub error: Option<&'a str>,
    pub response_excerpt: Option<&'a str>,
}

impl<'a> WebhookDeliveryView<'a> {
    pub fn new(d: &'a taskgate_store::WebhookDelivery) -> Self {
        WebhookDeliveryView {
            id: d.id(),
            object: "webhook_delivery",
            message_id: d.message_id(),
            endpoint_id: d.endpoint_id,
            url: if d.endpoint_id.is_none() {
                d.url.as_deref()
            } else {
                None
            },
            event_type: d.event_type,
            task_id: d.task_id,
            mode: d.mode,
            status: d.status,
            attempts: d
                .attempts
                .0
                .iter()
                .map(|a| DeliveryAttemptView {
                    at: a.at,
                    http_status: a.http_status,
                    duration_ms: a.duration_ms,
                    error: a.error.as_deref(),
                    response_excerpt: a.response_excerpt.as_deref(),
                })
                .collect(),
            next_attempt_at: d.next_attempt_at,
            created_at: d.created_at,
        }
    }
}
