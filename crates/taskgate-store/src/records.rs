//! The rows the store reads and writes, in domain types: every status, mode,
//! type and id is typed, and every time is a [`Timestamp`]. How each type
//! sits in a column is defined once, in `taskgate_core::column`.

use taskgate_core::{
    AccountId, AccountStatus, ApiList, ApiSlug, Attempts, ForbiddenTransition, IdempotencyKey,
    KeyId, KeyType, Mode, PlanName, RequestId, RunnerId, SandboxControls, Scopes, TaskError,
    TaskEvent, TaskEvents, TaskId, TaskStatus, Timestamp, Transition,
};
use taskgate_core::{
    DeliveryAttempt, DeliveryAttempts, DeliveryStatus, WebhookDeliveryId, WebhookEndpointId,
    WebhookEvent, WebhookEvents, WebhookSecret,
};

/// An account. `plan` names a plan of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Account {
    pub id: AccountId,
    pub name: String,
    pub plan: PlanName,
    pub status: AccountStatus,
    /// The limit the account's owners set (`None`: none).
    pub monthly_spend_limit_micros: Option<i64>,
    /// The operator's ceiling on it (`None`: none): owners may set their
    /// limit at most this high, and cannot remove it while it is set.
    pub max_monthly_spend_limit_micros: Option<i64>,
    pub created_at: Timestamp,
}

impl Account {
    /// The monthly spend limit that holds: the lower of the owners' limit
    /// and the operator's ceiling, the ceiling alone when the owners set
    /// none, `None` when neither is set. A ceiling set below the owners'
    /// limit thus lowers what holds at once.
    pub fn effective_spend_limit_micros(&self) -> Option<i64> {
        match (
            self.monthly_spend_limit_micros,
            self.max_monthly_spend_limit_micros,
        ) {
            (Some(own), Some(ceiling)) => Some(own.min(ceiling)),
            (own, ceiling) => own.or(ceiling),
        }
    }
}

/// Changes to an account; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct AccountUpdate {
    pub plan: Option<PlanName>,
    pub status: Option<AccountStatus>,
    /// `Some(None)` removes the limit.
    pub monthly_spend_limit_micros: Option<Option<i64>>,
    /// The operator's ceiling; `Some(None)` removes it.
    pub max_monthly_spend_limit_micros: Option<Option<i64>>,
}

/// An API key without its secret.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyRecord {
    pub id: KeyId,
    pub account_id: AccountId,
    pub name: String,
    pub key_type: KeyType,
    pub mode: Mode,
    pub scopes: Scopes,
    /// The only APIs a restricted key may call; `None`: every API.
    pub allowed_apis: Option<ApiList>,
    /// `tg_test_…9fQ2`: the prefix and the last four characters.
    pub hint: String,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

/// Whether a key works at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    Active,
    Revoked,
    Expired,
}

impl KeyState {
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyState::Active => "active",
            KeyState::Revoked => "revoked",
            KeyState::Expired => "expired",
        }
    }
}

impl KeyRecord {
    /// Revoked (also a rolled key past its grace) comes before expired.
    pub fn state_at(&self, now: Timestamp) -> KeyState {
        if self.revoked_at.is_some_and(|t| t <= now) {
            KeyState::Revoked
        } else if self.expires_at.is_some_and(|t| t <= now) {
            KeyState::Expired
        } else {
            KeyState::Active
        }
    }
}

/// A task. `input`, `output` and `metadata` are the client's JSON documents,
/// kept as text (they pass through unread). In lists, `input` is empty and
/// `output` is `None`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TaskRecord {
    pub id: TaskId,
    pub account_id: AccountId,
    pub mode: Mode,
    pub api: ApiSlug,
    pub status: TaskStatus,
    pub input: String,
    pub output: Option<String>,
    pub error: Option<TaskError>,
    pub units: i64,
    /// The whole input, its cached part included.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The part of `output_tokens` spent reasoning, where counted.
    pub reasoning_tokens: Option<i64>,
    /// The part of `input_tokens` read from the provider's cache, where counted.
    pub cached_input_tokens: Option<i64>,
    pub cost_micros: i64,
    pub metadata: String,
    pub key_id: KeyId,
    pub idempotency_key: Option<IdempotencyKey>,
    pub timeout_ms: i64,
    pub sandbox: Option<SandboxControls>,
    pub events: TaskEvents,
    pub attempts: Attempts,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub runner: Option<RunnerId>,
    pub lease_until: Option<Timestamp>,
    /// Micro-USD reserved against the account's spend limit when the call
    /// was accepted (month of `created_at`), given back when the task ends.
    pub reserved_micros: i64,
}

