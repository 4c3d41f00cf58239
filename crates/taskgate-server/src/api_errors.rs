//! The services' errors in the contract's error table: the one place the
//! HTTP doors (`/api/v1`, and through it `/openai/v1`) give them a status, a
//! code and their words. The dashboard words them in `dashboard/words.rs`,
//! the CLI in its `operator.rs`.

use axum::http::StatusCode;
use serde_json::Value;
use taskgate_core::Transition;

use crate::error::ApiError;
use crate::service::calls::CallError;
use crate::service::tasks::TaskError;
use crate::service::webhooks::WebhookError;

impl ApiError {
    /// A tasks service error about the task `id`, as the client wrote it.
    pub fn of_task(e: TaskError, id: &str) -> Self {
        match e {
            TaskError::NotFound(_) => ApiError::task_not_found(id),
            e => e.into(),
        }
    }
}

impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::NotPermitted(api) => ApiError::forbidden(
                "insufficient_permissions",
                format!("This API key may not call the API {api:?}."),
            ),
            CallError::InvalidField { param, message } => ApiError::invalid_field(&param, message),
            CallError::UnknownApi(slug) => ApiError::api_not_found(&slug),
            CallError::InvalidInput {
                param,
                message,
                violations,
            } => {
                let e = ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
                    .with_param(param);
                if violations.is_empty() {
                    return e;
                }
                let details = violations
                    .into_iter()
                    .map(|v| serde_json::json!({ "path": v.path, "message": v.message }))
                    .collect();
                e.with_details(Value::Array(details))
            }
            CallError::OptionNotAllowed { param, message }
            | CallError::Unsupported { param, message } => {
                ApiError::new(StatusCode::BAD_REQUEST, "unsupported_parameter", message)
                    .with_param(param)
            }
            CallError::SpendLimitReached { limit_micros } => ApiError::forbidden(
                "usage_limit_exceeded",
                format!(
                    "This account has reached its monthly spend limit of {} USD.",
                    crate::views::usd_limit(limit_micros)
                ),
            ),
            CallError::IdempotencyInProgress => ApiError::conflict(
                "idempotency_in_progress",
                "A request with this Idempotency-Key is still being answered. Retry later.",
            ),
            CallError::IdempotencyKeyReused => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "This Idempotency-Key was used with a different request body.",
            ),
            CallError::TaskLost => ApiError::storage_unavailable(),
            CallError::Stopped => ApiError::internal(),
            CallError::Busy => ApiError::unavailable("Token counting is busy. Retry shortly.")
                .with_header("retry-after", "1"),
            CallError::Store(e) => e.into(),
        }
    }
}

impl From<TaskError> for ApiError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::NotFound(id) => ApiError::task_not_found(&id.to_string()),
            TaskError::NotCancellable(status) => ApiError::conflict(
                "task_not_cancellable",
                format!(
                    "The task has already {status}; only {} tasks can be cancelled.",
                    Transition::Cancel
                        .from()
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ),
            TaskError::Store(e) => e.into(),
        }
    }
}

impl From<WebhookError> for ApiError {
    fn from(e: WebhookError) -> Self {
        match e {
            WebhookError::EndpointNotFound(id) => ApiError::not_found(
                "webhook_endpoint_not_found",
                format!("No webhook endpoint with id {:?}.", id.to_string()),
            ),
            WebhookError::DeliveryNotFound(id) => ApiError::not_found(
                "webhook_delivery_not_found",
                format!("No webhook delivery with id {:?}.", id.to_string()),
            ),
            WebhookError::InvalidUrl { message } => {
                ApiError::invalid_field("url", capitalized(&message))
            }
            WebhookError::InvalidEvents { message } => {
                ApiError::invalid_field("events", capitalized(&message))
            }
            e @ WebhookError::DescriptionTooLong => {
                ApiError::invalid_field("description", capitalized(&e.to_string()))
            }
            WebhookError::TooManyEndpoints => ApiError::conflict(
                "too_many_webhook_endpoints",
                format!(
                    "This account has {} webhook endpoints of this mode, the most it may hold. Delete one first.",
                    crate::service::webhooks::MAX_ENDPOINTS
                ),
            ),
            WebhookError::Store(e) => e.into(),
        }
    }
}

/// A service's sentence as the contract's messages are written.
fn capitalized(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}
