//! Plain rows: what the store reads and writes.

/// An account. `plan` names a plan of the configuration; `status` is `active`
/// or `suspended`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Account {
    pub id: String,
    pub name: String,
    pub plan: String,
    pub status: String,
    pub monthly_spend_limit_micros: Option<i64>,
    pub created_at: i64,
}

/// Changes to an account; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct AccountUpdate {
    pub plan: Option<String>,
    pub status: Option<String>,
    /// `Some(None)` removes the limit.
    pub monthly_spend_limit_micros: Option<Option<i64>>,
}

/// An API key without its secret. `scopes` and `allowed_apis` are JSON arrays.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyRecord {
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub key_type: String,
    pub mode: String,
    pub scopes: String,
    pub allowed_apis: Option<String>,
    pub hint: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A task. `input`, `output`, `error`, `metadata`, `sandbox`, `events` and
/// `attempts` are JSON text. In lists, `input` is empty and `output` is `None`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TaskRecord {
    pub id: String,
    pub account_id: String,
    pub mode: String,
    pub api: String,
    pub status: String,
    pub input: String,
    pub output: Option<String>,
    pub error: Option<String>,
    pub units: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_micros: i64,
    pub metadata: String,
    pub key_id: String,
    pub idempotency_key: Option<String>,
    pub timeout_ms: i64,
    pub sandbox: Option<String>,
    pub events: String,
    pub attempts: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub runner: Option<String>,
    pub lease_until: Option<i64>,
}

/// The end of a running task.
#[derive(Debug, Clone)]
pub struct TaskFinish {
    /// `succeeded` or `failed`.
    pub status: String,
    pub output: Option<String>,
    pub error: Option<String>,
    pub units: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_micros: i64,
    pub attempts: String,
    pub completed_at: i64,
    /// The event to append, as a JSON object.
    pub event: String,
    /// Whose spend the cost counts toward (live tasks only).
    pub charge_account: Option<String>,
}

/// A page of GET /tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    pub account_id: String,
    pub mode: String,
    pub statuses: Vec<String>,
    pub api: Option<String>,
    /// Only ids strictly greater than this.
    pub id_after: Option<String>,
    /// Only ids strictly smaller than this.
    pub id_before: Option<String>,
    pub descending: bool,
    pub limit: i64,
}

#[derive(Debug, Clone)]
pub struct IdempotencyBegin {
    pub account_id: String,
    pub mode: String,
    pub key: String,
    pub request_hash: String,
    pub now: i64,
    /// Records created before this are expired and forgotten (24 h).
    pub expired_before: i64,
    /// In-progress records created before this belonged to a request that
    /// died with its process; a new request may take them over.
    pub stale_before: i64,
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
}
