//! The SQL both backends share, and the macros that implement the store's
//! traits for a backend from it (one file per aggregate: `accounts.rs`,
//! `keys.rs`, `tasks.rs`, `idempotency.rs`, `spend.rs`; users, sessions and
//! request counts have theirs beside their traits). Placeholders are `$N`,
//! which SQLite and PostgreSQL both accept; the statements whose dialects
//! differ (appending to a JSON array) are built around the backend's
//! [`Dialect`].
//!
//! The statements that change a task's state are built from the core's
//! [`Transition`]s: the target state and the source states each names come
//! from the state machine, never from a literal here. They are built once,
//! at first use. The states are written into the SQL text, not bound, so
//! that the planner sees them (the partial index on unfinished tasks).
//!
//! SQLite is built with its query planner stability guarantee
//! (`.cargo/config.toml`), so that no statement is prepared again for the
//! values bound to it; the states a page of tasks filters on are written
//! into its text all the same, for the planner to see them.
//!
//! The macros call only the backend's declared interface (`backend.rs`,
//! which also says why macros and not generic code).

mod accounts;
mod idempotency;
mod keys;
mod spend;
mod tasks;

pub(crate) use accounts::impl_accounts;
pub(crate) use idempotency::impl_idempotency;
pub(crate) use keys::impl_keys;
pub(crate) use spend::impl_spend;
pub(crate) use tasks::impl_tasks;

use taskgate_core::{AccountId, ApiSlug, Mode, TaskId, TaskStatus, Transition};

macro_rules! task_columns {
    () => {
        "id, account_id, mode, api, status, input, output, error, units, input_tokens, output_tokens, \
         cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, events, attempts, \
         created_at, started_at, completed_at, runner, lease_until, reserved_micros, \
         reasoning_tokens, cached_input_tokens"
    };
}
pub(crate) use task_columns;

pub const GET_TASK: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE id = $1 AND account_id = $2 AND mode = $3"
);
pub const GET_TASK_BY_ID: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1");

/// The list view leaves out the two large documents.
pub const TASK_SUMMARY_COLUMNS: &str = "id, account_id, mode, api, status, CAST('' AS TEXT) AS input, \
     CAST(NULL AS TEXT) AS output, error, units, input_tokens, output_tokens, cost_micros, metadata, \
     key_id, idempotency_key, timeout_ms, sandbox, events, attempts, created_at, started_at, \
     completed_at, runner, lease_until, reserved_micros, reasoning_tokens, cached_input_tokens";

/// An account's running tasks of one mode, everywhere: `$1` account, `$2`
/// mode (partial index `tasks_running_lane`).
pub const COUNT_RUNNING: &str =
    "SELECT COUNT(*) FROM tasks WHERE account_id = $1 AND mode = $2 AND status = 'running'";

/// Up to `$2` ended tasks with ids below `$1` (created before its time),
/// oldest first: the primary key's order is creation order.
pub const PURGE_TASKS: &str = "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE id < $1 \
     AND status IN ('succeeded', 'failed', 'cancelled') ORDER BY id LIMIT $2)";

/// [`PURGE_TASKS`] of test tasks only. The mode is written, not bound, so
/// that both planners take the partial index `tasks_test`: live tasks kept
/// for ever are not read on every round.
pub const PURGE_TEST_TASKS: &str = "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks \
     WHERE mode = 'test' AND id < $1 AND status IN ('succeeded', 'failed', 'cancelled') \
     ORDER BY id LIMIT $2)";

/// [`PURGE_TASKS`] of live tasks only (no index of its own: what
/// `task_retention_days` deletes first is the oldest, at the primary key's
/// start).
pub const PURGE_LIVE_TASKS: &str = "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks \
     WHERE mode = 'live' AND id < $1 AND status IN ('succeeded', 'failed', 'cancelled') \
     ORDER BY id LIMIT $2)";

pub const INSERT_TASK: &str = "INSERT INTO tasks (id, account_id, mode, api, status, input, output, error, \
     units, input_tokens, output_tokens, cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, \
     events, attempts, created_at, started_at, completed_at, runner, lease_until, reserved_micros, \
     reasoning_tokens, cached_input_tokens) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
     $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)";

