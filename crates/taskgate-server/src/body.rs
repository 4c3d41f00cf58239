//! Request bodies that carry a call (`POST /api/v1/call`, `/openai/v1/*`):
//! read within a limit that follows the catalog, and parsed into JSON with
//! a budget of values, so that no body costs more than a small multiple of
//! its size.
//!
//! Parsed whole, JSON can cost thirty times its size: `[0,0,0,…]` is two
//! bytes a value and each value is 32 bytes in memory, before the arrays'
//! growth. Three bounds hold the cost of one body and of all of them:
//! - the body limit: the largest input an API of the catalog accepts plus
//!   [`ENVELOPE_MARGIN`], at most `max_body_bytes`;
//! - the value budget: at most one value for every [`BYTES_PER_VALUE`] bytes
//!   of that limit, and never more than [`MAX_VALUES`];
//! - the bytes in flight: bodies over [`LARGE_BODY`] take their size from
//!   one budget of `http.max_large_body_bytes_in_flight` while they are
//!   read and parsed; when it is spent a body waits for its turn, at most
//!   half the body's read time-out (the other half is for reading it), then
//!   gets `503 server_busy`.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use bytes::Bytes;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// Room for a call's fields beside its input (`api`, `metadata`, …).
pub const ENVELOPE_MARGIN: u64 = 64 * 1024;
/// Bodies larger than this take from the budget of bytes in flight.
pub const LARGE_BODY: u64 = 256 * 1024;
/// A body's JSON holds at most one value per this many bytes of the limit.
pub const BYTES_PER_VALUE: u64 = 8;
/// Values in one body at most, whatever the limit (16 MiB of values).
pub const MAX_VALUES: u64 = 512 * 1024;

/// How bodies that carry a call are read: their limit, their time-out and
/// the budget of large bodies in flight. Set once at start (the catalog
/// does not change while the server runs).
pub struct CallBodies {
    /// The largest body a call may have: the catalog's largest input and
    /// the envelope's margin, within `max_body_bytes`.
    pub limit: u64,
    /// How long a body may take to arrive (`http.body_read_timeout_ms`).
    pub read_timeout: Duration,
    pub large: LargeBodies,
}

impl CallBodies {
    pub fn new(
        largest_input_bytes: u64,
        max_body_bytes: u64,
        read_timeout: Duration,
        large_in_flight: u64,
    ) -> Self {
        CallBodies {
            limit: (largest_input_bytes + ENVELOPE_MARGIN).min(max_body_bytes),
            read_timeout,
            large: LargeBodies::new(large_in_flight),
        }
    }
}

/// The state a door's router holds gives the call bodies' settings.
pub trait HasCallBodies {
    fn call_bodies(&self) -> &CallBodies;
}

/// The bytes of large bodies being read and parsed at once, in KiB.
pub struct LargeBodies {
    kib: Arc<Semaphore>,
    total_kib: u64,
}

impl LargeBodies {
    pub fn new(bytes: u64) -> Self {
        let total_kib = (bytes / 1024).clamp(1, u32::MAX as u64 >> 4);
        Self {
            kib: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
        }
    }

    /// Room for a body of `bytes`, waiting at most `wait`; `None` when there
    /// is none by then. A body larger than the whole budget takes all of it.
    async fn take(&self, bytes: u64, wait: Duration) -> Option<OwnedSemaphorePermit> {
        let kib = bytes.div_ceil(1024).min(self.total_kib) as u32;
        tokio::time::timeout(wait, self.kib.clone().acquire_many_owned(kib))
            .await
            .ok()?
            .ok()
    }
}

/// A request body that must be a JSON object, read within the call body
/// limit and parsed within the value budget.
pub struct JsonObject {
    pub map: Map<String, Value>,
    pub raw: Bytes,
}

