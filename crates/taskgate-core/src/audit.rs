//! The audit log: who changed what, when and from where, as a chain of
//! events each sealed by a hash over the one before it.
//!
//! An event is `{id, at, account_id, actor, action, target, changes, ip,
//! user_agent, hash}`. Its `hash` is the SHA-256, in lower-case hex, of the
//! previous event's `hash` (64 hex digits; [`GENESIS_HASH`] before the first
//! event, or the retention checkpoint's hash once old events are deleted)
//! followed directly by the event's canonical JSON ([`canonical_json`]): the
//! event as the API shows it, without `hash`, keys sorted, no whitespace.
//! Editing a stored event changes its canonical form, and deleting one
//! leaves its successor sealed to a hash that is gone: either breaks the
//! chain from there on, which [`AuditEvent::seal`] recomputed shows.
//!
//! What an event records is chosen where it is made (the store, inside the
//! transaction of the change): never a secret nor a password hash, only ids,
//! names, and a key's hint (its prefix and last four characters).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::ids::{AccountId, AuditId, KeyId, UserId, WebhookEndpointId};
use crate::key::Mode;
use crate::timestamp::Timestamp;
use crate::user::Email;

/// The hash the first event of a chain is sealed to: 64 zeros.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest user agent kept, in characters (the rest is cut).
pub const USER_AGENT_MAX_CHARS: usize = 512;

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    /// A user signed in to the dashboard (or trying to sign in).
    User,
    /// The operator: the command line, or the server's first start.
    Operator,
    /// An API key, through the API.
    ApiKey,
}

impl ActorType {
    pub const fn as_str(self) -> &'static str {
        match self {
            ActorType::User => "user",
            ActorType::Operator => "operator",
            ActorType::ApiKey => "api_key",
        }
    }
}

impl FromStr for ActorType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "user" => Ok(ActorType::User),
            "operator" => Ok(ActorType::Operator),
            "api_key" => Ok(ActorType::ApiKey),
            other => Err(format!("not an actor type: {other:?}")),
        }
    }
}

/// The actor of an event: its type, its id (a user's or key's id; the
/// operator's name, see [`AuditActor::operator`]) and a user's email.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditActor {
    #[serde(rename = "type")]
    pub kind: ActorType,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<Email>,
}

impl AuditActor {
    pub fn user(id: UserId, email: &Email) -> Self {
        Self {
            kind: ActorType::User,
            id: id.to_string(),
            email: Some(email.clone()),
        }
    }

    /// The operator, named by the door that acts for it (the command line
    /// says `cli:` and the system user; the first start `first-start`).
    pub fn operator(name: impl Into<String>) -> Self {
        Self {
            kind: ActorType::Operator,
            id: name.into(),
            email: None,
        }
    }

    pub fn api_key(id: KeyId) -> Self {
        Self {
            kind: ActorType::ApiKey,
            id: id.to_string(),
            email: None,
        }
    }
}

macro_rules! actions {
    ($($variant:ident = $text:literal: $doc:literal,)*) => {
        /// What an event records.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AuditAction {
            $(#[doc = $doc] $variant,)*
        }

        impl AuditAction {
            pub const ALL: &'static [AuditAction] = &[$(AuditAction::$variant),*];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(AuditAction::$variant => $text,)*
                }
            }
        }

        impl FromStr for AuditAction {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok(AuditAction::$variant),)*
                    other => Err(format!("not an audit action: {other:?}")),
                }
            }
        }
    };
}

