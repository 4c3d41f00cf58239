//! Settings: the account's plan, its limits and its monthly spend limit,
//! which owners and admins set, under the ceiling the operator may have set.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{Micros, Mode};
use taskgate_store::AccountUpdate;

use super::pages::{Chrome, error_page, redirect, render, render_with, when};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::config::PlanLimits;
use crate::service::Actor;
use crate::service::accounts::{self, AccountError};
use crate::state::AppState;

#[derive(Template)]
#[template(path = "dashboard/settings.html")]
struct SettingsPage {
    chrome: Chrome,
    account_id: String,
    created: String,
    status: &'static str,
    plan: String,
    per_minute: String,
    per_day: String,
    running: String,
    spend_limit: String,
    spend_limit_value: String,
    /// The operator's ceiling on the spend limit, as `$20.00`, when set.
    ceiling: Option<String>,
    may_manage: bool,
    error: Option<String>,
    saved: bool,
}

#[derive(Deserialize, Default)]
pub struct SettingsQuery {
    #[serde(default)]
    mode: String,
    #[serde(default)]
    saved: String,
}

fn limit(n: Option<u32>, unit: &str) -> String {
    n.map(|n| format!("{n} {unit}"))
        .unwrap_or_else(|| "no limit".to_owned())
}

fn settings_page(
    app: &AppState,
    session: &Session,
    test: bool,
    error: Option<String>,
    saved: bool,
) -> SettingsPage {
    let a = &session.account;
    let limits = PlanLimits::of(&app.config.plans, &a.plan);
    SettingsPage {
        chrome: session.chrome("/dashboard/settings", test),
        account_id: a.id.to_string(),
        created: when(a.created_at),
        status: a.status.as_str(),
        plan: a.plan.as_str().to_owned(),
        per_minute: limit(limits.per_minute, "requests per minute"),
        per_day: limit(limits.per_day, "requests per day"),
        // The cap of the mode shown: test tasks have one of their own.
        running: limit(
            limits.running_cap(if test { Mode::Test } else { Mode::Live }),
            "running tasks",
        ),
        // What holds: the owners' limit under the operator's ceiling.
        spend_limit: match (
            a.effective_spend_limit_micros(),
            a.monthly_spend_limit_micros,
        ) {
            (None, _) => "none".to_owned(),
            (Some(m), Some(own)) if m == own => format!("${} per month", Micros(m).to_usd_string()),
            (Some(m), _) => format!(
                "${} per month (the operator's ceiling)",
                Micros(m).to_usd_string()
            ),
        },
        spend_limit_value: a
            .monthly_spend_limit_micros
            .map(|m| Micros(m).to_usd_string())
            .unwrap_or_default(),
        ceiling: a
            .max_monthly_spend_limit_micros
            .map(|m| format!("${}", Micros(m).to_usd_string())),
        may_manage: session.user.role.manages_account(),
        error,
        saved,
    }
}

pub async fn page(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(q): Query<SettingsQuery>,
) -> Response {
    render(&settings_page(
        &app,
        &session,
        q.mode == "test",
        None,
        q.saved == "1",
    ))
}

#[derive(Deserialize)]
pub struct SpendForm {
    #[serde(default)]
    spend_limit: String,
}

/// Sets or removes (empty) the account's monthly spend limit.
pub async fn set_spend_limit(
    State(app): State<Arc<AppState>>,
    changes: Changes<SpendForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if !session.user.role.manages_account() {
        return error_page(
            StatusCode::FORBIDDEN,
            "Only the account's owners can change its spend limit.",
        );
    }
    let refuse = |message: String| {
        let page = settings_page(&app, &session, false, Some(message), false);
        render_with(StatusCode::BAD_REQUEST, &page)
    };
    let ceiling = session.account.max_monthly_spend_limit_micros;
    let typed = form.spend_limit.trim().trim_start_matches('$');
    let limit = if typed.is_empty() {
        None
    } else {
        match Micros::parse_usd(typed) {
            Ok(m) => Some(m.0),
            Err(_) => {
                return refuse(match ceiling {
                    None => "The spend limit is an amount in USD, like 25 or 0.50; empty for none."
                        .to_owned(),
                    Some(c) => format!(
                        "The spend limit is an amount in USD, like 25 or 0.50, at most ${}.",
                        Micros(c).to_usd_string()
                    ),
                });
            }
        }
    };
    let update = AccountUpdate {
        monthly_spend_limit_micros: Some(limit),
        ..AccountUpdate::default()
    };
    let actor = Actor::User(&session.user);
    match accounts::update(
        &*app.store,
        &app.config,
        actor,
        &origin,
        session.account.id,
        update,
    )
    .await
    {
        Ok(_) => redirect("/dashboard/settings?saved=1"),
        Err(AccountError::Store(e)) => store_error(e),
        Err(e) => match words::account_error(e) {
            Ok(message) => refuse(message),
            Err(e) => store_error(e),
        },
    }
}
