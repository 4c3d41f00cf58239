//! Authentication, tenancy and rate limits for `/api/v1`.
//!
//! The middleware runs the contract's checks in order (401, account 403, 429)
//! and leaves an [`Principal`] in the request; handlers take [`Auth<S>`],
//! which adds the scope check (403) and cannot be forgotten: without it a
//! handler has no account to work on.

use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use taskgate_core::key::hash_key;
use taskgate_core::{AccountStatus, ApiKeySecret, Scope, Timestamp};
use taskgate_store::{Account, KeyRecord, KeyState};

use crate::config::PlanLimits;
use crate::error::ApiError;
use crate::principal::Principal;
use crate::ratelimit::Decision;
use crate::state::AppState;

/// A scope a handler requires.
pub trait RequiredScope {
    const SCOPE: Scope;
}
pub struct ApisRead;
pub struct TasksRead;
pub struct TasksWrite;
pub struct WebhooksRead;
pub struct WebhooksWrite;
impl RequiredScope for WebhooksRead {
    const SCOPE: Scope = Scope::WebhooksRead;
}
impl RequiredScope for WebhooksWrite {
    const SCOPE: Scope = Scope::WebhooksWrite;
}
impl RequiredScope for ApisRead {
    const SCOPE: Scope = Scope::ApisRead;
}
impl RequiredScope for TasksRead {
    const SCOPE: Scope = Scope::TasksRead;
}
impl RequiredScope for TasksWrite {
    const SCOPE: Scope = Scope::TasksWrite;
}

/// The extractor handlers take: the principal, holding scope `S`.
pub struct Auth<S>(pub Principal, pub PhantomData<S>);

impl<S: RequiredScope, St: Send + Sync> FromRequestParts<St> for Auth<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &St) -> Result<Self, ApiError> {
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| {
                tracing::error!("a handler requiring auth ran outside the auth layer");
                ApiError::internal()
            })?;
        if !principal.scopes.contains(S::SCOPE) {
            return Err(ApiError::forbidden(
                "insufficient_permissions",
                format!("This API key lacks the {} scope.", S::SCOPE),
            ));
        }
        Ok(Auth(principal, PhantomData))
    }
}

pub async fn authenticate(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let ip = app.trusted_proxies.client(peer.ip(), request.headers());
    let (principal, decision) = match check(&app, ip, request.headers()).await {
        Ok(ok) => ok,
        Err(e) => return e.into_response(),
    };
    let caller = crate::telemetry::spans::Caller {
        account_id: principal.account_id,
        key_id: principal.key_id,
    };
    request.extensions_mut().insert(principal);
    let mut response = next.run(request).await;
    if let Some(d) = decision {
        rate_limit_headers(response.headers_mut(), &d, app.clock.now());
    }
    // For the request's span.
    if app.telemetry.tracer.is_some() {
        response.extensions_mut().insert(caller);
    }
    response
}

async fn check(
    app: &AppState,
    ip: IpAddr,
    headers: &HeaderMap,
) -> Result<(Principal, Option<Decision>), ApiError> {
    let (key, account) = identified(app, ip, headers).await?;

    if account.status != AccountStatus::Active {
        return Err(ApiError::forbidden(
            "account_suspended",
            "This account is suspended. Contact the operator of this service.",
        ));
    }

    let limits = PlanLimits::of(&app.config.plans, &account.plan);
    let decision = app
        .limiter
        .check(account.id, limits)
        .await
        .map_err(|_| ApiError::rate_limiter_unavailable())?;
    app.requests.count(
        account.id,
        key.id,
        key.key_type.mode(),
        app.clock.now().unix_ms(),
        !decision.allowed,
    );
    if !decision.allowed {
        let mut err = ApiError::new(
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            "Rate limit exceeded for this account.",
        );
        if let Some(w) = decision.tightest() {
            err.message = format!(
                "Rate limit exceeded: {} requests per {}. Retry in {} s.",
                w.limit,
                w.window.name(),
                w.reset_secs
            );
            err = err
                .with_header("retry-after", &w.reset_secs.to_string())
                .with_details(serde_json::json!([{
                    "window": w.window.name(),
                    "limit": w.limit,
                    "retry_after": w.reset_secs,
                    "retry_at": app.clock.now().plus_ms(w.reset_secs as i64 * 1000).rfc3339(),
                }]));
        }
        rate_limit_headers(err.headers_mut(), &decision, app.clock.now());
        return Err(err);
    }

    app.keys.mark_used(key.id, app.clock.now());
    let principal = Principal::of(&key, &account, limits);
    Ok((principal, Some(decision).filter(|d| !d.windows.is_empty())))
}

