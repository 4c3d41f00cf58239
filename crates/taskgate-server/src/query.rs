//! Query strings as the HTTP doors read them: parameters as pairs (each
//! known, none repeated), the pages' cursors, and the filters of a task
//! list and of the catalog. Shared by `/api/v1` and the dashboard, whose
//! lists take the same parameters.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use std::sync::Arc;

use taskgate_core::{AccountId, ApiList, ApiSlug, Mode, TaskId, TaskStatus, Timestamp};
use taskgate_store::TaskQuery;

use crate::catalog::{ApiEntry, Catalog};
use crate::error::{ApiError, ApiResult};

/// Query parameters as pairs, refusing malformed encodings.
pub struct QueryPairs(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        QueryPairs::parse(parts.uri.query().unwrap_or(""))
    }
}

impl QueryPairs {
    /// The pairs of a query string, or 400 for a malformed one.
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(query)
            .map(QueryPairs)
            .map_err(|_| ApiError::invalid_parameter("query", "The query string is malformed."))
    }

    /// Refuses parameters outside `known` and repeated ones.
    pub fn check(&self, known: &[&str]) -> Result<(), ApiError> {
        let mut seen: Vec<&str> = Vec::new();
        for (k, _) in &self.0 {
            if !known.contains(&k.as_str()) {
                return Err(ApiError::invalid_parameter(
                    k,
                    format!(
                        "Unknown query parameter {k:?}. Known: {}.",
                        known.join(", ")
                    ),
                ));
            }
            if seen.contains(&k.as_str()) {
                return Err(ApiError::invalid_parameter(
                    k,
                    format!("{k} is given twice."),
                ));
            }
            seen.push(k);
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `limit`: 1 to 100, default 20.
    pub fn limit(&self) -> Result<i64, ApiError> {
        match self.get("limit") {
            None => Ok(20),
            Some(s) => s
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_parameter("limit", "limit must be an integer from 1 to 100.")
                }),
        }
    }
}

/// Cursors: `desc_<position>` or `asc_<position>`, the order of the page they
/// continue and the last item it held (a task's ULID, an API's slug). Every
/// string of that form is a valid cursor, so the OpenAPI document can state
/// exactly which cursors are accepted ([`TASKS_PATTERN`], [`APIS_PATTERN`]);
/// clients still take them only from `next_cursor`.
pub mod cursor {
    use taskgate_core::{ApiSlug, TaskId};

    /// The cursors of GET /tasks.
    pub const TASKS_PATTERN: &str = "^(desc|asc)_[0-7][0-9A-HJKMNP-TV-Z]{25}$";
    /// The cursors of GET /apis (always in slug order).
    pub const APIS_PATTERN: &str = "^asc_[a-z0-9_-]{1,64}$";

    fn encode(descending: bool, position: &str) -> String {
        let order = if descending { "desc" } else { "asc" };
        format!("{order}_{position}")
    }

    fn decode(cursor: &str) -> Option<(bool, &str)> {
        let (order, position) = cursor.split_once('_')?;
        match order {
            "desc" => Some((true, position)),
            "asc" => Some((false, position)),
            _ => None,
        }
    }

    /// The cursor of a GET /tasks page that ended with `last`.
    pub fn after_task(descending: bool, last: TaskId) -> String {
        let id = last.to_string();
        encode(descending, id.strip_prefix(TaskId::PREFIX).unwrap_or(&id))
    }

    /// A GET /tasks cursor's order (`true`: descending) and last task.
    pub fn task(cursor: &str) -> Option<(bool, TaskId)> {
        let (descending, ulid) = decode(cursor)?;
        let id = TaskId::parse(&format!("{}{ulid}", TaskId::PREFIX)).ok()?;
        Some((descending, id))
    }

    /// The cursor of a GET /apis page that ended with `last`.
    pub fn after_api(last: &ApiSlug) -> String {
        encode(false, last.as_str())
    }

