//! The operator's pages (admins only): every account, with its plan,
//! standing and the ceiling on its spend limit, created and changed here; every user, created (a password
//! generated and shown once), disabled, enabled, or given a new password.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{AccountId, AccountStatus, Email, Micros, Role, UserId, UserStatus};
use taskgate_store::AccountUpdate;

use super::pages::{Chrome, error_page, not_found, redirect, render, render_with, when, when_opt};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::service::Actor;
use crate::service::accounts::{self, AccountError, NewAccount};
use crate::service::users::{self, NewUser, UserRef, WithPassword};
use crate::state::AppState;

fn admins_only() -> Response {
    error_page(StatusCode::FORBIDDEN, "Only admins can open this page.")
}

struct AccountRow {
    id: String,
    name: String,
    plan: String,
    status: &'static str,
    spend_limit: String,
    /// The operator's ceiling on the owners' spend limit: shown, and as
    /// the form's value.
    ceiling: String,
    ceiling_value: String,
    created: String,
}

struct UserRow {
    id: String,
    email: String,
    account: String,
    role: &'static str,
    status: &'static str,
    last_sign_in: String,
}

#[derive(Template)]
#[template(path = "dashboard/admin.html")]
struct AdminPage {
    chrome: Chrome,
    accounts: Vec<AccountRow>,
    users: Vec<UserRow>,
    plans: Vec<String>,
    roles: Vec<&'static str>,
    error: Option<String>,
    /// A password just generated, shown once: (email, password).
    created: Option<(String, String)>,
}

async fn admin_page(
    app: &AppState,
    session: &Session,
    error: Option<String>,
    created: Option<(String, String)>,
) -> Result<AdminPage, Response> {
    let actor = Actor::User(&session.user);
    let store = &*app.store;
    let (accounts, users) = match tokio::join!(
        accounts::list(store, actor),
        users::list(store, actor, None)
    ) {
        (Ok(a), Ok(u)) => (a, u),
        (Err(e), _) => return Err(error_worded(words::account_error(e))),
        (_, Err(e)) => return Err(error_worded(words::user_error(e))),
    };
    let name_of = |id: AccountId| {
        accounts
            .iter()
            .find(|a| a.id == id)
            .map(|a| a.name.clone())
            .unwrap_or_default()
    };
    Ok(AdminPage {
        chrome: session.chrome("/dashboard/admin", false),
        users: users
            .iter()
            .map(|u| UserRow {
                id: u.id.to_string(),
                email: u.email.as_str().to_owned(),
                account: name_of(u.account_id),
                role: u.role.as_str(),
                status: u.status.as_str(),
                last_sign_in: when_opt(u.last_sign_in_at),
            })
            .collect(),
        accounts: accounts
            .iter()
            .map(|a| AccountRow {
                id: a.id.to_string(),
                name: a.name.clone(),
                plan: a.plan.as_str().to_owned(),
                status: a.status.as_str(),
                spend_limit: a
                    .monthly_spend_limit_micros
                    .map(|m| format!("${}", Micros(m).to_usd_string()))
                    .unwrap_or_else(|| "none".to_owned()),
                ceiling: a
                    .max_monthly_spend_limit_micros
                    .map(|m| format!("${}", Micros(m).to_usd_string()))
                    .unwrap_or_else(|| "none".to_owned()),
                ceiling_value: a
                    .max_monthly_spend_limit_micros
                    .map(|m| Micros(m).to_usd_string())
                    .unwrap_or_default(),
                created: when(a.created_at),
            })
            .collect(),
        plans: app
            .config
            .plans
            .keys()
            .map(|p| p.as_str().to_owned())
            .collect(),
        roles: Role::ALL.iter().map(|r| r.as_str()).collect(),
        error,
        created,
    })
}

pub async fn page(State(app): State<Arc<AppState>>, session: Session) -> Response {
    if session.user.role != Role::Admin {
        return admins_only();
    }
    match admin_page(&app, &session, None, None).await {
        Ok(p) => render(&p),
        Err(r) => r,
    }
}

