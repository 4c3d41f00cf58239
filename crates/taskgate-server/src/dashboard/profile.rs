//! A signed-in user's own password: changed with the current one, which the
//! sessions service checks like a sign-in. A new password ends every
//! session of the user; the browser that changed it gets a new one and stays
//! signed in.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::user::PASSWORD_MIN_CHARS;

use super::pages::{Chrome, redirect, render, render_with};
use super::session::{self, Changes, Session, store_error};
use super::sign_in::{refusal, too_many};
use super::words;
use crate::service::Actor;
use crate::service::sessions::{self, PasswordChange, SessionError};
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
    let Changes {
        session,
        form,
        origin,
    } = changes;
    let refuse = |status: StatusCode, message: String| {
        render_with(status, &page_of(&session, Some(message), false))
    };
    if form.new != form.confirm {
        return refuse(
            StatusCode::BAD_REQUEST,
            "The new password and its repetition differ.".to_owned(),
        );
    }
    let change = PasswordChange {
        current: form.current,
        new: form.new,
        from: app.trusted_proxies.client(peer.ip(), &headers),
        user_agent: origin.user_agent,
    };
    let token = match sessions::change_password(&app, Actor::User(&session.user), change).await {
        Ok(token) => token,
        // The user is gone: the session with them.
        Err(SessionError::UserNotFound | SessionError::Forbidden) => return session::forbidden(),
        Err(e) => {
            let (status, retry_after) = refusal(&e, StatusCode::BAD_REQUEST);
            let page = match words::password_change_error(e) {
                Ok(message) => refuse(status, message),
                Err(e) => return store_error(e),
            };
            return match retry_after {
                Some(secs) => too_many(page, secs),
                None => page,
            };
        }
    };
    let cookie = session::set_cookie(&app, Some(peer.ip()), &headers, Some(&token));
    let mut r = redirect("/dashboard/password?saved=1");
    r.headers_mut().insert(header::SET_COOKIE, cookie);
    r
}
