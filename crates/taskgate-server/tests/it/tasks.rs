//! §4 GET /tasks (the history: filters, order, limits, stable cursors) and
//! GET /tasks/{id} (input, key, idempotency key, events, attempts).

use std::time::Duration;

use serde_json::{Value, json};
use taskgate_core::KeyType;
use taskgate_core::Timestamp;

use crate::utils::{Backend, TestApp, TestClient, both, sentiment};

/// A finished test-mode task of `api`; its id.
async fn make_task(c: &TestClient, api: &str, text: &str) -> String {
    let r = c
        .call(json!({ "api": api, "input": { "text": text } }))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], json!("succeeded"), "{}", r.text);
    r.data()["id"].as_str().unwrap().to_owned()
}

async fn make_failed_task(c: &TestClient) -> String {
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" },
                      "sandbox": { "outcome": "failed", "error_code": "upstream_error" } }))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], json!("failed"), "{}", r.text);
    r.data()["id"].as_str().unwrap().to_owned()
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {page}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A timestamp as the contract writes them: RFC 3339, UTC, milliseconds.
fn ms(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    assert!(
        s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.',
        "not RFC 3339 with ms: {s}"
    );
    Timestamp::parse_rfc3339(s)
        .unwrap_or_else(|| panic!("unparsable timestamp {s}"))
        .unix_ms()
}

async fn list_shape_and_default_order(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let empty = c.get("tasks").await.expect(200);
    assert_eq!(
        empty.data(),
        &json!({ "object": "list", "items": [], "has_more": false, "next_cursor": null })
    );

    let mut created = Vec::new();
    for i in 0..3 {
        created.push(make_task(&c, "sentiment", &format!("text {i}")).await);
    }
    let r = c.get("tasks").await.expect(200);
    let page = r.data();
    assert_eq!(page["object"], json!("list"));
    assert_eq!(page["has_more"], json!(false));
    assert_eq!(page["next_cursor"], json!(null));
    // Newest first by default.
    let mut newest_first = created.clone();
    newest_first.reverse();
    assert_eq!(ids(page), newest_first);
    for item in page["items"].as_array().unwrap() {
        assert!(
            item.get("output").is_none(),
            "list items carry no output: {item}"
        );
        for absent in ["input", "events", "attempts", "key_id"] {
            assert!(
                item.get(absent).is_none(),
                "list items carry no {absent}: {item}"
            );
        }
        assert_eq!(item["object"], json!("task"));
        assert_eq!(item["status"], json!("succeeded"));
        assert_eq!(item["mode"], json!("test"));
        assert_eq!(item["api"], json!("sentiment"));
        assert_eq!(item["usage"]["cost_usd"], json!("0.000000"));
        assert_eq!(item["error"], json!(null));
        ms(&item["created_at"]);
        ms(&item["completed_at"]);
        // The list item equals the task object minus its output.
        let mut full = c
            .get(&format!("call/{}", item["id"].as_str().unwrap()))
            .await
            .expect(200)
            .data()
            .clone();
        full.as_object_mut().unwrap().remove("output");
        assert_eq!(&full, item);
    }
    let asc = c.get("tasks?order=asc").await.expect(200);
    assert_eq!(ids(asc.data()), created);
    let desc = c.get("tasks?order=desc").await.expect(200);
    assert_eq!(ids(desc.data()), newest_first);

    // Live and test data are separate.
    assert_eq!(
        app.client(&app.live).get("tasks").await.expect(200).data()["items"],
        json!([])
    );
    app.stop().await;
}
both!(list_shape_and_default_order);

