//! Hardening (issue 8): no cheap way to exhaust the service.

use serde_json::json;

use crate::utils::{Backend, TestApp, both, sentiment};

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

/// A provider with a bug: it panics when the input asks it to.
struct Panicky;

#[async_trait::async_trait]
impl taskgate_providers::Provider for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }

    fn apis(&self) -> Vec<taskgate_providers::ApiSpec> {
        vec![taskgate_providers::ApiSpec {
            slug: "echo".to_owned(),
            name: "Echo".to_owned(),
            description: "Echoes its input, or panics.".to_owned(),
            kind: "classification".to_owned(),
            provider: "panicky".to_owned(),
            pricing: taskgate_providers::Pricing::PerCall { price_nanos: 0 },
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: serde_json::json!({"type": "object"}),
            examples: Vec::new(),
            timeout_ms: 10_000,
            max_input_bytes: 1_000,
        }]
    }

    async fn execute(
        &self,
        _api: &str,
        input: &serde_json::Value,
        _ctx: &mut taskgate_providers::ExecContext,
    ) -> Result<taskgate_providers::Execution, taskgate_providers::ExecError> {
        if input["panic"] == serde_json::json!(true) {
            panic!("a provider bug");
        }
        Ok(taskgate_providers::Execution {
            output: input.clone(),
            usage: Default::default(),
        })
    }
}

