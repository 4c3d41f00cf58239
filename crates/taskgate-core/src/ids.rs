//! Prefixed, time-sortable identifiers: `task_01JD…`, `key_01JD…`.

use std::sync::Mutex;
use std::time::SystemTime;

use ulid::{Generator, Ulid};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Task,
    Key,
    Account,
    Request,
    User,
}

impl IdKind {
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Task => "task_",
            IdKind::Key => "key_",
            IdKind::Account => "acct_",
            IdKind::Request => "req_",
            IdKind::User => "user_",
        }
    }
}

// A monotonic generator: ids made in the same millisecond still sort in the
// order they were made, which keyset pagination by id relies on.
static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

fn next_ulid_at(at: SystemTime) -> Ulid {
    let mut guard = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let generator = guard.get_or_insert_with(Generator::new);
    // Overflow needs 2^80 ids in one millisecond; fall back to a random one.
    generator
        .generate_from_datetime(at)
        .unwrap_or_else(|_| Ulid::from_datetime(at))
}

/// A new id of the given kind, stamped with the current time.
pub fn new_id(kind: IdKind) -> String {
    new_id_at(kind, SystemTime::now())
}

/// A new id of the given kind, stamped with `at` (so that a row's id and its
/// `created_at` agree to the millisecond).
pub fn new_id_at(kind: IdKind, at: SystemTime) -> String {
    let ulid = next_ulid_at(at);
    let mut s = String::with_capacity(kind.prefix().len() + 26);
    s.push_str(kind.prefix());
    s.push_str(&ulid.to_string());
    s
}

/// The smallest id of `kind` that could have been made at `unix_ms`: for turning
/// a time bound into an id bound.
pub fn id_floor(kind: IdKind, unix_ms: i64) -> String {
    let ms = unix_ms.clamp(0, (1i64 << 48) - 1) as u64;
    format!("{}{}", kind.prefix(), Ulid::from_parts(ms, 0))
}

/// Checks that `s` looks like an id of `kind` (prefix and a valid ULID).
pub fn is_valid(kind: IdKind, s: &str) -> bool {
    s.strip_prefix(kind.prefix())
        .is_some_and(|rest| rest.len() == 26 && Ulid::from_string(rest).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_sorted() {
        let a = new_id(IdKind::Task);
        let b = new_id(IdKind::Task);
        assert!(a.starts_with("task_"));
        assert!(a < b);
        assert!(is_valid(IdKind::Task, &a));
        assert!(!is_valid(IdKind::Key, &a));
        assert!(!is_valid(IdKind::Task, "task_nope"));
    }

    #[test]
    fn floor_sorts_before_ids_of_that_millisecond() {
        let now = SystemTime::now();
        let ms = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let id = new_id_at(IdKind::Task, now);
        assert!(id_floor(IdKind::Task, ms) <= id);
        assert!(id_floor(IdKind::Task, ms + 1) > id);
    }
}
