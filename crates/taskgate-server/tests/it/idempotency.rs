//! §4 POST /call with `Idempotency-Key`: replays, reuse with another body,
//! scope, concurrency, requests still being answered, refused requests.

use std::time::{Duration, Instant};

use crate::ops::admin;
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;
use taskgate_core::KeyType;

use crate::utils::{Backend, Resp, TestApp, TestClient, both, sentiment};

async fn raw_idempotent(c: &TestClient, key: &str, body: &str) -> Resp {
    c.send(
        c.request(Method::POST, "call")
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body.to_owned()),
    )
    .await
}

async fn task_count(c: &TestClient) -> usize {
    let r = c.get("tasks?limit=100").await.expect(200);
    r.data()["items"].as_array().unwrap().len()
}

fn replayed(r: &Resp) -> bool {
    r.header("idempotent-replayed") == Some("true")
}

fn task_id(r: &Resp) -> String {
    r.data()["id"].as_str().expect("a task").to_owned()
}

async fn a_repeat_replays_the_original_answer(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let body = json!({ "api": "sentiment", "input": { "text": "I love this" }, "metadata": { "order": "1" } });
    let first = c.call_idempotent("order-1", body.clone()).await.expect(200);
    assert!(!replayed(&first), "{:?}", first.headers);
    assert_eq!(first.data()["status"], json!("succeeded"));
    let again = c.call_idempotent("order-1", body.clone()).await.expect(200);
    assert!(replayed(&again), "{:?}", again.headers);
    assert_eq!(again.data(), first.data());
    assert_ne!(
        again.body["meta"]["request_id"],
        first.body["meta"]["request_id"]
    );
    assert_eq!(task_count(&c).await, 1);
    let details = c
        .get(&format!("tasks/{}", task_id(&first)))
        .await
        .expect(200);
    assert_eq!(details.data()["idempotency_key"], json!("order-1"));
    // Without the header, the same body is a new task.
    c.call(body).await.expect(200);
    assert_eq!(task_count(&c).await, 2);

    // A failed task is an answer like any other: replayed as it was.
    let t = app.client(&app.test);
    let failing =
        json!({ "api": "sentiment", "input": { "text": "x" }, "sandbox": { "outcome": "failed" } });
    let first = t
        .call_idempotent("fail-1", failing.clone())
        .await
        .expect(200);
    assert_eq!(first.data()["status"], json!("failed"));
    let again = t.call_idempotent("fail-1", failing).await.expect(200);
    assert!(replayed(&again));
    assert_eq!(again.data(), first.data());
    assert_eq!(task_count(&t).await, 1);
    app.stop().await;
}
both!(a_repeat_replays_the_original_answer);

async fn the_same_key_with_another_body_is_422(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let body = sentiment("original");
    let first = c.call_idempotent("k", body.clone()).await.expect(200);
    let others = [
        sentiment("different"),
        sentiment("original "),
        json!({ "api": "sentiment", "input": { "text": "original" }, "mode": "async" }),
        json!({ "api": "sentiment", "input": { "text": "original" }, "metadata": { "a": "b" } }),
        json!({ "api": "language-detect", "input": { "text": "original" } }),
    ];
    for other in others {
        let r = c
            .call_idempotent("k", other.clone())
            .await
            .expect_error(422, "idempotency_key_reused");
        assert!(!replayed(&r), "{other}");
    }
    assert_eq!(task_count(&c).await, 1);
    let again = c.call_idempotent("k", body).await.expect(200);
    assert!(replayed(&again));
    assert_eq!(again.data(), first.data());
    app.stop().await;
}
both!(the_same_key_with_another_body_is_422);