/// A panic in an execution ends its task `failed` with `internal_error`, its
/// lease released, and the (only) worker goes on to the next task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_execution_fails_its_task_and_the_worker_goes_on() {
    use std::collections::HashSet;
    use std::sync::Arc;

    use taskgate_core::{AccountId, ApiSlug, KeyId, Mode, RunnerId, TaskId, TaskStatus, Timestamp};
    use taskgate_server::catalog::Catalog;
    use taskgate_server::config::CatalogConfig;
    use taskgate_server::executor::{Executor, Told};
    use taskgate_store::TaskRecord;

    let path = std::env::temp_dir().join(format!(
        "taskgate-panic-{}.db",
        taskgate_core::RequestId::new()
    ));
    let store = taskgate_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let catalog = Catalog::build(
        &CatalogConfig::default(),
        vec![Arc::new(Panicky)],
        &HashSet::new(),
    )
    .unwrap();
    let settings = taskgate_server::executor::Settings {
        runner: RunnerId::parse("panic-test").unwrap(),
        workers: taskgate_server::executor::Workers { live: 1, test: 1 },
        plans: Default::default(),
        lease: std::time::Duration::from_secs(30),
        telemetry: Arc::new(taskgate_server::telemetry::Telemetry::off(false)),
    };
    let executor = Executor::start(
        store.clone(),
        Arc::new(catalog),
        settings,
        None,
        taskgate_core::Clock::system(),
    )
    .await
    .unwrap();
    let task = |input: &str| {
        let now = Timestamp::now();
        TaskRecord {
            input: input.to_owned(),
            timeout_ms: 10_000,
            ..TaskRecord::queued(
                TaskId::at(now),
                AccountId::new(),
                Mode::Live,
                ApiSlug::parse("echo").unwrap(),
                KeyId::new(),
                now,
            )
        }
    };
    for (input, ends) in [
        (r#"{"panic":true}"#, TaskStatus::Failed),
        (r#"{"panic":false}"#, TaskStatus::Succeeded),
        (r#"{"panic":true}"#, TaskStatus::Failed),
        (r#"{"panic":false}"#, TaskStatus::Succeeded),
    ] {
        let t = task(input);
        let done = executor.wait(t.id);
        executor
            .enqueue(t.clone(), None, Told::AtOnce)
            .await
            .unwrap();
        let finished = tokio::time::timeout(std::time::Duration::from_secs(10), done)
            .await
            .expect("the task ends")
            .unwrap();
        assert_eq!(finished.status, ends, "{input}");
        let stored = store.get_task_by_id(t.id).await.unwrap().unwrap();
        assert_eq!(stored.status, ends);
        assert_eq!(stored.lease_until, None);
        if ends == TaskStatus::Failed {
            assert_eq!(stored.error.unwrap().code, "internal_error");
        }
    }
    executor.shutdown(std::time::Duration::from_secs(1)).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// `auth_failures_per_minute = 0` turns the failed-authentication limit off:
/// failures answer 401 for ever, and never crash a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_failed_authentication_limit_when_it_is_zero() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.auth_failures_per_minute = 0)
        .start()
        .await
    else {
        return;
    };
    let bad = app.client("tg_not_a_key");
    for _ in 0..40 {
        bad.get("tasks").await.expect_error(401, "invalid_api_key");
    }
    app.client(&app.live).get("tasks").await.expect(200);
    app.stop().await;
}

/// A restricted key with `allowed_apis` sees, reads and cancels only the
/// tasks of those APIs: another API's task is 404 everywhere, and lists
/// leave it out.
async fn restricted_keys_see_only_their_apis_tasks(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let live = app.client(&app.live);
    let mine = live.call(sentiment("good")).await.expect(200);
    let mine = mine.data()["id"].as_str().unwrap().to_owned();
    let other = live
        .call(json!({"api": "token-count", "input": {"text": "hello"}}))
        .await
        .expect(200);
    let other = other.data()["id"].as_str().unwrap().to_owned();
    let restricted = app
        .restricted_client(
            &app.account_id,
            Some(&["tasks:read", "tasks:write"]),
            Some(&["sentiment"]),
        )
        .await;

    let listed = restricted.get("tasks").await.expect(200);
    let ids: Vec<&str> = listed.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let filtered = restricted.get("tasks?api=token-count").await.expect(200);
    assert_eq!(filtered.data()["items"], json!([]));

    restricted.get(&format!("call/{mine}")).await.expect(200);
    for path in [
        format!("call/{other}"),
        format!("tasks/{other}"),
        format!("tasks/{other}/stream"),
    ] {
        restricted
            .get(&path)
            .await
            .expect_error(404, "task_not_found");
    }
    restricted
        .post(&format!("tasks/{other}/cancel"), json!({}))
        .await
        .expect_error(404, "task_not_found");
    // Its own API's finished task answers as usual.
    restricted
        .post(&format!("tasks/{mine}/cancel"), json!({}))
        .await
        .expect_error(409, "task_not_cancellable");
    // The full key still sees both.
    let all = live.get("tasks").await.expect(200);
    assert_eq!(all.data()["items"].as_array().unwrap().len(), 2);
    app.stop().await;
}
both!(restricted_keys_see_only_their_apis_tasks);

/// A request that made its task and died before its answer was recorded
/// (here: a record forged in that state) leaves the task on the key: the
/// next request with the key, once the record is stale, answers with that
/// task and never makes a second one.
async fn a_retry_after_a_lost_answer_returns_the_original_task(backend: Backend) {
    use sha2::{Digest, Sha256};
    use taskgate_core::{AccountId, IdempotencyKey, Mode, RequestId, TaskId, Timestamp};
    use taskgate_store::{IdempotencyBegin, IdempotencyState};

    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let body = json!({"api": "sentiment", "input": {"text": "good"}, "mode": "async"});
    let original = c.call(body.clone()).await.expect(202);
    let task_id = original.data()["id"].as_str().unwrap().to_owned();

    let hash: String = Sha256::digest(body.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let account = AccountId::parse(&app.account_id).unwrap();
    let key = IdempotencyKey::parse("lost-answer").unwrap();
    let long_ago = Timestamp::now().minus_ms(3_600_000);
    let dead = IdempotencyBegin {
        account_id: account,
        mode: Mode::Live,
        key: key.clone(),
        owner: RequestId::new(),
        request_hash: hash,
        now: long_ago,
        expired_before: long_ago.minus_ms(86_400_000),
        stale_before: long_ago.minus_ms(1),
    };
    assert_eq!(
        app.store.idempotency_begin(&dead).await.unwrap(),
        IdempotencyState::Started
    );
    assert!(
        app.store
            .idempotency_attach(
                account,
                Mode::Live,
                &key,
                dead.owner,
                TaskId::parse(&task_id).unwrap()
            )
            .await
            .unwrap()
    );

    for _ in 0..2 {
        let retry = c.call_idempotent("lost-answer", body.clone()).await;
        assert!(
            [200, 202].contains(&retry.status.as_u16()),
            "{}",
            retry.text
        );
        assert_eq!(retry.data()["id"], json!(task_id));
        assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    }
    let all = c.get("tasks").await.expect(200);
    assert_eq!(
        all.data()["items"].as_array().unwrap().len(),
        1,
        "{}",
        all.text
    );
    app.stop().await;
}
both!(a_retry_after_a_lost_answer_returns_the_original_task);

async fn failures_from(client: &crate::utils::TestClient, forwarded_for: &str) -> u16 {
    client
        .send(
            client
                .request(reqwest::Method::GET, "tasks")
                .header("x-forwarded-for", forwarded_for),
        )
        .await
        .status
        .as_u16()
}

/// Without `trusted_proxies`, forwarded addresses are ignored: a client
/// cannot dodge the failed-authentication limit by inventing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_addresses_are_ignored_unless_the_proxy_is_trusted() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let bad = app.client("tg_not_a_key");
    for i in 0..30 {
        assert_eq!(failures_from(&bad, &format!("198.51.100.{i}")).await, 401);
    }
    assert_eq!(failures_from(&bad, "203.0.113.77").await, 429);
    app.stop().await;
}

/// Behind a trusted proxy, the limit counts per client address as the proxy
/// names it (the rightmost untrusted hop), not per proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_limit_is_per_client() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()])
        .start()
        .await
    else {
        return;
    };
    let bad = app.client("tg_not_a_key");
    // The client's own claim (leftmost) is ignored; the proxy's entry counts.
    for i in 0..30 {
        let chain = format!("10.66.0.{i}, 198.51.100.1");
        assert_eq!(failures_from(&bad, &chain).await, 401);
    }
    assert_eq!(failures_from(&bad, "6.6.6.6, 198.51.100.1").await, 429);
    // Another client behind the same proxy is not blocked.
    assert_eq!(failures_from(&bad, "198.51.100.2").await, 401);
    let good = app.client(&app.live);
    let ok = good
        .send(
            good.request(reqwest::Method::GET, "tasks")
                .header("x-forwarded-for", "198.51.100.3"),
        )
        .await;
    assert_eq!(ok.status.as_u16(), 200);
    app.stop().await;
}

/// A server with short connection timeouts, for the slow-client checks.
async fn impatient(
    change: impl FnOnce(&mut taskgate_server::config::HttpConfig),
) -> Option<TestApp> {
    TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.http.header_read_timeout_ms = 300;
            c.http.body_read_timeout_ms = 300;
            c.http.idle_timeout_ms = 300;
            change(&mut c.http);
        })
        .start()
        .await
}

