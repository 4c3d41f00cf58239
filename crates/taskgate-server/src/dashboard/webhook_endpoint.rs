//! An endpoint's page: what it is, its deliveries (newest first, with their
//! attempts and a retry), and what its owners do to it: reveal or rotate its
//! secret, send a test event, disable or enable it, delete it. Who may is as
//! for the whole section (`webhooks.rs`).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{Mode, WebhookDeliveryId};
use taskgate_store::WebhookDelivery;

use super::pages::{Chrome, not_found, redirect, render, when};
use super::session::{Changes, Session};
use super::webhooks::{
    EndpointRow, SECTION, SecretPage, managed_endpoint, mode_query, overlap_note, own_endpoint,
    owner, refused,
};
use crate::service::Actor;
use crate::service::webhooks::{self, DeliveryFilter, EndpointChanges};
use crate::state::AppState;

const DELIVERIES_PAGE: i64 = 20;

/// The form of a button: its CSRF token only.
#[derive(Deserialize)]
pub struct EmptyForm {}

struct AttemptRow {
    at: String,
    http_status: String,
    error: String,
    duration: String,
}

struct DeliveryRow {
    id: String,
    event: &'static str,
    status: &'static str,
    created: String,
    attempts: Vec<AttemptRow>,
    next_attempt: String,
}

