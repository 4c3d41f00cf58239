//! Webhooks as their owners manage them: an account's endpoints of one mode
//! (create, list, change, delete, their secrets, a test event), the secret
//! that signs its calls' own webhooks, and the log of deliveries with its
//! replay. What is sent, and when, is the outbox's (`outbox/`).

use std::net::IpAddr;

use serde_json::json;
use taskgate_core::{
    AccountId, AuditContext, DeliveryStatus, Mode, TaskId, Timestamp, WebhookDeliveryId,
    WebhookEndpointId, WebhookEvent, WebhookEvents, WebhookSecret,
};
use taskgate_providers::upstream::fetch::{FetchPolicy, is_public, url_refusal};
use taskgate_store::{
    DeliveryQuery, StoreError, WebhookDelivery, WebhookEndpoint, WebhookEndpointUpdate,
};

use crate::config::WebhooksConfig;
use crate::principal::Principal;
use crate::state::AppState;

/// The longest URL an endpoint or a call's webhook may have.
pub const MAX_URL_LEN: usize = 2_048;
/// The longest description of an endpoint.
pub const MAX_DESCRIPTION_LEN: usize = 500;
/// The longest wait for a URL's name to resolve when it is set.
const DNS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// Endpoints an account holds per mode: each task's end is written once per
/// endpoint, so a key cannot multiply the work of every call.
pub const MAX_ENDPOINTS: i64 = 16;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("there is no webhook endpoint {0}")]
    EndpointNotFound(WebhookEndpointId),
    #[error("there is no webhook delivery {0}")]
    DeliveryNotFound(WebhookDeliveryId),
    /// A URL that cannot be a webhook's: `message` says why.
    #[error("{message}")]
    InvalidUrl { message: String },
    #[error("{message}")]
    InvalidEvents { message: String },
    #[error("the description is longer than {MAX_DESCRIPTION_LEN} characters")]
    DescriptionTooLong,
    #[error("the account has {MAX_ENDPOINTS} webhook endpoints of this mode already")]
    TooManyEndpoints,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The webhooks a caller manages: an account's of one mode.
#[derive(Clone, Copy, Debug)]
pub struct Owner {
    pub account: AccountId,
    pub mode: Mode,
}

impl Owner {
    /// What a key manages: its account's, of its mode.
    pub fn of(principal: &Principal) -> Self {
        Owner {
            account: principal.account_id,
            mode: principal.mode,
        }
    }
}

/// A new endpoint.
pub struct NewEndpoint {
    pub url: String,
    /// `None`: the ends (succeeded, failed, cancelled).
    pub events: Option<Vec<WebhookEvent>>,
    pub description: Option<String>,
}

/// An endpoint's changes; `None` leaves a field as it is.
#[derive(Default)]
pub struct EndpointChanges {
    pub url: Option<String>,
    pub events: Option<Vec<WebhookEvent>>,
    /// `Some(None)` removes it.
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
}

/// A call's own webhook: where its task's events go.
#[derive(Debug, Clone)]
pub struct CallWebhook {
    pub url: String,
    pub events: WebhookEvents,
}

/// The event set of `events`: not empty, each once.
pub fn event_set(events: &[WebhookEvent]) -> Result<WebhookEvents, WebhookError> {
    if events.is_empty() {
        return Err(WebhookError::InvalidEvents {
            message: "events needs at least one event".to_owned(),
        });
    }
    Ok(WebhookEvents::of(events))
}

/// `url` if a webhook may be sent to it: `http` or `https`, no user name or
/// password in it, and a host that is and resolves to public addresses only
/// (unless `webhooks.allow_private_networks`). Every attempt checks the
/// address it connects to again.
pub async fn check_url(config: &WebhooksConfig, url: &str) -> Result<String, WebhookError> {
    let bad = |why: &str| WebhookError::InvalidUrl {
        message: format!("The URL {why}"),
    };
    if url.len() > MAX_URL_LEN {
        return Err(bad(&format!("is longer than {MAX_URL_LEN} characters")));
    }
    let parsed = url::Url::parse(url).map_err(|_| bad("is not a valid absolute URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("must be an http or https URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("must not carry a user name or password"));
    }
    if config.allow_private_networks {
        return Ok(url.to_owned());
    }
    let policy = FetchPolicy::default();
    if url_refusal(&parsed, &policy).is_some() {
        return Err(bad(
            "must reach a public address (not loopback, private, link-local, multicast, CGNAT or metadata)",
        ));
    }
    if let Some(url::Host::Domain(host)) = parsed.host() {
        let port = parsed.port_or_known_default().unwrap_or(443);
        // A name that does not resolve now (or not within the wait) may
        // later: it is not refused; every attempt checks what it connects to.
        let lookup = tokio::net::lookup_host((host, port));
        if let Ok(Ok(addrs)) = tokio::time::timeout(DNS_WAIT, lookup).await {
            let addrs: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            if addrs.iter().any(|ip| !is_public(*ip)) {
                return Err(bad(&format!(
                    "resolves to an address that is not public ({host})"
                )));
            }
        }
    }
    Ok(url.to_owned())
}

