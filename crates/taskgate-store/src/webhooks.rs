//! Webhooks: the endpoints accounts register, the secrets that sign their
//! calls' own webhooks, and the outbox of deliveries. The deliveries of a
//! task's change are written by the change's own commit (the hot path's
//! writes run [`ENQUEUE`], or its PostgreSQL batch form, beside the task's
//! statement), so no event is lost between a task's end and its sending;
//! the senders claim due deliveries under a lease, as runners claim tasks.

use async_trait::async_trait;
use taskgate_core::{
    AccountId, AuditContext, DeliveryAttempts, Mode, RunnerId, TaskId, Timestamp,
    WebhookEndpointId, WebhookEvents, WebhookSecret,
};

use crate::{
    ClaimedDelivery, DeliveryClaim, DeliveryOutcome, DeliveryQuery, SigningSecret, StoreResult,
    WebhookDelivery, WebhookEndpoint, WebhookEndpointUpdate,
};

/// Webhook endpoints, signing secrets and deliveries.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Writes `webhook_endpoint.created` (never the secret).
    async fn create_endpoint(
        &self,
        endpoint: &WebhookEndpoint,
        audit: &AuditContext,
    ) -> StoreResult<()>;
    /// The account's endpoint `id` of `mode`.
    async fn get_endpoint(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: WebhookEndpointId,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// Endpoint `id`, whoever owns it (the senders).
    async fn get_endpoint_by_id(
        &self,
        id: WebhookEndpointId,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// The account's endpoints of `mode` after `after`, oldest first, at
    /// most `limit`.
    async fn list_endpoints(
        &self,
        account_id: AccountId,
        mode: Mode,
        after: Option<WebhookEndpointId>,
        limit: i64,
    ) -> StoreResult<Vec<WebhookEndpoint>>;
    async fn update_endpoint(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: WebhookEndpointId,
        update: &WebhookEndpointUpdate,
        audit: &AuditContext,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// Deletes the endpoint and stops its deliveries still to be sent (they
    /// stay in the log). Whether it existed. Writes
    /// `webhook_endpoint.deleted`.
    async fn delete_endpoint(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: WebhookEndpointId,
        now: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<bool>;
    /// A new secret for the endpoint; the current one keeps signing beside
    /// it until `previous_until`.
    async fn rotate_endpoint_secret(
        &self,
        account_id: AccountId,
        mode: Mode,
        id: WebhookEndpointId,
        secret: &WebhookSecret,
        previous_until: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// What the senders learnt of an endpoint by an attempt: `Ok` forgets
    /// its failures; a failure at `now` marks it failing since then (if it
    /// was not), and disables it if it has been failing since
    /// `disable_before` or earlier. Whether it is disabled now.
    async fn endpoint_attempted(
        &self,
        id: WebhookEndpointId,
        ok: bool,
        now: Timestamp,
        disable_before: Timestamp,
    ) -> StoreResult<bool>;
    /// Disables an endpoint for `reason` ([`WebhookEndpoint::DISABLED_GONE`]).
    async fn disable_endpoint(&self, id: WebhookEndpointId, reason: &str) -> StoreResult<()>;

    /// The account's signing secret of `mode` for its calls' webhooks,
    /// made from `new` (at `now`) if it has none yet.
    async fn signing_secret(
        &self,
        account_id: AccountId,
        mode: Mode,
        new: &WebhookSecret,
        now: Timestamp,
    ) -> StoreResult<SigningSecret>;
    /// A new signing secret; the current one keeps signing until
    /// `previous_until`.
    async fn rotate_signing_secret(
        &self,
        account_id: AccountId,
        mode: Mode,
        secret: &WebhookSecret,
        previous_until: Timestamp,
        now: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<SigningSecret>;

    /// A call's own webhook, written before its task is.
    async fn attach_task_webhook(
        &self,
        task_id: TaskId,
        account_id: AccountId,
        mode: Mode,
        url: &str,
        events: WebhookEvents,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// A `webhook.test` delivery to the endpoint, due now, with its body.
    async fn enqueue_test(
        &self,
        endpoint: &WebhookEndpoint,
        payload: &str,
        now: Timestamp,
    ) -> StoreResult<WebhookDelivery>;
    async fn get_delivery(
        &self,
        account_id: AccountId,
        mode: Mode,
        seq: i64,
    ) -> StoreResult<Option<WebhookDelivery>>;
    async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<WebhookDelivery>>;
    /// Makes the delivery due at `now` (a replay: a new attempt, the same
    /// message).
    async fn retry_delivery(
        &self,
        account_id: AccountId,
        mode: Mode,
        seq: i64,
        now: Timestamp,
    ) -> StoreResult<Option<WebhookDelivery>>;
    /// Up to `limit` deliveries due at `now` that no sender holds, held by
    /// `runner` until `lease_until`: at most `per_destination` of one
    /// endpoint (or call's URL) held at once, those held already counted,
    /// destinations taking turns. With `reclaim`, also those `reclaim`
    /// (this instance's previous life) held when it stopped. Each with its
    /// endpoint and, until its body is made, its task
    /// ([`ClaimedDelivery`]), read with the claim; and whether it left some
    /// due ([`DeliveryClaim::more`]).
    #[allow(clippy::too_many_arguments)]
    async fn claim_deliveries(
        &self,
        runner: &RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
        per_destination: i64,
        reclaim: Option<&RunnerId>,
    ) -> StoreResult<DeliveryClaim>;
    /// Writes an attempt's outcome, if `runner` still holds the delivery:
    /// `claimed` as its claim returned it (while held, no one else adds an
    /// attempt), the attempt added to its list. One statement.
    async fn record_delivery(
        &self,
        claimed: &WebhookDelivery,
        runner: &RunnerId,
        outcome: &DeliveryOutcome,
    ) -> StoreResult<bool>;
    /// [`WebhookStore::record_delivery`], where the store can, with its next
    /// commit rather than one of its own (SQLite: the next write of any
    /// kind, at the latest about 0.1 s later), without waiting for it. Reads
    /// of deliveries see it (they wait for it first). Lost to a crash or a
    /// failed commit, the delivery is sent again once its lease ends, as if
    /// its sender had stopped (at least once). PostgreSQL writes it now.
    async fn record_delivery_soon(
        &self,
        claimed: &WebhookDelivery,
        runner: &RunnerId,
        outcome: &DeliveryOutcome,
    ) -> StoreResult<()>;
    /// Deletes up to `limit` deliveries made before `created_before` (and
    /// calls' webhooks as old); how many deliveries.
    async fn purge_deliveries(&self, created_before: Timestamp, limit: i64) -> StoreResult<u64>;
    /// From now on, hands the deliveries this process writes to `sink` as
    /// they commit, held by its sender, so they go out at once without a
    /// claim ([`DeliverySink`]). False where the store cannot (PostgreSQL:
    /// several instances share the outbox, and each claims).
    fn deliver_fresh_to(&self, sink: std::sync::Arc<dyn DeliverySink>) -> bool;
    /// A word each time deliveries are committed by any process sharing the
    /// store, so that its senders claim them at once (PostgreSQL); `None`
    /// where one process owns the store and hands its deliveries over
    /// ([`WebhookStore::deliver_fresh_to`]). Words missed while the
    /// connection is re-made leave deliveries to the sender's poll.
    async fn deliveries_written(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<()>>>;
}

/// This process's webhook sender, as a store sees it: the store holds for it
/// the deliveries it writes (in the commit of the task's change, as any
/// delivery) that the sender has room for (a turn of the destination, or a
/// place to wait for one), and hands them over once that commit is done. What a claim would do, without the claim's
/// transaction, its reads and its wait for the sender's next round.
///
/// A delivery it holds is the sender's as a claimed one is: sent, then its
/// outcome written by [`WebhookStore::record_delivery`]; one the sender never
/// sends (it stopped) is claimed again once its lease ends. One the sender
/// has no room for is written unheld, for the claim.
pub trait DeliverySink: Send + Sync {
    /// Who holds the deliveries handed over.
    fn runner(&self) -> &RunnerId;
    /// Until when a delivery held at `now` is held.
    fn lease_end(&self, now: Timestamp) -> Timestamp;
    /// Whether the sender can take any delivery now (a cheap look before
    /// the write; [`DeliverySink::take_turn`] decides).
    fn has_room(&self) -> bool;
    /// Whether the sender takes the delivery just written to `destination`
    /// (it has room for it: a turn of the destination, or a place to wait
    /// for one): it is then held and handed over. Every one taken comes back
    /// through [`DeliverySink::committed`] or [`DeliverySink::give_back`].
    fn take_turn(&self, destination: &Destination) -> bool;
    /// Deliveries held in a commit that succeeded: to be sent now.
    fn committed(&self, deliveries: Vec<ClaimedDelivery>);
    /// Deliveries whose writing was not committed: their turns back.
    fn give_back(&self, deliveries: Vec<ClaimedDelivery>);
    /// Deliveries were written unheld (their destinations' turns were
    /// taken): the claim has work.
    fn waiting(&self);
}

/// Where a delivery goes: the claim's `COALESCE(endpoint_id, url)`, whose
/// turns are counted (`webhooks.max_concurrency_per_endpoint`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    Endpoint(WebhookEndpointId),
    /// A call's own webhook.
    Url(String),
}

impl WebhookDelivery {
    /// Its endpoint, or its call's URL; `None` for neither (never written so).
    pub fn destination(&self) -> Option<Destination> {
        match (self.endpoint_id, &self.url) {
            (Some(id), _) => Some(Destination::Endpoint(id)),
            (None, Some(url)) => Some(Destination::Url(url.clone())),
            (None, None) => None,
        }
    }
}

/// The deliveries of a task's change, written in the change's commit: one
/// per event of `$4` (bits) that each enabled endpoint of the task's
/// account and mode wants, and its call's own webhook wants. `$1` account,
/// `$2` mode, `$3` task, `$4` event bits, `$5` now. An account without
/// endpoints costs one probe of an index.
pub const ENQUEUE: &str = "INSERT INTO webhook_deliveries (account_id, mode, event_type, task_id, \
     endpoint_id, url, status, attempts, next_attempt_at, created_at) \
     SELECT w.account_id, w.mode, t.name, CAST($3 AS TEXT), w.id, NULL, 'pending', '[]', \
     CAST($5 AS BIGINT), CAST($5 AS BIGINT) FROM webhook_endpoints w JOIN webhook_event_types t \
     ON (w.events & t.bit) <> 0 AND (t.bit & CAST($4 AS BIGINT)) <> 0 \
     WHERE w.account_id = $1 AND w.mode = $2 AND w.disabled IS NULL \
     UNION ALL SELECT h.account_id, h.mode, t.name, h.task_id, NULL, h.url, 'pending', '[]', \
     CAST($5 AS BIGINT), CAST($5 AS BIGINT) FROM task_webhooks h JOIN webhook_event_types t \
     ON (h.events & t.bit) <> 0 AND (t.bit & CAST($4 AS BIGINT)) <> 0 WHERE h.task_id = $3";

/// [`ENQUEUE`] for many tasks in one statement (PostgreSQL's batches, as a
/// data-modifying `WITH` part): the deliveries of the events of `source`,
/// a relation of `(id, account_id, mode, event, at)`, `event` an event's
/// name.
pub fn enqueue_from(source: &str) -> String {
    let columns = "INSERT INTO webhook_deliveries (account_id, mode, event_type, task_id, \
         endpoint_id, url, status, attempts, next_attempt_at, created_at)";
    format!(
        "{columns} SELECT w.account_id, w.mode, t.name, s.id, w.id, NULL, 'pending', '[]', s.at, s.at \
         FROM {source} s JOIN webhook_endpoints w ON w.account_id = s.account_id \
         AND w.mode = s.mode AND w.disabled IS NULL \
         JOIN webhook_event_types t ON t.name = s.event AND (w.events & t.bit) <> 0 \
         UNION ALL SELECT h.account_id, h.mode, t.name, s.id, NULL, h.url, 'pending', '[]', s.at, s.at \
         FROM {source} s JOIN task_webhooks h ON h.task_id = s.id \
         JOIN webhook_event_types t ON t.name = s.event AND (h.events & t.bit) <> 0"
    )
}

macro_rules! endpoint_columns {
    () => {
        "id, account_id, mode, url, events, description, disabled, secret, previous_secret, \
         previous_until, failing_since, created_at"
    };
}
pub(crate) use endpoint_columns;

/// An endpoint by its id: `$1`.
pub(crate) const GET_ENDPOINT_BY_ID: &str = concat!(
    "SELECT ",
    endpoint_columns!(),
    " FROM webhook_endpoints WHERE id = $1"
);

/// What [`ENQUEUE`] finds, for SQLite's writer to write the deliveries one
/// by one, each held for its sender or not (`sqlite/handoff.rs`): the
/// enabled endpoints of account `$1` and mode `$2` wanting any of the
/// events `$3` ...
pub(crate) const ENDPOINTS_WANTING: &str = concat!(
    "SELECT ",
    endpoint_columns!(),
    " FROM webhook_endpoints WHERE account_id = $1 AND mode = $2 AND disabled IS NULL \
     AND (events & $3) <> 0"
);

/// ... and task `$1`'s own webhook: its URL and events.
pub(crate) const TASK_WEBHOOK: &str = "SELECT url, events FROM task_webhooks WHERE task_id = $1";

/// One delivery of [`ENQUEUE`]'s, pending and due at `$7`, held by `$8`
/// until `$9` (or by no one): `$1` account, `$2` mode, `$3` event, `$4`
/// task, `$5` endpoint or `$6` URL.
pub(crate) const INSERT_DELIVERY: &str = "INSERT INTO webhook_deliveries (account_id, mode, \
     event_type, task_id, endpoint_id, url, status, attempts, next_attempt_at, created_at, runner, \
     lease_until) VALUES ($1, $2, $3, $4, $5, $6, 'pending', '[]', $7, $7, $8, $9)";

macro_rules! delivery_columns {
    () => {
        "seq, account_id, mode, event_type, task_id, endpoint_id, url, status, attempts, payload, \
         next_attempt_at, created_at"
    };
}
pub(crate) use delivery_columns;

/// A page of the delivery log, newest first, by the index that finds it
/// without reading the rest of the account's log: a task's deliveries by
/// `webhook_deliveries_task`, an endpoint's by `webhook_deliveries_endpoint`,
/// else the account's by `webhook_deliveries_owner`. The cursor is always a
/// range on `seq` (`i64::MAX` for the first page): with it SQLite's planner,
/// which has no statistics, takes the narrower index; with only equalities it
/// takes the owner index and reads every delivery of the account to find one
/// task's (`sqlite/statement_tests.rs`).
pub(crate) enum DeliveryPage {
    /// `$1` account, `$2` mode, `$3` task, `$4` before, `$5` endpoint or
    /// NULL, `$6` status or NULL, `$7` limit.
    Task,
    /// `$1` account, `$2` mode, `$3` endpoint, `$4` before, `$5` status or
    /// NULL, `$6` limit.
    Endpoint,
    /// `$1` account, `$2` mode, `$3` before, `$4` status or NULL, `$5` limit.
    Account,
}

impl DeliveryPage {
    pub(crate) fn of(q: &DeliveryQuery) -> Self {
        match (q.task_id, q.endpoint_id) {
            (Some(_), _) => Self::Task,
            (None, Some(_)) => Self::Endpoint,
            (None, None) => Self::Account,
        }
    }

    pub(crate) fn sql(&self) -> &'static str {
        match self {
            Self::Task => concat!(
                "SELECT ",
                delivery_columns!(),
                " FROM webhook_deliveries WHERE account_id = $1 AND mode = $2 AND task_id = $3 \
                 AND seq < $4 AND ($5 IS NULL OR endpoint_id = $5) AND ($6 IS NULL OR status = $6) \
                 ORDER BY seq DESC LIMIT $7"
            ),
            Self::Endpoint => concat!(
                "SELECT ",
                delivery_columns!(),
                " FROM webhook_deliveries WHERE account_id = $1 AND mode = $2 \
                 AND endpoint_id = $3 AND seq < $4 AND ($5 IS NULL OR status = $5) \
                 ORDER BY seq DESC LIMIT $6"
            ),
            Self::Account => concat!(
                "SELECT ",
                delivery_columns!(),
                " FROM webhook_deliveries WHERE account_id = $1 AND mode = $2 AND seq < $3 \
                 AND ($4 IS NULL OR status = $4) ORDER BY seq DESC LIMIT $5"
            ),
        }
    }
}

/// An attempt's outcome written, if its sender still holds the delivery:
/// `$1` seq, `$2` runner, `$3` status, `$4` attempts (with this one, from
/// [`attempts_after`]), `$5` payload, `$6` next attempt, `$7` claimed at. A
/// replay asked for while the attempt ran is kept.
pub const RECORD_DELIVERY: &str = "UPDATE webhook_deliveries SET status = $3, attempts = $4, \
     payload = COALESCE(payload, $5), runner = NULL, lease_until = NULL, \
     next_attempt_at = CASE WHEN next_attempt_at > $7 THEN next_attempt_at ELSE $6 END \
     WHERE seq = $1 AND runner = $2";

/// The attempts of `claimed` with the outcome's, the last
/// [`MAX_ATTEMPTS_KEPT`] kept (while held, no one else adds any).
pub fn attempts_after(claimed: &WebhookDelivery, outcome: &DeliveryOutcome) -> DeliveryAttempts {
    let mut attempts = claimed.attempts.clone();
    attempts.0.push(outcome.attempt.clone());
    let keep = attempts.0.len().saturating_sub(MAX_ATTEMPTS_KEPT);
    attempts.0.drain(..keep);
    attempts
}

/// The audit entry of a secret's rotation (an endpoint's, or an account's
/// signing secret): the old secret signs until `previous_until`.
pub(crate) fn rotation_entry(
    audit: &AuditContext,
    action: taskgate_core::AuditAction,
    account_id: AccountId,
    target: taskgate_core::AuditTarget,
    previous_until: Timestamp,
) -> taskgate_core::AuditEntry {
    let mut changes = taskgate_core::Changes::new();
    taskgate_core::audit::created(&mut changes, "previous_until", previous_until.rfc3339());
    audit.entry(action, Some(account_id), target, changes)
}

/// [`WebhookStore`] for a backend (see `backend.rs`).
macro_rules! impl_webhooks {
    ($store:ty) => {
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::WebhookStore for $store {
                async fn create_endpoint(
                    &self,
                    e: &$crate::WebhookEndpoint,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    self.webhooks_in_use();
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    sqlx::query(concat!(
                        "INSERT INTO webhook_endpoints (",
                        $crate::webhooks::endpoint_columns!(),
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                    ))
                    .bind(e.id)
                    .bind(e.account_id)
                    .bind(e.mode)
                    .bind(&e.url)
                    .bind(e.events.bits())
                    .bind(&e.description)
                    .bind(&e.disabled)
                    .bind(&e.secret)
                    .bind(&e.previous_secret)
                    .bind(e.previous_until)
                    .bind(e.failing_since)
                    .bind(e.created_at)
                    .execute(&mut *tx)
                    .await?;
                    let entry = audit.entry(
                        taskgate_core::AuditAction::WebhookEndpointCreated,
                        Some(e.account_id),
                        taskgate_core::AuditTarget::webhook_endpoint(e.id),
                        $crate::audit::endpoint_created(e),
                    );
                    $crate::audit::audit_append!(tx, head, &entry);
                    tx.commit().await?;
                    Ok(())
                }

                async fn get_endpoint(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    id: taskgate_core::WebhookEndpointId,
                ) -> $crate::StoreResult<Option<$crate::WebhookEndpoint>> {
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::webhooks::endpoint_columns!(),
                        " FROM webhook_endpoints WHERE id = $1 AND account_id = $2 AND mode = $3"
                    ))
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .fetch_optional(self.reader())
                    .await?)
                }

                async fn get_endpoint_by_id(
                    &self,
                    id: taskgate_core::WebhookEndpointId,
                ) -> $crate::StoreResult<Option<$crate::WebhookEndpoint>> {
                    Ok(sqlx::query_as($crate::webhooks::GET_ENDPOINT_BY_ID)
                        .bind(id)
                        .fetch_optional(self.reader())
                        .await?)
                }

                async fn list_endpoints(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    after: Option<taskgate_core::WebhookEndpointId>,
                    limit: i64,
                ) -> $crate::StoreResult<Vec<$crate::WebhookEndpoint>> {
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::webhooks::endpoint_columns!(),
                        " FROM webhook_endpoints WHERE account_id = $1 AND mode = $2 \
                         AND ($3 IS NULL OR id > $3) ORDER BY id LIMIT $4"
                    ))
                    .bind(account_id)
                    .bind(mode)
                    .bind(after)
                    .bind(limit)
                    .fetch_all(self.reader())
                    .await?)
                }

                async fn update_endpoint(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    id: taskgate_core::WebhookEndpointId,
                    u: &$crate::WebhookEndpointUpdate,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::WebhookEndpoint>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let before: Option<$crate::WebhookEndpoint> = sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::webhooks::endpoint_columns!(),
                        " FROM webhook_endpoints WHERE id = $1 AND account_id = $2 AND mode = $3"
                    ))
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .fetch_optional(&mut *tx)
                    .await?;
                    let Some(before) = before else {
                        return Ok(None);
                    };
                    // Enabling forgets the failures; disabling is the owner's.
                    let (set_enabled, disabled) = match u.enabled {
                        None => (false, None),
                        Some(true) => (true, None),
                        Some(false) => (true, Some($crate::WebhookEndpoint::DISABLED_BY_OWNER)),
                    };
                    let after: $crate::WebhookEndpoint = sqlx::query_as(concat!(
                        "UPDATE webhook_endpoints SET url = COALESCE($4, url), \
                         events = COALESCE($5, events), \
                         description = CASE WHEN $6 THEN $7 ELSE description END, \
                         disabled = CASE WHEN $8 THEN $9 ELSE disabled END, \
                         failing_since = CASE WHEN $8 THEN NULL ELSE failing_since END \
                         WHERE id = $1 AND account_id = $2 AND mode = $3 RETURNING ",
                        $crate::webhooks::endpoint_columns!()
                    ))
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .bind(&u.url)
                    .bind(u.events.map(|e| e.bits()))
                    .bind(u.description.is_some())
                    .bind(u.description.clone().flatten())
                    .bind(set_enabled)
                    .bind(disabled)
                    .fetch_one(&mut *tx)
                    .await?;
                    let changes = $crate::audit::endpoint_changes(&before, &after);
                    if !changes.is_empty() {
                        let entry = audit.entry(
                            taskgate_core::AuditAction::WebhookEndpointUpdated,
                            Some(account_id),
                            taskgate_core::AuditTarget::webhook_endpoint(id),
                            changes,
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(Some(after))
                }

                async fn delete_endpoint(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    id: taskgate_core::WebhookEndpointId,
                    _now: taskgate_core::Timestamp,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<bool> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let gone = sqlx::query(
                        "DELETE FROM webhook_endpoints WHERE id = $1 AND account_id = $2 AND mode = $3",
                    )
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if gone == 1 {
                        // By the outbox's index of what is due (an endpoint's
                        // id is never a URL), not the endpoint's whole log.
                        sqlx::query(
                            "UPDATE webhook_deliveries SET next_attempt_at = NULL, \
                             status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END \
                             WHERE COALESCE(endpoint_id, url) = $1 AND endpoint_id = $1 \
                             AND next_attempt_at IS NOT NULL",
                        )
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                        let entry = audit.entry(
                            taskgate_core::AuditAction::WebhookEndpointDeleted,
                            Some(account_id),
                            taskgate_core::AuditTarget::webhook_endpoint(id),
                            taskgate_core::Changes::new(),
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(gone == 1)
                }

                async fn rotate_endpoint_secret(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    id: taskgate_core::WebhookEndpointId,
                    secret: &taskgate_core::WebhookSecret,
                    previous_until: taskgate_core::Timestamp,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::WebhookEndpoint>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let rotated: Option<$crate::WebhookEndpoint> = sqlx::query_as(concat!(
                        "UPDATE webhook_endpoints SET previous_secret = secret, secret = $4, \
                         previous_until = $5 WHERE id = $1 AND account_id = $2 AND mode = $3 \
                         RETURNING ",
                        $crate::webhooks::endpoint_columns!()
                    ))
                    .bind(id)
                    .bind(account_id)
                    .bind(mode)
                    .bind(secret)
                    .bind(previous_until)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if rotated.is_some() {
                        let entry = $crate::webhooks::rotation_entry(
                            audit,
                            taskgate_core::AuditAction::WebhookEndpointSecretRotated,
                            account_id,
                            taskgate_core::AuditTarget::webhook_endpoint(id),
                            previous_until,
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(rotated)
                }

                async fn endpoint_attempted(
                    &self,
                    id: taskgate_core::WebhookEndpointId,
                    ok: bool,
                    now: taskgate_core::Timestamp,
                    disable_before: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<bool> {
                    if ok {
                        sqlx::query(
                            "UPDATE webhook_endpoints SET failing_since = NULL \
                             WHERE id = $1 AND failing_since IS NOT NULL",
                        )
                        .bind(id)
                        .execute(self.writer())
                        .await?;
                        return Ok(false);
                    }
                    let disabled: Option<(Option<String>,)> = sqlx::query_as(
                        "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, $2), \
                         disabled = CASE WHEN disabled IS NULL AND COALESCE(failing_since, $2) <= $3 \
                         THEN 'failing' ELSE disabled END WHERE id = $1 RETURNING disabled",
                    )
                    .bind(id)
                    .bind(now)
                    .bind(disable_before)
                    .fetch_optional(self.writer())
                    .await?;
                    Ok(matches!(disabled, Some((Some(_),))))
                }

                async fn disable_endpoint(
                    &self,
                    id: taskgate_core::WebhookEndpointId,
                    reason: &str,
                ) -> $crate::StoreResult<()> {
                    sqlx::query(
                        "UPDATE webhook_endpoints SET disabled = $2 WHERE id = $1 AND disabled IS NULL",
                    )
                    .bind(id)
                    .bind(reason)
                    .execute(self.writer())
                    .await?;
                    Ok(())
                }

                async fn signing_secret(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    new: &taskgate_core::WebhookSecret,
                    now: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<$crate::SigningSecret> {
                    const SELECT: &str = "SELECT account_id, mode, secret, previous_secret, \
                         previous_until, created_at FROM webhook_signing_secrets \
                         WHERE account_id = $1 AND mode = $2";
                    let found: Option<$crate::SigningSecret> = sqlx::query_as(SELECT)
                        .bind(account_id)
                        .bind(mode)
                        .fetch_optional(self.reader())
                        .await?;
                    if let Some(found) = found {
                        return Ok(found);
                    }
                    sqlx::query(
                        "INSERT INTO webhook_signing_secrets (account_id, mode, secret, created_at) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (account_id, mode) DO NOTHING",
                    )
                    .bind(account_id)
                    .bind(mode)
                    .bind(new)
                    .bind(now)
                    .execute(self.writer())
                    .await?;
                    // Another request's secret if it made one first: read where it was written.
                    Ok(sqlx::query_as(SELECT)
                        .bind(account_id)
                        .bind(mode)
                        .fetch_one(self.writer())
                        .await?)
                }

                async fn rotate_signing_secret(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    secret: &taskgate_core::WebhookSecret,
                    previous_until: taskgate_core::Timestamp,
                    now: taskgate_core::Timestamp,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<$crate::SigningSecret> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let rotated: $crate::SigningSecret = sqlx::query_as(
                        "INSERT INTO webhook_signing_secrets (account_id, mode, secret, created_at) \
                         VALUES ($1, $2, $3, $5) ON CONFLICT (account_id, mode) DO UPDATE SET \
                         previous_secret = webhook_signing_secrets.secret, secret = excluded.secret, \
                         previous_until = $4 RETURNING account_id, mode, secret, previous_secret, \
                         previous_until, created_at",
                    )
                    .bind(account_id)
                    .bind(mode)
                    .bind(secret)
                    .bind(previous_until)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                    let entry = $crate::webhooks::rotation_entry(
                        audit,
                        taskgate_core::AuditAction::SigningSecretRotated,
                        account_id,
                        taskgate_core::AuditTarget::signing_secret(mode),
                        previous_until,
                    );
                    $crate::audit::audit_append!(tx, head, &entry);
                    tx.commit().await?;
                    Ok(rotated)
                }

                async fn attach_task_webhook(
                    &self,
                    task_id: taskgate_core::TaskId,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    url: &str,
                    events: taskgate_core::WebhookEvents,
                    now: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<()> {
                    self.webhooks_in_use();
                    sqlx::query(
                        "INSERT INTO task_webhooks (task_id, account_id, mode, url, events, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(task_id)
                    .bind(account_id)
                    .bind(mode)
                    .bind(url)
                    .bind(events.bits())
                    .bind(now)
                    .execute(self.writer())
                    .await?;
                    Ok(())
                }

                async fn enqueue_test(
                    &self,
                    e: &$crate::WebhookEndpoint,
                    payload: &str,
                    now: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<$crate::WebhookDelivery> {
                    Ok(sqlx::query_as(concat!(
                        "INSERT INTO webhook_deliveries (account_id, mode, event_type, task_id, \
                         endpoint_id, url, status, attempts, payload, next_attempt_at, created_at) \
                         VALUES ($1, $2, 'webhook.test', NULL, $3, NULL, 'pending', '[]', $4, $5, $5) \
                         RETURNING ",
                        $crate::webhooks::delivery_columns!()
                    ))
                    .bind(e.account_id)
                    .bind(e.mode)
                    .bind(e.id)
                    .bind(payload)
                    .bind(now)
                    .fetch_one(self.writer())
                    .await?)
                }

                async fn get_delivery(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    seq: i64,
                ) -> $crate::StoreResult<Option<$crate::WebhookDelivery>> {
                    use $crate::backend::HotPath as _;
                    self.hot_visible_deliveries().await?;
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::webhooks::delivery_columns!(),
                        " FROM webhook_deliveries WHERE seq = $1 AND account_id = $2 AND mode = $3"
                    ))
                    .bind(seq)
                    .bind(account_id)
                    .bind(mode)
                    .fetch_optional(self.reader())
                    .await?)
                }

                async fn list_deliveries(
                    &self,
                    q: &$crate::DeliveryQuery,
                ) -> $crate::StoreResult<Vec<$crate::WebhookDelivery>> {
                    use $crate::backend::HotPath as _;
                    self.hot_visible_deliveries().await?;
                    use $crate::webhooks::DeliveryPage;
                    let page = DeliveryPage::of(q);
                    let before = q.before.unwrap_or(i64::MAX);
                    let query = sqlx::query_as(page.sql()).bind(q.account_id).bind(q.mode);
                    let query = match page {
                        DeliveryPage::Task => query
                            .bind(q.task_id)
                            .bind(before)
                            .bind(q.endpoint_id)
                            .bind(q.status),
                        DeliveryPage::Endpoint => {
                            query.bind(q.endpoint_id).bind(before).bind(q.status)
                        }
                        DeliveryPage::Account => query.bind(before).bind(q.status),
                    };
                    Ok(query.bind(q.limit).fetch_all(self.reader()).await?)
                }

                async fn retry_delivery(
                    &self,
                    account_id: taskgate_core::AccountId,
                    mode: taskgate_core::Mode,
                    seq: i64,
                    now: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<Option<$crate::WebhookDelivery>> {
                    Ok(sqlx::query_as(concat!(
                        "UPDATE webhook_deliveries SET next_attempt_at = $4 \
                         WHERE seq = $1 AND account_id = $2 AND mode = $3 RETURNING ",
                        $crate::webhooks::delivery_columns!()
                    ))
                    .bind(seq)
                    .bind(account_id)
                    .bind(mode)
                    .bind(now)
                    .fetch_optional(self.writer())
                    .await?)
                }

                async fn claim_deliveries(
                    &self,
                    runner: &taskgate_core::RunnerId,
                    now: taskgate_core::Timestamp,
                    lease_until: taskgate_core::Timestamp,
                    limit: i64,
                    per_destination: i64,
                    reclaim: Option<&taskgate_core::RunnerId>,
                ) -> $crate::StoreResult<$crate::DeliveryClaim> {
                    use $crate::backend::HotPath as _;
                    self.hot_claim_deliveries(runner, now, lease_until, limit, per_destination, reclaim)
                        .await
                }

                async fn record_delivery(
                    &self,
                    claimed: &$crate::WebhookDelivery,
                    runner: &taskgate_core::RunnerId,
                    o: &$crate::DeliveryOutcome,
                ) -> $crate::StoreResult<bool> {
                    use $crate::backend::HotPath as _;
                    self.hot_record_delivery(claimed, runner, o).await
                }

                async fn record_delivery_soon(
                    &self,
                    claimed: &$crate::WebhookDelivery,
                    runner: &taskgate_core::RunnerId,
                    o: &$crate::DeliveryOutcome,
                ) -> $crate::StoreResult<()> {
                    use $crate::backend::HotPath as _;
                    self.hot_record_delivery_soon(claimed, runner, o).await
                }

                fn deliver_fresh_to(
                    &self,
                    sink: std::sync::Arc<dyn $crate::webhooks::DeliverySink>,
                ) -> bool {
                    use $crate::backend::HotPath as _;
                    self.hot_deliver_fresh_to(sink)
                }

                async fn deliveries_written(
                    &self,
                ) -> $crate::StoreResult<Option<tokio::sync::mpsc::Receiver<()>>> {
                    use $crate::backend::SqlBackend as _;
                    self.listen_deliveries_written().await
                }

                async fn purge_deliveries(
                    &self,
                    created_before: taskgate_core::Timestamp,
                    limit: i64,
                ) -> $crate::StoreResult<u64> {
                    let r = sqlx::query(
                        "DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM \
                         webhook_deliveries WHERE created_at < $1 ORDER BY seq LIMIT $2)",
                    )
                    .bind(created_before)
                    .bind(limit)
                    .execute(self.writer())
                    .await?;
                    sqlx::query(
                        "DELETE FROM task_webhooks WHERE task_id IN (SELECT task_id FROM \
                         task_webhooks WHERE created_at < $1 LIMIT $2)",
                    )
                    .bind(created_before)
                    .bind(limit)
                    .execute(self.writer())
                    .await?;
                    Ok(r.rows_affected())
                }
            }
        };
    };
}
pub(crate) use impl_webhooks;

/// A delivery keeps its latest attempts (a replayed one may gather many).
pub const MAX_ATTEMPTS_KEPT: usize = 50;
