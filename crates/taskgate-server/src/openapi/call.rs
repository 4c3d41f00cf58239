//! POST /call's body: one schema per API, told apart by `api`, and the
//! components they share (`Metadata`, `Sandbox`).

use std::sync::Arc;

use serde_json::{Value, json};
use taskgate_core::SandboxOutcome;
use taskgate_core::task::{
    METADATA_MAX_KEY_CHARS, METADATA_MAX_KEYS, METADATA_MAX_VALUE_CHARS, SANDBOX_MAX_DELAY_MS,
    error_code,
};

use super::Audience;
use crate::catalog::ApiEntry;

/// POST /call's body: one schema per API, told apart by `api`.
pub(super) fn call_request_body(entries: &[&Arc<ApiEntry>]) -> Value {
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
pub(super) fn call_body(entry: &ApiEntry, audience: Audience<'_>) -> Value {
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
        "webhook": super::webhooks::call_webhook_schema(),
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

pub(super) fn metadata_schema() -> Value {
    json!({
        "description": "Your own labels, returned with the task. `null` is no metadata.",
        "type": ["object", "null"],
        "maxProperties": METADATA_MAX_KEYS,
        "propertyNames": { "minLength": 1, "maxLength": METADATA_MAX_KEY_CHARS },
        "additionalProperties": { "type": "string", "maxLength": METADATA_MAX_VALUE_CHARS },
    })
}

pub(super) fn sandbox_schema() -> Value {
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