async fn connect(app: &TestApp) -> tokio::net::TcpStream {
    let addr = app.base.trim_start_matches("http://");
    tokio::net::TcpStream::connect(addr).await.unwrap()
}

/// Everything the server sends until it closes the connection (or 5 s pass,
/// which fails: the server must close it).
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept the connection open");
    String::from_utf8_lossy(&all).into_owned()
}

/// Headers that drip in are cut off; other clients are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_are_cut_off() {
    use tokio::io::AsyncWriteExt;
    let Some(app) = impatient(|_| {}).await else {
        return;
    };
    let mut slow = connect(&app).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    app.anonymous().get("/healthz").await.expect(200);
    let answer = read_until_closed(&mut slow).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    app.stop().await;
}

/// A body that drips in gets `408 request_timeout` in the envelope, and the
/// connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_is_answered_408() {
    use tokio::io::AsyncWriteExt;
    let Some(app) = impatient(|_| {}).await else {
        return;
    };
    let mut slow = connect(&app).await;
    let head = format!(
        "POST /api/v1/call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"api\":",
        app.live
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(
        answer.contains("\"type\":\"invalid_request_error\""),
        "{answer}"
    );
    let listed = app.client(&app.live).get("tasks").await.expect(200);
    assert_eq!(listed.data()["items"], json!([]), "nothing was created");
    app.stop().await;
}

/// A kept-alive connection with nothing to do is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    use tokio::io::AsyncWriteExt;
    // Waiting for a next request's headers is bounded by the header timeout
    // too: make it long, so that the idle timeout is what closes.
    let Some(app) = impatient(|h| h.header_read_timeout_ms = 60_000).await else {
        return;
    };
    let mut conn = connect(&app).await;
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut conn).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    app.stop().await;
}

