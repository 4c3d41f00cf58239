//! Upstream providers through the gateway: Taskgate pointed at a fake
//! OpenAI-compatible server of our own (OpenAI's wire format, on loopback).
//! Normalized outputs, usage, exact cost and spend, attempts, fallbacks and
//! API status, timeouts, cancel closing the upstream connection, the SSE
//! stream, test mode never calling upstream, refused user URLs.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::ops::admin;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use taskgate_providers::upstream::{Protocol, ProviderConfig, Secret, TargetConfig};
use taskgate_server::Config;
use taskgate_server::config::ApiOverride;

use crate::utils::{Backend, TestApp, TestClient, both, eventually};

pub(crate) const SECRET: &str = "sk-fake-0123456789-do-not-leak";

#[derive(Clone)]
pub(crate) enum Reply {
    Json(u16, Value),
    /// SSE events sent `gap` apart; with `hang`, the stream then stays open.
    Sse(Vec<Value>, Duration, bool),
    /// SSE events sent `gap` apart, without OpenAI's closing `[DONE]`
    /// (Anthropic's and Gemini's streams just end).
    Events(Vec<Value>, Duration),
    Hang,
}

#[derive(Clone, Default)]
pub(crate) struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    always: Arc<Mutex<Option<Reply>>>,
    pub(crate) seen: Arc<Mutex<Vec<(String, HeaderMap, Value)>>>,
    pub(crate) closed: Arc<AtomicBool>,
}

struct CloseFlag(Arc<AtomicBool>);

impl Drop for CloseFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn handle(State(f): State<Fake>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    f.seen.lock().push((uri.path().to_owned(), headers, body));
    let reply = f
        .replies
        .lock()
        .pop_front()
        .or_else(|| f.always.lock().clone());
    match reply {
        None => (StatusCode::NOT_FOUND, "no script").into_response(),
        Some(Reply::Json(status, v)) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response()
        }
        Some(reply @ (Reply::Sse(..) | Reply::Events(..))) => {
            let (events, gap, hang, done) = match reply {
                Reply::Sse(events, gap, hang) => (events, gap, hang, !hang),
                Reply::Events(events, gap) => (events, gap, false, false),
                _ => unreachable!(),
            };
            let flag = CloseFlag(f.closed.clone());
            let mut lines: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            if done {
                lines.push("data: [DONE]\n\n".to_owned());
            }
            let stream = futures_util::stream::unfold(
                (lines.into_iter(), flag),
                move |(mut it, flag)| async move {
                    match it.next() {
                        Some(l) => {
                            tokio::time::sleep(gap).await;
                            Some((Ok::<_, std::io::Error>(Bytes::from(l)), (it, flag)))
                        }
                        None if hang => {
                            std::future::pending::<()>().await;
                            None
                        }
                        None => None,
                    }
                },
            );
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Some(Reply::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
    }
}

impl Fake {
    pub(crate) async fn start() -> (Self, String) {
        let fake = Fake::default();
        let app = Router::new().fallback(handle).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, format!("http://{addr}/v1"))
    }

    pub(crate) fn then(&self, r: Reply) -> &Self {
        self.replies.lock().push_back(r);
        self
    }

    pub(crate) fn always(&self, r: Reply) {
        *self.always.lock() = Some(r);
    }

    pub(crate) fn requests(&self) -> usize {
        self.seen.lock().len()
    }
}

pub(crate) fn chat_completion(text: &str) -> Reply {
    Reply::Json(
        200,
        json!({
            "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1741569952,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29}
        }),
    )
}

pub(crate) fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
           "model": "gpt-4o-mini-2024-07-18",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

pub(crate) fn streamed(words: &[&str], gap: Duration) -> Reply {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(words.iter().map(|w| chunk(json!({"content": w}), None)));
    events.push(chunk(json!({}), Some("stop")));
    events.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                       "model": "gpt-4o-mini-2024-07-18", "choices": [],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}}),
    );
    Reply::Sse(events, gap, false)
}

