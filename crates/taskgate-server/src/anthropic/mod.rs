//! `/anthropic/v1`: Anthropic's Messages API, so the `anthropic` SDKs and
//! tools built on them (Claude Code, with `ANTHROPIC_BASE_URL`) run through
//! Taskgate. `model` names a Taskgate `chat` API; every request is a task
//! made as POST /api/v1/call makes one (the same authentication, limits,
//! spend, test mode and storage); its id is in the `X-Taskgate-Task-Id`
//! header. The key is `x-api-key` or `Authorization: Bearer`;
//! `anthropic-version` is accepted whatever it says. Errors are in
//! Anthropic's shape, `{"type": "error", "error": {type, message}}`.

mod messages;
mod models;
mod request;
mod stream;

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use taskgate_core::{TaskId, TaskStatus};
use taskgate_store::TaskRecord;

use crate::envelope::Raw;
use crate::error::ApiError;
use crate::state::AppState;

pub fn router(app: Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/messages", post(messages::create))
        .route("/messages/count_tokens", post(messages::count_tokens))
        .route("/models", axum::routing::get(models::list))
        .route("/models/{model}", axum::routing::get(models::get))
        .route_layer(middleware::from_fn_with_state(
            app,
            crate::auth::authenticate,
        ))
        .fallback(not_found)
        .layer(middleware::from_fn(
            crate::envelope::errors_as::<AnthropicError>,
        ))
        .layer(middleware::from_fn(x_api_key))
        .layer(middleware::from_fn(request_id))
}

/// Anthropic's `request-id` header on every answer (its SDKs show it as a
/// response's `request_id`): the request's Taskgate id, as `x-request-id`.
async fn request_id(request: Request, next: Next) -> Response {
    let id = request
        .extensions()
        .get::<taskgate_core::RequestId>()
        .map(ToString::to_string);
    let mut response = next.run(request).await;
    if let Some(v) = id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert("request-id", v);
    }
    response
}

/// An error as Anthropic's API writes it.
#[derive(Debug)]
pub struct AnthropicError {
    status: StatusCode,
    message: String,
    headers: Option<Box<HeaderMap>>,
}

impl AnthropicError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            headers: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// A request field Taskgate's `chat` kind cannot carry.
    fn unsupported(field: &str, what: &str) -> Self {
        Self::invalid(format!(
            "{field}: {what} is not supported by Taskgate's Anthropic-compatible endpoint."
        ))
    }

    /// The failure of a task that ended without succeeding.
    fn of_task(task: &TaskRecord) -> Self {
        let (code, message) = match &task.error {
            Some(e) => (e.code.as_str(), e.message.as_str()),
            None if task.status == TaskStatus::Cancelled => ("task_cancelled", "cancelled"),
            None => ("internal_error", "The task did not finish."),
        };
        let status = match code {
            "rate_limited_upstream" => StatusCode::TOO_MANY_REQUESTS,
            "interrupted" => StatusCode::SERVICE_UNAVAILABLE,
            "upstream_timeout" | "timeout" => StatusCode::GATEWAY_TIMEOUT,
            "task_cancelled" => StatusCode::CONFLICT,
            "internal_error" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_GATEWAY,
        };
        let mut e = Self::new(
            status,
            format!("Task {} failed ({code}): {message}", task.id),
        );
        e.headers = Some(Box::new(task_header(task.id)));
        e
    }

    /// Anthropic's error type of a status.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            500..=599 => "api_error",
            _ => "invalid_request_error",
        }
    }

    /// The `error` event of a stream, and the body of an answer.
    fn body(&self) -> serde_json::Value {
        json!({"type": "error", "error": {"type": self.kind(), "message": self.message}})
    }
}

impl From<ApiError> for AnthropicError {
    /// Anthropic's errors have no field of their own for the parameter: it
    /// leads the message, with the request's names (`api` is `model`).
    fn from(e: ApiError) -> Self {
        let message = match e.param.as_deref() {
            Some(_) if e.code == "invalid_input" => e
                .message
                .strip_prefix("input.")
                .unwrap_or(&e.message)
                .to_owned(),
            Some(p) => format!("{}: {}", if p == "api" { "model" } else { p }, e.message),
            None => e.message,
        };
        Self {
            status: e.status,
            message,
            headers: e.headers,
        }
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, "Anthropic-compatible request failed");
        }
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(h) = self.headers {
            response.headers_mut().extend(*h);
        }
        response.extensions_mut().insert(Raw);
        response
    }
}

/// Anthropic's SDKs send the key as `x-api-key`: it is the bearer key the
/// authentication layer reads, unless an `Authorization` header is sent.
async fn x_api_key(mut request: Request, next: Next) -> Response {
    let headers = request.headers_mut();
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok())
        && let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", key.trim()))
    {
        headers.insert(header::AUTHORIZATION, v);
    }
    next.run(request).await
}

async fn not_found() -> AnthropicError {
    AnthropicError::new(
        StatusCode::NOT_FOUND,
        "No such route. Taskgate's Anthropic-compatible endpoint serves POST /v1/messages, \
         POST /v1/messages/count_tokens and GET /v1/models.",
    )
}

fn task_header(id: TaskId) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
        h.insert("x-taskgate-task-id", v);
    }
    h
}
