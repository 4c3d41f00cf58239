//! A batch's jobs as statements: inserts without a cap in one statement,
//! finishes in one, claims and capped inserts one or two each.

use std::sync::LazyLock;

use sqlx::PgConnection;
use taskgate_core::{AccountId, Mode, TaskId};

use super::finish::{finish_groups, finish_many, finish_of};
use super::insert::insert_many;
use super::{Done, Work};
use crate::postgres::STATEMENTS;
use crate::{TaskFinish, TaskRecord};

/// Whether [`run_all`] writes `works` with one statement, atomic on its
/// own: then no `BEGIN` and `COMMIT`, two round trips fewer. Stores without
/// a cap are one statement, so are finishes (their spend with them), so is
/// a claim; a capped write takes its account's lock first.
pub(super) fn single_statement(works: &[&Work]) -> bool {
    if works.iter().any(|w| w.capped_account().is_some()) {
        return false;
    }
    let inserts = works
        .iter()
        .filter(|w| matches!(w, Work::Insert { .. }))
        .count();
    let finishes = finish_groups(works);
    match (inserts, finishes.as_slice()) {
        (n, []) if n == works.len() => true,
        (0, []) => works.len() == 1, // a claim
        (0, [all]) => all.len() == works.len(),
        _ => false,
    }
}

/// Whether `account` has `cap` running tasks of `mode` or more, counted
/// under the account's lock (held until the transaction ends): writers of
/// every instance count and write one after the other.
async fn at_cap(
    conn: &mut PgConnection,
    account: AccountId,
    mode: Mode,
    cap: u32,
) -> Result<bool, sqlx::Error> {
    sqlx::query(LOCK_ACCOUNT)
        .bind(account)
        .execute(&mut *conn)
        .await?;
    let (running,): (i64,) = sqlx::query_as(crate::sql::COUNT_RUNNING)
        .bind(account)
        .bind(mode)
        .fetch_one(&mut *conn)
        .await?;
    Ok(running >= i64::from(cap))
}

/// The claim, with the deliveries of the task's start in the same statement.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH c AS ({}), hooks AS ({}) SELECT * FROM c",
        STATEMENTS.claim,
        crate::webhooks::enqueue_from(
            "(SELECT id, account_id, mode, 'task.running' AS event, CAST($2 AS BIGINT) AS at FROM c)"
        )
    )
});

/// A transaction-scoped lock per account.
const LOCK_ACCOUNT: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/// Every write of a batch. Inserts without a cap are one statement for
/// them all, so are the finishes (and their spend); claims and capped
/// inserts are one statement or two each.
pub(super) async fn run_all(
    conn: &mut PgConnection,
    works: &[&Work],
) -> Result<Vec<Done>, sqlx::Error> {
    let mut done: Vec<Option<Done>> = works.iter().map(|_| None).collect();
    let inserts: Vec<usize> = (0..works.len())
        .filter(|&i| matches!(works[i], Work::Insert { cap: None, .. }))
        .collect();
    if !inserts.is_empty() {
        let tasks: Vec<&TaskRecord> = inserts
            .iter()
            .map(|&i| match works[i] {
                Work::Insert { task, .. } => &**task,
                _ => unreachable!("an insert"),
            })
            .collect();
        insert_many(conn, &tasks, flushes(works)).await?;
        for i in inserts {
            done[i] = Some(Done::Inserted);
        }
    }
    for group in finish_groups(works) {
        let list: Vec<(TaskId, &TaskFinish)> = group.iter().map(|&i| finish_of(works[i])).collect();
        let ended = finish_many(conn, &list).await?;
        for i in group {
            done[i] = Some(Done::Finished(ended.contains(&finish_of(works[i]).0)));
        }
    }
    let mut all = Vec::with_capacity(works.len());
    for (work, done) in works.iter().zip(done) {
        all.push(match done {
            Some(d) => d,
            None => run(conn, work).await?,
        });
    }
    Ok(all)
}

/// Whether the transaction of `works` waits for the WAL flush when it
/// commits: unless every write of it is an insert that need not.
fn flushes(works: &[&Work]) -> bool {
    !works.iter().all(|w| {
        matches!(
            w,
            Work::Insert {
                cap: None,
                flush: false,
                ..
            }
        )
    })
}

/// A store or a claim on its own: alone in its batch, or capped.
async fn run(conn: &mut PgConnection, work: &Work) -> Result<Done, sqlx::Error> {
    match work {
        Work::Insert { task: t, cap, .. } => {
            if let Some(cap) = *cap
                && at_cap(conn, t.account_id, t.mode, cap).await?
            {
                return Ok(Done::AtCap);
            }
            insert_many(conn, &[&**t], true).await?;
            Ok(Done::Inserted)
        }
        Work::Claim {
            id,
            cap,
            runner,
            now,
            lease_until,
            event,
        } => {
            if let Some(((account, mode), cap)) = *cap
                && at_cap(conn, account, mode, cap).await?
            {
                return Ok(Done::AtCap);
            }
            Ok(Done::Claimed(
                sqlx::query_as::<_, TaskRecord>(CLAIM.as_str())
                    .bind(id)
                    .bind(now)
                    .bind(runner)
                    .bind(lease_until)
                    .bind(event)
                    .fetch_optional(&mut *conn)
                    .await?
                    .map(Box::new),
            ))
        }
        Work::Finish { .. } => unreachable!("finishes are written by run_all"),
    }
}

#[cfg(test)]
mod tests {
    use taskgate_core::{RunnerId, TaskEvent, TaskStatus, Timestamp};

    use super::*;
    use crate::postgres::batch::testing::task;

    fn insert(flush: bool) -> Work {
        Work::Insert {
            task: Box::new(task()),
            cap: None,
            flush,
        }
    }

    /// A batch skips the flush only when every write in it may.
    #[test]
    fn only_a_batch_of_unflushed_inserts_commits_without_the_flush() {
        let (a, b) = (insert(false), insert(false));
        assert!(!flushes(&[&a, &b]));
        let durable = insert(true);
        assert!(flushes(&[&a, &durable]));
        let capped = Work::Insert {
            task: Box::new(task()),
            cap: Some(3),
            flush: false,
        };
        assert!(flushes(&[&a, &capped]));
        let claim = Work::Claim {
            id: TaskId::new(),
            cap: None,
            runner: RunnerId::host_port("test", 1),
            now: Timestamp::now(),
            lease_until: Timestamp::now(),
            event: TaskEvent::new(TaskStatus::Running, Timestamp::now()),
        };
        assert!(flushes(&[&a, &claim]));
    }
}
