//! Webhook endpoints (`/webhook_endpoints`), the calls' signing secret
//! (`/webhooks/secret`) and the delivery log (`/webhook_deliveries`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use taskgate_core::{
    AuditContext, DeliveryStatus, TaskId, WebhookDeliveryId, WebhookEndpointId, WebhookEvent,
};

use crate::auth::{Auth, WebhooksRead, WebhooksWrite};
use crate::body::JsonObject;
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::principal::Principal;
use crate::query::QueryPairs;
use crate::service::webhooks::{self, DeliveryFilter, EndpointChanges, NewEndpoint, Owner};
use crate::service::{Actor, Origin};
use crate::state::AppState;
use crate::v1::Page;
use crate::views::{WebhookDeliveryView, WebhookEndpointView};

/// The key's change, as the audit log records it.
fn by(principal: &Principal, origin: &Origin) -> AuditContext {
    Actor::Key(principal).audit(origin)
}

/// Refuses fields outside `known`.
fn known_fields(map: &Map<String, Value>, known: &[&str]) -> ApiResult<()> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid_field(
            k,
            format!("Unknown field {k:?}. Known: {}.", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn string(map: &Map<String, Value>, name: &str) -> ApiResult<Option<String>> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_field(
            name,
            format!("{name} must be a string."),
        )),
    }
}

/// `events`: a list of event names (each known).
pub fn events(map: &Map<String, Value>) -> ApiResult<Option<Vec<WebhookEvent>>> {
    let Some(v) = map.get("events") else {
        return Ok(None);
    };
    let list = v.as_array().ok_or_else(|| {
        ApiError::invalid_field("events", "events must be a list of event names.")
    })?;
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let name = item.as_str().ok_or_else(|| {
            ApiError::invalid_field("events", "events must be a list of event names.")
        })?;
        out.push(
            name.parse::<WebhookEvent>()
                .map_err(|e| ApiError::invalid_field("events", format!("{e}.")))?,
        );
    }
    Ok(Some(out))
}

fn endpoint_id(id: &str) -> ApiResult<WebhookEndpointId> {
    WebhookEndpointId::parse(id).map_err(|_| endpoint_not_found(id))
}

fn endpoint_not_found(id: &str) -> ApiError {
    let shown: String = id.chars().take(64).collect();
    ApiError::not_found(
        "webhook_endpoint_not_found",
        format!("No webhook endpoint with id {shown:?}."),
    )
}

fn delivery_not_found(id: &str) -> ApiError {
    let shown: String = id.chars().take(64).collect();
    ApiError::not_found(
        "webhook_delivery_not_found",
        format!("No webhook delivery with id {shown:?}."),
    )
}

/// A webhooks service error about the endpoint or delivery `id`, as the
/// client wrote it.
fn of(e: webhooks::WebhookError, id: &str) -> ApiError {
    match e {
        webhooks::WebhookError::EndpointNotFound(_) => endpoint_not_found(id),
        webhooks::WebhookError::DeliveryNotFound(_) => delivery_not_found(id),
        e => e.into(),
    }
}

pub async fn create(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    origin: Origin,
    body: JsonObject,
) -> ApiResult<Data> {
    let map = &body.map;
    known_fields(map, &["url", "events", "description"])?;
    let url =
        string(map, "url")?.ok_or_else(|| ApiError::invalid_field("url", "url is required."))?;
    let new = NewEndpoint {
        url,
        events: events(map)?,
        description: string(map, "description")?,
    };
    let endpoint = webhooks::create(&app, Owner::of(&principal), &by(&principal, &origin), new)
        .await
        .map_err(ApiError::from)?;
    Data::with_status(
        StatusCode::CREATED,
        &WebhookEndpointView::created(&endpoint),
    )
}

pub async fn list(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksRead>,
    query: QueryPairs,
) -> ApiResult<Data> {
    query.check(&["limit", "cursor"])?;
    let limit = query.limit()?;
    let after = match query.get("cursor") {
        None => None,
        Some(c) => Some(WebhookEndpointId::parse(c).map_err(|_| {
            ApiError::invalid_parameter("cursor", "cursor must be a next_cursor of this list.")
        })?),
    };
    let (rows, has_more) = webhooks::list(&app, Owner::of(&principal), after, limit)
        .await
        .map_err(ApiError::from)?;
    let next_cursor = has_more
        .then(|| rows.last().map(|e| e.id.to_string()))
        .flatten();
    Data::ok(&Page {
        object: "list",
        items: rows.iter().map(WebhookEndpointView::new).collect(),
        has_more,
        next_cursor,
    })
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksRead>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let e = webhooks::find(&app, Owner::of(&principal), endpoint_id(&id)?)
        .await
        .map_err(|e| of(e, &id))?;
    Data::ok(&WebhookEndpointView::new(&e))
}

