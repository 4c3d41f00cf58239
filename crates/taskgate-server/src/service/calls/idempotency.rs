//! A call made once per Idempotency-Key: the key is taken before anything
//! runs, the task recorded on it as soon as it exists, the answer at the
//! end (or the key freed if the call was refused), and repeats get the
//! recorded answer.

use std::sync::Arc;

use taskgate_core::{IdempotencyKey, RequestId};
use taskgate_store::{IdempotencyBegin, IdempotencyState, TaskRecord};

use super::{Call, CallError, run_held};
use crate::executor::IDEMPOTENCY_TTL_MS;
use crate::principal::Principal;
use crate::state::AppState;

/// An Idempotency-Key and the request that holds it (the fence of its record).
pub struct Hold {
    pub key: IdempotencyKey,
    pub owner: RequestId,
}

/// The answer a door gives with a task, as it records it for repeats: the
/// status code and the body. The door's own rendering, kept as it is.
pub type Record = fn(&TaskRecord) -> (i64, String);

/// What answers a call made with an Idempotency-Key.
pub enum Answer {
    /// The call ran now: its task, and the answer recorded for it.
    Fresh { task: TaskRecord, recorded: String },
    /// An earlier request with the key made this task and died before
    /// answering: the task, answered now (and recorded) as a repeat.
    Recovered { task: TaskRecord, recorded: String },
    /// The answer recorded for an earlier request with the key.
    Replay { status: i64, recorded: String },
}

/// Runs `call` once per `hold`'s key. `body_hash` tells a repeat from a
/// different request with the same key; `record` is how the door answers
/// with a task. Runs in a task of its own: a client that hangs up (the
/// usual reason to retry) must not leave the key "in progress", which would
/// answer its retries 409 and, once stale, execute again.
pub async fn run_once(
    app: Arc<AppState>,
    principal: Principal,
    call: Call,
    hold: Hold,
    body_hash: String,
    record: Record,
) -> Result<Answer, CallError> {
    let run =
        tokio::spawn(async move { once(&app, &principal, call, &hold, body_hash, record).await });
    run.await.unwrap_or_else(|e| {
        tracing::error!(error = %e, "an idempotent request failed");
        Err(CallError::Stopped)
    })
}

async fn once(
    app: &AppState,
    principal: &Principal,
    call: Call,
    hold: &Hold,
    body_hash: String,
    record: Record,
) -> Result<Answer, CallError> {
    let now = app.clock.now();
    let begin = IdempotencyBegin {
        account_id: principal.account_id,
        mode: principal.mode,
        key: hold.key.clone(),
        owner: hold.owner,
        request_hash: body_hash,
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
        } => Ok(Answer::Replay {
            status: status_code,
            recorded: response,
        }),
        IdempotencyState::InProgress => Err(CallError::IdempotencyInProgress),
        IdempotencyState::Mismatch => Err(CallError::IdempotencyKeyReused),
        IdempotencyState::Orphaned { task_id } => {
            // The request that held the key made its task and died before
            // answering: answer with that task, never make a second one.
            match app.store.get_task_by_id(task_id).await? {
                Some(task) => {
                    let (status, recorded) = record(&task);
                    complete(app, principal, hold, status, &recorded).await?;
                    Ok(Answer::Recovered { task, recorded })
                }
                None => started(app, principal, call, hold, record).await,
            }
        }
        IdempotencyState::Started => started(app, principal, call, hold, record).await,
    }
}

/// Runs a call that holds its key, and records the outcome.
async fn started(
    app: &AppState,
    principal: &Principal,
    call: Call,
    hold: &Hold,
    record: Record,
) -> Result<Answer, CallError> {
    match run_held(app, principal, call, Some(hold)).await {
        Ok(task) => {
            let (status, recorded) = record(&task);
            complete(app, principal, hold, status, &recorded).await?;
            Ok(Answer::Fresh { task, recorded })
        }
        // A refused call executed nothing: the key stays free.
        Err(e) => {
            app.store
                .idempotency_abandon(principal.account_id, principal.mode, &hold.key, hold.owner)
                .await?;
            Err(e)
        }
    }
}

/// Stores `answer` as the key's, if this request still holds it.
async fn complete(
    app: &AppState,
    principal: &Principal,
    hold: &Hold,
    status: i64,
    recorded: &str,
) -> Result<(), CallError> {
    let held = app
        .store
        .idempotency_complete(
            principal.account_id,
            principal.mode,
            &hold.key,
            hold.owner,
            status,
            recorded,
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
