//! Webhook messages as Standard Webhooks 1.0 signs them: a message id
//! (`msg_…`, the same on every attempt at one event), a signing secret
//! (`whsec_` and the key's bytes in base64) and the `webhook-signature`
//! header, `v1,` and the base64 HMAC-SHA256 of `"{id}.{timestamp}.{body}"`,
//! one per secret (two while a rotation overlaps), separated by spaces.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Sha256;

use crate::{TaskId, TaskStatus, Timestamp};

/// The prefix of a secret's text.
const SECRET_PREFIX: &str = "whsec_";
/// A new secret's key: 32 random bytes (the specification takes 24 to 64).
const KEY_BYTES: usize = 32;
/// How far a receiver accepts a timestamp from its clock (the
/// specification's recommendation), in seconds.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// A webhook signing secret. Its text is shown to its owner only (on
/// creation, or when asked for); `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl WebhookSecret {
    /// A new secret from the operating system's randomness.
    pub fn generate() -> Self {
        let mut key = vec![0; KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        Self { key }
    }

    /// A secret from its text (`whsec_…`); `None` unless it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let key = STANDARD.decode(text.strip_prefix(SECRET_PREFIX)?).ok()?;
        (24..=64).contains(&key.len()).then_some(Self { key })
    }

    /// The secret's text, `whsec_` and its key in base64.
    pub fn expose(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// `v1,` and this secret's signature of a message.
    pub fn sign(&self, message_id: &str, timestamp: i64, body: &[u8]) -> String {
        format!(
            "v1,{}",
            STANDARD.encode(
                self.mac(message_id, timestamp, body)
                    .finalize()
                    .into_bytes()
            )
        )
    }

    fn mac(&self, message_id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        // Any key length is valid for HMAC.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC takes keys of any length");
        mac.update(message_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// Whether `header` (a `webhook-signature` value) holds a `v1`
    /// signature of this secret over the message; compared in constant time.
    pub fn verifies(&self, message_id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
        header.split(' ').any(|sig| {
            let Some(b64) = sig.strip_prefix("v1,") else {
                return false;
            };
            let Ok(given) = STANDARD.decode(b64) else {
                return false;
            };
            self.mac(message_id, timestamp, body)
                .verify_slice(&given)
                .is_ok()
        })
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

/// The `webhook-signature` header of a message: one signature per secret,
/// the newest first.
pub fn signature_header(
    secrets: &[&WebhookSecret],
    message_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|s| s.sign(message_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a webhook message is about: a task's start or end, or a test an
/// endpoint's owner asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEvent {
    TaskRunning,
    TaskSucceeded,
    TaskFailed,
    TaskCancelled,
    WebhookTest,
}

impl WebhookEvent {
    pub const ALL: [WebhookEvent; 5] = [
        WebhookEvent::TaskRunning,
        WebhookEvent::TaskSucceeded,
        WebhookEvent::TaskFailed,
        WebhookEvent::TaskCancelled,
        WebhookEvent::WebhookTest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::TaskRunning => "task.running",
            WebhookEvent::TaskSucceeded => "task.succeeded",
            WebhookEvent::TaskFailed => "task.failed",
            WebhookEvent::TaskCancelled => "task.cancelled",
            WebhookEvent::WebhookTest => "webhook.test",
        }
    }

    /// Its bit in a [`WebhookEvents`] set (the store's `events` columns).
    pub const fn bit(self) -> i64 {
        match self {
            WebhookEvent::TaskRunning => 1,
            WebhookEvent::TaskSucceeded => 2,
            WebhookEvent::TaskFailed => 4,
            WebhookEvent::TaskCancelled => 8,
            WebhookEvent::WebhookTest => 16,
        }
    }

    /// The event of a task reaching `status` (none for `queued`).
    pub fn of_status(status: TaskStatus) -> Option<Self> {
        match status {
            TaskStatus::Queued => None,
            TaskStatus::Running => Some(WebhookEvent::TaskRunning),
            TaskStatus::Succeeded => Some(WebhookEvent::TaskSucceeded),
            TaskStatus::Failed => Some(WebhookEvent::TaskFailed),
            TaskStatus::Cancelled => Some(WebhookEvent::TaskCancelled),
        }
    }

    /// The message id of this event of `task`: the same for every endpoint,
    /// attempt and replay of it (`msg_`, the task's ULID, the event's state).
    pub fn message_id(self, task: TaskId) -> String {
        let ulid = task.to_string();
        let ulid = ulid.strip_prefix(TaskId::PREFIX).unwrap_or(&ulid);
        let what = self.as_str().rsplit('.').next().unwrap_or("event");
        format!("msg_{ulid}_{what}")
    }
}

impl fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WebhookEvent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        WebhookEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown event {s:?}: expected one of {}",
                    WebhookEvent::ALL.map(WebhookEvent::as_str).join(", ")
                )
            })
    }
}

impl Serialize for WebhookEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for WebhookEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A set of events an endpoint or a call's webhook wants; shown as the list
/// of their names, stored as bits ([`WebhookEvent::bit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WebhookEvents(i64);

