//! The one timestamp type: Unix milliseconds, UTC. Stored as an integer,
//! shown as RFC 3339 with milliseconds (`2026-11-21T13:45:12.345Z`).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A point in time, to the millisecond. Serializes as its Unix milliseconds
/// (the stored form); [`rfc3339`] serializes it as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const UNIX_EPOCH: Timestamp = Timestamp(0);

    pub const fn from_unix_ms(ms: i64) -> Self {
        Self(ms)
    }

    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    pub fn from_system_time(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Self(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(e) => Self(-i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX)),
        }
    }

    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_millis(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_millis(self.0.unsigned_abs())
        }
    }

    /// `ms` milliseconds later (earlier if negative), saturating.
    pub const fn plus_ms(self, ms: i64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    pub const fn minus_ms(self, ms: i64) -> Self {
        Self(self.0.saturating_sub(ms))
    }

    /// Milliseconds from `earlier` to `self` (negative if `earlier` is later).
    pub const fn ms_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    fn datetime(self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(self.0 as i128 * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }

    /// `2026-11-21T13:45:12.345Z`
    pub fn rfc3339(self) -> String {
        self.to_string()
    }

    /// Parses an RFC 3339 timestamp (any offset).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
        let ms = dt.to_offset(UtcOffset::UTC).unix_timestamp_nanos() / 1_000_000;
        i64::try_from(ms).ok().map(Self)
    }

    /// The UTC calendar month, as `YYYY-MM` (the key of monthly spend).
    pub fn month_key(self) -> String {
        let dt = self.datetime();
        format!("{:04}-{:02}", dt.year(), dt.month() as u8)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = self.datetime();
        let (y, mo, d) = (dt.year(), dt.month() as u8, dt.day());
        let (h, mi, s) = (dt.hour(), dt.minute(), dt.second());
        write!(
            f,
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
            dt.millisecond()
        )
    }
}

/// `#[serde(with = "taskgate_core::timestamp::rfc3339")]`: a timestamp as
/// RFC 3339 text, the form clients see.
pub mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Timestamp;

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(t)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 timestamp: {s:?}")))
    }

    /// The same for an optional timestamp.
    pub mod option {
        use serde::Serializer;

        use super::Timestamp;

        pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.collect_str(t),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = Timestamp::from_unix_ms(1_795_268_712_345);
        let s = t.rfc3339();
        assert!(s.ends_with(".345Z"), "{s}");
        assert_eq!(Timestamp::parse_rfc3339(&s), Some(t));
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-21T14:45:12+01:00"),
            Timestamp::parse_rfc3339("2026-11-21T13:45:12Z")
        );
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-30T23:59:59Z")
                .unwrap()
                .month_key(),
            "2026-11"
        );
        assert_eq!(Timestamp::from_system_time(t.to_system_time()), t);
        assert_eq!(t.plus_ms(5).ms_since(t), 5);
    }

    #[test]
    fn serializes_as_milliseconds_or_text() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Both {
            ms: Timestamp,
            #[serde(with = "rfc3339")]
            text: Timestamp,
        }
        let t = Timestamp::from_unix_ms(1_767_225_600_001);
        let json = serde_json::to_string(&Both { ms: t, text: t }).unwrap();
        assert_eq!(
            json,
            r#"{"ms":1767225600001,"text":"2026-01-01T00:00:00.001Z"}"#
        );
        assert_eq!(
            serde_json::from_str::<Both>(&json).unwrap(),
            Both { ms: t, text: t }
        );
    }
}
