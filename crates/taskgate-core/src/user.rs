//! Dashboard users: their email, their role in their account, their standing,
//! and the rules a password must meet.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::newtype::string_newtype;

string_newtype!(
    /// An email address as users sign in with it: trimmed and lower-cased by
    /// [`Email::normalize`], at most 254 characters, one `@` with something
    /// on each side and a dot in the domain, no spaces or control characters.
    Email,
    |s| {
        let ok = (3..=254).contains(&s.len())
            && s == s.to_lowercase()
            && !s.chars().any(|c| c.is_whitespace() || c.is_control())
            && matches!(s.split_once('@'), Some((local, domain))
                if !local.is_empty() && !domain.contains('@')
                    && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.'));
        if ok {
            Ok(())
        } else {
            Err(format!("{s:?} is not an email address"))
        }
    }
);

impl Email {
    /// The address as typed (any case, spaces around it), normalized.
    pub fn normalize(typed: &str) -> Result<Self, String> {
        Self::parse(&typed.trim().to_lowercase())
    }
}

/// What a user may do. Owners and members belong to one account; admins run
/// the whole service (every account) and belong to one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sees the account, creates and revokes its keys, sets its spend limit.
    Owner,
    /// Sees the account; changes nothing but its own tasks.
    Member,
    /// An owner of every account, who also manages accounts and users.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Owner, Role::Member, Role::Admin];

    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Member => "member",
            Role::Admin => "admin",
        }
    }

    /// Creates, rolls and revokes keys; sets the spend limit.
    pub const fn manages_account(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role {s:?} (expected owner, member or admin)"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserStatus {
    Active,
    /// Cannot sign in; their sessions were ended when they were disabled.
    Disabled,
}

impl UserStatus {
    pub const ALL: [UserStatus; 2] = [UserStatus::Active, UserStatus::Disabled];

    pub const fn as_str(self) -> &'static str {
        match self {
            UserStatus::Active => "active",
            UserStatus::Disabled => "disabled",
        }
    }
}

impl fmt::Display for UserStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for UserStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown user status {s:?} (expected active or disabled)"))
    }
}

/// Passwords: at least [`PASSWORD_MIN_CHARS`] characters (NIST SP 800-63B asks
/// 15 of a password that is the only factor; 12 with the rate limits on
/// sign-in), at most [`PASSWORD_MAX_CHARS`] (long passphrases welcome; the
/// bound only keeps hashing cheap), and not one of the most common passwords.
pub const PASSWORD_MIN_CHARS: usize = 12;
pub const PASSWORD_MAX_CHARS: usize = 256;

/// Why a password is refused, in words for the person choosing it; `None`
/// when it is acceptable.
pub fn password_problem(password: &str) -> Option<String> {
    let chars = password.chars().count();
    if chars < PASSWORD_MIN_CHARS {
        return Some(format!(
            "A password needs at least {PASSWORD_MIN_CHARS} characters."
        ));
    }
    if chars > PASSWORD_MAX_CHARS {
        return Some(format!(
            "A password may have at most {PASSWORD_MAX_CHARS} characters."
        ));
    }
    let lower = password.to_lowercase();
    if COMMON_PASSWORDS.contains(&lower.as_str()) || one_repeated(&lower) {
        return Some("This password is too common; choose another.".to_owned());
    }
    None
}

/// `aaaaaaaaaaaa`, `abcabcabcabc`: a short piece repeated.
fn one_repeated(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    (1..=4).any(|n| chars.len() > n && chars.iter().enumerate().all(|(i, c)| *c == chars[i % n]))
}

/// Common passwords of 12 or more characters (shorter ones are refused by
/// length), lower-cased, as they appear at the top of public breach lists.
const COMMON_PASSWORDS: &[&str] = &[
    "123456789012",
    "1234567890123",
    "12345678901234",
    "123456789012345",
    "1234567890qwerty",
    "1q2w3e4r5t6y",
    "1q2w3e4r5t6y7u",
    "1qaz2wsx3edc",
    "1qaz2wsx3edc4rfv",
    "abc123456789",
    "abcd12345678",
    "administrator",
    "adminadmin123",
    "changeme1234",
    "correcthorsebatterystaple",
    "iloveyou1234",
    "letmein12345",
    "passw0rd1234",
    "password1234",
    "password12345",
    "password123456",
    "password!123",
    "password@123",
    "passwordpassword",
    "q1w2e3r4t5y6",
    "qazwsxedcrfv",
    "qwerty123456",
    "qwerty1234567",
    "qwertyuiop12",
    "qwertyuiop123",
    "qwertyuiopasdfgh",
    "taskgate1234",
    "taskgatetaskgate",
    "welcome12345",
    "welcome123456",
    "zaq12wsxcde3",
    "zxcvbnm12345",
    "asdfghjkl123",
    "trustno1trustno1",
    "superman1234",
    "football1234",
    "baseball1234",
    "sunshine1234",
    "princess1234",
    "dragon123456",
    "monkey123456",
    "master123456",
    "shadow123456",
    "michael12345",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_and_checked() {
        assert_eq!(
            Email::normalize("  Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "a@b",
            "a b@c.d",
            "a@b@c.d",
            "a@.b",
        ] {
            assert!(Email::normalize(bad).is_err(), "{bad}");
        }
        assert!(Email::parse("Ada@example.com").is_err());
    }

    #[test]
    fn passwords_are_long_and_uncommon() {
        assert!(password_problem("short").is_some());
        assert!(password_problem("Password1234").is_some());
        assert!(password_problem("aaaaaaaaaaaaaaa").is_some());
        assert!(password_problem("abcabcabcabc").is_some());
        assert!(password_problem("x".repeat(257).as_str()).is_some());
        assert!(password_problem("violet kettle drums at noon").is_none());
        assert!(password_problem(&"long passphrase ".repeat(5)).is_none());
    }

    #[test]
    fn roles_round_trip() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert!(Role::Owner.manages_account() && !Role::Member.manages_account());
    }
}
