//! Event streams are bounded: at most `limits.max_streams_per_key` open per
//! key (one more is `429 too_many_streams`, in the envelope or, on
//! `/openai/v1`, in OpenAI's shape, and without a task), and each ends after
//! `limits.stream_max_seconds` with an event that says so, so that a
//! forgotten reader lets go of its slot.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use taskgate_core::KeyType;

use crate::upstream::{Fake, chat_api};
use crate::utils::{Backend, TestApp, TestClient, both};

/// A test-mode task that runs for a minute (unless cancelled).
async fn long_task(c: &TestClient) -> String {
    let r = c
        .call(json!({
            "api": "sentiment",
            "mode": "async",
            "input": { "text": "slow" },
            "sandbox": { "delay_ms": 60_000 },
        }))
        .await
        .expect(202);
    r.data()["id"].as_str().unwrap().to_owned()
}

/// Opens the stream of task `id` and keeps it open (its body unread).
async fn open(c: &TestClient, id: &str) -> reqwest::Response {
    c.request(reqwest::Method::GET, &format!("tasks/{id}/stream"))
        .send()
        .await
        .unwrap()
}

/// Opens the stream of `id` once a slot is free: a closed stream gives its
/// slot back as soon as the server sees its connection go, which it learns
/// by itself, a moment after the client closed it.
async fn open_when_free(c: &TestClient, id: &str) -> reqwest::Response {
    for _ in 0..200 {
        let r = open(c, id).await;
        if r.status() == 200 {
            return r;
        }
        assert_eq!(r.status(), 429);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the slot of a closed stream was never given back");
}

/// Reads an event stream to its end: its `(event, data)` pairs.
async fn events(r: reqwest::Response) -> Vec<(String, Value)> {
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), body.next())
        .await
        .expect("the stream went quiet")
    {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    buf.split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|e| {
            let (mut event, mut data) = (String::new(), Value::Null);
            for line in e.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap_or(json!(v));
                }
            }
            (event, data)
        })
        .collect()
}

async fn task_count(c: &TestClient) -> usize {
    let r = c.get("tasks?limit=100").await.expect(200);
    r.data()["items"].as_array().unwrap().len()
}

async fn a_key_holds_at_most_its_cap_of_streams(backend: Backend) {
    let (_fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.limits.max_streams_per_key = 2;
            chat_api(c, &base, true);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let id = long_task(&c).await;
    let first = open(&c, &id).await;
    assert_eq!(first.status(), 200);
    let second = open(&c, &id).await;
    assert_eq!(second.status(), 200);

    // The third is refused, in the envelope, saying why and for how long.
    let refused = c
        .get(&format!("tasks/{id}/stream"))
        .await
        .expect_error(429, "too_many_streams");
    assert_eq!(refused.body["error"]["type"], "rate_limit_error");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 streams"),
        "{}",
        refused.text
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.body["error"]["details"][0]["limit"], 2);

    // Streams of any task count, and so does the OpenAI endpoint's, which
    // refuses in OpenAI's shape before it makes a task.
    let other = long_task(&c).await;
    c.get(&format!("tasks/{other}/stream"))
        .await
        .expect_error(429, "too_many_streams");
    let tasks = task_count(&c).await;
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/openai/v1/chat/completions")
                .json(&json!({
                    "model": "chat",
                    "stream": true,
                    "messages": [{"role": "user", "content": "hi"}],
                })),
        )
        .await;
    assert_eq!(r.status.as_u16(), 429, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "too_many_streams", "{}", r.text);
    assert!(
        r.body.get("success").is_none(),
        "OpenAI's shape: {}",
        r.text
    );
    assert_eq!(task_count(&c).await, tasks, "no task for a refused stream");

    // The cap is per key: another key of the account has its own.
    let another = app.client(&app.create_key(&app.account_id, KeyType::Test).await);
    let theirs = open(&another, &id).await;
    assert_eq!(theirs.status(), 200);

    // Closing a stream frees its slot.
    drop(first);
    let third = open_when_free(&c, &id).await;
    c.get(&format!("tasks/{id}/stream"))
        .await
        .expect_error(429, "too_many_streams");

    // A stream that ends (its task's end) frees its slot too.
    c.post(&format!("tasks/{id}/cancel"), json!({}))
        .await
        .expect(200);
    for s in [second, third] {
        let e = events(s).await;
        assert_eq!(e.last().unwrap().0, "done", "{e:?}");
    }
    let after = open_when_free(&c, &id).await;
    assert_eq!(events(after).await.len(), 1, "a finished task: its done");
    drop(theirs);
    c.post(&format!("tasks/{other}/cancel"), json!({}))
        .await
        .expect(200);
    app.stop().await;
}
both!(a_key_holds_at_most_its_cap_of_streams);

