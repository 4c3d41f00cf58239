//! POST /call (create and execute a task) and GET /call/{id}.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use taskgate_core::task::error_code;
use taskgate_core::{
    IdempotencyKey, Mode, RequestId, SandboxControls, SandboxOutcome, TaskId, Timestamp,
};
use taskgate_store::{IdempotencyBegin, IdempotencyState, TaskRecord};
use tokio::sync::oneshot;

use crate::auth::{Auth, Principal, TasksRead, TasksWrite};
use crate::body::JsonObject;
use crate::catalog::ApiEntry;
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::executor::Told;
use crate::state::AppState;
use crate::views::TaskView;

const FIELDS: [&str; 6] = ["api", "input", "mode", "timeout_ms", "metadata", "sandbox"];
pub(crate) const METADATA_MAX_KEYS: usize = 16;
pub(crate) const METADATA_MAX_KEY_CHARS: usize = 64;
pub(crate) const METADATA_MAX_VALUE_CHARS: usize = 512;
pub(crate) const SANDBOX_MAX_DELAY_MS: u64 = 600_000;
const IDEMPOTENCY_TTL_MS: i64 = 86_400_000;

/// A validated POST /call.
struct CallRequest {
    entry: Arc<ApiEntry>,
    input: Value,
    /// The size of `input` as JSON.
    input_bytes: usize,
    asynchronous: bool,
    timeout_ms: u64,
    metadata: Map<String, Value>,
    sandbox: Option<SandboxControls>,
}

pub async fn create(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: JsonObject,
) -> ApiResult<Response> {
    let idempotency_key = idempotency_key(&headers)?;
    let request = parse(&app, &principal, body.map)?;

    let Some(key) = idempotency_key else {
        return execute(&app, &principal, request, None).await;
    };
    // Taken, answered and recorded in a task of its own: a client that hangs
    // up (the usual reason to retry) must not leave the key "in progress",
    // which would answer its retries 409 and, once stale, execute again.
    let hash = request_hash(&body.raw);
    let hold = Hold {
        key,
        owner: request_id,
    };
    tokio::spawn(idempotent(app.clone(), principal, request, hold, hash))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "an idempotent request failed");
            ApiError::internal()
        })?
}

/// A call made for `principal` from elsewhere than POST /call (the
/// dashboard's Try it): the body as POST /call takes it, checked and executed
/// the same way. The task as the call's answer shows it.
pub(crate) async fn call_for(
    app: &AppState,
    principal: &Principal,
    body: Map<String, Value>,
) -> ApiResult<Value> {
    let request = parse(app, principal, body)?;
    let response = execute(app, principal, request, None).await?;
    let (_, stored) = recorded(&response);
    serde_json::from_str(&stored).map_err(|_| ApiError::internal())
}

/// An Idempotency-Key and the request that holds it (the fence of its record).
struct Hold {
    key: IdempotencyKey,
    owner: RequestId,
}

/// Executes a request once per Idempotency-Key: records its task as soon as
/// it exists and its answer at the end (or frees the key if it was refused),
/// and replays it to repeats.
async fn idempotent(
    app: Arc<AppState>,
    principal: Principal,
    request: CallRequest,
    hold: Hold,
    request_hash: String,
) -> ApiResult<Response> {
    let now = Timestamp::now();
    let begin = IdempotencyBegin {
        account_id: principal.account_id,
        mode: principal.mode,
        key: hold.key.clone(),
        owner: hold.owner,
        request_hash,
        now,
        expired_before: now.minus_ms(IDEMPOTENCY_TTL_MS),
        // A request can wait for its task at most the sync wait; well past
        // that, an unanswered record belonged to a process that died.
        stale_before: now.minus_ms(app.config.sync_wait_ms as i64 + 60_000),
    };
    match app.store.idempotency_begin(&begin).await? {
        IdempotencyState::Done {
            status_code,
            response,
        } => Ok(replay(status_code, response)),
        IdempotencyState::InProgress => Err(ApiError::conflict(
            "idempotency_in_progress",
            "A request with this Idempotency-Key is still being answered. Retry later.",
        )),
        IdempotencyState::Mismatch => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request body.",
        )),
        IdempotencyState::Orphaned { task_id } => {
            // The request that held the key made its task and died before
            // answering: answer with that task, never make a second one.
            match app.store.get_task_by_id(task_id).await? {
                Some(task) => {
                    let mut response = answer(&task)?;
                    complete(&app, &principal, &hold, recorded(&response)).await?;
                    response
                        .headers_mut()
                        .insert("idempotent-replayed", HeaderValue::from_static("true"));
                    Ok(response)
                }
                None => started(&app, &principal, request, &hold).await,
            }
        }
        IdempotencyState::Started => started(&app, &principal, request, &hold).await,
    }
}

