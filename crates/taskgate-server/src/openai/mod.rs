//! `/openai/v1`: the endpoints of OpenAI's API that the OpenAI SDKs use for
//! chat and embeddings, so code written against those SDKs runs through
//! Taskgate by changing its base URL. `model` names a Taskgate API; every
//! request is a task made the way POST /api/v1/call makes one (the same
//! authentication, limits, spend reservation, test mode and storage), and its
//! id is in the `X-Taskgate-Task-Id` header. Errors are in OpenAI's shape,
//! `{"error": {message, type, code, param}}`, so the SDKs raise their usual
//! exceptions.

mod chat;
mod embeddings;
mod request;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};
use taskgate_core::{TaskId, TaskStatus, Timestamp};
use taskgate_providers::kinds::Kind;
use taskgate_store::TaskRecord;

use crate::auth::{ApisRead, Auth};
use crate::catalog::ApiEntry;
use crate::envelope::Raw;
use crate::error::ApiError;
use crate::executor::Told;
use crate::principal::Principal;
use crate::service::calls::{self, End, Started};
use crate::service::tasks::CancelOnDrop;
use crate::state::AppState;

/// When this process started serving, in Unix seconds: the `created` of
/// its models.
static STARTED: OnceLock<i64> = OnceLock::new();

pub fn router(app: Arc<AppState>) -> Router<Arc<AppState>> {
    STARTED.get_or_init(|| Timestamp::now().unix_ms() / 1000);
    Router::new()
        .route("/chat/completions", post(chat::completions))
        .route("/embeddings", post(embeddings::create))
        .route("/models", get(models))
        .route("/models/{model}", get(model))
        .route_layer(middleware::from_fn_with_state(
            app,
            crate::auth::authenticate,
        ))
        .fallback(not_found)
        .layer(middleware::from_fn(
            crate::envelope::errors_as::<OpenAiError>,
        ))
}

/// An error as OpenAI's API writes it.
#[derive(Debug)]
pub struct OpenAiError {
    status: StatusCode,
    code: String,
    message: String,
    param: Option<String>,
    /// Boxed, as in [`ApiError`]: most errors carry none.
    headers: Option<Box<HeaderMap>>,
}

impl OpenAiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
            param: None,
            headers: None,
        }
    }

    fn with_param(mut self, param: &str) -> Self {
        self.param = Some(param.to_owned());
        self
    }

    fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_field", message).with_param(param)
    }

    /// A request field Taskgate's normalized kinds cannot carry.
    fn unsupported(param: &str, what: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "unsupported_parameter",
            format!("{what} is not supported by Taskgate's OpenAI-compatible endpoint."),
        )
        .with_param(param)
    }

    /// The failure of a task that ended without succeeding.
    fn of_task(task: &TaskRecord) -> Self {
        let (code, message) = match (&task.error, task.status) {
            (Some(e), _) => (e.code.clone(), e.message.clone()),
            (None, TaskStatus::Cancelled) => (
                "task_cancelled".to_owned(),
                "The task was cancelled.".to_owned(),
            ),
            (None, _) => (
                "internal_error".to_owned(),
                "The task did not finish.".to_owned(),
            ),
        };
        let status = match code.as_str() {
            "task_cancelled" => StatusCode::CONFLICT,
            "rate_limited_upstream" => StatusCode::TOO_MANY_REQUESTS,
            "upstream_timeout" | "timeout" => StatusCode::GATEWAY_TIMEOUT,
            "interrupted" => StatusCode::SERVICE_UNAVAILABLE,
            "internal_error" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_GATEWAY,
        };
        let mut err = Self::new(status, "", format!("Task {} failed: {message}", task.id));
        err.code = code;
        err.headers = Some(Box::new(task_header(task.id)));
        err
    }

    /// The `error` object, as the body and as a stream event carry it.
    fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": crate::error::error_type_of(self.status),
            "code": self.code,
            "param": self.param,
        }})
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        // The call's own fields: `api` is the request's `model`, and input
        // fields have the names of the request's.
        // An option was one of the request's own fields.
        let param = e.param.as_deref().map(|p| match p {
            "api" => "model",
            p => p
                .strip_prefix("input.options.")
                .or_else(|| p.strip_prefix("input."))
                .unwrap_or(p),
        });
        let message = match e.message.strip_prefix("input.") {
            Some(m) if e.code == "invalid_input" => m.to_owned(),
            _ => e.message,
        };
        Self {
            status: e.status,
            code: e.code.to_owned(),
            message,
            param: param.map(str::to_owned),
            headers: e.headers,
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(code = %self.code, "OpenAI-compatible request failed");
        }
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(h) = self.headers {
            response.headers_mut().extend(*h);
        }
        response.extensions_mut().insert(Raw);
        response
    }
}