fn check_description(d: Option<String>) -> Result<Option<String>, WebhookError> {
    match d {
        Some(d) if d.chars().count() > MAX_DESCRIPTION_LEN => Err(WebhookError::DescriptionTooLong),
        Some(d) if d.trim().is_empty() => Ok(None),
        d => Ok(d),
    }
}

pub async fn create(
    app: &AppState,
    owner: Owner,
    audit: &AuditContext,
    new: NewEndpoint,
) -> Result<WebhookEndpoint, WebhookError> {
    let url = check_url(&app.config.webhooks, &new.url).await?;
    let held = app
        .store
        .list_endpoints(owner.account, owner.mode, None, MAX_ENDPOINTS)
        .await?;
    if held.len() as i64 >= MAX_ENDPOINTS {
        return Err(WebhookError::TooManyEndpoints);
    }
    let events = match new.events {
        None => WebhookEvents::DEFAULT,
        Some(list) => event_set(&list)?,
    };
    let now = app.clock.now();
    let endpoint = WebhookEndpoint {
        id: WebhookEndpointId::at(now),
        account_id: owner.account,
        mode: owner.mode,
        url,
        events,
        description: check_description(new.description)?,
        disabled: None,
        secret: WebhookSecret::generate(),
        previous_secret: None,
        previous_until: None,
        failing_since: None,
        created_at: now,
    };
    app.store.create_endpoint(&endpoint, audit).await?;
    Ok(endpoint)
}

pub async fn find(
    app: &AppState,
    owner: Owner,
    id: WebhookEndpointId,
) -> Result<WebhookEndpoint, WebhookError> {
    app.store
        .get_endpoint(owner.account, owner.mode, id)
        .await?
        .ok_or(WebhookError::EndpointNotFound(id))
}

/// A page of endpoints after `after`, oldest first, and whether more follow.
pub async fn list(
    app: &AppState,
    owner: Owner,
    after: Option<WebhookEndpointId>,
    limit: i64,
) -> Result<(Vec<WebhookEndpoint>, bool), WebhookError> {
    let mut rows = app
        .store
        .list_endpoints(owner.account, owner.mode, after, limit + 1)
        .await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok((rows, more))
}

pub async fn update(
    app: &AppState,
    owner: Owner,
    audit: &AuditContext,
    id: WebhookEndpointId,
    changes: EndpointChanges,
) -> Result<WebhookEndpoint, WebhookError> {
    let url = match changes.url {
        Some(url) => Some(check_url(&app.config.webhooks, &url).await?),
        None => None,
    };
    let events = match changes.events {
        Some(list) => Some(event_set(&list)?),
        None => None,
    };
    let description = match changes.description {
        Some(d) => Some(check_description(d)?),
        None => None,
    };
    let update = WebhookEndpointUpdate {
        url,
        events,
        description,
        enabled: changes.enabled,
    };
    app.store
        .update_endpoint(owner.account, owner.mode, id, &update, audit)
        .await?
        .ok_or(WebhookError::EndpointNotFound(id))
}

pub async fn delete(
    app: &AppState,
    owner: Owner,
    audit: &AuditContext,
    id: WebhookEndpointId,
) -> Result<(), WebhookError> {
    if app
        .store
        .delete_endpoint(owner.account, owner.mode, id, app.clock.now(), audit)
        .await?
    {
        Ok(())
    } else {
        Err(WebhookError::EndpointNotFound(id))
    }
}

