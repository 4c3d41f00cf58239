//! §4 POST /call and GET /call/{id}: validation, sync and async, timeouts.

use std::time::Duration;

use serde_json::json;

use crate::utils::{Backend, TestApp, both};

async fn sync_call_returns_the_finished_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "I love this" }, "metadata": { "order": "1234" } }))
        .await
        .expect(200);
    let t = r.data();
    assert!(t["id"].as_str().unwrap().starts_with("task_"));
    assert_eq!(t["status"], json!("succeeded"));
    assert_eq!(t["mode"], json!("live"));
    assert_eq!(t["api"], json!("sentiment"));
    assert_eq!(t["output"]["label"], json!("positive"));
    assert_eq!(t["error"], json!(null));
    assert_eq!(t["metadata"], json!({ "order": "1234" }));
    assert_eq!(t["usage"]["units"], json!(1));
    assert_eq!(t["usage"]["cost_usd"], json!("0.000100"));
    for f in ["created_at", "started_at", "completed_at"] {
        let s = t[f].as_str().unwrap();
        assert!(s.ends_with('Z') && s.len() == 24, "{f}: {s}");
    }
    assert!(t["duration_ms"].is_number());
    let again = c
        .get(&format!("call/{}", t["id"].as_str().unwrap()))
        .await
        .expect(200);
    assert_eq!(again.data(), t);
    app.stop().await;
}
both!(sync_call_returns_the_finished_task);

async fn async_call_answers_202_with_location(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "fine" }, "mode": "async", "sandbox": { "delay_ms": 300 } }))
        .await
        .expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.header("location"),
        Some(format!("/api/v1/call/{id}").as_str())
    );
    assert!(["queued", "running"].contains(&r.data()["status"].as_str().unwrap()));
    let done = c.wait_terminal(&id).await;
    assert_eq!(done["status"], json!("succeeded"));
    app.stop().await;
}
both!(async_call_answers_202_with_location);

async fn sync_wait_falls_back_to_202(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.sync_wait_ms = 200)
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "slow" }, "sandbox": { "delay_ms": 1000 } }))
        .await
        .expect(202);
    assert_eq!(r.data()["status"], json!("running"));
    assert!(r.header("location").is_some());
    let id = r.data()["id"].as_str().unwrap();
    // Its delay passes on the server's clock.
    app.clock.advance(Duration::from_secs(1));
    assert_eq!(c.wait_terminal(id).await["status"], json!("succeeded"));
    app.stop().await;
}
both!(sync_wait_falls_back_to_202);

async fn timeout_ms_fails_the_task_with_timeout(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" }, "timeout_ms": 200, "sandbox": { "delay_ms": 5000 } }))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], json!("failed"));
    assert_eq!(r.data()["error"]["code"], json!("timeout"));
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" }, "timeout_ms": 200, "sandbox": { "outcome": "timeout" } }))
        .await
        .expect(200);
    assert_eq!(r.data()["error"]["code"], json!("timeout"));
    app.stop().await;
}
both!(timeout_ms_fails_the_task_with_timeout);

async fn sandbox_failure_is_a_failed_task_not_an_error(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" },
                      "sandbox": { "outcome": "failed", "error_code": "upstream_timeout" } }))
        .await
        .expect(200);
    assert_eq!(r.body["success"], json!(true));
    assert_eq!(r.data()["status"], json!("failed"));
    assert_eq!(r.data()["error"]["code"], json!("upstream_timeout"));
    assert_eq!(r.data()["usage"]["cost_usd"], json!("0.000000"));
    // Sandbox controls are refused with a live key.
    app.client(&app.live)
        .call(json!({ "api": "sentiment", "input": { "text": "x" }, "sandbox": { "delay_ms": 1 } }))
        .await
        .expect_error(400, "invalid_field");
    app.stop().await;
}
both!(sandbox_failure_is_a_failed_task_not_an_error);

async fn bad_requests_are_refused_and_change_nothing(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let cases = [
        (
            json!({ "input": { "text": "x" } }),
            400,
            "invalid_field",
            Some("api"),
        ),
        (
            json!({ "api": 7, "input": { "text": "x" } }),
            400,
            "invalid_field",
            Some("api"),
        ),
        (
            json!({ "api": "nope", "input": { "text": "x" } }),
            404,
            "api_not_found",
            Some("api"),
        ),
        (
            json!({ "api": "sentiment" }),
            400,
            "invalid_field",
            Some("input"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "extra": 1 }),
            400,
            "invalid_field",
            Some("extra"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "mode": "later" }),
            400,
            "invalid_field",
            Some("mode"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "timeout_ms": 0 }),
            400,
            "invalid_field",
            Some("timeout_ms"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "timeout_ms": "9" }),
            400,
            "invalid_field",
            Some("timeout_ms"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "metadata": { "a": 1 } }),
            400,
            "invalid_field",
            Some("metadata.a"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": "x" }, "metadata": { "a": "x".repeat(513) } }),
            400,
            "invalid_field",
            Some("metadata.a"),
        ),
        (
            json!({ "api": "sentiment", "input": {} }),
            400,
            "invalid_input",
            Some("input.text"),
        ),
        (
            json!({ "api": "sentiment", "input": { "text": 5, "zzz": 1 } }),
            400,
            "invalid_input",
            None,
        ),
    ];
    for (body, status, code, param) in cases {
        let r = c.call(body.clone()).await.expect_error(status, code);
        if let Some(p) = param {
            assert_eq!(r.body["error"]["param"], json!(p), "{body}: {}", r.text);
        }
    }
    let many: serde_json::Map<String, serde_json::Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    c.call(json!({ "api": "sentiment", "input": { "text": "x" }, "metadata": many }))
        .await
        .expect_error(400, "invalid_field");
    // One details entry per violation.
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": 5, "zzz": 1 } }))
        .await
        .expect(400);
    assert!(
        r.body["error"]["details"].as_array().unwrap().len() >= 2,
        "{}",
        r.text
    );
    assert_eq!(c.get("tasks").await.expect(200).data()["items"], json!([]));
    app.stop().await;
}
both!(bad_requests_are_refused_and_change_nothing);

async fn unknown_task_ids_are_404(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    c.get("call/task_01JD0000000000000000000000")
        .await
        .expect_error(404, "task_not_found");
    c.get("call/garbage")
        .await
        .expect_error(404, "task_not_found");
    c.get("tasks/garbage")
        .await
        .expect_error(404, "task_not_found");
    c.post("tasks/garbage/cancel", json!({}))
        .await
        .expect_error(404, "task_not_found");
    app.stop().await;
}
both!(unknown_task_ids_are_404);

async fn a_client_that_hangs_up_leaves_no_task_behind(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let url = format!("{}/api/v1/call", app.base);
    // Clients that give up at once, at every point of the request's life.
    let mut calls = Vec::new();
    for i in 0..120u64 {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_micros(200 + 40 * i))
            .build()
            .unwrap();
        let (url, key) = (url.clone(), app.live.clone());
        calls.push(tokio::spawn(async move {
            let _ = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({ "api": "sentiment", "input": { "text": format!("call {i}") } }))
                .send()
                .await;
        }));
    }
    for c in calls {
        c.await.unwrap();
    }
    let c = app.client(&app.live);
    // Every task that was stored runs to its end.
    let mut unfinished = json!(null);
    for _ in 0..100 {
        let r = c.get("tasks?status=queued,running").await.expect(200);
        unfinished = r.data()["items"].clone();
        if unfinished == json!([]) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(unfinished, json!([]), "tasks left unfinished");
    app.stop().await;
}
both!(a_client_that_hangs_up_leaves_no_task_behind);