async fn not_found() -> OpenAiError {
    OpenAiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        "No such route. Taskgate's OpenAI-compatible endpoint serves POST /chat/completions, POST /embeddings and GET /models.",
    )
}

fn task_header(id: TaskId) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
        h.insert("x-taskgate-task-id", v);
    }
    h
}

/// The API `model` names, if it is of `kind` and the key may call it.
fn model_entry(
    app: &AppState,
    principal: &Principal,
    model: &str,
    kind: Kind,
) -> Result<Arc<ApiEntry>, OpenAiError> {
    let shown: String = model.chars().take(64).collect();
    let entry = app
        .catalog
        .get(model)
        .filter(|e| e.spec.kind == kind.as_str())
        .ok_or_else(|| {
            OpenAiError::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "The model {shown:?} does not exist: name a {} API of GET /models.",
                    kind.as_str()
                ),
            )
            .with_param("model")
        })?;
    if !principal.may_call(model) {
        return Err(OpenAiError::new(
            StatusCode::FORBIDDEN,
            "insufficient_permissions",
            format!("This API key may not call the model {shown:?}."),
        )
        .with_param("model"));
    }
    Ok(entry.clone())
}

/// The `model` field of a request body.
fn model_of(body: &mut Map<String, Value>) -> Result<String, OpenAiError> {
    match body.remove("model") {
        Some(Value::String(m)) => Ok(m),
        None => Err(OpenAiError::invalid("model", "model is required.")),
        Some(_) => Err(OpenAiError::invalid("model", "model must be a string.")),
    }
}

/// OpenAI's `metadata` (up to 16 string pairs) is the task's metadata.
fn metadata_of(body: &mut Map<String, Value>) -> Value {
    body.remove("metadata").unwrap_or(Value::Null)
}

/// Starts the call of an OpenAI request (its `POST /call` body, from
/// [`call_body`]), checked and accepted as POST /call's are: the calls
/// service's errors in the OpenAI shape.
async fn start_call(
    app: &AppState,
    principal: &Principal,
    body: Map<String, Value>,
    told: Told,
) -> Result<Started, OpenAiError> {
    let call = calls::validate(&app.catalog, principal, body).map_err(ApiError::from)?;
    let started = calls::start(app, principal, call, told)
        .await
        .map_err(ApiError::from)?;
    Ok(started)
}

/// Taskgate's own fields an OpenAI request may carry beside OpenAI's: a test
/// key's `sandbox` controls and the call's own `webhook`.
#[derive(Default)]
struct Extras {
    sandbox: Option<Value>,
    webhook: Option<Value>,
}

impl Extras {
    fn take(body: &mut Map<String, Value>) -> Self {
        Extras {
            sandbox: body.remove("sandbox"),
            webhook: body.remove("webhook"),
        }
    }
}

