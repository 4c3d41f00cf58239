//! The OpenAPI 3.1 document, generated from the types below and the live
//! catalog (each API's input and output schema is added as a component), and
//! the `/docs` page that renders it.
//!
//! The wire types here are the documented shape of what `views.rs` and the
//! handlers write; the black-box tests check both against each other.

#![allow(dead_code)] // the doc-only functions exist for their attributes

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use std::sync::Arc;

use bytes::Bytes;
use taskgate_core::task::error_code;
use taskgate_core::{IdempotencyKey, Mode, SandboxOutcome};

use taskgate_store::KeyRecord;

use crate::catalog::{ApiEntry, ApiView, Catalog};
use crate::query::cursor;
use taskgate_core::task::{
    METADATA_MAX_KEY_CHARS, METADATA_MAX_KEYS, METADATA_MAX_VALUE_CHARS, SANDBOX_MAX_DELAY_MS,
};

#[derive(ToSchema)]
struct Meta {
    /// `req_…`, also in the `X-Request-Id` header.
    request_id: String,
    /// The server's own processing time.
    latency_ms: f64,
}

#[derive(ToSchema, Serialize)]
struct Usage {
    units: i64,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    /// Decimal USD with six decimals; test-mode and unsuccessful tasks cost nothing.
    #[schema(example = "0.000100")]
    cost_usd: String,
}

#[derive(ToSchema, Serialize)]
struct TaskError {
    /// `upstream_error`, `upstream_timeout`, `invalid_upstream_response`, `timeout`, `interrupted`, `internal_error`.
    code: String,
    message: String,
    upstream_status: Option<u16>,
}

