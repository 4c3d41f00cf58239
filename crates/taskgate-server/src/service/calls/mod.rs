//! A call: checked ([`request`]), its spend reserved against the account's
//! limit, its task stored and handed to the executor, and for a sync call
//! the wait for its end; once per Idempotency-Key ([`idempotency`]).

mod chat;
mod idempotency;
mod request;

use std::time::Duration;

use serde_json::Value;
use taskgate_core::{Mode, TaskId, Timestamp};
use taskgate_store::{StoreError, TaskRecord};
use tokio::sync::oneshot;

pub use idempotency::{Answer, Hold, Record, run_once};
pub use request::{Call, check_metadata, check_sandbox, validate};

use crate::executor::{Execution, Told};
use crate::principal::Principal;
use crate::state::AppState;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The key may not call this API (its slug, shortened).
    #[error("this key may not call the API {0:?}")]
    NotPermitted(String),
    /// A field of the call breaks its rule: `param` names it
    /// (`timeout_ms`, `metadata.KEY`, `sandbox.delay_ms`, …).
    #[error("{message}")]
    InvalidField { param: String, message: String },
    #[error("there is no API {0:?}")]
    UnknownApi(String),
    /// The input is over the API's size or breaks its schema: every
    /// violation, the first named by `param`.
    #[error("{message}")]
    InvalidInput {
        param: String,
        message: String,
        violations: Vec<Violation>,
    },
    /// An option the operator does not pass on to the API.
    #[error("{message}")]
    OptionNotAllowed { param: String, message: String },
    /// Something in a chat input the API's provider cannot carry.
    #[error("{message}")]
    Unsupported { param: String, message: String },
    /// The month's spend and reservations reached the account's limit, or
    /// this call would pass it.
    #[error("the monthly spend limit of {limit_micros} micro-USD is reached")]
    SpendLimitReached { limit_micros: i64 },
    /// A request with the same Idempotency-Key is still being answered.
    #[error("a request with this Idempotency-Key is in progress")]
    IdempotencyInProgress,
    /// The Idempotency-Key was used with another body.
    #[error("this Idempotency-Key was used with another request")]
    IdempotencyKeyReused,
    /// The task was lost with a database crash before anyone was told of it.
    #[error("the task was lost before it was durable")]
    TaskLost,
    /// The call's own task stopped unexpectedly (a bug: it is logged).
    #[error("the call stopped unexpectedly")]
    Stopped,
    /// As many token counts as there are cores run already.
    #[error("token counting is busy")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CallError {
    fn field(param: &str, message: impl Into<String>) -> Self {
        CallError::InvalidField {
            param: param.to_owned(),
            message: message.into(),
        }
    }
}

/// One way an input breaks its API's schema: where (a JSON pointer) and how.
#[derive(Debug, Clone)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

/// A task made for a call, and for a caller that waits the wait for its end.
pub struct Started {
    /// The task as stored when it was accepted.
    pub task: TaskRecord,
    /// Resolves with the finished task (only when asked for at the start).
    pub done: Option<oneshot::Receiver<TaskRecord>>,
    /// The task's execution, when it started at once and the caller awaits
    /// its end (told of at the end), to be run in the caller's own task
    /// ([`Execution::alongside`]); dropped, it runs on its own.
    pub run: Option<Execution>,
}

/// The input tokens a chat call would send, estimated without any
/// provider and without a task (nothing is stored, spent or reserved): the
/// call is checked as a call is, and must be of a `chat` API.
pub async fn count_input_tokens(call: Call) -> Result<u64, CallError> {
    if call.entry.spec.kind != taskgate_providers::kinds::Kind::Chat.as_str() {
        return Err(CallError::field(
            "api",
            format!("The API {} is not a chat API.", call.entry.spec.slug),
        ));
    }
    // The checks parsed it already; it is counted off the runtime's
    // threads, at most as many at once as there are cores (no task, no
    // spend: nothing else bounds it).
    static COUNTING: std::sync::LazyLock<std::sync::Arc<tokio::sync::Semaphore>> =
        std::sync::LazyLock::new(|| {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            std::sync::Arc::new(tokio::sync::Semaphore::new(cores))
        });
    let permit = COUNTING
        .clone()
        .try_acquire_owned()
        .map_err(|_| CallError::Busy)?;
    let input = call.input;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        taskgate_providers::chat::ChatInput::parse(&input)
            .map(|chat| taskgate_providers::chat::estimate_input_tokens(&chat))
            .unwrap_or(0)
    })
    .await
    .map_err(|_| CallError::Stopped)
}

/// Runs a call for `principal`: answered with its task at once when it is
/// async, else at its end (or, past the sync wait, as it stands then).
pub async fn run(
    app: &AppState,
    principal: &Principal,
    call: Call,
) -> Result<TaskRecord, CallError> {
    run_held(app, principal, call, None).await
}