/// Executes a request that holds its key, and records the outcome.
async fn started(
    app: &AppState,
    principal: &Principal,
    request: CallRequest,
    hold: &Hold,
) -> ApiResult<Response> {
    let result = execute(app, principal, request, Some(hold)).await;
    // The answer is read before any await: a response is not shared across threads.
    match result.as_ref().map(recorded) {
        Ok(answer) => complete(app, principal, hold, answer).await?,
        // A refused request executed nothing: the key stays free.
        Err(_) => {
            app.store
                .idempotency_abandon(principal.account_id, principal.mode, &hold.key, hold.owner)
                .await?
        }
    }
    result
}

/// Stores `response` as the key's answer, if this request still holds it.
async fn complete(
    app: &AppState,
    principal: &Principal,
    hold: &Hold,
    (status, stored): (i64, String),
) -> ApiResult<()> {
    let held = app
        .store
        .idempotency_complete(
            principal.account_id,
            principal.mode,
            &hold.key,
            hold.owner,
            status,
            &stored,
        )
        .await?;
    if !held {
        tracing::warn!(
            key = %hold.key,
            "an Idempotency-Key was taken over while its request ran; its answer is not recorded"
        );
    }
    Ok(())
}

/// The status and `data` of an answer, as an idempotent replay gives them.
fn recorded(response: &Response) -> (i64, String) {
    let stored = response
        .extensions()
        .get::<StoredAnswer>()
        .map(|s| s.0.clone())
        .unwrap_or_default();
    (response.status().as_u16() as i64, stored)
}

/// The `data` of an answer, kept for idempotent replays.
#[derive(Clone)]
struct StoredAnswer(String);

fn replay(status_code: i64, stored: String) -> Response {
    let status = StatusCode::from_u16(status_code as u16).unwrap_or(StatusCode::OK);
    let location = serde_json::from_str::<Value>(&stored)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(location));
    let mut response = Data {
        status,
        json: stored.into(),
    }
    .into_response();
    let h = response.headers_mut();
    h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    if let (StatusCode::ACCEPTED, Some(loc)) = (
        status,
        location.and_then(|l| HeaderValue::from_str(&l).ok()),
    ) {
        h.insert("location", loc);
    }
    response
}

fn location(id: impl std::fmt::Display) -> String {
    format!("/api/v1/call/{id}")
}

fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<IdempotencyKey>> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    // A value that is not visible ASCII is refused like an empty one.
    let s = v.to_str().unwrap_or_default().trim();
    IdempotencyKey::parse(s)
        .map(Some)
        .map_err(|message| ApiError::invalid_parameter("Idempotency-Key", message))
}

/// Same body, same hash: the body is canonicalized (keys sorted, no spacing)
/// so that formatting differences do not count as a different request.
fn request_hash(raw: &[u8]) -> String {
    let canonical = serde_json::from_slice::<Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_default();
    taskgate_core::key::hash_key(&canonical)
}

