//! The outbox's claim on SQLite ([`crate::WebhookStore::claim_deliveries`]),
//! in steps on the writer's connection, inside its transaction (one writer:
//! nothing changes between the steps).
//!
//! The same rule as PostgreSQL's one statement (`postgres/mod.rs`,
//! `CLAIM_DELIVERIES`): the destinations (endpoints and calls' URLs) with
//! deliveries waiting are found by skipping through the index of waiting
//! deliveries by destination, one probe each; each one's held deliveries
//! are counted in the index of held ones; each gives at most as many of its
//! earliest due ones as it has turns free; those are ranked (destinations
//! taking turns) and the first `limit` are held. Its work follows the
//! destinations and what it takes, never the backlog.
//!
//! In one statement SQLite builds a temporary b-tree for each of the
//! recursive search, the ranking's window, its sort, both `IN` lists and the
//! `RETURNING` rows: about 300k instructions a claim, most of them opening
//! and filling those (`bench/RESULTS.md`). Here each step is a prepared
//! statement that reads an index, and the ranking is a sort of the few taken.

use rusqlite::Connection;
use taskgate_core::{RunnerId, Timestamp};

use super::hot_path::delivery_from_row;
use super::writer::bind;
use crate::{StoreResult, WebhookDelivery};

/// The first destination with deliveries waiting (held ones included).
const FIRST_DESTINATION: &str = "SELECT MIN(COALESCE(endpoint_id, url)) FROM webhook_deliveries \
     WHERE next_attempt_at IS NOT NULL";

/// The next destination after `$1`.
const NEXT_DESTINATION: &str = "SELECT MIN(COALESCE(endpoint_id, url)) FROM webhook_deliveries \
     WHERE next_attempt_at IS NOT NULL AND COALESCE(endpoint_id, url) > $1";

/// Destination `$1`'s deliveries held at `$2`, other than those of `$3`
/// (the runner whose holdings are taken back).
const HELD: &str = "SELECT COUNT(*) FROM webhook_deliveries \
     WHERE COALESCE(endpoint_id, url) = $1 AND lease_until >= $2 \
     AND NOT ($3 IS NOT NULL AND runner = $3)";

/// Destination `$1`'s earliest `$4` deliveries due at `$2` and not held
/// (or held by `$3`).
pub(super) const EARLIEST: &str = "SELECT seq, next_attempt_at FROM webhook_deliveries \
     WHERE COALESCE(endpoint_id, url) = $1 AND next_attempt_at <= $2 \
     AND (lease_until IS NULL OR lease_until < $2 OR ($3 IS NOT NULL AND runner = $3)) \
     ORDER BY next_attempt_at LIMIT $4";

/// Delivery `$1` held by `$2` until `$3`.
const HOLD: &str = concat!(
    "UPDATE webhook_deliveries SET runner = $2, lease_until = $3 WHERE seq = $1 RETURNING ",
    crate::webhooks::delivery_columns!()
);

/// A delivery that could be taken: its destination's turn (1 for its
/// earliest), when it is due, and its seq.
struct Candidate {
    turn: i64,
    due: i64,
    seq: i64,
}

/// Up to `limit` deliveries due at `now` held by `runner` until
/// `lease_until`, at most `per_destination` of one destination held at
/// once, those held already counted; with `reclaim`, also those `reclaim`
/// held. Whether it left some due: a destination had one more than its
/// turns free (each is asked for one more), or `limit` was reached. Runs
/// inside the caller's transaction.
pub fn claim_deliveries(
    conn: &Connection,
    runner: &RunnerId,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
    per_destination: i64,
    reclaim: Option<&RunnerId>,
) -> StoreResult<(Vec<WebhookDelivery>, bool)> {
    let mut candidates = Vec::new();
    let mut more = false;
    let mut destination = first_destination(conn)?;
    while let Some(dest) = destination {
        let free = (per_destination - held(conn, &dest, now, reclaim)?).max(0);
        let found = earliest(conn, &dest, now, reclaim, free + 1, &mut candidates)?;
        if found > free {
            more = true;
            candidates.pop();
        }
        destination = next_destination(conn, &dest)?;
    }
    // Destinations take turns: every destination's first, then every
    // second, each turn by when they came due.
    candidates.sort_by_key(|c| (c.turn, c.due, c.seq));
    let take = usize::try_from(limit).unwrap_or(0);
    more |= candidates.len() > take;
    let mut hold = conn.prepare_cached(HOLD)?;
    let mut claimed = Vec::with_capacity(take.min(candidates.len()));
    for c in candidates.into_iter().take(take) {
        bind(&mut hold, &[&c.seq, runner, &lease_until])?;
        let mut rows = hold.raw_query();
        if let Some(row) = rows.next()? {
            claimed.push(delivery_from_row(row)?);
        }
    }
    Ok((claimed, more))
}

fn first_destination(conn: &Connection) -> StoreResult<Option<String>> {
    let mut stmt = conn.prepare_cached(FIRST_DESTINATION)?;
    let mut rows = stmt.raw_query();
    Ok(rows.next()?.map(|r| r.get(0)).transpose()?.flatten())
}

fn next_destination(conn: &Connection, after: &str) -> StoreResult<Option<String>> {
    let mut stmt = conn.prepare_cached(NEXT_DESTINATION)?;
    bind(&mut stmt, &[&after])?;
    let mut rows = stmt.raw_query();
    Ok(rows.next()?.map(|r| r.get(0)).transpose()?.flatten())
}

fn held(
    conn: &Connection,
    dest: &str,
    now: Timestamp,
    reclaim: Option<&RunnerId>,
) -> StoreResult<i64> {
    let mut stmt = conn.prepare_cached(HELD)?;
    bind(&mut stmt, &[&dest, &now, &reclaim])?;
    let mut rows = stmt.raw_query();
    Ok(rows.next()?.map(|r| r.get(0)).transpose()?.unwrap_or(0))
}

fn earliest(
    conn: &Connection,
    dest: &str,
    now: Timestamp,
    reclaim: Option<&RunnerId>,
    at_most: i64,
    into: &mut Vec<Candidate>,
) -> StoreResult<i64> {
    let mut stmt = conn.prepare_cached(EARLIEST)?;
    bind(&mut stmt, &[&dest, &now, &reclaim, &at_most])?;
    let mut rows = stmt.raw_query();
    let mut turn = 0i64;
    while let Some(row) = rows.next()? {
        turn += 1;
        into.push(Candidate {
            turn,
            due: row.get(1)?,
            seq: row.get(0)?,
        });
    }
    Ok(turn)
}