pub const UPSERT_SPEND: &str = "INSERT INTO account_spend (account_id, month, micros) VALUES ($1, $2, $3) \
     ON CONFLICT (account_id, month) DO UPDATE SET micros = account_spend.micros + excluded.micros";

/// Gives back `$3` reserved micro-USD of account `$1` in month `$2`.
pub const RELEASE_SPEND: &str = "UPDATE account_spend SET reserved = CASE WHEN reserved > $3 \
     THEN reserved - $3 ELSE 0 END WHERE account_id = $1 AND month = $2";

/// Reserves `$3` micro-USD of account `$1` in month `$2` if the spend and the
/// reservations stay within the limit `$4`, and are below it now: the check
/// and the reservation are one statement, so concurrent calls cannot all
/// pass the same check.
pub const RESERVE_SPEND: &str = "INSERT INTO account_spend (account_id, month, micros, reserved) \
     SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST(0 AS BIGINT), CAST($3 AS BIGINT) \
     WHERE CAST($3 AS BIGINT) <= CAST($4 AS BIGINT) AND CAST($4 AS BIGINT) > 0 \
     ON CONFLICT (account_id, month) DO UPDATE SET reserved = account_spend.reserved + excluded.reserved \
     WHERE account_spend.micros + account_spend.reserved < CAST($4 AS BIGINT) \
     AND account_spend.micros + account_spend.reserved + excluded.reserved <= CAST($4 AS BIGINT)";

macro_rules! key_columns {
    () => {
        "id, account_id, name, key_type, mode, scopes, allowed_apis, hint, created_at, expires_at, \
         last_used_at, revoked_at"
    };
}
pub(crate) use key_columns;

/// How a backend appends a JSON value (bound as text) to the `events` array:
/// the SQL before and after the placeholder.
pub struct Dialect {
    pub append_before: &'static str,
    pub append_after: &'static str,
}

/// `status = '<state>'`, or `status IN ('<state>', '<state>', …)`.
pub fn status_in(states: &[TaskStatus]) -> String {
    match states {
        [one] => format!("status = '{}'", one.as_str()),
        many => {
            let list: Vec<String> = many.iter().map(|s| format!("'{}'", s.as_str())).collect();
            format!("status IN ({})", list.join(", "))
        }
    }
}

/// The statements that read or change task states, for one dialect.
pub struct Statements {
    /// [`Transition::Claim`]: `$1` id, `$2` now, `$3` runner, `$4` lease,
    /// `$5` event.
    pub claim: String,
    /// [`Transition::Succeed`]: `$1` id, `$2` status, `$3` output, `$4` error,
    /// `$5`–`$8` usage and cost, `$9` attempts, `$10` completed at, `$11` event,
    /// `$12` reasoning tokens, `$13` cached input tokens.
    pub succeed: String,
    /// [`Transition::Fail`], bound as `succeed`.
    pub fail: String,
    /// [`Transition::Cancel`]: `$1` id, `$2` account, `$3` mode, `$4` now,
    /// `$5` event.
    pub cancel: String,
    /// [`Transition::Interrupt`]: `$1` now, `$2` error, `$3` event, `$4` dead runner.
    pub interrupt: String,
    /// Queued ids, oldest first: `$1` limit.
    pub queued_ids: String,
    /// Queued ids, accounts and modes by turn: `$1` per account and mode,
    /// `$2` limit.
    pub queued_by_turn: String,
    /// `$1` attempts, `$2` id, only of a cancelled task.
    pub cancelled_attempts: String,
    /// Lease renewal, without its `id IN (…)` list: `$1` runner, `$2` lease.
    pub renew_prefix: String,
}