#[derive(ToSchema, Serialize)]
#[schema(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
enum Status {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// A task.
#[derive(ToSchema, Serialize)]
struct Task {
    #[schema(example = "task_01JD2W3KX7…")]
    id: String,
    #[schema(example = "task")]
    object: String,
    /// The API's slug.
    api: String,
    /// `live` or `test`.
    mode: String,
    status: Status,
    /// The API's output (its `output_schema`); absent from list items.
    #[schema(value_type = Option<Object>)]
    output: Option<Value>,
    error: Option<TaskError>,
    usage: Usage,
    #[schema(value_type = Object)]
    metadata: Value,
    created_at: String,
    started_at: Option<String>,
    completed_at: Option<String>,
    duration_ms: Option<i64>,
}

#[derive(ToSchema, Serialize)]
struct Event {
    status: Status,
    at: String,
    message: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct Attempt {
    /// `builtin`, `sandbox`, or an upstream provider.
    provider: String,
    target: String,
    started_at: String,
    duration_ms: i64,
    outcome: String,
    http_status: Option<u16>,
}

/// A task with its input and history (GET /tasks/{id}).
#[derive(ToSchema, Serialize)]
struct TaskDetails {
    #[serde(flatten)]
    task: Task,
    #[schema(value_type = Object)]
    input: Value,
    key_id: String,
    idempotency_key: Option<String>,
    events: Vec<Event>,
    attempts: Vec<Attempt>,
}

#[derive(ToSchema)]
struct TaskList {
    object: String,
    items: Vec<Task>,
    has_more: bool,
    /// Pass as `cursor` for the next page.
    next_cursor: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct Pricing {
    /// `call` or `1k_tokens`.
    unit: String,
    price_usd: Option<String>,
    input_price_usd: Option<String>,
    output_price_usd: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct ApiSummary {
    slug: String,
    object: String,
    name: String,
    description: String,
    /// `chat`, `embedding`, `image_generation`, `transcription`, `classification`, `tokenization`.
    kind: String,
    provider: String,
    /// `available`, `degraded`, `unavailable`.
    status: String,
    modes: Vec<String>,
    pricing: Pricing,
}

#[derive(ToSchema, Serialize)]
struct Limits {
    timeout_ms: u64,
    max_input_bytes: u64,
}

#[derive(ToSchema, Serialize)]
struct Example {
    #[schema(value_type = Object)]
    input: Value,
    #[schema(value_type = Object)]
    output: Value,
}

#[derive(ToSchema, Serialize)]
struct ApiDetails {
    #[serde(flatten)]
    summary: ApiSummary,
    #[schema(value_type = Object)]
    input_schema: Value,
    #[schema(value_type = Object)]
    output_schema: Value,
    examples: Vec<Example>,
    limits: Limits,
}

#[derive(ToSchema)]
struct ApiList {
    object: String,
    items: Vec<ApiSummary>,
    has_more: bool,
    next_cursor: Option<String>,
}

#[derive(ToSchema)]
struct ErrorDetail {
    path: String,
    message: String,
}

#[derive(ToSchema)]
struct Error {
    /// Fixed by the status: `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `not_found_error`, `conflict_error`, `rate_limit_error`, `api_error`.
    r#type: String,
    code: String,
    message: String,
    param: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    details: Option<Value>,
}

/// Every answer is this envelope.
#[derive(ToSchema)]
struct ErrorEnvelope {
    success: bool,
    #[schema(value_type = Option<Object>)]
    data: Option<Value>,
    error: Error,
    meta: Meta,
}

macro_rules! envelope {
    ($name:ident, $data:ty) => {
        #[derive(ToSchema)]
        struct $name {
            success: bool,
            data: $data,
            meta: Meta,
        }
    };
}
envelope!(TaskEnvelope, Task);
envelope!(TaskDetailsEnvelope, TaskDetails);
envelope!(TaskListEnvelope, TaskList);
envelope!(ApiListEnvelope, ApiList);
envelope!(ApiDetailsEnvelope, ApiDetails);

/// Create and execute a task
///
/// Sync (default) waits for the task up to the server's sync wait and answers 200 with
/// the finished task, whatever its status; otherwise, and for `async`, 202 with the task as
/// it stands and `Location`. With `Idempotency-Key`, a repeat of the same body within 24 h
/// returns the original answer (header `Idempotent-Replayed: true`).
#[utoipa::path(post, path = "/api/v1/call", tag = "tasks",
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters (spaces inside allowed); scoped to the account and mode.")),
    responses(
        (status = 200, description = "The finished task", body = TaskEnvelope),
        (status = 202, description = "Still running; poll Location", body = TaskEnvelope,
            headers(("Location" = String, description = "/api/v1/call/{id}"))),
        (status = 400, description = "invalid_json, invalid_field, invalid_input, invalid_parameter, unsupported_parameter (an input option the API does not pass on)", body = ErrorEnvelope),
        (status = 401, description = "Authentication failed", body = ErrorEnvelope),
        (status = 403, description = "insufficient_permissions, account_suspended, usage_limit_exceeded", body = ErrorEnvelope),
        (status = 404, description = "api_not_found", body = ErrorEnvelope),
        (status = 409, description = "idempotency_in_progress", body = ErrorEnvelope),
        (status = 413, description = "payload_too_large", body = ErrorEnvelope),
        (status = 422, description = "idempotency_key_reused", body = ErrorEnvelope),
        (status = 429, description = "rate_limit_exceeded", body = ErrorEnvelope),
    ))]
fn call_create() {}

/// The status of a task
#[utoipa::path(get, path = "/api/v1/call/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task_…")),
    responses(
        (status = 200, description = "The task", body = TaskEnvelope),
        (status = 404, description = "task_not_found", body = ErrorEnvelope),
    ))]
fn call_status() {}

/// List tasks (the task history)
///
/// Newest first by default. Cursor pagination is stable: tasks created while paging never
/// make a page repeat or skip an item.
#[utoipa::path(get, path = "/api/v1/tasks", tag = "tasks",
    params(
        ("status" = Option<String>, Query, description = "One status or a comma-separated list"),
        ("api" = Option<String>, Query, description = "An API slug"),
        ("created_after" = Option<String>, Query, description = "RFC 3339"),
        ("created_before" = Option<String>, Query, description = "RFC 3339"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
    ),
    responses(
        (status = 200, description = "A page of tasks, without output", body = TaskListEnvelope),
        (status = 400, description = "invalid_parameter", body = ErrorEnvelope),
    ))]
fn tasks_list() {}

/// The details of a task: input, events and attempts
#[utoipa::path(get, path = "/api/v1/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task_…")),
    responses(
        (status = 200, description = "The task with its history", body = TaskDetailsEnvelope),
        (status = 404, description = "task_not_found", body = ErrorEnvelope),
    ))]
