//! [`AccountStore`](crate::AccountStore) for both backends: one SQL text.

/// [`AccountStore`](crate::AccountStore) for a backend (see `backend.rs`).
macro_rules! impl_accounts {
    ($store:ty) => {
        // The backend's interface, imported here: the impls call nothing
        // else of the backend.
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::AccountStore for $store {
                async fn create_account(
                    &self,
                    a: &$crate::Account,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
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
                    .execute(&mut *tx)
                    .await?;
                    let entry = audit.entry(
                        taskgate_core::AuditAction::AccountCreated,
                        Some(a.id),
                        taskgate_core::AuditTarget::account(a.id),
                        $crate::audit::account_created(a),
                    );
                    $crate::audit::audit_append!(tx, head, &entry);
                    tx.commit().await?;
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
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::Account>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let before: Option<$crate::Account> =
                        sqlx::query_as("SELECT * FROM accounts WHERE id = $1")
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await?;
                    let Some(before) = before else {
                        return Ok(None);
                    };
                    // One statement: absent fields keep their value.
                    let set = |v: Option<Option<i64>>| match v {
                        Some(v) => (1i64, v),
                        None => (0i64, None),
                    };
                    let (set_limit, limit) = set(u.monthly_spend_limit_micros);
                    let (set_ceiling, ceiling) = set(u.max_monthly_spend_limit_micros);
                    let after: $crate::Account = sqlx::query_as(
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
                    .fetch_one(&mut *tx)
                    .await?;
                    let changes = $crate::audit::account_changes(&before, &after);
                    if !changes.is_empty() {
                        let entry = audit.entry(
                            taskgate_core::AuditAction::AccountUpdated,
                            Some(id),
                            taskgate_core::AuditTarget::account(id),
                            changes,
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(Some(after))
                }
            }
        };
    };
}
pub(crate) use impl_accounts;