async fn limit_is_1_to_100(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    for _ in 0..3 {
        make_task(&c, "sentiment", "x").await;
    }
    let one = c.get("tasks?limit=1").await.expect(200);
    assert_eq!(ids(one.data()).len(), 1);
    assert_eq!(one.data()["has_more"], json!(true));
    assert!(one.data()["next_cursor"].is_string());
    let r = c.get("tasks?limit=100").await.expect(200);
    assert_eq!(ids(r.data()).len(), 3);
    assert_eq!(r.data()["has_more"], json!(false));
    // Exactly as many as the limit: no more pages.
    let r = c.get("tasks?limit=3").await.expect(200);
    assert_eq!(ids(r.data()).len(), 3);
    assert_eq!(r.data()["has_more"], json!(false));
    assert_eq!(r.data()["next_cursor"], json!(null));
    for bad in ["0", "101", "x", "-1", "1.5", "", "1e1"] {
        let r = c
            .get(&format!("tasks?limit={bad}"))
            .await
            .expect_error(400, "invalid_parameter");
        assert_eq!(
            r.body["error"]["param"],
            json!("limit"),
            "limit={bad}: {}",
            r.text
        );
    }
    app.stop().await;
}
both!(limit_is_1_to_100);

async fn status_and_api_filters(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let ok_sentiment = make_task(&c, "sentiment", "I love this").await;
    let ok_tokens = make_task(&c, "token-count", "count me").await;
    let failed = make_failed_task(&c).await;
    let slow = c
        .call(
            json!({ "api": "sentiment", "input": { "text": "slow" }, "mode": "async",
                      "sandbox": { "delay_ms": 60000 } }),
        )
        .await
        .expect(202);
    let slow = slow.data()["id"].as_str().unwrap().to_owned();
    let cancelled = c
        .post(&format!("tasks/{slow}/cancel"), json!({}))
        .await
        .expect(200);
    assert_eq!(cancelled.data()["status"], json!("cancelled"));

    let r = c.get("tasks?status=succeeded").await.expect(200);
    assert_eq!(ids(r.data()), vec![ok_tokens.clone(), ok_sentiment.clone()]);
    let r = c.get("tasks?status=failed").await.expect(200);
    assert_eq!(ids(r.data()), vec![failed.clone()]);
    assert_eq!(
        r.data()["items"][0]["error"]["code"],
        json!("upstream_error")
    );
    let r = c.get("tasks?status=failed,cancelled").await.expect(200);
    assert_eq!(ids(r.data()), vec![slow.clone(), failed.clone()]);
    // Spaces around the commas and repeats are tolerated.
    let r = c
        .get("tasks?status=cancelled,%20failed,failed")
        .await
        .expect(200);
    assert_eq!(ids(r.data()), vec![slow.clone(), failed.clone()]);
    let r = c.get("tasks?status=queued,running").await.expect(200);
    assert_eq!(ids(r.data()), Vec::<String>::new());
    for bad in ["done", "succeeded,done", "", "SUCCEEDED", "succeeded,"] {
        let r = c
            .get(&format!("tasks?status={bad}"))
            .await
            .expect_error(400, "invalid_parameter");
        assert_eq!(
            r.body["error"]["param"],
            json!("status"),
            "status={bad}: {}",
            r.text
        );
    }

    let r = c.get("tasks?api=token-count").await.expect(200);
    assert_eq!(ids(r.data()), vec![ok_tokens.clone()]);
    let r = c
        .get("tasks?api=sentiment&status=succeeded")
        .await
        .expect(200);
    assert_eq!(ids(r.data()), vec![ok_sentiment.clone()]);
    // An API without tasks (or no longer in the catalog) is an empty list.
    let r = c.get("tasks?api=language-detect").await.expect(200);
    assert_eq!(ids(r.data()), Vec::<String>::new());
    let r = c.get("tasks?api=no-such-api").await.expect(200);
    assert_eq!(ids(r.data()), Vec::<String>::new());
    let r = c
        .get("tasks?api=")
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("api"));
    app.stop().await;
}
both!(status_and_api_filters);

