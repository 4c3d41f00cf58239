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

/// Opaque cursors: base64url of `kind:direction:position`.
pub mod cursor {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    pub fn encode(kind: &str, descending: bool, position: &str) -> String {
        let dir = if descending { "d" } else { "a" };
        URL_SAFE_NO_PAD.encode(format!("{kind}:{dir}:{position}"))
    }

    /// The position and direction of a cursor of `kind`.
    pub fn decode(kind: &str, cursor: &str) -> Option<(bool, String)> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let s = String::from_utf8(bytes).ok()?;
        let rest = s.strip_prefix(kind)?.strip_prefix(':')?;
        let (dir, position) = rest.split_once(':')?;
        let descending = match dir {
            "d" => true,
            "a" => false,
            _ => return None,
        };
        Some((descending, position.to_owned()))
    }
}
