//! One task's execution: its claim, its run under its deadline and
//! cancellation token (a provider's call, or test mode's sandbox), the
//! attempts it made and the check of its output. `finish.rs` writes its end.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;
use taskgate_core::task::error_code;
use taskgate_core::{AttemptOutcome, Attempts, Clock, Mode, SandboxOutcome, TaskId, TaskStatus};
use taskgate_providers::{ExecContext, ExecError, Execution, LocalClock, Piece};
use taskgate_store::{Claim, TaskRecord};
use tokio_util::sync::CancellationToken;

use super::Executor;
use super::fair::Lane;
use crate::catalog::ApiEntry;
use crate::telemetry::spans;

impl Executor {
    pub(super) async fn run(&self, id: TaskId, lane: Lane) {
        // The token is registered before the claim: a cancel that lands right
        // after the claim commits must find it, or the execution would go on
        // (holding a worker) until its result is dropped.
        let token = CancellationToken::new();
        self.running.lock().insert(id, token.clone());
        let now = self.clock.now();
        let lease_until = now.plus_ms(self.lease_ms);
        let claimed = match self.fair.cap(lane) {
            Some(cap) => self
                .store
                .claim_task_capped(
                    id,
                    lane.account,
                    lane.mode,
                    &self.runner,
                    now,
                    lease_until,
                    cap as u32,
                )
                .await
                .map(|claim| match claim {
                    Claim::Claimed(task) => Some(*task),
                    Claim::Gone => None,
                    Claim::AtCap => {
                        // Other instances run the lane's cap: wait for an end.
                        self.fair.block(lane, id);
                        None
                    }
                }),
            None => {
                self.store
                    .claim_task(id, &self.runner, now, lease_until)
                    .await
            }
        };
        let task = match claimed {
            Ok(Some(task)) => task,
            Ok(None) => {
                self.running.lock().remove(&id);
                return; // claimed elsewhere, cancelled while queued, or at the cap
            }
            Err(e) => {
                self.running.lock().remove(&id);
                tracing::warn!(error = %e, task = %id, "cannot claim task");
                return;
            }
        };
        self.execute_claimed(task, token).await;
    }

    /// Runs a task this instance has claimed, under its deadline and token.
    pub(super) async fn execute_claimed(&self, task: TaskRecord, token: CancellationToken) {
        let deadline = Duration::from_millis(task.timeout_ms.max(1) as u64);
        let tracer = self.telemetry.tracer.as_ref();
        let span = tracer.map(|t| self.telemetry.tasks.started(t, &task));
        let mut ctx = ExecContext::with_timeout(deadline).traced(tracer.cloned());
        let entry = self.catalog.get(task.api.as_str());
        if entry.is_some_and(|e| e.spec.kind == "chat") {
            let hub = self.streams.open(task.id);
            ctx = ctx.stream_to(Arc::new(move |piece: Piece| hub.push_piece(piece)));
        }
        let work = async {
            match entry {
                Some(entry) => {
                    tokio::select! {
                        biased;
                        _ = token.cancelled() => None,
                        // The task's deadline is the clock's: a test moves it past.
                        r = self.clock.timeout(deadline, execute_guarded(entry, &task, &mut ctx, &self.clock)) => Some(match r {
                            Some(r) => r.and_then(|x| check_output(entry, x)),
                            None => {
                                ctx.abandon(AttemptOutcome::Timeout);
                                Err(ExecError::new(
                                    error_code::TIMEOUT,
                                    format!("The task did not finish within its timeout of {} ms.", task.timeout_ms),
                                ))
                            }
                        }),
                    }
                }
                None => Some(Err(ExecError::new(
                    error_code::INTERNAL_ERROR,
                    "The API of this task is no longer in the catalog.",
                ))),
            }
        };
        // Traced, the work runs in the task's span: its attempts' spans are
        // the task's children, and its log lines carry the trace.
        let result = match &span {
            Some(span) => spans::task_scope(span).run(work).await,
            None => work.await,
        };
        if let Some(span) = span {
            match &result {
                None => spans::end_task(span, TaskStatus::Cancelled, None),
                Some(Ok(_)) => spans::end_task(span, TaskStatus::Succeeded, None),
                Some(Err(e)) => spans::end_task(span, TaskStatus::Failed, Some(&e.code)),
            }
        }
        if result.is_none() {
            ctx.abandon(AttemptOutcome::Cancelled);
        }
        let attempts = ctx.into_attempts();
        for a in &attempts {
            crate::metrics::record_attempt(a);
        }
        let id = task.id;
        let Some(result) = result else {
            self.running.lock().remove(&id);
            // Cancelled: the cancel already wrote the task's state; the
            // attempts made until then are added to it.
            self.streams.close(task.id);
            let attempts = Attempts(attempts);
            if let Err(e) = self
                .store
                .record_cancelled_attempts(task.id, &attempts)
                .await
            {
                tracing::warn!(error = %e, task = %task.id, "cannot record a cancelled task's attempts");
            }
            return;
        };
        // The task stays among those whose lease is renewed until its end is
        // written: an end the store refuses for a while (the database
        // restarting) is retried, and the task must not meanwhile lapse and
        // be ended `interrupted` by this instance's own sweep, its result
        // thrown away.
        self.finish(task, result, attempts).await;
        self.running.lock().remove(&id);
    }
}