actions! {
    AccountCreated = "account.created": "An account was created.",
    AccountUpdated = "account.updated": "An account's plan, status, spend limit or ceiling changed.",
    KeyCreated = "key.created": "An API key was created.",
    KeyRevoked = "key.revoked": "An API key was revoked.",
    KeyRolled = "key.rolled": "An API key was replaced by a new one (the target is the old key).",
    UserCreated = "user.created": "A dashboard user was created.",
    UserDisabled = "user.disabled": "A user was disabled (their sessions ended).",
    UserEnabled = "user.enabled": "A user was enabled again.",
    UserPasswordReset = "user.password_reset": "A user's password was set by someone else.",
    UserPasswordChanged = "user.password_changed": "A user changed their own password.",
    UserSignedIn = "user.signed_in": "A user signed in to the dashboard.",
    UserSignInFailed = "user.sign_in_failed": "A sign-in was refused (wrong email or password, or a disabled user).",
    WebhookEndpointCreated = "webhook_endpoint.created": "A webhook endpoint was created.",
    WebhookEndpointUpdated = "webhook_endpoint.updated": "A webhook endpoint's URL, events, description or state changed.",
    WebhookEndpointDeleted = "webhook_endpoint.deleted": "A webhook endpoint was deleted.",
    WebhookEndpointSecretRotated = "webhook_endpoint.secret_rotated": "A webhook endpoint's signing secret was replaced.",
    SigningSecretRotated = "signing_secret.rotated": "The secret that signs an account's calls' webhooks was replaced.",
}

impl fmt::Display for AuditAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AuditAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AuditAction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What an event acted on: `account`, `key`, `user` (its id),
/// `webhook_endpoint`, or `signing_secret` (its id the mode, `live` or
/// `test`; the event's account says whose).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditTarget {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

impl AuditTarget {
    fn new(kind: &str, id: impl fmt::Display) -> Self {
        Self {
            kind: kind.to_owned(),
            id: id.to_string(),
        }
    }

    pub fn account(id: AccountId) -> Self {
        Self::new("account", id)
    }

    pub fn key(id: KeyId) -> Self {
        Self::new("key", id)
    }

    pub fn user(id: UserId) -> Self {
        Self::new("user", id)
    }

    /// A sign-in for an email no user has: the target is the email typed.
    pub fn email(email: &Email) -> Self {
        Self::new("email", email.as_str())
    }

    pub fn webhook_endpoint(id: WebhookEndpointId) -> Self {
        Self::new("webhook_endpoint", id)
    }

    pub fn signing_secret(mode: Mode) -> Self {
        Self::new("signing_secret", mode.as_str())
    }
}

/// What changed, field by field: `{field: [before, after]}` (`null` for a
/// field that did not exist before, or does not after).
pub type Changes = BTreeMap<String, [Value; 2]>;

/// Adds `field` to `changes` if `before` and `after` differ.
pub fn change<T: Serialize + PartialEq>(changes: &mut Changes, field: &str, before: T, after: T) {
    if before != after {
        changes.insert(field.to_owned(), [json(&before), json(&after)]);
    }
}

/// Adds `field` as made: `[null, value]`.
pub fn created<T: Serialize>(changes: &mut Changes, field: &str, value: T) {
    changes.insert(field.to_owned(), [Value::Null, json(&value)]);
}

fn json<T: Serialize>(v: &T) -> Value {
    // The values recorded are plain data (ids, strings, numbers, enums).
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Who acts, and from where: given by a door, carried by the services to
/// the store, which records it with each change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditContext {
    pub actor: AuditActor,
    /// The client's address (behind the trusted proxies); `None` from the
    /// command line.
    pub ip: Option<String>,
    pub user_agent: Option<String>,
}

impl AuditContext {
    pub fn new(actor: AuditActor, ip: Option<String>, user_agent: Option<&str>) -> Self {
        let user_agent = user_agent.map(|ua| {
            ua.chars()
                .filter(|c| !c.is_control())
                .take(USER_AGENT_MAX_CHARS)
                .collect()
        });
        Self {
            actor,
            ip,
            user_agent,
        }
    }

    /// An event of this actor.
    pub fn entry(
        &self,
        action: AuditAction,
        account_id: Option<AccountId>,
        target: AuditTarget,
        changes: Changes,
    ) -> AuditEntry {
        AuditEntry {
            context: self.clone(),
            action,
            account_id,
            target,
            changes,
        }
    }
}

/// An event to append: everything but its id, time and hash, which the
/// store gives it in the transaction that appends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub context: AuditContext,
    pub action: AuditAction,
    pub account_id: Option<AccountId>,
    pub target: AuditTarget,
    pub changes: Changes,
}

