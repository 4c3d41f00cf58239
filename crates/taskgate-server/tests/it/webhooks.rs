//! Webhooks (issue 28): endpoints and their secrets, deliveries signed as
//! Standard Webhooks 1.0, retried on the schedule, stopped by 410, never
//! redirected, replayed, and calls' own webhooks. A receiver of the test's
//! own on loopback (`webhooks.allow_private_networks`, for these tests).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use taskgate_core::{KeyType, WebhookSecret};

use crate::utils::{Backend, TestApp, both, eventually, sentiment};

/// What a receiver got: its headers and body.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    headers: HeaderMap,
    body: String,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// Whether `secret` signed it.
    fn signed_by(&self, secret: &str) -> bool {
        let secret = WebhookSecret::parse(secret).expect("a whsec_ secret");
        let ts: i64 = self.header("webhook-timestamp").parse().unwrap();
        secret.verifies(
            self.header("webhook-id"),
            ts,
            self.body.as_bytes(),
            self.header("webhook-signature"),
        )
    }
}

#[derive(Default)]
struct Log {
    got: Vec<Received>,
    /// Answers to give, in order; then 200.
    answers: VecDeque<Response>,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    log: Arc<Mutex<Log>>,
}

impl Receiver {
    pub(crate) async fn start() -> Self {
        let log = Arc::new(Mutex::new(Log::default()));
        async fn hook(
            State(log): State<Arc<Mutex<Log>>>,
            headers: HeaderMap,
            body: Bytes,
        ) -> Response {
            let mut log = log.lock().unwrap();
            log.got.push(Received {
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            log.answers
                .pop_front()
                .unwrap_or_else(|| (StatusCode::OK, "thanks").into_response())
        }
        async fn elsewhere(State(log): State<Arc<Mutex<Log>>>) -> StatusCode {
            log.lock().unwrap().got.push(Received {
                headers: HeaderMap::new(),
                body: "REDIRECTED".to_owned(),
            });
            StatusCode::OK
        }
        let app = Router::new()
            .route("/hook", axum::routing::post(hook))
            .route("/elsewhere", axum::routing::post(elsewhere))
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            url: format!("http://{addr}/hook"),
            log,
        }
    }

    /// A receiver whose every answer waits until `release` is notified.
    async fn start_hanging(release: Arc<tokio::sync::Notify>) -> Self {
        let log = Arc::new(Mutex::new(Log::default()));
        let state = (log.clone(), release);
        async fn hook(
            State((log, release)): State<(Arc<Mutex<Log>>, Arc<tokio::sync::Notify>)>,
            headers: HeaderMap,
            body: Bytes,
        ) -> StatusCode {
            let first = {
                let mut log = log.lock().unwrap();
                log.got.push(Received {
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                log.got.len() == 1
            };
            if first {
                release.notified().await;
            }
            StatusCode::OK
        }
        let app = Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            url: format!("http://{addr}/hook"),
            log,
        }
    }

    /// A receiver that takes `delay` over each answer; also how many
    /// requests it had in hand at once, at most.
    async fn start_slow(delay: Duration) -> (Self, Arc<Mutex<(usize, usize)>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        // (now, most)
        let busy = Arc::new(Mutex::new((0usize, 0usize)));
        type Slow = (Arc<Mutex<Log>>, Arc<Mutex<(usize, usize)>>, Duration);
        async fn hook(
            State((log, busy, delay)): State<Slow>,
            headers: HeaderMap,
            body: Bytes,
        ) -> StatusCode {
            {
                let mut b = busy.lock().unwrap();
                b.0 += 1;
                b.1 = b.1.max(b.0);
            }
            tokio::time::sleep(delay).await;
            log.lock().unwrap().got.push(Received {
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            busy.lock().unwrap().0 -= 1;
            StatusCode::OK
        }
        let app = Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state((log.clone(), busy.clone(), delay));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let rx = Receiver {
            url: format!("http://{addr}/hook"),
            log,
        };
        (rx, busy)
    }

    fn answer(&self, r: impl IntoResponse) {
        self.log
            .lock()
            .unwrap()
            .answers
            .push_back(r.into_response());
    }

    fn got(&self) -> Vec<Received> {
        self.log.lock().unwrap().got.clone()
    }

    /// The first `n` messages, once they came.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Received> {
        eventually(
            Duration::from_secs(10),
            &format!("{n} webhook messages"),
            || async {
                let got = self.got();
                (got.len() >= n).then_some(got)
            },
        )
        .await
    }
}

/// A webhook endpoint registered at `url` (the default events); its id.
async fn endpoint_to(client: &crate::utils::TestClient, url: &str) -> String {
    let e = client
        .post("webhook_endpoints", json!({ "url": url }))
        .await
        .expect(201);
    e.data()["id"].as_str().unwrap().to_owned()
}

/// An endpoint at `url` for `task.succeeded` only.
async fn succeeded_to(client: &crate::utils::TestClient, url: &str) {
    client
        .post(
            "webhook_endpoints",
            json!({ "url": url, "events": ["task.succeeded"] }),
        )
        .await
        .expect(201);
}

/// The newest delivery of `status`, once there is one.
async fn first_delivery(client: &crate::utils::TestClient, status: &str, what: &str) -> Value {
    let path = format!("webhook_deliveries?status={status}");
    eventually(Duration::from_secs(10), what, || async {
        let r = client.get(&path).await.expect(200);
        r.data()["items"].as_array().unwrap().first().cloned()
    })
    .await
}

async fn app_with(backend: Backend, schedule: &[&str]) -> Option<TestApp> {
    app_with_timeout(backend, schedule, 2_000).await
}

async fn app_with_timeout(backend: Backend, schedule: &[&str], timeout_ms: u64) -> Option<TestApp> {
    app_configured(backend, schedule, |c| c.webhooks.timeout_ms = timeout_ms).await
}

/// An app reaching loopback receivers on `schedule`, then `more` of its own.
async fn app_configured(
    backend: Backend,
    schedule: &[&str],
    more: impl FnOnce(&mut taskgate_server::Config),
) -> Option<TestApp> {
    let schedule: Vec<_> = schedule
        .iter()
        .map(|s| taskgate_server::config::Span::parse(s).unwrap())
        .collect();
    TestApp::builder(backend)
        .config(move |c| {
            c.webhooks.allow_private_networks = true;
            c.webhooks.retry_schedule = schedule;
            c.webhooks.timeout_ms = 2_000;
            more(c);
        })
        .start()
        .await
}

async fn webhook_app(backend: Backend) -> Option<TestApp> {
    app_with(backend, &["0s", "5s", "5s"]).await
}

async fn endpoints_are_managed_per_account_and_mode(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let live = app.client(&app.live);
    let made = live
        .post(
            "webhook_endpoints",
            json!({ "url": "https://hooks.example.com/a", "description": "orders" }),
        )
        .await
        .expect(201);
    let e = made.data().clone();
    let id = e["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("whe_"));
    assert!(e["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(
        e["events"],
        json!(["task.succeeded", "task.failed", "task.cancelled"])
    );
    assert_eq!(
        (e["enabled"].clone(), e["mode"].clone()),
        (json!(true), json!("live"))
    );

    let got = live
        .get(&format!("webhook_endpoints/{id}"))
        .await
        .expect(200);
    assert!(
        got.data().get("secret").is_none(),
        "the secret is shown when made only"
    );
    assert!(!got.text.contains(e["secret"].as_str().unwrap()));
    let secret = live
        .get(&format!("webhook_endpoints/{id}/secret"))
        .await
        .expect(200);
    assert_eq!(secret.data()["secret"], e["secret"]);

    let list = live.get("webhook_endpoints?limit=1").await.expect(200);
    assert_eq!(list.data()["items"][0]["id"], json!(id));
    assert_eq!(list.data()["has_more"], json!(false));

    // A test key sees its mode's only.
    let test = app.client(&app.test);
    test.get(&format!("webhook_endpoints/{id}"))
        .await
        .expect_error(404, "webhook_endpoint_not_found");
    let empty = test.get("webhook_endpoints").await.expect(200);
    assert_eq!(empty.data()["items"], json!([]));

    let changed = live
        .patch(
            &format!("webhook_endpoints/{id}"),
            json!({ "events": ["task.running"], "enabled": false, "description": null }),
        )
        .await
        .expect(200);
    assert_eq!(changed.data()["events"], json!(["task.running"]));
    assert_eq!(changed.data()["enabled"], json!(false));
    assert_eq!(changed.data()["disabled_reason"], json!("owner"));
    assert_eq!(changed.data()["description"], json!(null));
    assert_eq!(changed.data()["url"], json!("https://hooks.example.com/a"));

    let rotated = live
        .post(&format!("webhook_endpoints/{id}/rotate_secret"), json!({}))
        .await
        .expect(200);
    assert_ne!(rotated.data()["secret"], e["secret"]);

    // Bad input changes nothing.
    live.post(
        "webhook_endpoints",
        json!({ "url": "ftp://x.example.com/" }),
    )
    .await
    .expect_error(400, "invalid_field");
    let r = live
        .post(
            "webhook_endpoints",
            json!({ "url": "https://x.example.com/", "events": ["task.nope"] }),
        )
        .await;
    assert_eq!(
        r.expect_error(400, "invalid_field").body["error"]["param"],
        json!("events")
    );
    live.post(
        "webhook_endpoints",
        json!({ "url": "https://x.example.com/", "events": [] }),
    )
    .await
    .expect_error(400, "invalid_field");
    live.post(
        "webhook_endpoints",
        json!({ "url": "https://x.example.com/", "colour": "red" }),
    )
    .await
    .expect_error(400, "invalid_field");

    // Scopes: a restricted key without them is refused.
    let reader = app
        .restricted_client(&app.account_id, Some(&["tasks:read"]), None)
        .await;
    reader
        .get("webhook_endpoints")
        .await
        .expect_error(403, "insufficient_permissions");
    let ro = app
        .restricted_client(&app.account_id, Some(&["webhooks:read"]), None)
        .await;
    ro.get("webhook_endpoints").await.expect(200);
    ro.post(
        "webhook_endpoints",
        json!({ "url": "https://x.example.com/" }),
    )
    .await
    .expect_error(403, "insufficient_permissions");
    ro.get(&format!("webhook_endpoints/{id}/secret"))
        .await
        .expect_error(403, "insufficient_permissions");

    // At most 16 per account and mode.
    for i in 1..16 {
        live.post(
            "webhook_endpoints",
            json!({ "url": format!("https://h{i}.example.com/") }),
        )
        .await
        .expect(201);
    }
    live.post(
        "webhook_endpoints",
        json!({ "url": "https://h17.example.com/" }),
    )
    .await
    .expect_error(409, "too_many_webhook_endpoints");
    test.post(
        "webhook_endpoints",
        json!({ "url": "https://t.example.com/" }),
    )
    .await
    .expect(201);

    let gone = live
        .send(live.request(reqwest::Method::DELETE, &format!("webhook_endpoints/{id}")))
        .await
        .expect(200);
    assert_eq!(gone.data()["deleted"], json!(true));
    live.get(&format!("webhook_endpoints/{id}"))
        .await
        .expect_error(404, "webhook_endpoint_not_found");
    let _ = KeyType::Live;
}
both!(endpoints_are_managed_per_account_and_mode);

async fn a_tasks_end_is_delivered_signed(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    let live = app.client(&app.live);
    let e = live
        .post(
            "webhook_endpoints",
            json!({ "url": rx.url, "events": ["task.running", "task.succeeded"] }),
        )
        .await
        .expect(201);
    let secret = e.data()["secret"].as_str().unwrap().to_owned();
    let task = live.call(sentiment("I love it")).await.expect(200);
    let task_id = task.data()["id"].as_str().unwrap().to_owned();

    let got = rx.wait_for(2).await;
    let mut types: Vec<String> = got
        .iter()
        .map(|m| m.json()["type"].as_str().unwrap().to_owned())
        .collect();
    types.sort();
    assert_eq!(types, ["task.running", "task.succeeded"]);
    let done = got
        .iter()
        .find(|m| m.json()["type"] == "task.succeeded")
        .unwrap();
    assert!(done.signed_by(&secret), "signed with the endpoint's secret");
    assert!(done.header("webhook-id").starts_with("msg_"));
    assert!(done.header("user-agent").starts_with("Taskgate-Webhooks/"));
    assert_eq!(done.header("content-type"), "application/json");
    let body = done.json();
    assert_eq!(body["data"]["id"], json!(task_id));
    assert_eq!(body["data"]["status"], json!("succeeded"));
    assert_eq!(body["data"]["mode"], json!("live"));
    assert!(body["data"].get("input").is_none(), "no input");
    assert!(body["data"]["output"].is_object());
    let running = got
        .iter()
        .find(|m| m.json()["type"] == "task.running")
        .unwrap();
    assert_eq!(running.json()["data"]["status"], json!("running"));
    assert_ne!(running.header("webhook-id"), done.header("webhook-id"));

    // The log: succeeded, one attempt, 200.
    let log = eventually(Duration::from_secs(10), "the delivery recorded", || async {
        let r = live
            .get(&format!(
                "webhook_deliveries?task_id={task_id}&status=succeeded"
            ))
            .await
            .expect(200);
        let items = r.data()["items"].as_array().unwrap().clone();
        (items.len() == 2).then_some(items)
    })
    .await;
    let d = log
        .iter()
        .find(|d| d["event_type"] == "task.succeeded")
        .unwrap();
    assert_eq!(d["message_id"], json!(done.header("webhook-id")));
    assert_eq!(d["attempts"][0]["http_status"], json!(200));
    assert_eq!(d["attempts"][0]["response_excerpt"], json!("thanks"));
    assert_eq!(d["next_attempt_at"], json!(null));
    let one = live
        .get(&format!("webhook_deliveries/{}", d["id"].as_str().unwrap()))
        .await
        .expect(200);
    assert_eq!(one.data()["id"], d["id"]);

    // A replay: a new attempt of the same message.
    live.post(
        &format!("webhook_deliveries/{}/retry", d["id"].as_str().unwrap()),
        json!({}),
    )
    .await
    .expect(202);
    let again = rx.wait_for(3).await;
    assert_eq!(again[2].header("webhook-id"), done.header("webhook-id"));
    assert_eq!(again[2].body, done.body, "the same body");
    // Counted and timed for the operator.
    let metrics = app.anonymous().get("/metrics").await;
    assert!(
        metrics
            .text
            .contains("taskgate_webhook_attempts_total{outcome=\"succeeded\"}"),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("taskgate_webhook_attempt_duration_seconds")
    );
    // A test key's account-mode sees none of it.
    let test = app.client(&app.test);
    test.get(&format!("webhook_deliveries/{}", d["id"].as_str().unwrap()))
        .await
        .expect_error(404, "webhook_delivery_not_found");
}
both!(a_tasks_end_is_delivered_signed);

async fn failures_are_retried_on_schedule_until_exhausted(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    for _ in 0..3 {
        rx.answer((StatusCode::INTERNAL_SERVER_ERROR, "down"));
    }
    let live = app.client(&app.live);
    endpoint_to(&live, &rx.url).await;
    live.call(sentiment("meh")).await.expect(200);
    let first = rx.wait_for(1).await;
    // The second attempt waits for its step (5 s), on the server's clock.
    let delivery = first_delivery(&live, "failed", "a failed attempt recorded").await;
    assert_eq!(delivery["attempts"][0]["http_status"], json!(500));
    assert_eq!(delivery["attempts"][0]["response_excerpt"], json!("down"));
    assert!(delivery["next_attempt_at"].is_string());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(rx.got().len(), 1, "not before its step");
    app.clock.advance(Duration::from_secs(6));
    let second = rx.wait_for(2).await;
    assert_eq!(
        second[1].header("webhook-id"),
        first[0].header("webhook-id")
    );
    app.clock.advance(Duration::from_secs(6));
    rx.wait_for(3).await;
    let exhausted = first_delivery(&live, "exhausted", "the delivery exhausted").await;
    assert_eq!(exhausted["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(exhausted["next_attempt_at"], json!(null));
}
both!(failures_are_retried_on_schedule_until_exhausted);

async fn retry_after_is_honoured_within_the_longest_step(backend: Backend) {
    let Some(app) = app_with(backend, &["0s", "5s", "60s", "5s"]).await else {
        return;
    };
    let rx = Receiver::start().await;
    let busy = |after: &str| {
        Response::builder()
            .status(503)
            .header("retry-after", after)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    // Asks for 30 s: longer than the 5 s step, so it waits 30 s.
    rx.answer(busy("30"));
    // Asks for a day: clamped to the longest step, 60 s.
    rx.answer(busy("86400"));
    let live = app.client(&app.live);
    endpoint_to(&live, &rx.url).await;
    live.call(sentiment("later")).await.expect(200);
    rx.wait_for(1).await;
    let d = first_delivery(&live, "failed", "the 503 recorded").await;
    let at = d["attempts"][0]["at"].as_str().unwrap().to_owned();
    let next = d["next_attempt_at"].as_str().unwrap().to_owned();
    let gap = |a: &str, b: &str| {
        let p = |s: &str| {
            time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap()
        };
        (p(b) - p(a)).whole_seconds()
    };
    assert_eq!(gap(&at, &next), 30, "Retry-After: 30 honoured");
    app.clock.advance(Duration::from_secs(6));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(rx.got().len(), 1, "the 5 s step gave way to Retry-After");
    app.clock.advance(Duration::from_secs(25));
    rx.wait_for(2).await;
    let id = d["id"].as_str().unwrap().to_owned();
    let d = eventually(
        Duration::from_secs(10),
        "the second attempt recorded",
        || {
            let live = &live;
            let id = &id;
            async move {
                let r = live
                    .get(&format!("webhook_deliveries/{id}"))
                    .await
                    .expect(200);
                (r.data()["attempts"].as_array().unwrap().len() == 2).then(|| r.data().clone())
            }
        },
    )
    .await;
    let at = d["attempts"][1]["at"].as_str().unwrap();
    let next = d["next_attempt_at"].as_str().unwrap();
    assert_eq!(gap(at, next), 60, "a day's Retry-After clamped to 60 s");
}
both!(retry_after_is_honoured_within_the_longest_step);

/// Retries 5 s apart; an endpoint failing for 10 s is disabled.
async fn disabling_after_10s(backend: Backend) -> Option<TestApp> {
    app_configured(backend, &["0s", "5s", "5s", "5s"], |c| {
        c.webhooks.disable_after = taskgate_server::config::Span::parse("10s").unwrap();
    })
    .await
}

async fn an_endpoint_failing_past_disable_after_is_disabled(backend: Backend) {
    let Some(app) = disabling_after_10s(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    for _ in 0..10 {
        rx.answer(StatusCode::INTERNAL_SERVER_ERROR);
    }
    let live = app.client(&app.live);
    let id = endpoint_to(&live, &rx.url).await;
    let enabled = |live: &crate::utils::TestClient| {
        let path = format!("webhook_endpoints/{id}");
        let live = live.clone();
        async move { live.get(&path).await.expect(200).data().clone() }
    };
    live.call(sentiment("down")).await.expect(200);
    rx.wait_for(1).await;
    app.clock.advance(Duration::from_secs(6));
    rx.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = enabled(&live).await;
    assert_eq!(now["enabled"], json!(true), "failing for 6 s of 10: {now}");
    app.clock.advance(Duration::from_secs(6));
    rx.wait_for(3).await;
    let off = eventually(
        Duration::from_secs(10),
        "disabled after 10 s failing",
        || {
            let e = enabled(&live);
            async move {
                let e = e.await;
                (e["enabled"] == json!(false)).then_some(e)
            }
        },
    )
    .await;
    assert_eq!(off["disabled_reason"], json!("failing"));
    // Enabling it again starts a fresh run: one more failure does not
    // disable it at once.
    live.patch(
        &format!("webhook_endpoints/{id}"),
        json!({ "enabled": true }),
    )
    .await
    .expect(200);
    live.call(sentiment("again")).await.expect(200);
    rx.wait_for(4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(enabled(&live).await["enabled"], json!(true));
}
both!(an_endpoint_failing_past_disable_after_is_disabled);

/// A success ends a run of failures: a failure after it starts a new run,
/// so an endpoint that failed once long ago and has answered since is not
/// disabled by its next failure.
async fn a_success_ends_a_run_of_failures(backend: Backend) {
    let Some(app) = disabling_after_10s(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    rx.answer(StatusCode::INTERNAL_SERVER_ERROR);
    let live = app.client(&app.live);
    let path = format!("webhook_endpoints/{}", endpoint_to(&live, &rx.url).await);
    live.call(sentiment("down, then up")).await.expect(200);
    rx.wait_for(1).await;
    // The retry, 6 s on, succeeds.
    app.clock.advance(Duration::from_secs(6));
    rx.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 12 s after the first failure, a new one: a run of its own.
    app.clock.advance(Duration::from_secs(6));
    rx.answer(StatusCode::INTERNAL_SERVER_ERROR);
    live.call(sentiment("down again")).await.expect(200);
    rx.wait_for(3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = live.get(&path).await.expect(200).data().clone();
    assert_eq!(now["enabled"], json!(true), "{now}");
}
both!(a_success_ends_a_run_of_failures);

async fn gone_disables_and_redirects_are_not_followed(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    let elsewhere = rx.url.replace("/hook", "/elsewhere");
    rx.answer(
        Response::builder()
            .status(302)
            .header("location", elsewhere)
            .body(axum::body::Body::empty())
            .unwrap(),
    );
    rx.answer(StatusCode::GONE);
    let live = app.client(&app.live);
    let id = endpoint_to(&live, &rx.url).await;
    live.call(sentiment("one")).await.expect(200);
    let redirected = first_delivery(&live, "failed", "the redirect recorded").await;
    assert_eq!(redirected["attempts"][0]["http_status"], json!(302));
    assert!(
        redirected["attempts"][0]["error"]
            .as_str()
            .unwrap()
            .contains("redirects are not followed")
    );
    assert!(
        rx.got().iter().all(|m| m.body != "REDIRECTED"),
        "never followed"
    );

    live.call(sentiment("two")).await.expect(200);
    eventually(
        Duration::from_secs(10),
        "410 disables the endpoint",
        || async {
            let r = live
                .get(&format!("webhook_endpoints/{id}"))
                .await
                .expect(200);
            (r.data()["enabled"] == json!(false)).then(|| r.data().clone())
        },
    )
    .await;
    let r = live
        .get(&format!("webhook_endpoints/{id}"))
        .await
        .expect(200);
    assert_eq!(r.data()["disabled_reason"], json!("gone"));
    let before = rx.got().len();
    live.call(sentiment("three")).await.expect(200);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(rx.got().len(), before, "a disabled endpoint hears nothing");
}
both!(gone_disables_and_redirects_are_not_followed);

async fn calls_own_webhooks_and_rotations_sign_with_both(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    let test = app.client(&app.test);
    let secret = test.get("webhooks/secret").await.expect(200).data()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let again = test.get("webhooks/secret").await.expect(200);
    assert_eq!(again.data()["secret"], json!(secret), "made once");
    let mut call = sentiment("I love it");
    call["mode"] = json!("async");
    call["webhook"] = json!({ "url": rx.url, "events": ["task.succeeded"] });
    let task = test.call(call).await.expect(202);
    let got = rx.wait_for(1).await;
    assert!(got[0].signed_by(&secret));
    let body = got[0].json();
    assert_eq!(body["type"], json!("task.succeeded"));
    assert_eq!(body["data"]["id"], task.data()["id"]);
    assert_eq!(body["data"]["mode"], json!("test"));
    let d = test
        .get(&format!(
            "webhook_deliveries?task_id={}",
            task.data()["id"].as_str().unwrap()
        ))
        .await
        .expect(200);
    assert_eq!(d.data()["items"][0]["url"], json!(rx.url));

    // Rotation: the old secret signs beside the new one.
    let new = test
        .post("webhooks/secret/rotate", json!({}))
        .await
        .expect(200)
        .data()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut call = sentiment("again");
    call["webhook"] = json!({ "url": rx.url });
    test.call(call).await.expect(200);
    let got = rx.wait_for(2).await;
    assert_eq!(got[1].header("webhook-signature").split(' ').count(), 2);
    assert!(got[1].signed_by(&new) && got[1].signed_by(&secret));

    // A bad webhook is refused before anything is stored.
    let mut bad = sentiment("x");
    bad["webhook"] = json!({ "url": "gopher://x" });
    let r = test.call(bad).await.expect_error(400, "invalid_field");
    assert_eq!(r.body["error"]["param"], json!("webhook.url"));
    let mut bad = sentiment("x");
    bad["webhook"] = json!({ "url": rx.url, "events": ["webhook.test"] });
    test.call(bad).await.expect_error(400, "invalid_field");
}
both!(calls_own_webhooks_and_rotations_sign_with_both);

async fn a_test_event_reaches_the_endpoint(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    let live = app.client(&app.live);
    let e = live
        .post("webhook_endpoints", json!({ "url": rx.url }))
        .await
        .expect(201);
    let id = e.data()["id"].as_str().unwrap();
    let d = live
        .post(&format!("webhook_endpoints/{id}/test"), json!({}))
        .await
        .expect(202);
    assert_eq!(d.data()["event_type"], json!("webhook.test"));
    let got = rx.wait_for(1).await;
    assert!(got[0].signed_by(e.data()["secret"].as_str().unwrap()));
    assert_eq!(got[0].json()["type"], json!("webhook.test"));
    assert_eq!(got[0].json()["data"]["endpoint_id"], json!(id));
    assert_eq!(
        got[0].header("webhook-id"),
        d.data()["message_id"].as_str().unwrap()
    );
}
both!(a_test_event_reaches_the_endpoint);

/// Without `allow_private_networks`, URLs that are or resolve to loopback or
/// private addresses are refused when set.
async fn private_addresses_are_refused(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let live = app.client(&app.live);
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://100.64.0.1/",
    ] {
        let r = live.post("webhook_endpoints", json!({ "url": url })).await;
        let r = r.expect_error(400, "invalid_field");
        assert_eq!(r.body["error"]["param"], json!("url"), "{url}");
    }
    let mut call = sentiment("x");
    call["webhook"] = json!({ "url": "http://127.0.0.1/" });
    let r = live.call(call).await.expect_error(400, "invalid_field");
    assert_eq!(r.body["error"]["param"], json!("webhook.url"));
    let list = live.get("webhook_endpoints").await.expect(200);
    assert_eq!(list.data()["items"], json!([]), "nothing stored");
}
both!(private_addresses_are_refused);

/// An app whose endpoint has one turn (`max_concurrency_per_endpoint` 1), at
/// a receiver holding its first answer until `release` is notified, after
/// `calls` calls: that first delivery in flight, the rest waiting.
async fn one_turn_held(
    backend: Backend,
    calls: usize,
) -> Option<(TestApp, Receiver, Arc<tokio::sync::Notify>)> {
    let app = app_configured(backend, &["0s", "5s"], |c| {
        c.webhooks.timeout_ms = 60_000;
        c.webhooks.max_concurrency_per_endpoint = 1;
    })
    .await?;
    let release = Arc::new(tokio::sync::Notify::new());
    let live = app.client(&app.live);
    let slow = Receiver::start_hanging(release.clone()).await;
    succeeded_to(&live, &slow.url).await;
    for i in 0..calls {
        live.call(sentiment(&format!("call {i}"))).await.expect(200);
    }
    slow.wait_for(1).await;
    Some((app, slow, release))
}

/// A destination's deliveries beyond its turns wait, and go out as its
/// deliveries in flight end: not at the sender's idle poll (up to 2 s
/// apart once it has found nothing for a while).
async fn a_destinations_backlog_goes_out_as_its_turns_free(backend: Backend) {
    let Some((_app, slow, hang)) = one_turn_held(backend, 3).await else {
        return;
    };
    // One turn, taken by the first; the others wait while the sender's
    // claims find nothing to take and its poll slows to 2 s.
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    assert_eq!(slow.got().len(), 1, "one at a time");
    hang.notify_waiters();
    let released = std::time::Instant::now();
    slow.wait_for(3).await;
    assert!(
        released.elapsed() < Duration::from_millis(1_000),
        "the backlog went out as the turn freed, not at a poll: {:?}",
        released.elapsed()
    );
}

/// A longer backlog, most of it left in the store for the claim: each claim
/// takes what the destination's turns allow, and as those end the next
/// claim follows at once, until none is left. Claims woken only at the poll
/// (250 ms apart while they find some, up to 2 s) would take 2.5 s or more
/// for the 24 here, 2 a claim (one sent, one waiting for the turn).
async fn a_claimed_backlog_goes_out_as_its_turns_free(backend: Backend) {
    let Some((_app, slow, hang)) = one_turn_held(backend, 24).await else {
        return;
    };
    // The first holds the turn; the sender's poll slows while its claims
    // find nothing to take.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    hang.notify_waiters();
    let released = std::time::Instant::now();
    let got = slow.wait_for(24).await;
    assert!(
        released.elapsed() < Duration::from_millis(1_500),
        "the backlog went out as its turns freed, not at the polls: {:?}",
        released.elapsed()
    );
    let mut ids: Vec<&str> = got.iter().map(|m| m.header("webhook-id")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 24, "each once");
}
both!(a_claimed_backlog_goes_out_as_its_turns_free);

/// Deliveries written while their destination's turns are all taken wait
/// for a turn (held by the sender, or left for its claim), and whichever
/// way they go, no more than `max_concurrency_per_endpoint` are ever in
/// flight to it; each is sent once.
async fn a_destination_never_has_more_than_its_turns_in_flight(backend: Backend) {
    let Some(app) = app_configured(backend, &["0s", "5s"], |c| {
        c.webhooks.max_concurrency_per_endpoint = 2;
    })
    .await
    else {
        return;
    };
    let (rx, busy) = Receiver::start_slow(Duration::from_millis(150)).await;
    let live = app.client(&app.live);
    succeeded_to(&live, &rx.url).await;
    let calls = (0..10).map(|i| {
        let live = &live;
        async move { live.call(sentiment(&format!("call {i}"))).await.expect(200) }
    });
    futures_util::future::join_all(calls).await;
    let got = rx.wait_for(10).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut ids: Vec<&str> = got.iter().map(|m| m.header("webhook-id")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!((rx.got().len(), ids.len()), (10, 10), "each once");
    assert_eq!(
        busy.lock().unwrap().1,
        2,
        "two in flight at most, and two at once"
    );
}
both!(a_destination_never_has_more_than_its_turns_in_flight);

/// An instance that stops in the middle of an attempt (as a crash would)
/// leaves the delivery held until its lease ends; then another instance
/// sends it, with the same `webhook-id`: at least once.
async fn an_attempt_cut_off_is_sent_again_by_another_instance(backend: Backend) {
    let Some(mut app) = app_with_timeout(backend, &["0s", "5s"], 60_000).await else {
        return;
    };
    // The first attempt meets a receiver that does not answer.
    let hang = Arc::new(tokio::sync::Notify::new());
    let live = app.client(&app.live);
    let slow = Receiver::start_hanging(hang.clone()).await;
    live.post("webhook_endpoints", json!({ "url": slow.url }))
        .await
        .expect(201);
    live.call(sentiment("cut off")).await.expect(200);
    let first = slow.wait_for(1).await;
    // The instance stops (its attempt abandoned), another takes over.
    let server = app.server.take().unwrap();
    server.stop().await.unwrap();
    let other = app
        .another_instance(|c| c.instance_id = Some("tg-other".parse().unwrap()))
        .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(slow.got().len(), 1, "held until the lease ends");
    // Past the lease: twice the time-out and 30 s.
    app.clock.advance(Duration::from_secs(160));
    hang.notify_waiters();
    let got = slow.wait_for(2).await;
    assert_eq!(got[1].header("webhook-id"), first[0].header("webhook-id"));
    assert_eq!(got[1].body, first[0].body);
    other.stop().await.unwrap();
}
both!(a_destinations_backlog_goes_out_as_its_turns_free);
both!(an_attempt_cut_off_is_sent_again_by_another_instance);

/// A sender with nothing to do polls 2 s apart, yet a task's event goes out
/// as soon as it is written: on SQLite the writer hands it to the sender in
/// its commit; on PostgreSQL the commit's notification wakes every
/// instance's sender. Without either, each arrives 0–2 s after the answer,
/// under 0.6 s about one time in three.
async fn an_idle_sender_sends_an_event_at_once(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    let rx = Receiver::start().await;
    let live = app.client(&app.live);
    succeeded_to(&live, &rx.url).await;
    for round in 1..=2 {
        // Four claims that found nothing: the sender's pause is 2 s now.
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        live.call(sentiment(&format!("round {round}")))
            .await
            .expect(200);
        let answered = std::time::Instant::now();
        rx.wait_for(round).await;
        let took = answered.elapsed();
        assert!(
            took < Duration::from_millis(600),
            "round {round}: sent {took:?} after the answer"
        );
    }
}
both!(an_idle_sender_sends_an_event_at_once);

/// Two instances on one PostgreSQL database: each event is sent by one.
async fn two_instances_send_each_event_once(backend: Backend) {
    let Some(app) = webhook_app(backend).await else {
        return;
    };
    if backend != Backend::Postgres {
        return;
    }
    let rx = Receiver::start().await;
    let live = app.client(&app.live);
    endpoint_to(&live, &rx.url).await;
    let other = app
        .another_instance(|c| c.instance_id = Some("tg-second".parse().unwrap()))
        .await;
    let second = crate::utils::TestClient::new(&format!("http://{}", other.addr), Some(&app.live));
    for i in 0..20 {
        let c = if i % 2 == 0 { &live } else { &second };
        c.call(sentiment(&format!("call {i}"))).await.expect(200);
    }
    rx.wait_for(20).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let got = rx.got();
    let mut ids: Vec<&str> = got.iter().map(|m| m.header("webhook-id")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!((got.len(), ids.len()), (20, 20), "each event once");
    other.stop().await.unwrap();
}
both!(two_instances_send_each_event_once);

/// The OpenAI endpoint takes `webhook` beside OpenAI's fields.
async fn the_openai_endpoint_takes_a_webhook(backend: Backend) {
    let (fake, base) = crate::upstream::Fake::start().await;
    fake.then(crate::upstream::chat_completion("Hello!"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.webhooks.allow_private_networks = true;
            crate::upstream::chat_api(c, &base, false);
        })
        .start()
        .await
    else {
        return;
    };
    let rx = Receiver::start().await;
    let live = app.client(&app.live);
    let secret = live.get("webhooks/secret").await.expect(200).data()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let chat = json!({
        "model": "chat",
        "messages": [{ "role": "user", "content": "Say hello" }],
        "webhook": { "url": rx.url, "events": ["task.succeeded"] },
    });
    let r = live.post("/openai/v1/chat/completions", chat).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["choices"][0]["message"]["content"], json!("Hello!"));
    let got = rx.wait_for(1).await;
    assert!(got[0].signed_by(&secret));
    assert_eq!(got[0].json()["data"]["api"], json!("chat"));
    assert_eq!(got[0].json()["data"]["status"], json!("succeeded"));
}
both!(the_openai_endpoint_takes_a_webhook);
