//! The SQL both backends share, and the macro that implements the store's
//! traits for a backend from it. Placeholders are `$N`, which SQLite and
//! PostgreSQL both accept; the statements whose dialects differ (appending to
//! a JSON array) are built around the backend's [`Dialect`].
//!
//! The statements that change a task's state are built from the core's
//! [`Transition`]s: the target state and the source states each names come
//! from the state machine, never from a literal here. They are built once,
//! at first use. The states are written into the SQL text, not bound, so
//! that the planner sees them (the partial index on unfinished tasks).
//!
//! A macro rather than generic code: sqlx's executor bounds over two databases
//! make generic functions unreadable, and the macro keeps one SQL text.

use taskgate_core::{AccountId, ApiSlug, Mode, TaskId, TaskStatus, Transition};

macro_rules! task_columns {
    () => {
        "id, account_id, mode, api, status, input, output, error, units, input_tokens, output_tokens, \
         cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, events, attempts, \
         created_at, started_at, completed_at, runner, lease_until, reserved_micros"
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
     completed_at, runner, lease_until, reserved_micros";

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
     events, attempts, created_at, started_at, completed_at, runner, lease_until, reserved_micros) VALUES ($1, \
     $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, \
     $24, $25)";

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
    /// `$5`–`$8` usage and cost, `$9` attempts, `$10` completed at, `$11` event.
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
                 lease_until = NULL, events = {} WHERE id = $1 AND {} \
                 RETURNING account_id, reserved_micros, created_at",
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
                 RETURNING id, account_id, reserved_micros, created_at",
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
    Status(TaskStatus),
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
        sql.push_str(" AND status IN (");
        for (i, s) in q.statuses.iter().enumerate() {
            push(
                &mut sql,
                if i == 0 { "?" } else { ", ?" },
                Param::Status(*s),
            );
        }
        sql.push(')');
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

/// The traits of everything but the hot task path, for a backend with sqlx
/// pools (`writer()`, `reader()`) and a `STATEMENTS` of its dialect.
macro_rules! impl_store {
    ($store:ty, $name:literal, $statements:path) => {
        #[async_trait::async_trait]
        impl $crate::Store for $store {
            fn backend(&self) -> &'static str {
                $name
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
            ) -> $crate::StoreResult<Option<tokio::sync::mpsc::Receiver<$crate::TaskEnd>>> {
                self.listen_task_ends().await
            }
        }

        #[async_trait::async_trait]
        impl $crate::AccountStore for $store {
            async fn create_account(&self, a: &$crate::Account) -> $crate::StoreResult<()> {
                sqlx::query(
                    "INSERT INTO accounts (id, name, plan, status, monthly_spend_limit_micros, \
                     max_monthly_spend_limit_micros, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(a.id)
                .bind(&a.name)
                .bind(&a.plan)
                .bind(a.status)
                .bind(a.monthly_spend_limit_micros)
                .bind(a.max_monthly_spend_limit_micros)
                .bind(a.created_at)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn get_account(
                &self,
                id: taskgate_core::AccountId,
            ) -> $crate::StoreResult<Option<$crate::Account>> {
                Ok(sqlx::query_as("SELECT * FROM accounts WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn list_accounts(&self) -> $crate::StoreResult<Vec<$crate::Account>> {
                Ok(sqlx::query_as("SELECT * FROM accounts ORDER BY id")
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn count_accounts(&self) -> $crate::StoreResult<i64> {
                let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM accounts")
                    .fetch_one(self.reader())
                    .await?;
                Ok(n)
            }

            async fn update_account(
                &self,
                id: taskgate_core::AccountId,
                u: &$crate::AccountUpdate,
            ) -> $crate::StoreResult<Option<$crate::Account>> {
                // One statement: absent fields keep their value.
                let set = |v: Option<Option<i64>>| match v {
                    Some(v) => (1i64, v),
                    None => (0i64, None),
                };
                let (set_limit, limit) = set(u.monthly_spend_limit_micros);
                let (set_ceiling, ceiling) = set(u.max_monthly_spend_limit_micros);
                Ok(sqlx::query_as(
                    "UPDATE accounts SET plan = COALESCE($2, plan), status = COALESCE($3, status), \
                     monthly_spend_limit_micros = CASE WHEN $4 = 1 THEN $5 ELSE monthly_spend_limit_micros END, \
                     max_monthly_spend_limit_micros = \
                       CASE WHEN $6 = 1 THEN $7 ELSE max_monthly_spend_limit_micros END \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(&u.plan)
                .bind(u.status)
                .bind(set_limit)
                .bind(limit)
                .bind(set_ceiling)
                .bind(ceiling)
                .fetch_optional(self.writer())
                .await?)
            }
        }

        #[async_trait::async_trait]
        impl $crate::KeyStore for $store {
            async fn create_key(&self, k: &$crate::KeyRecord, key_hash: &str) -> $crate::StoreResult<()> {
                $crate::sql::insert_key!(k, key_hash).execute(self.writer()).await?;
                Ok(())
            }

            async fn get_key(
                &self,
                id: taskgate_core::KeyId,
            ) -> $crate::StoreResult<Option<$crate::KeyRecord>> {
                Ok(sqlx::query_as($crate::sql::select_keys!("WHERE id = $1"))
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn find_key_by_hash(
                &self,
                key_hash: &str,
            ) -> $crate::StoreResult<Option<($crate::KeyRecord, $crate::Account)>> {
                let key: Option<$crate::KeyRecord> =
                    sqlx::query_as($crate::sql::select_keys!("WHERE key_hash = $1"))
                        .bind(key_hash)
                        .fetch_optional(self.reader())
                        .await?;
                let Some(key) = key else { return Ok(None) };
                let account = $crate::AccountStore::get_account(self, key.account_id).await?;
                Ok(account.map(|a| (key, a)))
            }

            async fn list_keys(
                &self,
                account_id: taskgate_core::AccountId,
            ) -> $crate::StoreResult<Vec<$crate::KeyRecord>> {
                Ok(sqlx::query_as($crate::sql::select_keys!("WHERE account_id = $1 ORDER BY id"))
                    .bind(account_id)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn list_keys_page(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                after: Option<taskgate_core::KeyId>,
                limit: i64,
            ) -> $crate::StoreResult<Vec<$crate::KeyRecord>> {
                Ok(sqlx::query_as($crate::sql::select_keys!(
                    "WHERE account_id = $1 AND mode = $2 AND id > $3 ORDER BY id LIMIT $4"
                ))
                .bind(account_id)
                .bind(mode)
                .bind(after.map(|k| k.to_string()).unwrap_or_default())
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn count_keys(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                now: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<(i64, i64)> {
                let (all, active): (i64, i64) = sqlx::query_as(
                    "SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(CASE WHEN \
                     (revoked_at IS NULL OR revoked_at > $3) AND (expires_at IS NULL OR expires_at > $3) \
                     THEN 1 ELSE 0 END), 0) AS BIGINT) FROM api_keys WHERE account_id = $1 AND mode = $2",
                )
                .bind(account_id)
                .bind(mode)
                .bind(now)
                .fetch_one(self.reader())
                .await?;
                Ok((all, active))
            }

            async fn revoke_key(
                &self,
                id: taskgate_core::KeyId,
                at: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<Option<$crate::KeyRecord>> {
                Ok(sqlx::query_as(concat!(
                    "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ",
                    $crate::sql::key_columns!()
                ))
                .bind(id)
                .bind(at)
                .fetch_optional(self.writer())
                .await?)
            }

            async fn roll_key(
                &self,
                old_id: taskgate_core::KeyId,
                new: &$crate::KeyRecord,
                new_hash: &str,
                old_expires_at: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<()> {
                let mut tx = self.writer().begin().await?;
                // An earlier expiry stays: rolling never lengthens a key's life.
                let updated = sqlx::query(
                    "UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NULL OR expires_at > $2 \
                     THEN $2 ELSE expires_at END WHERE id = $1 AND revoked_at IS NULL",
                )
                .bind(old_id)
                .bind(old_expires_at)
                .execute(&mut *tx)
                .await?;
                if updated.rows_affected() != 1 {
                    return Err($crate::StoreError::NotFound);
                }
                $crate::sql::insert_key!(new, new_hash).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn touch_keys(
                &self,
                used: &[(taskgate_core::KeyId, taskgate_core::Timestamp)],
            ) -> $crate::StoreResult<()> {
                for (id, at) in used {
                    sqlx::query(
                        "UPDATE api_keys SET last_used_at = $2 WHERE id = $1 \
                         AND (last_used_at IS NULL OR last_used_at < $2)",
                    )
                    .bind(*id)
                    .bind(*at)
                    .execute(self.writer())
                    .await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::ClientTasks for $store {
            async fn get_task(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                id: taskgate_core::TaskId,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                self.hot_get_task(account_id, mode, id).await
            }

            async fn get_task_by_id(
                &self,
                id: taskgate_core::TaskId,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                self.hot_visible_task(id).await?;
                Ok(sqlx::query_as($crate::sql::GET_TASK_BY_ID)
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn list_tasks(
                &self,
                q: &$crate::TaskQuery,
            ) -> $crate::StoreResult<Vec<$crate::TaskRecord>> {
                self.hot_list_tasks(q).await
            }

            async fn cancel_task(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                id: taskgate_core::TaskId,
                now: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                let event = taskgate_core::TaskEvent::new($crate::Transition::Cancel.to(), now);
                let cancelled = self.hot_cancel_task(account_id, mode, id, now, event).await?;
                match cancelled {
                    Some(t) => Ok(Some(t)),
                    None => self.hot_get_task(account_id, mode, id).await,
                }
            }
        }

        #[async_trait::async_trait]
        impl $crate::TaskQueue for $store {
            async fn insert_task(&self, t: &$crate::TaskRecord) -> $crate::StoreResult<()> {
                self.hot_insert_task(t).await
            }

            async fn insert_task_unflushed(
                &self,
                t: &$crate::TaskRecord,
            ) -> $crate::StoreResult<()> {
                self.hot_insert_task_unflushed(t).await
            }

            async fn settle_task(
                &self,
                id: taskgate_core::TaskId,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                self.hot_settle_task(id).await
            }

            async fn insert_running_capped(
                &self,
                t: &$crate::TaskRecord,
                max_running: u32,
            ) -> $crate::StoreResult<bool> {
                if t.status != taskgate_core::TaskStatus::Running {
                    return Err($crate::StoreError::Conflict(
                        "only a running task is stored against its account's cap".to_owned(),
                    ));
                }
                self.hot_insert_running_capped(t, max_running).await
            }

            async fn queued_task_ids(
                &self,
                limit: i64,
            ) -> $crate::StoreResult<Vec<taskgate_core::TaskId>> {
                let rows: Vec<(taskgate_core::TaskId,)> =
                    sqlx::query_as($statements.queued_ids.as_str())
                        .bind(limit)
                        .fetch_all(self.reader())
                        .await?;
                Ok(rows.into_iter().map(|r| r.0).collect())
            }

            async fn queued_tasks(
                &self,
                per_lane: i64,
                limit: i64,
            ) -> $crate::StoreResult<Vec<(taskgate_core::TaskId, taskgate_core::AccountId, taskgate_core::Mode)>> {
                Ok(sqlx::query_as($statements.queued_by_turn.as_str())
                    .bind(per_lane)
                    .bind(limit)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn claim_task(
                &self,
                id: taskgate_core::TaskId,
                runner: &taskgate_core::RunnerId,
                now: taskgate_core::Timestamp,
                lease_until: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                let event = taskgate_core::TaskEvent::new($crate::Transition::Claim.to(), now);
                self.hot_claim_task(id, runner.clone(), now, lease_until, event).await
            }

            async fn claim_task_capped(
                &self,
                id: taskgate_core::TaskId,
                account: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                runner: &taskgate_core::RunnerId,
                now: taskgate_core::Timestamp,
                lease_until: taskgate_core::Timestamp,
                max_running: u32,
            ) -> $crate::StoreResult<$crate::Claim> {
                let event = taskgate_core::TaskEvent::new($crate::Transition::Claim.to(), now);
                self.hot_claim_task_capped(id, (account, mode), runner.clone(), now, lease_until, event, max_running)
                    .await
            }

            async fn renew_leases(
                &self,
                runner: &taskgate_core::RunnerId,
                ids: &[taskgate_core::TaskId],
                lease_until: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<u64> {
                self.hot_visible().await?;
                let mut renewed = 0;
                for chunk in ids.chunks(500) {
                    let list: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
                    let sql = format!("{}{})", $statements.renew_prefix, list.join(", "));
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(runner).bind(lease_until);
                    for id in chunk {
                        query = query.bind(*id);
                    }
                    renewed += query.execute(self.writer()).await?.rows_affected();
                }
                Ok(renewed)
            }

            async fn interrupt_expired(
                &self,
                now: taskgate_core::Timestamp,
                dead_runner: Option<&taskgate_core::RunnerId>,
            ) -> $crate::StoreResult<Vec<taskgate_core::TaskId>> {
                self.hot_visible().await?;
                let event = taskgate_core::TaskEvent::new($crate::Transition::Interrupt.to(), now)
                    .with_message("the process running this task stopped");
                let mut tx = self.writer().begin().await?;
                let rows: Vec<(
                    taskgate_core::TaskId,
                    taskgate_core::AccountId,
                    i64,
                    taskgate_core::Timestamp,
                )> = sqlx::query_as($statements.interrupt.as_str())
                    .bind(now)
                    .bind(taskgate_core::TaskError::interrupted())
                    .bind(event)
                    .bind(dead_runner)
                    .fetch_all(&mut *tx)
                    .await?;
                for (_, account, reserved, created_at) in rows.iter().filter(|r| r.2 > 0) {
                    sqlx::query($crate::sql::RELEASE_SPEND)
                        .bind(*account)
                        .bind(created_at.month_key())
                        .bind(*reserved)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(rows.into_iter().map(|r| r.0).collect())
            }

            async fn finish_task(
                &self,
                id: taskgate_core::TaskId,
                f: &$crate::TaskFinish,
            ) -> $crate::StoreResult<bool> {
                let transition = $crate::Transition::ending(f.status)?;
                self.hot_finish_task(id, transition, f).await
            }

            async fn record_cancelled_attempts(
                &self,
                id: taskgate_core::TaskId,
                attempts: &$crate::Attempts,
            ) -> $crate::StoreResult<bool> {
                self.hot_visible().await?;
                let done = sqlx::query($statements.cancelled_attempts.as_str())
                    .bind(attempts)
                    .bind(id)
                    .execute(self.writer())
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn purge_tasks(
                &self,
                created_before: taskgate_core::Timestamp,
                only: Option<taskgate_core::Mode>,
                limit: i64,
            ) -> $crate::StoreResult<u64> {
                let sql = match only {
                    None => $crate::sql::PURGE_TASKS,
                    Some(taskgate_core::Mode::Test) => $crate::sql::PURGE_TEST_TASKS,
                    Some(taskgate_core::Mode::Live) => $crate::sql::PURGE_LIVE_TASKS,
                };
                let r = sqlx::query(sql)
                    .bind(taskgate_core::TaskId::floor(created_before))
                    .bind(limit)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected())
            }
        }

        #[async_trait::async_trait]
        impl $crate::IdempotencyStore for $store {
            async fn idempotency_begin(
                &self,
                b: &$crate::IdempotencyBegin,
            ) -> $crate::StoreResult<$crate::IdempotencyState> {
                // Forget an expired record first, so the key starts afresh.
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE account_id = $1 AND mode = $2 AND idem_key = $3 \
                     AND created_at < $4",
                )
                .bind(b.account_id)
                .bind(b.mode)
                .bind(&b.key)
                .bind(b.expired_before)
                .execute(self.writer())
                .await?;
                let inserted = sqlx::query(
                    "INSERT INTO idempotency_keys (account_id, mode, idem_key, request_hash, status_code, \
                     response, created_at, owner) VALUES ($1, $2, $3, $4, NULL, NULL, $5, $6) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(b.account_id)
                .bind(b.mode)
                .bind(&b.key)
                .bind(&b.request_hash)
                .bind(b.now)
                .bind(b.owner)
                .execute(self.writer())
                .await?;
                if inserted.rows_affected() == 1 {
                    return Ok($crate::IdempotencyState::Started);
                }
                type Row = (
                    String,
                    Option<i64>,
                    Option<String>,
                    taskgate_core::Timestamp,
                    Option<taskgate_core::TaskId>,
                );
                let row: Option<Row> = sqlx::query_as(
                    "SELECT request_hash, status_code, response, created_at, task_id FROM idempotency_keys \
                     WHERE account_id = $1 AND mode = $2 AND idem_key = $3",
                )
                .bind(b.account_id)
                .bind(b.mode)
                .bind(&b.key)
                .fetch_optional(self.writer())
                .await?;
                let Some((hash, status_code, response, created_at, task_id)) = row else {
                    // Deleted between our insert and read: the caller may retry.
                    return Ok($crate::IdempotencyState::InProgress);
                };
                if hash != b.request_hash {
                    return Ok($crate::IdempotencyState::Mismatch);
                }
                match (status_code, response) {
                    (Some(status_code), Some(response)) => {
                        Ok($crate::IdempotencyState::Done { status_code, response })
                    }
                    _ if created_at < b.stale_before => {
                        // The request that owned it died; take it over, once.
                        let taken = sqlx::query(
                            "UPDATE idempotency_keys SET created_at = $4, owner = $6 WHERE account_id = $1 \
                             AND mode = $2 AND idem_key = $3 AND created_at = $5 AND status_code IS NULL",
                        )
                        .bind(b.account_id)
                        .bind(b.mode)
                        .bind(&b.key)
                        .bind(b.now)
                        .bind(created_at)
                        .bind(b.owner)
                        .execute(self.writer())
                        .await?;
                        Ok(match (taken.rows_affected() == 1, task_id) {
                            (true, Some(task_id)) => $crate::IdempotencyState::Orphaned { task_id },
                            (true, None) => $crate::IdempotencyState::Started,
                            (false, _) => $crate::IdempotencyState::InProgress,
                        })
                    }
                    _ => Ok($crate::IdempotencyState::InProgress),
                }
            }

            async fn idempotency_attach(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                key: &taskgate_core::IdempotencyKey,
                owner: taskgate_core::RequestId,
                task_id: taskgate_core::TaskId,
            ) -> $crate::StoreResult<bool> {
                self.hot_visible().await?;
                let r = sqlx::query(
                    "UPDATE idempotency_keys SET task_id = $5 \
                     WHERE account_id = $1 AND mode = $2 AND idem_key = $3 AND owner = $4",
                )
                .bind(account_id)
                .bind(mode)
                .bind(key)
                .bind(owner)
                .bind(task_id)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn idempotency_complete(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                key: &taskgate_core::IdempotencyKey,
                owner: taskgate_core::RequestId,
                status_code: i64,
                response: &str,
            ) -> $crate::StoreResult<bool> {
                let r = sqlx::query(
                    "UPDATE idempotency_keys SET status_code = $5, response = $6 \
                     WHERE account_id = $1 AND mode = $2 AND idem_key = $3 AND owner = $4",
                )
                .bind(account_id)
                .bind(mode)
                .bind(key)
                .bind(owner)
                .bind(status_code)
                .bind(response)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn idempotency_abandon(
                &self,
                account_id: taskgate_core::AccountId,
                mode: taskgate_core::Mode,
                key: &taskgate_core::IdempotencyKey,
                owner: taskgate_core::RequestId,
            ) -> $crate::StoreResult<()> {
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE account_id = $1 AND mode = $2 AND idem_key = $3 \
                     AND owner = $4 AND status_code IS NULL AND task_id IS NULL",
                )
                .bind(account_id)
                .bind(mode)
                .bind(key)
                .bind(owner)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn idempotency_purge(
                &self,
                created_before: taskgate_core::Timestamp,
            ) -> $crate::StoreResult<u64> {
                let r = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                    .bind(created_before)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected())
            }
        }

        #[async_trait::async_trait]
        impl $crate::UsageStore for $store {
            async fn month_spend(
                &self,
                account_id: taskgate_core::AccountId,
                month: &str,
            ) -> $crate::StoreResult<i64> {
                let row: Option<(i64,)> =
                    sqlx::query_as("SELECT micros FROM account_spend WHERE account_id = $1 AND month = $2")
                        .bind(account_id)
                        .bind(month)
                        .fetch_optional(self.reader())
                        .await?;
                Ok(row.map_or(0, |r| r.0))
            }

            async fn month_reserved(
                &self,
                account_id: taskgate_core::AccountId,
                month: &str,
            ) -> $crate::StoreResult<i64> {
                let row: Option<(i64,)> =
                    sqlx::query_as("SELECT reserved FROM account_spend WHERE account_id = $1 AND month = $2")
                        .bind(account_id)
                        .bind(month)
                        .fetch_optional(self.reader())
                        .await?;
                Ok(row.map_or(0, |r| r.0))
            }

            async fn reserve_spend(
                &self,
                account_id: taskgate_core::AccountId,
                month: &str,
                amount: i64,
                limit: i64,
            ) -> $crate::StoreResult<bool> {
                let r = sqlx::query($crate::sql::RESERVE_SPEND)
                    .bind(account_id)
                    .bind(month)
                    .bind(amount)
                    .bind(limit)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn release_spend(
                &self,
                account_id: taskgate_core::AccountId,
                month: &str,
                amount: i64,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::sql::RELEASE_SPEND)
                    .bind(account_id)
                    .bind(month)
                    .bind(amount)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }
        }
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
