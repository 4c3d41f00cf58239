//! Accounts: their standing, their plan, and the names of the APIs they call.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::newtype::string_newtype;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatus {
    Active,
    /// Every request of its keys is refused (403 `account_suspended`).
    Suspended,
}

impl AccountStatus {
    pub const ALL: [AccountStatus; 2] = [AccountStatus::Active, AccountStatus::Suspended];

    pub const fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "active",
            AccountStatus::Suspended => "suspended",
        }
    }
}

impl fmt::Display for AccountStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AccountStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown account status {s:?} (expected active or suspended)"))
    }
}

/// A name for configuration: 1 to 64 of `a-z 0-9 - _`.
fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// `Ok` for a name of 1 to 64 of `a-z 0-9 - _`.
fn check_name(what: &str, s: &str) -> Result<(), String> {
    if is_name(s) {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} {s:?}: 1 to 64 of a-z, 0-9, - and _"
        ))
    }
}

string_newtype!(
    /// The name of a plan of the configuration (`free`, `pro`, …).
    PlanName,
    |s| check_name("plan name", s)
);
string_newtype!(
    /// An API of the catalog, by its slug (`sentiment`, `token-count`, …).
    ApiSlug,
    |s| check_name("API slug", s)
);

/// The APIs a restricted key may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiList(pub Vec<ApiSlug>);

impl ApiList {
    pub fn contains(&self, slug: &str) -> bool {
        self.0.iter().any(|a| a.as_str() == slug)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(ApiSlug::parse("token-count").is_ok());
        assert!(ApiSlug::parse("").is_err());
        assert!(ApiSlug::parse("Bad Slug").is_err());
        assert!(PlanName::parse(&"p".repeat(65)).is_err());
        assert_eq!("suspended".parse(), Ok(AccountStatus::Suspended));
        assert!("closed".parse::<AccountStatus>().is_err());
        let list: ApiList = serde_json::from_str(r#"["a","b"]"#).unwrap();
        assert!(list.contains("b") && !list.contains("c"));
        assert!(serde_json::from_str::<ApiList>(r#"["A"]"#).is_err());
    }
}
