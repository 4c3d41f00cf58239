//! Webhooks in the document: the endpoints' and deliveries' operations and
//! wire types, the call body's `webhook` field, and the OpenAPI 3.1
//! top-level `webhooks` section (the messages a receiver gets), which the
//! attributes cannot write and [`add`] adds as JSON.

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::wire::{ErrorEnvelope, Meta};
use crate::service::webhooks::{MAX_DESCRIPTION_LEN, MAX_URL_LEN};

/// A ULID id with `prefix`, as the server parses it.
pub(super) fn id_pattern(prefix: &str) -> String {
    format!("^{prefix}[0-7][0-9A-HJKMNP-TV-Z]{{25}}$")
}

#[derive(ToSchema, Serialize)]
enum WebhookEventType {
    #[serde(rename = "task.running")]
    TaskRunning,
    #[serde(rename = "task.succeeded")]
    TaskSucceeded,
    #[serde(rename = "task.failed")]
    TaskFailed,
    #[serde(rename = "task.cancelled")]
    TaskCancelled,
    #[serde(rename = "webhook.test")]
    WebhookTest,
}

#[derive(ToSchema, Serialize)]
#[serde(rename_all = "lowercase")]
enum WebhookDeliveryStatus {
    Pending,
    Succeeded,
    Failed,
    Exhausted,
}

#[derive(ToSchema, Serialize)]
#[serde(rename_all = "lowercase")]
enum WebhookDisabledReason {
    Owner,
    Gone,
    Failing,
}

/// A webhook endpoint: where a key's account and mode gets its events.
#[derive(ToSchema, Serialize)]
struct WebhookEndpoint {
    #[schema(example = "whe_01JD2W3KX7…")]
    id: String,
    #[schema(example = "webhook_endpoint")]
    object: String,
    url: String,
    events: Vec<WebhookEventType>,
    #[schema(required = true)]
    description: Option<String>,
    enabled: bool,
    /// Why it is disabled: `owner` (PATCH `enabled: false`), `gone` (its
    /// receiver answered 410) or `failing` (every attempt failed for
    /// `webhooks.disable_after`); null while enabled.
    #[schema(required = true)]
    disabled_reason: Option<WebhookDisabledReason>,
    /// `live` or `test`: the mode of the key that made it.
    mode: String,
    created_at: String,
    /// `whsec_…`: only in the answer of POST /webhook_endpoints (later:
    /// GET /webhook_endpoints/{id}/secret).
    secret: Option<String>,
}

/// One attempt at a delivery.
#[derive(ToSchema, Serialize)]
struct WebhookDeliveryAttempt {
    at: String,
    /// The receiver's answer; null when none came (time-out, connection error).
    #[schema(required = true)]
    http_status: Option<u16>,
    duration_ms: u64,
    /// Why the attempt failed; null when it succeeded.
    #[schema(required = true)]
    error: Option<String>,
    /// The start of the receiver's answer (at most 1 KiB).
    #[schema(required = true)]
    response_excerpt: Option<String>,
}

/// One event's delivery to one endpoint (`endpoint_id`) or to a call's own
/// webhook (`url`), with its attempts, newest last.
#[derive(ToSchema, Serialize)]
struct WebhookDelivery {
    #[schema(example = "whd_01JD2W3KX7…")]
    id: String,
    #[schema(example = "webhook_delivery")]
    object: String,
    /// The `webhook-id` header: the same on every attempt and replay of an event.
    #[schema(example = "msg_01JD2W3KX7…_succeeded")]
    message_id: String,
    /// The endpoint's id; absent for a call's own webhook.
    endpoint_id: Option<String>,
    /// The call's webhook URL; absent for an endpoint's delivery.
    url: Option<String>,
    event_type: WebhookEventType,
    /// null for a `webhook.test` event.
    #[schema(required = true)]
    task_id: Option<String>,
    mode: String,
    status: WebhookDeliveryStatus,
    attempts: Vec<WebhookDeliveryAttempt>,
    /// When it is sent next; null when nothing is due.
    #[schema(required = true)]
    next_attempt_at: Option<String>,
    created_at: String,
}

