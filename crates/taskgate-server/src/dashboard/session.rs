//! Sessions and CSRF protection, as extractors: a page handler that takes
//! [`Session`] has a signed-in, active user; one that takes [`Changes<T>`]
//! also has a request that came from one of our own forms (its CSRF token
//! matches the session's, and its `Origin`, when sent, is this site), so
//! neither check can be forgotten.
//!
//! The cookie holds a random 256-bit token; the store keeps only its SHA-256,
//! so a copy of the sessions table opens no session. A session ends at sign-out
//! (deleted on the server), after `dashboard.session_idle_minutes` unused, or
//! `dashboard.session_max_hours` after sign-in.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, OriginalUri, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rand::RngCore;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;
use taskgate_core::UserStatus;
use taskgate_store::{Account, SessionRecord, UserRecord};

use super::pages;
use crate::state::AppState;

pub const COOKIE: &str = "taskgate_session";

/// A session's last-seen time is written at most this often.
const TOUCH_EVERY_MS: i64 = 60_000;

/// A signed-in, active user (of an account in any standing: a suspended
/// account's users may still look), with their session's CSRF token.
#[derive(Clone)]
pub struct Session {
    pub user: UserRecord,
    pub account: Account,
    pub csrf: String,
}

/// 32 random bytes as 64 hex digits.
impl Session {
    /// The frame of a page this session sees: `current` is the section's
    /// path, `test_mode` whether test data is shown.
    pub fn chrome(&self, current: &'static str, test_mode: bool) -> pages::Chrome {
        pages::Chrome {
            email: self.user.email.as_str().to_owned(),
            account: self.account.name.clone(),
            role: self.user.role.as_str(),
            csrf: self.csrf.clone(),
            current,
            test_mode,
            is_admin: self.user.role == taskgate_core::Role::Admin,
        }
    }
}

pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The store keeps this of a session token (SHA-256, hex), as of an API key.
pub fn token_hash(token: &str) -> String {
    taskgate_core::key::hash_key(token)
}

/// The session token of the request's cookie, if it has one.
pub fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The peer of a request, when the server recorded it.
pub fn peer_of(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())
}

/// Whether the request reached us over HTTPS (as a trusted proxy says), so
/// that cookies are marked `Secure`.
fn secure(app: &AppState, peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
    app.config.dashboard.secure_cookies || app.trusted_proxies.forwarded_https(peer, headers)
}

