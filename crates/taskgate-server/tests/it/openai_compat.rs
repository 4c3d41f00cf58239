//! `/openai/v1`, the endpoint for OpenAI's SDKs: every request a task made
//! as POST /call makes one (authentication, limits, spend, test mode,
//! storage), answers and stream chunks in OpenAI's format, errors in
//! OpenAI's shape, and a client that leaves takes its task with it.

use std::time::{Duration, Instant};

use crate::ops::admin;
use base64::Engine;
use futures_util::StreamExt;
use serde_json::{Value, json};
use taskgate_core::KeyType;
use taskgate_server::config::ApiOverride;

use crate::upstream::{Fake, Reply, SECRET, chat_api, chat_completion, chunk, streamed};
use crate::utils::{Backend, Resp, TestApp, TestClient, both};

fn hello() -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": "Say hello"}]})
}

/// An `embedding` API `embed` at the provider `fake` (declared by `chat_api`).
fn embed_api(config: &mut taskgate_server::Config) {
    config.catalog.apis.insert(
        "embed".to_owned(),
        ApiOverride {
            kind: Some("embedding".parse().unwrap()),
            provider: Some("fake".to_owned()),
            model: Some("text-embedding-3-small".to_owned()),
            input_price_per_1k_tokens_usd: Some("0.00002".parse().unwrap()),
            ..ApiOverride::default()
        },
    );
}

async fn post(c: &TestClient, path: &str, body: Value) -> Resp {
    c.send(
        c.request(reqwest::Method::POST, &format!("/openai/v1/{path}"))
            .json(&body),
    )
    .await
}

/// Asserts an error in OpenAI's shape (and nothing of the envelope).
fn openai_error(r: &Resp, status: u16, code: &str) -> Value {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    let e = &r.body["error"];
    assert_eq!(e["code"], code, "{}", r.text);
    assert!(
        e["message"].is_string() && e["type"].is_string(),
        "{}",
        r.text
    );
    assert!(e.as_object().unwrap().contains_key("param"), "{}", r.text);
    assert!(r.body.get("success").is_none() && r.body.get("meta").is_none());
    assert!(r.header("x-request-id").unwrap().starts_with("req_"));
    e.clone()
}

async fn chat_completions_are_tasks(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let body = json!({
        "model": "chat",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Say"}, {"type": "text", "text": "hello"}]}
        ],
        "max_completion_tokens": 20,
        "stop": "\n",
        "seed": 7,
        "user": "end-user-1",
        "metadata": {"order": "42"}
    });
    let r = post(&c, "chat/completions", body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.header("x-taskgate-task-id").unwrap().to_owned();
    assert_eq!(r.body["id"], id.as_str());
    assert_eq!(r.body["object"], "chat.completion");
    assert_eq!(r.body["model"], "chat");
    assert!(r.body["created"].as_i64().unwrap() > 1_700_000_000);
    let choice = &r.body["choices"][0];
    assert_eq!(
        choice["message"],
        json!({"role": "assistant", "content": "Hello!", "refusal": null})
    );
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        r.body["usage"],
        json!({"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29})
    );
    assert!(!r.text.contains(SECRET));

    // What reached the provider: the call as the `chat` kind normalizes it,
    // with the request's other fields passed through.
    let (path, _, sent) = fake.seen.lock()[0].clone();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "Say\nhello"})
    );
    assert_eq!(sent["max_tokens"], 20);
    assert_eq!(sent["stop"], json!(["\n"]));
    assert_eq!(sent["seed"], 7);
    assert!(sent.get("user").is_none() && sent.get("metadata").is_none());

    // The task, as the native API shows it: stored, charged, with its metadata.
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    let t = t.data();
    assert_eq!(t["status"], "succeeded");
    assert_eq!(t["api"], "chat");
    assert_eq!(t["mode"], "live");
    assert_eq!(t["metadata"], json!({"order": "42"}));
    assert_eq!(t["usage"]["cost_usd"], "0.000049");

    // The spend limit holds here as on POST /call.
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
    let c = app.client(&app.create_key(&app.account_id, KeyType::Live).await);
    let r = post(&c, "chat/completions", hello()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = post(&c, "chat/completions", hello()).await;
    openai_error(&r, 403, "usage_limit_exceeded");
    assert_eq!(fake.requests(), 2, "a refused request reaches no provider");
    app.stop().await;
}
both!(chat_completions_are_tasks);

