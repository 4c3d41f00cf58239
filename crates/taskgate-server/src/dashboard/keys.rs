//! The API Keys area: the account's keys of the mode shown, paged; creating
//! one (presets Full access and Read-only, or custom scopes, APIs and expiry)
//! with its secret shown once; revoking and rolling, each after a
//! confirmation. Owners and admins change keys; members only look.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{ApiList, ApiSlug, KeyId, KeyType, Mode, Scope, Timestamp};
use taskgate_store::KeyRecord;

use super::pages::{Chrome, not_found, redirect, render, render_with, when, when_opt};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::service::Actor;
use crate::service::keys::{self, KeyError, NewKey};
use crate::state::AppState;

const PAGE: usize = 50;

#[derive(Deserialize, Default)]
pub struct ModeQuery {
    mode: Option<String>,
    after: Option<String>,
}

impl ModeQuery {
    fn test(&self) -> bool {
        self.mode.as_deref() == Some("test")
    }
}

struct Row {
    id: String,
    name: String,
    key_type: &'static str,
    hint: String,
    scopes: String,
    apis: String,
    created: String,
    last_used: String,
    expires: String,
    status: &'static str,
}

impl Row {
    fn new(k: &KeyRecord, now: Timestamp) -> Self {
        Row {
            id: k.id.to_string(),
            name: k.name.clone(),
            key_type: k.key_type.as_str(),
            hint: k.hint.clone(),
            scopes: if k.key_type == KeyType::Restricted {
                k.scopes
                    .0
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                "full access".to_owned()
            },
            apis: match &k.allowed_apis {
                Some(list) => list
                    .0
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                None => "all".to_owned(),
            },
            created: when(k.created_at),
            last_used: when_opt(k.last_used_at),
            expires: k.expires_at.map(when).unwrap_or_else(|| "never".to_owned()),
            status: k.state_at(now).as_str(),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/keys.html")]
struct KeysPage {
    chrome: Chrome,
    may_manage: bool,
    summary: String,
    rows: Vec<Row>,
    next_page: Option<String>,
}

fn mode_of(test: bool) -> Mode {
    if test { Mode::Test } else { Mode::Live }
}

pub async fn list(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(q): Query<ModeQuery>,
) -> Response {
    let mode = mode_of(q.test());
    let now = app.clock.now();
    let after = q.after.as_deref().and_then(|a| KeyId::parse(a).ok());
    let actor = Actor::User(&session.user);
    let page = match keys::page(
        &*app.store,
        actor,
        session.account.id,
        mode,
        after,
        PAGE,
        now,
    )
    .await
    {
        Ok(p) => p,
        Err(KeyError::Store(e)) => return store_error(e),
        // The session's own account: there is no other refusal.
        Err(_) => return not_found(),
    };
    let next_page = page.more.then(|| {
        let last = page
            .keys
            .last()
            .map(|k| k.id.to_string())
            .unwrap_or_default();
        let mode = if q.test() { "mode=test&" } else { "" };
        format!("/dashboard/keys?{mode}after={last}")
    });
    let all = page.total;
    render(&KeysPage {
        chrome: session.chrome("/dashboard/keys", q.test()),
        may_manage: session.user.role.manages_account(),
        summary: format!(
            "{all} {} {}, {} active.",
            mode.as_str(),
            if all == 1 { "key" } else { "keys" },
            page.active
        ),
        rows: page.keys.iter().map(|k| Row::new(k, page.now)).collect(),
        next_page,
    })
}

#[derive(Template)]
#[template(path = "dashboard/key_new.html")]
struct NewKeyPage {
    chrome: Chrome,
    error: Option<String>,
    name: String,
    scopes: Vec<&'static str>,
    apis: Vec<String>,
}

fn forbidden_to_members() -> Response {
    super::pages::error_page(
        StatusCode::FORBIDDEN,
        "Only the account's owners can create, roll or revoke keys.",
    )
}

fn new_key_page(
    app: &AppState,
    session: &Session,
    test: bool,
    error: Option<String>,
    name: String,
) -> NewKeyPage {
    NewKeyPage {
        chrome: session.chrome("/dashboard/keys", test),
        error,
        name,
        scopes: Scope::ALL.iter().map(|s| s.as_str()).collect(),
        apis: app
            .catalog
            .all()
            .iter()
            .map(|e| e.slug.as_str().to_owned())
            .collect(),
    }
}

pub async fn new_form(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(q): Query<ModeQuery>,
) -> Response {
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    render(&new_key_page(&app, &session, q.test(), None, String::new()))
}

/// The create form: repeated `scope` and `api` fields arrive as pairs.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct CreateForm(Vec<(String, String)>);

impl CreateForm {
    fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// `7d`, `24h`, `1h`, `0`: milliseconds.
fn period_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s == "0" {
        return Some(0);
    }
    let (n, unit) = s.split_at(s.len().checked_sub(1)?);
    let n: i64 = n.parse().ok().filter(|n| (1..=3650).contains(n))?;
    match unit {
        "h" => Some(n * 3_600_000),
        "d" => Some(n * 86_400_000),
        _ => None,
    }
}

#[derive(Template)]
#[template(path = "dashboard/key_secret.html")]
struct SecretPage {
    chrome: Chrome,
    title: String,
    name: String,
    secret: String,
    note: Option<String>,
}

pub async fn create(State(app): State<Arc<AppState>>, changes: Changes<CreateForm>) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    let test = form.one("mode") == Some("test");
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let name = form.one("name").unwrap_or_default().trim().to_owned();
    let again = |message: &str| {
        render_with(
            StatusCode::BAD_REQUEST,
            &new_key_page(&app, &session, test, Some(message.to_owned()), name.clone()),
        )
    };
    if name.is_empty() || name.chars().count() > 200 {
        return again("A key needs a name of 1 to 200 characters.");
    }
    let full_type = if test { KeyType::Test } else { KeyType::Live };
    let (key_type, scopes, apis) = match form.one("preset").unwrap_or("full") {
        "full" => (full_type, None, None),
        "read" => (KeyType::Restricted, Some(vec![Scope::ApisRead]), None),
        "custom" => {
            let scopes = form.all("scope");
            if scopes.is_empty() {
                return again("Choose at least one scope for a custom key.");
            }
            let scopes = match scopes.iter().map(|s| s.trim().parse::<Scope>()).collect() {
                Ok(scopes) => scopes,
                Err(e) => return again(&e),
            };
            let apis = match form
                .all("api")
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(ApiSlug::parse)
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(apis) => apis,
                Err(e) => return again(&e),
            };
            (
                KeyType::Restricted,
                Some(scopes),
                (!apis.is_empty()).then_some(ApiList(apis)),
            )
        }
        _ => return again("Choose Full access, Read-only or Custom."),
    };
    if test && key_type == KeyType::Restricted {
        return again("Restricted keys are live keys: switch off test mode to create one.");
    }
    let expires_in_ms = match form.one("expires").unwrap_or("never") {
        "never" => None,
        other => match period_ms(other) {
            Some(ms) if ms > 0 => Some(ms),
            _ => return again("Choose when the key expires."),
        },
    };
    let new = NewKey {
        key_type,
        name: name.clone(),
        scopes,
        apis,
        expires_in_ms,
    };
    let actor = Actor::User(&session.user);
    match keys::create(
        &*app.store,
        actor,
        &origin,
        session.account.id,
        new,
        app.clock.now(),
    )
    .await
    {
        Ok(made) => render(&SecretPage {
            chrome: session.chrome("/dashboard/keys", test),
            title: "Key created".to_owned(),
            name,
            secret: made.secret.expose().to_owned(),
            note: None,
        }),
        Err(e) => match words::key_error(e) {
            Ok(message) => again(&message),
            Err(e) => store_error(e),
        },
    }
}

/// The key `id` of the session's account; another account's is not found.
async fn own_key(app: &AppState, session: &Session, id: &str) -> Result<KeyRecord, Response> {
    let id = KeyId::parse(id).map_err(|_| not_found())?;
    match keys::get(&*app.store, Actor::User(&session.user), id).await {
        // The keys pages show the session's account only, an admin's too.
        Ok(k) if k.account_id == session.account.id => Ok(k),
        Ok(_) | Err(KeyError::NotFound(_)) => Err(not_found()),
        Err(KeyError::Store(e)) => Err(store_error(e)),
        Err(_) => Err(not_found()),
    }
}

#[derive(Template)]
#[template(path = "dashboard/key_confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    title: &'static str,
    name: String,
    hint: String,
    explanation: &'static str,
    action: String,
    button: &'static str,
    roll: bool,
}

