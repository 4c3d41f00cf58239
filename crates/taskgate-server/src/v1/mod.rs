//! Handlers of `/api/v1`.

pub mod apis;
pub mod call;
pub mod tasks;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;

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
