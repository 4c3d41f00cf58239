//! Handlers of `/api/v1`.

pub mod apis;
pub mod call;
pub mod tasks;

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde_json::{Map, Value};

use crate::AppState;
use crate::error::ApiError;

/// A request body that must be a JSON object, read within the body limit.
pub struct JsonObject {
    pub map: Map<String, Value>,
    pub raw: Bytes,
}

impl FromRequest<Arc<AppState>> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &Arc<AppState>) -> Result<Self, ApiError> {
        let limit = app.config.max_body_bytes;
        let too_large = || {
            ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("The request body exceeds the limit of {limit} bytes."),
            )
        };
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let deadline = std::time::Duration::from_millis(app.config.http.body_read_timeout_ms);
        let raw = tokio::time::timeout(deadline, axum::body::to_bytes(req.into_body(), limit))
            .await
            .map_err(|_| {
                // A slow-drip body: refused, and the connection with it.
                ApiError::new(
                    axum::http::StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!(
                        "The request body did not arrive within {} ms.",
                        deadline.as_millis()
                    ),
                )
                .with_header("connection", "close")
            })?
            .map_err(|e| {
                if e.into_inner().is::<http_body_util::LengthLimitError>() {
                    too_large()
                } else {
                    ApiError::invalid_json("The request body could not be read.")
                }
            })?;
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::invalid_json(
                "The request body is empty; send a JSON object.",
            ));
        }
        match serde_json::from_slice::<Value>(&raw) {
            Ok(Value::Object(map)) => Ok(JsonObject { map, raw }),
            Ok(_) => Err(ApiError::invalid_json(
                "The request body must be a JSON object.",
            )),
            Err(e) => Err(ApiError::invalid_json(format!(
                "The request body is not valid JSON: {} at line {} column {}.",
                json_error_kind(&e),
                e.line(),
                e.column()
            ))),
        }
    }
}

fn json_error_kind(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "unexpected end of input",
        Category::Syntax => "syntax error",
        Category::Data => "invalid data",
        Category::Io => "read error",
    }
}

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