/// A connection that never sends a byte is closed by the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed() {
    let Some(app) = impatient(|h| h.header_read_timeout_ms = 60_000).await else {
        return;
    };
    let mut conn = connect(&app).await;
    let answer = read_until_closed(&mut conn).await;
    assert_eq!(answer, "");
    app.stop().await;
}

/// The server tells HTTP/1.1 from HTTP/2 by a connection's first bytes: a
/// request whose first byte could still begin HTTP/2's preface (`P`), the
/// rest sent later, is answered as HTTP/1.1; a client speaking HTTP/2 with
/// prior knowledge is answered in HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_versions_are_told_by_their_first_bytes() {
    use tokio::io::AsyncWriteExt;
    let Some(app) = impatient(|_| {}).await else {
        return;
    };
    let mut slow = connect(&app).await;
    slow.write_all(b"P").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    slow.write_all(b"OST /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");

    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let res = h2
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    assert_eq!(res.status(), 200);
    let res = reqwest::get(format!("{}/healthz", app.base)).await.unwrap();
    assert_eq!(res.version(), reqwest::Version::HTTP_11);
    assert_eq!(res.status(), 200);
    app.stop().await;
}

/// One HTTP/1.1 answer read off a kept-alive connection, headers and body.
async fn read_answer(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if all.len() >= end + 4 + length {
                return text;
            }
        }
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert!(n > 0, "the connection closed before the answer: {text}");
        all.extend_from_slice(&buf[..n]);
    }
}

/// A stop drops nothing a proxy sent: a request on a kept-alive connection
/// just after the stop is answered, with `Connection: close`, and then the
/// connection closes; a new connection is refused at once (so a proxy tries
/// another instance), not left waiting in the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_what_was_sent_and_refuses_new_connections() {
    use tokio::io::AsyncWriteExt;
    let Some(mut app) = TestApp::builder(Backend::Sqlite).start().await else {
        return;
    };
    let request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut kept = connect(&app).await;
    kept.write_all(request).await.unwrap();
    let first = read_answer(&mut kept).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        !first.to_ascii_lowercase().contains("connection: close"),
        "{first}"
    );

    let addr = app.base.trim_start_matches("http://").to_owned();
    let server = app.server.take().expect("running");
    let stopped = tokio::spawn(server.stop());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    kept.write_all(request).await.unwrap();
    let second = read_until_closed(&mut kept).await;
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(
        second.to_ascii_lowercase().contains("connection: close"),
        "{second}"
    );
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        tokio::net::TcpStream::connect(&addr),
    )
    .await
    .expect("a connection attempt is answered at once");
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    tokio::time::timeout(std::time::Duration::from_secs(10), stopped)
        .await
        .expect("the stop ends")
        .unwrap()
        .expect("a clean stop");
    app.stop().await;
}

/// At most `max_connections` are open; the next client waits to be
/// accepted until one closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped() {
    let Some(app) = impatient(|h| {
        h.max_connections = 2;
        h.header_read_timeout_ms = 60_000;
        h.idle_timeout_ms = 60_000;
    })
    .await
    else {
        return;
    };
    let first = connect(&app).await;
    let second = connect(&app).await;
    let url = format!("{}/healthz", app.base);
    let waiting = tokio::spawn(async move { reqwest::get(url).await.map(|r| r.status()) });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a third connection was served");
    drop(first);
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
        .await
        .expect("served once a connection closed")
        .unwrap()
        .unwrap();
    assert_eq!(status.as_u16(), 200);
    drop(second);
    app.stop().await;
}

