//! Outside the API key: health, readiness, metrics, the API reference.

use std::sync::Arc;

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use taskgate_core::key::hash_key;

use crate::envelope::{Data, Raw};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn healthz() -> ApiResult<Data> {
    Data::ok(&json!({ "status": "ok" }))
}

/// Ready when storage answers and, with `redis_url`, Redis does (unless
/// `redis_failure = "open"`, which serves without it). Each is reported on
/// its own in `checks`: `up`, `down` or `not_configured`.
pub async fn readyz(State(app): State<Arc<AppState>>) -> ApiResult<Data> {
    if app.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ApiError::unavailable("The service is shutting down."));
    }
    let (storage, redis) = tokio::join!(app.store.ping(), app.limiter.ping());
    if let Err(e) = &storage {
        tracing::warn!(error = %e, "readiness check failed: storage");
    }
    let up = |ok: bool| if ok { "up" } else { "down" };
    let storage_up = storage.is_ok();
    let redis_state = match redis {
        None => "not_configured",
        Some(ok) => up(ok),
    };
    let needs_redis = app.config.redis_failure == crate::config::RedisFailure::Closed;
    let ready = storage_up && (redis_state != "down" || !needs_redis);
    let checks = json!({ "storage": up(storage_up), "redis": redis_state });
    if ready {
        return Data::ok(&json!({
            "status": "ready",
            "storage": app.store.backend(),
            "checks": checks,
        }));
    }
    let e = if storage_up {
        ApiError::rate_limiter_unavailable()
    } else {
        ApiError::storage_unavailable()
    };
    Err(e.with_details(checks))
}

fn raw(content_type: &'static str, body: impl Into<axum::body::Body>) -> Response {
    let mut r = Response::new(body.into());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.extensions_mut().insert(Raw);
    r
}

/// The Prometheus text. With `metrics_token` set, only for a request that
/// sends it as `Authorization: Bearer <token>`; otherwise the envelope's
/// 401, counted as a failed authentication of the address like a bad key.
pub async fn metrics(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Some(token) = &app.config.metrics_token {
        let ip = app.trusted_proxies.client(peer.ip(), &headers);
        if let Some(retry) = app.auth_failures.blocked(&ip).await {
            return crate::auth::too_many_failures(&app, retry).into_response();
        }
        if let Err(e) = metrics_token_of(&headers, token.expose()) {
            app.auth_failures.record(ip).await;
            return e.into_response();
        }
    }
    raw("text/plain; version=0.0.4", crate::metrics::render())
}

/// Whether `headers` carry `Authorization: Bearer <expected>`, or the 401.
/// The tokens are compared as SHA-256 digests, in constant time: neither
/// the content nor the length of the expected token shows in the timing.
fn metrics_token_of(headers: &HeaderMap, expected: &str) -> ApiResult<()> {
    use subtle::ConstantTimeEq;
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized(
            "missing_authorization",
            "/metrics needs the metrics token: send `Authorization: Bearer <metrics_token>`.",
        )
    })?;
    let malformed = || {
        ApiError::unauthorized(
            "malformed_authorization",
            "The Authorization header must be `Bearer <metrics_token>`.",
        )
    };
    let (scheme, sent) = value
        .to_str()
        .map_err(|_| malformed())?
        .split_once(' ')
        .ok_or_else(malformed)?;
    let sent = sent.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || sent.is_empty() {
        return Err(malformed());
    }
    let (sent, expected) = (hash_key(sent), hash_key(expected));
    if bool::from(sent.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::unauthorized(
            "invalid_metrics_token",
            "The metrics token is not valid.",
        ))
    }
}

/// The OpenAPI document. Without a key, the whole service; with one, what
/// that key may send (checked like any key: a bad one is 401 and counts as a
/// failed authentication).
pub async fn openapi(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if !headers.contains_key(header::AUTHORIZATION) {
        return raw("application/json", app.openapi.for_key(&app.catalog, None));
    }
    let ip = app.trusted_proxies.client(peer.ip(), &headers);
    match crate::auth::identified(&app, ip, &headers).await {
        Ok((key, _)) => raw(
            "application/json",
            app.openapi.for_key(&app.catalog, Some(&key)),
        ),
        Err(e) => e.into_response(),
    }
}

pub async fn docs() -> Response {
    raw("text/html; charset=utf-8", crate::openapi::DOCS_HTML)
}

pub async fn not_found() -> impl IntoResponse {
    ApiError::not_found(
        "route_not_found",
        "No such route. The API lives under /api/v1.",
    )
}