impl TaskRecord {
    /// Milliseconds from start to end, once it has both.
    pub fn duration_ms(&self) -> Option<i64> {
        match (self.started_at, self.completed_at) {
            (Some(s), Some(c)) => Some(c.ms_since(s).max(0)),
            _ => None,
        }
    }

    /// A new queued task, as a call stores it: its history one `queued` event
    /// at `created_at`, nothing run, reserved or charged yet. The caller sets
    /// the request's own fields (`input`, `metadata`, `timeout_ms`, …) with
    /// struct update syntax.
    pub fn queued(
        id: TaskId,
        account_id: AccountId,
        mode: Mode,
        api: ApiSlug,
        key_id: KeyId,
        created_at: Timestamp,
    ) -> Self {
        Self {
            id,
            account_id,
            mode,
            api,
            status: TaskStatus::Queued,
            input: "{}".to_owned(),
            output: None,
            error: None,
            units: 0,
            input_tokens: None,
            output_tokens: None,
            reasoning_tokens: None,
            cached_input_tokens: None,
            cost_micros: 0,
            metadata: "{}".to_owned(),
            key_id,
            idempotency_key: None,
            timeout_ms: 0,
            sandbox: None,
            events: TaskEvents::created(created_at),
            attempts: Attempts::default(),
            created_at,
            started_at: None,
            completed_at: None,
            runner: None,
            lease_until: None,
            reserved_micros: 0,
        }
    }

