//! The audit log: its trait, its rows, and how an event is appended inside
//! the transaction of the change it records.
//!
//! The store's methods that change what the log covers (accounts, keys,
//! users, sign-ins, webhook endpoints and secrets) take the caller's
//! [`AuditContext`] (who acts, from where) and write the event themselves,
//! in their own transaction: a caller cannot change something without its
//! event, nor write an event of a change that did not commit. What changed
//! is read there too (the row before and after), so the event says what the
//! database did, and a change that changed nothing writes none.
//!
//! Appends are serialised by the chain's head (`audit_head`, one row): the
//! first statement of every audited transaction moves its sequence number
//! on, which holds the row (PostgreSQL) or the database (SQLite's one
//! writer) until the commit, so each event is sealed to the one committed
//! just before it and the chain is linear. The head is taken first, before
//! any other row, so that two audited transactions never wait on each other
//! the other way round; on SQLite a write first also keeps the transaction
//! from starting as a reader whose snapshot another writer could make stale.

use async_trait::async_trait;
use serde_json::Value;
use taskgate_core::audit::{Changes, GENESIS_HASH, change, created};
use taskgate_core::{
    AccountId, AuditAction, AuditActor, AuditEvent, AuditId, Timestamp, WebhookEvents,
};

use crate::{Account, KeyRecord, StoreError, StoreResult, WebhookEndpoint};

// The doc links' only use.
#[cfg(doc)]
use taskgate_core::AuditContext;

/// Which events to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// One account's events (those of no account are left out).
    pub account_id: Option<AccountId>,
    pub action: Option<AuditAction>,
    /// Made at or after this time.
    pub since: Option<Timestamp>,
    /// Older than this event (a page's cursor).
    pub before: Option<AuditId>,
    pub limit: i64,
}

/// Where verification starts: the newest event retention deleted, or the
/// chain's beginning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditCheckpoint {
    /// The deleted event's sequence number (0: nothing deleted).
    pub seq: i64,
    pub hash: String,
    /// When the deleted event was made.
    pub at: Option<Timestamp>,
}

/// The first place the chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditBreak {
    /// The first event whose hash does not match (its id as stored, which
    /// may not even parse), or `None` when every event matches but the
    /// head does not (events after the last were deleted).
    pub id: Option<String>,
    pub seq: Option<i64>,
    pub reason: String,
}

/// What [`AuditStore::verify_audit`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditVerification {
    /// Events checked.
    pub checked: u64,
    pub checkpoint: AuditCheckpoint,
    /// `None` when the chain is whole.
    pub broken: Option<AuditBreak>,
}

/// The audit log. Events are appended by the audited methods of the other
/// traits; these read it, verify it, and append the events that accompany
/// no other write.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends an event that no other write accompanies (a refused sign-in).
    async fn record_audit(&self, entry: &taskgate_core::AuditEntry) -> StoreResult<AuditEvent>;
    /// Events as the query asks, newest first.
    async fn list_audit(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEvent>>;
    /// Recomputes every event's hash from the checkpoint on, and checks the
    /// last against the head.
    async fn verify_audit(&self) -> StoreResult<AuditVerification>;
    /// Deletes the events made before `before`, oldest first, and moves the
    /// checkpoint to the newest of them. How many.
    async fn purge_audit(&self, before: Timestamp) -> StoreResult<u64>;
}

macro_rules! audit_columns {
    () => {
        "seq, id, at, account_id, actor_type, actor_id, actor_email, action, target_type, \
         target_id, changes, ip, user_agent, hash"
    };
}
pub(crate) use audit_columns;

/// An event's row as stored, every column as its plain type: verification
/// reads rows that may have been edited into anything.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AuditRow {
    pub seq: i64,
    pub id: String,
    pub at: i64,
    pub account_id: Option<String>,
    pub actor_type: String,
    pub actor_id: String,
    pub actor_email: Option<String>,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub changes: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub hash: String,
}

fn corrupt(column: &str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        column: format!("audit_events.{column}"),
        message: message.to_string(),
    }
}