/// A new secret for the endpoint; the old one keeps signing beside it for
/// `webhooks.rotation_overlap`.
pub async fn rotate_secret(
    app: &AppState,
    owner: Owner,
    audit: &AuditContext,
    id: WebhookEndpointId,
) -> Result<WebhookSecret, WebhookError> {
    let secret = WebhookSecret::generate();
    let until = overlap_end(app);
    app.store
        .rotate_endpoint_secret(owner.account, owner.mode, id, &secret, until, audit)
        .await?
        .ok_or(WebhookError::EndpointNotFound(id))?;
    Ok(secret)
}

fn overlap_end(app: &AppState) -> Timestamp {
    let ms = app.config.webhooks.rotation_overlap.as_millis();
    Timestamp::from_unix_ms(app.clock.now().unix_ms().saturating_add(ms))
}

/// Sends the endpoint a `webhook.test` event now (enabled or not: its owner
/// asks). The delivery, to follow in the log.
pub async fn send_test(
    app: &AppState,
    owner: Owner,
    id: WebhookEndpointId,
) -> Result<WebhookDelivery, WebhookError> {
    let endpoint = find(app, owner, id).await?;
    let now = app.clock.now();
    let body = json!({
        "type": WebhookEvent::WebhookTest.as_str(),
        "timestamp": now.rfc3339(),
        "data": { "endpoint_id": endpoint.id, "mode": endpoint.mode },
    });
    let delivery = app
        .store
        .enqueue_test(&endpoint, &body.to_string(), now)
        .await?;
    app.outbox.wake();
    Ok(delivery)
}

/// The secret that signs the account's calls' own webhooks of this mode
/// (made at first use).
pub async fn signing_secret(app: &AppState, owner: Owner) -> Result<WebhookSecret, WebhookError> {
    let s = app
        .store
        .signing_secret(
            owner.account,
            owner.mode,
            &WebhookSecret::generate(),
            app.clock.now(),
        )
        .await?;
    Ok(s.secret)
}

pub async fn rotate_signing_secret(
    app: &AppState,
    owner: Owner,
    audit: &AuditContext,
) -> Result<WebhookSecret, WebhookError> {
    let secret = WebhookSecret::generate();
    let s = app
        .store
        .rotate_signing_secret(
            owner.account,
            owner.mode,
            &secret,
            overlap_end(app),
            app.clock.now(),
            audit,
        )
        .await?;
    Ok(s.secret)
}

/// What a page of the delivery log holds.
pub struct DeliveryFilter {
    pub endpoint_id: Option<WebhookEndpointId>,
    pub task_id: Option<TaskId>,
    pub status: Option<DeliveryStatus>,
    /// Older than this one (the cursor).
    pub before: Option<WebhookDeliveryId>,
    pub limit: i64,
}

/// A page of deliveries, newest first, and whether more follow.
pub async fn deliveries(
    app: &AppState,
    owner: Owner,
    filter: DeliveryFilter,
) -> Result<(Vec<WebhookDelivery>, bool), WebhookError> {
    let query = DeliveryQuery {
        account_id: owner.account,
        mode: owner.mode,
        endpoint_id: filter.endpoint_id,
        task_id: filter.task_id,
        status: filter.status,
        before: filter.before.map(WebhookDeliveryId::seq),
        limit: filter.limit + 1,
    };
    let mut rows = app.store.list_deliveries(&query).await?;
    let more = rows.len() as i64 > filter.limit;
    rows.truncate(filter.limit as usize);
    Ok((rows, more))
}

pub async fn delivery(
    app: &AppState,
    owner: Owner,
    id: WebhookDeliveryId,
) -> Result<WebhookDelivery, WebhookError> {
    app.store
        .get_delivery(owner.account, owner.mode, id.seq())
        .await?
        .filter(|d| d.id() == id)
        .ok_or(WebhookError::DeliveryNotFound(id))
}

/// Sends a delivery again now: a new attempt of the same message (the same
/// `webhook-id`).
pub async fn retry(
    app: &AppState,
    owner: Owner,
    id: WebhookDeliveryId,
) -> Result<WebhookDelivery, WebhookError> {
    delivery(app, owner, id).await?;
    let d = app
        .store
        .retry_delivery(owner.account, owner.mode, id.seq(), app.clock.now())
        .await?
        .ok_or(WebhookError::DeliveryNotFound(id))?;
    app.outbox.wake();
    Ok(d)
}
