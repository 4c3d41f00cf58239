//! GET /anthropic/v1/models and /models/{model}: the chat APIs the key may
//! call, as Anthropic's model objects (the `anthropic` SDKs' `models.list`).
//! A catalog is small: every model comes in one page (`has_more: false`),
//! whatever paging the request asks.

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use taskgate_core::Timestamp;
use taskgate_providers::kinds::Kind;

use super::AnthropicError;
use crate::auth::{ApisRead, Auth};
use crate::catalog::ApiEntry;
use crate::envelope::Raw;
use crate::state::AppState;

/// When this process first listed its models: their `created_at`.
static LISTED: OnceLock<String> = OnceLock::new();

pub(super) async fn list(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<ApisRead>,
) -> Response {
    let data: Vec<Value> = app
        .catalog
        .all()
        .iter()
        .filter(|e| is_model(e) && principal.may_call(e.slug.as_str()))
        .map(|e| model_object(e))
        .collect();
    let first = data.first().map(|m| m["id"].clone());
    let last = data.last().map(|m| m["id"].clone());
    raw(json!({"data": data, "has_more": false, "first_id": first, "last_id": last}))
}

pub(super) async fn get(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<ApisRead>,
    Path(model): Path<String>,
) -> Result<Response, AnthropicError> {
    let entry = app
        .catalog
        .get(&model)
        .filter(|e| is_model(e) && principal.may_call(e.slug.as_str()))
        .ok_or_else(|| {
            let shown: String = model.chars().take(64).collect();
            AnthropicError::new(
                StatusCode::NOT_FOUND,
                format!("model: {shown:?} is not a chat API this key may call."),
            )
        })?;
    Ok(raw(model_object(entry)))
}

fn is_model(e: &ApiEntry) -> bool {
    e.spec.kind == Kind::Chat.as_str()
}

fn model_object(e: &ApiEntry) -> Value {
    let created = LISTED.get_or_init(|| Timestamp::now().rfc3339());
    json!({"type": "model", "id": e.slug, "display_name": e.spec.name, "created_at": created})
}

fn raw(body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.extensions_mut().insert(Raw);
    response
}
