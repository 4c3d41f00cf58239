//! Human durations for the CLI: `90s`, `15m`, `12h`, `30d`, `1h30m`, `0`.

/// Parses a duration into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(0);
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut seen_unit = false;
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: i64 = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {c:?} (use s, m, h, d, w)"
                ));
            }
        };
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: expected a number before {c:?}"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("invalid duration {s:?}: too long"))?;
        digits.clear();
        seen_unit = true;
    }
    if !digits.is_empty() || !seen_unit {
        return Err(format!(
            "invalid duration {s:?}: expected e.g. 30s, 15m, 12h, 30d"
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(parse_duration_ms("90s"), Ok(90_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("30d"), Ok(2_592_000_000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert!(parse_duration_ms("12").is_err());
        assert!(parse_duration_ms("5y").is_err());
        assert!(parse_duration_ms("").is_err());
    }
}