pub async fn confirm_revoke(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    confirm(&app, session, &id, false).await
}

pub async fn confirm_roll(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    confirm(&app, session, &id, true).await
}

async fn confirm(app: &AppState, session: Session, id: &str, roll: bool) -> Response {
    let key = match own_key(app, &session, id).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let page = ConfirmPage {
        chrome: session.chrome("/dashboard/keys", key.mode == Mode::Test),
        title: if roll { "Roll key" } else { "Revoke key" },
        name: key.name.clone(),
        hint: key.hint.clone(),
        explanation: if roll {
            "Rolling makes a new secret for this key now. The old secret keeps working for the time you choose, so you can switch your application over."
        } else {
            "Revoking stops this key at once (within 5 seconds everywhere). Requests with it will be refused. This cannot be undone."
        },
        action: format!(
            "/dashboard/keys/{}/{}",
            key.id,
            if roll { "roll" } else { "revoke" }
        ),
        button: if roll { "Roll key" } else { "Revoke key" },
        roll,
    };
    render(&page)
}

#[derive(Deserialize)]
pub struct RevokeForm {}

pub async fn revoke(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<RevokeForm>,
) -> Response {
    let Changes {
        session, origin, ..
    } = changes;
    let key = match own_key(&app, &session, &id).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    if let Err(e) = keys::revoke(
        &*app.store,
        Actor::User(&session.user),
        &origin,
        key.id,
        app.clock.now(),
    )
    .await
    {
        return match words::key_error(e) {
            Ok(message) => super::pages::error_page(StatusCode::CONFLICT, &message),
            Err(e) => store_error(e),
        };
    }
    let mode = if key.mode == Mode::Test {
        "?mode=test"
    } else {
        ""
    };
    redirect(&format!("/dashboard/keys{mode}"))
}