async fn created_after_and_before(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let mut tasks = Vec::new();
    for i in 0..3 {
        if i > 0 {
            // Each made a little later on the server's clock.
            app.clock.advance(Duration::from_millis(15));
        }
        let id = make_task(&c, "sentiment", "x").await;
        let created = c.get(&format!("call/{id}")).await.expect(200).data()["created_at"].clone();
        tasks.push((id, created.as_str().unwrap().to_owned()));
    }
    let (a, b, cc) = (&tasks[0], &tasks[1], &tasks[2]);
    assert!(ms(&json!(a.1)) < ms(&json!(b.1)) && ms(&json!(b.1)) < ms(&json!(cc.1)));
    let enc = |s: &str| s.replace(':', "%3A").replace('+', "%2B");

    // Both bounds are exclusive.
    let r = c
        .get(&format!("tasks?created_after={}", enc(&b.1)))
        .await
        .expect(200);
    assert_eq!(ids(r.data()), vec![cc.0.clone()]);
    let r = c
        .get(&format!("tasks?created_before={}", enc(&b.1)))
        .await
        .expect(200);
    assert_eq!(ids(r.data()), vec![a.0.clone()]);
    let r = c
        .get(&format!(
            "tasks?created_after={}&created_before={}&order=asc",
            enc(&a.1),
            enc(&cc.1)
        ))
        .await
        .expect(200);
    assert_eq!(ids(r.data()), vec![b.0.clone()]);
    // Any RFC 3339 form: seconds only, an offset.
    let r = c
        .get("tasks?created_after=2000-01-01T00:00:00Z")
        .await
        .expect(200);
    assert_eq!(ids(r.data()).len(), 3);
    let r = c
        .get(&format!(
            "tasks?created_after={}",
            enc("2000-01-01T02:00:00+02:00")
        ))
        .await
        .expect(200);
    assert_eq!(ids(r.data()).len(), 3);
    let r = c
        .get("tasks?created_before=2000-01-01T00:00:00Z")
        .await
        .expect(200);
    assert_eq!(ids(r.data()).len(), 0);
    let r = c
        .get("tasks?created_after=2999-01-01T00:00:00.000Z")
        .await
        .expect(200);
    assert_eq!(ids(r.data()).len(), 0);

    for param in ["created_after", "created_before"] {
        for bad in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01",
            "1700000000",
            "",
        ] {
            let r = c
                .get(&format!("tasks?{param}={bad}"))
                .await
                .expect_error(400, "invalid_parameter");
            assert_eq!(
                r.body["error"]["param"],
                json!(param),
                "{param}={bad}: {}",
                r.text
            );
        }
    }
    app.stop().await;
}
both!(created_after_and_before);

async fn unknown_and_bad_parameters(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    for _ in 0..2 {
        make_task(&c, "sentiment", "x").await;
    }
    let r = c
        .get("tasks?foo=1")
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("foo"));
    let r = c
        .get("tasks?limit=5&page=2")
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("page"));
    let r = c
        .get("tasks?order=newest")
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("order"));
    let r = c
        .get("tasks?limit=1&limit=2")
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("limit"));

    // Cursors: garbage, another list's cursor, a cursor for the other order.
    let apis_cursor = app
        .client(&app.test)
        .get("apis?limit=1")
        .await
        .expect(200)
        .data()["next_cursor"]
        .clone();
    let apis_cursor = apis_cursor.as_str().unwrap().to_owned();
    for bad in [
        "garbage",
        "dGFza3M6ZDp4",
        "",
        "%%%",
        "desc_",
        "up_01JD0000000000000000000000",
        "desc_01jd0000000000000000000000",
        "asc_81JD0000000000000000000000",
        apis_cursor.as_str(),
    ] {
        let r = c
            .get(&format!("tasks?cursor={bad}"))
            .await
            .expect_error(400, "invalid_parameter");
        assert_eq!(
            r.body["error"]["param"],
            json!("cursor"),
            "cursor={bad}: {}",
            r.text
        );
    }
    let desc = c.get("tasks?limit=1").await.expect(200);
    let cursor = desc.data()["next_cursor"].as_str().unwrap().to_owned();
    let r = c
        .get(&format!("tasks?order=asc&cursor={cursor}"))
        .await
        .expect_error(400, "invalid_parameter");
    assert_eq!(r.body["error"]["param"], json!("cursor"));
    // The same cursor with its own order, or without naming it, works.
    c.get(&format!("tasks?order=desc&cursor={cursor}"))
        .await
        .expect(200);
    let r = c.get(&format!("tasks?cursor={cursor}")).await.expect(200);
    assert_eq!(ids(r.data()).len(), 1);
    app.stop().await;
}
both!(unknown_and_bad_parameters);

