//! §1 and §6: the envelope on every answer, including the framework's own.

use serde_json::json;

use crate::utils::{Backend, TestApp, both, sentiment};

async fn success_and_errors_are_enveloped(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let r = c.call(sentiment("I love this")).await.expect(200);
    assert_eq!(r.data()["object"], json!("task"));
    // Unknown route, wrong method, bad JSON, non-object body, empty body.
    app.anonymous()
        .get("/nope")
        .await
        .expect_error(404, "route_not_found");
    c.get("nope").await.expect_error(404, "route_not_found");
    c.send(c.request(reqwest::Method::DELETE, "tasks"))
        .await
        .expect_error(405, "method_not_allowed");
    c.post_raw("call", "{not json")
        .await
        .expect_error(400, "invalid_json");
    c.post_raw("call", "[1,2]")
        .await
        .expect_error(400, "invalid_json");
    c.post_raw("call", "")
        .await
        .expect_error(400, "invalid_json");
    app.stop().await;
}
both!(success_and_errors_are_enveloped);

async fn body_over_the_limit_is_413(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.max_body_bytes = 4096)
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let big = format!(
        r#"{{"api":"sentiment","input":{{"text":"{}"}}}}"#,
        "a".repeat(5000)
    );
    c.post_raw("call", big.clone())
        .await
        .expect_error(413, "payload_too_large");
    // Without Content-Length (chunked), the limit still holds.
    let stream = futures_stream(big.into_bytes());
    c.send(c.request(reqwest::Method::POST, "call").body(stream))
        .await
        .expect_error(413, "payload_too_large");
    let r = c.get("tasks").await.expect(200);
    assert_eq!(
        r.data()["items"],
        json!([]),
        "a refused request changes nothing"
    );
    app.stop().await;
}
both!(body_over_the_limit_is_413);

fn futures_stream(bytes: Vec<u8>) -> reqwest::Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(1000).map(|c| Ok(c.to_vec())).collect();
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

async fn health_ready_metrics_and_openapi_need_no_key(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let anon = app.anonymous();
    assert_eq!(
        anon.get("/healthz").await.expect(200).data()["status"],
        json!("ok")
    );
    let ready = anon.get("/readyz").await.expect(200);
    assert_eq!(ready.data()["status"], json!("ready"));
    assert_eq!(
        ready.data()["checks"],
        json!({"storage": "up", "redis": "not_configured"})
    );
    app.client(&app.live)
        .call(sentiment("good"))
        .await
        .expect(200);
    let m = anon.get("/metrics").await;
    assert_eq!(m.status, 200);
    assert!(
        m.text.contains("taskgate_http_requests_total"),
        "{}",
        m.text
    );
    assert!(m.text.contains("taskgate_tasks_total"), "{}", m.text);
    let doc = anon.get("openapi.json").await;
    assert_eq!(doc.status, 200);
    assert!(
        doc.body["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc.text
    );
    assert!(
        doc.body["paths"]["/api/v1/call"]["post"].is_object(),
        "{}",
        doc.text
    );
    let docs = anon.get("/docs").await;
    assert_eq!(docs.status, 200);
    assert!(docs.text.contains("openapi.json"));
    app.stop().await;
}
both!(health_ready_metrics_and_openapi_need_no_key);
