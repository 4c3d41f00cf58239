//! The one error table clients see. Every failure becomes an [`ApiError`]; its
//! `IntoResponse` hands the error to the envelope layer, which writes it.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Serialize)]
pub struct ErrorDetail {
    pub path: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub details: Option<Box<Value>>,
    /// Boxed: most errors carry none, and a small error keeps `Result`s small.
    pub headers: Option<Box<HeaderMap>>,
}

/// The error as the envelope layer receives it, in the response's extensions.
#[derive(Debug, Clone)]
pub struct ErrorBody(pub ApiError);

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            param: None,
            details: None,
            headers: None,
        }
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers_mut().insert(name, v);
        }
        self
    }

    pub fn headers_mut(&mut self) -> &mut HeaderMap {
        self.headers.get_or_insert_with(Default::default)
    }

    /// The `type` of the contract's error table, fixed by status.
    pub fn error_type(&self) -> &'static str {
        error_type_of(self.status)
    }

    // Constructors, one per row of the table.

    pub fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_json", message)
    }
    pub fn invalid_field(param: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_field", message).with_param(param)
    }
    pub fn invalid_parameter(param: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_parameter", message).with_param(param)
    }
    pub fn unauthorized(code: &'static str, message: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message).with_header("www-authenticate", "Bearer")
    }
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "An internal error occurred. Quote the request id if you report it.",
        )
    }
    pub fn unavailable(message: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            message,
        )
    }
    /// The rate limiter's Redis cannot be reached now (and the setting is to
    /// refuse); it comes back by itself.
    pub fn rate_limiter_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "rate_limiter_unavailable",
            "The rate limiter cannot be reached just now. Retry shortly.",
        )
        .with_header("retry-after", "1")
    }
    /// The database cannot be reached now (the contract's 503
    /// `storage_unavailable`); it comes back by itself.
    pub fn storage_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            "Storage is unavailable. Try again shortly.",
        )
        .with_header("retry-after", "1")
    }
    pub fn task_not_found(id: &str) -> Self {
        let shown: String = id.chars().take(64).collect();
        Self::not_found("task_not_found", format!("No task with id {shown:?}."))
    }
    pub fn api_not_found(slug: &str) -> Self {
        let shown: String = slug.chars().take(64).collect();
        Self::not_found("api_not_found", format!("No API with slug {shown:?}.")).with_param("api")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        if let Some(h) = &self.headers {
            response.headers_mut().extend((**h).clone());
        }
        response.extensions_mut().insert(ErrorBody(self));
        response
    }
}

/// Storage failures are logged with the request and answered without detail:
/// `503 storage_unavailable` with `Retry-After` when the database cannot
/// serve just now (the store classifies its drivers' errors by SQLSTATE
/// class and kind: lost, shutting down, out of connections, disk or memory,
/// busy), `500` for the rest (a bug or broken data).
impl From<taskgate_store::StoreError> for ApiError {
    fn from(e: taskgate_store::StoreError) -> Self {
        if e.is_unavailable() {
            tracing::error!(error = %e, "storage unavailable");
            ApiError::storage_unavailable()
        } else {
            tracing::error!(error = %e, "storage error");
            ApiError::internal()
        }
    }
}

/// The `type` of the contract's error table for a status.
pub fn error_type_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        429 => "rate_limit_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
