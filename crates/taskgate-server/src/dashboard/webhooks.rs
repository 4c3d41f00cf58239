//! The Webhooks area: the account's endpoints of the mode shown; adding one
//! (URL, events, description); and the secret that signs the account's calls'
//! own webhooks. An endpoint's page is `webhook_endpoint.rs`. Who manages
//! webhooks is who manages keys: owners and admins change them, members only
//! look (and see no secret).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{Mode, Timestamp, WebhookEndpointId, WebhookEvent};
use taskgate_store::WebhookEndpoint;

use super::pages::{Chrome, error_page, not_found, redirect, render, render_with, when};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::service::Actor;
use crate::service::webhooks::{self, NewEndpoint, Owner, WebhookError};
use crate::state::AppState;

pub(super) const SECTION: &str = "/dashboard/webhooks";
const ENDPOINTS_PAGE: i64 = 50;
/// The events an endpoint subscribes to (a test event is sent whatever they
/// are).
const SUBSCRIBABLE: [WebhookEvent; 4] = [
    WebhookEvent::TaskRunning,
    WebhookEvent::TaskSucceeded,
    WebhookEvent::TaskFailed,
    WebhookEvent::TaskCancelled,
];

fn mode_of(test: bool) -> Mode {
    if test { Mode::Test } else { Mode::Live }
}

pub(super) fn mode_query(mode: Mode) -> &'static str {
    if mode == Mode::Test { "?mode=test" } else { "" }
}

pub(super) fn owner(session: &Session, mode: Mode) -> Owner {
    Owner {
        account: session.account.id,
        mode,
    }
}

pub(super) fn forbidden_to_members() -> Response {
    error_page(
        StatusCode::FORBIDDEN,
        "Only the account's owners can change its webhooks or see their secrets.",
    )
}

