//! §3 Limits: per-account rate limits by plan, their headers, exactness under
//! concurrency, what counts and what does not, the day window.

use std::time::{Duration, Instant};

use crate::ops::admin;
use futures_util::future::join_all;
use serde_json::json;
use taskgate_core::KeyType;
use taskgate_server::config::PlanLimits;

use crate::utils::{Backend, Resp, TestApp, both, sentiment};

const TINY_POLICY: &str = r#""minute";q=5;w=60, "day";q=8;w=86400"#;

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `"minute";r=4;t=60` → ("minute", 4, 60).
fn parse_ratelimit(v: &str) -> (String, u64, u64) {
    let mut parts = v.split(';');
    let name = parts.next().unwrap().trim().trim_matches('"').to_owned();
    let (mut r, mut t) = (None, None);
    for p in parts {
        match p.trim().split_once('=') {
            Some(("r", n)) => r = n.parse().ok(),
            Some(("t", n)) => t = n.parse().ok(),
            _ => panic!("unexpected RateLimit parameter in {v:?}"),
        }
    }
    (name, r.expect("r"), t.expect("t"))
}

/// Checks the rate-limit headers against each other and the policy, and
/// returns the named window and its remaining count.
fn check_headers(r: &Resp, policy: &str) -> (String, u64) {
    assert_eq!(
        r.header("ratelimit-policy"),
        Some(policy),
        "{:?}",
        r.headers
    );
    let rl = r
        .header("ratelimit")
        .unwrap_or_else(|| panic!("no RateLimit header: {:?}", r.headers));
    let (window, remaining, t) = parse_ratelimit(rl);
    let quota = policy
        .split(", ")
        .find_map(|p| {
            let rest = p.strip_prefix(&format!("\"{window}\";q="))?;
            rest.split(';').next()?.parse::<u64>().ok()
        })
        .unwrap_or_else(|| panic!("RateLimit names {window:?}, not in the policy {policy}"));
    let max_t = if window == "minute" { 60 } else { 86_400 };
    assert!((1..=max_t).contains(&t), "{rl}");
    assert_eq!(
        r.header("x-ratelimit-limit"),
        Some(quota.to_string().as_str())
    );
    assert_eq!(
        r.header("x-ratelimit-remaining"),
        Some(remaining.to_string().as_str())
    );
    let reset: u64 = r
        .header("x-ratelimit-reset")
        .expect("X-RateLimit-Reset")
        .parse()
        .unwrap();
    let now = unix_now();
    assert!(
        reset + 2 >= now + t && reset <= now + t + 2,
        "reset {reset}, now {now}, t {t}"
    );
    (window, remaining)
}

fn assert_no_headers(r: &Resp) {
    for h in [
        "ratelimit-policy",
        "ratelimit",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ] {
        assert!(
            r.header(h).is_none(),
            "{h} on an unlimited plan: {:?}",
            r.headers
        );
    }
}

/// A 429 of the account's limit: `Retry-After` and `details` agree.
fn check_refusal(r: &Resp, window: &str, limit: u64) -> u64 {
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.body["error"]["code"], json!("rate_limit_exceeded"));
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("whole seconds");
    assert!(retry >= 1, "{retry}");
    let details = r.body["error"]["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details: {}", r.text));
    let d = &details[0];
    assert_eq!(d["window"], json!(window), "{}", r.text);
    assert_eq!(d["limit"], json!(limit), "{}", r.text);
    assert_eq!(d["retry_after"], json!(retry), "{}", r.text);
    let at = d["retry_at"].as_str().expect("retry_at");
    let at_ms = taskgate_core::Timestamp::parse_rfc3339(at)
        .expect("RFC 3339")
        .unix_ms();
    let expected = (unix_now() + retry) as i64 * 1000;
    assert!((at_ms - expected).abs() <= 2_000, "{at} vs now + {retry} s");
    let (named, remaining, t) = parse_ratelimit(r.header("ratelimit").expect("RateLimit on a 429"));
    assert_eq!((named.as_str(), remaining, t), (window, 0, retry));
    retry
}

