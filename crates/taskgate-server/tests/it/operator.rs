//! Operator controls: `metrics_token` guards `/metrics`; the spend
//! ceiling's effect on the API is in `dashboard.rs` (with the forms that set
//! it) and in the store's conformance suite.

use serde_json::json;
use taskgate_providers::upstream::Secret;

use crate::utils::{Backend, TestApp};

const TOKEN: &str = "mt-4f9c2e7a1b8d";

/// With `metrics_token` set, `/metrics` answers only `Bearer <token>`;
/// without it, or with another, a 401 in the envelope that names no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_want_the_token_when_one_is_set() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.metrics_token = Some(Secret::new(TOKEN)))
        .start()
        .await
    else {
        return;
    };
    let anon = app.anonymous();
    let missing = anon
        .get("/metrics")
        .await
        .expect_error(401, "missing_authorization");
    assert_eq!(missing.header("www-authenticate"), Some("Bearer"));
    let metrics = |value: String| {
        anon.send(
            anon.request(reqwest::Method::GET, "/metrics")
                .header("authorization", value),
        )
    };
    let wrong = metrics(format!("Bearer {TOKEN}x"))
        .await
        .expect_error(401, "invalid_metrics_token");
    let prefix = metrics(format!("Bearer {}", &TOKEN[..6]))
        .await
        .expect_error(401, "invalid_metrics_token");
    let malformed = metrics(TOKEN.to_owned())
        .await
        .expect_error(401, "malformed_authorization");
    // An API key is not the metrics token.
    let key = metrics(format!("Bearer {}", app.live))
        .await
        .expect_error(401, "invalid_metrics_token");
    for r in [&missing, &wrong, &prefix, &malformed, &key] {
        assert!(
            !r.text.contains(TOKEN) && !r.text.contains(&TOKEN[..6]),
            "{}",
            r.text
        );
    }

    for scheme in ["Bearer", "bearer"] {
        let ok = metrics(format!("{scheme} {TOKEN}")).await;
        assert_eq!(ok.status, 200, "{}", ok.text);
        assert!(ok.header("content-type").unwrap().starts_with("text/plain"));
        assert!(
            ok.text.contains("taskgate_http_requests_total"),
            "{}",
            ok.text
        );
    }

    // The rest of the service is as open as before.
    anon.get("/healthz").await.expect(200);
    app.stop().await;
}

/// Guessing the token counts as failed authentication: after
/// `auth_failures_per_minute` wrong tries, the address gets 429, even with
/// the right token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_the_metrics_token_is_rate_limited() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.metrics_token = Some(Secret::new(TOKEN));
            c.auth_failures_per_minute = 3;
        })
        .start()
        .await
    else {
        return;
    };
    let anon = app.anonymous();
    let metrics = |value: String| {
        anon.send(
            anon.request(reqwest::Method::GET, "/metrics")
                .header("authorization", value),
        )
    };
    for i in 0..3 {
        metrics(format!("Bearer guess-{i}"))
            .await
            .expect_error(401, "invalid_metrics_token");
    }
    let blocked = metrics(format!("Bearer {TOKEN}"))
        .await
        .expect_error(429, "rate_limit_exceeded");
    assert_eq!(
        blocked.body["error"]["details"][0]["window"],
        json!("auth_failures")
    );
    app.stop().await;
}

/// Without a token, `/metrics` is open, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_open_without_a_token() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let r = app.anonymous().get("/metrics").await;
    assert_eq!(r.status, 200, "{}", r.text);
    app.stop().await;
}