/// Checks a POST /call body in the contract's order: permissions on the API
/// (403) before the request's own errors (400/404).
fn parse(
    app: &AppState,
    principal: &Principal,
    mut body: Map<String, Value>,
) -> ApiResult<CallRequest> {
    if let Some(Value::String(slug)) = body.get("api")
        && !principal.may_call(slug)
    {
        return Err(ApiError::forbidden(
            "insufficient_permissions",
            format!("This API key may not call the API {:?}.", truncate(slug)),
        ));
    }
    if let Some(unknown) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid_field(
            unknown,
            format!(
                "Unknown field {:?}. Known fields: {}.",
                truncate(unknown),
                FIELDS.join(", ")
            ),
        ));
    }
    let slug = match body.remove("api") {
        Some(Value::String(s)) => s,
        None => return Err(ApiError::invalid_field("api", "api is required.")),
        Some(_) => return Err(ApiError::invalid_field("api", "api must be a string.")),
    };
    let entry = app
        .catalog
        .get(&slug)
        .cloned()
        .ok_or_else(|| ApiError::api_not_found(&slug))?;
    let input = body
        .remove("input")
        .ok_or_else(|| ApiError::invalid_field("input", "input is required."))?;
    let asynchronous = match body.remove("mode") {
        None => false,
        Some(Value::String(m)) if m == "sync" => false,
        Some(Value::String(m)) if m == "async" => true,
        Some(_) => {
            return Err(ApiError::invalid_field(
                "mode",
                "mode must be \"sync\" or \"async\".",
            ));
        }
    };
    let max_timeout = entry.spec.timeout_ms;
    let timeout_ms = match body.remove("timeout_ms") {
        None => max_timeout,
        Some(v) => whole(&v)
            .filter(|t| (1..=max_timeout).contains(t))
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "timeout_ms",
                    format!(
                        "timeout_ms must be an integer from 1 to {max_timeout} (this API's limit)."
                    ),
                )
            })?,
    };
    let metadata = match body.remove("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => check_metadata(m)?,
        Some(_) => {
            return Err(ApiError::invalid_field(
                "metadata",
                "metadata must be an object of strings.",
            ));
        }
    };
    let sandbox = match body.remove("sandbox") {
        None => None,
        Some(_) if principal.mode != Mode::Test => {
            return Err(ApiError::invalid_field(
                "sandbox",
                "sandbox is only accepted with a test key (tg_test_…).",
            ));
        }
        Some(v) => Some(check_sandbox(v)?),
    };
    let input_bytes = check_input(&entry, &input)?;
    check_options(&entry, &input)?;
    Ok(CallRequest {
        entry,
        input,
        input_bytes,
        asynchronous,
        timeout_ms,
        metadata,
        sandbox,
    })
}

/// A JSON number that is a whole number (`5`, `5.0`, `5e3`: JSON Schema's
/// `integer`), as a `u64`.
fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        (f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f)).then_some(f as u64)
    })
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

pub(crate) fn check_metadata(m: Map<String, Value>) -> ApiResult<Map<String, Value>> {
    if m.len() > METADATA_MAX_KEYS {
        return Err(ApiError::invalid_field(
            "metadata",
            format!("metadata may hold at most {METADATA_MAX_KEYS} keys."),
        ));
    }
    for (k, v) in &m {
        let param = format!("metadata.{}", truncate(k));
        if k.is_empty() || k.chars().count() > METADATA_MAX_KEY_CHARS {
            return Err(ApiError::invalid_field(
                &param,
                format!("metadata keys must be 1 to {METADATA_MAX_KEY_CHARS} characters."),
            ));
        }
        match v {
            Value::String(s) if s.chars().count() <= METADATA_MAX_VALUE_CHARS => {}
            Value::String(_) => {
                return Err(ApiError::invalid_field(
                    &param,
                    format!(
                        "metadata values may be at most {METADATA_MAX_VALUE_CHARS} characters."
                    ),
                ));
            }
            _ => {
                return Err(ApiError::invalid_field(
                    &param,
                    "metadata values must be strings.",
                ));
            }
        }
    }
    Ok(m)
}