async fn a_stream_ends_at_its_lifetime_and_can_be_reopened(backend: Backend) {
    let (_fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.limits.max_streams_per_key = 1;
            c.limits.stream_max_seconds = 1;
            chat_api(c, &base, true);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let id = long_task(&c).await;
    let e = events(open(&c, &id).await).await;
    let (last, _) = e.split_last().unwrap();
    assert_eq!(last.0, "expired", "{e:?}");
    assert_eq!(last.1["task_id"], json!(id));
    assert_eq!(last.1["reason"], "stream_max_seconds");
    assert_eq!(last.1["max_seconds"], 1);
    assert!(e.iter().all(|(name, _)| name != "done"), "{e:?}");

    // The task goes on; the reader reconnects (its slot was given back).
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(t.data()["status"], "running");
    let again = open_when_free(&c, &id).await;
    assert_eq!(events(again).await.last().unwrap().0, "expired");

    // The OpenAI endpoint's stream ends with an error event naming the
    // task, which goes on (it is not cancelled as when a reader leaves).
    let r = loop {
        let r = c
            .request(reqwest::Method::POST, "/openai/v1/chat/completions")
            .json(&json!({
                "model": "chat",
                "stream": true,
                "messages": [{"role": "user", "content": "tell a long story"}],
                "sandbox": {"delay_ms": 60_000},
            }))
            .send()
            .await
            .unwrap();
        if r.status() != 429 {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(r.status(), 200);
    let task = r.headers()["x-taskgate-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), body.next())
        .await
        .expect("the stream went quiet")
    {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let last: Value = buf
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .last()
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap();
    assert_eq!(last["error"]["code"], "stream_expired", "{buf}");
    assert!(
        last["error"]["message"].as_str().unwrap().contains(&task),
        "{last}"
    );
    assert!(!buf.contains("[DONE]"), "{buf}");
    let t = c.get(&format!("tasks/{task}")).await.expect(200);
    assert_eq!(t.data()["status"], "running");

    for t in [id, task] {
        c.post(&format!("tasks/{t}/cancel"), json!({}))
            .await
            .expect(200);
    }
    app.stop().await;
}
both!(a_stream_ends_at_its_lifetime_and_can_be_reopened);

/// The readers of one task share one look at the store: however many
/// follow it, the server polls it once (and not at all once they leave).
async fn readers_of_one_task_share_one_poll(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.limits.max_streams_per_key = 20)
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let id = long_task(&c).await;
    let mut open_streams = Vec::new();
    for _ in 0..20 {
        let r = open(&c, &id).await;
        assert_eq!(r.status(), 200);
        open_streams.push(r);
    }
    let state = &app.server.as_ref().unwrap().state;
    // Each reader starts following a moment after its answer's headers.
    for _ in 0..200 {
        assert!(state.followers.polled() <= 1, "one poller for 20 readers");
        if state.followers.polled() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state.followers.polled(), 1, "one poller for 20 readers");
    assert_eq!(state.stream_slots.open_total(), 20);
    drop(open_streams);
    for _ in 0..200 {
        if state.followers.polled() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state.followers.polled(), 0, "no poller without readers");
    c.post(&format!("tasks/{id}/cancel"), json!({}))
        .await
        .expect(200);
    app.stop().await;
}
both!(readers_of_one_task_share_one_poll);
