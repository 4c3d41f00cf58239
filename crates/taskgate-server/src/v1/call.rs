//! POST /call (create and execute a task) and GET /call/{id}: the body and
//! headers read, the calls service asked, the task answered (200 at its
//! end, 202 with `Location` before), and an Idempotency-Key's repeats
//! answered with what was recorded.

use std::sync::Arc;

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use taskgate_core::{IdempotencyKey, RequestId};
use taskgate_store::TaskRecord;

use crate::auth::{Auth, TasksRead, TasksWrite};
use crate::body::JsonObject;
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::service::calls::{self, Answer, Hold};
use crate::state::AppState;
use crate::v1::tasks::find;
use crate::views::TaskView;

pub async fn create(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: JsonObject,
) -> ApiResult<Response> {
    let idempotency_key = idempotency_key(&headers)?;
    let call = calls::validate(&app.catalog, &principal, body.map)?;
    let Some(key) = idempotency_key else {
        let task = calls::run(&app, &principal, call).await?;
        return answer(&task);
    };
    let hold = Hold {
        key,
        owner: request_id,
    };
    let hash = request_hash(&body.raw);
    let answer = calls::run_once(app.clone(), principal, call, hold, hash, recorded).await?;
    Ok(match answer {
        Answer::Fresh { task, recorded } => respond(&task, recorded),
        Answer::Recovered { task, recorded } => replayed(respond(&task, recorded)),
        Answer::Replay { status, recorded } => replay(status, recorded),
    })
}

/// 200 with a finished task, else 202 with `Location`.
fn answer(task: &TaskRecord) -> ApiResult<Response> {
    let data = Data::with_status(status_of(task), &TaskView::new(task, true))?;
    Ok(with_location(task, data.into_response()))
}

fn status_of(task: &TaskRecord) -> StatusCode {
    if task.status.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    }
}

fn with_location(task: &TaskRecord, mut response: Response) -> Response {
    if !task.status.is_terminal()
        && let Ok(v) = HeaderValue::from_str(&location(task.id))
    {
        response.headers_mut().insert("location", v);
    }
    response
}

/// The answer with `task`, as recorded for an Idempotency-Key's repeats:
/// its status and `data`.
fn recorded(task: &TaskRecord) -> (i64, String) {
    let data = serde_json::to_string(&TaskView::new(task, true)).unwrap_or_default();
    (status_of(task).as_u16() as i64, data)
}

/// The answer with `task`, its `data` as recorded.
fn respond(task: &TaskRecord, recorded: String) -> Response {
    let data = Data {
        status: status_of(task),
        json: recorded.into(),
    };
    with_location(task, data.into_response())
}

fn replayed(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

fn replay(status_code: i64, stored: String) -> Response {
    let status = StatusCode::from_u16(status_code as u16).unwrap_or(StatusCode::OK);
    let location = serde_json::from_str::<Value>(&stored)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(location));
    let mut response = replayed(
        Data {
            status,
            json: stored.into(),
        }
        .into_response(),
    );
    if let (StatusCode::ACCEPTED, Some(loc)) = (
        status,
        location.and_then(|l| HeaderValue::from_str(&l).ok()),
    ) {
        response.headers_mut().insert("location", loc);
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

pub async fn status(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksRead>,
    Path(id): Path<String>,
) -> ApiResult<Data> {
    let task = find(&app, &principal, &id).await?;
    Data::ok(&TaskView::new(&task, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bodies_hash_equal() {
        assert_eq!(
            request_hash(br#"{"a":1,"b":2}"#),
            request_hash(b"{ \"b\": 2, \"a\": 1 }")
        );
        assert_ne!(request_hash(br#"{"a":1}"#), request_hash(br#"{"a":2}"#));
    }
}
