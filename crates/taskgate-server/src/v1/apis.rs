//! GET /apis (the catalog) and GET /apis/{slug}.

use std::sync::Arc;

use axum::extract::{Path, State};
use serde::Serialize;
use serde_json::Value;
use taskgate_core::ApiList;

use crate::auth::{ApisRead, Auth, Principal};
use crate::catalog::{ApiEntry, Catalog};
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::v1::{QueryPairs, cursor};

#[derive(Serialize)]
struct Page {
    object: &'static str,
    items: Vec<Value>,
    has_more: bool,
    next_cursor: Option<String>,
}

/// Lists the APIs the key may call, by slug.
pub async fn list(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<ApisRead>,
    query: QueryPairs,
) -> ApiResult<Data> {
    let (page, next_cursor) = select(&app.catalog, &principal, &query)?;
    Data::ok(&Page {
        object: "list",
        has_more: next_cursor.is_some(),
        next_cursor,
        items: page.iter().map(|e| e.summary()).collect(),
    })
}

/// GET /apis's page for `query`: the entries, and the next page's cursor
/// when there is one; or the 400 to answer.
pub fn select<'a>(
    catalog: &'a Catalog,
    principal: &Principal,
    query: &QueryPairs,
) -> ApiResult<(Vec<&'a Arc<ApiEntry>>, Option<String>)> {
    select_of(catalog, principal.allowed_apis.as_deref(), query)
}

/// [`select`] among `allowed` APIs only when given (the dashboard reads the
/// whole catalog with it).
pub fn select_of<'a>(
    catalog: &'a Catalog,
    allowed: Option<&ApiList>,
    query: &QueryPairs,
) -> ApiResult<(Vec<&'a Arc<ApiEntry>>, Option<String>)> {
    query.check(&["kind", "provider", "q", "limit", "cursor"])?;
    let limit = query.limit()? as usize;
    let after = match query.get("cursor") {
        None => None,
        Some(c) => Some(cursor::api(c).ok_or_else(|| {
            ApiError::invalid_parameter("cursor", "cursor is not a cursor from next_cursor.")
        })?),
    };
    let text = query.get("q").map(str::to_lowercase);
    let mut matching = catalog.all().iter().filter(|e| {
        let s = &e.spec;
        allowed.is_none_or(|list| list.contains(&s.slug))
            && query.get("kind").is_none_or(|k| s.kind == k)
            && query.get("provider").is_none_or(|p| s.provider == p)
            && after.as_ref().is_none_or(|a| s.slug.as_str() > a.as_str())
            && text.as_ref().is_none_or(|t| {
                s.slug.to_lowercase().contains(t)
                    || s.name.to_lowercase().contains(t)
                    || s.description.to_lowercase().contains(t)
            })
    });
    let page: Vec<_> = matching.by_ref().take(limit).collect();
    let next_cursor = match matching.next() {
        Some(_) => page.last().map(|e| cursor::after_api(&e.slug)),
        None => None,
    };
    Ok((page, next_cursor))
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<ApisRead>,
    Path(slug): Path<String>,
) -> ApiResult<Data> {
    if !principal.may_call(&slug) {
        return Err(ApiError::forbidden(
            "insufficient_permissions",
            "This API key may not use this API.",
        ));
    }
    let entry = app
        .catalog
        .get(&slug)
        .ok_or_else(|| ApiError::api_not_found(&slug))?;
    Data::ok(&entry.details())
}