impl<S: HasCallBodies + Send + Sync> FromRequest<Arc<S>> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<S>) -> Result<Self, ApiError> {
        let bodies = state.call_bodies();
        let limit = bodies.limit;
        let too_large = || {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("The request body exceeds the limit of {limit} bytes."),
            )
        };
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let deadline = bodies.read_timeout;
        let started = tokio::time::Instant::now();
        // A body of unknown length may be as large as the limit.
        let expected = declared.unwrap_or(limit);
        let _room = if expected > LARGE_BODY {
            Some(
                bodies
                    .large
                    .take(expected, deadline / 2)
                    .await
                    .ok_or_else(busy)?,
            )
        } else {
            None
        };
        let left = deadline.saturating_sub(started.elapsed());
        let raw = tokio::time::timeout(left, axum::body::to_bytes(req.into_body(), limit as usize))
            .await
            .map_err(|_| {
                // A slow-drip body: refused, and the connection with it.
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
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
        let budget = value_budget(limit);
        match parse_bounded(&raw, budget) {
            Ok(Value::Object(map)) => Ok(JsonObject { map, raw }),
            Ok(_) => Err(ApiError::invalid_json(
                "The request body must be a JSON object.",
            )),
            Err(Parse::TooManyValues) => Err(ApiError::invalid_json(format!(
                "The request body holds more than {budget} JSON values (elements, members and scalars); \
                 a body of at most {limit} bytes may hold at most that many."
            ))),
            Err(Parse::Json(e)) => Err(ApiError::invalid_json(format!(
                "The request body is not valid JSON: {} at line {} column {}.",
                json_error_kind(&e),
                e.line(),
                e.column()
            ))),
        }
    }
}

fn busy() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_busy",
        "The server is reading as many large request bodies as it takes at once. Retry shortly.",
    )
    .with_header("retry-after", "1")
}

/// Values a body within `limit` may hold.
pub fn value_budget(limit: u64) -> u64 {
    (limit / BYTES_PER_VALUE).clamp(1024, MAX_VALUES)
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

#[derive(Debug)]
pub enum Parse {
    TooManyValues,
    Json(serde_json::Error),
}

/// `raw` as JSON, refused past `budget` values (serde_json's own limit of
/// 128 levels of nesting holds too).
pub fn parse_bounded(raw: &[u8], budget: u64) -> Result<Value, Parse> {
    let budget = Budget {
        left: Cell::new(budget),
        over: Cell::new(false),
    };
    let mut de = serde_json::Deserializer::from_slice(raw);
    let parsed = Budgeted(&budget).deserialize(&mut de).and_then(|v| {
        de.end()?;
        Ok(v)
    });
    match parsed {
        Ok(v) => Ok(v),
        Err(_) if budget.over.get() => Err(Parse::TooManyValues),
        Err(e) => Err(Parse::Json(e)),
    }
}

/// Values still allowed, and whether one more was asked for.
struct Budget {
    left: Cell<u64>,
    over: Cell<bool>,
}

/// A JSON value built while counting its values against a budget.
struct Budgeted<'b>(&'b Budget);

impl Budgeted<'_> {
    fn spend<E: de::Error>(&self) -> Result<(), E> {
        match self.0.left.get() {
            0 => {
                self.0.over.set(true);
                Err(E::custom("too many values"))
            }
            n => {
                self.0.left.set(n - 1);
                Ok(())
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Budgeted<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Budgeted<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend()?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Budgeted(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Budgeted(self.0))?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_the_budget_the_value_is_what_serde_json_reads() {
        let raw = br#"{"a":[1,-2,3.5,"x",null,true,{"b":[]}],"c":{"d":"\u00e9"}}"#;
        let mine = parse_bounded(raw, 1_000).unwrap();
        let theirs: Value = serde_json::from_slice(raw).unwrap();
        assert_eq!(mine, theirs);
        // 12 values: exactly enough, and one short.
        assert_eq!(parse_bounded(raw, 12).unwrap(), theirs);
        assert!(matches!(parse_bounded(raw, 11), Err(Parse::TooManyValues)));
    }

    #[test]
    fn past_the_budget_parsing_stops_and_says_so() {
        let mut raw = b"[".to_vec();
        raw.extend(std::iter::repeat_n(b"0,".as_slice(), 100_000).flatten());
        raw.extend(b"0]");
        assert!(matches!(
            parse_bounded(&raw, 50_000),
            Err(Parse::TooManyValues)
        ));
        assert!(parse_bounded(&raw, 100_002).is_ok());
    }

    #[test]
    fn bad_json_is_a_json_error_not_a_budget_one() {
        assert!(matches!(parse_bounded(b"{\"a\":", 10), Err(Parse::Json(_))));
        assert!(matches!(parse_bounded(b"[1] x", 10), Err(Parse::Json(_))));
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(matches!(
            parse_bounded(deep.as_bytes(), 10_000),
            Err(Parse::Json(_))
        ));
    }

    #[test]
    fn the_budget_follows_the_limit_within_its_bounds() {
        assert_eq!(value_budget(4 * 1024 * 1024 + ENVELOPE_MARGIN), MAX_VALUES);
        assert_eq!(value_budget(80 * 1024), 10 * 1024);
        assert_eq!(value_budget(10), 1024);
    }
}
