//! The SQL both backends share, and the macro that implements [`Store`] for a
//! backend from it. Placeholders are `$N`, which SQLite and PostgreSQL both
//! accept; the statements whose dialects differ (appending to a JSON array)
//! come from the backend's `dialect` module.
//!
//! A macro rather than generic code: sqlx's executor bounds over two databases
//! make generic functions unreadable, and the macro keeps one SQL text.

macro_rules! task_columns {
    () => {
        "id, account_id, mode, api, status, input, output, error, units, input_tokens, output_tokens, \
         cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, events, attempts, \
         created_at, started_at, completed_at, runner, lease_until"
    };
}
pub(crate) use task_columns;

pub const GET_TASK: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE id = $1 AND account_id = $2 AND mode = $3"
);
pub const GET_TASK_BY_ID: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1");

/// The dialect statements, built around each backend's JSON-array append.
macro_rules! dialect_statements {
    ($pre:literal, $post:literal) => {
        pub const CLAIM_TASK: &str = concat!(
            "UPDATE tasks SET status = 'running', started_at = COALESCE(started_at, $2), runner = $3, \
             lease_until = $4, events = ",
            $pre,
            "$5",
            $post,
            " WHERE id = $1 AND status = 'queued' RETURNING ",
            $crate::sql::task_columns!()
        );
        pub const FINISH_TASK: &str = concat!(
            "UPDATE tasks SET status = $2, output = $3, error = $4, units = $5, input_tokens = $6, \
             output_tokens = $7, cost_micros = $8, attempts = $9, completed_at = $10, lease_until = NULL, \
             events = ",
            $pre,
            "$11",
            $post,
            " WHERE id = $1 AND status = 'running'"
        );
        pub const CANCEL_TASK: &str = concat!(
            "UPDATE tasks SET status = 'cancelled', completed_at = $4, lease_until = NULL, events = ",
            $pre,
            "$5",
            $post,
            " WHERE id = $1 AND account_id = $2 AND mode = $3 AND status IN ('queued', 'running') RETURNING ",
            $crate::sql::task_columns!()
        );
        pub const INTERRUPT_EXPIRED: &str = concat!(
            "UPDATE tasks SET status = 'failed', error = $2, completed_at = $1, lease_until = NULL, events = ",
            $pre,
            "$3",
            $post,
            " WHERE status = 'running' AND (lease_until < $1 OR runner = $4) RETURNING id"
        );
    };
}
pub(crate) use dialect_statements;

pub const INSERT_TASK: &str = "INSERT INTO tasks (id, account_id, mode, api, status, input, output, error, \
     units, input_tokens, output_tokens, cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, \
     events, attempts, created_at, started_at, completed_at, runner, lease_until) VALUES ($1, $2, $3, $4, $5, \
     $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)";

pub const UPSERT_SPEND: &str = "INSERT INTO account_spend (account_id, month, micros) VALUES ($1, $2, $3) \
     ON CONFLICT (account_id, month) DO UPDATE SET micros = account_spend.micros + excluded.micros";

/// A bound value of a dynamically built statement.
pub enum Param {
    Text(String),
    Int(i64),
}

/// One page of GET /tasks: the statement and its values, in `$N` order.
pub fn list_tasks_sql(q: &crate::TaskQuery) -> (String, Vec<Param>) {
    let mut sql =
        format!("SELECT {TASK_SUMMARY_COLUMNS} FROM tasks WHERE account_id = $1 AND mode = $2");
    let mut params = vec![
        Param::Text(q.account_id.clone()),
        Param::Text(q.mode.clone()),
    ];
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
                Param::Text(s.clone()),
            );
        }
        sql.push(')');
    }
    if let Some(api) = &q.api {
        push(&mut sql, " AND api = ?", Param::Text(api.clone()));
    }
    if let Some(after) = &q.id_after {
        push(&mut sql, " AND id > ?", Param::Text(after.clone()));
    }
    if let Some(before) = &q.id_before {
        push(&mut sql, " AND id < ?", Param::Text(before.clone()));
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
        .bind(&$k.id)
        .bind(&$k.account_id)
        .bind(&$k.name)
        .bind(&$k.key_type)
        .bind(&$k.mode)
        .bind(&$k.scopes)
        .bind($k.allowed_apis.as_deref())
        .bind($hash)
        .bind(&$k.hint)
        .bind($k.created_at)
        .bind($k.expires_at)
        .bind($k.last_used_at)
        .bind($k.revoked_at)
    };
}
pub(crate) use insert_key;