    /// A GET /apis cursor's last API.
    pub fn api(cursor: &str) -> Option<ApiSlug> {
        match decode(cursor)? {
            (false, slug) => ApiSlug::parse(slug).ok(),
            (true, _) => None,
        }
    }
}

/// GET /tasks's parameters.
pub const TASK_PARAMS: [&str; 7] = [
    "status",
    "api",
    "created_after",
    "created_before",
    "order",
    "limit",
    "cursor",
];

/// The page of an account's tasks of one mode (of `apis` only, when
/// given) that `query` asks for, one more than asked (to tell whether there
/// are more); `None` when it can hold nothing (an `api` that cannot be a
/// slug), or the 400 to answer.
pub fn task_query(
    account_id: AccountId,
    mode: Mode,
    apis: Option<&ApiList>,
    query: &QueryPairs,
) -> ApiResult<Option<TaskQuery>> {
    query.check(&TASK_PARAMS)?;
    let mut q = TaskQuery::new(account_id, mode, query.limit()? + 1);
    q.apis = apis.map(|list| list.0.clone());
    if let Some(s) = query.get("status") {
        for part in s.split(',').map(|p| p.trim_matches(' ')) {
            let status: TaskStatus = part.parse().map_err(|_| {
                ApiError::invalid_parameter(
                    "status",
                    format!(
                        "status must be one or more of {}, comma-separated.",
                        TaskStatus::names()
                    ),
                )
            })?;
            if !q.statuses.contains(&status) {
                q.statuses.push(status);
            }
        }
    }
    let mut unknown_api = false;
    if let Some(api) = query.get("api") {
        if api.is_empty() {
            return Err(ApiError::invalid_parameter(
                "api",
                "api must be an API slug.",
            ));
        }
        // A name that cannot be a slug names no task: an empty page.
        match ApiSlug::parse(api) {
            Ok(slug) => q.api = Some(slug),
            Err(_) => unknown_api = true,
        }
    }
    // Ids sort by creation time, so time bounds become id bounds.
    if let Some(t) = query.get("created_after") {
        let at = time_param("created_after", t)?;
        q.id_after = Some(TaskId::floor(at.plus_ms(1)));
    }
    if let Some(t) = query.get("created_before") {
        let at = time_param("created_before", t)?;
        q.id_before = Some(TaskId::floor(at));
    }
    match query.get("order") {
        None | Some("desc") => {}
        Some("asc") => q.descending = false,
        Some(_) => {
            return Err(ApiError::invalid_parameter(
                "order",
                "order must be \"asc\" or \"desc\".",
            ));
        }
    }
    if let Some(c) = query.get("cursor") {
        let bad =
            || ApiError::invalid_parameter("cursor", "cursor is not a cursor from next_cursor.");
        let (descending, last) = cursor::task(c).ok_or_else(bad)?;
        if query.get("order").is_some() && descending != q.descending {
            return Err(ApiError::invalid_parameter(
                "cursor",
                "cursor was made for the other order.",
            ));
        }
        q.descending = descending;
        let bound = if descending {
            &mut q.id_before
        } else {
            &mut q.id_after
        };
        // The tighter of the time bound and the cursor.
        let tighter = match bound.take() {
            Some(b) if (descending && b < last) || (!descending && b > last) => b,
            _ => last,
        };
        *bound = Some(tighter);
    }
    Ok((!unknown_api).then_some(q))
}

fn time_param(name: &str, value: &str) -> ApiResult<Timestamp> {
    Timestamp::parse_rfc3339(value).ok_or_else(|| {
        ApiError::invalid_parameter(
            name,
            format!("{name} must be an RFC 3339 timestamp, e.g. 2026-11-21T13:45:12Z."),
        )
    })
}

/// GET /apis's page for `query` among `allowed` APIs only when given: the
/// entries, and the next page's cursor when there is one; or the 400 to
/// answer.
pub fn api_page<'a>(
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