#[derive(Deserialize)]
pub struct RollForm {
    grace: String,
}

pub async fn roll(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<RollForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    let key = match own_key(&app, &session, &id).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let Some(grace) = period_ms(&form.grace) else {
        return super::session::bad_form();
    };
    match keys::roll(
        &*app.store,
        Actor::User(&session.user),
        &origin,
        key.id,
        grace,
        app.clock.now(),
    )
    .await
    {
        Ok(new) => render(&SecretPage {
            chrome: session.chrome("/dashboard/keys", key.mode == Mode::Test),
            title: "Key rolled".to_owned(),
            name: key.name.clone(),
            secret: new.secret.expose().to_owned(),
            note: Some(format!(
                "The old key ({}) {}.",
                key.hint,
                if grace == 0 {
                    "stopped working now".to_owned()
                } else {
                    format!("works until {}", when(new.key.created_at.plus_ms(grace)))
                }
            )),
        }),
        Err(e) => match words::key_error(e) {
            Ok(message) => super::pages::error_page(StatusCode::CONFLICT, &message),
            Err(e) => store_error(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::period_ms;

    #[test]
    fn periods() {
        assert_eq!(period_ms("0"), Some(0));
        assert_eq!(period_ms("24h"), Some(86_400_000));
        assert_eq!(period_ms("7d"), Some(7 * 86_400_000));
        for bad in ["", "h", "-1h", "7w", "99999d", "1.5h"] {
            assert_eq!(period_ms(bad), None, "{bad}");
        }
    }
}