/// The list view leaves out the two large documents.
pub const TASK_SUMMARY_COLUMNS: &str = "id, account_id, mode, api, status, CAST('' AS TEXT) AS input, \
     CAST(NULL AS TEXT) AS output, error, units, input_tokens, output_tokens, cost_micros, metadata, \
     key_id, idempotency_key, timeout_ms, sandbox, events, attempts, created_at, started_at, \
     completed_at, runner, lease_until";

macro_rules! impl_store {
    ($store:ty, $db:ty, $name:literal, $dialect:ident) => {
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

            async fn create_account(&self, a: &$crate::Account) -> $crate::StoreResult<()> {
                sqlx::query(
                    "INSERT INTO accounts (id, name, plan, status, monthly_spend_limit_micros, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&a.id)
                .bind(&a.name)
                .bind(&a.plan)
                .bind(&a.status)
                .bind(a.monthly_spend_limit_micros)
                .bind(a.created_at)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn get_account(&self, id: &str) -> $crate::StoreResult<Option<$crate::Account>> {
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
                id: &str,
                u: &$crate::AccountUpdate,
            ) -> $crate::StoreResult<Option<$crate::Account>> {
                // One statement: absent fields keep their value.
                let (set_limit, limit) = match u.monthly_spend_limit_micros {
                    Some(v) => (1i64, v),
                    None => (0i64, None),
                };
                Ok(sqlx::query_as(
                    "UPDATE accounts SET plan = COALESCE($2, plan), status = COALESCE($3, status), \
                     monthly_spend_limit_micros = CASE WHEN $4 = 1 THEN $5 ELSE monthly_spend_limit_micros END \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(u.plan.as_deref())
                .bind(u.status.as_deref())
                .bind(set_limit)
                .bind(limit)
                .fetch_optional(self.writer())
                .await?)
            }

            async fn create_key(&self, k: &$crate::KeyRecord, key_hash: &str) -> $crate::StoreResult<()> {
                $crate::sql::insert_key!(k, key_hash).execute(self.writer()).await?;
                Ok(())
            }

            async fn get_key(&self, id: &str) -> $crate::StoreResult<Option<$crate::KeyRecord>> {
                Ok(sqlx::query_as(
                    "SELECT id, account_id, name, key_type, mode, scopes, allowed_apis, hint, created_at, \
                     expires_at, last_used_at, revoked_at FROM api_keys WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn find_key_by_hash(
                &self,
                key_hash: &str,
            ) -> $crate::StoreResult<Option<($crate::KeyRecord, $crate::Account)>> {
                let key: Option<$crate::KeyRecord> = sqlx::query_as(
                    "SELECT id, account_id, name, key_type, mode, scopes, allowed_apis, hint, created_at, \
                     expires_at, last_used_at, revoked_at FROM api_keys WHERE key_hash = $1",
                )
                .bind(key_hash)
                .fetch_optional(self.reader())
                .await?;
                let Some(key) = key else { return Ok(None) };
                let account = self.get_account(&key.account_id).await?;
                Ok(account.map(|a| (key, a)))
            }

            async fn list_keys(&self, account_id: &str) -> $crate::StoreResult<Vec<$crate::KeyRecord>> {
                Ok(sqlx::query_as(
                    "SELECT id, account_id, name, key_type, mode, scopes, allowed_apis, hint, created_at, \
                     expires_at, last_used_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY id",
                )
                .bind(account_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn revoke_key(&self, id: &str, at: i64) -> $crate::StoreResult<Option<$crate::KeyRecord>> {
                Ok(sqlx::query_as(
                    "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
                     RETURNING id, account_id, name, key_type, mode, scopes, allowed_apis, hint, created_at, \
                     expires_at, last_used_at, revoked_at",
                )
                .bind(id)
                .bind(at)
                .fetch_optional(self.writer())
                .await?)
            }

            async fn roll_key(
                &self,
                old_id: &str,
                new: &$crate::KeyRecord,
                new_hash: &str,
                old_expires_at: i64,
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

            async fn touch_keys(&self, used: &[(String, i64)]) -> $crate::StoreResult<()> {
                for (id, at) in used {
                    sqlx::query(
                        "UPDATE api_keys SET last_used_at = $2 WHERE id = $1 \
                         AND (last_used_at IS NULL OR last_used_at < $2)",
                    )
                    .bind(id)
                    .bind(at)
                    .execute(self.writer())
                    .await?;
                }
                Ok(())
            }

            async fn insert_task(&self, t: &$crate::TaskRecord) -> $crate::StoreResult<()> {
                self.hot_insert_task(t).await
            }

            async fn get_task(
                &self,
                account_id: &str,
                mode: &str,
                id: &str,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                self.hot_get_task(account_id, mode, id).await
            }

            async fn get_task_by_id(&self, id: &str) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                Ok(sqlx::query_as($crate::sql::GET_TASK_BY_ID)
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn list_tasks(&self, q: &$crate::TaskQuery) -> $crate::StoreResult<Vec<$crate::TaskRecord>> {
                self.hot_list_tasks(q).await
            }

            async fn claim_task(
                &self,
                id: &str,
                runner: &str,
                now: i64,
                lease_until: i64,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                let event = format!(r#"{{"status":"running","at":{now}}}"#);
                self.hot_claim_task(id, runner, now, lease_until, event).await
            }

            async fn finish_task(&self, id: &str, f: &$crate::TaskFinish) -> $crate::StoreResult<bool> {
                self.hot_finish_task(id, f).await
            }

            async fn cancel_task(
                &self,
                account_id: &str,
                mode: &str,
                id: &str,
                now: i64,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                let event = format!(r#"{{"status":"cancelled","at":{now}}}"#);
                let cancelled = self.hot_cancel_task(account_id, mode, id, now, event).await?;
                match cancelled {
                    Some(t) => Ok(Some(t)),
                    None => self.get_task(account_id, mode, id).await,
                }
            }

            async fn queued_task_ids(&self, limit: i64) -> $crate::StoreResult<Vec<String>> {
                let rows: Vec<(String,)> =
                    sqlx::query_as("SELECT id FROM tasks WHERE status = 'queued' ORDER BY id LIMIT $1")
                        .bind(limit)
                        .fetch_all(self.reader())
                        .await?;
                Ok(rows.into_iter().map(|r| r.0).collect())
            }

            async fn record_cancelled_attempts(
                &self,
                id: &str,
                attempts: &str,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query(
                    "UPDATE tasks SET attempts = $1 WHERE id = $2 AND status = 'cancelled'",
                )
                .bind(attempts)
                .bind(id)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn renew_leases(
                &self,
                runner: &str,
                ids: &[String],
                lease_until: i64,
            ) -> $crate::StoreResult<u64> {
                let mut renewed = 0;
                for chunk in ids.chunks(500) {
                    let list: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
                    let sql = format!(
                        "UPDATE tasks SET lease_until = $2 WHERE status = 'running' AND runner = $1 AND id IN ({})",
                        list.join(", ")
                    );
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(runner).bind(lease_until);
                    for id in chunk {
                        query = query.bind(id);
                    }
                    renewed += query.execute(self.writer()).await?.rows_affected();
                }
                Ok(renewed)
            }

            async fn interrupt_expired(
                &self,
                now: i64,
                dead_runner: Option<&str>,
            ) -> $crate::StoreResult<Vec<String>> {
                let event = format!(
                    r#"{{"status":"failed","at":{now},"message":"the process running this task stopped"}}"#
                );
                let error = r#"{"code":"interrupted","message":"the process running this task stopped before it finished"}"#;
                let rows: Vec<(String,)> = sqlx::query_as($dialect::INTERRUPT_EXPIRED)
                    .bind(now)
                    .bind(error)
                    .bind(event)
                    .bind(dead_runner)
                    .fetch_all(self.writer())
                    .await?;
                Ok(rows.into_iter().map(|r| r.0).collect())
            }

            async fn idempotency_begin(
                &self,
                b: &$crate::IdempotencyBegin,
            ) -> $crate::StoreResult<$crate::IdempotencyState> {
                // Forget an expired record first, so the key starts afresh.
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE account_id = $1 AND mode = $2 AND idem_key = $3 \
                     AND created_at < $4",
                )
                .bind(&b.account_id)
                .bind(&b.mode)
                .bind(&b.key)
                .bind(b.expired_before)
                .execute(self.writer())
                .await?;
                let inserted = sqlx::query(
                    "INSERT INTO idempotency_keys (account_id, mode, idem_key, request_hash, status_code, \
                     response, created_at) VALUES ($1, $2, $3, $4, NULL, NULL, $5) ON CONFLICT DO NOTHING",
                )
                .bind(&b.account_id)
                .bind(&b.mode)
                .bind(&b.key)
                .bind(&b.request_hash)
                .bind(b.now)
                .execute(self.writer())
                .await?;
                if inserted.rows_affected() == 1 {
                    return Ok($crate::IdempotencyState::Started);
                }
                let row: Option<(String, Option<i64>, Option<String>, i64)> = sqlx::query_as(
                    "SELECT request_hash, status_code, response, created_at FROM idempotency_keys \
                     WHERE account_id = $1 AND mode = $2 AND idem_key = $3",
                )
                .bind(&b.account_id)
                .bind(&b.mode)
                .bind(&b.key)
                .fetch_optional(self.writer())
                .await?;
                let Some((hash, status_code, response, created_at)) = row else {
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
                            "UPDATE idempotency_keys SET created_at = $4 WHERE account_id = $1 AND mode = $2 \
                             AND idem_key = $3 AND created_at = $5 AND status_code IS NULL",
                        )
                        .bind(&b.account_id)
                        .bind(&b.mode)
                        .bind(&b.key)
                        .bind(b.now)
                        .bind(created_at)
                        .execute(self.writer())
                        .await?;
                        Ok(if taken.rows_affected() == 1 {
                            $crate::IdempotencyState::Started
                        } else {
                            $crate::IdempotencyState::InProgress
                        })
                    }
                    _ => Ok($crate::IdempotencyState::InProgress),
                }
            }

            async fn idempotency_complete(
                &self,
                account_id: &str,
                mode: &str,
                key: &str,
                status_code: i64,
                response: &str,
            ) -> $crate::StoreResult<()> {
                sqlx::query(
                    "UPDATE idempotency_keys SET status_code = $4, response = $5 \
                     WHERE account_id = $1 AND mode = $2 AND idem_key = $3",
                )
                .bind(account_id)
                .bind(mode)
                .bind(key)
                .bind(status_code)
                .bind(response)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn idempotency_abandon(&self, account_id: &str, mode: &str, key: &str) -> $crate::StoreResult<()> {
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE account_id = $1 AND mode = $2 AND idem_key = $3 \
                     AND status_code IS NULL",
                )
                .bind(account_id)
                .bind(mode)
                .bind(key)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn idempotency_purge(&self, created_before: i64) -> $crate::StoreResult<u64> {
                let r = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                    .bind(created_before)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected())
            }

            async fn month_spend(&self, account_id: &str, month: &str) -> $crate::StoreResult<i64> {
                let row: Option<(i64,)> =
                    sqlx::query_as("SELECT micros FROM account_spend WHERE account_id = $1 AND month = $2")
                        .bind(account_id)
                        .bind(month)
                        .fetch_optional(self.reader())
                        .await?;
                Ok(row.map_or(0, |r| r.0))
            }
        }
    };
}

pub(crate) use impl_store;

/// The task reads and writes of the hot path, for backends that make them
/// with sqlx (the SQLite backend has its own batching writer and readers).
macro_rules! impl_sqlx_hot_writes {
    ($store:ty, $dialect:ident) => {
        impl $store {
            async fn hot_insert_task(&self, t: &$crate::TaskRecord) -> $crate::StoreResult<()> {
                sqlx::query($crate::sql::INSERT_TASK)
                    .bind(&t.id)
                    .bind(&t.account_id)
                    .bind(&t.mode)
                    .bind(&t.api)
                    .bind(&t.status)
                    .bind(&t.input)
                    .bind(t.output.as_deref())
                    .bind(t.error.as_deref())
                    .bind(t.units)
                    .bind(t.input_tokens)
                    .bind(t.output_tokens)
                    .bind(t.cost_micros)
                    .bind(&t.metadata)
                    .bind(&t.key_id)
                    .bind(t.idempotency_key.as_deref())
                    .bind(t.timeout_ms)
                    .bind(t.sandbox.as_deref())
                    .bind(&t.events)
                    .bind(&t.attempts)
                    .bind(t.created_at)
                    .bind(t.started_at)
                    .bind(t.completed_at)
                    .bind(t.runner.as_deref())
                    .bind(t.lease_until)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }

            async fn hot_claim_task(
                &self,
                id: &str,
                runner: &str,
                now: i64,
                lease_until: i64,
                event: String,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                Ok(sqlx::query_as($dialect::CLAIM_TASK)
                    .bind(id)
                    .bind(now)
                    .bind(runner)
                    .bind(lease_until)
                    .bind(event)
                    .fetch_optional(self.writer())
                    .await?)
            }

            async fn hot_finish_task(
                &self,
                id: &str,
                f: &$crate::TaskFinish,
            ) -> $crate::StoreResult<bool> {
                let mut tx = self.writer().begin().await?;
                let done = sqlx::query($dialect::FINISH_TASK)
                    .bind(id)
                    .bind(&f.status)
                    .bind(f.output.as_deref())
                    .bind(f.error.as_deref())
                    .bind(f.units)
                    .bind(f.input_tokens)
                    .bind(f.output_tokens)
                    .bind(f.cost_micros)
                    .bind(&f.attempts)
                    .bind(f.completed_at)
                    .bind(&f.event)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() != 1 {
                    // Cancelled (or ended by the sweeper) meanwhile: drop the result.
                    tx.rollback().await?;
                    return Ok(false);
                }
                if let (Some(account), true) = (&f.charge_account, f.cost_micros > 0) {
                    sqlx::query($crate::sql::UPSERT_SPEND)
                        .bind(account)
                        .bind(taskgate_core::timefmt::month_key(f.completed_at))
                        .bind(f.cost_micros)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(true)
            }

            async fn hot_get_task(
                &self,
                account_id: &str,
                mode: &str,
                id: &str,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                Ok(sqlx::query_as($crate::sql::GET_TASK)
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn hot_list_tasks(
                &self,
                q: &$crate::TaskQuery,
            ) -> $crate::StoreResult<Vec<$crate::TaskRecord>> {
                let (sql, params) = $crate::sql::list_tasks_sql(q);
                let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
                for p in params {
                    query = match p {
                        $crate::sql::Param::Text(s) => query.bind(s),
                        $crate::sql::Param::Int(i) => query.bind(i),
                    };
                }
                Ok(query.fetch_all(self.reader()).await?)
            }

            async fn hot_cancel_task(
                &self,
                account_id: &str,
                mode: &str,
                id: &str,
                now: i64,
                event: String,
            ) -> $crate::StoreResult<Option<$crate::TaskRecord>> {
                Ok(sqlx::query_as($dialect::CANCEL_TASK)
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .bind(now)
                    .bind(event)
                    .fetch_optional(self.writer())
                    .await?)
            }
        }
    };
}

pub(crate) use impl_sqlx_hot_writes;
