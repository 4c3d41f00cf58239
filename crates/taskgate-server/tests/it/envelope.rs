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
    let r = c.post_raw("call", big.clone()).await;
    // The body was not read to its end: the connection is not kept.
    assert_eq!(r.header("connection"), Some("close"), "{}", r.text);
    r.expect_error(413, "payload_too_large");
    // Without Content-Length (chunked), the limit still holds.
    let stream = futures_stream(big.into_bytes());
    let r = c
        .send(c.request(reqwest::Method::POST, "call").body(stream))
        .await;
    assert_eq!(r.header("connection"), Some("close"), "{}", r.text);
    r.expect_error(413, "payload_too_large");
    let r = c.get("tasks").await.expect(200);
    assert_eq!(
        r.data()["items"],
        json!([]),
        "a refused request changes nothing"
    );
    app.stop().await;
}
both!(body_over_the_limit_is_413);

/// Issue 25: a call's body limit follows the catalog (the largest input an
/// API takes, 4 MiB without transcription APIs, plus 64 KiB), whatever the
/// larger `max_body_bytes`; within it, a body of many small values is
/// refused before it costs more than its budget; nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_bodies_are_bounded_by_the_catalog_and_a_value_budget() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    assert_eq!(app.config.max_body_bytes, 10 * 1024 * 1024);
    let c = app.client(&app.live);
    // The catalog's largest input (each API's details say it).
    let mut largest = 0;
    let apis = c.get("apis?limit=100").await.expect(200);
    for api in apis.data()["items"].as_array().unwrap() {
        let slug = api["slug"].as_str().unwrap();
        let details = c.get(&format!("apis/{slug}")).await.expect(200);
        largest = largest.max(
            details.data()["limits"]["max_input_bytes"]
                .as_u64()
                .unwrap(),
        );
    }
    let limit = largest as usize + 64 * 1024;
    assert!(limit < 5 * 1024 * 1024, "{limit}");
    // 10 MiB of an array, declared: refused before it is sent (the answer
    // comes while the client is still sending).
    for path in [
        "/api/v1/call",
        "/openai/v1/chat/completions",
        "/openai/v1/embeddings",
    ] {
        let answer = declare_and_read(&app, path, 10 * 1024 * 1024).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(answer.contains(&limit.to_string()), "{answer}");
    }
    // Chunked, it is read up to the limit only.
    let mut ten = br#"{"api":"sentiment","input":{"text":"x","a":["#.to_vec();
    while ten.len() < limit + 1024 {
        ten.extend_from_slice(b"0,");
    }
    ten.extend_from_slice(b"0]}}");
    c.send(
        c.request(reqwest::Method::POST, "call")
            .body(futures_stream(ten)),
    )
    .await
    .expect_error(413, "payload_too_large");
    // Under the limit, an array of a million zeros: too many values for a
    // body of this size, refused as such (not parsed whole).
    let mut many = br#"{"api":"sentiment","input":{"text":"x","a":["#.to_vec();
    while many.len() < limit - 1024 {
        many.extend_from_slice(b"0,");
    }
    many.extend_from_slice(b"0]}}");
    assert!(many.len() < limit);
    let r = c
        .post_raw("call", many)
        .await
        .expect_error(400, "invalid_json");
    let budget = (limit / 8).min(512 * 1024);
    assert!(
        r.text.contains(&format!("more than {budget} JSON values")),
        "{}",
        r.text
    );
    // A big string is few values: past the body limit, 413; within it but
    // past the API's own limit, 400 invalid_input as before.
    let text = "a".repeat(limit - 1000);
    c.call(json!({"api": "sentiment", "input": {"text": text}}))
        .await
        .expect_error(400, "invalid_input");
    let r = c.get("tasks").await.expect(200);
    assert_eq!(r.data()["items"], json!([]), "nothing was stored");
    app.stop().await;
}

/// Sends headers declaring a JSON body of `length` and its first bytes, and
/// reads what the server answers.
async fn declare_and_read(app: &TestApp, path: &str, length: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n[0,0,0,",
        app.live
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The answer, to its end (the server closes the connection after it,
    // or we stop reading once its body is in).
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&answer).ends_with('}') {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no whole answer before the body was sent"),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

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