fn task_details() {}

/// Cancel a queued or running task
///
/// The running execution is stopped and its result never written. Cancelling a cancelled
/// task is 200 and changes nothing.
#[utoipa::path(post, path = "/api/v1/tasks/{id}/cancel", tag = "tasks",
    params(("id" = String, Path, description = "task_…")),
    responses(
        (status = 200, description = "The cancelled task", body = TaskEnvelope),
        (status = 404, description = "task_not_found", body = ErrorEnvelope),
        (status = 409, description = "task_not_cancellable", body = ErrorEnvelope),
    ))]
fn task_cancel() {}

/// Follow a task's output as it is generated
///
/// Server-Sent Events: `event: delta` with data `{"text": "…"}` for each piece of a chat
/// task's output, then `event: done` with the task object, and the stream ends. A
/// finished task answers with its `done` event at once. A key holds a limited number of
/// streams open at once; a stream that reaches its longest duration ends with
/// `event: expired` instead (the task goes on: reconnect to follow it further).
#[utoipa::path(get, path = "/api/v1/tasks/{id}/stream", tag = "tasks",
    params(("id" = String, Path, description = "task_…")),
    responses(
        (status = 200, description = "The event stream: `delta` events, then `done` (or `expired`)"),
        (status = 404, description = "task_not_found", body = ErrorEnvelope),
        (status = 429, description = "rate_limit_exceeded, too_many_streams (with Retry-After)", body = ErrorEnvelope),
    ))]
fn task_stream() {}

/// The catalog of APIs this key may call
#[utoipa::path(get, path = "/api/v1/apis", tag = "apis",
    params(
        ("kind" = Option<String>, Query, description = "e.g. classification"),
        ("provider" = Option<String>, Query, description = "e.g. builtin"),
        ("q" = Option<String>, Query, description = "Text search in slug, name and description"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of API summaries", body = ApiListEnvelope),
        (status = 400, description = "invalid_parameter", body = ErrorEnvelope),
    ))]
fn apis_list() {}

/// One API: schemas, examples and limits
#[utoipa::path(get, path = "/api/v1/apis/{slug}", tag = "apis",
    params(("slug" = String, Path, description = "The API's slug")),
    responses(
        (status = 200, description = "The API", body = ApiDetailsEnvelope),
        (status = 404, description = "api_not_found", body = ErrorEnvelope),
    ))]
fn api_details() {}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "api_key",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .description(Some(
                            "tg_… (live), tg_test_… (test), tg_restrict_… (restricted)",
                        ))
                        .build(),
                ),
            );
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Taskgate API",
        version = "1",
        description = "One REST interface to many AI services. Every answer is an envelope \
            `{success, data, error?, meta}` with an `X-Request-Id` header."
    ),
    paths(call_create, call_status, tasks_list, task_details, task_cancel, task_stream, apis_list, api_details),
    modifiers(&BearerAuth),
    security(("api_key" = [])),
    tags(
        (name = "tasks", description = "Create, follow, list and cancel tasks"),
        (name = "apis", description = "The catalog of AI APIs"),
    )
)]
struct ApiDoc;

/// Whom a document is for. A reader without a key sees every API and the
/// test-only `sandbox` field; a key's holder sees exactly what that key may
/// send: its mode's fields and, for a restricted key, its allowed APIs.
#[derive(Clone, Copy, Default)]
pub struct Audience<'a> {
    pub mode: Option<Mode>,
    pub apis: Option<&'a taskgate_core::ApiList>,
}

impl Audience<'_> {
    fn sees(&self, slug: &str) -> bool {
        self.apis.is_none_or(|list| list.contains(slug))
    }

    /// `sandbox` is refused with live and restricted keys (400 `invalid_field`).
    fn may_send_sandbox(&self) -> bool {
        self.mode != Some(Mode::Live)
    }
}