/// Reads an OpenAI stream to its end: the `data:` payloads.
async fn chunks(r: reqwest::Response) -> Vec<String> {
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while let Some(b) = body.next().await {
        buf.push_str(std::str::from_utf8(&b.unwrap()).unwrap());
    }
    buf.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: ").map(str::to_owned))
        .collect()
}

async fn streamed_chat_completions(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(streamed(
        &["Hel", "lo", " there"],
        Duration::from_millis(20),
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut body = hello();
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = c
        .request(reqwest::Method::POST, "/openai/v1/chat/completions")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let id = r.headers()["x-taskgate-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let data = chunks(r).await;
    assert_eq!(data.last().unwrap(), "[DONE]");
    let events: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    for e in &events {
        assert_eq!(e["object"], "chat.completion.chunk");
        assert_eq!(e["id"], id.as_str());
        assert_eq!(e["model"], "chat");
    }
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello there");
    let finish = &events[events.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = events.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12})
    );
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(t.data()["status"], "succeeded");
    assert_eq!(t.data()["output"]["text"], "Hello there");

    // A task that fails before any output is an error answer, not a stream.
    fake.always(Reply::Json(500, json!({"error": {"message": "boom"}})));
    let r = post(&c, "chat/completions", body.clone()).await;
    let e = openai_error(&r, 502, "upstream_error");
    assert!(e["message"].as_str().unwrap().contains("task_"), "{e}");
    assert!(r.header("x-taskgate-task-id").is_some());
    app.stop().await;
}
both!(streamed_chat_completions);

async fn a_client_that_leaves_cancels_its_task(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Sse(
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
    let mut body = hello();
    body["stream"] = json!(true);
    let r = c
        .request(reqwest::Method::POST, "/openai/v1/chat/completions")
        .json(&body)
        .send()
        .await
        .unwrap();
    let id = r.headers()["x-taskgate-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut stream = r.bytes_stream();
    let first = String::from_utf8(stream.next().await.unwrap().unwrap().to_vec()).unwrap();
    assert!(first.contains("Thinking"), "{first}");
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fake.closed.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the upstream connection stayed open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = c.wait_terminal(&id).await;
    assert_eq!(t["status"], "cancelled");

    // The same for a plain request whose client gives up waiting.
    let (fake2, base2) = Fake::start().await;
    fake2.always(Reply::Hang);
    drop(app);
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base2, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let gone = c
        .request(reqwest::Method::POST, "/openai/v1/chat/completions")
        .json(&hello())
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(gone.is_err(), "the request should have timed out");
    let list = c.get("tasks?api=chat").await.expect(200);
    let id = list.data()["items"][0]["id"].as_str().unwrap().to_owned();
    let t = c.wait_terminal(&id).await;
    assert_eq!(t["status"], "cancelled");
    app.stop().await;
}
both!(a_client_that_leaves_cancels_its_task);

async fn embeddings(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Json(
        200,
        json!({"object": "list", "model": "text-embedding-3-small",
               "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.25]},
                        {"object": "embedding", "index": 1, "embedding": [1.0, 2.0]}],
               "usage": {"prompt_tokens": 4, "total_tokens": 4}}),
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            chat_api(c, &base, false);
            embed_api(c);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = post(
        &c,
        "embeddings",
        json!({"model": "embed", "input": ["a", "b"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["model"], "embed");
    assert_eq!(
        r.body["data"][1],
        json!({"object": "embedding", "index": 1, "embedding": [1.0, 2.0]})
    );
    assert_eq!(
        r.body["usage"],
        json!({"prompt_tokens": 4, "total_tokens": 4})
    );
    assert!(r.header("x-taskgate-task-id").is_some());
    let (path, _, sent) = fake.seen.lock()[0].clone();
    assert_eq!(path, "/v1/embeddings");
    assert_eq!(sent["input"], json!(["a", "b"]));

    // base64: the numbers as little-endian 32-bit floats.
    let r = post(
        &c,
        "embeddings",
        json!({"model": "embed", "input": "a", "encoding_format": "base64"}),
    )
    .await;
    let b = base64::engine::general_purpose::STANDARD
        .decode(r.body["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let floats: Vec<f32> = b
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [0.5, -0.25]);

    let r = post(
        &c,
        "embeddings",
        json!({"model": "embed", "input": [[1, 2, 3]]}),
    )
    .await;
    openai_error(&r, 400, "unsupported_parameter");
    let r = post(&c, "embeddings", json!({"model": "chat", "input": "a"})).await;
    openai_error(&r, 404, "model_not_found");
    app.stop().await;
}
both!(embeddings);

async fn models_are_the_apis_the_key_may_call(backend: Backend) {
    let (_fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            chat_api(c, &base, false);
            embed_api(c);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = c.get("/openai/v1/models").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["object"], "list");
    let ids: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat", "embed"], "only chat and embedding APIs");
    assert_eq!(r.body["data"][0]["object"], "model");
    assert_eq!(r.body["data"][0]["owned_by"], "fake");
    let r = c.get("/openai/v1/models/embed").await;
    assert_eq!(r.body["id"], "embed");
    openai_error(
        &c.get("/openai/v1/models/sentiment").await,
        404,
        "model_not_found",
    );

    // A restricted key sees and calls only its APIs.
    let restricted = app
        .restricted_client(
            &app.account_id,
            Some(&["apis:read", "tasks:write"]),
            Some(&["embed"]),
        )
        .await;
    let r = restricted.get("/openai/v1/models").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{}", r.text);
    let e = openai_error(
        &post(&restricted, "chat/completions", hello()).await,
        403,
        "insufficient_permissions",
    );
    assert_eq!(e["param"], "model");
    // Without the scope.
    let reader = app
        .restricted_client(&app.account_id, Some(&["apis:read"]), None)
        .await;
    openai_error(
        &post(&reader, "chat/completions", hello()).await,
        403,
        "insufficient_permissions",
    );
    app.stop().await;
}
both!(models_are_the_apis_the_key_may_call);

async fn refusals_are_in_openai_shape_and_change_nothing(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let anonymous = app.anonymous();
    let e = openai_error(
        &post(&anonymous, "chat/completions", hello()).await,
        401,
        "missing_authorization",
    );
    assert_eq!(e["type"], "authentication_error");
    let bad = TestClient::new(&app.base, Some("tg_live_not-a-key"));
    openai_error(&bad.get("/openai/v1/models").await, 401, "invalid_api_key");

    let c = app.client(&app.live);
    let cases = [
        (json!({"messages": []}), "invalid_field", "model"),
        (
            json!({"model": "nope", "messages": []}),
            "model_not_found",
            "model",
        ),
        (json!({"model": "chat"}), "invalid_field", "messages"),
        (
            json!({"model": "chat", "messages": [{"role": "tool", "content": "x"}]}),
            "invalid_field",
            "messages[0].tool_call_id",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            "invalid_field",
            "messages[0].content[0].image_url.url",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}),
            "invalid_field",
            "tools[0].function",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "n": 2}),
            "unsupported_parameter",
            "n",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "temperature": 9}),
            "invalid_input",
            "temperature",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "sandbox": {}}),
            "invalid_field",
            "sandbox",
        ),
    ];
    for (body, code, param) in cases {
        let r = post(&c, "chat/completions", body.clone()).await;
        let e = openai_error(&r, if code == "model_not_found" { 404 } else { 400 }, code);
        assert_eq!(e["param"], param, "{body}");
    }
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/openai/v1/chat/completions")
                .header("content-type", "application/json")
                .body("{\"model\":"),
        )
        .await;
    openai_error(&r, 400, "invalid_json");
    openai_error(
        &c.get("/openai/v1/completions").await,
        404,
        "route_not_found",
    );
    let r = c
        .send(c.request(reqwest::Method::DELETE, "/openai/v1/models"))
        .await;
    openai_error(&r, 405, "method_not_allowed");
    assert_eq!(
        fake.requests(),
        0,
        "no refused request reached the provider"
    );
    let tasks = c.get("tasks").await.expect(200);
    assert_eq!(tasks.data()["items"], json!([]), "and none made a task");
    app.stop().await;

    // The plan's limit counts these requests as any other, with the same
    // headers, and its 429 is OpenAI-shaped with Retry-After.
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let c = app.client(&app.live);
    let mut last = None;
    for _ in 0..10 {
        let r = c.get("/openai/v1/models").await;
        if r.status == 429 {
            last = Some(r);
            break;
        }
        assert!(r.header("x-ratelimit-remaining").is_some());
    }
    let r = last.expect("the tiny plan's limit");
    openai_error(&r, 429, "rate_limit_exceeded");
    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    app.stop().await;
}
both!(refusals_are_in_openai_shape_and_change_nothing);

