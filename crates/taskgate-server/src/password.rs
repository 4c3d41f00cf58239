//! Password hashing: argon2id at OWASP's recommended parameters (19 MiB of
//! memory, 2 passes, 1 lane), stored as a PHC string, so that stronger
//! parameters later still verify the hashes made before.
//!
//! Hashing takes tens of milliseconds of CPU and 19 MiB on purpose, so it
//! runs on a pool of its own: one thread per core, at most two jobs per
//! thread admitted at once ([`verify_bounded`] refuses the rest at once,
//! [`hash_off_thread`] waits its turn). Never on tokio's blocking pool: that
//! pool has 512 threads (a flood of sign-ins would hold 19 MiB on each) and
//! also runs SQLite's reads, which a flood would stall.

use std::sync::mpsc;
use std::sync::{Arc, LazyLock, Mutex};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

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

/// The pool's threads are busy and its queue is full: try again shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

type Job = Box<dyn FnOnce() + Send>;

/// Threads that do nothing but hash, and the permits that bound their work.
struct Pool {
    jobs: Mutex<mpsc::Sender<Job>>,
    permits: Arc<Semaphore>,
}

static POOL: LazyLock<Pool> = LazyLock::new(|| {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 16));
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..threads {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("taskgate-password-{i}"))
            .spawn(move || {
                loop {
                    // The lock is held only to take the next job.
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a password-hashing thread");
        }
    }
    Pool {
        jobs: Mutex::new(tx),
        permits: Arc::new(Semaphore::new(threads * 2)),
    }
});

/// Runs `work` on the pool under `permit`; its answer, or `None` if the
/// pool is gone (it never is while the process runs).
async fn run<T: Send + 'static>(
    permit: OwnedSemaphorePermit,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(work());
        drop(permit);
    });
    POOL.jobs.lock().ok()?.send(job).ok()?;
    rx.await.ok()
}

/// The hash of `password`, made on the pool (waiting for room if it is
/// busy: hashing follows an authenticated action, never a stranger's).
pub async fn hash_off_thread(password: String) -> String {
    let Ok(permit) = POOL.permits.clone().acquire_owned().await else {
        return String::new();
    };
    run(permit, move || hash(&password))
        .await
        .unwrap_or_default()
}

/// Whether `password` is the one `phc` was made from, checked on the pool;
/// [`Busy`] at once when the pool has no room (a flood of sign-ins).
pub async fn verify_bounded(password: String, phc: String) -> Result<bool, Busy> {
    let permit = POOL.permits.clone().try_acquire_owned().map_err(|_| Busy)?;
    Ok(run(permit, move || verify(&password, &phc))
        .await
        .unwrap_or(false))
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

    #[tokio::test]
    async fn a_full_pool_refuses_a_verify_at_once_and_takes_it_when_free() {
        let phc = hash("violet kettle drums");
        // Every permit taken: as if the pool's threads and queue were full.
        let all = POOL.permits.available_permits() as u32;
        let held = POOL.permits.clone().acquire_many_owned(all).await.unwrap();
        assert_eq!(
            verify_bounded("violet kettle drums".to_owned(), phc.clone()).await,
            Err(Busy)
        );
        drop(held);
        assert_eq!(
            verify_bounded("violet kettle drums".to_owned(), phc.clone()).await,
            Ok(true)
        );
        assert_eq!(
            verify_bounded("violet kettle drum".to_owned(), phc).await,
            Ok(false)
        );
        assert!(
            hash_off_thread("x".to_owned())
                .await
                .starts_with("$argon2id$")
        );
    }
}