impl Statements {
    pub fn new(d: &Dialect) -> Self {
        let append = |n: u8| format!("{}${n}{}", d.append_before, d.append_after);
        let ending = |t: Transition| {
            format!(
                "UPDATE tasks SET status = $2, output = $3, error = $4, units = $5, input_tokens = $6, \
                 output_tokens = $7, cost_micros = $8, attempts = $9, completed_at = $10, \
                 reasoning_tokens = $12, cached_input_tokens = $13, \
                 lease_until = NULL, events = {} WHERE id = $1 AND {} \
                 RETURNING account_id, reserved_micros, created_at, mode",
                append(11),
                status_in(t.from())
            )
        };
        let claim = Transition::Claim;
        let cancel = Transition::Cancel;
        let interrupt = Transition::Interrupt;
        Self {
            claim: format!(
                "UPDATE tasks SET status = '{}', started_at = COALESCE(started_at, $2), runner = $3, \
                 lease_until = $4, events = {} WHERE id = $1 AND {} RETURNING {}",
                claim.to().as_str(),
                append(5),
                status_in(claim.from()),
                task_columns!()
            ),
            succeed: ending(Transition::Succeed),
            fail: ending(Transition::Fail),
            cancel: format!(
                "UPDATE tasks SET status = '{}', completed_at = $4, lease_until = NULL, events = {} \
                 WHERE id = $1 AND account_id = $2 AND mode = $3 AND {} RETURNING {}",
                cancel.to().as_str(),
                append(5),
                status_in(cancel.from()),
                task_columns!()
            ),
            interrupt: format!(
                "UPDATE tasks SET status = '{}', error = $2, completed_at = $1, lease_until = NULL, \
                 events = {} WHERE {} AND (lease_until < $1 OR runner = $4) \
                 RETURNING id, account_id, reserved_micros, created_at, mode",
                interrupt.to().as_str(),
                append(3),
                status_in(interrupt.from())
            ),
            queued_ids: format!(
                "SELECT id FROM tasks WHERE {} ORDER BY id LIMIT $1",
                status_in(&[TaskStatus::Queued])
            ),
            queued_by_turn: format!(
                "SELECT id, account_id, mode FROM (SELECT id, account_id, mode, ROW_NUMBER() OVER \
                 (PARTITION BY account_id, mode ORDER BY id) AS turn FROM tasks WHERE {}) queued \
                 WHERE turn <= $1 ORDER BY turn, id LIMIT $2",
                status_in(&[TaskStatus::Queued])
            ),
            cancelled_attempts: format!(
                "UPDATE tasks SET attempts = $1 WHERE id = $2 AND {}",
                status_in(&[TaskStatus::Cancelled])
            ),
            renew_prefix: format!(
                "UPDATE tasks SET lease_until = $2 WHERE {} AND runner = $1 AND id IN (",
                status_in(&[TaskStatus::Running])
            ),
        }
    }

    /// The statement of an execution's end.
    pub fn ending(&self, t: Transition) -> &str {
        match t {
            Transition::Succeed => &self.succeed,
            _ => &self.fail,
        }
    }
}

/// A bound value of a dynamically built statement.
pub enum Param {
    Account(AccountId),
    Mode(Mode),
    Api(ApiSlug),
    Task(TaskId),
    Int(i64),
}

/// One page of GET /tasks: the statement and its values, in `$N` order.
pub fn list_tasks_sql(q: &crate::TaskQuery) -> (String, Vec<Param>) {
    let mut sql =
        format!("SELECT {TASK_SUMMARY_COLUMNS} FROM tasks WHERE account_id = $1 AND mode = $2");
    let mut params = vec![Param::Account(q.account_id), Param::Mode(q.mode)];
    let mut push = |sql: &mut String, clause: &str, p: Param| {
        params.push(p);
        sql.push_str(&clause.replace('?', &format!("${}", params.len())));
    };
    if !q.statuses.is_empty() {
        sql.push_str(" AND ");
        sql.push_str(&status_in(&q.statuses));
    }
    if let Some(api) = &q.api {
        push(&mut sql, " AND api = ?", Param::Api(api.clone()));
    }
    match q.apis.as_deref() {
        None => {}
        Some([]) => sql.push_str(" AND 1 = 0"),
        Some(apis) => {
            sql.push_str(" AND api IN (");
            for (i, a) in apis.iter().enumerate() {
                push(
                    &mut sql,
                    if i == 0 { "?" } else { ", ?" },
                    Param::Api(a.clone()),
                );
            }
            sql.push(')');
        }
    }
    if let Some(after) = q.id_after {
        push(&mut sql, " AND id > ?", Param::Task(after));
    }
    if let Some(before) = q.id_before {
        push(&mut sql, " AND id < ?", Param::Task(before));
    }
    let order = if q.descending {
        " ORDER BY id DESC LIMIT ?"
    } else {
        " ORDER BY id ASC LIMIT ?"
    };
    push(&mut sql, order, Param::Int(q.limit));
    (sql, params)
}

