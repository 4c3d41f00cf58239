//! The Webhooks area: the account's endpoints of the mode shown; adding one
//! (URL, events, description) and editing one; and the secret that signs the account's calls'
//! own webhooks. An endpoint's page is `webhook_endpoint.rs`. Who manages
//! webhooks is who manages keys: owners and admins change them, members only
//! look (and see no secret).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{Mode, Timestamp, WebhookEndpointId, WebhookEvent};
use taskgate_store::WebhookEndpoint;

use super::pages::{Chrome, error_page, not_found, redirect, render, render_with, when};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::service::Actor;
use crate::service::webhooks::{self, EndpointChanges, NewEndpoint, Owner, WebhookError};
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

/// The form that adds an endpoint, or edits one (`editing` is its id).
#[derive(Template)]
#[template(path = "dashboard/webhook_new.html")]
struct FormPage {
    chrome: Chrome,
    editing: Option<String>,
    error: Option<String>,
    url: String,
    description: String,
    /// Each event and whether it is ticked.
    events: Vec<(&'static str, bool)>,
}

impl FormPage {
    fn new(
        session: &Session,
        test: bool,
        editing: Option<WebhookEndpointId>,
        fields: &FormFields,
    ) -> Self {
        FormPage {
            chrome: session.chrome(SECTION, test),
            editing: editing.map(|id| id.to_string()),
            error: None,
            url: fields.url.clone(),
            description: fields.description.clone(),
            events: SUBSCRIBABLE
                .iter()
                .map(|e| (e.as_str(), fields.events.contains(e)))
                .collect(),
        }
    }

    /// The form again, saying why it was refused.
    fn refused(mut self, e: WebhookError) -> Response {
        match words::webhook_error(e) {
            Ok(message) => {
                self.error = Some(message);
                render_with(StatusCode::BAD_REQUEST, &self)
            }
            Err(e) => store_error(e),
        }
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
    let fields = FormFields {
        url: String::new(),
        description: String::new(),
        events: taskgate_core::WebhookEvents::DEFAULT.list(),
    };
    render(&FormPage::new(&session, test, None, &fields))
}

/// The add and edit forms: the repeated `event` field arrives as pairs.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct EndpointForm(Vec<(String, String)>);

impl EndpointForm {
    fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Its fields, or `None` when an event is not one an endpoint takes
    /// (which only a forged form sends).
    fn fields(&self) -> Option<FormFields> {
        let mut events = Vec::new();
        for (k, v) in &self.0 {
            if k == "event" {
                match v.parse::<WebhookEvent>() {
                    Ok(e) if SUBSCRIBABLE.contains(&e) => events.push(e),
                    _ => return None,
                }
            }
        }
        let field = |name| self.one(name).unwrap_or_default().trim().to_owned();
        Some(FormFields {
            url: field("url"),
            description: field("description"),
            events,
        })
    }
}

/// What the form holds.
struct FormFields {
    url: String,
    description: String,
    events: Vec<WebhookEvent>,
}

impl FormFields {
    fn of(e: &WebhookEndpoint) -> Self {
        FormFields {
            url: e.url.clone(),
            description: e.description.clone().unwrap_or_default(),
            events: e.events.list(),
        }
    }

    fn description(&self) -> Option<String> {
        (!self.description.is_empty()).then(|| self.description.clone())
    }
}

pub async fn create(State(app): State<Arc<AppState>>, changes: Changes<EndpointForm>) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    if !session.user.role.manages_account() {
        return forbidden_to_members();
    }
    let test = form.one("mode") == Some("test");
    let Some(fields) = form.fields() else {
        return super::session::bad_form();
    };
    let new = NewEndpoint {
        url: fields.url.clone(),
        events: Some(fields.events.clone()),
        description: fields.description(),
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
        Err(e) => FormPage::new(&session, test, None, &fields).refused(e),
    }
}

pub async fn edit_form(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let test = endpoint.mode == Mode::Test;
    render(&FormPage::new(
        &session,
        test,
        Some(endpoint.id),
        &FormFields::of(&endpoint),
    ))
}

/// Saves the edit form: its URL, events and description (whether it is
/// enabled has its own button).
pub async fn save(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EndpointForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let Some(fields) = form.fields() else {
        return super::session::bad_form();
    };
    // The form does not show `webhook.test` (a test is sent whatever an
    // endpoint subscribes to); a subscription to it made by the API stays.
    let mut events = fields.events.clone();
    if endpoint.events.contains(WebhookEvent::WebhookTest) {
        events.push(WebhookEvent::WebhookTest);
    }
    let changes = EndpointChanges {
        url: Some(fields.url.clone()),
        events: Some(events),
        description: Some(fields.description()),
        enabled: None,
    };
    let owner = owner(&session, endpoint.mode);
    let audit = Actor::User(&session.user).audit(&origin);
    match webhooks::update(&app, owner, &audit, endpoint.id, changes).await {
        Ok(_) => redirect(&format!("{SECTION}/{}?done=saved", endpoint.id)),
        Err(e) => {
            let test = endpoint.mode == Mode::Test;
            FormPage::new(&session, test, Some(endpoint.id), &fields).refused(e)
        }
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

/// [`own_endpoint`], for someone who manages it: a member is refused.
pub(super) async fn managed_endpoint(
    app: &AppState,
    session: &Session,
    id: &str,
) -> Result<WebhookEndpoint, Response> {
    let endpoint = own_endpoint(app, session, id).await?;
    if !session.user.role.manages_account() {
        return Err(forbidden_to_members());
    }
    Ok(endpoint)
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