/// The key of `headers` and its account, or the 401 to answer (or the 429
/// of an address with too many failed authentications). A failure counts
/// against the address.
pub async fn identified(
    app: &AppState,
    ip: IpAddr,
    headers: &HeaderMap,
) -> Result<(KeyRecord, Account), ApiError> {
    if let Some(retry) = app.auth_failures.blocked(&ip).await {
        return Err(too_many_failures(app, retry));
    }
    let result = identify(app, headers).await;
    if result
        .as_ref()
        .is_err_and(|e| e.status == axum::http::StatusCode::UNAUTHORIZED)
    {
        app.auth_failures.record(ip).await;
    }
    result
}

/// The 429 of an address blocked for too many failed authentications,
/// `retry` seconds before it may try again.
pub fn too_many_failures(app: &AppState, retry: u64) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_exceeded",
        "Too many failed authentications from this address. Try again later.",
    )
    .with_header("retry-after", &retry.to_string())
    .with_details(serde_json::json!([{
        "window": "auth_failures",
        "limit": app.auth_failures.limit(),
        "retry_after": retry,
    }]))
}

/// The key and its account, or the 401 to answer.
/// The API key of an `Authorization` header, checked for format and
/// checksum (no store is asked), or the 401 to answer.
pub fn api_key_of(value: Option<&HeaderValue>) -> Result<ApiKeySecret, ApiError> {
    let value = value.ok_or_else(|| {
        ApiError::unauthorized(
            "missing_authorization",
            "No API key. Send it as the header `Authorization: Bearer <API_KEY>`.",
        )
    })?;
    let malformed = || {
        ApiError::unauthorized(
            "malformed_authorization",
            "The Authorization header must be `Bearer <API_KEY>`.",
        )
    };
    let value = value.to_str().map_err(|_| malformed())?;
    let (scheme, token) = value.split_once(' ').ok_or_else(malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return Err(malformed());
    }
    // Wrong format or checksum: rejected without touching the store.
    ApiKeySecret::parse(token)
        .ok_or_else(|| ApiError::unauthorized("invalid_api_key", "The API key is not valid."))
}

async fn identify(app: &AppState, headers: &HeaderMap) -> Result<(KeyRecord, Account), ApiError> {
    let invalid = || ApiError::unauthorized("invalid_api_key", "The API key is not valid.");
    let secret = api_key_of(headers.get(header::AUTHORIZATION))?;
    let hash = hash_key(secret.expose());
    let found = match app.keys.get(&hash, app.clock.instant()) {
        Some(v) => v,
        None => {
            let v = app.store.find_key_by_hash(&hash).await?.map(Arc::new);
            app.keys.put(hash, v.clone(), app.clock.instant());
            v
        }
    };
    let found = found.ok_or_else(invalid)?;
    let (key, account) = (&found.0, &found.1);
    let now = app.clock.now();
    if key.key_type != secret.key_type() {
        return Err(invalid());
    }
    match key.state_at(now) {
        KeyState::Active => {}
        KeyState::Revoked => return Err(invalid()),
        KeyState::Expired => {
            return Err(ApiError::unauthorized(
                "api_key_expired",
                "This API key has expired. Create or roll a key.",
            ));
        }
    }
    Ok((key.clone(), account.clone()))
}

/// The IETF RateLimit fields and the familiar X-RateLimit-* for the window
/// closest to exhaustion.
fn rate_limit_headers(headers: &mut HeaderMap, d: &Decision, now: Timestamp) {
    let policy = d
        .windows
        .iter()
        .map(|w| {
            format!(
                "\"{}\";q={};w={}",
                w.window.name(),
                w.limit,
                w.window.seconds()
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut set = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    };
    set("ratelimit-policy", policy);
    if let Some(w) = d.tightest() {
        set(
            "ratelimit",
            format!(
                "\"{}\";r={};t={}",
                w.window.name(),
                w.remaining,
                w.reset_secs
            ),
        );
        set("x-ratelimit-limit", w.limit.to_string());
        set("x-ratelimit-remaining", w.remaining.to_string());
        set(
            "x-ratelimit-reset",
            ((now.unix_ms() / 1000) as u64 + w.reset_secs).to_string(),
        );
    }
}