pub(crate) fn provider(base: &str, stream: bool) -> ProviderConfig {
    ProviderConfig {
        protocol: Protocol::Openai,
        base_url: Some(base.to_owned()),
        api_key: Some(Secret::new(SECRET)),
        api_key_env: None,
        auth_header: None,
        headers: Default::default(),
        query: Default::default(),
        body: Default::default(),
        timeout_ms: None,
        max_retries: Some(0),
        stream: Some(stream),
        breaker_failures: Some(1),
        breaker_cooldown_ms: Some(60_000),
    }
}

/// A `chat` API at provider `fake` priced $0.0015 / $0.002 per 1K tokens.
pub(crate) fn chat_api(config: &mut Config, base: &str, stream: bool) {
    config
        .providers
        .insert("fake".to_owned(), provider(base, stream));
    config.catalog.apis.insert(
        "chat".to_owned(),
        ApiOverride {
            name: Some("Fake GPT".to_owned()),
            kind: Some("chat".parse().unwrap()),
            provider: Some("fake".to_owned()),
            model: Some("gpt-4o-mini".to_owned()),
            input_price_per_1k_tokens_usd: Some("0.0015".parse().unwrap()),
            output_price_per_1k_tokens_usd: Some("0.002".parse().unwrap()),
            ..ApiOverride::default()
        },
    );
}

fn hello() -> Value {
    json!({"api": "chat", "input": {"messages": [{"role": "user", "content": "Say hello"}]}})
}

async fn chat_through_the_gateway(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.then(chat_completion("Hello!"));
    fake.then(chat_completion("Hello again!"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    // Before the key's first use, so no cached view of the account.
    admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        None,
        None,
        Some("0.00009"),
    )
    .await
    .unwrap();
    let c = app.client(&app.live);
    let api = c.get("apis/chat").await.expect(200);
    let a = api.data();
    assert_eq!(a["kind"], "chat");
    assert_eq!(a["provider"], "fake");
    assert_eq!(a["status"], "available");
    assert_eq!(
        a["pricing"],
        json!({"unit": "1k_tokens", "input_price_usd": "0.0015", "output_price_usd": "0.0020"})
    );
    assert_eq!(a["input_schema"]["required"], json!(["messages"]));

    let r = c.call(hello()).await.expect(200);
    let t = r.data();
    assert_eq!(t["status"], "succeeded", "{}", r.text);
    assert_eq!(
        t["output"],
        json!({"text": "Hello!", "tool_calls": [], "finish_reason": "stop", "model": "gpt-4o-mini-2024-07-18"})
    );
    // 19 × 0.0015/1000 + 10 × 0.002/1000 = 0.0000485 USD, half-up to micros.
    assert_eq!(
        t["usage"],
        json!({"units": 1, "input_tokens": 19, "output_tokens": 10, "cost_usd": "0.000049"})
    );
    let (path, headers, body) = fake.seen.lock()[0].clone();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(
        headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["messages"][0]["content"], "Say hello");

    let id = t["id"].as_str().unwrap();
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let attempts = d.data()["attempts"].as_array().unwrap().clone();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["provider"], "fake");
    assert_eq!(attempts[0]["target"], "gpt-4o-mini");
    assert_eq!(attempts[0]["outcome"], "succeeded");
    assert_eq!(attempts[0]["http_status"], 200);
    for text in [&api.text, &r.text, &d.text] {
        assert!(!text.contains(SECRET));
    }

    // The cost counts toward the monthly spend limit of $0.00009.
    c.call(hello()).await.expect(200);
    c.call(hello())
        .await
        .expect_error(403, "usage_limit_exceeded");
    assert_eq!(fake.requests(), 2, "a refused call reaches no provider");
    app.stop().await;
}
both!(chat_through_the_gateway);

/// Reads an SSE body to its end: `(event, data)` pairs.
pub(crate) async fn read_events(
    c: &TestClient,
    id: &str,
) -> (Vec<(String, Value)>, Option<String>) {
    let resp = c
        .request(reqwest::Method::GET, &format!("tasks/{id}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), body.next())
        .await
        .expect("the stream went quiet")
    {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let events = buf
        .split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|e| {
            let mut event = String::new();
            let mut data = String::new();
            for line in e.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = v.to_owned();
                }
            }
            (event, serde_json::from_str(&data).unwrap())
        })
        .collect();
    (events, ct)
}