/// Pages through with `limit=3`, calling `between` after each page that has
/// more; returns the ids in the order seen.
async fn page_all(c: &TestClient, order: &str, mut between: impl AsyncFnMut(usize)) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page_no in 0.. {
        assert!(page_no < 50, "paging never ends");
        let path = match &cursor {
            None => format!("tasks?limit=3&order={order}"),
            Some(cur) => format!("tasks?limit=3&order={order}&cursor={cur}"),
        };
        let r = c.get(&path).await.expect(200);
        let page = r.data();
        let items = ids(page);
        assert!(items.len() <= 3);
        seen.extend(items);
        if page["has_more"] != json!(true) {
            assert_eq!(page["next_cursor"], json!(null));
            break;
        }
        cursor = Some(
            page["next_cursor"]
                .as_str()
                .expect("next_cursor with has_more")
                .to_owned(),
        );
        between(page_no).await;
    }
    seen
}

async fn pagination_is_stable_while_tasks_are_created(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let mut originals = Vec::new();
    for i in 0..8 {
        originals.push(make_task(&c, "sentiment", &format!("original {i}")).await);
    }

    // Newest first: tasks created while paging are newer than the first page,
    // so they never show; every original shows exactly once.
    let mut created_during = Vec::new();
    let seen = page_all(&c, "desc", async |_| {
        for _ in 0..2 {
            created_during.push(make_task(&c, "sentiment", "during desc").await);
        }
    })
    .await;
    let mut expected = originals.clone();
    expected.reverse();
    assert_eq!(
        seen, expected,
        "desc pages must hold each original task once, in order"
    );
    assert_eq!(created_during.len(), 4, "3 pages of 3 for 8 tasks: 2 gaps");

    // Oldest first: everything that exists when paging starts comes first, in
    // order; tasks created while paging appear only after them, at the end.
    let before: Vec<String> = originals
        .iter()
        .chain(created_during.iter())
        .cloned()
        .collect();
    let mut created_asc = Vec::new();
    let seen = page_all(&c, "asc", async |page_no| {
        if page_no < 3 {
            for _ in 0..2 {
                created_asc.push(make_task(&c, "sentiment", "during asc").await);
            }
        }
    })
    .await;
    let expected: Vec<String> = before.iter().chain(created_asc.iter()).cloned().collect();
    assert_eq!(
        seen, expected,
        "asc pages: the existing tasks once each, new ones at the end"
    );
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "no task seen twice");

    // Filters keep working across pages (the client sends them again).
    for _ in 0..4 {
        make_failed_task(&c).await;
    }
    let mut failed_seen = Vec::new();
    let mut path = "tasks?status=failed&limit=3".to_owned();
    loop {
        let r = c.get(&path).await.expect(200);
        for item in r.data()["items"].as_array().unwrap() {
            assert_eq!(item["status"], json!("failed"));
            failed_seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match r.data()["next_cursor"].as_str() {
            Some(cur) => path = format!("tasks?status=failed&limit=3&cursor={cur}"),
            None => break,
        }
    }
    assert_eq!(failed_seen.len(), 4);
    app.stop().await;
}
both!(pagination_is_stable_while_tasks_are_created);

