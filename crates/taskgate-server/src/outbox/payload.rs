//! What a delivery sends, and where: the message body (made once, at the
//! first attempt, and stored) and the destination with its signing secrets.

use serde_json::{Value, json};
use taskgate_core::{TaskStatus, Timestamp, WebhookEvent, WebhookSecret};
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
/// as the claim read it (`None` once deleted).
pub fn body(d: &WebhookDelivery, task: Option<TaskRecord>, max_output_bytes: usize) -> String {
    let data = match task {
        Some(t) => task_data(t, d.event_type, max_output_bytes),
        None => json!({ "id": d.task_id, "mode": d.mode, "deleted": true }),
    };
    let body = json!({
        "type": d.event_type.as_str(),
        "timestamp": d.created_at.rfc3339(),
        "data": data,
    });
    taskgate_core::json_text(&body)
}

fn task_data(mut t: TaskRecord, event: WebhookEvent, max_output_bytes: usize) -> Value {
    if event == WebhookEvent::TaskRunning {
        t.status = TaskStatus::Running;
        t.output = None;
        t.error = None;
        t.completed_at = None;
    }
    let mut data = serde_json::to_value(TaskView::new(&t, true)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut data {
        let too_big = t
            .output
            .as_ref()
            .is_some_and(|o| o.len() > max_output_bytes);
        if too_big {
            map.remove("output");
            map.insert("output_omitted".to_owned(), Value::Bool(true));
        }
        if event == WebhookEvent::TaskRunning {
            map.remove("output");
        }
    }
    data
}