/// `INSERT INTO api_keys` with every column of a `KeyRecord` and its hash bound.
macro_rules! insert_key {
    ($k:expr, $hash:expr) => {
        sqlx::query(
            "INSERT INTO api_keys (id, account_id, name, key_type, mode, scopes, allowed_apis, key_hash, \
             hint, created_at, expires_at, last_used_at, revoked_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind($k.id)
        .bind($k.account_id)
        .bind(&$k.name)
        .bind($k.key_type)
        .bind($k.mode)
        .bind(&$k.scopes)
        .bind(&$k.allowed_apis)
        .bind($hash)
        .bind(&$k.hint)
        .bind($k.created_at)
        .bind($k.expires_at)
        .bind($k.last_used_at)
        .bind($k.revoked_at)
    };
}
pub(crate) use insert_key;

/// A `SELECT … FROM api_keys` with the columns of a `KeyRecord`.
macro_rules! select_keys {
    ($rest:literal) => {
        concat!(
            "SELECT ",
            $crate::sql::key_columns!(),
            " FROM api_keys ",
            $rest
        )
    };
}
pub(crate) use select_keys;

/// Every trait of the store for a backend that implements
/// [`SqlBackend`](crate::backend::SqlBackend) and
/// [`HotPath`](crate::backend::HotPath).
macro_rules! impl_store {
    ($store:ty) => {
        const _: () = {
            use $crate::backend::SqlBackend;

            #[async_trait::async_trait]
            impl $crate::Store for $store {
                fn backend(&self) -> &'static str {
                    <Self as SqlBackend>::NAME
                }

                async fn migrate(&self) -> $crate::StoreResult<()> {
                    self.run_migrations().await
                }

                async fn ping(&self) -> $crate::StoreResult<()> {
                    sqlx::query("SELECT 1").execute(self.reader()).await?;
                    Ok(())
                }

                async fn task_ends(
                    &self,
                ) -> $crate::StoreResult<Option<tokio::sync::mpsc::Receiver<$crate::TaskEnd>>>
                {
                    self.listen_task_ends().await
                }
            }
        };
        $crate::sql::impl_accounts!($store);
        $crate::sql::impl_keys!($store);
        $crate::sql::impl_tasks!($store);
        $crate::sql::impl_idempotency!($store);
        $crate::sql::impl_spend!($store);
        $crate::users::impl_users!($store);
        $crate::usage::impl_requests!($store);
        $crate::webhooks::impl_webhooks!($store);
        $crate::audit::impl_audit!($store);
    };
}
pub(crate) use impl_store;

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements name exactly the transitions' states.
    #[test]
    fn statements_follow_the_machine() {
        use TaskStatus::*;
        let s = Statements::new(&Dialect {
            append_before: "f(",
            append_after: ")",
        });
        let set = |t: TaskStatus| format!("UPDATE tasks SET status = '{t}',");
        let is = |t: TaskStatus| format!("status = '{t}'");
        assert!(s.claim.starts_with(&set(Running)));
        assert!(
            s.claim
                .contains(&format!("WHERE id = $1 AND {} RETURNING", is(Queued)))
        );
        assert!(
            s.succeed
                .contains(&format!("WHERE id = $1 AND {} RETURNING", is(Running)))
        );
        assert_eq!(s.succeed, s.fail);
        assert!(s.cancel.starts_with(&set(Cancelled)));
        assert!(s.cancel.contains(&format!(
            "AND status IN ('{Queued}', '{Running}') RETURNING"
        )));
        assert!(s.interrupt.starts_with(&set(Failed)));
        assert!(s.interrupt.contains(&format!("WHERE {} AND", is(Running))));
        assert!(s.claim.contains("events = f($5)"));
    }
}
