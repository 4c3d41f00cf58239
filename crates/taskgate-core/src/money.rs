//! Money as integer micro-dollars (1e-6 USD): exact sums, shown as decimal strings;
//! and list prices as integer nano-dollars (1e-9 USD), since a price per token
//! or per call can be below a micro-dollar.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(pub i64);

impl Micros {
    pub const ZERO: Micros = Micros(0);

    /// Parses a non-negative decimal USD amount with at most 6 decimals: `"25"`, `"0.50"`.
    pub fn parse_usd(s: &str) -> Result<Micros, String> {
        parse_decimal(s, 6).map(Micros)
    }

    /// `"12.345600"`: always six decimals, as the contract's `cost_usd`.
    pub fn to_usd_string(self) -> String {
        format_decimal(self.0, 6)
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_usd_string())
    }
}

/// A list price in nano-dollars (1e-9 USD), as the configuration writes it:
/// a decimal string of USD with at most 9 decimals (`"0.0002"`). What a task
/// is charged is rounded to [`Micros`] ([`nanos_to_micros`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub i64);

impl Nanos {
    /// Parses a non-negative decimal USD amount with at most 9 decimals.
    pub fn parse_usd(s: &str) -> Result<Nanos, String> {
        parse_decimal(s, 9).map(Nanos)
    }

    /// The shortest decimal that reads back as the same amount: `"0.0002"`,
    /// `"25"` (so a price serializes back as it was most likely written).
    pub fn to_usd_string(self) -> String {
        let mut s = format_decimal(self.0, 9);
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
        s
    }
}

impl std::str::FromStr for Nanos {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse_usd(s)
    }
}

impl Serialize for Nanos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_usd_string())
    }
}

/// Only a string is taken: a number would pass through a float, and a price
/// must be exact.
impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a decimal string of USD, e.g. \"0.0002\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Nanos, E> {
                Nanos::parse_usd(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// Parses a non-negative decimal string into an integer scaled by 10^`scale`.
pub fn parse_decimal(s: &str, scale: u32) -> Result<i64, String> {
    let bad = || {
        format!(
            "invalid amount {s:?}: expected a non-negative decimal with at most {scale} decimals"
        )
    };
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if frac.len() > scale as usize
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (s.contains('.') && frac.is_empty())
    {
        return Err(bad());
    }
    let whole: i64 = whole.parse().map_err(|_| bad())?;
    let mut frac_val: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    for _ in frac.len()..scale as usize {
        frac_val *= 10;
    }
    whole
        .checked_mul(10i64.pow(scale))
        .and_then(|w| w.checked_add(frac_val))
        .ok_or_else(bad)
}

/// Formats an integer scaled by 10^`scale` with exactly `scale` decimals.
pub fn format_decimal(v: i64, scale: u32) -> String {
    let p = 10i64.pow(scale);
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!(
        "{sign}{}.{:0width$}",
        a / p as u64,
        a % p as u64,
        width = scale as usize
    )
}

/// Nano-USD to micro-USD, rounding half up: what a task is charged.
pub fn nanos_to_micros(nanos: i128) -> Micros {
    Micros(((nanos + 500) / 1000).clamp(0, i64::MAX as i128) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format() {
        assert_eq!(Micros::parse_usd("25"), Ok(Micros(25_000_000)));
        assert_eq!(Micros::parse_usd("0.5"), Ok(Micros(500_000)));
        assert_eq!(Micros::parse_usd("0.000001"), Ok(Micros(1)));
        assert!(Micros::parse_usd("0.0000001").is_err());
        assert!(Micros::parse_usd("-1").is_err());
        assert!(Micros::parse_usd("1.").is_err());
        assert!(Micros::parse_usd("abc").is_err());
        assert_eq!(Micros(1_234_500).to_usd_string(), "1.234500");
        assert_eq!(Micros(0).to_usd_string(), "0.000000");
        assert_eq!(format_decimal(1_000, 4), "0.1000");
        assert_eq!(nanos_to_micros(1_499), Micros(1));
        assert_eq!(nanos_to_micros(1_500), Micros(2));
    }

    #[test]
    fn prices_read_back_as_written() {
        for (text, nanos) in [
            ("0.0002", 200_000),
            ("25", 25_000_000_000),
            ("0.00000015", 150),
            ("0", 0),
            ("1.5", 1_500_000_000),
        ] {
            let p = Nanos::parse_usd(text).unwrap();
            assert_eq!(p, Nanos(nanos));
            assert_eq!(p.to_usd_string(), text);
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(serde_json::from_value::<Nanos>(json).unwrap(), p);
        }
        assert_eq!(Nanos::parse_usd("0.50").unwrap().to_usd_string(), "0.5");
        assert!(Nanos::parse_usd("0.0000000001").is_err());
        assert!(serde_json::from_value::<Nanos>(serde_json::json!(0.5)).is_err());
        let e = serde_json::from_value::<Nanos>(serde_json::json!("-1")).unwrap_err();
        assert!(e.to_string().contains("invalid amount"), "{e}");
    }
}
