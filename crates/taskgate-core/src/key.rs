//! API keys: `tg_…` (live), `tg_test_…` (test), `tg_restrict_…` (restricted).
//!
//! After the prefix come 30 random base62 characters and a 6-character base62
//! CRC32 of them, so a scanner (or our own auth) can reject a typo without a
//! database. Only the SHA-256 of the whole key is stored.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const RANDOM_LEN: usize = 30;
const CHECKSUM_LEN: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    Live,
    Test,
    Restricted,
}

impl KeyType {
    pub fn prefix(self) -> &'static str {
        match self {
            KeyType::Live => "tg_",
            KeyType::Test => "tg_test_",
            KeyType::Restricted => "tg_restrict_",
        }
    }

    pub fn mode(self) -> Mode {
        match self {
            KeyType::Test => Mode::Test,
            KeyType::Live | KeyType::Restricted => Mode::Live,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::Live => "live",
            KeyType::Test => "test",
            KeyType::Restricted => "restricted",
        }
    }
}

impl FromStr for KeyType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "live" => Ok(KeyType::Live),
            "test" => Ok(KeyType::Test),
            "restricted" => Ok(KeyType::Restricted),
            _ => Err(format!(
                "unknown key type {s:?} (expected live, test or restricted)"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Live,
    Test,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Test => "test",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "live" => Ok(Mode::Live),
            "test" => Ok(Mode::Test),
            _ => Err(format!("unknown mode {s:?}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    #[serde(rename = "apis:read")]
    ApisRead,
    #[serde(rename = "tasks:read")]
    TasksRead,
    #[serde(rename = "tasks:write")]
    TasksWrite,
    #[serde(rename = "webhooks:read")]
    WebhooksRead,
    #[serde(rename = "webhooks:write")]
    WebhooksWrite,
}

impl Scope {
    pub const ALL: [Scope; 5] = [
        Scope::ApisRead,
        Scope::TasksRead,
        Scope::TasksWrite,
        Scope::WebhooksRead,
        Scope::WebhooksWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ApisRead => "apis:read",
            Scope::TasksRead => "tasks:read",
            Scope::TasksWrite => "tasks:write",
            Scope::WebhooksRead => "webhooks:read",
            Scope::WebhooksWrite => "webhooks:write",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scope {s:?} (expected apis:read, tasks:read, tasks:write, \
                     webhooks:read or webhooks:write)"
                )
            })
    }
}

/// A key's scopes, in the order they were granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Scopes(pub Vec<Scope>);

impl Scopes {
    /// Every scope: what live and test keys hold.
    pub fn all() -> Self {
        Self(Scope::ALL.to_vec())
    }

    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Scope> {
        self.0.iter()
    }
}

/// A whole API key, as presented by a client or shown once at creation.
/// Its `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeySecret {
    key_type: KeyType,
    whole: String,
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKeySecret({})", self.hint())
    }
}

impl ApiKeySecret {
    /// A fresh random key of the given type.
    pub fn generate(key_type: KeyType) -> Self {
        let mut rng = rand::rng();
        let random: String = (0..RANDOM_LEN)
            .map(|_| BASE62[rng.random_range(0..62)] as char)
            .collect();
        let whole = format!("{}{}{}", key_type.prefix(), random, checksum(&random));
        Self { key_type, whole }
    }

    /// Checks the format and the checksum. `None` for anything that is not a
    /// well-formed key: the caller answers all such cases alike.
    pub fn parse(s: &str) -> Option<Self> {
        // Longest prefixes first: `tg_test_` also starts with `tg_`.
        let key_type = [KeyType::Test, KeyType::Restricted, KeyType::Live]
            .into_iter()
            .find(|t| s.starts_with(t.prefix()))?;
        let secret = &s[key_type.prefix().len()..];
        if secret.len() < RANDOM_LEN + CHECKSUM_LEN || secret.len() > 200 {
            return None;
        }
        if !secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let (random, check) = secret.split_at(secret.len() - CHECKSUM_LEN);
        if checksum(random) != check {
            return None;
        }
        Some(Self {
            key_type,
            whole: s.to_owned(),
        })
    }

    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The whole key. Call only to show it once at creation.
    pub fn expose(&self) -> &str {
        &self.whole
    }

    /// Hex SHA-256 of the whole key: what the store keeps and looks up by.
    pub fn hash(&self) -> String {
        hash_key(&self.whole)
    }

    /// `tg_test_…9fQ2`: the prefix and the last four characters.
    pub fn hint(&self) -> String {
        let tail = &self.whole[self.whole.len() - 4..];
        format!("{}…{}", self.key_type.prefix(), tail)
    }
}

pub fn hash_key(whole: &str) -> String {
    let digest = Sha256::digest(whole.as_bytes());
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

/// CRC32 of `random`, big-endian, in base62, zero-padded to six characters.
fn checksum(random: &str) -> String {
    let mut n = crc32fast::hash(random.as_bytes()) as u64;
    let mut out = [b'0'; CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored hash is SHA-256's lowercase hex (FIPS 180-2's "abc").
    #[test]
    fn the_hash_is_sha256_in_lowercase_hex() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn generated_keys_parse_back() {
        for t in [KeyType::Live, KeyType::Test, KeyType::Restricted] {
            let k = ApiKeySecret::generate(t);
            assert!(k.expose().starts_with(t.prefix()));
            assert_eq!(k.expose().len(), t.prefix().len() + 36);
            let p = ApiKeySecret::parse(k.expose()).expect("parses");
            assert_eq!(p.key_type(), t);
            assert_eq!(p.hash(), k.hash());
            assert!(!format!("{k:?}").contains(&k.expose()[10..]));
        }
    }

    #[test]
    fn typos_fail_the_checksum() {
        let k = ApiKeySecret::generate(KeyType::Live);
        let mut bytes = k.expose().as_bytes().to_vec();
        let i = 10;
        bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        assert!(ApiKeySecret::parse(std::str::from_utf8(&bytes).unwrap()).is_none());
        assert!(ApiKeySecret::parse("tg_short").is_none());
        assert!(ApiKeySecret::parse("sk_live_abc").is_none());
        assert!(ApiKeySecret::parse(&format!("{}!", k.expose())).is_none());
    }

    #[test]
    fn checksum_is_big_endian_base62() {
        // crc32("") == 0
        assert_eq!(checksum(""), "000000");
        let crc = crc32fast::hash(b"abc") as u64; // 0x352441c2 = 891568578
        assert_eq!(crc, 891_568_578);
        // Decoding the six base62 digits most-significant first gives the CRC back.
        let decoded = checksum("abc").bytes().fold(0u64, |acc, b| {
            acc * 62 + BASE62.iter().position(|&c| c == b).unwrap() as u64
        });
        assert_eq!(decoded, crc);
    }

    #[test]
    fn hint_shows_prefix_and_last_four() {
        let k = ApiKeySecret::generate(KeyType::Test);
        let h = k.hint();
        assert!(h.starts_with("tg_test_…"));
        assert!(h.ends_with(&k.expose()[k.expose().len() - 4..]));
    }
}
