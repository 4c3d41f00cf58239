//! Sessions and CSRF protection, as extractors: a page handler that takes
//! [`Session`] has a signed-in, active user; one that takes [`Changes<T>`]
//! also has a request that came from one of our own forms (its CSRF token
//! matches the session's, and its `Origin`, when sent, is this site), so
//! neither check can be forgotten.
//!
//! The cookie holds the session's token; what a session is, and when it
//! ends, is the sessions service's (`service::sessions`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, OriginalUri, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;
use taskgate_store::{Account, UserRecord};

use super::{pages, words};
use crate::service::Origin;
use crate::service::sessions::{self, SessionError, SessionToken, SignedIn};
use crate::state::AppState;

/// What the store keeps of a cookie's token (the black-box tests find a
/// browser's session by it).
pub use crate::service::sessions::token_hash;

pub const COOKIE: &str = "taskgate_session";

/// A signed-in, active user (of an account in any standing: a suspended
/// account's users may still look), with their session's CSRF token.
#[derive(Clone)]
pub struct Session {
    pub user: UserRecord,
    pub account: Account,
    pub csrf: String,
}

impl From<SignedIn> for Session {
    fn from(s: SignedIn) -> Self {
        Session {
            user: s.user,
            account: s.account,
            csrf: s.csrf,
        }
    }
}

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

/// The session token of the request's cookie, if it has one.
pub fn cookie_token(headers: &HeaderMap) -> Option<SessionToken> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| SessionToken::parse(value))
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
    token: Option<&SessionToken>,
) -> HeaderValue {
    let secure = if secure(app, peer, headers) {
        "; Secure"
    } else {
        ""
    };
    let value = match token {
        Some(t) => format!(
            "{COOKIE}={}; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
            t.as_str(),
            app.config.dashboard.session_max_hours * 3600
        ),
        None => format!("{COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
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

/// The session of the request's cookie, if it opens one.
pub async fn current(app: &AppState, headers: &HeaderMap) -> Result<Option<Session>, Response> {
    let Some(token) = cookie_token(headers) else {
        return Ok(None);
    };
    match sessions::find(app, &token).await {
        Ok(found) => Ok(found.map(Session::from)),
        Err(e) => Err(failed(e)),
    }
}

/// The error page of a session's lookup or end (only the store fails them).
pub fn failed(e: SessionError) -> Response {
    match words::sign_in_error(e) {
        Ok(message) => pages::error_page(StatusCode::BAD_REQUEST, &message),
        Err(e) => store_error(e),
    }
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
    /// Where it came from, for the audit log.
    pub origin: Origin,
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
        let Ok(origin) = Origin::from_request_parts(&mut parts, app).await;
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
        Ok(Changes {
            session,
            form,
            origin,
        })
    }
}

pub fn bad_form() -> Response {
    pages::error_page(
        StatusCode::BAD_REQUEST,
        "The form was not understood. Go back and try again.",
    )
}
