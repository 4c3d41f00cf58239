//! Task history: the account's tasks of the mode shown, with the filters of
//! GET /tasks and its cursors; a task's page with its input, output, error,
//! usage, events and attempts; Cancel for a queued or running task.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use taskgate_core::{Micros, Mode, TaskId, TaskStatus, Timestamp};
use taskgate_store::TaskRecord;

use super::pages::{
    Chrome, error_page, not_found, pretty_json, redirect, render, url_encode, when, when_opt,
};
use super::session::{Changes, Session, store_error};
use crate::query::cursor;
use crate::query::{self, QueryPairs};
use crate::service::tasks::{self, Holder, TaskError};
use crate::state::AppState;

const PAGE: &str = "25";

/// The filters of the list, as the page's form sends them.
#[derive(Deserialize, Default)]
pub struct Filters {
    #[serde(default)]
    mode: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    api: String,
    /// `YYYY-MM-DD`, from the start of that day (UTC).
    #[serde(default)]
    from: String,
    /// `YYYY-MM-DD`, to the end of that day (UTC).
    #[serde(default)]
    to: String,
    #[serde(default)]
    order: String,
    #[serde(default)]
    cursor: String,
}

impl Filters {
    fn test(&self) -> bool {
        self.mode == "test"
    }

    /// The same filters as GET /tasks's query.
    fn query(&self) -> QueryPairs {
        let mut pairs = vec![("limit".to_owned(), PAGE.to_owned())];
        let mut add = |k: &str, v: String| {
            if !v.is_empty() {
                pairs.push((k.to_owned(), v));
            }
        };
        add("status", self.status.clone());
        add("api", self.api.clone());
        add("order", self.order.clone());
        add("cursor", self.cursor.clone());
        // GET /tasks's bounds are strict: from a day's first millisecond
        // to its last. A day that does not parse goes through as typed, for
        // GET /tasks's message about it.
        let bound =
            |d: &str, shift_ms: i64| match Timestamp::parse_rfc3339(&format!("{d}T00:00:00Z")) {
                _ if d.is_empty() => String::new(),
                Some(t) => t.plus_ms(shift_ms).rfc3339(),
                None => d.to_owned(),
            };
        add("created_after", bound(&self.from, -1));
        add("created_before", bound(&self.to, 86_400_000));
        QueryPairs(pairs)
    }

    /// This page's link with another cursor.
    fn with_cursor(&self, cursor: &str) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("mode", &self.mode),
            ("status", &self.status),
            ("api", &self.api),
            ("from", &self.from),
            ("to", &self.to),
            ("order", &self.order),
        ] {
            if !v.is_empty() {
                parts.push(format!("{k}={}", url_encode(v)));
            }
        }
        parts.push(format!("cursor={}", url_encode(cursor)));
        format!("/dashboard/tasks?{}", parts.join("&"))
    }
}

pub struct Row {
    pub id: String,
    pub api: String,
    pub status: &'static str,
    pub created: String,
    pub duration: String,
    pub cost: String,
}

impl Row {
    fn new(t: &TaskRecord) -> Self {
        Row {
            id: t.id.to_string(),
            api: t.api.as_str().to_owned(),
            status: t.status.as_str(),
            created: when(t.created_at),
            duration: duration_of(t),
            cost: format!("${}", Micros(t.cost_micros).to_usd_string()),
        }
    }
}

fn duration_of(t: &TaskRecord) -> String {
    t.duration_ms()
        .map(|d| format!("{d} ms"))
        .unwrap_or_else(|| "–".to_owned())
}

#[derive(Template)]
#[template(path = "dashboard/tasks.html")]
struct TasksPage {
    chrome: Chrome,
    filters: Filters,
    statuses: Vec<&'static str>,
    apis: Vec<String>,
    error: Option<String>,
    rows: Vec<Row>,
    next_page: Option<String>,
}

pub async fn list(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(filters): Query<Filters>,
) -> Response {
    let mode = if filters.test() {
        Mode::Test
    } else {
        Mode::Live
    };
    let mut page = TasksPage {
        chrome: session.chrome("/dashboard/tasks", filters.test()),
        statuses: TaskStatus::ALL.iter().map(|s| s.as_str()).collect(),
        apis: app
            .catalog
            .all()
            .iter()
            .map(|e| e.slug.as_str().to_owned())
            .collect(),
        error: None,
        rows: Vec::new(),
        next_page: None,
        filters,
    };
    let query = match query::task_query(session.account.id, mode, None, &page.filters.query()) {
        Ok(Some(q)) => q,
        Ok(None) => return render(&page),
        Err(e) => {
            page.error = Some(e.message.clone());
            return super::pages::render_with(StatusCode::BAD_REQUEST, &page);
        }
    };
    let (tasks, more) = match tasks::list(&app, &query).await {
        Ok(page) => page,
        Err(TaskError::Store(e)) => return store_error(e),
        Err(_) => return not_found(),
    };
    if more {
        page.next_page = tasks.last().map(|t| {
            page.filters
                .with_cursor(&cursor::after_task(query.descending, t.id))
        });
    }
    page.rows = tasks.iter().map(Row::new).collect();
    render(&page)
}