impl WebhookEvents {
    /// What an endpoint or a call's webhook gets unless it says: the ends.
    pub const DEFAULT: WebhookEvents = WebhookEvents(
        WebhookEvent::TaskSucceeded.bit()
            | WebhookEvent::TaskFailed.bit()
            | WebhookEvent::TaskCancelled.bit(),
    );

    pub fn of(events: &[WebhookEvent]) -> Self {
        WebhookEvents(events.iter().fold(0, |bits, e| bits | e.bit()))
    }

    /// The set of the stored bits; `None` if a bit names no event.
    pub fn from_bits(bits: i64) -> Option<Self> {
        let all = Self::of(&WebhookEvent::ALL).0;
        (bits & !all == 0).then_some(WebhookEvents(bits))
    }

    pub fn bits(self) -> i64 {
        self.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, e: WebhookEvent) -> bool {
        self.0 & e.bit() != 0
    }

    pub fn list(self) -> Vec<WebhookEvent> {
        WebhookEvent::ALL
            .into_iter()
            .filter(|e| self.contains(*e))
            .collect()
    }
}

impl TryFrom<i64> for WebhookEvents {
    type Error = String;
    fn try_from(bits: i64) -> Result<Self, String> {
        Self::from_bits(bits).ok_or_else(|| format!("unknown event bits {bits}"))
    }
}

impl Serialize for WebhookEvents {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.list())
    }
}

/// Where a delivery of an event stands: waiting for its first attempt (or
/// being sent), delivered, failed (its last attempt did; `next_attempt_at`
/// says whether another comes), or failed at every attempt of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    Pending,
    Succeeded,
    Failed,
    Exhausted,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 4] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Succeeded,
        DeliveryStatus::Failed,
        DeliveryStatus::Exhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Exhausted => "exhausted",
        }
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeliveryStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DeliveryStatus::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("unknown delivery status {s:?}"))
    }
}

/// One attempt at delivering a message: when, what the receiver answered
/// (its status and the start of its body) or why there was no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    pub at: Timestamp,
    pub http_status: Option<u16>,
    pub duration_ms: u64,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
}

/// A delivery's attempts, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeliveryAttempts(pub Vec<DeliveryAttempt>);

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification's reference libraries' tests.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn signs_as_the_reference_libraries() {
        let secret = WebhookSecret::parse(SECRET).unwrap();
        assert_eq!(secret.sign(ID, TIMESTAMP, BODY), SIGNATURE);
        assert!(secret.verifies(ID, TIMESTAMP, BODY, SIGNATURE));
        assert!(!secret.verifies(ID, TIMESTAMP + 1, BODY, SIGNATURE));
        assert!(!secret.verifies(ID, TIMESTAMP, b"{}", SIGNATURE));
    }

    #[test]
    fn a_rotation_signs_with_both_and_either_verifies() {
        let (new, old) = (WebhookSecret::generate(), WebhookSecret::generate());
        let header = signature_header(&[&new, &old], ID, TIMESTAMP, BODY);
        let sigs: Vec<&str> = header.split(' ').collect();
        assert_eq!(sigs.len(), 2);
        assert!(new.verifies(ID, TIMESTAMP, BODY, &header));
        assert!(old.verifies(ID, TIMESTAMP, BODY, &header));
        assert!(!WebhookSecret::generate().verifies(ID, TIMESTAMP, BODY, &header));
    }

    #[test]
    fn events_are_bits_and_names() {
        let set = WebhookEvents::of(&[WebhookEvent::TaskRunning, WebhookEvent::TaskFailed]);
        assert_eq!(set.bits(), 5);
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#"["task.running","task.failed"]"#
        );
        assert_eq!(WebhookEvents::from_bits(5), Some(set));
        assert_eq!(WebhookEvents::from_bits(64), None);
        assert_eq!(
            WebhookEvents::DEFAULT.list(),
            vec![
                WebhookEvent::TaskSucceeded,
                WebhookEvent::TaskFailed,
                WebhookEvent::TaskCancelled
            ]
        );
        assert!("task.nope".parse::<WebhookEvent>().is_err());
        let task = TaskId::new();
        let id = WebhookEvent::TaskSucceeded.message_id(task);
        assert!(id.starts_with("msg_") && id.ends_with("_succeeded"));
        assert_eq!(id, WebhookEvent::TaskSucceeded.message_id(task));
        assert_ne!(id, WebhookEvent::TaskFailed.message_id(task));
    }

    #[test]
    fn secrets_round_trip_and_never_show_in_debug() {
        let s = WebhookSecret::generate();
        let text = s.expose();
        assert!(text.starts_with("whsec_"));
        assert_eq!(WebhookSecret::parse(&text), Some(s.clone()));
        assert_eq!(format!("{s:?}"), "WebhookSecret(…)");
        assert!(
            WebhookSecret::parse("whsec_c2hvcnQ=").is_none(),
            "too short"
        );
        assert!(WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_none());
    }
}