async fn chat_output_streams_as_it_is_generated(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let words = ["Once", " upon", " a", " time", ", the", " end."];
    fake.then(streamed(&words, Duration::from_millis(120)));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut call = hello();
    call["mode"] = json!("async");
    let r = c.call(call).await.expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let (events, ct) = read_events(&c, &id).await;
    assert_eq!(ct.as_deref(), Some("text/event-stream"));
    let (last, deltas) = events.split_last().unwrap();
    assert_eq!(last.0, "done");
    assert_eq!(last.1["status"], "succeeded");
    assert_eq!(last.1["output"]["text"], "Once upon a time, the end.");
    assert_eq!(last.1["usage"]["output_tokens"], 5);
    assert!(deltas.len() >= 2, "the text came in pieces: {deltas:?}");
    let joined: String = deltas
        .iter()
        .map(|(e, d)| {
            assert_eq!(e, "delta");
            d["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(joined, "Once upon a time, the end.");
    let stored = c.get(&format!("call/{id}")).await.expect(200);
    assert_eq!(
        stored.data()["output"]["text"],
        "Once upon a time, the end."
    );

    // A finished task's stream is its final object at once.
    let (events, _) = read_events(&c, &id).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "done");
    assert_eq!(events[0].1["id"], json!(id));

    // Unknown ids are the usual 404 in the envelope.
    c.get("tasks/task_01JD2W3KX7ZZZZZZZZZZZZZZZZ/stream")
        .await
        .expect_error(404, "task_not_found");
    app.stop().await;
}
both!(chat_output_streams_as_it_is_generated);

async fn cancel_closes_the_upstream_connection(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.then(Reply::Sse(
        vec![chunk(
            json!({"role": "assistant", "content": "Thinking"}),
            None,
        )],
        Duration::from_millis(10),
        true,
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut call = hello();
    call["mode"] = json!("async");
    let id = c.call(call).await.expect(202).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.requests() == 0 {
        assert!(Instant::now() < deadline, "the upstream was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!fake.closed.load(Ordering::SeqCst));
    let r = c
        .post(&format!("tasks/{id}/cancel"), json!({}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], "cancelled");
    while !fake.closed.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the upstream connection stayed open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stopped attempt is recorded once the execution has wound down.
    let (c, id) = (&c, &id);
    let d = eventually(
        Duration::from_secs(10),
        "the stopped attempt recorded",
        || async move {
            let d = c.get(&format!("tasks/{id}")).await.expect(200);
            let recorded = d.data()["attempts"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            recorded.then_some(d)
        },
    )
    .await;
    let t = c.get(&format!("call/{id}")).await.expect(200);
    assert_eq!(t.data()["status"], "cancelled");
    assert_eq!(t.data()["output"], Value::Null);
    assert_eq!(t.data()["usage"]["cost_usd"], "0.000000");
    // The stopped attempt is recorded as cancelled.
    let attempts = d.data()["attempts"].as_array().unwrap().clone();
    assert_eq!(attempts.len(), 1, "{}", d.text);
    assert_eq!(attempts[0]["provider"], "fake");
    assert_eq!(attempts[0]["outcome"], "cancelled");
    app.stop().await;
}
both!(cancel_closes_the_upstream_connection);

async fn a_hanging_upstream_ends_in_timeout(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Hang);
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut call = hello();
    call["timeout_ms"] = json!(400);
    let r = c.call(call).await.expect(200);
    let t = r.data();
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], "timeout", "{}", r.text);
    let id = t["id"].as_str().unwrap();
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(d.data()["attempts"][0]["outcome"], "timeout");
    assert_eq!(d.data()["usage"]["cost_usd"], "0.000000");
    app.stop().await;
}
both!(a_hanging_upstream_ends_in_timeout);

async fn fallbacks_serve_and_breakers_show_in_the_catalog(backend: Backend) {
    let (primary, base1) = Fake::start().await;
    primary.always(Reply::Json(
        500,
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}),
    ));
    let (backup, base2) = Fake::start().await;
    backup.always(chat_completion("from the backup"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            chat_api(c, &base1, false);
            c.providers
                .insert("backup".to_owned(), provider(&base2, false));
            c.catalog.apis.get_mut("chat").unwrap().fallbacks = vec![TargetConfig {
                provider: "backup".to_owned(),
                model: Some("backup-model".to_owned()),
                weight: None,
            }];
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = c.call(hello()).await.expect(200);
    assert_eq!(r.data()["output"]["text"], "from the backup");
    let id = r.data()["id"].as_str().unwrap();
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let attempts: Vec<(String, String, Value)> = d.data()["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["provider"].as_str().unwrap().to_owned(),
                a["outcome"].as_str().unwrap().to_owned(),
                a["http_status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        vec![
            ("fake".into(), "failed".into(), json!(500)),
            ("backup".into(), "succeeded".into(), json!(200))
        ]
    );
    // The primary's circuit opened (threshold 1): the API is degraded.
    let api = c.get("apis/chat").await.expect(200);
    assert_eq!(api.data()["status"], "degraded");
    let list = c.get("apis?kind=chat").await.expect(200);
    assert_eq!(list.data()["items"][0]["status"], "degraded");
    c.call(hello()).await.expect(200);
    assert_eq!(primary.requests(), 1, "an open circuit is skipped");
    assert_eq!(backup.requests(), 2);
    // Operators see the attempts in the metrics.
    let metrics = app.anonymous().get("/metrics").await.text;
    for needle in [
        r#"model="backup-model",outcome="succeeded""#,
        r#"model="gpt-4o-mini",outcome="failed""#,
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("taskgate_upstream_attempts_total") && l.contains(needle)),
            "{needle} not in the metrics"
        );
    }
    app.stop().await;
}
both!(fallbacks_serve_and_breakers_show_in_the_catalog);

async fn test_mode_never_calls_upstream(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("live"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let r = c.call(hello()).await.expect(200);
    let t = r.data();
    assert_eq!(t["status"], "succeeded");
    assert_eq!(t["mode"], "test");
    assert!(t["output"]["text"].is_string());
    assert_eq!(t["usage"]["cost_usd"], "0.000000");
    // The sandbox's reply streams too, word by word over the delay.
    let mut call = hello();
    call["mode"] = json!("async");
    call["sandbox"] = json!({"delay_ms": 300});
    let id = c.call(call).await.expect(202).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (events, _) = read_events(&c, &id).await;
    let (last, done) = events.last().unwrap();
    assert_eq!(last, "done");
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), done["output"]["text"].as_str().unwrap());
    assert_eq!(fake.requests(), 0);
    app.stop().await;
}
both!(test_mode_never_calls_upstream);

async fn providers_without_credentials_are_not_offered(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            chat_api(c, &base, false);
            let p = c.providers.get_mut("fake").unwrap();
            p.api_key = None;
            p.api_key_env = Some("TASKGATE_TEST_UNSET_PROVIDER_KEY".to_owned());
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    c.get("apis/chat").await.expect_error(404, "api_not_found");
    c.call(hello()).await.expect_error(404, "api_not_found");
    let list = c.get("apis?kind=chat").await.expect(200);
    assert_eq!(list.data()["items"], json!([]));
    assert_eq!(fake.requests(), 0);
    app.stop().await;
}
both!(providers_without_credentials_are_not_offered);

async fn user_urls_to_private_addresses_are_refused(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Json(200, json!({"text": "should not happen"})));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.providers
                .insert("fake".to_owned(), provider(&base, false));
            c.catalog.apis.insert(
                "stt".to_owned(),
                ApiOverride {
                    kind: Some("transcription".parse().unwrap()),
                    provider: Some("fake".to_owned()),
                    model: Some("whisper-1".to_owned()),
                    price_per_call_usd: Some("0.006".parse().unwrap()),
                    ..ApiOverride::default()
                },
            );
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    // The fake itself is on loopback: exactly what a user must not reach.
    let r = c
        .call(json!({"api": "stt", "input": {"audio_url": format!("{base}/files/secret.mp3")}}))
        .await
        .expect(200);
    let t = r.data();
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], "upstream_error");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a public address"),
        "{}",
        r.text
    );
    assert_eq!(fake.requests(), 0);
    // An inline file is fine.
    let r = c
        .call(json!({"api": "stt", "input": {"audio_base64": "UklGRg==", "filename": "a.wav"}}))
        .await
        .expect(200);
    assert_eq!(r.data()["output"]["text"], "should not happen");
    assert_eq!(r.data()["usage"]["cost_usd"], "0.006000");
    app.stop().await;
}
both!(user_urls_to_private_addresses_are_refused);

