//! [`UsageStore`](crate::UsageStore), what accounts spend and reserve, for both
//! backends: one SQL text.

/// [`UsageStore`](crate::UsageStore) for a backend (see `backend.rs`).
macro_rules! impl_spend {
    ($store:ty) => {
        // The backend's interface, imported here: the impls call nothing
        // else of the backend.
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::UsageStore for $store {
                async fn month_spend(
                    &self,
                    account_id: taskgate_core::AccountId,
                    month: &str,
                ) -> $crate::StoreResult<i64> {
                    let row: Option<(i64,)> = sqlx::query_as(
                        "SELECT micros FROM account_spend WHERE account_id = $1 AND month = $2",
                    )
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
                    let row: Option<(i64,)> = sqlx::query_as(
                        "SELECT reserved FROM account_spend WHERE account_id = $1 AND month = $2",
                    )
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
    };
}
pub(crate) use impl_spend;
