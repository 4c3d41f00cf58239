//! §4 POST /tasks/{id}/cancel, and money: cancelled tasks are not charged,
//! monthly spend limits stop live calls (§2 step 6).

use std::time::{Duration, Instant};

use crate::ops::admin;
use serde_json::{Value, json};
use taskgate_core::{ApiSlug, KeyId, KeyType, Mode, TaskId, Timestamp};
use taskgate_store::TaskRecord;

use crate::utils::{Backend, TestApp, TestClient, both, sentiment};

async fn start_slow(c: &TestClient, delay_ms: u64) -> String {
    let r = c
        .call(
            json!({ "api": "sentiment", "input": { "text": "I love this" }, "mode": "async",
                      "sandbox": { "delay_ms": delay_ms } }),
        )
        .await
        .expect(202);
    let status = r.data()["status"].as_str().unwrap();
    assert!(["queued", "running"].contains(&status), "{}", r.text);
    r.data()["id"].as_str().unwrap().to_owned()
}

async fn cancel(c: &TestClient, id: &str) -> crate::utils::Resp {
    c.post(&format!("tasks/{id}/cancel"), json!({})).await
}

/// A sync test call of another account, answered once the only test
/// worker is free: whatever held it before has ended and written what it
/// would write.
async fn once_the_worker_is_free(app: &TestApp) {
    let other = app.create_account("enterprise").await;
    let c = app.client(&app.create_key(&other, KeyType::Test).await);
    let r = c.call(sentiment("next")).await.expect(200);
    assert_eq!(r.data()["status"], json!("succeeded"));
}

/// Once the dispatcher has looked at the store: a task of another account
/// stored queued behind its back (as another instance stores one) runs only
/// once a look finds it.
async fn after_a_look_at_the_store(app: &TestApp) {
    let other = app.create_account("enterprise").await;
    let c = app.client(&app.create_key(&other, KeyType::Test).await);
    let now = Timestamp::now();
    let task = TaskRecord {
        input: json!({ "text": "found" }).to_string(),
        timeout_ms: 10_000,
        ..TaskRecord::queued(
            TaskId::at(now),
            other.parse().unwrap(),
            Mode::Test,
            ApiSlug::parse("sentiment").unwrap(),
            KeyId::new(),
            now,
        )
    };
    app.store.insert_task(&task).await.unwrap();
    let found = c.wait_terminal(&task.id.to_string()).await;
    assert_eq!(found["status"], json!("succeeded"), "{found}");
}

fn statuses(details: &Value) -> Vec<String> {
    details["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_owned())
        .collect()
}

async fn cancel_a_running_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let id = start_slow(&c, 5000).await;
    let r = cancel(&c, &id).await.expect(200);
    let t = r.data();
    assert_eq!(t["id"], json!(id));
    assert_eq!(t["object"], json!("task"));
    assert_eq!(t["status"], json!("cancelled"));
    assert_eq!(t["output"], json!(null));
    assert_eq!(t["error"], json!(null));
    assert_eq!(t["usage"]["cost_usd"], json!("0.000000"));
    assert!(t["completed_at"].is_string(), "{}", r.text);
    let status = c.get(&format!("call/{id}")).await.expect(200);
    assert_eq!(
        status.data(),
        t,
        "GET /call shows the cancelled task as cancel answered it"
    );
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let st = statuses(d.data());
    assert_eq!(st.first().map(String::as_str), Some("queued"));
    assert_eq!(st.last().map(String::as_str), Some("cancelled"));
    assert!(st.len() <= 3, "{st:?}");
    assert_eq!(
        d.data()["events"].as_array().unwrap().last().unwrap()["at"],
        t["completed_at"]
    );
    app.stop().await;
}
both!(cancel_a_running_task);