impl TryFrom<AuditRow> for AuditEvent {
    type Error = StoreError;

    fn try_from(r: AuditRow) -> Result<Self, StoreError> {
        let email = match r.actor_email {
            Some(e) => {
                Some(taskgate_core::Email::parse(&e).map_err(|m| corrupt("actor_email", m))?)
            }
            None => None,
        };
        Ok(AuditEvent {
            id: AuditId::parse(&r.id).map_err(|e| corrupt("id", e))?,
            at: Timestamp::from_unix_ms(r.at),
            account_id: match r.account_id {
                Some(a) => Some(AccountId::parse(&a).map_err(|e| corrupt("account_id", e))?),
                None => None,
            },
            actor: AuditActor {
                kind: r.actor_type.parse().map_err(|e| corrupt("actor_type", e))?,
                id: r.actor_id,
                email,
            },
            action: r.action.parse().map_err(|e| corrupt("action", e))?,
            target: taskgate_core::AuditTarget {
                kind: r.target_type,
                id: r.target_id,
            },
            changes: serde_json::from_str(&r.changes).map_err(|e| corrupt("changes", e))?,
            ip: r.ip,
            user_agent: r.user_agent,
            hash: r.hash,
        })
    }
}

/// Walks `rows` (in chain order, after `previous`), recomputing each hash:
/// the first that does not match, if any. `previous` is left at the last
/// event's hash; `checked` counts the events looked at, a bad one too.
pub(crate) fn check_rows(
    rows: Vec<AuditRow>,
    previous: &mut String,
    checked: &mut u64,
) -> Option<AuditBreak> {
    for row in rows {
        *checked += 1;
        let (id, seq, stored) = (row.id.clone(), row.seq, row.hash.clone());
        let event = match AuditEvent::try_from(row) {
            Ok(e) => e,
            Err(e) => {
                return Some(AuditBreak {
                    id: Some(id),
                    seq: Some(seq),
                    reason: format!("the event does not decode: {e}"),
                });
            }
        };
        if event.seal(previous) != stored {
            return Some(AuditBreak {
                id: Some(id),
                seq: Some(seq),
                reason: "its hash does not match its content and the event before it \
                         (this event, or the one before it, was edited or deleted)"
                    .to_owned(),
            });
        }
        *previous = stored;
    }
    None
}

/// The checkpoint of a chain nothing was deleted from.
pub fn genesis() -> AuditCheckpoint {
    AuditCheckpoint {
        seq: 0,
        hash: GENESIS_HASH.to_owned(),
        at: None,
    }
}

// What each change records. Never a secret, nor a password hash: only ids,
// names, settings and a key's hint.

pub(crate) fn account_created(a: &Account) -> Changes {
    let mut c = Changes::new();
    created(&mut c, "name", &a.name);
    created(&mut c, "plan", a.plan.as_str());
    created(&mut c, "status", a.status.as_str());
    created(
        &mut c,
        "monthly_spend_limit_micros",
        a.monthly_spend_limit_micros,
    );
    created(
        &mut c,
        "max_monthly_spend_limit_micros",
        a.max_monthly_spend_limit_micros,
    );
    c
}

pub(crate) fn account_changes(before: &Account, after: &Account) -> Changes {
    let mut c = Changes::new();
    change(&mut c, "plan", before.plan.as_str(), after.plan.as_str());
    change(
        &mut c,
        "status",
        before.status.as_str(),
        after.status.as_str(),
    );
    change(
        &mut c,
        "monthly_spend_limit_micros",
        before.monthly_spend_limit_micros,
        after.monthly_spend_limit_micros,
    );
    change(
        &mut c,
        "max_monthly_spend_limit_micros",
        before.max_monthly_spend_limit_micros,
        after.max_monthly_spend_limit_micros,
    );
    c
}

