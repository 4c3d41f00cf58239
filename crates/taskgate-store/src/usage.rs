//! What the dashboard's Usage reads: requests per key and minute (counted in
//! memory by the server, added here in batches) and aggregates of the tasks
//! table. Nothing here is on a request's path.

use async_trait::async_trait;
use taskgate_core::{AccountId, ApiSlug, KeyId, Mode, TaskStatus, Timestamp};

use crate::StoreResult;

/// Requests of one key in one minute (`minute`: its first millisecond).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RequestCount {
    pub account_id: AccountId,
    pub key_id: KeyId,
    pub mode: Mode,
    pub minute: i64,
    /// Accepted by the rate limits.
    pub requests: i64,
    /// Refused by the rate limits (429).
    pub limited: i64,
}

/// Requests of one key in one bucket of a series.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RequestBucket {
    pub key_id: KeyId,
    /// The bucket's first millisecond.
    pub bucket: i64,
    pub requests: i64,
    pub limited: i64,
}

/// Tasks of one API, status and key, with what they cost.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TaskCount {
    pub api: ApiSlug,
    pub status: TaskStatus,
    pub key_id: KeyId,
    pub tasks: i64,
    pub cost_micros: i64,
}

#[async_trait]
pub trait RequestStore: Send + Sync {
    /// Adds the counts (to a key's minute already counted, if any).
    async fn add_request_counts(&self, counts: &[RequestCount]) -> StoreResult<()>;
    /// The account's requests of `mode` since `since`, summed per key and
    /// bucket of `bucket_ms` (buckets start at multiples of it).
    async fn request_buckets(
        &self,
        account_id: AccountId,
        mode: Mode,
        since: Timestamp,
        bucket_ms: i64,
    ) -> StoreResult<Vec<RequestBucket>>;
    /// The account's tasks of `mode` created since `since`, counted by API,
    /// status and key.
    async fn task_counts(
        &self,
        account_id: AccountId,
        mode: Mode,
        since: Timestamp,
    ) -> StoreResult<Vec<TaskCount>>;
    /// Durations (ms) of the account's finished tasks of `mode` created since
    /// `since`, the newest `limit`.
    async fn task_durations(
        &self,
        account_id: AccountId,
        mode: Mode,
        since: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<i64>>;
    /// Forgets the minutes before `before`. How many rows.
    async fn purge_request_counts(&self, before: Timestamp) -> StoreResult<u64>;
}

/// [`RequestStore`] for a backend (see `backend.rs`).
macro_rules! impl_requests {
    ($store:ty) => {
        // The backend's interface (`backend.rs`): what these impls call
        // of the backend.
        const _: () = {
            use $crate::backend::{HotPath as _, SqlBackend as _};

            #[async_trait::async_trait]
            impl $crate::usage::RequestStore for $store {
                async fn add_request_counts(
                    &self,
                    counts: &[$crate::usage::RequestCount],
                ) -> $crate::StoreResult<()> {
                    if counts.is_empty() {
                        return Ok(());
                    }
                    let mut tx = self.writer().begin().await?;
                    for c in counts {
                        sqlx::query(
                            "INSERT INTO request_counts (account_id, key_id, mode, minute, requests, limited) \
                             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, minute, key_id) DO UPDATE \
                             SET requests = request_counts.requests + excluded.requests, \
                             limited = request_counts.limited + excluded.limited",
                        )
                        .bind(c.account_id)
                        .bind(c.key_id)
                        .bind(c.mode)
                        .bind(c.minute)
                        .bind(c.requests)
                        .bind(c.limited)
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(())
                }

                async fn request_buckets(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    since: taskgate_core::Timestamp,
                    bucket_ms: i64,
                ) -> $crate::StoreResult<Vec<$crate::usage::RequestBucket>> {
                    Ok(sqlx::query_as(
                        "SELECT key_id, (minute / $4) * $4 AS bucket, CAST(SUM(requests) AS BIGINT) AS requests, \
                         CAST(SUM(limited) AS BIGINT) AS limited FROM request_counts \
                         WHERE account_id = $1 AND mode = $2 AND minute >= $3 \
                         GROUP BY key_id, bucket ORDER BY bucket, key_id",
                    )
                    .bind(account_id)
                    .bind(mode)
                    .bind(since)
                    .bind(bucket_ms.max(60_000))
                    .fetch_all(self.reader())
                    .await?)
                }

                async fn task_counts(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    since: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<Vec<$crate::usage::TaskCount>> {
                    self.hot_visible().await?;
                    Ok(sqlx::query_as(
                        "SELECT api, status, key_id, CAST(COUNT(*) AS BIGINT) AS tasks, \
                         CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) AS cost_micros FROM tasks \
                         WHERE account_id = $1 AND mode = $2 AND id >= $3 \
                         GROUP BY api, status, key_id ORDER BY api, status, key_id",
                    )
                    .bind(account_id)
                    .bind(mode)
                    .bind(taskgate_core::TaskId::floor(since))
                    .fetch_all(self.reader())
                    .await?)
                }

                async fn task_durations(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    since: taskgate_core::Timestamp,
                    limit: i64,
                ) -> $crate::StoreResult<Vec<i64>> {
                    self.hot_visible().await?;
                    let rows: Vec<(i64,)> = sqlx::query_as(
                        "SELECT completed_at - started_at FROM tasks \
                         WHERE account_id = $1 AND mode = $2 AND id >= $3 \
                         AND started_at IS NOT NULL AND completed_at IS NOT NULL \
                         ORDER BY id DESC LIMIT $4",
                    )
                    .bind(account_id)
                    .bind(mode)
                    .bind(taskgate_core::TaskId::floor(since))
                    .bind(limit)
                    .fetch_all(self.reader())
                    .await?;
                    Ok(rows.into_iter().map(|(d,)| d).collect())
                }

                async fn purge_request_counts(
                    &self,
                    before: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<u64> {
                    let r = sqlx::query("DELETE FROM request_counts WHERE minute < $1")
                        .bind(before)
                        .execute(self.writer())
                        .await?;
                    Ok(r.rows_affected())
                }
            }
        };
    };
}
pub(crate) use impl_requests;
