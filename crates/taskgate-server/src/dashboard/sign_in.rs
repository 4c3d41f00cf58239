//! Signing in and out. Failed sign-ins are limited per address and per email
//! (`dashboard.sign_in_failures_per_minute`); a wrong email and a wrong
//! password get the same answer in the same time.
//!
//! An attempt is counted against its address *before* the password is
//! checked (a slot reserved, given back when it succeeds), so attempts sent
//! at once cannot all pass the check before any is recorded. The check runs
//! on the password pool, which refuses at once when it is full.
//!
//! An email with a minute's worth of failures is closed only to the
//! addresses that failed for it themselves: a stranger who knows a user's
//! email (the fixed `admin@taskgate.local`, say) cannot lock that user out,
//! and each new address an attacker brings gets one guess a minute.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{Email, Timestamp, UserStatus};

use super::pages::{self, redirect, render, render_with};
use super::session::{self, Changes, same_origin};
use crate::password;
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
    let refuse = |status: StatusCode, message: &str| {
        render_with(
            status,
            &SignInPage {
                error: Some(message),
                email: &form.email,
                next,
            },
        )
    };
    let ip = app.trusted_proxies.client(peer.ip(), &headers);
    let email = Email::normalize(&form.email).ok();
    let dash = &app.sign_in_failures;
    let slow_down = |secs: u64| {
        too_many(
            refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too many failed sign-ins. Try again in {secs} seconds."),
            ),
            secs,
        )
    };
    if let Some(e) = &email
        && let Some(secs) = dash.failures_by_email.blocked(e)
        && dash.failures_by_pair.failed_lately(&(e.clone(), ip))
    {
        return slow_down(secs);
    }
    let reservation = match dash.failures_by_addr.reserve(ip) {
        Ok(r) => r,
        Err(secs) => return slow_down(secs),
    };
    let user = match &email {
        Some(e) => match app.store.find_user_by_email(e).await {
            Ok(u) => u,
            Err(e) => {
                dash.failures_by_addr.release(&ip, reservation);
                return session::store_error(e);
            }
        },
        None => None,
    };
    // The same work whether or not the user exists.
    let hash = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| password::decoy().to_owned());
    let Ok(matches) = password::verify_bounded(form.password.clone(), hash).await else {
        dash.failures_by_addr.release(&ip, reservation);
        return too_many(
            refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many sign-ins at once. Try again in a moment.",
            ),
            1,
        );
    };
    let user = match user {
        Some(u) if matches && u.status == UserStatus::Active => u,
        _ => {
            // The address's reserved slot stays: it is this failure.
            if let Some(e) = email {
                dash.failures_by_pair.record((e.clone(), ip));
                dash.failures_by_email.record(e);
            }
            return refuse(StatusCode::UNAUTHORIZED, "Email or password is wrong.");
        }
    };
    dash.failures_by_addr.release(&ip, reservation);
    // A session the browser already had ends: sign-in always starts a new one.
    if let Some(old) = session::cookie_token(&headers) {
        let _ = app.store.delete_session(&session::token_hash(&old)).await;
    }
    let cookie = match session::start(&app, Some(peer.ip()), &headers, &user).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if let Err(e) = app.store.record_sign_in(user.id, Timestamp::now()).await {
        tracing::warn!(error = %e, "dashboard: cannot record a sign-in");
    }
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
        && let Err(e) = app.store.delete_session(&session::token_hash(&token)).await
    {
        return session::store_error(e);
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
