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