pub(crate) fn key_created(k: &KeyRecord) -> Changes {
    let mut c = Changes::new();
    created(&mut c, "name", &k.name);
    created(&mut c, "key_type", k.key_type.as_str());
    created(&mut c, "mode", k.mode.as_str());
    created(&mut c, "scopes", &k.scopes);
    created(&mut c, "allowed_apis", &k.allowed_apis);
    created(&mut c, "hint", &k.hint);
    created(&mut c, "expires_at", k.expires_at.map(|t| t.rfc3339()));
    c
}

fn events_list(e: WebhookEvents) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

pub(crate) fn endpoint_created(e: &WebhookEndpoint) -> Changes {
    let mut c = Changes::new();
    created(&mut c, "mode", e.mode.as_str());
    created(&mut c, "url", &e.url);
    created(&mut c, "events", events_list(e.events));
    created(&mut c, "description", &e.description);
    c
}

pub(crate) fn endpoint_changes(before: &WebhookEndpoint, after: &WebhookEndpoint) -> Changes {
    let mut c = Changes::new();
    change(&mut c, "url", &before.url, &after.url);
    change(
        &mut c,
        "events",
        events_list(before.events),
        events_list(after.events),
    );
    change(
        &mut c,
        "description",
        &before.description,
        &after.description,
    );
    change(&mut c, "disabled", &before.disabled, &after.disabled);
    c
}

/// Appending an event in a transaction: the head taken first (`lock`), the
/// event written last (`append`), with the sequence number and previous
/// hash `lock` gave.
macro_rules! audit_lock {
    ($tx:expr) => {{
        let head: (i64, String) =
            sqlx::query_as("UPDATE audit_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash")
                .fetch_one(&mut *$tx)
                .await?;
        head
    }};
}
pub(crate) use audit_lock;

