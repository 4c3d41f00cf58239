//! What a delivery sends, and where: the message body (made once, at the
//! first attempt, and stored) and the destination with its signing secrets.

use serde::Serialize;
use taskgate_core::{Mode, TaskId, TaskStatus, Timestamp, WebhookEvent, WebhookSecret};
use taskgate_store::{Store, StoreResult, TaskRecord, WebhookDelivery, WebhookEndpoint};

use crate::views::TaskView;

/// Where a delivery goes now.
pub enum Target {
    Send {
        url: String,
        /// The newest first; two while a rotation overlaps.
        secrets: Vec<WebhookSecret>,
        /// Its endpoint has been failing (a success clears that).
        failing: bool,
    },
    /// Not sent: why (its endpoint was deleted or disabled).
    Stopped(&'static str),
}

/// Where `d` goes: to `endpoint`, its endpoint as the claim read it, or to
/// its call's URL signed by the account's secret.
pub async fn target(
    store: &dyn Store,
    d: &WebhookDelivery,
    endpoint: Option<&WebhookEndpoint>,
    now: Timestamp,
) -> StoreResult<Target> {
    if d.endpoint_id.is_some() {
        let Some(endpoint) = endpoint else {
            return Ok(Target::Stopped("the endpoint was deleted"));
        };
        // A test event goes to a disabled endpoint: its owner asked for it.
        if endpoint.disabled.is_some() && d.event_type != WebhookEvent::WebhookTest {
            return Ok(Target::Stopped("the endpoint is disabled"));
        }
        let secrets = endpoint.signing_secrets(now).into_iter().cloned().collect();
        return Ok(Target::Send {
            url: endpoint.url.clone(),
            secrets,
            failing: endpoint.failing_since.is_some(),
        });
    }
    let Some(url) = d.url.clone() else {
        return Ok(Target::Stopped("the delivery has no destination"));
    };
    let signing = store
        .signing_secret(d.account_id, d.mode, &WebhookSecret::generate(), now)
        .await?;
    let secrets = signing.signing_secrets(now).into_iter().cloned().collect();
    Ok(Target::Send {
        url,
        secrets,
        failing: false,
    })
}

/// The body of a task's event: `{type, timestamp, data}`, `data` the task
/// as `GET /tasks/{id}` shows it without its input, its output left out past
/// `max_output_bytes` (`output_omitted: true`). A `task.running` event shows
/// the task as it started, even if it has ended since. `task`: `d`'s task
/// as written with its event, or as the claim read it (`None` once
/// deleted). Serialized straight to text: through a `serde_json::Value`,
/// the view cost about 45k instructions a delivery (`bench/RESULTS.md`).
pub fn body(d: &WebhookDelivery, task: Option<TaskRecord>, max_output_bytes: usize) -> String {
    let Some(mut t) = task else {
        return event_text(
            d,
            &Deleted {
                id: d.task_id,
                mode: d.mode,
                deleted: true,
            },
        );
    };
    let running = d.event_type == WebhookEvent::TaskRunning;
    if running {
        t.status = TaskStatus::Running;
        t.output = None;
        t.error = None;
        t.completed_at = None;
    }
    let too_big = t
        .output
        .as_ref()
        .is_some_and(|o| o.len() > max_output_bytes);
    let data = TaskData {
        task: TaskView::new(&t, !running && !too_big),
        output_omitted: too_big,
    };
    event_text(d, &data)
}

/// `{type, timestamp, data}` of `d`.
fn event_text(d: &WebhookDelivery, data: &impl Serialize) -> String {
    let event = Event {
        kind: d.event_type.as_str(),
        timestamp: d.created_at.rfc3339(),
        data,
    };
    // Nothing here fails to serialize: string keys, and the stored JSON
    // columns are valid JSON.
    serde_json::to_string(&event).unwrap_or_default()
}

#[derive(Serialize)]
struct Event<'a, D: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    timestamp: String,
    data: &'a D,
}

#[derive(Serialize)]
struct TaskData<'a> {
    #[serde(flatten)]
    task: TaskView<'a>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    output_omitted: bool,
}