#[derive(ToSchema)]
struct WebhookEndpointList {
    object: String,
    /// Oldest first.
    items: Vec<WebhookEndpoint>,
    has_more: bool,
    /// Pass as `cursor` for the next page: the last item's id.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

#[derive(ToSchema)]
struct WebhookDeliveryList {
    object: String,
    /// Newest first.
    items: Vec<WebhookDelivery>,
    has_more: bool,
    /// Pass as `cursor` for the next page: the last item's id.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// A signing secret.
#[derive(ToSchema)]
struct WebhookSecret {
    /// `whsec_…` (Standard Webhooks): base64 of the HMAC-SHA256 key after the prefix.
    secret: String,
}

/// What DELETE answers.
#[derive(ToSchema)]
struct DeletedWebhookEndpoint {
    id: String,
    #[schema(example = "webhook_endpoint")]
    object: String,
    deleted: bool,
}

macro_rules! envelope {
    ($name:ident, $data:ty) => {
        #[derive(ToSchema)]
        pub(super) struct $name {
            success: bool,
            data: $data,
            meta: Meta,
        }
    };
}
envelope!(WebhookEndpointEnvelope, WebhookEndpoint);
envelope!(WebhookEndpointListEnvelope, WebhookEndpointList);
envelope!(WebhookDeliveryEnvelope, WebhookDelivery);
envelope!(WebhookDeliveryListEnvelope, WebhookDeliveryList);
envelope!(WebhookSecretEnvelope, WebhookSecret);
envelope!(DeletedWebhookEndpointEnvelope, DeletedWebhookEndpoint);

/// Create a webhook endpoint
///
/// Its `secret` is in this answer (and later from GET …/secret only). `events` defaults to
/// `task.succeeded`, `task.failed` and `task.cancelled`. A URL whose host is or resolves to
/// a loopback, private, link-local, multicast, CGNAT or metadata address is refused (400
/// `invalid_field`, `param: "url"`) unless the server sets `webhooks.allow_private_networks`.
#[utoipa::path(post, path = "/api/v1/webhook_endpoints", tag = "webhooks",
    responses(
        (status = 201, description = "The endpoint, with its secret", body = WebhookEndpointEnvelope),
        (status = 400, description = "invalid_json, invalid_field", body = ErrorEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 409, description = "too_many_webhook_endpoints: the account holds 16 of this mode", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_create() {}

/// List webhook endpoints
///
/// The key's account's endpoints of its mode, oldest first (by id).
#[utoipa::path(get, path = "/api/v1/webhook_endpoints", tag = "webhooks",
    params(
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of endpoints, without secrets", body = WebhookEndpointListEnvelope),
        (status = 400, description = "invalid_parameter", body = ErrorEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:read), account_suspended", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoints_list() {}

/// A webhook endpoint
#[utoipa::path(get, path = "/api/v1/webhook_endpoints/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 200, description = "The endpoint, without its secret", body = WebhookEndpointEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:read), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_get() {}

/// Change a webhook endpoint
///
/// Any of `url`, `events`, `description` (null removes it) and `enabled`; `enabled: true`
/// re-enables an endpoint disabled for any reason.
#[utoipa::path(patch, path = "/api/v1/webhook_endpoints/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 200, description = "The endpoint as changed", body = WebhookEndpointEnvelope),
        (status = 400, description = "invalid_json, invalid_field", body = ErrorEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_update() {}

/// Delete a webhook endpoint
///
/// Its pending deliveries are not sent.
#[utoipa::path(delete, path = "/api/v1/webhook_endpoints/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 200, description = "Deleted", body = DeletedWebhookEndpointEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_delete() {}

/// A webhook endpoint's signing secret
#[utoipa::path(get, path = "/api/v1/webhook_endpoints/{id}/secret", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 200, description = "The newest secret", body = WebhookSecretEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_secret() {}

/// Rotate a webhook endpoint's signing secret
///
/// The old secret keeps signing beside the new one (two signatures in `webhook-signature`)
/// for `webhooks.rotation_overlap` (24 h by default).
#[utoipa::path(post, path = "/api/v1/webhook_endpoints/{id}/rotate_secret", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 200, description = "The new secret", body = WebhookSecretEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_rotate_secret() {}

/// Send a test event to a webhook endpoint
///
/// A `webhook.test` event, sent now, enabled or not; follow it in the delivery log.
#[utoipa::path(post, path = "/api/v1/webhook_endpoints/{id}/test", tag = "webhooks",
    params(("id" = String, Path, description = "whe_…")),
    responses(
        (status = 202, description = "The test event's delivery", body = WebhookDeliveryEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_endpoint_test() {}

/// The secret that signs calls' own webhooks
///
/// POST /call's `webhook` deliveries of the key's account and mode are signed with it;
/// made at the first ask.
#[utoipa::path(get, path = "/api/v1/webhooks/secret", tag = "webhooks",
    responses(
        (status = 200, description = "The newest secret", body = WebhookSecretEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
    ))]
pub(super) fn webhooks_secret() {}

/// Rotate the secret that signs calls' own webhooks
///
/// The old secret keeps signing beside the new one for `webhooks.rotation_overlap`.
#[utoipa::path(post, path = "/api/v1/webhooks/secret/rotate", tag = "webhooks",
    responses(
        (status = 200, description = "The new secret", body = WebhookSecretEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
    ))]
pub(super) fn webhooks_secret_rotate() {}

/// List webhook deliveries (the delivery log)
///
/// Newest first; kept `webhooks.retention_days` (30 by default).
#[utoipa::path(get, path = "/api/v1/webhook_deliveries", tag = "webhooks",
    params(
        ("endpoint_id" = Option<String>, Query, description = "An endpoint's deliveries"),
        ("task_id" = Option<String>, Query, description = "A task's deliveries"),
        ("status" = Option<String>, Query, description = "pending, succeeded, failed or exhausted"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of deliveries", body = WebhookDeliveryListEnvelope),
        (status = 400, description = "invalid_parameter", body = ErrorEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:read), account_suspended", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_deliveries_list() {}

/// A webhook delivery with its attempts
#[utoipa::path(get, path = "/api/v1/webhook_deliveries/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "whd_…")),
    responses(
        (status = 200, description = "The delivery", body = WebhookDeliveryEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:read), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_delivery_get() {}

/// Send a webhook delivery again now
///
/// A new attempt with the same `webhook-id`, whatever the delivery's status.
#[utoipa::path(post, path = "/api/v1/webhook_deliveries/{id}/retry", tag = "webhooks",
    params(("id" = String, Path, description = "whd_…")),
    responses(
        (status = 202, description = "The delivery, due now", body = WebhookDeliveryEnvelope),
        (status = 403, description = "insufficient_permissions (webhooks:write), account_suspended", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
    ))]
pub(super) fn webhook_delivery_retry() {}

const EVENTS: [&str; 5] = [
    "task.running",
    "task.succeeded",
    "task.failed",
    "task.cancelled",
    "webhook.test",
];
const TASK_EVENTS: [&str; 4] = [
    "task.running",
    "task.succeeded",
    "task.failed",
    "task.cancelled",
];

fn url_schema() -> Value {
    json!({
        "type": "string",
        "format": "uri",
        "maxLength": MAX_URL_LEN,
        "description": "`http` or `https`. A host that is or resolves to a loopback, private, \
            link-local, multicast, CGNAT or metadata address is refused (400 `invalid_field`) \
            unless the server sets `webhooks.allow_private_networks` (local development).",
    })
}

fn events_schema(names: &[&str]) -> Value {
    json!({
        "type": "array",
        "minItems": 1,
        "items": { "type": "string", "enum": names },
    })
}

/// POST /call's `webhook`: where that call's task's events go, signed with
/// the account's signing secret of the key's mode (GET /webhooks/secret).
pub(super) fn call_webhook_schema() -> Value {
    let mut events = events_schema(&TASK_EVENTS);
    // `null` is the default, as the server reads it.
    events["type"] = json!(["array", "null"]);
    events["default"] = json!(["task.succeeded", "task.failed", "task.cancelled"]);
    json!({
        "description": "This call's own webhook: its task's events are sent to `url`, signed \
            with the secret of GET /api/v1/webhooks/secret. `null` is none.",
        "type": ["object", "null"],
        "required": ["url"],
        "additionalProperties": false,
        "properties": { "url": url_schema(), "events": events },
    })
}

fn request_body(schema: Value) -> Value {
    json!({
        "required": true,
        "description": "Unknown fields are refused (400 `invalid_field`).",
        "content": { "application/json": { "schema": schema } },
    })
}

fn description_schema() -> Value {
    json!({ "type": ["string", "null"], "maxLength": MAX_DESCRIPTION_LEN })
}

/// The schemas the attributes cannot write: the endpoints' request bodies
/// and the messages of the `webhooks` section.
fn components() -> [(String, Value); 5] {
    let mut events = events_schema(&EVENTS);
    events["default"] = json!(["task.succeeded", "task.failed", "task.cancelled"]);
    let headers_note = "Sent as Standard Webhooks 1.0: verify `webhook-signature` over \
        `{webhook-id}.{webhook-timestamp}.{body}` with the endpoint's secret (or, for a call's \
        own webhook, the account's signing secret) before trusting it.";
    [
        (
            "WebhookEndpointCreate".into(),
            json!({
                "type": "object",
                "required": ["url"],
                "additionalProperties": false,
                "properties": {
                    "url": url_schema(),
                    "events": events,
                    "description": description_schema(),
                },
            }),
        ),
        (
            "WebhookEndpointUpdate".into(),
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "url": url_schema(),
                    "events": events_schema(&EVENTS),
                    "description": description_schema(),
                    "enabled": { "type": "boolean" },
                },
            }),
        ),
        (
            "WebhookTaskData".into(),
            json!({
                "description": "The task as GET /api/v1/tasks/{id} shows it, without `input`; its \
                    `output` is left out past `webhooks.max_output_bytes` (`output_omitted: true`: \
                    fetch it), and from `task.running`. A task deleted before its event was sent \
                    is `{id, mode, deleted: true}`.",
                "anyOf": [
                    {
                        "allOf": [{ "$ref": "#/components/schemas/Task" }],
                        "properties": { "output_omitted": { "const": true } },
                    },
                    {
                        "type": "object",
                        "required": ["id", "mode", "deleted"],
                        "properties": {
                            "id": { "type": "string" },
                            "mode": { "type": "string", "enum": ["live", "test"] },
                            "deleted": { "const": true },
                        },
                    },
                ],
            }),
        ),
        (
            "WebhookTaskEvent".into(),
            json!({
                "description": format!("The message of a task's event. {headers_note}"),
                "type": "object",
                "required": ["type", "timestamp", "data"],
                "properties": {
                    "type": { "type": "string", "enum": TASK_EVENTS },
                    "timestamp": { "type": "string", "format": "date-time", "description": "When the event happened (RFC 3339)." },
                    "data": { "$ref": "#/components/schemas/WebhookTaskData" },
                },
            }),
        ),
        (
            "WebhookTestEvent".into(),
            json!({
                "description": format!("The message of POST /webhook_endpoints/{{id}}/test. {headers_note}"),
                "type": "object",
                "required": ["type", "timestamp", "data"],
                "properties": {
                    "type": { "const": "webhook.test" },
                    "timestamp": { "type": "string", "format": "date-time" },
                    "data": {
                        "type": "object",
                        "required": ["endpoint_id", "mode"],
                        "properties": {
                            "endpoint_id": { "type": "string", "pattern": id_pattern("whe_") },
                            "mode": { "type": "string", "enum": ["live", "test"] },
                        },
                    },
                },
            }),
        ),
    ]
}

/// One message of the `webhooks` section: what a receiver gets for `event`.
fn message(event: &str, summary: &str, schema: &str) -> Value {
    let header = |name: &str, description: &str, schema: Value| json!({ "name": name, "in": "header", "required": true, "description": description, "schema": schema });
    json!({
        "post": {
            "summary": summary,
            "operationId": format!("webhook_{}", event.replace('.', "_")),
            "tags": ["webhooks"],
            "description": "POST with `content-type: application/json` and `user-agent: \
                Taskgate-Webhooks/<version>`. Redirects are not followed. Failed attempts are \
                retried on `webhooks.retry_schedule`; the same `webhook-id` on every attempt and \
                replay, so deduplicate on it.",
            "parameters": [
                header("webhook-id", "`msg_…`: the event's id, the same on every attempt and replay.", json!({"type": "string"})),
                header("webhook-timestamp", "Unix seconds of this attempt; refuse one more than 5 minutes away.", json!({"type": "string", "pattern": "^[0-9]+$"})),
                header("webhook-signature", "`v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\">`; several, separated by spaces, while a secret rotation overlaps.", json!({"type": "string"})),
            ],
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
            },
            "responses": {
                "2XX": { "description": "Received. Any other status, a time-out (`webhooks.timeout_ms`) or a connection error is a failed attempt." },
                "410": { "description": "Gone: the endpoint is disabled (a call's own webhook: the event is not sent again)." },
            },
        }
    })
}

/// Adds what the attributes cannot say: the request bodies, the messages
/// (`webhooks`) and their schemas.
pub(super) fn add(doc: &mut Value) {
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.extend(components());
    }
    let reference = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    doc["paths"]["/api/v1/webhook_endpoints"]["post"]["requestBody"] =
        request_body(reference("WebhookEndpointCreate"));
    doc["paths"]["/api/v1/webhook_endpoints/{id}"]["patch"]["requestBody"] =
        request_body(reference("WebhookEndpointUpdate"));
    doc["webhooks"] = json!({
        "task.running": message("task.running", "A task started running", "WebhookTaskEvent"),
        "task.succeeded": message("task.succeeded", "A task succeeded", "WebhookTaskEvent"),
        "task.failed": message("task.failed", "A task failed", "WebhookTaskEvent"),
        "task.cancelled": message("task.cancelled", "A task was cancelled", "WebhookTaskEvent"),
        "webhook.test": message("webhook.test", "A test event (POST /webhook_endpoints/{id}/test)", "WebhookTestEvent"),
    });
}

/// The schema of a webhooks operation's parameter as the handlers check it;
/// `None`: not one of theirs.
pub(super) fn param_schema(path: &str, place: &str, name: &str) -> Option<Value> {
    let endpoints = path.starts_with("/api/v1/webhook_endpoints");
    let deliveries = path.starts_with("/api/v1/webhook_deliveries");
    if !endpoints && !deliveries {
        return None;
    }
    let prefix = if endpoints { "whe_" } else { "whd_" };
    Some(match (place, name) {
        ("path", "id") | ("query", "cursor") => {
            json!({"type": "string", "pattern": id_pattern(prefix)})
        }
        ("query", "endpoint_id") => json!({"type": "string", "pattern": id_pattern("whe_")}),
        ("query", "task_id") => json!({"type": "string", "pattern": id_pattern("task_")}),
        ("query", "status") => {
            json!({"type": "string", "enum": ["pending", "succeeded", "failed", "exhausted"]})
        }
        _ => return None,
    })
}
