//! Timestamps: stored as Unix milliseconds, shown as RFC 3339 UTC with milliseconds.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// `2026-11-21T13:45:12.345Z`
pub fn format_ms(ms: i64) -> String {
    let dt = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let (y, mo, d) = (dt.year(), dt.month() as u8, dt.day());
    let (h, mi, s) = (dt.hour(), dt.minute(), dt.second());
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        dt.millisecond()
    )
}

/// Parses an RFC 3339 timestamp (any offset) into Unix milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    Some((dt.to_offset(UtcOffset::UTC).unix_timestamp_nanos() / 1_000_000) as i64)
}

/// The UTC calendar month of `ms`, as `YYYY-MM` (the key of monthly spend).
pub fn month_key(ms: i64) -> String {
    let dt = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!("{:04}-{:02}", dt.year(), dt.month() as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let ms = 1_795_268_712_345;
        let s = format_ms(ms);
        assert!(s.ends_with(".345Z"), "{s}");
        assert_eq!(parse_rfc3339_ms(&s), Some(ms));
        assert_eq!(
            parse_rfc3339_ms("2026-11-21T14:45:12+01:00"),
            parse_rfc3339_ms("2026-11-21T13:45:12Z")
        );
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
        assert_eq!(
            month_key(parse_rfc3339_ms("2026-11-30T23:59:59Z").unwrap()),
            "2026-11"
        );
    }
}