/// The document served at `/api/v1/openapi.json` for `audience`, with each
/// visible API's schemas as components `<slug>.input` and `<slug>.output`
/// and its POST /call body as `<slug>.call`.
pub fn document(catalog: &Catalog, audience: Audience<'_>) -> Vec<u8> {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
    let entries: Vec<_> = catalog
        .all()
        .iter()
        .filter(|e| audience.sees(e.slug.as_str()))
        .collect();
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for entry in &entries {
            let s = &entry.spec;
            schemas.insert(format!("{}.input", s.slug), s.input_schema.clone());
            schemas.insert(format!("{}.output", s.slug), s.output_schema.clone());
            schemas.insert(format!("{}.call", s.slug), call_body(entry, audience));
        }
        schemas.insert("Metadata".into(), metadata_schema());
        if audience.may_send_sandbox() {
            schemas.insert("Sandbox".into(), sandbox_schema());
        }
    }
    doc["paths"]["/api/v1/call"]["post"]["requestBody"] = call_request_body(&entries);
    for code in ["200", "202"] {
        doc["paths"]["/api/v1/call"]["post"]["responses"][code]["links"] = task_links();
    }
    doc["paths"]["/api/v1/tasks/{id}/stream"]["get"]["responses"]["200"]["content"] =
        json!({ "text/event-stream": { "schema": stream_event_schema() } });
    doc["x-taskgate-apis"] = Value::Array(
        entries
            .iter()
            .filter_map(|e| serde_json::to_value(ApiView::new(e)).ok())
            .collect(),
    );
    exact(&mut doc);
    serde_json::to_vec(&doc).unwrap_or_else(|_| b"{}".to_vec())
}

/// POST /call's body: one schema per API, told apart by `api`.
fn call_request_body(entries: &[&Arc<ApiEntry>]) -> Value {
    let reference = |e: &Arc<ApiEntry>| format!("#/components/schemas/{}.call", e.slug);
    let schema = if entries.is_empty() {
        // No API to call: every body is refused (403 for the key's APIs).
        json!({ "not": {} })
    } else {
        json!({
            "oneOf": entries.iter().map(|e| json!({ "$ref": reference(e) })).collect::<Vec<_>>(),
            "discriminator": {
                "propertyName": "api",
                "mapping": entries
                    .iter()
                    .map(|e| (e.slug.as_str().to_owned(), Value::String(reference(e))))
                    .collect::<serde_json::Map<_, _>>(),
            },
        })
    };
    json!({
        "required": true,
        "description": "Unknown fields are refused (400 `invalid_field`).",
        "content": { "application/json": { "schema": schema } },
    })
}

/// The body of a call of one API, as `v1::call` checks it.
fn call_body(entry: &ApiEntry, audience: Audience<'_>) -> Value {
    let s = &entry.spec;
    let mut properties = json!({
        "api": { "type": "string", "enum": [s.slug.as_str()] },
        "input": {
            "$ref": format!("#/components/schemas/{}.input", s.slug),
            "description": format!("At most {} bytes as JSON (larger: 400 `invalid_input`).", s.max_input_bytes),
        },
        "mode": {
            "type": "string",
            "enum": ["sync", "async"],
            "default": "sync",
            "description": "`sync` waits for the task (up to the server's sync wait); `async` answers 202 at once.",
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": s.timeout_ms,
            "default": s.timeout_ms,
            "description": "Execution deadline; at most this API's `limits.timeout_ms`.",
        },
        "metadata": { "$ref": "#/components/schemas/Metadata" },
    });
    if audience.may_send_sandbox() {
        properties["sandbox"] = json!({ "$ref": "#/components/schemas/Sandbox" });
    }
    json!({
        "title": format!("Call {}", s.slug),
        "type": "object",
        "required": ["api", "input"],
        "additionalProperties": false,
        "properties": properties,
    })
}

/// Where a created task's id leads (OpenAPI links: clients and testers follow
/// them from POST /call to the task's other operations).
fn task_links() -> Value {
    let link = |operation: &str, description: &str| {
        json!({
            "operationId": operation,
            "parameters": { "id": "$response.body#/data/id" },
            "description": description,
        })
    };
    json!({
        "GetTask": link("call_status", "The task's status"),
        "GetTaskDetails": link("task_details", "The task with its input, events and attempts"),
        "CancelTask": link("task_cancel", "Cancel the task"),
        "StreamTask": link("task_stream", "Follow the task's output"),
    })
}

