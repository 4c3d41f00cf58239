//! Test mode costs live traffic nothing: test tasks have a cap of running
//! tasks and a queue of their own per account, and workers of their own;
//! ended test tasks are deleted after `test_task_retention_days`.

use serde_json::{Value, json};
use taskgate_core::{KeyType, TaskId, Timestamp};
use taskgate_server::config::{ApiOverride, PlanLimits};

use crate::utils::{Backend, TestApp, TestClient, both};

/// A test task that runs until cancelled (the API's timeout is raised so
/// that it cannot end on its own while the test looks).
fn slow() -> Value {
    json!({"api": "sentiment", "input": {"text": "good"}, "mode": "async",
           "sandbox": {"delay_ms": 600000}})
}

async fn status(c: &TestClient, id: &str) -> String {
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    t.data()["status"].as_str().unwrap().to_owned()
}

/// Polls until task `id` has `want` (a task queued behind a cap starts as
/// soon as one ends, but not within the same request).
async fn until_status(c: &TestClient, id: &str, want: &str) {
    for _ in 0..200 {
        if status(c, id).await == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("task {id} never became {want}: {}", status(c, id).await);
}

async fn start(c: &TestClient) -> String {
    let r = c.call(slow()).await.expect(202);
    r.data()["id"].as_str().unwrap().to_owned()
}

/// The attack of issue 25: an account's test key fills what it may run
/// with slow sandbox tasks. Its test cap (by default a quarter of the live
/// cap, at least 2) holds its third test task `queued`; its live calls
/// still run at once: the running test tasks do not count against the live
/// cap (2 here, so they would fill it), and test tasks cannot take the live
/// worker (one here, three for test tasks). Another account's test tasks
/// wait only for the test workers.
async fn test_tasks_at_their_cap_never_delay_live_ones(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.workers = 1;
            c.test_workers = Some(3);
            c.plans.insert(
                "small".parse().unwrap(),
                PlanLimits {
                    per_minute: None,
                    per_day: None,
                    max_running_tasks: Some(2),
                    max_running_test_tasks: None,
                },
            );
            c.catalog.apis.insert(
                "sentiment".to_owned(),
                ApiOverride {
                    timeout_ms: Some(600_000),
                    ..Default::default()
                },
            );
        })
        .plan("small")
        .start()
        .await
    else {
        return;
    };
    let test = app.client(&app.test);
    let live = app.client(&app.live);
    let running = [start(&test).await, start(&test).await];
    for id in &running {
        until_status(&test, id, "running").await;
    }
    let third = start(&test).await;
    assert_eq!(status(&test, &third).await, "queued", "over the test cap");

    // A live sync call runs at once: it ends while the test tasks run and
    // the third waits.
    let r = live
        .call(json!({"api": "sentiment", "input": {"text": "good"}}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], json!("succeeded"), "{}", r.text);
    assert_eq!(r.data()["mode"], json!("live"));
    for id in &running {
        assert_eq!(status(&test, id).await, "running");
    }
    assert_eq!(status(&test, &third).await, "queued");

    // Another account's test task takes the last test worker; its next one
    // waits for a test worker, while its live call runs.
    let other = app.create_account("small").await;
    let other_test = app.client(&app.create_key(&other, KeyType::Test).await);
    let other_live = app.client(&app.create_key(&other, KeyType::Live).await);
    let other_running = start(&other_test).await;
    until_status(&other_test, &other_running, "running").await;
    let other_waiting = start(&other_test).await;
    assert_eq!(status(&other_test, &other_waiting).await, "queued");
    other_live
        .call(json!({"api": "sentiment", "input": {"text": "good"}}))
        .await
        .expect(200);
    assert_eq!(status(&test, &third).await, "queued");

    // One of the account's test tasks ends: its queued one starts.
    test.post(&format!("tasks/{}/cancel", running[0]), json!({}))
        .await
        .expect(200);
    until_status(&test, &third, "running").await;
    assert_eq!(status(&other_test, &other_waiting).await, "queued");

    for (c, id) in [
        (&test, &running[1]),
        (&test, &third),
        (&other_test, &other_running),
        (&other_test, &other_waiting),
    ] {
        c.post(&format!("tasks/{id}/cancel"), json!({}))
            .await
            .expect(200);
    }
    app.stop().await;
}
both!(test_tasks_at_their_cap_never_delay_live_ones);

/// `test_task_retention_days` (7 by default): ended test tasks older than
/// that are deleted whole, at an instance's start and every ten minutes,
/// while live tasks as old stay (`task_retention_days` is 0: kept for
/// ever), and so do newer test tasks.
async fn ended_test_tasks_past_their_retention_are_deleted(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let live = app.client(&app.live);
    let test = app.client(&app.test);
    let sentiment = json!({"api": "sentiment", "input": {"text": "new"}});
    let recent_test = test.call(sentiment.clone()).await.expect(200);
    let recent_test = recent_test.data()["id"].as_str().unwrap().to_owned();
    let recent_live = live.call(sentiment).await.expect(200);
    let recent_live = recent_live.data()["id"].as_str().unwrap().to_owned();
    // Each stored again as it was eight days ago.
    let eight_days_ago = Timestamp::now().minus_ms(8 * 86_400_000);
    let mut old = Vec::new();
    for (i, id) in [&recent_test, &recent_live].into_iter().enumerate() {
        let old_at = eight_days_ago.minus_ms(i as i64);
        let stored = app
            .store
            .get_task_by_id(TaskId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap();
        let mut t = stored.clone();
        t.id = TaskId::floor(old_at);
        t.created_at = old_at;
        app.store.insert_task(&t).await.unwrap();
        old.push(t.id.to_string());
    }
    let (old_test, old_live) = (&old[0], &old[1]);
    test.get(&format!("tasks/{old_test}")).await.expect(200);

    let keeper = app.another_instance(|_| {}).await;
    let mut gone = false;
    for _ in 0..200 {
        if test.get(&format!("tasks/{old_test}")).await.status.as_u16() == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(gone, "the eight-day-old test task is still there");
    live.get(&format!("tasks/{old_live}")).await.expect(200);
    test.get(&format!("tasks/{recent_test}")).await.expect(200);
    live.get(&format!("tasks/{recent_live}")).await.expect(200);
    keeper.stop().await.unwrap();
    app.stop().await;
}
both!(ended_test_tasks_past_their_retention_are_deleted);
