//! `taskgate audit list|verify`: the command line's door onto the audit
//! log, read as the operator.

use anyhow::{anyhow, bail};
use serde_json::{Value, json};
use taskgate_core::{AccountId, AuditAction, AuditEvent, Timestamp};
use taskgate_server::service::Actor;
use taskgate_server::service::audit::{self, AuditError, AuditFilter};
use taskgate_store::Store;

/// What `audit list` was given.
pub struct ListFlags<'a> {
    pub account: Option<&'a str>,
    pub action: Option<&'a str>,
    /// RFC 3339, or a duration back from now (`24h`, `7d`).
    pub since: Option<&'a str>,
    pub limit: i64,
}

fn audit_error(e: AuditError) -> anyhow::Error {
    anyhow!(e)
}

/// `--since`: a time, or how long ago.
fn since(s: &str) -> anyhow::Result<Timestamp> {
    if let Some(t) = Timestamp::parse_rfc3339(s) {
        return Ok(t);
    }
    match taskgate_core::duration::parse_duration_ms(s) {
        Ok(ms) => Ok(Timestamp::now().plus_ms(-ms)),
        Err(_) => bail!("--since: {s:?} is neither an RFC 3339 time nor a duration like 24h or 7d"),
    }
}

/// The events, newest first.
pub async fn list(store: &dyn Store, flags: ListFlags<'_>) -> anyhow::Result<Vec<AuditEvent>> {
    let account = flags
        .account
        .map(AccountId::parse)
        .transpose()
        .map_err(|e| anyhow!("--account: {e}"))?;
    let action = flags
        .action
        .map(|a| a.parse::<AuditAction>())
        .transpose()
        .map_err(|e| {
            let known: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
            anyhow!("--action: {e}; one of {}", known.join(", "))
        })?;
    let filter = AuditFilter {
        account,
        action,
        since: flags.since.map(since).transpose()?,
        before: None,
        limit: flags.limit,
    };
    audit::list(store, Actor::Operator, filter)
        .await
        .map_err(audit_error)
}

/// One line of an event, for people: time, action, actor, target, account,
/// changes.
pub fn line(e: &AuditEvent) -> String {
    let actor = match &e.actor.email {
        Some(email) => format!(
            "{}:{} <{}>",
            e.actor.kind.as_str(),
            e.actor.id,
            email.as_str()
        ),
        None => format!("{}:{}", e.actor.kind.as_str(), e.actor.id),
    };
    let account = e
        .account_id
        .map(|a| a.to_string())
        .unwrap_or_else(|| "-".to_owned());
    let changes = serde_json::to_string(&e.changes).unwrap_or_default();
    let from = e.ip.as_deref().unwrap_or("-");
    format!(
        "{}  {}  {:<32}  {}  {}:{}  {}  from {}  {}",
        e.at.rfc3339(),
        e.id,
        e.action.as_str(),
        actor,
        e.target.kind,
        e.target.id,
        account,
        from,
        changes
    )
}

/// `audit verify`: the JSON of the outcome, and whether the chain is whole.
pub async fn verify(store: &dyn Store) -> anyhow::Result<(Value, bool)> {
    let v = audit::verify(store, Actor::Operator)
        .await
        .map_err(audit_error)?;
    let checkpoint = json!({
        "seq": v.checkpoint.seq,
        "hash": v.checkpoint.hash,
        "at": v.checkpoint.at.map(|t| t.rfc3339()),
    });
    let out = match &v.broken {
        None => json!({ "ok": true, "checked": v.checked, "checkpoint": checkpoint }),
        Some(b) => json!({
            "ok": false,
            "checked": v.checked,
            "checkpoint": checkpoint,
            "first_bad_event": b.id,
            "reason": b.reason,
        }),
    };
    Ok((out, v.broken.is_none()))
}