/// A deleted task's event.
#[derive(Serialize)]
struct Deleted {
    id: Option<TaskId>,
    mode: Mode,
    deleted: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use taskgate_core::{
        AccountId, ApiSlug, DeliveryAttempts, DeliveryStatus, KeyId, TaskStatus, WebhookEvent,
    };

    use super::*;

    const AT: i64 = 1_764_000_000_000;

    fn ended() -> TaskRecord {
        let mut t = TaskRecord::queued(
            TaskId::new(),
            AccountId::new(),
            Mode::Live,
            ApiSlug::parse("chat").unwrap(),
            KeyId::new(),
            Timestamp::from_unix_ms(AT),
        );
        t.status = TaskStatus::Succeeded;
        t.output = Some(r#"{"text":"hi"}"#.to_owned());
        t.metadata = r#"{"order":7}"#.to_owned();
        t.units = 3;
        t.started_at = Some(Timestamp::from_unix_ms(AT + 5));
        t.completed_at = Some(Timestamp::from_unix_ms(AT + 25));
        t
    }

    fn delivery(event: WebhookEvent, t: &TaskRecord) -> WebhookDelivery {
        WebhookDelivery {
            seq: 1,
            account_id: t.account_id,
            mode: t.mode,
            event_type: event,
            task_id: Some(t.id),
            endpoint_id: None,
            url: Some("https://example.com/hook".to_owned()),
            status: DeliveryStatus::Pending,
            attempts: DeliveryAttempts::default(),
            payload: None,
            next_attempt_at: None,
            created_at: Timestamp::from_unix_ms(AT + 25),
        }
    }

    fn parsed(body: &str) -> Value {
        serde_json::from_str(body).expect("a JSON body")
    }

    #[test]
    fn a_tasks_event_is_the_task_without_its_input() {
        let t = ended();
        let body = parsed(&body(
            &delivery(WebhookEvent::TaskSucceeded, &t),
            Some(t.clone()),
            1_000,
        ));
        assert_eq!(
            body,
            json!({
                "type": "task.succeeded",
                "timestamp": "2025-11-24T16:00:00.025Z",
                "data": {
                    "id": t.id, "object": "task", "api": "chat", "mode": "live",
                    "status": "succeeded", "output": {"text": "hi"}, "error": null,
                    "usage": {"units": 3, "input_tokens": null, "output_tokens": null,
                              "reasoning_tokens": null, "cached_input_tokens": null,
                              "cost_usd": "0.000000"},
                    "metadata": {"order": 7},
                    "created_at": "2025-11-24T16:00:00.000Z",
                    "started_at": "2025-11-24T16:00:00.005Z",
                    "completed_at": "2025-11-24T16:00:00.025Z",
                    "duration_ms": 20,
                }
            })
        );
    }

    #[test]
    fn running_shows_the_start_and_a_big_output_is_left_out() {
        let t = ended();
        let running = parsed(&body(
            &delivery(WebhookEvent::TaskRunning, &t),
            Some(t.clone()),
            1_000,
        ));
        let data = &running["data"];
        assert_eq!(data["status"], json!("running"));
        assert!(data.get("output").is_none() && data.get("output_omitted").is_none());
        assert_eq!(
            (&data["error"], &data["completed_at"]),
            (&json!(null), &json!(null))
        );

        let big = parsed(&body(
            &delivery(WebhookEvent::TaskSucceeded, &t),
            Some(t.clone()),
            5,
        ));
        assert!(big["data"].get("output").is_none());
        assert_eq!(big["data"]["output_omitted"], json!(true));
        assert_eq!(big["data"]["status"], json!("succeeded"));
    }

    #[test]
    fn a_deleted_tasks_event_says_so() {
        let t = ended();
        let body = parsed(&body(
            &delivery(WebhookEvent::TaskSucceeded, &t),
            None,
            1_000,
        ));
        assert_eq!(
            body["data"],
            json!({"id": t.id, "mode": "live", "deleted": true})
        );
        assert_eq!(body["type"], json!("task.succeeded"));
    }
}