    /// The task after [`Transition::Claim`] by `runner` at `now`, as the
    /// store's claim writes it: for a task stored already claimed.
    pub fn claimed(
        mut self,
        runner: &RunnerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Self, ForbiddenTransition> {
        Transition::Claim.check(self.status)?;
        self.status = Transition::Claim.to();
        self.started_at = Some(self.started_at.unwrap_or(now));
        self.runner = Some(runner.clone());
        self.lease_until = Some(lease_until);
        self.events.push(TaskEvent::new(self.status, now));
        Ok(self)
    }

    /// The task after `finish`, as the store's finish writes it: built
    /// without reading it back.
    pub fn finished(mut self, finish: &TaskFinish) -> Result<Self, ForbiddenTransition> {
        let transition = Transition::ending(finish.status)?;
        transition.check(self.status)?;
        self.status = transition.to();
        self.output = finish.output.clone();
        self.error = finish.error.clone();
        self.units = finish.units;
        self.input_tokens = finish.input_tokens;
        self.output_tokens = finish.output_tokens;
        self.reasoning_tokens = finish.reasoning_tokens;
        self.cached_input_tokens = finish.cached_input_tokens;
        self.cost_micros = finish.cost_micros;
        self.attempts = finish.attempts.clone();
        self.completed_at = Some(finish.completed_at);
        self.lease_until = None;
        self.events.push(finish.event());
        Ok(self)
    }
}

/// The end of a running task.
#[derive(Debug, Clone)]
pub struct TaskFinish {
    /// `succeeded` or `failed` ([`Transition::ending`]); the store refuses
    /// any other.
    pub status: TaskStatus,
    pub output: Option<String>,
    pub error: Option<TaskError>,
    pub units: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub cached_input_tokens: Option<i64>,
    pub cost_micros: i64,
    pub attempts: Attempts,
    pub completed_at: Timestamp,
    /// The message of the event that records the end, if any.
    pub message: Option<String>,
    /// Whose spend the cost counts toward (live tasks only).
    pub charge_account: Option<AccountId>,
}

impl TaskFinish {
    /// The event appended to the task's history.
    pub fn event(&self) -> TaskEvent {
        TaskEvent {
            status: self.status,
            at: self.completed_at,
            message: self.message.clone(),
        }
    }
}

/// A page of GET /tasks.
#[derive(Debug, Clone)]
pub struct TaskQuery {
    pub account_id: AccountId,
    pub mode: Mode,
    pub statuses: Vec<TaskStatus>,
    pub api: Option<ApiSlug>,
    /// Only tasks of these APIs (a restricted key's), when `Some`; an empty
    /// list matches nothing.
    pub apis: Option<Vec<ApiSlug>>,
    /// Only ids strictly greater than this.
    pub id_after: Option<TaskId>,
    /// Only ids strictly smaller than this.
    pub id_before: Option<TaskId>,
    pub descending: bool,
    pub limit: i64,
}

impl TaskQuery {
    /// The first page of the account's tasks in `mode`, newest first.
    pub fn new(account_id: AccountId, mode: Mode, limit: i64) -> Self {
        Self {
            account_id,
            mode,
            statuses: Vec::new(),
            api: None,
            apis: None,
            id_after: None,
            id_before: None,
            descending: true,
            limit,
        }
    }
}

#[derive(Debug, Clone)]
pub struct IdempotencyBegin {
    pub account_id: AccountId,
    pub mode: Mode,
    pub key: IdempotencyKey,
    /// The request asking: if it gets the key, only it may attach a task,
    /// complete or abandon the record.
    pub owner: RequestId,
    pub request_hash: String,
    pub now: Timestamp,
    /// Records created before this are expired and forgotten (24 h).
    pub expired_before: Timestamp,
    /// In-progress records created before this belonged to a request that
    /// died with its process; a new request may take them over.
    pub stale_before: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyState {
    /// This request owns the key now.
    Started,
    /// Another request with this key is still being answered.
    InProgress,
    /// The key was used with a different request body.
    Mismatch,
    /// The stored answer to replay.
    Done { status_code: i64, response: String },
    /// The request that held the key died after creating its task and
    /// before answering; this request holds the key now and answers with
    /// that task instead of making another.
    Orphaned { task_id: TaskId },
}

/// A webhook endpoint: where an account's events of one mode are sent.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookEndpoint {
    pub id: WebhookEndpointId,
    pub account_id: AccountId,
    pub mode: Mode,
    pub url: String,
    #[sqlx(try_from = "i64")]
    pub events: WebhookEvents,
    pub description: Option<String>,
    /// `None` while enabled; else why not ([`WebhookEndpoint::DISABLED_BY_OWNER`], …).
    pub disabled: Option<String>,
    pub secret: WebhookSecret,
    /// The secret before the last rotation, which still signs until
    /// `previous_until`.
    pub previous_secret: Option<WebhookSecret>,
    pub previous_until: Option<Timestamp>,
    /// Since when every attempt at it has failed (`None`: its last one
    /// succeeded, or none was made).
    pub failing_since: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl WebhookEndpoint {
    /// Disabled by its owner.
    pub const DISABLED_BY_OWNER: &'static str = "owner";
    /// Disabled because the receiver answered `410 Gone`.
    pub const DISABLED_GONE: &'static str = "gone";
    /// Disabled because every attempt failed for `webhooks.disable_after`.
    pub const DISABLED_FAILING: &'static str = "failing";

    /// The secrets that sign a message sent at `now`: the current one, and
    /// the previous one while the rotation overlaps.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&WebhookSecret> {
        signing(
            &self.secret,
            &self.previous_secret,
            self.previous_until,
            now,
        )
    }
}

fn signing<'a>(
    current: &'a WebhookSecret,
    previous: &'a Option<WebhookSecret>,
    until: Option<Timestamp>,
    now: Timestamp,
) -> Vec<&'a WebhookSecret> {
    let mut all = vec![current];
    if let (Some(p), Some(until)) = (previous, until)
        && now < until
    {
        all.push(p);
    }
    all
}

