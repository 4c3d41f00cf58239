//! GET /apis (the catalog) and GET /apis/{slug}.

use std::sync::Arc;

use axum::extract::{Path, State};

use crate::auth::{ApisRead, Auth};
use crate::catalog::{ApiDetailsView, ApiView};
use crate::catalog::{ApiEntry, Catalog};
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::principal::Principal;
use crate::query::{self, QueryPairs};
use crate::state::AppState;
use crate::v1::Page;

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
        items: page.iter().map(|e| ApiView::new(e)).collect(),
    })
}

/// GET /apis's page for `query`: the entries, and the next page's cursor
/// when there is one; or the 400 to answer.
pub fn select<'a>(
    catalog: &'a Catalog,
    principal: &Principal,
    query: &QueryPairs,
) -> ApiResult<(Vec<&'a Arc<ApiEntry>>, Option<String>)> {
    query::api_page(catalog, principal.allowed_apis.as_deref(), query)
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
    Data::ok(&ApiDetailsView::new(entry))
}