/// One event of GET /tasks/{id}/stream (OpenAPI 3.1: the schema of an event
/// stream describes each event).
fn stream_event_schema() -> Value {
    json!({
        "type": "object",
        "required": ["event", "data"],
        "additionalProperties": false,
        "properties": {
            "event": { "type": "string", "enum": ["delta", "done", "expired"] },
            "data": { "type": "string", "contentMediaType": "application/json" },
        },
        "oneOf": [
            {
                "properties": {
                    "event": { "const": "delta" },
                    "data": { "contentSchema": {
                        "type": "object",
                        "required": ["text"],
                        "properties": { "text": { "type": "string" } },
                    } },
                },
            },
            {
                "properties": {
                    "event": { "const": "done" },
                    "data": { "contentSchema": { "$ref": "#/components/schemas/Task" } },
                },
            },
            {
                "properties": {
                    "event": { "const": "expired" },
                    "data": { "contentSchema": {
                        "type": "object",
                        "required": ["task_id", "reason", "max_seconds", "message"],
                        "properties": {
                            "task_id": { "type": "string" },
                            "reason": { "const": "stream_max_seconds" },
                            "max_seconds": { "type": "integer" },
                            "message": { "type": "string" },
                        },
                    } },
                },
            },
        ],
    })
}

fn metadata_schema() -> Value {
    json!({
        "description": "Your own labels, returned with the task. `null` is no metadata.",
        "type": ["object", "null"],
        "maxProperties": METADATA_MAX_KEYS,
        "propertyNames": { "minLength": 1, "maxLength": METADATA_MAX_KEY_CHARS },
        "additionalProperties": { "type": "string", "maxLength": METADATA_MAX_VALUE_CHARS },
    })
}

fn sandbox_schema() -> Value {
    json!({
        "description": "Test keys only (with a live or restricted key: 400 `invalid_field`): \
            simulate a slow, failing or hanging task.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "delay_ms": { "type": "integer", "minimum": 0, "maximum": SANDBOX_MAX_DELAY_MS, "default": 0 },
            "outcome": {
                "type": "string",
                "enum": SandboxOutcome::ALL.map(SandboxOutcome::as_str),
                "default": SandboxOutcome::default().as_str(),
            },
            "error_code": {
                "type": "string",
                "enum": error_code::SIMULATABLE,
                "description": "Only with `outcome: failed`: the task's error code.",
            },
        },
        "anyOf": [
            { "not": { "required": ["error_code"] } },
            { "required": ["outcome"], "properties": { "outcome": { "const": "failed" } } },
        ],
    })
}

