//! What the operations' attributes cannot say, added to the document as
//! JSON: the links from a created task, the events of a task's stream, the
//! answers every authenticated operation can give, the rate-limit headers,
//! and the parameters' constraints as the handlers check them.

use serde_json::{Value, json};
use taskgate_core::IdempotencyKey;

use crate::query::cursor;

/// Where a created task's id leads (OpenAPI links: clients and testers follow
/// them from POST /call to the task's other operations).
pub(super) fn task_links() -> Value {
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

/// The data of a chat task's stream events, as components so that clients
/// have types for them: `delta` (`StreamDelta`), `reasoning`
/// (`StreamReasoning`), `tool_call` (`StreamToolCall`); `done`'s is the
/// `Task`.
pub(super) fn stream_data_schemas() -> [(String, Value); 3] {
    [
        (
            "StreamDelta".into(),
            json!({
                "description": "The data of a `delta` event: a piece of a chat task's text.",
                "type": "object",
                "required": ["text"],
                "properties": { "text": { "type": "string" } },
            }),
        ),
        (
            "StreamReasoning".into(),
            json!({
                "description": "The data of a `reasoning` event: a piece of a chat task's \
                    reasoning; or, with `text` empty, the provider's `signature` over the \
                    reasoning so far, or a block it gives encrypted only (`redacted`).",
                "type": "object",
                "required": ["text"],
                "properties": {
                    "text": { "type": "string" },
                    "signature": { "type": "string" },
                    "redacted": { "type": "string" },
                },
            }),
        ),
        (
            "StreamToolCall".into(),
            json!({
                "description": "The data of a `tool_call` event: a fragment of the tool call at \
                    `index` of a chat task's output (`ChatToolCall`).",
                "type": "object",
                "required": ["index", "arguments_delta"],
                "properties": {
                    "index": { "type": "integer", "minimum": 0 },
                    "id": { "type": "string", "description": "On the first fragment of an index only." },
                    "name": { "type": "string", "description": "On the first fragment of an index only." },
                    "arguments_delta": { "type": "string", "description": "The fragments of an index joined are the call's arguments as JSON text." },
                },
            }),
        ),
    ]
}

/// One event of GET /tasks/{id}/stream (OpenAPI 3.1: the schema of an event
/// stream describes each event).
pub(super) fn stream_event_schema() -> Value {
    json!({
        "type": "object",
        "required": ["event", "data"],
        "additionalProperties": false,
        "properties": {
            "event": { "type": "string", "enum": ["delta", "reasoning", "tool_call", "done", "expired"] },
            "data": { "type": "string", "contentMediaType": "application/json" },
        },
        "oneOf": [
            {
                "properties": {
                    "event": { "const": "delta" },
                    "data": { "contentSchema": { "$ref": "#/components/schemas/StreamDelta" } },
                },
            },
            {
                "properties": {
                    "event": { "const": "reasoning" },
                    "data": { "contentSchema": { "$ref": "#/components/schemas/StreamReasoning" } },
                },
            },
            {
                "properties": {
                    "event": { "const": "tool_call" },
                    "data": { "contentSchema": { "$ref": "#/components/schemas/StreamToolCall" } },
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

/// What the attributes cannot say: the answers every authenticated
/// operation can give (the contract's §2, §3 and §6), the rate-limit headers,
/// and the parameters' constraints as the handlers check them.
pub(super) fn exact(doc: &mut Value) {
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
                    constrain(path, param);
                }
                if method == "get" && path == "/api/v1/tasks" {
                    params.push(task_page_param());
                }
            }
        }
    }
}

/// A parameter's schema as the handlers check it.
fn constrain(path: &str, param: &mut Value) {
    let name = param["name"].as_str().unwrap_or_default().to_owned();
    let place = param["in"].as_str().unwrap_or_default();
    if let Some(schema) = super::webhooks::param_schema(path, place, &name) {
        param["schema"] = schema;
        return;
    }
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