async fn every_response_of_a_limited_plan_carries_the_headers(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let (live, test) = (app.client(&app.live), app.client(&app.test));
    let answers = [
        live.get("apis").await.expect(200),
        live.call(sentiment("fine")).await.expect(200),
        test.call(json!({ "api": "sentiment", "input": { "text": "x" }, "mode": "async" }))
            .await
            .expect(202),
        live.get("tasks/garbage")
            .await
            .expect_error(404, "task_not_found"),
        live.call(json!({ "api": "sentiment" }))
            .await
            .expect_error(400, "invalid_field"),
    ];
    for (i, r) in answers.iter().enumerate() {
        let (window, remaining) = check_headers(r, TINY_POLICY);
        // The minute is the tighter window all along (4 of 5 left vs 7 of 8).
        assert_eq!(window, "minute");
        assert_eq!(remaining, 4 - i as u64, "{:?}", r.headers);
    }
    let r = live.get("apis").await;
    check_refusal(&r, "minute", 5);
    check_headers(&r, TINY_POLICY);
    // No header on answers that were never authenticated.
    let anon = app.anonymous().get("apis").await.expect(401);
    assert!(anon.header("ratelimit").is_none() && anon.header("ratelimit-policy").is_none());
    app.stop().await;
}
both!(every_response_of_a_limited_plan_carries_the_headers);

async fn unlimited_plans_carry_no_headers(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("enterprise").start().await else {
        return;
    };
    let c = app.client(&app.live);
    assert_no_headers(&c.get("apis").await.expect(200));
    assert_no_headers(&c.call(sentiment("x")).await.expect(200));
    assert_no_headers(&c.get("tasks/garbage").await.expect(404));
    for _ in 0..20 {
        c.get("tasks").await.expect(200);
    }
    app.stop().await;
}
both!(unlimited_plans_carry_no_headers);