pub(crate) fn check_sandbox(v: Value) -> ApiResult<SandboxControls> {
    let Value::Object(mut m) = v else {
        return Err(ApiError::invalid_field(
            "sandbox",
            "sandbox must be an object.",
        ));
    };
    let known = ["delay_ms", "outcome", "error_code"];
    if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::invalid_field(
            &format!("sandbox.{}", truncate(k)),
            "Unknown sandbox field. Known: delay_ms, outcome, error_code.",
        ));
    }
    let delay_ms = match m.remove("delay_ms") {
        None => 0,
        Some(v) => whole(&v)
            .filter(|d| *d <= SANDBOX_MAX_DELAY_MS)
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "sandbox.delay_ms",
                    "sandbox.delay_ms must be an integer from 0 to 600000.",
                )
            })?,
    };
    let outcome = match m.remove("outcome") {
        None => Ok(SandboxOutcome::default()),
        Some(Value::String(s)) => s.parse::<SandboxOutcome>(),
        Some(_) => Err(String::new()),
    }
    .map_err(|_| {
        let [a, b, c] = SandboxOutcome::ALL.map(SandboxOutcome::as_str);
        ApiError::invalid_field(
            "sandbox.outcome",
            format!("sandbox.outcome must be \"{a}\", \"{b}\" or \"{c}\"."),
        )
    })?;
    let failed = outcome == SandboxOutcome::Failed;
    let error_code = match m.remove("error_code") {
        None => None,
        Some(Value::String(c)) if failed && error_code::SIMULATABLE.contains(&c.as_str()) => {
            Some(c)
        }
        Some(Value::String(_)) if failed => {
            return Err(ApiError::invalid_field(
                "sandbox.error_code",
                format!(
                    "sandbox.error_code must be one of: {}.",
                    error_code::SIMULATABLE.join(", ")
                ),
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid_field(
                "sandbox.error_code",
                "sandbox.error_code is a string, and only goes with outcome \"failed\".",
            ));
        }
    };
    Ok(SandboxControls {
        delay_ms,
        outcome,
        error_code,
    })
}

/// The keys of `input.options` against the API's `allowed_options`: an
/// option that may change what the provider charges (`service_tier`, …) is
/// not passed on unless the operator allows it.
fn check_options(entry: &ApiEntry, input: &Value) -> ApiResult<()> {
    let Some(Value::Object(options)) = input.get("options") else {
        return Ok(());
    };
    let Some(refused) = options.keys().find(|k| !entry.allowed_options.allows(k)) else {
        return Ok(());
    };
    let allowed = match &entry.allowed_options {
        crate::catalog::AllowedOptions::Only(keys) if keys.is_empty() => "none".to_owned(),
        crate::catalog::AllowedOptions::Only(keys) => keys.join(", "),
        crate::catalog::AllowedOptions::Any => String::new(),
    };
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "unsupported_parameter",
        format!(
            "The option {:?} is not passed on to the API {}: it may change what the provider charges. \
             Options this API takes: {allowed}. (An operator can allow more with catalog.apis.{}.allowed_options.)",
            truncate(refused),
            entry.spec.slug,
            entry.spec.slug,
        ),
    )
    .with_param(format!("input.options.{}", truncate(refused))))
}

/// `input` against the API's size limit and JSON Schema: every violation is
/// reported.
/// The input's size as JSON, when it is valid.
fn check_input(entry: &ApiEntry, input: &Value) -> ApiResult<usize> {
    let max = entry.spec.max_input_bytes;
    let size = serde_json::to_vec(input)
        .map(|v| v.len() as u64)
        .unwrap_or(u64::MAX);
    if size > max {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("input is {size} bytes; this API accepts at most {max}."),
        )
        .with_param("input"));
    }
    let violations = entry.input_schema.violations(input);
    let Some(first) = violations.first() else {
        return Ok(size as usize);
    };
    let param = pointer_to_param(&first.path);
    let details: Vec<Value> = violations
        .iter()
        .map(|v| json!({ "path": v.path, "message": v.message }))
        .collect();
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_input",
        format!("{param}: {}", first.message),
    )
    .with_param(param)
    .with_details(Value::Array(details)))
}