async fn one_chat_interface_over_three_provider_families(backend: Backend) {
    let (openai, openai_base) = Fake::start().await;
    openai.always(chat_completion("From OpenAI."));
    let (anthropic, anthropic_base) = Fake::start().await;
    anthropic.always(Reply::Json(
        200,
        json!({"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
               "content": [{"type": "text", "text": "From Claude."}],
               "model": "claude-haiku-4-5-20251001", "stop_reason": "end_turn", "stop_sequence": null,
               "usage": {"input_tokens": 12, "output_tokens": 4}}),
    ));
    let (gemini, gemini_base) = Fake::start().await;
    gemini.always(Reply::Json(
        200,
        json!({"candidates": [{"content": {"parts": [{"text": "From Gemini."}], "role": "model"},
                               "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 3, "totalTokenCount": 9},
               "modelVersion": "gemini-2.5-flash"}),
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            for (name, protocol, base) in [
                ("oa", Protocol::Openai, openai_base.clone()),
                (
                    "claude",
                    Protocol::Anthropic,
                    anthropic_base.trim_end_matches("/v1").to_owned(),
                ),
                (
                    "google",
                    Protocol::Gemini,
                    gemini_base.trim_end_matches("/v1").to_owned(),
                ),
            ] {
                let mut p = provider(&base, false);
                p.protocol = protocol;
                c.providers.insert(name.to_owned(), p);
                c.catalog.apis.insert(
                    format!("chat-{name}"),
                    ApiOverride {
                        kind: Some("chat".parse().unwrap()),
                        provider: Some(name.to_owned()),
                        model: Some("some-model".to_owned()),
                        input_price_per_1k_tokens_usd: Some("0.01".parse().unwrap()),
                        output_price_per_1k_tokens_usd: Some("0.03".parse().unwrap()),
                        ..ApiOverride::default()
                    },
                );
            }
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let input = json!({"messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Who are you?"}]});
    let mut schemas = Vec::new();
    for (slug, text, cost) in [
        // 19 × 0.01/1000 + 10 × 0.03/1000 = 0.00049
        ("chat-oa", "From OpenAI.", "0.000490"),
        // 12 × 0.01/1000 + 4 × 0.03/1000 = 0.00024
        ("chat-claude", "From Claude.", "0.000240"),
        // 6 × 0.01/1000 + 3 × 0.03/1000 = 0.00015
        ("chat-google", "From Gemini.", "0.000150"),
    ] {
        let r = c
            .call(json!({"api": slug, "input": input}))
            .await
            .expect(200);
        let t = r.data();
        assert_eq!(t["status"], "succeeded", "{}", r.text);
        assert_eq!(t["output"]["text"], text);
        assert_eq!(t["output"]["finish_reason"], "stop");
        let keys: Vec<&String> = t["output"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["finish_reason", "model", "text", "tool_calls"],
            "{slug}"
        );
        assert_eq!(t["usage"]["cost_usd"], cost, "{slug}");
        let api = c.get(&format!("apis/{slug}")).await.expect(200);
        schemas.push((
            api.data()["input_schema"].clone(),
            api.data()["output_schema"].clone(),
        ));
    }
    assert!(
        schemas.windows(2).all(|w| w[0] == w[1]),
        "one schema per kind"
    );
    // Each family got its own wire format.
    assert_eq!(openai.seen.lock()[0].0, "/v1/chat/completions");
    let (path, headers, body) = anthropic.seen.lock()[0].clone();
    assert_eq!(path, "/v1/messages");
    assert_eq!(headers["x-api-key"], SECRET);
    assert_eq!(body["system"], "Be brief.");
    let (path, headers, body) = gemini.seen.lock()[0].clone();
    assert_eq!(path, "/v1beta/models/some-model:generateContent");
    assert_eq!(headers["x-goog-api-key"], SECRET);
    assert_eq!(body["systemInstruction"]["parts"][0]["text"], "Be brief.");
    app.stop().await;
}
both!(one_chat_interface_over_three_provider_families);

async fn cancelling_a_job_task_cancels_the_upstream_job(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.then(Reply::Json(
        201,
        json!({"id": "ufawqhfynnddngldkgtslldrkq", "status": "starting",
               "urls": {"get": "https://api.replicate.com/v1/predictions/ufawqhfynnddngldkgtslldrkq"}}),
    ));
    fake.always(Reply::Json(
        200,
        json!({"id": "ufawqhfynnddngldkgtslldrkq", "status": "processing"}),
    ));
    let http: taskgate_providers::upstream::HttpApiConfig = serde_json::from_value(json!({
        "path": "/models/black-forest-labs/flux-schnell/predictions",
        "body": {"input": {"prompt": "{{input.prompt}}"}},
        "output": {"images": [{"url": "{{response.output.0}}"}], "model": "{{model}}"},
        "job": {
            "id": "{{response.id}}",
            "status_path": "/predictions/{{job.id}}",
            "status": "{{response.status}}",
            "done": ["succeeded"],
            "failed": ["failed", "canceled"],
            "cancel_path": "/predictions/{{job.id}}/cancel",
            "poll_interval_ms": 50
        }
    }))
    .unwrap();
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            let mut p = provider(&base, false);
            p.protocol = Protocol::Http;
            c.providers.insert("replicate".to_owned(), p);
            c.catalog.apis.insert(
                "flux".to_owned(),
                ApiOverride {
                    kind: Some("image_generation".parse().unwrap()),
                    provider: Some("replicate".to_owned()),
                    model: Some("flux-schnell".to_owned()),
                    price_per_call_usd: Some("0.003".parse().unwrap()),
                    http: Some(http),
                    ..ApiOverride::default()
                },
            );
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = c
        .call(json!({"api": "flux", "input": {"prompt": "a lighthouse"}, "mode": "async"}))
        .await
        .expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let polled = |n: usize| {
        let seen = fake.seen.lock();
        seen.iter()
            .filter(|(p, _, _)| p == "/v1/predictions/ufawqhfynnddngldkgtslldrkq")
            .count()
            >= n
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !polled(2) {
        assert!(Instant::now() < deadline, "the job was never polled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (path, headers, body) = fake.seen.lock()[0].clone();
    assert_eq!(
        path,
        "/v1/models/black-forest-labs/flux-schnell/predictions"
    );
    assert_eq!(
        headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );
    assert_eq!(body, json!({"input": {"prompt": "a lighthouse"}}));
    c.post(&format!("tasks/{id}/cancel"), json!({}))
        .await
        .expect(200);
    let cancel = "/v1/predictions/ufawqhfynnddngldkgtslldrkq/cancel";
    while !fake.seen.lock().iter().any(|(p, _, _)| p == cancel) {
        assert!(
            Instant::now() < deadline,
            "the upstream job was not cancelled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = c.get(&format!("call/{id}")).await.expect(200);
    assert_eq!(t.data()["status"], "cancelled");
    assert_eq!(t.data()["usage"]["cost_usd"], "0.000000");
    app.stop().await;
}
both!(cancelling_a_job_task_cancels_the_upstream_job);