/// The `Set-Cookie` of a new session, or of its end (`token` `None`).
pub fn set_cookie(
    app: &AppState,
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    token: Option<&str>,
) -> HeaderValue {
    let secure = if secure(app, peer, headers) {
        "; Secure"
    } else {
        ""
    };
    let value = match token {
        Some(t) => format!(
            "{COOKIE}={t}; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
            app.config.dashboard.session_max_hours * 3600
        ),
        None => format!("{COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Starts a session for `user`: a new token (never one the browser sent)
/// and a new CSRF token. The cookie to set.
pub async fn start(
    app: &AppState,
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    user: &UserRecord,
) -> Result<HeaderValue, Response> {
    let token = random_token();
    let now = app.clock.now();
    let session = SessionRecord {
        token_hash: token_hash(&token),
        user_id: user.id,
        csrf_token: random_token(),
        created_at: now,
        last_seen_at: now,
        expires_at: now.plus_ms(app.config.dashboard.session_max_hours as i64 * 3_600_000),
    };
    app.store
        .create_session(&session)
        .await
        .map_err(store_error)?;
    Ok(set_cookie(app, peer, headers, Some(&token)))
}

pub fn store_error(e: taskgate_store::StoreError) -> Response {
    tracing::error!(error = %e, "dashboard: storage failed");
    pages::error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Storage is unavailable. Try again in a moment.",
    )
}

/// To the sign-in page, coming back to `path` after.
fn to_sign_in(path: &str) -> Response {
    let next = if path.starts_with("/dashboard") && !path.starts_with("/dashboard/sign-in") {
        format!("?next={}", pages::url_encode(path))
    } else {
        String::new()
    };
    pages::redirect(&format!("/dashboard/sign-in{next}"))
}

/// The session of the request: its user active, its lifetimes not passed.
pub async fn current(app: &AppState, headers: &HeaderMap) -> Result<Option<Session>, Response> {
    let Some(token) = cookie_token(headers) else {
        return Ok(None);
    };
    let hash = token_hash(&token);
    let Some((session, user)) = app.store.find_session(&hash).await.map_err(store_error)? else {
        return Ok(None);
    };
    let now = app.clock.now();
    let idle_ms = app.config.dashboard.session_idle_minutes as i64 * 60_000;
    if session.expires_at <= now
        || session.last_seen_at.plus_ms(idle_ms) <= now
        || user.status != UserStatus::Active
    {
        app.store.delete_session(&hash).await.map_err(store_error)?;
        return Ok(None);
    }
    if session.last_seen_at.plus_ms(TOUCH_EVERY_MS) <= now {
        app.store
            .touch_session(&hash, now)
            .await
            .map_err(store_error)?;
    }
    let Some(account) = app
        .store
        .get_account(user.account_id)
        .await
        .map_err(store_error)?
    else {
        return Ok(None);
    };
    Ok(Some(Session {
        user,
        account,
        csrf: session.csrf_token,
    }))
}

impl FromRequestParts<Arc<AppState>> for Session {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<AppState>) -> Result<Self, Response> {
        match current(app, &parts.headers).await? {
            Some(s) => Ok(s),
            // The path as the browser asked it (the nested router strips
            // `/dashboard` from `parts.uri`).
            None => Err(to_sign_in(
                parts
                    .extensions
                    .get::<OriginalUri>()
                    .and_then(|u| u.0.path_and_query())
                    .map(|p| p.as_str())
                    .unwrap_or("/dashboard"),
            )),
        }
    }
}

/// A state-changing request of a signed-in user, from one of our forms: its
/// body (an HTML form) as `T`. Refused with 403 when the CSRF token is
/// missing or wrong, or when `Origin` names another site.
pub struct Changes<T> {
    pub session: Session,
    pub form: T,
}

/// Whether `Origin` (or, without it, `Sec-Fetch-Site`) says the request came
/// from this site: the `Host` it was sent to, or the `X-Forwarded-Host` a
/// trusted proxy names (from anyone else that header is ignored).
pub fn same_origin(app: &AppState, peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match headers.get(header::ORIGIN).map(|o| o.to_str()) {
        Some(Ok(origin)) => {
            let authority = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            let forwarded = app.trusted_proxies.forwarded_host(peer, headers);
            authority.is_some_and(|a| Some(a) == host || Some(a) == forwarded)
        }
        Some(Err(_)) => false,
        None => headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_none_or(|site| site == "same-origin" || site == "none"),
    }
}

pub fn forbidden() -> Response {
    pages::error_page(
        StatusCode::FORBIDDEN,
        "This form has expired or did not come from this site. Go back, reload the page and try again.",
    )
}

impl<T: DeserializeOwned + Send> FromRequest<Arc<AppState>> for Changes<T> {
    type Rejection = Response;

    async fn from_request(req: Request, app: &Arc<AppState>) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let session = Session::from_request_parts(&mut parts, app).await?;
        if !same_origin(app, peer_of(&parts.extensions), &parts.headers) {
            return Err(forbidden());
        }
        let bytes = Bytes::from_request(Request::from_parts(parts, body), app)
            .await
            .map_err(IntoResponse::into_response)?;
        let fields: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&bytes).map_err(|_| bad_form())?;
        let sent = fields
            .iter()
            .find(|(k, _)| k == "csrf")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        if !bool::from(sent.as_bytes().ct_eq(session.csrf.as_bytes())) {
            return Err(forbidden());
        }
        let form = serde_urlencoded::from_bytes(&bytes).map_err(|_| bad_form())?;
        Ok(Changes { session, form })
    }
}

pub fn bad_form() -> Response {
    pages::error_page(
        StatusCode::BAD_REQUEST,
        "The form was not understood. Go back and try again.",
    )
}