impl DeliveryRow {
    fn new(d: &WebhookDelivery) -> Self {
        DeliveryRow {
            id: d.id().to_string(),
            event: d.event_type.as_str(),
            status: d.status.as_str(),
            created: when(d.created_at),
            attempts: d
                .attempts
                .0
                .iter()
                .map(|a| AttemptRow {
                    at: when(a.at),
                    http_status: a
                        .http_status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "none".to_owned()),
                    error: a.error.clone().unwrap_or_default(),
                    duration: format!("{} ms", a.duration_ms),
                })
                .collect(),
            next_attempt: d
                .next_attempt_at
                .map(when)
                .unwrap_or_else(|| "none".to_owned()),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/webhook.html")]
struct EndpointPage {
    chrome: Chrome,
    may_manage: bool,
    notice: Option<&'static str>,
    endpoint: EndpointRow,
    enabled: bool,
    mode: &'static str,
    deliveries: Vec<DeliveryRow>,
    older: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct EndpointQuery {
    done: Option<String>,
    before: Option<String>,
}

fn notice(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "created" => "Endpoint added.",
        "saved" => "Endpoint saved.",
        "test" => "A test event is on its way: it is listed below.",
        "enabled" => "Endpoint enabled.",
        "disabled" => "Endpoint disabled: no events are sent to it until it is enabled.",
        "retried" => "The delivery will be sent again now.",
        _ => return None,
    })
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
    Query(q): Query<EndpointQuery>,
) -> Response {
    let endpoint = match own_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let filter = DeliveryFilter {
        endpoint_id: Some(endpoint.id),
        task_id: None,
        status: None,
        before: q
            .before
            .as_deref()
            .and_then(|b| WebhookDeliveryId::parse(b).ok()),
        limit: DELIVERIES_PAGE,
    };
    let (deliveries, more) =
        match webhooks::deliveries(&app, owner(&session, endpoint.mode), filter).await {
            Ok(page) => page,
            Err(e) => return refused(e),
        };
    let older = more.then(|| {
        let last = deliveries
            .last()
            .map(|d| d.id().to_string())
            .unwrap_or_default();
        format!("{SECTION}/{}?before={last}", endpoint.id)
    });
    render(&EndpointPage {
        chrome: session.chrome(SECTION, endpoint.mode == Mode::Test),
        may_manage: session.user.role.manages_account(),
        notice: notice(q.done.as_deref()),
        endpoint: EndpointRow::new(&endpoint),
        enabled: endpoint.disabled.is_none(),
        mode: endpoint.mode.as_str(),
        deliveries: deliveries.iter().map(DeliveryRow::new).collect(),
        older,
    })
}

pub async fn reveal_secret(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    let session = changes.session;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    render(&SecretPage {
        chrome: session.chrome(SECTION, endpoint.mode == Mode::Test),
        title: "Endpoint secret",
        what: format!("Signing secret of {}", endpoint.url),
        secret: endpoint.secret.expose(),
        note: None,
        back: format!("{SECTION}/{}", endpoint.id),
    })
}

pub async fn rotate_secret(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    let Changes {
        session, origin, ..
    } = changes;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let audit = Actor::User(&session.user).audit(&origin);
    match webhooks::rotate_secret(&app, owner(&session, endpoint.mode), &audit, endpoint.id).await {
        Ok(secret) => render(&SecretPage {
            chrome: session.chrome(SECTION, endpoint.mode == Mode::Test),
            title: "Secret rotated",
            what: format!("New signing secret of {}", endpoint.url),
            secret: secret.expose(),
            note: Some(overlap_note(&app)),
            back: format!("{SECTION}/{}", endpoint.id),
        }),
        Err(e) => refused(e),
    }
}

pub async fn send_test(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    let session = changes.session;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    match webhooks::send_test(&app, owner(&session, endpoint.mode), endpoint.id).await {
        Ok(_) => redirect(&format!("{SECTION}/{}?done=test", endpoint.id)),
        Err(e) => refused(e),
    }
}

pub async fn enable(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    set_enabled(&app, changes, &id, true).await
}

pub async fn disable(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    set_enabled(&app, changes, &id, false).await
}

async fn set_enabled(
    app: &AppState,
    changes: Changes<EmptyForm>,
    id: &str,
    enabled: bool,
) -> Response {
    let Changes {
        session, origin, ..
    } = changes;
    let endpoint = match managed_endpoint(app, &session, id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let changes = EndpointChanges {
        enabled: Some(enabled),
        ..EndpointChanges::default()
    };
    let audit = Actor::User(&session.user).audit(&origin);
    match webhooks::update(
        app,
        owner(&session, endpoint.mode),
        &audit,
        endpoint.id,
        changes,
    )
    .await
    {
        Ok(_) => redirect(&format!(
            "{SECTION}/{}?done={}",
            endpoint.id,
            if enabled { "enabled" } else { "disabled" }
        )),
        Err(e) => refused(e),
    }
}

#[derive(Template)]
#[template(path = "dashboard/webhook_delete.html")]
struct DeletePage {
    chrome: Chrome,
    id: String,
    url: String,
}

pub async fn confirm_delete(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    render(&DeletePage {
        chrome: session.chrome(SECTION, endpoint.mode == Mode::Test),
        id: endpoint.id.to_string(),
        url: endpoint.url.clone(),
    })
}

pub async fn delete(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<EmptyForm>,
) -> Response {
    let Changes {
        session, origin, ..
    } = changes;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let audit = Actor::User(&session.user).audit(&origin);
    match webhooks::delete(&app, owner(&session, endpoint.mode), &audit, endpoint.id).await {
        Ok(()) => redirect(&format!("{SECTION}{}", mode_query(endpoint.mode))),
        Err(e) => refused(e),
    }
}

pub async fn retry(
    State(app): State<Arc<AppState>>,
    Path((id, delivery)): Path<(String, String)>,
    changes: Changes<EmptyForm>,
) -> Response {
    let session = changes.session;
    let endpoint = match managed_endpoint(&app, &session, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let Ok(delivery) = WebhookDeliveryId::parse(&delivery) else {
        return not_found();
    };
    let owner = owner(&session, endpoint.mode);
    // The delivery must be this endpoint's, as its page showed it.
    match webhooks::delivery(&app, owner, delivery).await {
        Ok(d) if d.endpoint_id == Some(endpoint.id) => {}
        Ok(_) => return not_found(),
        Err(e) => return refused(e),
    }
    match webhooks::retry(&app, owner, delivery).await {
        Ok(_) => redirect(&format!("{SECTION}/{}?done=retried", endpoint.id)),
        Err(e) => refused(e),
    }
}

#[cfg(test)]
mod tests {
    use super::notice;

    #[test]
    fn notices() {
        assert_eq!(
            notice(Some("test")).map(|n| n.starts_with("A test")),
            Some(true)
        );
        assert_eq!(notice(Some("<script>")), None);
        assert_eq!(notice(None), None);
    }
}