/// The page of a refusal the form cannot show, or the store's error page.
pub(super) fn refused(e: WebhookError) -> Response {
    let status = match e {
        WebhookError::EndpointNotFound(_) | WebhookError::DeliveryNotFound(_) => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::BAD_REQUEST,
    };
    match words::webhook_error(e) {
        Ok(message) => error_page(status, &message),
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    mode: Option<String>,
    after: Option<String>,
}

pub(super) struct EndpointRow {
    pub(super) id: String,
    pub(super) url: String,
    pub(super) description: String,
    pub(super) events: String,
    pub(super) status: &'static str,
    pub(super) status_text: &'static str,
    pub(super) created: String,
}

fn status_of(e: &WebhookEndpoint) -> (&'static str, &'static str) {
    match e.disabled.as_deref() {
        None => ("enabled", "enabled"),
        Some("gone") => ("disabled", "disabled: the receiver answered 410 Gone"),
        Some("failing") => ("disabled", "disabled: every attempt failed for too long"),
        Some(_) => ("disabled", "disabled"),
    }
}

impl EndpointRow {
    pub(super) fn new(e: &WebhookEndpoint) -> Self {
        let (status, status_text) = status_of(e);
        EndpointRow {
            id: e.id.to_string(),
            url: e.url.clone(),
            description: e.description.clone().unwrap_or_default(),
            events: e
                .events
                .list()
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            status,
            status_text,
            created: when(e.created_at),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/webhooks.html")]
struct ListPage {
    chrome: Chrome,
    may_manage: bool,
    mode: &'static str,
    rows: Vec<EndpointRow>,
    next_page: Option<String>,
}

pub async fn list(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(q): Query<ListQuery>,
) -> Response {
    let test = q.mode.as_deref() == Some("test");
    let mode = mode_of(test);
    let after = q
        .after
        .as_deref()
        .and_then(|a| WebhookEndpointId::parse(a).ok());
    let (endpoints, more) =
        match webhooks::list(&app, owner(&session, mode), after, ENDPOINTS_PAGE).await {
            Ok(page) => page,
            Err(e) => return refused(e),
        };
    let next_page = more.then(|| {
        let last = endpoints
            .last()
            .map(|e| e.id.to_string())
            .unwrap_or_default();
        let mode = if test { "mode=test&" } else { "" };
        format!("{SECTION}?{mode}after={last}")
    });
    render(&ListPage {
        chrome: session.chrome(SECTION, test),
        may_manage: session.user.role.manages_account(),
        mode: mode.as_str(),
        rows: endpoints.iter().map(EndpointRow::new).collect(),
        next_page,
    })
}

#[derive(Template)]
#[template(path = "dashboard/webhook_new.html")]
struct NewPage {
    chrome: Chrome,
    error: Option<String>,
    url: String,
    description: String,
    /// Each event and whether it is ticked.
    events: Vec<(&'static str, bool)>,
}

fn new_page(
    session: &Session,
    test: bool,
    error: Option<String>,
    url: String,
    description: String,
    ticked: &dyn Fn(WebhookEvent) -> bool,
) -> NewPage {
    NewPage {
        chrome: session.chrome(SECTION, test),
        error,
        url,
        description,
        events: SUBSCRIBABLE
            .iter()
            .map(|e| (e.as_str(), ticked(*e)))
            .collect(),
    }
}

#[derive(Deserialize, Default)]
pub struct ModeQuery {
    mode: Option<String>,
}

pub async fn new_form(session: Session, Query(q): Query<ModeQuery>) -> Response {
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let test = q.mode.as_deref() == Some("test");
    render(&new_page(
        &session,
        test,
        None,
        String::new(),
        String::new(),
        &|e| taskgate_core::WebhookEvents::DEFAULT.contains(e),
    ))
}

/// The add form: the repeated `event` field arrives as pairs.
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
}

pub async fn create(State(app): State<Arc<AppState>>, changes: Changes<CreateForm>) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let test = form.one("mode") == Some("test");
    let url = form.one("url").unwrap_or_default().trim().to_owned();
    let description = form
        .one("description")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut events = Vec::new();
    for (k, v) in &form.0 {
        if k == "event" {
            match v.parse::<WebhookEvent>() {
                Ok(e) if SUBSCRIBABLE.contains(&e) => events.push(e),
                _ => return super::session::bad_form(),
            }
        }
    }
    let again = |message: String| {
        render_with(
            StatusCode::BAD_REQUEST,
            &new_page(
                &session,
                test,
                Some(message),
                url.clone(),
                description.clone(),
                &|e| events.contains(&e),
            ),
        )
    };
    let new = NewEndpoint {
        url: url.clone(),
        events: Some(events.clone()),
        description: (!description.is_empty()).then(|| description.clone()),
    };
    match webhooks::create(
        &app,
        owner(&session, mode_of(test)),
        &Actor::User(&session.user).audit(&origin),
        new,
    )
    .await
    {
        Ok(made) => redirect(&format!("{SECTION}/{}?done=created", made.id)),
        Err(e) => match words::webhook_error(e) {
            Ok(message) => again(message),
            Err(e) => store_error(e),
        },
    }
}

/// The endpoint `id` of the session's account, of either mode; another
/// account's is not found.
pub(super) async fn own_endpoint(
    app: &AppState,
    session: &Session,
    id: &str,
) -> Result<WebhookEndpoint, Response> {
    let id = WebhookEndpointId::parse(id).map_err(|_| not_found())?;
    for mode in [Mode::Live, Mode::Test] {
        match webhooks::find(app, owner(session, mode), id).await {
            Ok(e) => return Ok(e),
            Err(WebhookError::EndpointNotFound(_)) => continue,
            Err(e) => return Err(refused(e)),
        }
    }
    Err(not_found())
}
#[derive(Template)]
#[template(path = "dashboard/webhook_secret.html")]
pub(super) struct SecretPage {
    pub(super) chrome: Chrome,
    pub(super) title: &'static str,
    pub(super) what: String,
    pub(super) secret: String,
    pub(super) note: Option<String>,
    pub(super) back: String,
}

/// Until when a rotated secret keeps signing beside the new one.
pub(super) fn overlap_note(app: &AppState) -> String {
    let ms = app.config.webhooks.rotation_overlap.as_millis();
    let until = Timestamp::from_unix_ms(app.clock.now().unix_ms().saturating_add(ms));
    format!(
        "The old secret keeps signing beside this one until {}: switch your receiver over before then.",
        when(until)
    )
}

/// An endpoint's change by an owner: the endpoint, or the page to answer.
#[derive(Deserialize)]
pub struct SigningForm {
    #[serde(default)]
    mode: String,
}

pub async fn reveal_signing_secret(
    State(app): State<Arc<AppState>>,
    changes: Changes<SigningForm>,
) -> Response {
    signing_secret(&app, changes, false).await
}

pub async fn rotate_signing_secret(
    State(app): State<Arc<AppState>>,
    changes: Changes<SigningForm>,
) -> Response {
    signing_secret(&app, changes, true).await
}

async fn signing_secret(app: &AppState, changes: Changes<SigningForm>, rotate: bool) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let test = form.mode == "test";
    let owner = owner(&session, mode_of(test));
    let secret = if rotate {
        let audit = Actor::User(&session.user).audit(&origin);
        webhooks::rotate_signing_secret(app, owner, &audit).await
    } else {
        webhooks::signing_secret(app, owner).await
    };
    match secret {
        Ok(secret) => render(&SecretPage {
            chrome: session.chrome(SECTION, test),
            title: if rotate {
                "Signing secret rotated"
            } else {
                "Signing secret"
            },
            what: format!(
                "Secret that signs the webhooks of this account's {} calls",
                owner.mode.as_str()
            ),
            secret: secret.expose(),
            note: rotate.then(|| overlap_note(app)),
            back: format!("{SECTION}{}", mode_query(owner.mode)),
        }),
        Err(e) => refused(e),
    }
}
