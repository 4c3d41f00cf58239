//! [`KeyStore`](crate::KeyStore) for both backends: one SQL text.

/// [`KeyStore`](crate::KeyStore) for a backend (see `backend.rs`).
macro_rules! impl_keys {
    ($store:ty) => {
        // The backend's interface, imported here: the impls call nothing
        // else of the backend.
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::KeyStore for $store {
                async fn create_key(
                    &self,
                    k: &$crate::KeyRecord,
                    key_hash: &str,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    $crate::sql::insert_key!(k, key_hash).execute(&mut *tx).await?;
                    let entry = audit.entry(
                        taskgate_core::AuditAction::KeyCreated,
                        Some(k.account_id),
                        taskgate_core::AuditTarget::key(k.id),
                        $crate::audit::key_created(k),
                    );
                    $crate::audit::audit_append!(tx, head, &entry);
                    tx.commit().await?;
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
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::KeyRecord>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let before: Option<$crate::KeyRecord> =
                        sqlx::query_as($crate::sql::select_keys!("WHERE id = $1"))
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await?;
                    let Some(before) = before else {
                        return Ok(None);
                    };
                    let after: $crate::KeyRecord = sqlx::query_as(concat!(
                        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ",
                        $crate::sql::key_columns!()
                    ))
                    .bind(id)
                    .bind(at)
                    .fetch_one(&mut *tx)
                    .await?;
                    if before.revoked_at.is_none() {
                        let mut changes = taskgate_core::Changes::new();
                        taskgate_core::audit::change(
                            &mut changes,
                            "revoked_at",
                            None,
                            after.revoked_at.map(|t| t.rfc3339()),
                        );
                        let entry = audit.entry(
                            taskgate_core::AuditAction::KeyRevoked,
                            Some(after.account_id),
                            taskgate_core::AuditTarget::key(id),
                            changes,
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(Some(after))
                }

                async fn roll_key(
                    &self,
                    old_id: taskgate_core::KeyId,
                    new: &$crate::KeyRecord,
                    new_hash: &str,
                    old_expires_at: taskgate_core::Timestamp,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let before: Option<$crate::KeyRecord> =
                        sqlx::query_as($crate::sql::select_keys!("WHERE id = $1"))
                            .bind(old_id)
                            .fetch_optional(&mut *tx)
                            .await?;
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
                    let old = before.ok_or($crate::StoreError::NotFound)?;
                    // The old key's new end: its own if that was earlier.
                    let old_end = match old.expires_at {
                        Some(t) if t <= old_expires_at => t,
                        _ => old_expires_at,
                    };
                    let mut changes = taskgate_core::Changes::new();
                    taskgate_core::audit::change(
                        &mut changes,
                        "expires_at",
                        old.expires_at.map(|t| t.rfc3339()),
                        Some(old_end.rfc3339()),
                    );
                    taskgate_core::audit::created(&mut changes, "replaced_by", new.id.to_string());
                    taskgate_core::audit::created(&mut changes, "replaced_by_hint", &new.hint);
                    let entry = audit.entry(
                        taskgate_core::AuditAction::KeyRolled,
                        Some(old.account_id),
                        taskgate_core::AuditTarget::key(old_id),
                        changes,
                    );
                    $crate::audit::audit_append!(tx, head, &entry);
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
        };
    };
}
pub(crate) use impl_keys;