/// (Test tasks, on their own workers: one, so that a later call shows when
/// the cancelled execution has let go of it.)
async fn a_late_result_is_never_written(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.test_workers = Some(1))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let id = start_slow(&c, 800).await;
    let cancelled = cancel(&c, &id).await.expect(200).data().clone();
    assert_eq!(cancelled["status"], json!("cancelled"));
    // Well past the moment the execution would have finished, on the
    // server's clock; and its worker free again.
    app.clock.advance(Duration::from_millis(1500));
    once_the_worker_is_free(&app).await;
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let d = d.data();
    assert_eq!(d["status"], json!("cancelled"));
    assert_eq!(d["output"], json!(null));
    assert_eq!(d["error"], json!(null));
    assert_eq!(d["usage"]["cost_usd"], json!("0.000000"));
    assert_eq!(d["completed_at"], cancelled["completed_at"]);
    let st = statuses(d);
    assert_eq!(st.last().map(String::as_str), Some("cancelled"), "{st:?}");
    assert!(
        !st.iter().any(|s| s == "succeeded" || s == "failed"),
        "{st:?}"
    );
    // The list agrees.
    let list = c.get("tasks?status=cancelled").await.expect(200);
    assert_eq!(list.data()["items"][0]["id"], json!(id));
    assert_eq!(
        c.get("tasks?status=succeeded").await.expect(200).data()["items"],
        json!([])
    );
    app.stop().await;
}
both!(a_late_result_is_never_written);

async fn cancelling_twice_is_200_unchanged(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let id = start_slow(&c, 5000).await;
    let first = cancel(&c, &id).await.expect(200).data().clone();
    // A later cancel, on the server's clock.
    app.clock.advance(Duration::from_millis(20));
    let second = cancel(&c, &id).await.expect(200).data().clone();
    assert_eq!(first, second);
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let cancels = statuses(d.data())
        .iter()
        .filter(|s| *s == "cancelled")
        .count();
    assert_eq!(cancels, 1, "a second cancel records no second event");
    app.stop().await;
}
both!(cancelling_twice_is_200_unchanged);

async fn finished_tasks_are_not_cancellable(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let ok = c.call(sentiment("fine")).await.expect(200).data().clone();
    assert_eq!(ok["status"], json!("succeeded"));
    let failed = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" }, "sandbox": { "outcome": "failed" } }))
        .await
        .expect(200)
        .data()
        .clone();
    assert_eq!(failed["status"], json!("failed"));
    for t in [&ok, &failed] {
        let id = t["id"].as_str().unwrap();
        let r = cancel(&c, id)
            .await
            .expect_error(409, "task_not_cancellable");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(t["status"].as_str().unwrap()),
            "{}",
            r.text
        );
        // Nothing changed.
        assert_eq!(c.get(&format!("call/{id}")).await.expect(200).data(), t);
    }
    // Another mode's task, or another account's, is not found.
    let id = ok["id"].as_str().unwrap();
    cancel(&app.client(&app.live), id)
        .await
        .expect_error(404, "task_not_found");
    let other = app.create_account("enterprise").await;
    let other_test = app.create_key(&other, KeyType::Test).await;
    let slow = start_slow(&c, 5000).await;
    cancel(&app.client(&other_test), &slow)
        .await
        .expect_error(404, "task_not_found");
    assert_ne!(
        c.get(&format!("call/{slow}")).await.expect(200).data()["status"],
        json!("cancelled")
    );
    cancel(&c, &slow).await.expect(200);
    app.stop().await;
}
both!(finished_tasks_are_not_cancellable);