/// The secret that signs an account's per-call webhooks of one mode.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SigningSecret {
    pub account_id: AccountId,
    pub mode: Mode,
    pub secret: WebhookSecret,
    pub previous_secret: Option<WebhookSecret>,
    pub previous_until: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl SigningSecret {
    /// As [`WebhookEndpoint::signing_secrets`].
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&WebhookSecret> {
        signing(
            &self.secret,
            &self.previous_secret,
            self.previous_until,
            now,
        )
    }
}

/// Changes to an endpoint; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct WebhookEndpointUpdate {
    pub url: Option<String>,
    pub events: Option<WebhookEvents>,
    /// `Some(None)` removes it.
    pub description: Option<Option<String>>,
    /// `Some(true)` enables it (and forgets its failures), `Some(false)`
    /// disables it as its owner.
    pub enabled: Option<bool>,
}

/// One event's delivery to an endpoint (`endpoint_id`) or to a call's own
/// webhook (`url`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookDelivery {
    pub seq: i64,
    pub account_id: AccountId,
    pub mode: Mode,
    pub event_type: WebhookEvent,
    /// `None` for a test event.
    pub task_id: Option<TaskId>,
    pub endpoint_id: Option<WebhookEndpointId>,
    pub url: Option<String>,
    pub status: DeliveryStatus,
    pub attempts: DeliveryAttempts,
    /// The body, made at the first attempt and sent as it is after.
    pub payload: Option<String>,
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl WebhookDelivery {
    pub fn id(&self) -> WebhookDeliveryId {
        WebhookDeliveryId::new(self.seq, self.created_at)
    }

    /// The `webhook-id` of every attempt at it: of the task's event, or of
    /// this test.
    pub fn message_id(&self) -> String {
        match self.task_id {
            Some(task) => self.event_type.message_id(task),
            None => {
                let id = self.id().to_string();
                format!("msg_{}", &id[WebhookDeliveryId::PREFIX.len()..])
            }
        }
    }
}

/// A delivery as its claim returns it, with what an attempt at it reads,
/// read in the claim's own transaction: its endpoint (`None` when it has
/// none, or it was deleted) and, while its body is not made yet (`payload`
/// empty), its task (`None` when it has none, or it was deleted).
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub delivery: WebhookDelivery,
    pub endpoint: Option<WebhookEndpoint>,
    pub task: Option<TaskRecord>,
}

impl ClaimedDelivery {
    /// The task to read for `d`'s body: none once the body is made.
    pub fn task_to_read(d: &WebhookDelivery) -> Option<TaskId> {
        d.task_id.filter(|_| d.payload.is_none())
    }
}

/// What a claim of deliveries took, and whether it left any due: a
/// destination had more than its turns free, or `limit` was reached. Then a
/// claim made as a held one ends (a turn freed) finds more; otherwise only
/// deliveries written or come due since.
#[derive(Debug, Clone, Default)]
pub struct DeliveryClaim {
    pub deliveries: Vec<ClaimedDelivery>,
    pub more: bool,
}

/// What an attempt at a delivery did, written by the sender that holds it.
#[derive(Debug, Clone)]
pub struct DeliveryOutcome {
    pub attempt: DeliveryAttempt,
    pub status: DeliveryStatus,
    /// When to try again; `None`: not again.
    pub next_attempt_at: Option<Timestamp>,
    /// The body sent, stored at the first attempt.
    pub payload: String,
    /// When the sender claimed it: a replay asked for after this is kept.
    pub claimed_at: Timestamp,
}

/// A page of an account's deliveries of one mode, newest first.
#[derive(Debug, Clone)]
pub struct DeliveryQuery {
    pub account_id: AccountId,
    pub mode: Mode,
    pub endpoint_id: Option<WebhookEndpointId>,
    pub task_id: Option<TaskId>,
    pub status: Option<DeliveryStatus>,
    /// Only deliveries older than this one (the page's cursor).
    pub before: Option<i64>,
    pub limit: i64,
}
