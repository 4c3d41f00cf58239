//! Hardening (issue 8): no cheap way to exhaust the service.

use crate::utils::{Backend, TestApp};

/// Any token is a valid HTTP method; made-up ones must not each create
/// metric series (which are never dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_methods_add_no_metric_series() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let anon = app.anonymous();
    for i in 0..1000 {
        let method = reqwest::Method::from_bytes(format!("X{i:04}").as_bytes()).unwrap();
        let path = ["tasks", "openapi.json", "/nowhere", "/healthz"][i % 4];
        let answer = anon.send(anon.request(method, path)).await;
        // (Without a key, /api/v1/tasks soon answers 429: failed authentications.)
        assert!(
            [401, 404, 405, 429].contains(&answer.status.as_u16()),
            "{}",
            answer.text
        );
    }
    let metrics = anon.get("/metrics").await.text;
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("taskgate_http_requests_total{"))
        .collect();
    assert!(
        !series.iter().any(|l| l.contains("method=\"X")),
        "a made-up method is a label: {series:#?}"
    );
    let other: Vec<&&str> = series
        .iter()
        .filter(|l| l.contains("method=\"other\""))
        .collect();
    // Four paths, a few statuses: a handful of series for 1,000 methods.
    assert!(!other.is_empty() && other.len() <= 8, "{other:#?}");
    app.stop().await;
}