async fn formatting_differences_are_the_same_body(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let first = raw_idempotent(
        &c,
        "fmt",
        r#"{"api":"sentiment","input":{"text":"x y"},"metadata":{"a":"1","b":"2"}}"#,
    )
    .await
    .expect(200);
    let variants = [
        "{ \"api\" : \"sentiment\" , \"input\" : { \"text\" : \"x y\" }, \"metadata\": {\"a\":\"1\",\"b\":\"2\"} }",
        "{\n  \"metadata\": { \"b\": \"2\", \"a\": \"1\" },\n  \"input\": {\"text\": \"x y\"},\n  \"api\": \"sentiment\"\n}\n",
        "\t{\"input\":{\"text\":\"x\\u0020y\"},\"api\":\"sentiment\",\"metadata\":{\"b\":\"2\",\"a\":\"1\"}}",
    ];
    for v in variants {
        let r = raw_idempotent(&c, "fmt", v).await.expect(200);
        assert!(replayed(&r), "{v}");
        assert_eq!(r.data(), first.data(), "{v}");
    }
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(formatting_differences_are_the_same_body);

async fn keys_are_scoped_to_account_and_mode(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let body = sentiment("scoped");
    let (live, test) = (app.client(&app.live), app.client(&app.test));
    let l = live
        .call_idempotent("shared", body.clone())
        .await
        .expect(200);
    let t = test
        .call_idempotent("shared", body.clone())
        .await
        .expect(200);
    assert!(!replayed(&t));
    assert_ne!(task_id(&l), task_id(&t));
    assert_eq!(t.data()["mode"], json!("test"));
    let other = app.create_account("enterprise").await;
    let theirs = app.client(&app.create_key(&other, KeyType::Live).await);
    let o = theirs
        .call_idempotent("shared", body.clone())
        .await
        .expect(200);
    assert!(!replayed(&o));
    assert_ne!(task_id(&o), task_id(&l));
    // Another account may use the key with another body: no 422 leaks our use of it.
    let their_test = app.client(&app.create_key(&other, KeyType::Test).await);
    their_test
        .call_idempotent("shared", sentiment("something else"))
        .await
        .expect(200);
    // A live-mode restricted key of the same account shares the live scope.
    let all = ["apis:read", "tasks:read", "tasks:write"];
    let restricted = app
        .create_key_with(&app.account_id, KeyType::Restricted, Some(&all), None, None)
        .await;
    let restricted = app.client(restricted["secret"].as_str().unwrap());
    let r = restricted
        .call_idempotent("shared", body.clone())
        .await
        .expect(200);
    assert!(replayed(&r));
    assert_eq!(r.data(), l.data());
    restricted
        .call_idempotent("shared", sentiment("changed"))
        .await
        .expect_error(422, "idempotency_key_reused");
    assert_eq!(task_count(&live).await, 1);
    assert_eq!(task_count(&test).await, 1);
    assert_eq!(task_count(&theirs).await, 1);
    app.stop().await;
}
both!(keys_are_scoped_to_account_and_mode);

async fn fifty_concurrent_identical_requests_create_one_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    for (key, mode, ok) in [("burst-sync", "sync", 200), ("burst-async", "async", 202)] {
        let body = json!({ "api": "sentiment", "input": { "text": "burst" }, "mode": mode,
                           "sandbox": { "delay_ms": 500 } });
        let answers = join_all((0..50).map(|_| {
            let (c, body) = (c.clone(), body.clone());
            async move { c.call_idempotent(key, body).await }
        }))
        .await;
        let originals: Vec<&Resp> = answers
            .iter()
            .filter(|r| r.status == ok && !replayed(r))
            .collect();
        assert_eq!(
            originals.len(),
            1,
            "{mode}: statuses {:?}",
            answers.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        let original = originals[0];
        for r in &answers {
            match r.status.as_u16() {
                409 => {
                    assert_eq!(
                        r.body["error"]["code"],
                        json!("idempotency_in_progress"),
                        "{}",
                        r.text
                    );
                    assert_eq!(r.body["error"]["type"], json!("conflict_error"));
                }
                s if s == ok => assert_eq!(r.data(), original.data(), "{mode}"),
                _ => panic!("{mode}: unexpected answer {}: {}", r.status, r.text),
            }
        }
        c.wait_terminal(&task_id(original)).await;
    }
    assert_eq!(task_count(&c).await, 2);
    app.stop().await;
}
both!(fifty_concurrent_identical_requests_create_one_task);

async fn a_repeat_while_the_original_is_being_answered_is_409(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let body =
        json!({ "api": "sentiment", "input": { "text": "slow" }, "sandbox": { "delay_ms": 2000 } });
    let first = tokio::spawn({
        let (c, body) = (c.clone(), body.clone());
        async move { c.call_idempotent("slow-1", body).await }
    });
    // Once the task exists, the first request holds the key until the task
    // finishes (2 s later).
    let started = Instant::now();
    while task_count(&c).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the task never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = c
        .call_idempotent("slow-1", body.clone())
        .await
        .expect_error(409, "idempotency_in_progress");
    assert!(!replayed(&r));
    // The other body is still a reuse, in progress or not.
    c.call_idempotent("slow-1", sentiment("other"))
        .await
        .expect_error(422, "idempotency_key_reused");
    // The task's delay passes on the server's clock.
    app.clock.advance(Duration::from_secs(2));
    let first = first.await.unwrap().expect(200);
    assert!(!replayed(&first));
    assert_eq!(first.data()["status"], json!("succeeded"));
    let again = c.call_idempotent("slow-1", body).await.expect(200);
    assert!(replayed(&again));
    assert_eq!(again.data(), first.data());
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(a_repeat_while_the_original_is_being_answered_is_409);

async fn an_async_call_replays_202_with_location(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let body = json!({ "api": "sentiment", "input": { "text": "later" }, "mode": "async",
                       "sandbox": { "delay_ms": 1000 } });
    let first = c.call_idempotent("async-1", body.clone()).await.expect(202);
    let id = task_id(&first);
    let location = format!("/api/v1/call/{id}");
    assert_eq!(first.header("location"), Some(location.as_str()));
    // While the task runs, the original answer (202) is replayed, not 409:
    // the original request has already been answered.
    let again = c.call_idempotent("async-1", body.clone()).await.expect(202);
    assert!(replayed(&again));
    assert_eq!(again.header("location"), Some(location.as_str()));
    assert_eq!(again.data(), first.data());
    // Its delay passes on the server's clock.
    app.clock.advance(Duration::from_secs(1));
    let done = c.wait_terminal(&id).await;
    assert_eq!(done["status"], json!("succeeded"));
    // After it finished too: the original answer, as it was; the task itself
    // is read at the Location.
    let late = c.call_idempotent("async-1", body).await.expect(202);
    assert!(replayed(&late));
    assert_eq!(late.header("location"), Some(location.as_str()));
    assert_eq!(late.data(), first.data());
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(an_async_call_replays_202_with_location);

async fn a_refused_request_does_not_burn_the_key(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    c.call_idempotent("retry-me", json!({ "api": "sentiment", "input": {} }))
        .await
        .expect_error(400, "invalid_input");
    c.call_idempotent("retry-me", json!({ "api": "nope", "input": {} }))
        .await
        .expect_error(404, "api_not_found");
    raw_idempotent(&c, "retry-me", "{broken")
        .await
        .expect_error(400, "invalid_json");
    let ro = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&["apis:read"]),
            None,
            None,
        )
        .await;
    app.client(ro["secret"].as_str().unwrap())
        .call_idempotent("retry-me", sentiment("fixed"))
        .await
        .expect_error(403, "insufficient_permissions");
    assert_eq!(task_count(&c).await, 0);
    let ok = c
        .call_idempotent("retry-me", sentiment("fixed"))
        .await
        .expect(200);
    assert!(!replayed(&ok));
    let again = c
        .call_idempotent("retry-me", sentiment("fixed"))
        .await
        .expect(200);
    assert!(replayed(&again));
    assert_eq!(again.data(), ok.data());
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(a_refused_request_does_not_burn_the_key);

async fn a_spend_limit_refusal_does_not_burn_the_key(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let limited =
        admin::create_account(&*app.store, &app.config, "capped", "enterprise", Some("0"))
            .await
            .expect("account");
    let account = limited["id"].as_str().unwrap().to_owned();
    let c = app.client(&app.create_key(&account, KeyType::Live).await);
    let body = sentiment("capped");
    // Refused after the key was taken: it is released again.
    c.call_idempotent("cap-1", body.clone())
        .await
        .expect_error(403, "usage_limit_exceeded");
    c.call_idempotent("cap-1", sentiment("another"))
        .await
        .expect_error(403, "usage_limit_exceeded");
    admin::update_account(&*app.store, &app.config, &account, None, None, Some("none"))
        .await
        .expect("lift the limit");
    // In effect within the contract's 5 s, on the server's clock.
    app.clock.advance(Duration::from_secs(5));
    let ok = c.call_idempotent("cap-1", body.clone()).await.expect(200);
    assert!(!replayed(&ok));
    let again = c.call_idempotent("cap-1", body).await.expect(200);
    assert!(replayed(&again));
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(a_spend_limit_refusal_does_not_burn_the_key);

async fn the_key_is_at_most_255_characters(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let longest = "k".repeat(255);
    c.call_idempotent(&longest, sentiment("x"))
        .await
        .expect(200);
    assert!(replayed(
        &c.call_idempotent(&longest, sentiment("x"))
            .await
            .expect(200)
    ));
    let r = c
        .call_idempotent(&"k".repeat(256), sentiment("x"))
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(
        r.body["error"]["param"],
        json!("Idempotency-Key"),
        "{}",
        r.text
    );
    c.call_idempotent("", sentiment("x"))
        .await
        .expect_error(400, "invalid_parameter");
    let bytes = reqwest::header::HeaderValue::from_bytes("clé".as_bytes()).unwrap();
    let r = c
        .send(
            c.request(Method::POST, "call")
                .header("idempotency-key", bytes)
                .json(&sentiment("x")),
        )
        .await;
    r.expect_error(400, "invalid_parameter");
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(the_key_is_at_most_255_characters);

/// The usual reason to retry: the client gave up waiting and hung up. The
/// original request still runs to its answer, and a retry gets that answer:
/// not 409 for ever after, and never a second execution.
async fn a_client_that_hangs_up_gets_the_answer_on_retry(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let body =
        json!({ "api": "sentiment", "input": { "text": "gone" }, "sandbox": { "delay_ms": 1000 } });
    let pending = tokio::spawn({
        let (c, body) = (c.clone(), body.clone());
        async move { c.call_idempotent("hang-up", body).await }
    });
    // Hang up once the request is under way (its task exists).
    let started = Instant::now();
    let id = loop {
        let listed = c.get("tasks").await.expect(200);
        if let Some(id) = listed.data()["items"][0]["id"].as_str() {
            break id.to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the task never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    pending.abort();
    assert!(
        pending.await.is_err_and(|e| e.is_cancelled()),
        "the client was meant to hang up first"
    );
    // The task's delay passes on the server's clock.
    app.clock.advance(Duration::from_secs(1));
    assert_eq!(c.wait_terminal(&id).await["status"], json!("succeeded"));
    let started = Instant::now();
    let r = loop {
        // The answer is recorded just after the task ends.
        let r = c.call_idempotent("hang-up", body.clone()).await;
        if r.status != 409 || started.elapsed() > Duration::from_secs(2) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let r = r.expect(200);
    assert!(replayed(&r), "{}", r.text);
    assert_eq!(task_id(&r), id);
    assert_eq!(r.data()["status"], json!("succeeded"));
    assert_eq!(task_count(&c).await, 1);
    app.stop().await;
}
both!(a_client_that_hangs_up_gets_the_answer_on_retry);
