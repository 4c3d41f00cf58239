//! The documented shape of the API's answers: the tasks, the catalog's
//! APIs, the errors, and the envelope around each.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

#[derive(ToSchema)]
pub(super) struct Meta {
    /// `req_…`, also in the `X-Request-Id` header.
    request_id: String,
    /// The server's own processing time.
    latency_ms: f64,
}

#[derive(ToSchema, Serialize)]
struct Usage {
    units: i64,
    /// The whole input, its cached part included.
    input_tokens: Option<i64>,
    /// The whole output, reasoning included.
    output_tokens: Option<i64>,
    /// The part of `output_tokens` the model spent reasoning, where the
    /// provider counts it; null when unknown.
    reasoning_tokens: Option<i64>,
    /// The part of `input_tokens` read from the provider's prompt cache,
    /// billed at the API's cached input price; null when unknown.
    cached_input_tokens: Option<i64>,
    /// Decimal USD with six decimals; test-mode and unsuccessful tasks cost nothing.
    #[schema(example = "0.000100")]
    cost_usd: String,
}

#[derive(ToSchema, Serialize)]
struct TaskError {
    /// `upstream_error`, `upstream_timeout`, `invalid_upstream_response`, `timeout`, `interrupted`, `internal_error`.
    code: String,
    message: String,
    upstream_status: Option<u16>,
}

#[derive(ToSchema, Serialize)]
#[schema(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
enum Status {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// A task.
#[derive(ToSchema, Serialize)]
struct Task {
    #[schema(example = "task_01JD2W3KX7…")]
    id: String,
    #[schema(example = "task")]
    object: String,
    /// The API's slug.
    api: String,
    /// `live` or `test`.
    mode: String,
    status: Status,
    /// The API's output (its `output_schema`); absent from list items.
    #[schema(value_type = Option<Object>)]
    output: Option<Value>,
    error: Option<TaskError>,
    usage: Usage,
    #[schema(value_type = Object)]
    metadata: Value,
    created_at: String,
    started_at: Option<String>,
    completed_at: Option<String>,
    duration_ms: Option<i64>,
}

#[derive(ToSchema, Serialize)]
struct Event {
    status: Status,
    at: String,
    message: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct Attempt {
    /// `builtin`, `sandbox`, or an upstream provider.
    provider: String,
    target: String,
    started_at: String,
    duration_ms: i64,
    outcome: String,
    http_status: Option<u16>,
}

/// A task with its input and history (GET /tasks/{id}).
#[derive(ToSchema, Serialize)]
struct TaskDetails {
    #[serde(flatten)]
    task: Task,
    #[schema(value_type = Object)]
    input: Value,
    key_id: String,
    idempotency_key: Option<String>,
    events: Vec<Event>,
    attempts: Vec<Attempt>,
}

#[derive(ToSchema)]
struct TaskList {
    object: String,
    items: Vec<Task>,
    has_more: bool,
    /// Pass as `cursor` for the next page.
    next_cursor: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct Pricing {
    /// `call` or `1k_tokens`.
    unit: String,
    price_usd: Option<String>,
    input_price_usd: Option<String>,
    output_price_usd: Option<String>,
    /// Per 1K input tokens read from the provider's prompt cache; present
    /// only where the API prices them (else they cost `input_price_usd`).
    cached_input_price_usd: Option<String>,
}

#[derive(ToSchema, Serialize)]
struct ApiSummary {
    slug: String,
    object: String,
    name: String,
    description: String,
    /// `chat`, `embedding`, `image_generation`, `transcription`, `classification`, `tokenization`.
    kind: String,
    provider: String,
    /// `available`, `degraded`, `unavailable`.
    status: String,
    modes: Vec<String>,
    pricing: Pricing,
}

#[derive(ToSchema, Serialize)]
struct Limits {
    timeout_ms: u64,
    max_input_bytes: u64,
}

#[derive(ToSchema, Serialize)]
struct Example {
    #[schema(value_type = Object)]
    input: Value,
    #[schema(value_type = Object)]
    output: Value,
}

#[derive(ToSchema, Serialize)]
struct ApiDetails {
    #[serde(flatten)]
    summary: ApiSummary,
    #[schema(value_type = Object)]
    input_schema: Value,
    #[schema(value_type = Object)]
    output_schema: Value,
    examples: Vec<Example>,
    limits: Limits,
}

#[derive(ToSchema)]
struct ApiList {
    object: String,
    items: Vec<ApiSummary>,
    has_more: bool,
    next_cursor: Option<String>,
}

#[derive(ToSchema)]
struct ErrorDetail {
    path: String,
    message: String,
}

#[derive(ToSchema)]
struct Error {
    /// Fixed by the status: `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `not_found_error`, `conflict_error`, `rate_limit_error`, `api_error`.
    r#type: String,
    code: String,
    message: String,
    param: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    details: Option<Value>,
}

/// Every answer is this envelope.
#[derive(ToSchema)]
pub(super) struct ErrorEnvelope {
    success: bool,
    #[schema(value_type = Option<Object>)]
    data: Option<Value>,
    error: Error,
    meta: Meta,
}

macro_rules! envelope {
    ($name:ident, $data:ty) => {
        #[derive(ToSchema)]
        pub(super) struct $name {
            success: bool,
            data: $data,
            meta: Meta,
        }
    };
}
envelope!(TaskEnvelope, Task);
envelope!(TaskDetailsEnvelope, TaskDetails);
envelope!(TaskListEnvelope, TaskList);
envelope!(ApiListEnvelope, ApiList);
envelope!(ApiDetailsEnvelope, ApiDetails);
