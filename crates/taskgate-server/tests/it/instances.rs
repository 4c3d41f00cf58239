//! Several instances on one PostgreSQL store: a task's end reaches every
//! instance as it commits, so a cancel stops the execution on the instance
//! that runs it and a sync call answered by one instance returns as soon as
//! its task ends on another. SQLite has one process per store: these are
//! PostgreSQL's. With Redis, the rate limits are one count across
//! instances; without it, requests are refused or served as set, and the
//! limiter comes back by itself.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::upstream::{Fake, Reply, chat_api, chunk, read_events, streamed};
use crate::utils::{Backend, TestApp, TestClient};

fn hello() -> Value {
    json!({"api": "chat", "mode": "async",
           "input": {"messages": [{"role": "user", "content": "Say hello"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_one_instance_stops_the_execution_on_another() {
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Sse(
        vec![chunk(
            json!({"role": "assistant", "content": "Thinking"}),
            None,
        )],
        Duration::from_millis(10),
        true,
    ));
    let Some(a) = TestApp::builder(Backend::Postgres)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let on_b = TestClient::new(&format!("http://{}", b.addr), Some(&a.live));
    let on_a = a.client(&a.live);

    // Accepted by B with a worker free: B runs it.
    let id = on_b.call(hello()).await.expect(202).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.requests() == 0 {
        assert!(Instant::now() < deadline, "the upstream was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = on_a
        .post(&format!("tasks/{id}/cancel"), json!({}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], "cancelled");
    // Without a word from A, B would learn it at its next lease renewal
    // (10 s); the notice makes it at once.
    let cancelled = Instant::now();
    while !fake.closed.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            cancelled.elapsed() < Duration::from_secs(3),
            "B's upstream connection stayed open after the cancel on A"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // B records its stopped attempt once the execution has wound down.
    let d = loop {
        let d = on_b.get(&format!("tasks/{id}")).await.expect(200);
        if d.data()["attempts"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            break d;
        }
        assert!(Instant::now() < deadline, "B never recorded its attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(d.data()["status"], "cancelled");
    assert_eq!(
        d.data()["attempts"][0]["outcome"],
        "cancelled",
        "{}",
        d.text
    );
    b.stop().await.unwrap();
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_call_returns_when_its_task_ends_on_another_instance() {
    // A has one worker of test tasks, kept busy, and waits 15 s before
    // answering 202: its test call can only be run by B, and only B's
    // notice can answer it in time.
    let Some(a) = TestApp::builder(Backend::Postgres)
        .config(|c| {
            c.test_workers = Some(1);
            c.sync_wait_ms = 15_000;
        })
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|c| c.workers = 8).await;
    let test_on_a = a.client(&a.test);
    let busy = test_on_a
        .call(
            json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                     "sandbox": {"delay_ms": 60000}}),
        )
        .await
        .expect(202);
    let busy = busy.data()["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = test_on_a.get(&format!("call/{busy}")).await.expect(200);
        if t.data()["status"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "the busy task never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let started = Instant::now();
    let r = test_on_a
        .call(json!({"api": "sentiment", "input": {"text": "I love it"}}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.data()["status"], "succeeded");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered by the sync wait's end, not by the task's"
    );
    test_on_a
        .post(&format!("tasks/{busy}/cancel"), json!({}))
        .await
        .expect(200);
    b.stop().await.unwrap();
    a.stop().await;
}

/// The Redis of the machine (`TASKGATE_TEST_REDIS_URL`, default
/// `redis://127.0.0.1:6379`), or `None` (and the test skips, except in CI).
pub(crate) async fn redis_url() -> Option<String> {
    let url = std::env::var("TASKGATE_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let addr = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let reachable = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(addr.clone()),
    )
    .await
    .is_ok_and(|c| c.is_ok());
    if reachable {
        return Some(url);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("Redis is required in CI ({url})");
    }
    eprintln!("SKIPPED: Redis suite (no server at {url})");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_instances_through_redis() {
    let Some(redis) = redis_url().await else {
        return;
    };
    // The tiny plan: 5 requests per rolling minute, 8 per day.
    let Some(a) = TestApp::builder(Backend::Postgres)
        .plan("tiny")
        .config(|c| c.redis_url = Some(redis.parse().unwrap()))
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let clients = [
        a.client(&a.live),
        TestClient::new(&format!("http://{}", b.addr), Some(&a.live)),
    ];
    let mut remaining = Vec::new();
    for i in 0..5 {
        let r = clients[i % 2].get("apis").await.expect(200);
        remaining.push(
            r.header("x-ratelimit-remaining")
                .unwrap()
                .parse::<u32>()
                .unwrap(),
        );
    }
    assert_eq!(
        remaining,
        [4, 3, 2, 1, 0],
        "one count across both instances"
    );
    for c in &clients {
        let r = c.get("apis").await.expect_error(429, "rate_limit_exceeded");
        let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    }
    b.stop().await.unwrap();
    a.stop().await;
}

/// A private `redis-server` on a free port, stopped when dropped.
pub(crate) struct PrivateRedis {
    port: u16,
    child: Option<std::process::Child>,
}

impl PrivateRedis {
    pub(crate) fn start(port: u16) -> Option<Self> {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .ok()?;
        Some(Self {
            port,
            child: Some(child),
        })
    }

    pub(crate) async fn up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_requests_are_refused_or_served_as_set_and_it_recovers() {
    if redis_url().await.is_none() {
        return;
    }
    let port = free_port();
    let Some(mut redis) = PrivateRedis::start(port) else {
        assert!(
            std::env::var("CI").is_err_and(|_| true)
                || std::env::var("CI").is_ok_and(|v| v != "true"),
            "redis-server is required in CI"
        );
        eprintln!("SKIPPED: no redis-server to start");
        return;
    };
    redis.up().await;
    let url = format!("redis://127.0.0.1:{port}");
    let Some(closed) = TestApp::builder(Backend::Sqlite)
        .plan("tiny")
        .config(|c| c.redis_url = Some(url.parse().unwrap()))
        .start()
        .await
    else {
        return;
    };
    let open = closed
        .another_instance(|c| {
            c.redis_url = Some(url.parse().unwrap());
            c.redis_failure = taskgate_server::config::RedisFailure::Open;
        })
        .await;
    let (c, o) = (
        closed.client(&closed.live),
        TestClient::new(&format!("http://{}", open.addr), Some(&closed.live)),
    );
    c.get("apis").await.expect(200);

    redis.stop();
    let started = Instant::now();
    let r = c
        .get("apis")
        .await
        .expect_error(503, "rate_limiter_unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an answer, not a hang"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    // `open` serves, without limits and so without their headers.
    let r = o.get("apis").await.expect(200);
    assert!(r.header("x-ratelimit-limit").is_none());
    // Readiness names what is down; `open` stays ready without Redis.
    let r = c.get("/readyz").await.expect(503);
    assert_eq!(
        r.body["error"]["details"],
        json!({"storage": "up", "redis": "down"})
    );
    let r = o.get("/readyz").await.expect(200);
    assert_eq!(
        r.data()["checks"],
        json!({"storage": "up", "redis": "down"})
    );

    // Back by itself once Redis is.
    let redis = PrivateRedis::start(port).expect("redis-server restarts");
    redis.up().await;
    let r = c.get("apis").await.expect(200);
    assert!(r.header("x-ratelimit-remaining").is_some());
    let r = c.get("/readyz").await.expect(200);
    assert_eq!(r.data()["checks"], json!({"storage": "up", "redis": "up"}));
    open.stop().await.unwrap();
    closed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_count_across_instances_through_redis() {
    if redis_url().await.is_none() {
        return;
    }
    // A Redis of its own: the count is per address, and every test's
    // address is 127.0.0.1.
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("redis-server is required in CI");
        }
        eprintln!("SKIPPED: no redis-server to start");
        return;
    };
    redis.up().await;
    let url = format!("redis://127.0.0.1:{port}");
    let Some(a) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.redis_url = Some(url.parse().unwrap());
            c.auth_failures_per_minute = 3;
        })
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let bad_on_a = TestClient::new(&a.base, Some("tg_live_not-a-key"));
    let bad_on_b = TestClient::new(&format!("http://{}", b.addr), Some("tg_live_not-a-key"));
    bad_on_a
        .get("apis")
        .await
        .expect_error(401, "invalid_api_key");
    bad_on_b
        .get("apis")
        .await
        .expect_error(401, "invalid_api_key");
    bad_on_a
        .get("apis")
        .await
        .expect_error(401, "invalid_api_key");
    // Three failures between the two: the address is blocked on both, even
    // with a good key.
    for c in [&bad_on_b, &a.client(&a.live)] {
        let r = c.get("apis").await.expect_error(429, "rate_limit_exceeded");
        assert_eq!(r.body["error"]["details"][0]["window"], "auth_failures");
        assert!(r.header("retry-after").is_some());
    }
    b.stop().await.unwrap();
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_on_one_instance_follows_a_task_on_another_through_redis() {
    let Some(redis) = redis_url().await else {
        return;
    };
    let (fake, base) = Fake::start().await;
    let words = [
        "The",
        " sky",
        " is",
        " blue",
        " because",
        " of",
        " Rayleigh",
        " scattering.",
    ];
    fake.always(streamed(&words, Duration::from_millis(150)));
    let Some(a) = TestApp::builder(Backend::Postgres)
        .config(|c| {
            chat_api(c, &base, true);
            c.redis_url = Some(redis.parse().unwrap());
        })
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let on_b = TestClient::new(&format!("http://{}", b.addr), Some(&a.live));
    let on_a = a.client(&a.live);
    // Runs on B.
    let id = on_b.call(hello()).await.expect(202).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A reader on A arrives once some text exists.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.requests() == 0 {
        assert!(Instant::now() < deadline, "the upstream was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (events, _) = read_events(&on_a, &id).await;
    let (last, done) = events.last().unwrap();
    assert_eq!(last, "done");
    assert_eq!(done["status"], "succeeded");
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert!(
        deltas.len() > 1,
        "the text arrived as it was generated: {deltas:?}"
    );
    assert_eq!(deltas.concat(), words.concat());
    assert_eq!(done["output"]["text"], words.concat());
    b.stop().await.unwrap();
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_idempotent_calls_over_instances_make_one_task() {
    let Some(a) = TestApp::builder(Backend::Postgres).start().await else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let clients = [
        a.client(&a.test),
        TestClient::new(&format!("http://{}", b.addr), Some(&a.test)),
    ];
    let body = json!({"api": "sentiment", "input": {"text": "once"},
                      "sandbox": {"delay_ms": 300}});
    let calls = (0..50).map(|i| {
        let c = &clients[i % 2];
        let body = body.clone();
        async move { c.call_idempotent("one-task-please", body).await }
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut ids = std::collections::HashSet::new();
    for r in &answers {
        match r.status.as_u16() {
            200 | 202 => {
                ids.insert(r.data()["id"].as_str().unwrap().to_owned());
            }
            // A repeat while the first is being answered.
            409 => assert_eq!(r.body["error"]["code"], "idempotency_in_progress"),
            s => panic!("unexpected {s}: {}", r.text),
        }
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let list = clients[0].get("tasks?api=sentiment").await.expect(200);
    assert_eq!(list.data()["items"].as_array().unwrap().len(), 1);
    b.stop().await.unwrap();
    a.stop().await;
}

/// Three `redis-server`s made one Redis Cluster (no replicas), stopped when
/// dropped.
struct PrivateCluster {
    nodes: Vec<std::process::Child>,
    ports: Vec<u16>,
    dir: std::path::PathBuf,
}

impl PrivateCluster {
    async fn start() -> Option<Self> {
        let dir = std::env::temp_dir().join(format!("taskgate_cluster_{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes = Vec::new();
        for port in &ports {
            let child = std::process::Command::new("redis-server")
                .current_dir(&dir)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .ok()?;
            nodes.push(child);
        }
        let cluster = Self { nodes, ports, dir };
        for port in &cluster.ports {
            PrivateRedis {
                port: *port,
                child: None,
            }
            .up()
            .await;
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let created = std::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        assert!(created.success(), "redis-cli --cluster create failed");
        // Until every node says the cluster is up.
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in &cluster.ports {
            loop {
                let info = std::process::Command::new("redis-cli")
                    .args(["-p", &port.to_string(), "cluster", "info"])
                    .output()
                    .unwrap();
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster never came up");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Some(cluster)
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            let _ = n.kill();
            let _ = n.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_on_a_redis_cluster() {
    if redis_url().await.is_none() {
        return;
    }
    let Some(cluster) = PrivateCluster::start().await else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("redis-server and redis-cli are required in CI");
        }
        eprintln!("SKIPPED: no redis-server / redis-cli for a cluster");
        return;
    };
    // Any node will do: the others are found through MOVED.
    let url = format!("redis://127.0.0.1:{}", cluster.ports[0]);
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.redis_url = Some(url.parse().unwrap()))
        .start()
        .await
    else {
        return;
    };
    let b = app.another_instance(|_| {}).await;
    // Accounts whose keys fall on different nodes.
    for _ in 0..6 {
        let account = app.create_account("tiny").await;
        let key = app.create_key(&account, taskgate_core::KeyType::Live).await;
        let clients = [
            app.client(&key),
            TestClient::new(&format!("http://{}", b.addr), Some(&key)),
        ];
        for i in 0..5 {
            clients[i % 2].get("apis").await.expect(200);
        }
        clients[1]
            .get("apis")
            .await
            .expect_error(429, "rate_limit_exceeded");
        clients[0]
            .get("apis")
            .await
            .expect_error(429, "rate_limit_exceeded");
    }
    // The windows really are spread over the nodes (reached through MOVED).
    let holding = cluster
        .ports
        .iter()
        .filter(|p| {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &p.to_string(), "dbsize"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim() != "0"
        })
        .count();
    assert!(holding >= 2, "keys on {holding} node(s) only");
    let r = app.anonymous().get("/readyz").await.expect(200);
    assert_eq!(r.data()["checks"]["redis"], "up");
    b.stop().await.unwrap();
    app.stop().await;
    drop(cluster);
}

/// A plan's cap of running tasks (here of test tasks,
/// `max_running_test_tasks`; the live cap is counted by the same store
/// query) holds over all instances: a backlog of one
/// account's tasks spread over three never has more than the cap running at
/// once, reaches it, and every task ends succeeded; tasks found at the cap
/// start when one ends on another instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_running_tasks_cap_holds_across_instances() {
    use taskgate_server::config::PlanLimits;
    let capped = |c: &mut taskgate_server::Config| {
        c.workers = 8;
        c.plans.insert(
            "capped".parse().unwrap(),
            PlanLimits {
                per_minute: None,
                per_day: None,
                max_running_tasks: Some(8),
                max_running_test_tasks: Some(3),
            },
        );
    };
    let Some(a) = TestApp::builder(Backend::Postgres)
        .config(capped)
        .plan("capped")
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(capped).await;
    let c = a.another_instance(capped).await;
    let clients = [
        a.client(&a.test),
        TestClient::new(&format!("http://{}", b.addr), Some(&a.test)),
        TestClient::new(&format!("http://{}", c.addr), Some(&a.test)),
    ];
    let slow = json!({"api": "sentiment", "input": {"text": "good"}, "mode": "async",
                      "sandbox": {"delay_ms": 250}});
    let calls = (0..18).map(|i| {
        let (client, body) = (&clients[i % 3], slow.clone());
        async move { client.call(body).await.expect(202) }
    });
    let ids: Vec<String> = futures_util::future::join_all(calls)
        .await
        .iter()
        .map(|r| r.data()["id"].as_str().unwrap().to_owned())
        .collect();
    let mut most = 0;
    let started = std::time::Instant::now();
    loop {
        let running = clients[0]
            .get("tasks?status=running&limit=100")
            .await
            .expect(200);
        let n = running.data()["items"].as_array().unwrap().len();
        most = most.max(n);
        assert!(n <= 3, "{n} tasks of an account capped at 3 running");
        let left = clients[1]
            .get("tasks?status=queued,running&limit=100")
            .await
            .expect(200);
        if left.data()["items"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the backlog did not drain"
        );
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    assert_eq!(most, 3, "the cap is reached, not undershot");
    for id in &ids {
        let t = clients[2].wait_terminal(id).await;
        assert_eq!(t["status"], json!("succeeded"), "{t}");
    }
    c.stop().await.unwrap();
    b.stop().await.unwrap();
    a.stop().await;
}
