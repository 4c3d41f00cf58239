//! The envelope: every response written under this layer becomes
//! `{success, data, error?, meta: {request_id, latency_ms}}` with an
//! `X-Request-Id` header, including the framework's own rejections.
//!
//! Handlers return [`Data`] (already serialized JSON) or an `ApiError`; this
//! layer adds `meta` once the handler is done, so `latency_ms` covers the
//! whole request. It also records the request metrics.

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::FutureExt;
use serde::Serialize;
use taskgate_core::RequestId;
use taskgate_core::trace::{ActiveSpan, Scope};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use crate::telemetry::spans;

/// A successful payload: serialized JSON for `data`.
pub struct Data {
    pub status: StatusCode,
    pub json: Bytes,
}

impl Data {
    pub fn ok<T: Serialize>(value: &T) -> Result<Self, ApiError> {
        Self::with_status(StatusCode::OK, value)
    }

    pub fn with_status<T: Serialize>(status: StatusCode, value: &T) -> Result<Self, ApiError> {
        let json = serde_json::to_vec(value).map_err(|e| {
            tracing::error!(error = %e, "cannot serialize a response");
            ApiError::internal()
        })?;
        Ok(Self {
            status,
            json: Bytes::from(json),
        })
    }
}

#[derive(Clone)]
struct DataBody(Bytes);

/// Marks a response that is not enveloped (the OpenAPI document, /metrics, /docs).
#[derive(Clone, Copy)]
pub struct Raw;

impl IntoResponse for Data {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(DataBody(self.json));
        response
    }
}

pub async fn envelope(
    State(app): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    // The request's id, for handlers and logs.
    let request_id = RequestId::new();
    request.extensions_mut().insert(request_id);
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    // Traced: the request's span, the scope its work (and this layer's) runs
    // in; with JSON logs, the scope that puts its id on its lines. Else
    // neither is paid for.
    let span = app
        .telemetry
        .tracer
        .as_ref()
        .filter(|_| !spans::UNTRACED_ROUTES.contains(&route.as_str()))
        .map(|t| spans::request_span(t, &request, &route));
    let scope = app.telemetry.scoped.then(|| Scope {
        span: span.as_ref().map(|s| s.context().clone()),
        request_id: Some(request_id),
    });
    let served = serve(request, next, request_id, route, started, span);
    match scope {
        Some(scope) => scope.run(served).await,
        None => served.await,
    }
}

async fn serve(
    request: Request,
    next: Next,
    request_id: RequestId,
    route: String,
    started: Instant,
    span: Option<ActiveSpan>,
) -> Response {
    let method = request.method().clone();
    // A panic in a handler is a bug; the client still gets the contract's 500.
    let mut response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(r) => r,
        Err(_) => {
            tracing::error!(request_id = %request_id, "a handler panicked");
            ApiError::internal().into_response()
        }
    };
    let status = response.status();

    if response.extensions().get::<Raw>().is_none() {
        let payload = if let Some(DataBody(json)) = response.extensions_mut().remove::<DataBody>() {
            Payload::Data(json)
        } else if let Some(ErrorBody(err)) = response.extensions_mut().remove::<ErrorBody>() {
            if err.status.is_server_error() {
                tracing::warn!(request_id = %request_id, code = err.code, "request failed");
            }
            Payload::Error(err)
        } else {
            Payload::Error(framework_error(status))
        };
        response = write(response, payload, request_id, started);
    }
    if let Ok(v) = HeaderValue::from_str(&request_id.to_string()) {
        response.headers_mut().insert("x-request-id", v);
    }
    // A body refused as too large was not read to its end, so the connection
    // cannot carry another request: say so, or a client that keeps it for
    // the next one finds it closed under that request.
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            HeaderValue::from_static("close"),
        );
    }
    crate::metrics::record_request(&method, &route, response.status(), started.elapsed());
    tracing::debug!(
        request_id = %request_id,
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        "request served"
    );
    if let Some(span) = span {
        let caller = response.extensions().get::<spans::Caller>().copied();
        spans::end_request(span, response.status().as_u16(), request_id, caller);
    }
    response
}

enum Payload {
    Data(Bytes),
    Error(ApiError),
}

/// Turns a response the framework made on its own (no payload) into the
/// contract's error.
pub(crate) fn framework_error(status: StatusCode) -> ApiError {
    match status.as_u16() {
        404 => ApiError::not_found("route_not_found", "No such route."),
        405 => ApiError::new(
            status,
            "method_not_allowed",
            "This route does not accept that method.",
        ),
        413 => ApiError::new(
            status,
            "payload_too_large",
            "The request body is too large.",
        ),
        400 | 415 | 422 => ApiError::invalid_json("The request body is not valid JSON."),
        s if s >= 500 => ApiError::internal(),
        _ => ApiError::new(
            status,
            "invalid_request",
            "The request could not be processed.",
        ),
    }
}

fn write(
    response: Response,
    payload: Payload,
    request_id: RequestId,
    started: Instant,
) -> Response {
    let (mut parts, _) = response.into_parts();
    // The data, and room for the envelope around it: one allocation.
    let data_len = match &payload {
        Payload::Data(json) => json.len(),
        Payload::Error(_) => 0,
    };
    let mut body: Vec<u8> = Vec::with_capacity(data_len + 256);
    match payload {
        Payload::Data(json) => {
            body.extend_from_slice(br#"{"success":true,"data":"#);
            body.extend_from_slice(&json);
        }
        Payload::Error(err) => {
            parts.status = err.status;
            for (name, value) in err.headers.iter().flat_map(|h| h.iter()) {
                parts.headers.insert(name, value.clone());
            }
            let error = ErrorJson {
                r#type: err.error_type(),
                code: err.code,
                message: &err.message,
                param: err.param.as_deref(),
                details: err.details.as_deref(),
            };
            body.extend_from_slice(br#"{"success":false,"data":null,"error":"#);
            // Serializing these plain fields cannot fail.
            body.extend_from_slice(&serde_json::to_vec(&error).unwrap_or_else(|_| b"{}".to_vec()));
        }
    }
    let latency_ms = (started.elapsed().as_micros() as f64 / 10.0).round() / 100.0;
    body.extend_from_slice(br#","meta":{"request_id":""#);
    request_id.with_text(|id| body.extend_from_slice(id.as_bytes()));
    // Writing a number into a Vec cannot fail.
    let _ = write!(body, r#"","latency_ms":{latency_ms}}}}}"#);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    r#type: &'static str,
    code: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a serde_json::Value>,
}

/// A door's middleware that writes the errors of the layers below it
/// (authentication, limits, body reading, the framework's own) in the door's
/// shape `E` instead of the envelope; headers set on the way out (rate
/// limits, `Retry-After`) stay. A door's own answers (marked [`Raw`]) pass.
pub(crate) async fn errors_as<E: From<ApiError> + IntoResponse>(
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    if response.extensions().get::<Raw>().is_some() {
        return response;
    }
    let err = match response.extensions_mut().remove::<ErrorBody>() {
        Some(ErrorBody(err)) => err,
        None if response.status().is_client_error() || response.status().is_server_error() => {
            framework_error(response.status())
        }
        None => return response,
    };
    let (parts, _) = response.into_parts();
    let mut out = E::from(err).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name, value.clone());
        }
    }
    out
}
