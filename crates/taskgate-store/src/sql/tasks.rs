//! [`ClientTasks`](crate::ClientTasks) and [`TaskQueue`](crate::TaskQueue) for both
//! backends: the task path each runs its own way ([`HotPath`](crate::backend::HotPath))
//! and, around it, the SQL they share (queue reads, leases, the sweep,
//! retention).

/// [`ClientTasks`](crate::ClientTasks) and [`TaskQueue`](crate::TaskQueue) for a
/// backend (see `backend.rs`).
macro_rules! impl_tasks {
    ($store:ty) => {
        // The backend's interface, imported here: the impls call nothing
        // else of the backend.
        const _: () = {
            use $crate::backend::{HotPath as _, SqlBackend as _};

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
                    let cancelled = self
                        .hot_cancel_task(account_id, mode, id, now, event)
                        .await?;
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
                        sqlx::query_as(Self::statements().queued_ids.as_str())
                            .bind(limit)
                            .fetch_all(self.reader())
                            .await?;
                    Ok(rows.into_iter().map(|r| r.0).collect())
                }

                async fn queued_tasks(
                    &self,
                    per_lane: i64,
                    limit: i64,
                ) -> $crate::StoreResult<
                    Vec<(
                        taskgate_core::TaskId,
                        taskgate_core::AccountId,
                        taskgate_core::Mode,
                    )>,
                > {
                    Ok(sqlx::query_as(Self::statements().queued_by_turn.as_str())
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
                    self.hot_claim_task(id, runner.clone(), now, lease_until, event)
                        .await
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
                    self.hot_claim_task_capped(
                        id,
                        (account, mode),
                        runner.clone(),
                        now,
                        lease_until,
                        event,
                        max_running,
                    )
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
                        let list: Vec<String> =
                            (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
                        let sql =
                            format!("{}{})", Self::statements().renew_prefix, list.join(", "));
                        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(runner)
                            .bind(lease_until);
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
                    let event =
                        taskgate_core::TaskEvent::new($crate::Transition::Interrupt.to(), now)
                            .with_message("the process running this task stopped");
                    let mut tx = self.writer().begin().await?;
                    let rows: Vec<(
                        taskgate_core::TaskId,
                        taskgate_core::AccountId,
                        i64,
                        taskgate_core::Timestamp,
                        taskgate_core::Mode,
                    )> = sqlx::query_as(Self::statements().interrupt.as_str())
                        .bind(now)
                        .bind(taskgate_core::TaskError::interrupted())
                        .bind(event)
                        .bind(dead_runner)
                        .fetch_all(&mut *tx)
                        .await?;
                    // Each interrupted task's end, to its webhooks.
                    for (id, account, _, _, mode) in &rows {
                        sqlx::query($crate::ENQUEUE_WEBHOOKS)
                            .bind(*account)
                            .bind(*mode)
                            .bind(*id)
                            .bind(taskgate_core::WebhookEvent::TaskFailed.bit())
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                    }
                    for (_, account, reserved, created_at, _) in rows.iter().filter(|r| r.2 > 0) {
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
                    let done = sqlx::query(Self::statements().cancelled_attempts.as_str())
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
        };
    };
}
pub(crate) use impl_tasks;