/// What the attributes above cannot say: the answers every authenticated
/// operation can give (the contract's §2, §3 and §6), the rate-limit headers,
/// and the parameters' constraints as the handlers check them.
fn exact(doc: &mut Value) {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}
        })
    };
    let rate_headers = json!({
        "RateLimit-Policy": {"description": "The plan's windows, e.g. `\"minute\";q=60;w=60` (limited plans only)", "schema": {"type": "string"}},
        "RateLimit": {"description": "The window closest to exhaustion: `\"minute\";r=17;t=42`", "schema": {"type": "string"}},
        "X-RateLimit-Limit": {"schema": {"type": "integer"}},
        "X-RateLimit-Remaining": {"schema": {"type": "integer"}},
        "X-RateLimit-Reset": {"description": "Unix seconds", "schema": {"type": "integer"}},
        "X-Request-Id": {"schema": {"type": "string"}},
    });
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(ops) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in ops.iter_mut() {
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            for r in responses.values_mut() {
                if let Some(h) = r.as_object_mut() {
                    let headers = h.entry("headers").or_insert_with(|| json!({}));
                    if let (Some(headers), Some(more)) =
                        (headers.as_object_mut(), rate_headers.as_object())
                    {
                        for (k, v) in more {
                            headers.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
            let mut add = |code: &str, description: &str| {
                responses
                    .entry(code.to_owned())
                    .or_insert_with(|| error(description));
            };
            add(
                "401",
                "missing_authorization, malformed_authorization, invalid_api_key, api_key_expired",
            );
            add("403", "insufficient_permissions, account_suspended");
            add("429", "rate_limit_exceeded (with Retry-After)");
            add("500", "internal_error");
            let call = method == "post" && path == "/api/v1/call";
            add(
                "503",
                if call {
                    "service_unavailable, storage_unavailable, server_busy (too many large bodies at once; Retry-After)"
                } else {
                    "service_unavailable, storage_unavailable"
                },
            );
            if call {
                add("408", "request_timeout: the body did not arrive in time");
                add("413", "payload_too_large");
            }
            if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                for param in params.iter_mut() {
                    constrain(param);
                }
                if method == "get" && path == "/api/v1/tasks" {
                    params.push(task_page_param());
                }
            }
        }
    }
}

/// A parameter's schema as the handlers check it.
fn constrain(param: &mut Value) {
    let name = param["name"].as_str().unwrap_or_default().to_owned();
    let status = "(queued|running|succeeded|failed|cancelled)";
    let schema = match (param["in"].as_str(), name.as_str()) {
        (Some("query"), "limit") => {
            json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 20})
        }
        (Some("query"), "status") => {
            json!({"type": "string", "pattern": format!("^ *{status} *(, *{status} *)*$")})
        }
        (Some("query"), "api") => json!({"type": "string", "minLength": 1}),
        (Some("query"), "created_after" | "created_before") => {
            json!({"type": "string", "format": "date-time"})
        }
        (Some("query"), "cursor") => json!({"type": "string", "pattern": cursor::APIS_PATTERN}),
        (Some("path"), "id") => {
            json!({"type": "string", "pattern": "^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$"})
        }
        (Some("path"), "slug") => json!({"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}),
        (Some("header"), "Idempotency-Key") => json!({
            "type": "string",
            "minLength": 1,
            "maxLength": IdempotencyKey::MAX_LEN,
            "pattern": "^[!-~]([ -~]*[!-~])?$",
        }),
        _ => return,
    };
    param["schema"] = schema;
}

/// GET /tasks's `order` and `cursor`, as one object sent as two query
/// parameters (`style: form`, `explode: true`): the only way OpenAPI can say
/// that a cursor remembers its order, so that with a cursor `order` is absent
/// or the cursor's (the other: 400 `invalid_parameter`).
fn task_page_param() -> Value {
    json!({
        "name": "page",
        "in": "query",
        "required": false,
        "style": "form",
        "explode": true,
        "description": "Sent as the query parameters `order` and `cursor`. `order`: `desc` (default, \
            newest first) or `asc`, by creation time. `cursor`: the `next_cursor` of the previous \
            page; it remembers its order, so send no `order` with it, or the same one.",
        "schema": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "order": {"type": "string", "enum": ["desc", "asc"], "default": "desc"},
                "cursor": {"type": "string", "pattern": cursor::TASKS_PATTERN},
            },
            "anyOf": [
                {"not": {"required": ["cursor"]}},
                {
                    "required": ["cursor"],
                    "properties": {"cursor": {"pattern": "^desc_"}, "order": {"const": "desc"}},
                },
                {
                    "required": ["cursor"],
                    "properties": {"cursor": {"pattern": "^asc_"}, "order": {"const": "asc"}},
                },
            ],
        },
    })
}

/// A self-contained page (no CDN, no downloads) that renders the document.
pub const DOCS_HTML: &str = include_str!("docs.html");

/// The documents of keys that see the whole catalog, made once at start;
/// a restricted key's is made when it asks (its APIs are its own).
pub struct Documents {
    anonymous: Bytes,
    live: Bytes,
    test: Bytes,
}

impl Documents {
    pub fn new(catalog: &Catalog) -> Self {
        let of = |mode| Bytes::from(document(catalog, Audience { mode, apis: None }));
        Documents {
            anonymous: of(None),
            live: of(Some(Mode::Live)),
            test: of(Some(Mode::Test)),
        }
    }

    /// The document for the holder of `key` (`None`: a reader without one).
    pub fn for_key(&self, catalog: &Catalog, key: Option<&KeyRecord>) -> Bytes {
        let Some(key) = key else {
            return self.anonymous.clone();
        };
        let mode = key.key_type.mode();
        match (&key.allowed_apis, mode) {
            (Some(apis), _) => Bytes::from(document(
                catalog,
                Audience {
                    mode: Some(mode),
                    apis: Some(apis),
                },
            )),
            (None, Mode::Live) => self.live.clone(),
            (None, Mode::Test) => self.test.clone(),
        }
    }
}
