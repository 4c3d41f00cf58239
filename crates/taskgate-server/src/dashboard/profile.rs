//! A signed-in user's own password: changed with the current one, which is
//! checked like a sign-in (counted against the address's failures before it
//! is checked, on the password pool). A new password ends every session of
//! the user; the browser that changed it gets a new one and stays signed in.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::user::{PASSWORD_MIN_CHARS, password_problem};

use super::pages::{Chrome, redirect, render, render_with};
use super::session::{self, Changes, Session, store_error};
use super::sign_in::too_many;
use crate::password;
use crate::state::AppState;

#[derive(Template)]
#[template(path = "dashboard/password.html")]
struct PasswordPage {
    chrome: Chrome,
    min_chars: usize,
    error: Option<String>,
    saved: bool,
}

#[derive(Deserialize, Default)]
pub struct PasswordQuery {
    #[serde(default)]
    saved: String,
}

fn page_of(session: &Session, error: Option<String>, saved: bool) -> PasswordPage {
    PasswordPage {
        chrome: session.chrome("/dashboard/password", false),
        min_chars: PASSWORD_MIN_CHARS,
        error,
        saved,
    }
}

pub async fn page(session: Session, Query(q): Query<PasswordQuery>) -> Response {
    render(&page_of(&session, None, q.saved == "1"))
}

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current: String,
    #[serde(default)]
    new: String,
    #[serde(default)]
    confirm: String,
}

pub async fn change(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    changes: Changes<PasswordForm>,
) -> Response {
    let Changes { session, form } = changes;
    let refuse = |status: StatusCode, message: String| {
        render_with(status, &page_of(&session, Some(message), false))
    };
    if form.new != form.confirm {
        return refuse(
            StatusCode::BAD_REQUEST,
            "The new password and its repetition differ.".to_owned(),
        );
    }
    if let Some(problem) = password_problem(&form.new) {
        return refuse(StatusCode::BAD_REQUEST, problem);
    }
    // The current password is guessed at like a sign-in: the same limit.
    let ip = app.trusted_proxies.client(peer.ip(), &headers);
    let failures = &app.sign_in_failures.failures_by_addr;
    let reservation = match failures.reserve(ip) {
        Ok(r) => r,
        Err(secs) => {
            return too_many(
                refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("Too many wrong passwords. Try again in {secs} seconds."),
                ),
                secs,
            );
        }
    };
    let user = &session.user;
    match password::verify_bounded(form.current.clone(), user.password_hash.clone()).await {
        Ok(true) => failures.release(&ip, reservation),
        Ok(false) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "The current password is wrong.".to_owned(),
            );
        }
        Err(password::Busy) => {
            failures.release(&ip, reservation);
            return too_many(
                refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many password checks at once. Try again in a moment.".to_owned(),
                ),
                1,
            );
        }
    }
    let hash = password::hash_off_thread(form.new.clone()).await;
    // Ends every session of the user, this one too, in one transaction.
    match app.store.set_password(user.id, &hash).await {
        Ok(Some(_)) => {}
        Ok(None) => return session::forbidden(),
        Err(e) => return store_error(e),
    }
    let cookie = match session::start(&app, Some(peer.ip()), &headers, user).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let mut r = redirect("/dashboard/password?saved=1");
    r.headers_mut().insert(header::SET_COOKIE, cookie);
    r
}
