//! The Audit log: who changed what, newest first. Owners see their
//! account's events, admins every account's (and may name one); members
//! are refused. Filters: the action, a first day, and for admins an
//! account; older events page by the last one shown.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{AccountId, AuditAction, AuditEvent, AuditId, Role, Timestamp};

use super::pages::{Chrome, error_page, render, render_with, url_encode};
use super::session::{Session, store_error};
use crate::service::Actor;
use crate::service::audit::{self, AuditError, AuditFilter};
use crate::state::AppState;

pub const SECTION: &str = "/dashboard/audit";
const PAGE: i64 = 50;

/// The filters, as the page's form sends them.
#[derive(Deserialize, Default)]
pub struct Filters {
    #[serde(default)]
    mode: String,
    #[serde(default)]
    action: String,
    /// `YYYY-MM-DD`, from the start of that day (UTC).
    #[serde(default)]
    since: String,
    /// An account id (admins).
    #[serde(default)]
    account: String,
    /// The last event of the previous page.
    #[serde(default)]
    before: String,
}

impl Filters {
    /// This page's link, older than `before`.
    fn older(&self, before: AuditId) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("mode", &self.mode),
            ("action", &self.action),
            ("since", &self.since),
            ("account", &self.account),
        ] {
            if !v.is_empty() {
                parts.push(format!("{k}={}", url_encode(v)));
            }
        }
        parts.push(format!("before={before}"));
        format!("{SECTION}?{}", parts.join("&"))
    }

    /// The service's filter, or what is wrong with the form.
    fn filter(&self) -> Result<AuditFilter, String> {
        let action = match self.action.as_str() {
            "" => None,
            a => Some(a.parse::<AuditAction>()?),
        };
        let since = match self.since.trim() {
            "" => None,
            d => Some(
                Timestamp::parse_rfc3339(&format!("{d}T00:00:00Z"))
                    .ok_or_else(|| format!("{d:?} is not a day (YYYY-MM-DD)."))?,
            ),
        };
        let account = match self.account.trim() {
            "" => None,
            a => Some(AccountId::parse(a).map_err(|_| format!("{a:?} is not an account id."))?),
        };
        let before = match self.before.as_str() {
            "" => None,
            b => Some(AuditId::parse(b).map_err(|e| e.to_string())?),
        };
        Ok(AuditFilter {
            account,
            action,
            since,
            before,
            limit: PAGE,
        })
    }
}

pub struct Row {
    pub id: String,
    pub at: String,
    pub action: &'static str,
    pub actor: String,
    pub target: String,
    pub account: String,
    pub changes: String,
    pub from: String,
}

impl Row {
    fn new(e: &AuditEvent) -> Self {
        let actor = match &e.actor.email {
            Some(email) => format!("{} ({})", email.as_str(), e.actor.kind.as_str()),
            None => format!("{} ({})", e.actor.id, e.actor.kind.as_str()),
        };
        let changes = e
            .changes
            .iter()
            .map(|(field, [before, after])| format!("{field}: {before} → {after}"))
            .collect::<Vec<_>>()
            .join("; ");
        Row {
            id: e.id.to_string(),
            at: e.at.rfc3339(),
            action: e.action.as_str(),
            actor,
            target: format!("{} {}", e.target.kind, e.target.id),
            account: e.account_id.map(|a| a.to_string()).unwrap_or_default(),
            changes,
            from: match (&e.ip, &e.user_agent) {
                (Some(ip), Some(ua)) => format!("{ip} · {ua}"),
                (Some(ip), None) => ip.clone(),
                (None, Some(ua)) => ua.clone(),
                (None, None) => String::new(),
            },
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/audit.html")]
struct AuditPage {
    chrome: Chrome,
    filters: Filters,
    actions: Vec<&'static str>,
    /// Admins see every account's events, and the account column.
    all_accounts: bool,
    error: Option<String>,
    rows: Vec<Row>,
    next_page: Option<String>,
}

pub async fn page(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(filters): Query<Filters>,
) -> Response {
    let actor = Actor::User(&session.user);
    if !audit::may_read(actor) {
        return error_page(
            StatusCode::FORBIDDEN,
            "The audit log is for the account's owners and admins.",
        );
    }
    let mut page = AuditPage {
        chrome: session.chrome(SECTION, filters.mode == "test"),
        actions: AuditAction::ALL.iter().map(|a| a.as_str()).collect(),
        all_accounts: session.user.role == Role::Admin,
        error: None,
        rows: Vec::new(),
        next_page: None,
        filters,
    };
    let filter = match page.filters.filter() {
        Ok(f) => f,
        Err(message) => {
            page.error = Some(message);
            return render_with(StatusCode::BAD_REQUEST, &page);
        }
    };
    let events = match audit::list(&*app.store, actor, filter).await {
        Ok(events) => events,
        Err(AuditError::Store(e)) => return store_error(e),
        Err(AuditError::Forbidden) => {
            return error_page(StatusCode::FORBIDDEN, "The audit log is not yours to read.");
        }
    };
    if events.len() as i64 == PAGE {
        page.next_page = events.last().map(|e| page.filters.older(e.id));
    }
    page.rows = events.iter().map(Row::new).collect();
    render(&page)
}