async fn test_keys_get_sandbox_answers_and_no_charges(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            chat_api(c, &base, true);
            embed_api(c);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let r = post(&c, "chat/completions", hello()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.header("x-taskgate-task-id").unwrap();
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(t.data()["mode"], "test");
    assert_eq!(t.data()["usage"]["cost_usd"], "0.000000");
    assert_eq!(
        r.body["choices"][0]["message"]["content"],
        t.data()["output"]["text"]
    );

    // `sandbox`, as on POST /call: a simulated failure is the error answer.
    let mut body = hello();
    body["sandbox"] = json!({"outcome": "failed", "error_code": "upstream_timeout"});
    openai_error(
        &post(&c, "chat/completions", body).await,
        504,
        "upstream_timeout",
    );
    let mut body = hello();
    body["stream"] = json!(true);
    body["sandbox"] = json!({"delay_ms": 200});
    let r = c
        .request(reqwest::Method::POST, "/openai/v1/chat/completions")
        .json(&body)
        .send()
        .await
        .unwrap();
    let data = chunks(r).await;
    let pieces = data.iter().filter(|d| d.contains("\"content\"")).count();
    assert!(
        pieces > 1,
        "the sandbox reply streams word by word: {data:?}"
    );
    let r = post(&c, "embeddings", json!({"model": "embed", "input": "a"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["data"][0]["embedding"].is_array());
    assert_eq!(fake.requests(), 0);
    app.stop().await;
}
both!(test_keys_get_sandbox_answers_and_no_charges);

/// Issue 25: upstream options that may change the price (`service_tier`,
/// `n`-like extras) are refused (`400 unsupported_parameter`, nothing sent,
/// nothing stored) on both doors, unless the operator allows them with
/// `catalog.apis.SLUG.allowed_options`; price-neutral ones pass as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_that_change_the_price_are_the_operators_to_allow() {
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            chat_api(c, &base, false);
            let mut open = c.catalog.apis["chat"].clone();
            open.allowed_options = Some(vec!["*".to_owned()]);
            open.model = Some("gpt-open".to_owned());
            c.catalog.apis.insert("chat-open".to_owned(), open);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut tier = hello();
    tier["service_tier"] = json!("priority");
    let r = post(&c, "chat/completions", tier.clone()).await;
    let e = openai_error(&r, 400, "unsupported_parameter");
    assert_eq!(e["param"], "service_tier");
    let native = json!({"api": "chat", "input": {
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"seed": 1, "service_tier": "priority"}
    }});
    let r = c
        .call(native)
        .await
        .expect_error(400, "unsupported_parameter");
    assert_eq!(r.body["error"]["param"], "input.options.service_tier");
    assert!(r.text.contains("allowed_options"), "{}", r.text);
    assert!(fake.seen.lock().is_empty(), "nothing reached the provider");
    let tasks = c.get("tasks").await.expect(200);
    assert_eq!(tasks.data()["items"], json!([]), "nothing stored");
    // Price-neutral options pass.
    let mut seeded = hello();
    seeded["seed"] = json!(3);
    assert_eq!(post(&c, "chat/completions", seeded).await.status, 200);
    // Where the operator allows any option, it is passed on.
    tier["model"] = json!("chat-open");
    let r = post(&c, "chat/completions", tier).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let seen = fake.seen.lock().clone();
    assert_eq!(seen.last().unwrap().2["service_tier"], "priority");
    app.stop().await;
}
