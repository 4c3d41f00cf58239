//! The documented operations, each a function that exists for its
//! attribute, and the document they make ([`ApiDoc`]).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::webhooks::{
    __path_webhook_deliveries_list, __path_webhook_delivery_get, __path_webhook_delivery_retry,
    __path_webhook_endpoint_create, __path_webhook_endpoint_delete, __path_webhook_endpoint_get,
    __path_webhook_endpoint_rotate_secret, __path_webhook_endpoint_secret,
    __path_webhook_endpoint_test, __path_webhook_endpoint_update, __path_webhook_endpoints_list,
    __path_webhooks_secret, __path_webhooks_secret_rotate,
};
use super::wire::{
    ApiDetailsEnvelope, ApiListEnvelope, ErrorEnvelope, TaskDetailsEnvelope, TaskEnvelope,
    TaskListEnvelope,
};

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
        (status = 400, description = "invalid_json, invalid_field, invalid_input, invalid_parameter, unsupported_parameter (an input option the API does not pass on, or what a chat API's provider cannot carry)", body = ErrorEnvelope),
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
/// Server-Sent Events, in the order generated: `event: delta` with data `{"text": "…"}`
/// for each piece of a chat task's text, `event: reasoning` (the same) for its
/// reasoning (with `"text": ""` and a `signature` where the provider signs the
/// reasoning so far, or `redacted` for a block it gives encrypted only),
/// `event: tool_call` with data `{index, id, name, arguments_delta}` for each
/// fragment of a tool call (`id` and `name` on an index's first), then `event: done`
/// with the task object, and the stream ends. A
/// finished task answers with its `done` event at once. A key holds a limited number of
/// streams open at once; a stream that reaches its longest duration ends with
/// `event: expired` instead (the task goes on: reconnect to follow it further).
#[utoipa::path(get, path = "/api/v1/tasks/{id}/stream", tag = "tasks",
    params(("id" = String, Path, description = "task_…")),
    responses(
        (status = 200, description = "The event stream: `delta`, `reasoning` and `tool_call` events, then `done` (or `expired`)"),
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
    paths(call_create, call_status, tasks_list, task_details, task_cancel, task_stream, apis_list, api_details,
        webhook_endpoint_create, webhook_endpoints_list, webhook_endpoint_get, webhook_endpoint_update,
        webhook_endpoint_delete, webhook_endpoint_secret, webhook_endpoint_rotate_secret,
        webhook_endpoint_test, webhooks_secret, webhooks_secret_rotate, webhook_deliveries_list,
        webhook_delivery_get, webhook_delivery_retry),
    modifiers(&BearerAuth),
    security(("api_key" = [])),
    tags(
        (name = "tasks", description = "Create, follow, list and cancel tasks"),
        (name = "apis", description = "The catalog of AI APIs"),
        (name = "webhooks", description = "Endpoints that receive tasks' events, their signing \
            secrets, and the delivery log (the messages themselves: the document's `webhooks`)"),
    )
)]
pub(super) struct ApiDoc;