/// An event of the audit log, as it is stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub id: AuditId,
    #[serde(with = "crate::timestamp::rfc3339")]
    pub at: Timestamp,
    pub account_id: Option<AccountId>,
    pub actor: AuditActor,
    pub action: AuditAction,
    pub target: AuditTarget,
    pub changes: Changes,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// The seal: see the module's documentation.
    pub hash: String,
}

impl AuditEvent {
    /// `entry` made an event at `at`, sealed after `previous_hash`.
    pub fn new(entry: &AuditEntry, at: Timestamp, previous_hash: &str) -> Self {
        let mut event = Self {
            id: AuditId::at(at),
            at,
            account_id: entry.account_id,
            actor: entry.context.actor.clone(),
            action: entry.action,
            target: entry.target.clone(),
            changes: entry.changes.clone(),
            ip: entry.context.ip.clone(),
            user_agent: entry.context.user_agent.clone(),
            hash: String::new(),
        };
        event.hash = event.seal(previous_hash);
        event
    }

    /// The event's canonical JSON: itself without `hash`, keys sorted, no
    /// whitespace ([`canonical_json`]).
    pub fn canonical(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("hash");
        }
        canonical_json(&value)
    }

    /// The hash the event should have after `previous_hash`: compared with
    /// its `hash`, whether it is whole.
    pub fn seal(&self, previous_hash: &str) -> String {
        chain_hash(previous_hash, &self.canonical())
    }
}

/// SHA-256, lower-case hex, of `previous_hash` then `canonical`, as bytes
/// (UTF-8) with nothing between them.
pub fn chain_hash(previous_hash: &str, canonical: &str) -> String {
    let mut h = Sha256::new();
    h.update(previous_hash.as_bytes());
    h.update(canonical.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON value in canonical form: objects' keys sorted by their UTF-8
/// bytes, no whitespace, strings escaped as RFC 8259 requires and no more
/// (`"`, `\`, and control characters; other characters as themselves),
/// numbers as written by `serde_json` (the log holds integers only).
/// Sorted here, not by the map type: the order of `serde_json`'s maps
/// depends on a feature another crate may turn on.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, v);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry() -> AuditEntry {
        let email = Email::normalize("a@example.com").unwrap();
        let ctx = AuditContext::new(
            AuditActor::user(UserId::new(), &email),
            Some("192.0.2.1".into()),
            Some("curl/8\n"),
        );
        let mut changes = Changes::new();
        change(&mut changes, "plan", "free", "pro");
        change(&mut changes, "status", "active", "active");
        ctx.entry(
            AuditAction::AccountUpdated,
            Some(AccountId::new()),
            AuditTarget::account(AccountId::new()),
            changes,
        )
    }

    #[test]
    fn canonical_json_sorts_keys_and_has_no_whitespace() {
        let v = json!({"b": [1, {"z": null, "a": "x\"y"}], "a": "é"});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":"é","b":[1,{"a":"x\"y","z":null}]}"#
        );
    }

    #[test]
    fn an_event_is_sealed_to_its_predecessor_and_its_content() {
        let e = entry();
        assert_eq!(e.context.user_agent.as_deref(), Some("curl/8"));
        assert_eq!(e.changes.len(), 1, "unchanged fields are left out");
        let at = Timestamp::from_unix_ms(1_764_000_000_000);
        let first = AuditEvent::new(&e, at, GENESIS_HASH);
        assert_eq!(first.hash.len(), 64);
        assert_eq!(first.seal(GENESIS_HASH), first.hash);
        assert!(!first.canonical().contains("hash"));
        assert!(first.canonical().starts_with(r#"{"account_id":"acct_"#));
        let second = AuditEvent::new(&e, at, &first.hash);
        assert_ne!(second.seal(GENESIS_HASH), second.hash);
        let mut edited = first.clone();
        edited
            .changes
            .insert("plan".into(), [json!("free"), json!("enterprise")]);
        assert_ne!(edited.seal(GENESIS_HASH), first.hash);
        let back: AuditEvent =
            serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
        assert_eq!(back, first);
    }

    #[test]
    fn actions_round_trip() {
        for a in AuditAction::ALL {
            assert_eq!(a.as_str().parse::<AuditAction>(), Ok(*a));
        }
        assert!("key.eaten".parse::<AuditAction>().is_err());
    }
}