async fn the_limit_is_exact_under_concurrency(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let c = app.client(&app.live);
    let answers = join_all((0..40).map(|_| {
        let c = c.clone();
        async move { c.get("apis").await }
    }))
    .await;
    let accepted = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(
        accepted,
        5,
        "statuses: {:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let mut remaining: Vec<u64> = Vec::new();
    for r in &answers {
        if r.status == 200 {
            remaining.push(check_headers(r, TINY_POLICY).1);
        } else {
            check_refusal(r, "minute", 5);
            assert!(r.body["error"]["message"].is_string());
        }
    }
    // Each accepted request was counted once: remaining counts 4, 3, 2, 1, 0.
    remaining.sort_unstable();
    assert_eq!(remaining, vec![0, 1, 2, 3, 4]);
    app.stop().await;
}
both!(the_limit_is_exact_under_concurrency);

async fn refused_requests_do_not_count(backend: Backend) {
    let roomy = PlanLimits {
        per_minute: Some(100),
        per_day: Some(8),
        max_running_tasks: None,
        max_running_test_tasks: None,
    };
    let Some(app) = TestApp::builder(backend)
        .plan("tiny")
        .config(|c| {
            c.plans.insert("roomy".parse().unwrap(), roomy);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    for _ in 0..5 {
        c.get("apis").await.expect(200);
    }
    for _ in 0..20 {
        check_refusal(&c.get("apis").await, "minute", 5);
    }
    // Same day count, a roomier minute: had the 20 refusals counted, the day
    // (8) would be spent. Polls refused before the change reaches the key
    // cache do not count either.
    admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        Some("roomy"),
        None,
        None,
    )
    .await
    .expect("change plan");
    let started = Instant::now();
    let first = loop {
        let r = c.get("apis").await;
        if r.status == 200 {
            break r;
        }
        check_refusal(&r, "minute", 5);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the plan change never took effect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let policy = r#""minute";q=100;w=60, "day";q=8;w=86400"#;
    assert_eq!(check_headers(&first, policy), ("day".to_owned(), 2));
    assert_eq!(
        check_headers(&c.get("apis").await.expect(200), policy),
        ("day".to_owned(), 1)
    );
    assert_eq!(
        check_headers(&c.get("apis").await.expect(200), policy),
        ("day".to_owned(), 0)
    );
    check_refusal(&c.get("apis").await, "day", 8);
    app.stop().await;
}
both!(refused_requests_do_not_count);

async fn failed_authentications_do_not_count(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let acct = app.account_id.clone();
    let expired = app
        .create_key_with(&acct, KeyType::Live, None, None, Some(1))
        .await;
    let revoked = app
        .create_key_with(&acct, KeyType::Live, None, None, None)
        .await;
    admin::revoke_key(&*app.store, revoked["id"].as_str().unwrap())
        .await
        .unwrap();
    // Past the key's 1 ms of life on the server's clock.
    app.clock.advance(Duration::from_millis(5));
    for _ in 0..3 {
        app.client(expired["secret"].as_str().unwrap())
            .get("apis")
            .await
            .expect_error(401, "api_key_expired");
        app.client(revoked["secret"].as_str().unwrap())
            .get("apis")
            .await
            .expect_error(401, "invalid_api_key");
        app.anonymous()
            .get("apis")
            .await
            .expect_error(401, "missing_authorization");
    }
    let c = app.client(&app.live);
    for i in 0..5u64 {
        let r = c.get("apis").await.expect(200);
        assert_eq!(check_headers(&r, TINY_POLICY).1, 4 - i);
    }
    check_refusal(&c.get("apis").await, "minute", 5);
    app.stop().await;
}
both!(failed_authentications_do_not_count);

async fn suspended_requests_do_not_count(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let other = app.create_account("tiny").await;
    let key = app.create_key(&other, KeyType::Live).await;
    admin::update_account(
        &*app.store,
        &app.config,
        &other,
        None,
        Some("suspended"),
        None,
    )
    .await
    .unwrap();
    let c = app.client(&key);
    for _ in 0..10 {
        c.get("apis").await.expect_error(403, "account_suspended");
    }
    admin::update_account(&*app.store, &app.config, &other, None, Some("active"), None)
        .await
        .unwrap();
    let started = Instant::now();
    let first = loop {
        let r = c.get("apis").await;
        if r.status == 200 {
            break r;
        }
        r.expect_error(403, "account_suspended");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "reactivation never took effect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(check_headers(&first, TINY_POLICY).1, 4);
    app.stop().await;
}
both!(suspended_requests_do_not_count);

async fn requests_refused_after_authentication_count(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let acct = app.account_id.clone();
    let ro = app
        .restricted_client(&acct, Some(&["apis:read"]), None)
        .await;
    let all = ["apis:read", "tasks:read", "tasks:write"];
    let one = app
        .create_key_with(
            &acct,
            KeyType::Restricted,
            Some(&all),
            Some(&["sentiment"]),
            None,
        )
        .await;
    let one = app.client(one["secret"].as_str().unwrap());
    let live = app.client(&app.live);
    let answers: Vec<Resp> = vec![
        live.call(json!({ "api": "sentiment", "input": {} }))
            .await
            .expect_error(400, "invalid_input"),
        live.get("call/task_01JD0000000000000000000000")
            .await
            .expect_error(404, "task_not_found"),
        live.call(json!({ "api": "no-such-api", "input": {} }))
            .await
            .expect_error(404, "api_not_found"),
        ro.get("tasks")
            .await
            .expect_error(403, "insufficient_permissions"),
        one.call(json!({ "api": "token-count", "input": { "text": "x" } }))
            .await
            .expect_error(403, "insufficient_permissions"),
    ];
    for (i, r) in answers.iter().enumerate() {
        assert_eq!(
            check_headers(r, TINY_POLICY),
            ("minute".to_owned(), 4 - i as u64),
            "{}",
            r.text
        );
    }
    check_refusal(&live.get("apis").await, "minute", 5);
    check_refusal(&ro.get("apis").await, "minute", 5);
    app.stop().await;
}
both!(requests_refused_after_authentication_count);

async fn the_day_limit_holds_for_the_utc_day(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .plan("d")
        .config(|c| {
            c.plans.insert(
                "d".parse().unwrap(),
                PlanLimits {
                    per_minute: None,
                    per_day: Some(3),
                    max_running_tasks: None,
                    max_running_test_tasks: None,
                },
            );
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let policy = r#""day";q=3;w=86400"#;
    for i in 0..3u64 {
        let r = c.get("apis").await.expect(200);
        assert_eq!(check_headers(&r, policy), ("day".to_owned(), 2 - i));
    }
    let r = c.get("apis").await;
    let retry = check_refusal(&r, "day", 3);
    check_headers(&r, policy);
    // Retry once the UTC day is over.
    let to_midnight = 86_400 - unix_now() % 86_400;
    assert!(
        retry.abs_diff(to_midnight) <= 2,
        "retry {retry}, midnight in {to_midnight}"
    );
    let at = r.body["error"]["details"][0]["retry_at"].as_str().unwrap();
    assert!(at.contains("T00:00:0") || at.contains("T23:59:5"), "{at}");
    app.stop().await;
}
both!(the_day_limit_holds_for_the_utc_day);

async fn limits_belong_to_the_account_across_its_keys(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let acct = app.account_id.clone();
    let restricted = app
        .create_key_with(&acct, KeyType::Restricted, Some(&["apis:read"]), None, None)
        .await;
    let keys = [
        app.live.clone(),
        app.test.clone(),
        restricted["secret"].as_str().unwrap().to_owned(),
    ];
    let clients: Vec<_> = keys.iter().map(|k| app.client(k)).collect();
    let mut remaining = Vec::new();
    for i in 0..5 {
        let r = clients[i % 3].get("apis").await.expect(200);
        remaining.push(check_headers(&r, TINY_POLICY).1);
    }
    assert_eq!(remaining, vec![4, 3, 2, 1, 0]);
    for c in &clients {
        check_refusal(&c.get("apis").await, "minute", 5);
    }
    let another = app.create_key(&acct, KeyType::Live).await;
    check_refusal(&app.client(&another).get("apis").await, "minute", 5);
    // Another account on the same plan has its own count.
    let other = app.create_account("tiny").await;
    let theirs = app.client(&app.create_key(&other, KeyType::Live).await);
    let r = theirs.get("apis").await.expect(200);
    assert_eq!(check_headers(&r, TINY_POLICY).1, 4);
    app.stop().await;
}
both!(limits_belong_to_the_account_across_its_keys);

/// The minute is a rolling minute of the server's clock: a minute after the
/// limit was reached, requests are accepted again, and the day still counts
/// them.
async fn the_minute_frees_up_a_minute_later(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let c = app.client(&app.live);
    for _ in 0..5 {
        c.get("apis").await.expect(200);
    }
    check_refusal(&c.get("apis").await, "minute", 5);
    app.clock.advance(Duration::from_secs(59));
    let r = c.get("apis").await.expect_error(429, "rate_limit_exceeded");
    assert_eq!(r.header("retry-after"), Some("1"), "a second is left");
    app.clock.advance(Duration::from_secs(1));
    let r = c.get("apis").await.expect(200);
    let (window, remaining, _) = parse_ratelimit(r.header("ratelimit").expect("RateLimit"));
    // Six of the day's eight used; unless the UTC day ended meanwhile on
    // the clock, and then the minute is the tightest, one of five used.
    assert!(
        (window.as_str(), remaining) == ("day", 2) || (window.as_str(), remaining) == ("minute", 4),
        "{window} {remaining}"
    );
    app.stop().await;
}
both!(the_minute_frees_up_a_minute_later);
