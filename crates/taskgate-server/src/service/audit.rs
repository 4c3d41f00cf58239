//! The audit log as its readers see it: the operator and admins read every
//! account's events and verify the chain; an account's owners read their
//! account's events. The events themselves are written by the store, in
//! the transaction of each change (see `taskgate_store::audit`).

use taskgate_core::{AccountId, AuditAction, AuditEvent, Role, Timestamp};
use taskgate_store::prelude::*;
use taskgate_store::{AuditQuery, AuditVerification, StoreError};

use super::Actor;

/// The most events one page holds.
pub const MAX_PAGE: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("this actor may not read the audit log")]
    Forbidden,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a reader asks for.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// One account's events; an owner's are always their account's.
    pub account: Option<AccountId>,
    pub action: Option<AuditAction>,
    pub since: Option<Timestamp>,
    /// Older than this event (the next page).
    pub before: Option<taskgate_core::AuditId>,
    pub limit: i64,
}

/// The account whose events `actor` may read: `None` for all of them, or
/// the one it owns.
fn scope(actor: Actor<'_>) -> Result<Option<AccountId>, AuditError> {
    match actor {
        Actor::Operator => Ok(None),
        Actor::User(u) if u.role == Role::Admin => Ok(None),
        Actor::User(u) if u.role == Role::Owner => Ok(Some(u.account_id)),
        _ => Err(AuditError::Forbidden),
    }
}

/// Whether `actor` may read the audit log at all.
pub fn may_read(actor: Actor<'_>) -> bool {
    scope(actor).is_ok()
}

/// Events, newest first.
pub async fn list(
    store: &dyn Store,
    actor: Actor<'_>,
    filter: AuditFilter,
) -> Result<Vec<AuditEvent>, AuditError> {
    let account = match scope(actor)? {
        None => filter.account,
        Some(own) => Some(own),
    };
    let query = AuditQuery {
        account_id: account,
        action: filter.action,
        since: filter.since,
        before: filter.before,
        limit: filter.limit.clamp(1, MAX_PAGE),
    };
    Ok(store.list_audit(&query).await?)
}

/// Checks the whole chain (the operator and admins).
pub async fn verify(store: &dyn Store, actor: Actor<'_>) -> Result<AuditVerification, AuditError> {
    if !actor.administers() {
        return Err(AuditError::Forbidden);
    }
    Ok(store.verify_audit().await?)
}

/// Deletes the events older than `retention_days` before `now` (none when
/// it is 0: the log is kept). How many.
pub async fn purge(
    store: &dyn Store,
    retention_days: u32,
    now: Timestamp,
) -> Result<u64, StoreError> {
    if retention_days == 0 {
        return Ok(0);
    }
    let before = now.plus_ms(-(retention_days as i64) * 86_400_000);
    store.purge_audit(before).await
}
