//! Webhook messages as Standard Webhooks 1.0 signs them: a message id
//! (`msg_…`, the same on every attempt at one event), a signing secret
//! (`whsec_` and the key's bytes in base64) and the `webhook-signature`
//! header, `v1,` and the base64 HMAC-SHA256 of `"{id}.{timestamp}.{body}"`,
//! one per secret (two while a rotation overlaps), separated by spaces.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

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