/// [`execute`], with a panic of the provider (a bug) turned into the task's
/// failure: the task ends `failed` with `internal_error` like any other, its
/// lease and stream are released, and the worker goes on.
async fn execute_guarded(
    entry: &ApiEntry,
    task: &TaskRecord,
    ctx: &mut ExecContext,
    clock: &Clock,
) -> Result<Execution, ExecError> {
    match AssertUnwindSafe(execute(entry, task, ctx, clock))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(_) => {
            tracing::error!(task = %task.id, api = %task.api, "the execution of a task panicked");
            Err(ExecError::new(
                error_code::INTERNAL_ERROR,
                "The execution failed unexpectedly.",
            ))
        }
    }
}

/// A live task calls its provider; a test task plays the API's sandbox,
/// its delay on `clock` (a test moves the clock past it).
async fn execute(
    entry: &ApiEntry,
    task: &TaskRecord,
    ctx: &mut ExecContext,
    clock: &Clock,
) -> Result<Execution, ExecError> {
    let input: Value = serde_json::from_str(&task.input).map_err(|_| {
        ExecError::new(
            error_code::INTERNAL_ERROR,
            "The stored input is unreadable.",
        )
    })?;
    if task.mode != Mode::Test {
        // A built-in API runs here: one span of its own, as an upstream
        // attempt has.
        let span = (entry.spec.provider == taskgate_providers::builtin::PROVIDER_NAME)
            .then(|| ctx.tracer().cloned())
            .flatten()
            .map(|t| {
                let operation = taskgate_providers::kinds::operation_name(&entry.spec.kind);
                let mut span = t.in_current(
                    format!("{operation} {}", entry.spec.slug),
                    taskgate_core::trace::SpanKind::Internal,
                );
                span.set("gen_ai.operation.name", operation);
                span.set("gen_ai.provider.name", "taskgate");
                span.set_with("gen_ai.request.model", || entry.spec.slug.as_str());
                span
            });
        let result = entry.provider.execute(&entry.spec.slug, &input, ctx).await;
        if let Some(mut span) = span {
            match &result {
                Ok(x) => taskgate_providers::trace::usage(&mut span, &x.usage),
                Err(e) => {
                    span.set_with("error.type", || e.code.as_str());
                    span.fail(e.code.clone());
                }
            }
            span.end();
        }
        return result;
    }
    // Test mode never leaves the process: the API's sandbox behaviour, shaped
    // by the task's sandbox controls.
    let controls = task.sandbox.clone().unwrap_or_default();
    let timing = LocalClock::start();
    let chat = entry.spec.kind == "chat";
    let streamed = chat && controls.outcome == SandboxOutcome::Succeeded;
    if controls.delay_ms > 0 && !streamed {
        clock.sleep(Duration::from_millis(controls.delay_ms)).await;
    }
    let result = match controls.outcome {
        SandboxOutcome::Failed => Err(ExecError::new(
            controls
                .error_code
                .as_deref()
                .unwrap_or(error_code::UPSTREAM_ERROR),
            "Simulated failure (test mode sandbox).",
        )),
        // A hang: the task's own deadline ends it with `timeout`.
        SandboxOutcome::Timeout => std::future::pending().await,
        SandboxOutcome::Succeeded => entry.provider.sandbox(&entry.spec, &input).await,
    };
    // A simulated chat reply streams like a real one, word by word, spread
    // over the delay when there is one.
    if let Ok(x) = &result
        && let Some(text) = x.output.get("text").and_then(Value::as_str)
        && chat
    {
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        let pause = Duration::from_millis(controls.delay_ms) / words.len().max(1) as u32;
        for (i, word) in words.iter().enumerate() {
            if i > 0 && streamed && !pause.is_zero() {
                clock.sleep(pause).await;
            }
            ctx.delta(word);
        }
        // Then its tool calls, each whole in one fragment (as Gemini sends
        // them), so a test key's stream has the shape a live one has.
        let calls = x.output.get("tool_calls").and_then(Value::as_array);
        for (index, call) in calls.into_iter().flatten().enumerate() {
            let text = |k: &str| call.get(k).and_then(Value::as_str).map(str::to_owned);
            ctx.piece(Piece::ToolCall {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                id: text("id"),
                name: text("name"),
                arguments: call
                    .get("arguments")
                    .map(Value::to_string)
                    .unwrap_or_default(),
            });
        }
        if streamed && !pause.is_zero() {
            clock.sleep(pause).await;
        }
    }
    ctx.push(timing.attempt("sandbox", entry.spec.slug.clone(), result.is_ok()));
    result
}

/// A provider's output must satisfy the API's output schema.
fn check_output(entry: &ApiEntry, x: Execution) -> Result<Execution, ExecError> {
    let violations = entry.output_schema.violations(&x.output);
    match violations.first() {
        None => Ok(x),
        Some(v) => {
            tracing::warn!(api = %entry.spec.slug, path = %v.path, "provider output violates the output schema");
            Err(ExecError::new(
                error_code::INVALID_UPSTREAM_RESPONSE,
                "The provider returned an output that does not match the API's output schema.",
            ))
        }
    }
}