/// Writes the event of `$entry` (an `AuditEntry`) sealed after the head
/// `$head` that `audit_lock!` took in the same transaction `$tx`. The event.
macro_rules! audit_append {
    ($tx:expr, $head:expr, $entry:expr) => {{
        let (seq, previous): &(i64, String) = &$head;
        let event =
            taskgate_core::AuditEvent::new($entry, taskgate_core::Timestamp::now(), previous);
        sqlx::query(concat!(
            "INSERT INTO audit_events (",
            $crate::audit::audit_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(*seq)
        .bind(event.id.to_string())
        .bind(event.at.unix_ms())
        .bind(event.account_id.map(|a| a.to_string()))
        .bind(event.actor.kind.as_str())
        .bind(&event.actor.id)
        .bind(event.actor.email.as_ref().map(|e| e.as_str().to_owned()))
        .bind(event.action.as_str())
        .bind(&event.target.kind)
        .bind(&event.target.id)
        .bind(serde_json::to_string(&event.changes).unwrap_or_else(|_| "{}".to_owned()))
        .bind(&event.ip)
        .bind(&event.user_agent)
        .bind(&event.hash)
        .execute(&mut *$tx)
        .await?;
        sqlx::query("UPDATE audit_head SET hash = $1 WHERE id = 1")
            .bind(&event.hash)
            .execute(&mut *$tx)
            .await?;
        event
    }};
}
pub(crate) use audit_append;

/// [`AuditStore`] for a backend (see `backend.rs`).
macro_rules! impl_audit {
    ($store:ty) => {
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::AuditStore for $store {
                async fn record_audit(
                    &self,
                    entry: &taskgate_core::AuditEntry,
                ) -> $crate::StoreResult<taskgate_core::AuditEvent> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let event = $crate::audit::audit_append!(tx, head, entry);
                    tx.commit().await?;
                    Ok(event)
                }

                async fn list_audit(
                    &self,
                    q: &$crate::AuditQuery,
                ) -> $crate::StoreResult<Vec<taskgate_core::AuditEvent>> {
                    let rows: Vec<$crate::audit::AuditRow> = sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::audit::audit_columns!(),
                        " FROM audit_events WHERE (CAST($1 AS TEXT) IS NULL OR account_id = $1) \
                         AND (CAST($2 AS TEXT) IS NULL OR action = $2) \
                         AND (CAST($3 AS BIGINT) IS NULL OR at >= $3) \
                         AND (CAST($4 AS TEXT) IS NULL OR seq < \
                              (SELECT seq FROM audit_events WHERE id = $4)) \
                         ORDER BY seq DESC LIMIT $5"
                    ))
                    .bind(q.account_id.map(|a| a.to_string()))
                    .bind(q.action.map(|a| a.as_str()))
                    .bind(q.since.map(|t| t.unix_ms()))
                    .bind(q.before.map(|b| b.to_string()))
                    .bind(q.limit)
                    .fetch_all(self.reader())
                    .await?;
                    rows.into_iter().map(taskgate_core::AuditEvent::try_from).collect()
                }

                async fn verify_audit(&self) -> $crate::StoreResult<$crate::AuditVerification> {
                    // The head first: the events up to its sequence number
                    // have all committed (appends commit in the head's
                    // order), and later ones are left for the next check.
                    let (head_seq, head_hash, cp_seq, cp_hash, cp_at): (
                        i64,
                        String,
                        i64,
                        String,
                        Option<i64>,
                    ) = sqlx::query_as(
                        "SELECT seq, hash, checkpoint_seq, checkpoint_hash, checkpoint_at \
                         FROM audit_head WHERE id = 1",
                    )
                    .fetch_one(self.reader())
                    .await?;
                    let checkpoint = $crate::AuditCheckpoint {
                        seq: cp_seq,
                        hash: cp_hash.clone(),
                        at: cp_at.map(taskgate_core::Timestamp::from_unix_ms),
                    };
                    let mut previous = cp_hash;
                    let mut after = cp_seq;
                    let mut last_id: Option<String> = None;
                    let mut checked = 0u64;
                    loop {
                        let rows: Vec<$crate::audit::AuditRow> = sqlx::query_as(concat!(
                            "SELECT ",
                            $crate::audit::audit_columns!(),
                            " FROM audit_events WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT 1000"
                        ))
                        .bind(after)
                        .bind(head_seq)
                        .fetch_all(self.reader())
                        .await?;
                        let Some(last) = rows.last() else { break };
                        after = last.seq;
                        last_id = Some(last.id.clone());
                        if let Some(broken) =
                            $crate::audit::check_rows(rows, &mut previous, &mut checked)
                        {
                            return Ok($crate::AuditVerification {
                                checked,
                                checkpoint,
                                broken: Some(broken),
                            });
                        }
                    }
                    let broken = (previous != head_hash).then(|| $crate::AuditBreak {
                        id: None,
                        seq: None,
                        reason: match last_id {
                            Some(id) => format!(
                                "the chain's head is not the hash of its last event {id}: \
                                 events after it were deleted"
                            ),
                            None => "the chain's head names events that are not there: \
                                     they were deleted"
                                .to_owned(),
                        },
                    });
                    Ok($crate::AuditVerification {
                        checked,
                        checkpoint,
                        broken,
                    })
                }

                async fn purge_audit(
                    &self,
                    before: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<u64> {
                    let mut tx = self.writer().begin().await?;
                    let _head = $crate::audit::audit_lock!(tx);
                    // The newest event old enough, by the chain's order: it
                    // and every event before it go.
                    let last: Option<(i64, String, i64)> = sqlx::query_as(
                        "SELECT seq, hash, at FROM audit_events WHERE seq = \
                         (SELECT MAX(seq) FROM audit_events WHERE at < $1)",
                    )
                    .bind(before.unix_ms())
                    .fetch_optional(&mut *tx)
                    .await?;
                    let Some((seq, hash, at)) = last else {
                        tx.rollback().await?;
                        return Ok(0);
                    };
                    let gone = sqlx::query("DELETE FROM audit_events WHERE seq <= $1")
                        .bind(seq)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    sqlx::query(
                        "UPDATE audit_head SET checkpoint_seq = $1, checkpoint_hash = $2, \
                         checkpoint_at = $3 WHERE id = 1",
                    )
                    .bind(seq)
                    .bind(&hash)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(gone)
                }
            }
        };
    };
}
pub(crate) use impl_audit;