/// A plan's cap caps an account's running tasks (here test tasks, whose
/// cap follows from `max_running_tasks = 2`: a quarter, at least 2); its
/// other tasks wait `queued` and start as running ones end; another
/// account's task does not wait behind that backlog.
async fn an_accounts_running_tasks_are_capped_and_others_are_not_held(backend: Backend) {
    use taskgate_core::{KeyType, Timestamp};
    use taskgate_server::config::PlanLimits;

    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            c.workers = 8;
            c.plans.insert(
                "capped".parse().unwrap(),
                PlanLimits {
                    per_minute: None,
                    per_day: None,
                    max_running_tasks: Some(2),
                    max_running_test_tasks: None,
                },
            );
        })
        .plan("capped")
        .start()
        .await
    else {
        return;
    };
    let a = app.client(&app.test);
    let other = app.create_account("capped").await;
    let b = app.client(&app.create_key(&other, KeyType::Test).await);
    let slow = json!({"api": "sentiment", "input": {"text": "good"}, "mode": "async",
                      "sandbox": {"delay_ms": 300}});
    let mut backlog = Vec::new();
    for _ in 0..10 {
        let r = a.call(slow.clone()).await.expect(202);
        backlog.push(r.data()["id"].as_str().unwrap().to_owned());
    }
    let quick = json!({"api": "sentiment", "input": {"text": "good"}, "mode": "async"});
    let b_task = b.call(quick).await.expect(202);
    let b_task = b.wait_terminal(b_task.data()["id"].as_str().unwrap()).await;
    assert_eq!(b_task["status"], json!("succeeded"));

    // While A's backlog drains, never more than two of its tasks run.
    let mut most = 0;
    loop {
        let running = a.get("tasks?status=running&limit=100").await.expect(200);
        let n = running.data()["items"].as_array().unwrap().len();
        most = most.max(n);
        assert!(n <= 2, "{n} tasks of a capped account running");
        let left = a
            .get("tasks?status=queued,running&limit=100")
            .await
            .expect(200);
        if left.data()["items"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    }
    assert_eq!(most, 2, "the cap is reached, not undershot");
    let at =
        |v: &serde_json::Value, k: &str| Timestamp::parse_rfc3339(v[k].as_str().unwrap()).unwrap();
    let mut last_start = None;
    for id in &backlog {
        let t = a.wait_terminal(id).await;
        assert_eq!(t["status"], json!("succeeded"));
        last_start = last_start.max(Some(at(&t, "started_at")));
    }
    // B's task did not wait for A's backlog of ten 300 ms tasks.
    assert!(at(&b_task, "completed_at") < last_start.unwrap());
    app.stop().await;
}
both!(an_accounts_running_tasks_are_capped_and_others_are_not_held);

/// Concurrent live calls against a small spend limit: each reserves its
/// price when accepted, so exactly as many as the limit pays for run, and
/// the month's spend never passes the limit.
async fn concurrent_calls_never_overshoot_the_spend_limit(backend: Backend) {
    use taskgate_core::{AccountId, Timestamp};

    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    // 0.0005 USD: five calls of the built-in APIs (0.0001 each).
    crate::ops::admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        None,
        None,
        Some("0.0005"),
    )
    .await
    .unwrap();
    let live = app.client(&app.live);
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let live = live.clone();
            tokio::spawn(async move { live.call(sentiment(&format!("call {i}"))).await })
        })
        .collect();
    let mut accepted = 0;
    for call in calls {
        let r = call.await.unwrap();
        match r.status.as_u16() {
            200 => accepted += 1,
            403 => {
                r.expect_error(403, "usage_limit_exceeded");
            }
            other => panic!("{other}: {}", r.text),
        }
    }
    assert_eq!(accepted, 5);
    let account = AccountId::parse(&app.account_id).unwrap();
    let month = Timestamp::now().month_key();
    assert_eq!(app.store.month_spend(account, &month).await.unwrap(), 500);
    assert_eq!(app.store.month_reserved(account, &month).await.unwrap(), 0);
    app.stop().await;
}
both!(concurrent_calls_never_overshoot_the_spend_limit);