struct EventRow {
    status: &'static str,
    at: String,
    message: String,
}

struct AttemptRow {
    provider: String,
    target: String,
    started: String,
    duration_ms: u64,
    outcome: String,
    http_status: String,
}

#[derive(Template)]
#[template(path = "dashboard/task.html")]
struct TaskPage {
    chrome: Chrome,
    id: String,
    api: String,
    status: &'static str,
    cancellable: bool,
    created: String,
    started: String,
    completed: String,
    duration: String,
    input: String,
    output: Option<String>,
    error: Option<String>,
    units: i64,
    input_tokens: String,
    output_tokens: String,
    /// Shown only where the provider counted them.
    cached_input_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
    cost: String,
    metadata: String,
    idempotency_key: String,
    events: Vec<EventRow>,
    attempts: Vec<AttemptRow>,
}

/// Stored JSON text, indented (as stored if it does not parse).
fn pretty(json: &str) -> String {
    serde_json::from_str::<Value>(json)
        .map(|v| pretty_json(&v))
        .unwrap_or_else(|_| json.to_owned())
}

/// The task `id` of the session's account (either mode); others are 404.
async fn own_task(app: &AppState, session: &Session, id: &str) -> Result<TaskRecord, Response> {
    let id = TaskId::parse(id).map_err(|_| not_found())?;
    match tasks::find_in_account(app, session.account.id, id).await {
        Ok(t) => Ok(t),
        Err(TaskError::Store(e)) => Err(store_error(e)),
        Err(_) => Err(not_found()),
    }
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    let t = match own_task(&app, &session, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let count = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_else(|| "–".to_owned());
    render(&TaskPage {
        chrome: session.chrome("/dashboard/tasks", t.mode == Mode::Test),
        id: t.id.to_string(),
        api: t.api.as_str().to_owned(),
        status: t.status.as_str(),
        cancellable: !t.status.is_terminal(),
        created: when(t.created_at),
        started: when_opt(t.started_at),
        completed: when_opt(t.completed_at),
        duration: duration_of(&t),
        input: pretty(&t.input),
        output: t.output.as_deref().map(pretty),
        error: t.error.as_ref().map(|e| match e.upstream_status {
            Some(s) => format!("{}: {} (upstream status {s})", e.code, e.message),
            None => format!("{}: {}", e.code, e.message),
        }),
        units: t.units,
        input_tokens: count(t.input_tokens),
        output_tokens: count(t.output_tokens),
        cached_input_tokens: t.cached_input_tokens,
        reasoning_tokens: t.reasoning_tokens,
        cost: format!("${}", Micros(t.cost_micros).to_usd_string()),
        metadata: pretty(&t.metadata),
        idempotency_key: t
            .idempotency_key
            .as_ref()
            .map(|k| k.as_str().to_owned())
            .unwrap_or_else(|| "–".to_owned()),
        events: t
            .events
            .0
            .iter()
            .map(|e| EventRow {
                status: e.status.as_str(),
                at: when_precise(e.at),
                message: e.message.clone().unwrap_or_default(),
            })
            .collect(),
        attempts: t
            .attempts
            .0
            .iter()
            .map(|a| AttemptRow {
                provider: a.provider.clone(),
                target: a.target.clone(),
                started: when_precise(a.started_at),
                duration_ms: a.duration_ms,
                outcome: a.outcome.to_string(),
                http_status: a.http_status.map(|s| s.to_string()).unwrap_or_default(),
            })
            .collect(),
    })
}

/// To the millisecond, for the timeline.
fn when_precise(t: Timestamp) -> String {
    let s = t.rfc3339();
    format!("{} {} UTC", &s[..10], s[11..].trim_end_matches('Z'))
}

#[derive(Deserialize)]
pub struct CancelForm {}

pub async fn cancel(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    changes: Changes<CancelForm>,
) -> Response {
    let session = changes.session;
    let t = match own_task(&app, &session, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    match tasks::cancel(&app, Holder::account(t.account_id, t.mode), t.id).await {
        Ok(_) => redirect(&format!("/dashboard/tasks/{}", t.id)),
        Err(TaskError::NotCancellable(status)) => error_page(
            StatusCode::CONFLICT,
            &format!("The task has already {status}; it cannot be cancelled."),
        ),
        Err(TaskError::NotFound(_)) => not_found(),
        Err(TaskError::Store(e)) => store_error(e),
    }
}