/// The `POST /call` body of an OpenAI request: its model's API, the kind's
/// input, the task's metadata, and Taskgate's [`Extras`].
fn call_body(
    model: &str,
    input: Map<String, Value>,
    metadata: Value,
    extras: Extras,
) -> Map<String, Value> {
    let mut call = Map::new();
    call.insert("api".to_owned(), Value::String(model.to_owned()));
    call.insert("input".to_owned(), Value::Object(input));
    call.insert("metadata".to_owned(), metadata);
    if let Some(sandbox) = extras.sandbox {
        call.insert("sandbox".to_owned(), sandbox);
    }
    if let Some(webhook) = extras.webhook {
        call.insert("webhook".to_owned(), webhook);
    }
    call
}

/// The end of a started task; a client that leaves meanwhile cancels it.
async fn until_end(
    app: &Arc<AppState>,
    principal: &Principal,
    started: Started,
) -> Result<TaskRecord, OpenAiError> {
    let mut guard = CancelOnDrop::new(app, principal, started.task.id);
    // Ended (or given up on): nothing is left to cancel.
    let result = finished(app, started).await;
    guard.disarm();
    result
}

/// Waits for the end of a task started with a wait: at most its own timeout
/// and a margin, since the executor ends it by then.
async fn finished(app: &AppState, started: Started) -> Result<TaskRecord, OpenAiError> {
    let id = started.task.id;
    let limit =
        Duration::from_millis(started.task.timeout_ms.max(0) as u64) + Duration::from_secs(30);
    let task = match calls::end_of(app, started, limit)
        .await
        .map_err(ApiError::from)?
    {
        End::Ended(task) => task,
        End::WaitPassed(task) => task.filter(|t| t.status.is_terminal()).ok_or_else(|| {
            let mut e = OpenAiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("Task {id} did not finish in time; read it at /api/v1/tasks/{id}."),
            );
            e.headers = Some(Box::new(task_header(id)));
            e
        })?,
    };
    match task.status {
        TaskStatus::Succeeded => Ok(task),
        _ => Err(OpenAiError::of_task(&task)),
    }
}

/// The task's output object.
fn output_of(task: &TaskRecord) -> Map<String, Value> {
    match task.output.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    }
}

/// A JSON answer with the task's id in its headers.
fn task_answer(task: &TaskRecord, body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.headers_mut().extend(task_header(task.id));
    response.extensions_mut().insert(Raw);
    response
}

/// Seconds since the epoch, as OpenAI's `created`.
fn unix_seconds(task: &TaskRecord) -> i64 {
    task.created_at.unix_ms() / 1000
}

/// GET /models: the chat and embedding APIs this key may call.
async fn models(State(app): State<Arc<AppState>>, Auth(principal, ..): Auth<ApisRead>) -> Response {
    let data: Vec<Value> = app
        .catalog
        .all()
        .iter()
        .filter(|e| is_model(e) && principal.may_call(e.slug.as_str()))
        .map(|e| model_object(e))
        .collect();
    raw_json(json!({"object": "list", "data": data}))
}

/// GET /models/{model}
async fn model(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<ApisRead>,
    Path(model): Path<String>,
) -> Result<Response, OpenAiError> {
    let entry = app
        .catalog
        .get(&model)
        .filter(|e| is_model(e) && principal.may_call(e.slug.as_str()))
        .ok_or_else(|| {
            let shown: String = model.chars().take(64).collect();
            OpenAiError::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!("The model {shown:?} does not exist or this key may not call it."),
            )
            .with_param("model")
        })?;
    Ok(raw_json(model_object(entry)))
}

fn is_model(e: &ApiEntry) -> bool {
    e.spec.kind == Kind::Chat.as_str() || e.spec.kind == Kind::Embedding.as_str()
}

fn model_object(e: &ApiEntry) -> Value {
    json!({
        "id": e.slug,
        "object": "model",
        "created": STARTED.get().copied().unwrap_or_default(),
        "owned_by": e.spec.provider,
    })
}

fn raw_json(body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.extensions_mut().insert(Raw);
    response
}