/// The OpenAPI document says what the server answers: every authenticated
/// operation documents 401, 403, 429, 500 and 503 and the rate-limit
/// headers; parameters carry their constraints; the details objects are the
/// task and the API themselves with more fields (not nested under a key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_exact_where_it_was_not() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let doc = app.anonymous().get("openapi.json").await.body;
    for (path, method) in [
        ("/api/v1/call", "post"),
        ("/api/v1/call/{id}", "get"),
        ("/api/v1/tasks", "get"),
        ("/api/v1/tasks/{id}", "get"),
        ("/api/v1/tasks/{id}/cancel", "post"),
        ("/api/v1/tasks/{id}/stream", "get"),
        ("/api/v1/apis", "get"),
        ("/api/v1/apis/{slug}", "get"),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        for code in ["401", "403", "429", "500", "503"] {
            assert!(responses[code].is_object(), "{method} {path}: {code}");
        }
        let ok = if path == "/api/v1/call" { "202" } else { "200" };
        assert!(
            responses[ok]["headers"]["X-RateLimit-Remaining"].is_object(),
            "{method} {path}"
        );
    }
    assert!(doc["paths"]["/api/v1/call"]["post"]["responses"]["408"].is_object());
    let limit = doc["paths"]["/api/v1/tasks"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(limit["schema"]["maximum"], json!(100));
    let schemas = &doc["components"]["schemas"];
    for (name, nested) in [("TaskDetails", "task"), ("ApiDetails", "summary")] {
        let text = schemas[name].to_string();
        assert!(
            !text.contains(&format!("\"{nested}\"")),
            "{name} nests {nested}: {text}"
        );
    }
    app.stop().await;
}

/// `task_retention_days`: an instance deletes ended tasks past it (at start,
/// then every ten minutes); newer tasks stay.
async fn ended_tasks_past_their_retention_are_deleted(backend: Backend) {
    use taskgate_core::{AccountId, TaskId, Timestamp};
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let client = app.client(&app.live);
    let recent = client
        .call(json!({"api": "sentiment", "input": {"text": "new"}}))
        .await
        .expect(200);
    let recent = recent.data()["id"].as_str().unwrap().to_owned();
    // A task stored ten days ago, as it was then.
    let stored = app
        .store
        .get_task_by_id(TaskId::parse(&recent).unwrap())
        .await
        .unwrap()
        .unwrap();
    let old_at = Timestamp::now().minus_ms(10 * 86_400_000);
    let mut old = stored.clone();
    old.id = TaskId::floor(old_at); // `at` never goes back in time
    old.created_at = old_at;
    assert_eq!(old.account_id, app.account_id.parse::<AccountId>().unwrap());
    app.store.insert_task(&old).await.unwrap();
    client.get(&format!("tasks/{}", old.id)).await.expect(200);

    let keeper = app.another_instance(|c| c.task_retention_days = 7).await;
    let mut gone = false;
    for _ in 0..100 {
        if client
            .get(&format!("tasks/{}", old.id))
            .await
            .status
            .as_u16()
            == 404
        {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(gone, "the ten-day-old task is still there");
    client.get(&format!("tasks/{recent}")).await.expect(200);
    keeper.stop().await.unwrap();
    app.stop().await;
}
both!(ended_tasks_past_their_retention_are_deleted);

/// Issue 25: large bodies being read at once are bounded by their bytes
/// (`http.max_large_body_bytes_in_flight`): past it a body waits at most
/// half the body time-out, then gets 503 `server_busy` with Retry-After;
/// small bodies never wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_in_flight_are_bounded() {
    use tokio::io::AsyncWriteExt;
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.http.max_large_body_bytes_in_flight = 1024 * 1024;
            c.http.body_read_timeout_ms = 4_000;
        })
        .start()
        .await
    else {
        return;
    };
    // A client declares a body of the whole budget and sends it slowly.
    let mut hog = connect(&app).await;
    let head = format!(
        "POST /api/v1/call HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{{",
        app.live,
        1024 * 1024
    );
    hog.write_all(head.as_bytes()).await.unwrap();
    let c = app.client(&app.live);
    let big = format!(
        r#"{{"api":"sentiment","input":{{"text":"{}"}}}}"#,
        "a".repeat(300 * 1024)
    );
    let mut busy = None;
    for _ in 0..5 {
        let r = c.post_raw("call", big.clone()).await;
        if r.status.as_u16() == 503 {
            busy = Some(r);
            break;
        }
    }
    let r = busy.expect("a large body waiting behind the hog gets 503");
    let r = r.expect_error(503, "server_busy");
    assert_eq!(r.header("retry-after"), Some("1"));
    // A small body does not wait.
    c.call(sentiment("fine")).await.expect(200);
    drop(hog);
    // Once the hog is gone, the large body is read (and judged on its merits).
    let r = c.post_raw("call", big).await;
    assert_ne!(r.status.as_u16(), 503, "{}", r.text);
    app.stop().await;
}