pub async fn update(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    origin: Origin,
    Path(id): Path<String>,
    body: JsonObject,
) -> ApiResult<Data> {
    let endpoint = endpoint_id(&id)?;
    let map = &body.map;
    known_fields(map, &["url", "events", "description", "enabled"])?;
    let enabled = match map.get("enabled") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(ApiError::invalid_field(
                "enabled",
                "enabled must be true or false.",
            ));
        }
    };
    if map.get("url").is_some_and(Value::is_null) {
        return Err(ApiError::invalid_field("url", "url cannot be removed."));
    }
    let changes = EndpointChanges {
        url: string(map, "url")?,
        events: events(map)?,
        description: match map.get("description") {
            None => None,
            Some(_) => Some(string(map, "description")?),
        },
        enabled,
    };
    let e = webhooks::update(
        &app,
        Owner::of(&principal),
        &by(&principal, &origin),
        endpoint,
        changes,
    )
    .await
    .map_err(|e| of(e, &id))?;
    Data::ok(&WebhookEndpointView::new(&e))
}

pub async fn delete(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    origin: Origin,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let endpoint = endpoint_id(&id)?;
    webhooks::delete(
        &app,
        Owner::of(&principal),
        &by(&principal, &origin),
        endpoint,
    )
    .await
    .map_err(|e| of(e, &id))?;
    Data::ok(&json!({ "id": endpoint, "object": "webhook_endpoint", "deleted": true }))
}

pub async fn secret(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let e = webhooks::find(&app, Owner::of(&principal), endpoint_id(&id)?)
        .await
        .map_err(|e| of(e, &id))?;
    Data::ok(&json!({ "secret": e.secret.expose() }))
}

pub async fn rotate_secret(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    origin: Origin,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let s = webhooks::rotate_secret(
        &app,
        Owner::of(&principal),
        &by(&principal, &origin),
        endpoint_id(&id)?,
    )
    .await
    .map_err(|e| of(e, &id))?;
    Data::ok(&json!({ "secret": s.expose() }))
}

pub async fn test(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let d = webhooks::send_test(&app, Owner::of(&principal), endpoint_id(&id)?)
        .await
        .map_err(|e| of(e, &id))?;
    Data::with_status(StatusCode::ACCEPTED, &WebhookDeliveryView::new(&d))
}

pub async fn signing_secret(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
) -> ApiResult<Data> {
    let s = webhooks::signing_secret(&app, Owner::of(&principal))
        .await
        .map_err(ApiError::from)?;
    Data::ok(&json!({ "secret": s.expose() }))
}

pub async fn rotate_signing_secret(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    origin: Origin,
) -> ApiResult<Data> {
    let s = webhooks::rotate_signing_secret(&app, Owner::of(&principal), &by(&principal, &origin))
        .await
        .map_err(ApiError::from)?;
    Data::ok(&json!({ "secret": s.expose() }))
}

pub async fn deliveries(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksRead>,
    query: QueryPairs,
) -> ApiResult<Data> {
    query.check(&["limit", "cursor", "endpoint_id", "task_id", "status"])?;
    let bad = |name: &str, what: &str| ApiError::invalid_parameter(name, what.to_owned());
    let filter = DeliveryFilter {
        endpoint_id: query
            .get("endpoint_id")
            .map(|s| {
                WebhookEndpointId::parse(s)
                    .map_err(|_| bad("endpoint_id", "endpoint_id must be a whe_ id."))
            })
            .transpose()?,
        task_id: query
            .get("task_id")
            .map(|s| TaskId::parse(s).map_err(|_| bad("task_id", "task_id must be a task_ id.")))
            .transpose()?,
        status: query
            .get("status")
            .map(|s| {
                s.parse::<DeliveryStatus>().map_err(|_| {
                    bad(
                        "status",
                        "status must be pending, succeeded, failed or exhausted.",
                    )
                })
            })
            .transpose()?,
        before: query
            .get("cursor")
            .map(|s| {
                WebhookDeliveryId::parse(s)
                    .map_err(|_| bad("cursor", "cursor must be a next_cursor of this list."))
            })
            .transpose()?,
        limit: query.limit()?,
    };
    let (rows, has_more) = webhooks::deliveries(&app, Owner::of(&principal), filter)
        .await
        .map_err(ApiError::from)?;
    let next_cursor = has_more
        .then(|| rows.last().map(|d| d.id().to_string()))
        .flatten();
    Data::ok(&Page {
        object: "list",
        items: rows.iter().map(WebhookDeliveryView::new).collect(),
        has_more,
        next_cursor,
    })
}

pub async fn delivery(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksRead>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let did = WebhookDeliveryId::parse(&id).map_err(|_| delivery_not_found(&id))?;
    let d = webhooks::delivery(&app, Owner::of(&principal), did)
        .await
        .map_err(|e| of(e, &id))?;
    Data::ok(&WebhookDeliveryView::new(&d))
}

pub async fn retry(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<WebhooksWrite>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let did = WebhookDeliveryId::parse(&id).map_err(|_| delivery_not_found(&id))?;
    let d = webhooks::retry(&app, Owner::of(&principal), did)
        .await
        .map_err(|e| of(e, &id))?;
    Data::with_status(StatusCode::ACCEPTED, &WebhookDeliveryView::new(&d))
}
