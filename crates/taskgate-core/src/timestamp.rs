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

    /// The UTC calendar month, as `YYYY-MM` (the key of monthly spend, made
    /// at every call's end): the RFC 3339 text's first seven bytes.
    pub fn month_key(self) -> String {
        if let Some(b) = self.text() {
            return std::str::from_utf8(&b[..7]).unwrap_or_default().to_owned();
        }
        let dt = self.datetime();
        format!("{:04}-{:02}", dt.year(), dt.month() as u8)
    }

    /// The RFC 3339 text, written digit by digit into a buffer on the stack
    /// (the formatting machinery took about 2.6k instructions a timestamp,
    /// and a task's view shows three); `None` for a year outside 0–9999,
    /// which [`fmt::Display`] writes the slow way.
    fn text(self) -> Option<[u8; 24]> {
        fn digits(out: &mut [u8], mut n: u32) {
            for d in out.iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
        let dt = self.datetime();
        let year = u32::try_from(dt.year()).ok().filter(|y| *y <= 9999)?;
        let mut b = *b"0000-00-00T00:00:00.000Z";
        digits(&mut b[0..4], year);
        digits(&mut b[5..7], u32::from(dt.month() as u8));
        digits(&mut b[8..10], u32::from(dt.day()));
        digits(&mut b[11..13], u32::from(dt.hour()));
        digits(&mut b[14..16], u32::from(dt.minute()));
        digits(&mut b[17..19], u32::from(dt.second()));
        digits(&mut b[20..23], u32::from(dt.millisecond()));
        Some(b)
    }
}

fn ascii(b: &[u8; 24]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(b) = self.text() {
            return f.write_str(ascii(&b));
        }
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
        match t.text() {
            Some(b) => s.serialize_str(super::ascii(&b)),
            None => s.collect_str(t),
        }
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
                Some(t) => super::serialize(t, s),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text made digit by digit is the text the formatting machinery
    /// makes, across the years (before 1970 too), and a year outside
    /// 0–9999 still gets its text.
    #[test]
    fn text_made_in_place_matches_the_formatted() {
        fn formatted(t: Timestamp) -> String {
            let dt = t.datetime();
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                dt.year(),
                dt.month() as u8,
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.millisecond()
            )
        }
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01
        let last: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999
        while ms <= last {
            let t = Timestamp::from_unix_ms(ms);
            assert_eq!(t.to_string(), formatted(t), "{ms}");
            ms += 86_399_987_654; // about a day a step, every field moving
        }
        for ms in [0, -1, 1, 999, last, 1_767_225_600_001] {
            let t = Timestamp::from_unix_ms(ms);
            assert_eq!(t.to_string(), formatted(t), "{ms}");
        }
        let before_year_0 = Timestamp::from_unix_ms(-62_167_219_200_001);
        assert!(before_year_0.text().is_none());
        assert_eq!(before_year_0.to_string(), formatted(before_year_0));
    }

    /// The month's key is `YYYY-MM` of the UTC date, in and out of the years
    /// the text is made in place for.
    #[test]
    fn a_months_key_is_its_year_and_month() {
        let key = |t: Timestamp| {
            let dt = t.datetime();
            format!("{:04}-{:02}", dt.year(), dt.month() as u8)
        };
        let mut ms: i64 = -62_167_219_200_001; // the last ms before year 0
        while ms <= 253_402_300_800_000 {
            // to the first ms after 9999
            let t = Timestamp::from_unix_ms(ms);
            assert_eq!(t.month_key(), key(t), "{ms}");
            ms += 1_234_567_890_123; // about 39 years a step
        }
        for (ms, expected) in [
            (1_795_268_712_345, "2026-11"),
            (1_767_225_599_999, "2025-12"),
            (1_767_225_600_000, "2026-01"),
        ] {
            assert_eq!(Timestamp::from_unix_ms(ms).month_key(), expected, "{ms}");
        }
    }

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