async fn details_of_a_succeeded_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let key = app
        .create_key_with(&app.account_id, KeyType::Test, None, None, None)
        .await;
    let key_id = key["id"].as_str().unwrap().to_owned();
    let c = app.client(key["secret"].as_str().unwrap());
    let input = json!({ "text": "I love this" });
    let r = c
        .call_idempotent(
            "order-1234",
            json!({ "api": "sentiment", "input": input, "metadata": { "order": "1234" } }),
        )
        .await
        .expect(200);
    let task = r.data().clone();
    let id = task["id"].as_str().unwrap();
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let d = d.data();

    // The task object, plus the details.
    for (k, v) in task.as_object().unwrap() {
        assert_eq!(&d[k], v, "details.{k} differs from the task object");
    }
    assert_eq!(d["input"], input);
    assert_eq!(d["key_id"], json!(key_id));
    assert_eq!(d["idempotency_key"], json!("order-1234"));
    assert_eq!(d["output"]["label"], json!("positive"));

    let events = d["events"].as_array().unwrap();
    let statuses: Vec<&str> = events
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "running", "succeeded"]);
    let times: Vec<i64> = events.iter().map(|e| ms(&e["at"])).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "events out of order: {events:?}"
    );
    assert_eq!(events[0]["at"], d["created_at"]);
    assert_eq!(events[1]["at"], d["started_at"]);
    assert_eq!(events[2]["at"], d["completed_at"]);
    assert_eq!(d["duration_ms"], json!(times[2] - times[1]));

    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let a = &attempts[0];
    assert_eq!(
        a["provider"],
        json!("sandbox"),
        "test mode never reaches a provider"
    );
    assert_eq!(a["target"], json!("sentiment"));
    assert_eq!(a["outcome"], json!("succeeded"));
    assert!(a["duration_ms"].is_u64(), "{a}");
    let started = ms(&a["started_at"]);
    assert!(started >= times[1] && started <= times[2], "{a}");

    // A task made without Idempotency-Key has none; a live one shows its
    // provider and target.
    let live = app.client(&app.live);
    let id = live.call(sentiment("meh")).await.expect(200).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let d = live.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(d.data()["idempotency_key"], json!(null));
    assert_eq!(d.data()["mode"], json!("live"));
    assert_eq!(d.data()["attempts"][0]["provider"], json!("builtin"));
    assert_eq!(d.data()["attempts"][0]["target"], json!("vader"));
    assert_eq!(d.data()["attempts"][0]["outcome"], json!("succeeded"));
    // The other mode's task is not found.
    c.get(&format!("tasks/{id}"))
        .await
        .expect_error(404, "task_not_found");
    app.stop().await;
}
both!(details_of_a_succeeded_task);

async fn details_of_a_failed_task(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    let id = make_failed_task(&c).await;
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    let d = d.data();
    assert_eq!(d["status"], json!("failed"));
    assert_eq!(d["output"], json!(null));
    assert_eq!(d["error"]["code"], json!("upstream_error"));
    assert!(!d["error"]["message"].as_str().unwrap().is_empty());
    assert_eq!(d["usage"]["cost_usd"], json!("0.000000"));
    let events = d["events"].as_array().unwrap();
    let statuses: Vec<&str> = events
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "running", "failed"]);
    for e in events {
        ms(&e["at"]);
    }
    assert_eq!(events[2]["at"], d["completed_at"]);
    let a = &d["attempts"][0];
    assert_eq!(a["outcome"], json!("failed"));
    assert_eq!(a["provider"], json!("sandbox"));

    // A timed-out task: its last event is `failed` too.
    let r = c
        .call(json!({ "api": "sentiment", "input": { "text": "x" }, "timeout_ms": 100, "sandbox": { "outcome": "timeout" } }))
        .await
        .expect(200);
    let id = r.data()["id"].as_str().unwrap();
    let d = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(d.data()["error"]["code"], json!("timeout"));
    assert_eq!(
        d.data()["events"].as_array().unwrap().last().unwrap()["status"],
        json!("failed")
    );
    app.stop().await;
}
both!(details_of_a_failed_task);
