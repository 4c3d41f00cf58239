//! Prefixed, time-sortable identifiers: `task_01JD…`, `key_01JD…`.
//!
//! Each kind of id is a type of its own ([`TaskId`], [`KeyId`], …) holding a
//! ULID: parsed once where it enters (a path, a query, a row), copied freely
//! after, and shown with its prefix. A task id never passes where a key id is
//! expected. Ids sort by creation time, as text and as values alike, which
//! keyset pagination relies on.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use ulid::{Generator, ULID_LEN, Ulid};

use crate::Timestamp;
use crate::newtype::string_newtype;

// A monotonic generator: ids made in the same millisecond still sort in the
// order they were made, which keyset pagination by id relies on.
static GENERATOR: Mutex<Option<Stamper>> = Mutex::new(None);

struct Stamper {
    generator: Generator,
    /// The millisecond of the last id the generator made.
    last_ms: u128,
}

fn next_ulid_at(at: SystemTime) -> Ulid {
    let ms = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut guard = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let stamper = guard.get_or_insert_with(|| Stamper {
        generator: Generator::new(),
        last_ms: 0,
    });
    // Stamped before the last id made (its caller read the clock before
    // another caller made theirs): an id of its own millisecond. The
    // generator would carry on from the later one, and the id would not
    // agree with the row's `created_at`.
    if ms < stamper.last_ms {
        return Ulid::from_datetime(at);
    }
    stamper.last_ms = ms;
    // Overflow needs 2^80 ids in one millisecond; fall back to a random one.
    stamper
        .generator
        .generate_from_datetime(at)
        .unwrap_or_else(|_| Ulid::from_datetime(at))
}

/// Text that is not an id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid id: expected `{prefix}` followed by a 26-character ULID")]
pub struct IdError {
    pub prefix: &'static str,
}

/// The ULID part of `s` after `prefix`, in its canonical (upper-case) form
/// only: an id has exactly one spelling, the one the store holds.
fn parse_ulid(s: &str, prefix: &'static str) -> Result<Ulid, IdError> {
    let bad = IdError { prefix };
    let rest = s.strip_prefix(prefix).ok_or(bad.clone())?;
    if rest.len() != ULID_LEN {
        return Err(bad);
    }
    let ulid = Ulid::from_string(rest).map_err(|_| bad.clone())?;
    let mut buf = [0u8; ULID_LEN];
    if ulid.array_to_str(&mut buf) != rest {
        return Err(bad);
    }
    Ok(ulid)
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Ulid);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new id stamped with the current time.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(next_ulid_at(SystemTime::now()))
            }

            /// A new id stamped with `at`, so that a row's id and its
            /// `created_at` agree to the millisecond.
            pub fn at(at: Timestamp) -> Self {
                Self(next_ulid_at(at.to_system_time()))
            }

            /// The smallest id that could have been made at `at`: for turning
            /// a time bound into an id bound.
            pub fn floor(at: Timestamp) -> Self {
                let ms = at.unix_ms().clamp(0, (1i64 << 48) - 1) as u64;
                Self(Ulid::from_parts(ms, 0))
            }

            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_ulid(s, Self::PREFIX).map(Self)
            }

            /// `f` of the id's text, made on the stack: what `Display`
            /// writes, without a `String` grown piece by piece through the
            /// formatting machinery (bench/RESULTS.md).
            pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
                const LEN: usize = $prefix.len() + ULID_LEN;
                let mut buf = [0u8; LEN];
                let mut ulid = [0u8; ULID_LEN];
                buf[..$prefix.len()].copy_from_slice($prefix.as_bytes());
                buf[$prefix.len()..].copy_from_slice(self.0.array_to_str(&mut ulid).as_bytes());
                // ASCII throughout: the prefix and Crockford's base 32.
                f(std::str::from_utf8(&buf).unwrap_or_default())
            }

            /// The id's text in a `String` of its exact size.
            pub fn text(&self) -> String {
                self.with_text(str::to_owned)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.with_text(|t| f.write_str(t))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.with_text(|t| s.serialize_str(t))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// A task: `task_…`.
    TaskId,
    "task_"
);
id_type!(
    /// An API key (its record, never its secret): `key_…`.
    KeyId,
    "key_"
);
id_type!(
    /// An account: `acct_…`.
    AccountId,
    "acct_"
);
id_type!(
    /// One HTTP request, as `meta.request_id` and the logs name it: `req_…`.
    RequestId,
    "req_"
);
id_type!(
    /// A dashboard user: `user_…`.
    UserId,
    "user_"
);