async fn a_waiting_sync_call_returns_the_cancelled_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let caller = c.clone();
    let started = Instant::now();
    // Far longer than the test may take: only the cancel can end this call.
    let call = tokio::spawn(async move {
        caller
            .call(json!({ "api": "sentiment", "input": { "text": "wait for me" }, "sandbox": { "delay_ms": 25000 } }))
            .await
    });
    // Another client finds the running task and cancels it.
    let other = app.client(&app.test);
    let mut id = None;
    for _ in 0..200 {
        let list = other.get("tasks?status=running").await.expect(200);
        if let Some(found) = list.data()["items"][0]["id"].as_str() {
            id = Some(found.to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let id = id.expect("the sync call's task never showed as running");
    let cancelled = cancel(&other, &id).await.expect(200).data().clone();
    let r = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the sync call did not return after its task was cancelled")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    let r = r.expect(200);
    assert_eq!(r.data()["id"], json!(id));
    assert_eq!(r.data()["status"], json!("cancelled"));
    assert_eq!(r.data()["output"], json!(null));
    assert_eq!(r.data()["usage"]["cost_usd"], json!("0.000000"));
    assert_eq!(
        r.header("location"),
        None,
        "a finished task has no Location"
    );
    assert_eq!(r.data(), &cancelled);
    app.stop().await;
}
both!(a_waiting_sync_call_returns_the_cancelled_task);

/// (Test tasks, on their own workers: one, so that a later call shows when
/// the cancelled execution has let go of it.)
async fn cancelled_tasks_cost_nothing_live_tasks_do(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.test_workers = Some(1))
        .start()
        .await
    else {
        return;
    };
    let test = app.client(&app.test);
    let id = start_slow(&test, 800).await;
    cancel(&test, &id).await.expect(200);
    // Past the moment the execution would have finished, on the server's
    // clock; and its worker free again.
    app.clock.advance(Duration::from_millis(1200));
    once_the_worker_is_free(&app).await;
    let t = test.get(&format!("call/{id}")).await.expect(200);
    assert_eq!(t.data()["status"], json!("cancelled"));
    assert_eq!(t.data()["usage"]["cost_usd"], json!("0.000000"));
    let live = app.client(&app.live);
    let t = live.call(sentiment("I love this")).await.expect(200);
    assert_eq!(t.data()["status"], json!("succeeded"));
    assert_eq!(t.data()["usage"]["cost_usd"], json!("0.000100"));
    // A live call refused before it ran costs nothing and leaves no task.
    live.call(json!({ "api": "sentiment", "input": {} }))
        .await
        .expect_error(400, "invalid_input");
    assert_eq!(
        live.get("tasks").await.expect(200).data()["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    app.stop().await;
}
both!(cancelled_tasks_cost_nothing_live_tasks_do);

async fn monthly_spend_limit_stops_live_calls(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    // Before the live key is first used, so no cached view of the account.
    let account = admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        None,
        None,
        Some("0.0002"),
    )
    .await
    .expect("update account");
    assert_eq!(account["monthly_spend_limit_usd"], json!("0.0002"));
    let live = app.client(&app.live);
    for _ in 0..2 {
        let r = live.call(sentiment("I love this")).await.expect(200);
        assert_eq!(r.data()["usage"]["cost_usd"], json!("0.000100"));
    }
    let r = live
        .call(sentiment("one too many"))
        .await
        .expect_error(403, "usage_limit_exceeded");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0.0002"),
        "{}",
        r.text
    );
    // Async too, and nothing was created.
    live.call(json!({ "api": "sentiment", "input": { "text": "x" }, "mode": "async" }))
        .await
        .expect_error(403, "usage_limit_exceeded");
    let list = live.get("tasks").await.expect(200);
    assert_eq!(list.data()["items"].as_array().unwrap().len(), 2);
    // The request's own errors come first (step 5 before step 6).
    live.call(json!({ "api": "sentiment", "input": {} }))
        .await
        .expect_error(400, "invalid_input");
    live.call(json!({ "api": "nope", "input": { "text": "x" } }))
        .await
        .expect_error(404, "api_not_found");
    // Reading still works; test mode is never charged, so never limited.
    live.get("apis").await.expect(200);
    let id = list.data()["items"][0]["id"].as_str().unwrap();
    live.get(&format!("call/{id}")).await.expect(200);
    live.get(&format!("tasks/{id}")).await.expect(200);
    let test = app.client(&app.test);
    for _ in 0..3 {
        assert_eq!(
            test.call(sentiment("free")).await.expect(200).data()["status"],
            json!("succeeded")
        );
    }
    app.stop().await;
}
both!(monthly_spend_limit_stops_live_calls);

async fn a_zero_spend_limit_blocks_live_calls_at_once(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let account =
        admin::create_account(&*app.store, &app.config, "capped", "enterprise", Some("0"))
            .await
            .expect("create account");
    assert_eq!(account["monthly_spend_limit_usd"], json!("0.00"));
    let id = account["id"].as_str().unwrap();
    let live = app.client(&app.create_key(id, KeyType::Live).await);
    live.call(sentiment("hello"))
        .await
        .expect_error(403, "usage_limit_exceeded");
    assert_eq!(
        live.get("tasks").await.expect(200).data()["items"],
        json!([])
    );
    let test = app.client(&app.create_key(id, KeyType::Test).await);
    test.call(sentiment("hello")).await.expect(200);
    // Lifting the limit (`none`) lets live calls through again.
    admin::update_account(&*app.store, &app.config, id, None, None, Some("none"))
        .await
        .unwrap();
    let live2 = app.client(&app.create_key(id, KeyType::Live).await);
    assert_eq!(
        live2.call(sentiment("hello")).await.expect(200).data()["status"],
        json!("succeeded")
    );
    app.stop().await;
}
both!(a_zero_spend_limit_blocks_live_calls_at_once);

/// A queued task (behind a busy worker) cancelled stays cancelled: it never
/// starts when a worker frees up. (Test tasks, on their own workers: one.)
async fn a_cancelled_queued_task_never_runs(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.test_workers = Some(1))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let busy = start_slow(&c, 60000).await;
    let queued = start_slow(&c, 0).await;
    // The only worker is busy, so the second task waits.
    for _ in 0..200 {
        if c.get(&format!("call/{busy}")).await.expect(200).data()["status"] == json!("running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        c.get(&format!("call/{queued}")).await.expect(200).data()["status"],
        json!("queued")
    );
    let r = cancel(&c, &queued).await.expect(200);
    assert_eq!(r.data()["status"], json!("cancelled"));
    assert_eq!(r.data()["started_at"], json!(null));
    assert_eq!(r.data()["duration_ms"], json!(null));
    // Free the worker; the poller and the nudge both had the queued task.
    cancel(&c, &busy).await.expect(200);
    let after = c.call(sentiment("next")).await.expect(200);
    assert_eq!(after.data()["status"], json!("succeeded"));
    // And the store's queued tasks were read since.
    after_a_look_at_the_store(&app).await;
    let d = c.get(&format!("tasks/{queued}")).await.expect(200);
    assert_eq!(d.data()["status"], json!("cancelled"));
    assert_eq!(statuses(d.data()), ["queued", "cancelled"]);
    assert_eq!(d.data()["attempts"], json!([]));
    app.stop().await;
}
both!(a_cancelled_queued_task_never_runs);

/// Cancelling really stops the execution: the worker it held is free at once
/// (with one worker, the next task runs now, not after the cancelled one's
/// delay). Repeated, because the cancel races the worker's claim. (Test
/// tasks, on their own workers: one.)
async fn cancelling_frees_the_worker_at_once(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.test_workers = Some(1);
            c.sync_wait_ms = 3000;
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    for round in 0..15 {
        let id = start_slow(&c, 20000).await;
        cancel(&c, &id).await.expect(200);
        let r = c.call(sentiment("next")).await;
        assert_eq!(
            r.status.as_u16(),
            200,
            "round {round}: the cancelled task still holds the worker: {}",
            r.text
        );
        assert_eq!(r.data()["status"], json!("succeeded"));
    }
    app.stop().await;
}
both!(cancelling_frees_the_worker_at_once);