/// `/items/0/text` → `input.items[0].text`
fn pointer_to_param(pointer: &str) -> String {
    let mut out = String::from("input");
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
}

/// A task made for a request, and for a sync caller the wait for its end.
pub(crate) struct Started {
    /// The task as stored when it was accepted.
    pub task: TaskRecord,
    /// Resolves with the finished task (only when asked for at the start).
    pub done: Option<oneshot::Receiver<TaskRecord>>,
}

/// A call made for `principal` from elsewhere than POST /call (the
/// OpenAI-compatible endpoint): the body as POST /call takes it, checked and
/// accepted the same way (limits, spend, test mode, storage). The task's end
/// can be awaited on [`Started::done`]; `told` says when the caller tells of
/// the task (a stream does at once).
pub(crate) async fn start_for(
    app: &AppState,
    principal: &Principal,
    body: Map<String, Value>,
    told: Told,
) -> ApiResult<Started> {
    let request = parse(app, principal, body)?;
    start(app, principal, request, None, true, told).await
}

async fn execute(
    app: &AppState,
    principal: &Principal,
    request: CallRequest,
    hold: Option<&Hold>,
) -> ApiResult<Response> {
    let wait = !request.asynchronous;
    let told = if wait { Told::AtEnd } else { Told::AtOnce };
    let Started { task: stored, done } = start(app, principal, request, hold, wait, told).await?;
    let Some(done) = done else {
        return answer(&stored);
    };
    let id = stored.id;
    match tokio::time::timeout(Duration::from_millis(app.config.sync_wait_ms), done).await {
        Ok(Ok(finished)) => answer(&finished),
        _ => {
            app.executor.forget(id);
            // Told of now: made durable first (it was stored unflushed).
            match app.store.settle_task(id).await {
                Ok(Some(current)) => answer(&current),
                // Lost with a database crash before it was durable: nobody
                // was told of it.
                Ok(None) => Err(ApiError::storage_unavailable()),
                // The task exists from here on: answer with it even if the
                // store cannot be reached now, so an Idempotency-Key is not
                // released.
                Err(e) => {
                    tracing::warn!(error = %e, task = %id, "cannot read a task past its sync wait");
                    answer(&stored)
                }
            }
        }
    }
}

/// Reserves the call's spend, stores its task and hands it to the executor.
/// With `wait`, the task's end can be awaited on [`Started::done`].
async fn start(
    app: &AppState,
    principal: &Principal,
    request: CallRequest,
    hold: Option<&Hold>,
    wait: bool,
    told: Told,
) -> ApiResult<Started> {
    let now = Timestamp::now();
    let reserved = reserve_spend(app, principal, &request, now).await?;
    let task = TaskRecord {
        input: request.input.to_string(),
        metadata: Value::Object(request.metadata).to_string(),
        idempotency_key: hold.map(|h| h.key.clone()),
        timeout_ms: request.timeout_ms as i64,
        sandbox: request.sandbox,
        reserved_micros: reserved,
        ..TaskRecord::queued(
            TaskId::at(now),
            principal.account_id,
            principal.mode,
            request.entry.slug.clone(),
            principal.key_id,
            now,
        )
    };
    let release = async || {
        if reserved > 0
            && let Err(e) = app
                .store
                .release_spend(principal.account_id, &now.month_key(), reserved)
                .await
        {
            tracing::error!(error = %e, "cannot give back a refused call's reservation");
        }
    };
    // The wait is registered first: a fast task may finish before enqueue
    // returns.
    let id = task.id;
    let done = wait.then(|| app.executor.wait(id));
    let stored = match app
        .executor
        .enqueue(task, principal.max_running_tasks, told)
        .await
    {
        Ok(stored) => stored,
        Err(e) => {
            drop(done);
            app.executor.forget(id);
            release().await;
            return Err(e.into());
        }
    };
    attach(app, principal, hold, id).await;
    Ok(Started { task: stored, done })
}

