//! The sign-in page and sign-out: the form parsed, the sessions service
//! asked (which holds the limits on failed sign-ins and the password pool),
//! the cookie set or cleared.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::Email;

use super::pages::{self, redirect, render, render_with};
use super::session::{self, Changes, same_origin};
use super::words;
use crate::service::sessions::{self, Credentials, SessionError};
use crate::state::AppState;

#[derive(Template)]
#[template(path = "dashboard/sign_in.html")]
struct SignInPage<'a> {
    error: Option<&'a str>,
    email: &'a str,
    next: &'a str,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// Where to go after signing in: a dashboard page of this site, never
/// elsewhere (`//host`, `/dashboard/../x` or a scheme are not followed).
fn after_sign_in(next: Option<&str>) -> &str {
    match next {
        Some(n)
            if n.starts_with("/dashboard")
                && !n.contains("//")
                && !n.contains("..")
                && !n.contains('\\')
                && !n.starts_with("/dashboard/sign-") =>
        {
            n
        }
        _ => "/dashboard/keys",
    }
}

pub async fn page(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = after_sign_in(q.next.as_deref());
    match session::current(&app, &headers).await {
        Ok(Some(_)) => redirect(next),
        Ok(None) => render(&SignInPage {
            error: None,
            email: "",
            next,
        }),
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

/// A page refused for a while (a sign-in, a password check): `page` with
/// `Retry-After`, at least one second.
pub(super) fn too_many(page: Response, secs: u64) -> Response {
    let mut r = page;
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from(secs.max(1)));
    r
}

/// The status of a refused password check, and its `Retry-After`: 429
/// for the limits and a full password pool, else `otherwise`.
pub(super) fn refusal(e: &SessionError, otherwise: StatusCode) -> (StatusCode, Option<u64>) {
    match e {
        SessionError::TooManyFailures { retry_after_secs } => {
            (StatusCode::TOO_MANY_REQUESTS, Some(*retry_after_secs))
        }
        SessionError::Busy => (StatusCode::TOO_MANY_REQUESTS, Some(1)),
        _ => (otherwise, None),
    }
}

pub async fn submit(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !same_origin(&app, Some(peer.ip()), &headers) {
        return session::forbidden();
    }
    let Ok(form) = serde_urlencoded::from_bytes::<SignInForm>(&body) else {
        return session::bad_form();
    };
    let next = after_sign_in(form.next.as_deref());
    let credentials = Credentials {
        email: Email::normalize(&form.email).ok(),
        password: form.password,
        from: app.trusted_proxies.client(peer.ip(), &headers),
        user_agent: headers
            .get(axum::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    let replacing = session::cookie_token(&headers);
    let started = match sessions::sign_in(&app, credentials, replacing.as_ref()).await {
        Ok(s) => s,
        Err(e) => {
            let (status, retry_after) = refusal(&e, StatusCode::UNAUTHORIZED);
            let message = match words::sign_in_error(e) {
                Ok(m) => m,
                Err(e) => return session::store_error(e),
            };
            let page = render_with(
                status,
                &SignInPage {
                    error: Some(&message),
                    email: &form.email,
                    next,
                },
            );
            return match retry_after {
                Some(secs) => too_many(page, secs),
                None => page,
            };
        }
    };
    let cookie = session::set_cookie(&app, Some(peer.ip()), &headers, Some(&started.token));
    let mut r = redirect(next);
    r.headers_mut().insert(header::SET_COOKIE, cookie);
    r
}

#[derive(Deserialize)]
pub struct SignOutForm {}

pub async fn sign_out(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    _changes: Changes<SignOutForm>,
) -> Response {
    if let Some(token) = session::cookie_token(&headers)
        && let Err(e) = sessions::sign_out(&app, &token).await
    {
        return session::failed(e);
    }
    let mut r = redirect("/dashboard/sign-in");
    r.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(&app, Some(peer.ip()), &headers, None),
    );
    r
}

pub async fn home() -> Response {
    pages::redirect("/dashboard/keys")
}

#[cfg(test)]
mod tests {
    use super::after_sign_in;

    #[test]
    fn only_dashboard_pages_are_followed() {
        assert_eq!(
            after_sign_in(Some("/dashboard/tasks?mode=test")),
            "/dashboard/tasks?mode=test"
        );
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/dashboard/../x",
            "/api/v1/call",
            "/dashboard/sign-out",
        ] {
            assert_eq!(after_sign_in(Some(bad)), "/dashboard/keys", "{bad}");
        }
        assert_eq!(after_sign_in(None), "/dashboard/keys");
    }
}