async fn run_held(
    app: &AppState,
    principal: &Principal,
    call: Call,
    hold: Option<&Hold>,
) -> Result<TaskRecord, CallError> {
    let wait = !call.asynchronous;
    let told = if wait { Told::AtEnd } else { Told::AtOnce };
    // Boxed: its future (about 2 KB) would otherwise size this one, which
    // lives for the whole sync wait.
    let Started {
        task: stored,
        done,
        run,
    } = Box::pin(start_held(app, principal, call, hold, wait, told)).await?;
    let Some(done) = done else {
        return Ok(stored);
    };
    let id = stored.id;
    let limit = Duration::from_millis(app.config.sync_wait_ms);
    match tokio::time::timeout(limit, alongside(run, done)).await {
        Ok(Ok(finished)) => Ok(finished),
        _ => {
            app.executor.forget(id);
            // Told of now: made durable first (it was stored unflushed).
            match app.store.settle_task(id).await {
                Ok(Some(current)) => Ok(current),
                // Lost with a database crash before it was durable: nobody
                // was told of it.
                Ok(None) => Err(CallError::TaskLost),
                // The task exists from here on: answer with it even if the
                // store cannot be reached now, so an Idempotency-Key is not
                // released.
                Err(e) => {
                    tracing::warn!(error = %e, task = %id, "cannot read a task past its sync wait");
                    Ok(stored)
                }
            }
        }
    }
}

/// Starts a call whose end the caller awaits itself on [`Started::done`]
/// (the OpenAI endpoint's answers, streamed or not); `told` says when the
/// caller tells of the task (a stream does at once).
pub async fn start(
    app: &AppState,
    principal: &Principal,
    call: Call,
    told: Told,
) -> Result<Started, CallError> {
    start_held(app, principal, call, None, true, told).await
}

/// What waiting for a task's end came to.
pub enum End {
    /// The task's end, as the executor told it.
    Ended(TaskRecord),
    /// The wait passed (or there was none): the task as it stands, made
    /// durable first since it is told of now; `None` if it was lost with a
    /// database crash before it was durable.
    WaitPassed(Option<TaskRecord>),
}

/// The end of a task [`start`]ed with a wait, awaited at most `limit`.
pub async fn end_of(app: &AppState, started: Started, limit: Duration) -> Result<End, CallError> {
    let Started { task, done, run } = started;
    let id = task.id;
    let ended = match done {
        Some(done) => tokio::time::timeout(limit, alongside(run, done))
            .await
            .ok()
            .and_then(Result::ok),
        None => None,
    };
    app.executor.forget(id);
    Ok(match ended {
        Some(t) => End::Ended(t),
        None => End::WaitPassed(app.store.settle_task(id).await?),
    })
}

/// Reserves the call's spend, stores its task and hands it to the executor.
/// With `wait`, the task's end can be awaited on [`Started::done`].
async fn start_held(
    app: &AppState,
    principal: &Principal,
    request: Call,
    hold: Option<&Hold>,
    wait: bool,
    told: Told,
) -> Result<Started, CallError> {
    let now = app.clock.now();
    let webhook = match &request.webhook {
        Some(w) => Some(
            crate::service::webhooks::check_url(&app.config.webhooks, &w.url)
                .await
                .map_err(|e| CallError::field("webhook.url", e.to_string()))?,
        ),
        None => None,
    };
    let reserved = reserve_spend(app, principal, &request, now).await?;
    let task = TaskRecord {
        input: taskgate_core::json_text(&request.input),
        metadata: taskgate_core::json_text(&Value::Object(request.metadata)),
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
    let id = task.id;
    // The call's own webhook, stored before its task: the commits of the
    // task's changes find it.
    if let (Some(url), Some(w)) = (webhook, &request.webhook)
        && let Err(e) = app
            .store
            .attach_task_webhook(
                id,
                principal.account_id,
                principal.mode,
                &url,
                w.events,
                now,
            )
            .await
    {
        release().await;
        return Err(e.into());
    }
    // The task's span, under the request's, before a worker can start it.
    if let Some(tracer) = &app.telemetry.tracer {
        app.telemetry
            .tasks
            .created(tracer, id, task.api.as_str(), task.mode);
    }
    // The wait is registered first: a fast task may finish before enqueue
    // returns.
    let done = wait.then(|| app.executor.wait(id));
    let (stored, mut run) = match app
        .executor
        .enqueue_here(task, principal.max_running_tasks, told)
        .await
    {
        Ok(started) => started,
        Err(e) => {
            drop(done);
            app.executor.forget(id);
            app.telemetry.tasks.forget(id);
            release().await;
            return Err(e.into());
        }
    };
    // Nobody waits for its end here (an async call; a stream, told of at
    // once, reads its output as it comes), or it runs while the key is
    // written.
    if (!wait || told == Told::AtOnce || hold.is_some())
        && let Some(run) = run.take()
    {
        run.detach();
    }
    attach(app, principal, hold, id).await;
    Ok(Started {
        task: stored,
        done,
        run,
    })
}

/// Awaits `done` while running the task's execution `run`, if the caller
/// holds it; left unfinished, the execution goes on on its own.
async fn alongside<T>(run: Option<Execution>, done: impl Future<Output = T>) -> T {
    match run {
        Some(run) => run.alongside(done).await,
        None => done.await,
    }
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

/// Reserves a live call's estimated cost against the account's monthly
/// spend limit, in one atomic step with the check: refused if the month's
/// spend and reservations have reached the limit or this call would pass it.
/// The amount reserved (0 without a limit, and in test mode).
async fn reserve_spend(
    app: &AppState,
    principal: &Principal,
    request: &Call,
    now: Timestamp,
) -> Result<i64, CallError> {
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
        return Err(CallError::SpendLimitReached {
            limit_micros: limit,
        });
    }
    Ok(estimate)
}