/// Records the task of an idempotent request on its key as soon as the task
/// exists. A failure is only logged: the answer is recorded at the end too.
async fn attach(app: &AppState, principal: &Principal, hold: Option<&Hold>, task_id: TaskId) {
    let Some(hold) = hold else { return };
    match app
        .store
        .idempotency_attach(
            principal.account_id,
            principal.mode,
            &hold.key,
            hold.owner,
            task_id,
        )
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(key = %hold.key, "an Idempotency-Key was taken over before its task was recorded")
        }
        Err(e) => tracing::warn!(error = %e, "cannot record the task of an Idempotency-Key"),
    }
}

/// 200 with a finished task, else 202 with `Location`.
fn answer(task: &TaskRecord) -> ApiResult<Response> {
    let finished = task.status.is_terminal();
    let status = if finished {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let data = Data::with_status(status, &TaskView::new(task, true))?;
    let stored = StoredAnswer(String::from_utf8_lossy(&data.json).into_owned());
    let mut response = data.into_response();
    if !finished && let Ok(v) = HeaderValue::from_str(&location(task.id)) {
        response.headers_mut().insert("location", v);
    }
    response.extensions_mut().insert(stored);
    Ok(response)
}

/// Reserves a live call's estimated cost against the account's monthly
/// spend limit, in one atomic step with the check: 403 if the month's spend
/// and reservations have reached the limit or this call would pass it. The
/// amount reserved (0 without a limit, and in test mode).
async fn reserve_spend(
    app: &AppState,
    principal: &Principal,
    request: &CallRequest,
    now: Timestamp,
) -> ApiResult<i64> {
    let (Mode::Live, Some(limit)) = (principal.mode, principal.monthly_spend_limit_micros) else {
        return Ok(0);
    };
    let estimate = request
        .entry
        .estimate(&request.input, request.input_bytes)
        .0;
    let reserved = app
        .store
        .reserve_spend(principal.account_id, &now.month_key(), estimate, limit)
        .await?;
    if !reserved {
        return Err(ApiError::forbidden(
            "usage_limit_exceeded",
            format!(
                "This account has reached its monthly spend limit of {} USD.",
                crate::views::usd_limit(limit)
            ),
        ));
    }
    Ok(estimate)
}

pub async fn status(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksRead>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let task = find(&app, &principal, &id).await?;
    Data::ok(&TaskView::new(&task, true))
}

/// The caller's task, or 404 for anything else (not an id, unknown, another
/// account's, the other mode's, or an API a restricted key may not call).
pub async fn find(app: &AppState, principal: &Principal, id: &str) -> ApiResult<TaskRecord> {
    let task_id = TaskId::parse(id).map_err(|_| ApiError::task_not_found(id))?;
    app.store
        .get_task(principal.account_id, principal.mode, task_id)
        .await?
        .filter(|t| principal.may_call(t.api.as_str()))
        .ok_or_else(|| ApiError::task_not_found(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_params() {
        assert_eq!(pointer_to_param(""), "input");
        assert_eq!(pointer_to_param("/text"), "input.text");
        assert_eq!(pointer_to_param("/items/0/a~1b"), "input.items[0].a/b");
    }

    #[test]
    fn equal_bodies_hash_equal() {
        assert_eq!(
            request_hash(br#"{"a":1,"b":2}"#),
            request_hash(b"{ \"b\": 2, \"a\": 1 }")
        );
        assert_ne!(request_hash(br#"{"a":1}"#), request_hash(br#"{"a":2}"#));
    }
}