async fn again(app: &AppState, session: &Session, message: String) -> Response {
    match admin_page(app, session, Some(message), None).await {
        Ok(p) => render_with(StatusCode::BAD_REQUEST, &p),
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub struct NewAccountForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    plan: String,
    #[serde(default)]
    spend_limit: String,
}

pub async fn create_account(
    State(app): State<Arc<AppState>>,
    changes: Changes<NewAccountForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if session.user.role != Role::Admin {
        return admins_only();
    }
    let limit = form.spend_limit.trim();
    let limit = match (!limit.is_empty())
        .then(|| Micros::parse_usd(limit))
        .transpose()
    {
        Ok(limit) => limit,
        Err(e) => return again(&app, &session, e).await,
    };
    let plan = match accounts::plan_of(&app.config, &form.plan) {
        Ok(p) => p,
        Err(e) => return again_worded(&app, &session, words::account_error(e)).await,
    };
    let new = NewAccount {
        name: form.name,
        plan,
        monthly_spend_limit: limit,
    };
    let actor = Actor::User(&session.user);
    match accounts::create(&*app.store, &app.config, actor, &origin, new).await {
        Ok(_) => redirect("/dashboard/admin"),
        Err(e) => match words::account_error(e) {
            Ok(message) => again(&app, &session, message).await,
            Err(e) => store_error(e),
        },
    }
}

#[derive(Deserialize)]
pub struct AccountForm {
    #[serde(default)]
    plan: String,
    #[serde(default)]
    status: String,
    /// The ceiling on the owners' monthly spend limit, in USD; sent empty,
    /// it is removed (absent: left alone).
    ceiling: Option<String>,
}

/// Changes an account's plan or the ceiling on its spend limit, or
/// suspends or reactivates it.
pub async fn update_account(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<AccountForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if session.user.role != Role::Admin {
        return admins_only();
    }
    let Ok(id) = AccountId::parse(&id) else {
        return not_found();
    };
    let plan = match form.plan.as_str() {
        "" => None,
        p => match accounts::plan_of(&app.config, p) {
            Ok(p) => Some(p),
            Err(e) => return again_worded(&app, &session, words::account_error(e)).await,
        },
    };
    let status = match form.status.as_str() {
        "" => None,
        s => match s.parse::<AccountStatus>() {
            Ok(s) => Some(s),
            Err(e) => return again(&app, &session, e).await,
        },
    };
    let ceiling = match form
        .ceiling
        .as_deref()
        .map(|c| c.trim().trim_start_matches('$'))
    {
        None => None,
        Some("") => Some(None),
        Some(c) => match Micros::parse_usd(c) {
            Ok(m) => Some(Some(m.0)),
            Err(_) => {
                let message = "The ceiling is an amount in USD, like 25 or 0.50; empty for none.";
                return again(&app, &session, message.to_owned()).await;
            }
        },
    };
    let update = AccountUpdate {
        plan,
        status,
        monthly_spend_limit_micros: None,
        max_monthly_spend_limit_micros: ceiling,
    };
    let actor = Actor::User(&session.user);
    match accounts::update(&*app.store, &app.config, actor, &origin, id, update).await {
        Ok(_) => redirect("/dashboard/admin"),
        Err(AccountError::NotFound(_)) => not_found(),
        // A form that changes nothing changed nothing: back to the page.
        Err(AccountError::NothingToChange) => redirect("/dashboard/admin"),
        Err(e) => again_worded(&app, &session, words::account_error(e)).await,
    }
}

/// The admin page again with a service's error in the dashboard's words
/// (a storage failure gets the error page).
/// The error page for what stopped the admin page itself from being read.
fn error_worded(worded: Result<String, taskgate_store::StoreError>) -> Response {
    match worded {
        Ok(message) => error_page(StatusCode::FORBIDDEN, &message),
        Err(e) => store_error(e),
    }
}

async fn again_worded(
    app: &AppState,
    session: &Session,
    worded: Result<String, taskgate_store::StoreError>,
) -> Response {
    match worded {
        Ok(message) => again(app, session, message).await,
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize)]
pub struct NewUserForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    account: String,
    #[serde(default)]
    role: String,
}

/// A new user with a generated password, shown once on the page.
pub async fn create_user(
    State(app): State<Arc<AppState>>,
    changes: Changes<NewUserForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if session.user.role != Role::Admin {
        return admins_only();
    }
    let Ok(account) = AccountId::parse(&form.account) else {
        return again(&app, &session, "There is no such account.".to_owned()).await;
    };
    let email = match Email::normalize(&form.email) {
        Ok(e) => e,
        Err(e) => return again(&app, &session, e).await,
    };
    let role = match form.role.parse::<Role>() {
        Ok(r) => r,
        Err(e) => return again(&app, &session, e).await,
    };
    let new = NewUser {
        account,
        email,
        role,
        password: None,
    };
    match users::create(&*app.store, Actor::User(&session.user), &origin, new).await {
        Ok(made) => with_password(&app, &session, &made).await,
        Err(e) => again_worded(&app, &session, words::user_error(e)).await,
    }
}

/// The page with `user`'s new password shown, this once.
async fn with_password(app: &AppState, session: &Session, made: &WithPassword) -> Response {
    let shown = (
        made.user.email.as_str().to_owned(),
        made.generated_password.clone().unwrap_or_default(),
    );
    match admin_page(app, session, None, Some(shown)).await {
        Ok(p) => render(&p),
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub struct UserForm {
    #[serde(default)]
    action: String,
}

/// Disables, enables, or sets a new (generated, shown once) password.
pub async fn update_user(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<UserForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if session.user.role != Role::Admin {
        return admins_only();
    }
    let Ok(user_id) = UserId::parse(&id) else {
        return not_found();
    };
    let who = UserRef::Id(user_id);
    let actor = Actor::User(&session.user);
    let store = &*app.store;
    let status = match form.action.as_str() {
        "disable" => UserStatus::Disabled,
        "enable" => UserStatus::Active,
        "reset-password" => {
            return match users::reset_password(store, actor, &origin, &who, None).await {
                Ok(made) => with_password(&app, &session, &made).await,
                Err(e) => again_worded(&app, &session, words::user_error(e)).await,
            };
        }
        _ => return again(&app, &session, "Unknown action.".to_owned()).await,
    };
    match users::set_status(store, actor, &origin, &who, status).await {
        Ok(_) => redirect("/dashboard/admin"),
        Err(e) => again_worded(&app, &session, words::user_error(e)).await,
    }
}