id_type!(
    /// An event of the audit log: `aud_…`.
    AuditId,
    "aud_"
);

id_type!(
    /// A webhook endpoint: `whe_…`.
    WebhookEndpointId,
    "whe_"
);

/// One event's delivery to one endpoint or call's webhook: `whd_…`, a ULID
/// whose time is the delivery's creation and whose other bits are its
/// sequence number in the store (deliveries are made many at once by the
/// database, in the commit of a task's end, where no ULID can be drawn).
/// Sorts by creation, like every id; one spelling per delivery.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebhookDeliveryId {
    created_at: i64,
    seq: i64,
}

impl WebhookDeliveryId {
    pub const PREFIX: &'static str = "whd_";

    pub fn new(seq: i64, created_at: Timestamp) -> Self {
        Self {
            created_at: created_at.unix_ms(),
            seq,
        }
    }

    pub fn seq(self) -> i64 {
        self.seq
    }

    pub fn created_at(self) -> Timestamp {
        Timestamp::from_unix_ms(self.created_at)
    }

    pub fn parse(s: &str) -> Result<Self, IdError> {
        let ulid = parse_ulid(s, Self::PREFIX)?;
        // Past the largest sequence number no delivery has (and none is shown
        // so): still an id, of nothing, and a cursor before every delivery.
        let seq = i64::try_from(ulid.random()).unwrap_or(i64::MAX);
        Ok(Self {
            created_at: ulid.timestamp_ms() as i64,
            seq,
        })
    }
}

impl fmt::Display for WebhookDeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.created_at.clamp(0, (1i64 << 48) - 1) as u64;
        let ulid = Ulid::from_parts(ms, self.seq.max(0) as u128);
        let mut buf = [0u8; ULID_LEN];
        f.write_str(Self::PREFIX)?;
        f.write_str(ulid.array_to_str(&mut buf))
    }
}

impl fmt::Debug for WebhookDeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for WebhookDeliveryId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

string_newtype!(
    /// The instance that runs a task (its lease holder): the operator's
    /// `instance_id`, or host and port. Free text, but never empty.
    RunnerId,
    |s| {
        if s.is_empty() || s.len() > 255 || s.chars().any(char::is_control) {
            Err(format!(
                "invalid instance id {s:?}: 1 to 255 characters, no control characters"
            ))
        } else {
            Ok(())
        }
    }
);

