//! Password hashing: argon2id at OWASP's recommended parameters (19 MiB of
//! memory, 2 passes, 1 lane), stored as a PHC string, so that stronger
//! parameters later still verify the hashes made before. Hashing takes tens
//! of milliseconds of CPU on purpose: the async callers run it on the
//! blocking pool ([`hash_off_thread`], [`verify_off_thread`]).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;

fn argon2() -> Argon2<'static> {
    // 19 MiB, t = 2, p = 1: OWASP's Password Storage Cheat Sheet, argon2id.
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// The PHC string of `password` with a fresh random salt.
pub fn hash(password: &str) -> String {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    // Both steps fail only for parameters or salts out of argon2's range,
    // and these are fixed and in range.
    let salt = SaltString::encode_b64(&salt).expect("a 16-byte salt encodes");
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2id with fixed, valid parameters")
        .to_string()
}

/// Whether `password` is the one `phc` was made from. A malformed hash
/// matches nothing.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|parsed| {
        argon2()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A hash that matches no password, verified when the email is unknown so
/// that a sign-in takes as long whether or not the account exists.
pub fn decoy() -> &'static str {
    static DECOY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| hash("no password matches this decoy hash"));
    &DECOY
}

pub async fn hash_off_thread(password: String) -> String {
    tokio::task::spawn_blocking(move || hash(&password))
        .await
        .unwrap_or_default()
}

pub async fn verify_off_thread(password: String, phc: String) -> bool {
    tokio::task::spawn_blocking(move || verify(&password, &phc))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash("violet kettle drums");
        let b = hash("violet kettle drums");
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert!(verify("violet kettle drums", &a));
        assert!(!verify("violet kettle drum", &a));
        assert!(!verify("anything", "not a hash"));
        assert!(!verify("", decoy()));
    }
}
