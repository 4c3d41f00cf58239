//! The spans of a call: the request's (kind SERVER, made by the envelope),
//! its task's (`taskgate.task`, from the task's creation to its end, the
//! request's child even when the answer was `202` and the task ends after
//! it) and, below the task's, one per upstream attempt (the providers').
//!
//! A task's span is made when the task is created, in the request's scope,
//! and kept here by task id until a worker runs the task: that is how the
//! trace crosses from the request to the worker. A task this instance did
//! not create (another instance's, or one left queued by a restart) starts
//! a trace of its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::HeaderMap;
use parking_lot::Mutex;
use taskgate_core::trace::{ActiveSpan, Scope, SpanContext, SpanKind, Tracer, now_ns};
use taskgate_core::{AccountId, KeyId, Mode, RequestId, TaskId, TaskStatus};
use taskgate_store::TaskRecord;

/// Tasks whose span waits for a worker; past this many, the spans of tasks
/// created over [`STALE`] ago are dropped (another instance ran them), and
/// if that frees none a new task's span is not kept (its run starts a
/// trace of its own).
const MAX_WAITING: usize = 100_000;
const STALE: Duration = Duration::from_secs(3600);

/// Probes and scrapes: every few seconds from every monitor, they would
/// bury the calls' traces.
pub const UNTRACED_ROUTES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// Who a request was authenticated as, for its span (the auth layer puts
/// it in the response's extensions).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub account_id: AccountId,
    pub key_id: KeyId,
}

/// The caller's trace context, from its `traceparent` and `tracestate`.
pub fn remote_parent(headers: &HeaderMap) -> Option<SpanContext> {
    let parent = headers.get("traceparent")?.to_str().ok()?;
    let state = headers.get("tracestate").and_then(|v| v.to_str().ok());
    SpanContext::from_headers(parent, state)
}

/// The server span of `request`, whose route is `route`.
pub fn request_span(tracer: &Tracer, request: &Request, route: &str) -> ActiveSpan {
    let method = request.method().as_str();
    let mut span = tracer.root(
        format!("{method} {route}"),
        SpanKind::Server,
        remote_parent(request.headers()).as_ref(),
    );
    span.set("http.request.method", method);
    span.set("http.route", route);
    span.set_with("url.path", || request.uri().path());
    span.set("url.scheme", "http");
    if let Some(agent) = request
        .headers()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
    {
        span.set_with("user_agent.original", || agent);
    }
    span
}

/// Ends a request's span with its answer.
pub fn end_request(
    mut span: ActiveSpan,
    status: u16,
    request_id: RequestId,
    caller: Option<Caller>,
) {
    span.set("http.response.status_code", status);
    span.set_with("taskgate.request_id", || request_id.to_string());
    if let Some(c) = caller {
        span.set_with("taskgate.account_id", || c.account_id.to_string());
        span.set_with("taskgate.key_id", || c.key_id.to_string());
    }
    if status >= 500 {
        span.set("error.type", status.to_string());
        span.fail(format!("HTTP {status}"));
    }
    span.end();
}

/// Tasks' spans between their creation and their run.
#[derive(Default)]
pub struct TaskSpans {
    waiting: Mutex<HashMap<TaskId, (Instant, ActiveSpan)>>,
}

impl TaskSpans {
    /// Makes the span of a task being created, under the current span.
    pub fn created(&self, tracer: &Tracer, id: TaskId, api: &str, mode: Mode) {
        let mut span = tracer.in_current("taskgate.task", SpanKind::Internal);
        span.set_with("taskgate.task.id", || id.to_string());
        span.set_with("taskgate.api", || api);
        span.set("taskgate.task.mode", mode.as_str());
        let mut waiting = self.waiting.lock();
        if waiting.len() >= MAX_WAITING {
            waiting.retain(|_, (at, _)| at.elapsed() < STALE);
        }
        if waiting.len() < MAX_WAITING {
            waiting.insert(id, (Instant::now(), span));
        }
    }

    /// The span of a task a worker starts: the one made at its creation, or
    /// a new trace's root.
    pub fn started(&self, tracer: &Tracer, task: &TaskRecord) -> ActiveSpan {
        if let Some((_, span)) = self.waiting.lock().remove(&task.id) {
            return span;
        }
        let mut span = tracer.root("taskgate.task", SpanKind::Internal, None);
        span.started_at(started_ns(task.created_at.unix_ms()));
        span.set_with("taskgate.task.id", || task.id.to_string());
        span.set_with("taskgate.api", || task.api.as_str());
        span.set("taskgate.task.mode", task.mode.as_str());
        span
    }

    /// A task that ended without a worker (cancelled while queued): its
    /// span ends now.
    pub fn ended_unrun(&self, id: TaskId, status: TaskStatus) {
        let span = self.waiting.lock().remove(&id);
        if let Some((_, span)) = span {
            end_task(span, status, None);
        }
    }

    /// A task that will not be run here (refused after its span was made).
    pub fn forget(&self, id: TaskId) {
        self.waiting.lock().remove(&id);
    }
}

/// Ends a task's span with its end.
pub fn end_task(mut span: ActiveSpan, status: TaskStatus, error_code: Option<&str>) {
    span.set("taskgate.task.status", status.as_str());
    if let Some(code) = error_code {
        span.set_with("error.type", || code);
        span.fail(code.to_owned());
    }
    span.end();
}

/// The scope work of a task runs in: its span, no request.
pub fn task_scope(span: &ActiveSpan) -> Scope {
    Scope {
        span: Some(span.context().clone()),
        request_id: None,
    }
}

/// When the span of a task created at `created_ms` (Unix milliseconds)
/// started.
fn started_ns(created_ms: i64) -> u64 {
    u64::try_from(created_ms)
        .map(|ms| ms.saturating_mul(1_000_000))
        .unwrap_or_else(|_| now_ns())
}