impl RunnerId {
    /// `host:port`, from a host name as the system gives it (control
    /// characters dropped, at most 200 characters; `taskgate` if none is left).
    pub fn host_port(host: &str, port: u16) -> Self {
        let host: String = host
            .trim()
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        let host = if host.is_empty() { "taskgate" } else { &host };
        Self(format!("{host}:{port}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_id_carries_its_time_and_sequence_in_one_spelling() {
        let at = Timestamp::from_unix_ms(1_764_000_000_123);
        let id = WebhookDeliveryId::new(42, at);
        let text = id.to_string();
        assert!(text.starts_with("whd_") && text.len() == 30, "{text}");
        let back = WebhookDeliveryId::parse(&text).unwrap();
        assert_eq!((back.seq(), back.created_at()), (42, at));
        assert!(WebhookDeliveryId::new(43, at) > id);
        assert!(WebhookDeliveryId::parse(&text.to_lowercase()).is_err());
        assert!(WebhookDeliveryId::parse("whe_01JD0000000000000000000000").is_err());
        let beyond = WebhookDeliveryId::parse("whd_000000001PY4RSSZVGHPWQY804").unwrap();
        assert_eq!(beyond.seq(), i64::MAX, "any ULID is an id, of no delivery");
    }

    #[test]
    fn ids_are_prefixed_and_sorted() {
        let a = TaskId::new();
        let b = TaskId::new();
        assert!(a.to_string().starts_with("task_"));
        assert_eq!(a.to_string().len(), 5 + 26);
        assert!(a < b);
        assert!(a.to_string() < b.to_string());
        assert_eq!(TaskId::parse(&a.to_string()), Ok(a));
        assert!(KeyId::parse(&a.to_string()).is_err());
        assert!(TaskId::parse("task_nope").is_err());
        assert!(TaskId::parse("").is_err());
    }

    #[test]
    fn only_the_canonical_spelling_parses() {
        let a = TaskId::new().to_string();
        assert!(TaskId::parse(&a.to_lowercase()).is_err());
        assert!(TaskId::parse(&format!("{a} ")).is_err());
        // 26 characters that overflow 128 bits.
        assert!(TaskId::parse("task_ZZZZZZZZZZZZZZZZZZZZZZZZZZ").is_err());
    }

    #[test]
    fn floor_sorts_before_ids_of_that_millisecond() {
        let now = Timestamp::now();
        let id = TaskId::at(now);
        assert!(TaskId::floor(now) <= id);
        assert!(TaskId::floor(now.plus_ms(1)) > id);
        assert!(TaskId::floor(now).to_string() <= id.to_string());
    }

    /// (In the past, not the future: an id made ahead of the clock would
    /// hold the generator there, for the other tests of this process too.)
    #[test]
    fn an_id_stamped_before_the_last_one_made_keeps_its_millisecond() {
        let now = Timestamp::now();
        let last = TaskId::at(now);
        let earlier = now.plus_ms(-5);
        let id = TaskId::at(earlier);
        assert!(TaskId::floor(earlier) <= id);
        assert!(TaskId::floor(earlier.plus_ms(1)) > id);
        assert!(id < last);
    }

    /// The text made on the stack is the prefix and the canonical ULID, for
    /// every kind of id and every way an id is shown.
    #[test]
    fn an_ids_text_is_its_prefix_and_its_ulid() {
        fn check<T: fmt::Display + Serialize>(id: T, prefix: &str, ulid: Ulid, text: String) {
            let expected = format!("{prefix}{}", ulid.to_string());
            assert_eq!(text, expected);
            assert_eq!(id.to_string(), expected);
            assert_eq!(
                serde_json::to_string(&id).unwrap(),
                format!("\"{expected}\"")
            );
        }
        for ulid in [
            Ulid::nil(),
            Ulid::from_parts(u64::MAX >> 16, u128::MAX),
            Ulid::new(),
        ] {
            check(TaskId(ulid), "task_", ulid, TaskId(ulid).text());
            check(KeyId(ulid), "key_", ulid, KeyId(ulid).text());
            check(AccountId(ulid), "acct_", ulid, AccountId(ulid).text());
            check(RequestId(ulid), "req_", ulid, RequestId(ulid).text());
            check(UserId(ulid), "user_", ulid, UserId(ulid).text());
            check(AuditId(ulid), "aud_", ulid, AuditId(ulid).text());
        }
    }

    #[test]
    fn ids_serialize_as_their_text() {
        let id = AccountId::new();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<AccountId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<KeyId>(&json).is_err());
    }

    #[test]
    fn runner_ids_are_never_empty() {
        assert!(RunnerId::parse("").is_err());
        assert!(RunnerId::parse("a\nb").is_err());
        assert_eq!(RunnerId::parse("host:8080").unwrap().as_str(), "host:8080");
        assert_eq!(RunnerId::host_port(" h\n", 1).as_str(), "h:1");
        assert_eq!(RunnerId::host_port("", 2).as_str(), "taskgate:2");
    }
}
