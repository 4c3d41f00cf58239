//! [`IdempotencyStore`](crate::IdempotencyStore) for both backends: one SQL text.

/// [`IdempotencyStore`](crate::IdempotencyStore) for a backend (see `backend.rs`).
macro_rules! impl_idempotency {
    ($store:ty) => {
        // The backend's interface, imported here: the impls call nothing
        // else of the backend.
        const _: () = {
            use $crate::backend::{HotPath as _, SqlBackend as _};

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
        };
    };
}
pub(crate) use impl_idempotency;
