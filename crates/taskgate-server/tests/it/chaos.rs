//! Redis, then PostgreSQL, lost under a running instance with requests
//! flowing: answered 503 (`rate_limiter_unavailable`, then
//! `storage_unavailable`) within the deadlines (never a hang, never a 500),
//! readiness says what is down, and once each is back the instance serves
//! again by itself, with no task lost or stuck; and PostgreSQL killed under
//! sync calls loses no task that was answered. On a private PostgreSQL
//! cluster (`initdb` on a free port) and a private `redis-server`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::ops::admin;
use serde_json::json;
use taskgate_core::KeyType;
use taskgate_server::Config;

use crate::instances::{PrivateRedis, free_port};
use crate::utils::TestClient;

/// A PostgreSQL cluster of the test's own, run as `postgres` when the test
/// runs as root (PostgreSQL refuses root).
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    /// `None` when PostgreSQL's server programs are not installed: the test
    /// is skipped, and says so (under `CI=true` it fails instead).
    fn create() -> Option<Self> {
        let Some(bin) = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .find(|b| b.join("initdb").exists())
        else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("PostgreSQL's server programs (initdb, pg_ctl) are required in CI");
            }
            eprintln!(
                "SKIPPED: chaos test (no PostgreSQL server programs under /usr/lib/postgresql)"
            );
            return None;
        };
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("taskgate_pg_{}_{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pg = Self {
            bin,
            dir,
            port,
            as_postgres,
        };
        if as_postgres {
            assert!(
                Command::new("chown")
                    .arg("postgres")
                    .arg(&pg.dir)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let data = pg.dir.join("data");
        let ok = pg
            .run(
                "initdb",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                ],
            )
            .success();
        assert!(ok, "initdb failed");
        Some(pg)
    }

    fn run(&self, program: &str, args: &[&str]) -> std::process::ExitStatus {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
    }

    fn start(&self) {
        let data = self.dir.join("data");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        let ok = self
            .run(
                "pg_ctl",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-o",
                    &options,
                    "-l",
                    log.to_str().unwrap(),
                    "-w",
                    "start",
                ],
            )
            .success();
        assert!(ok, "pg_ctl start failed");
    }

    /// As a crash looks to clients: no goodbye.
    fn stop(&self) {
        self.stop_with("immediate", true);
    }

    /// `pg_ctl stop -m mode`: `smart` waits for every session to end (and
    /// refuses new ones meanwhile), `fast` ends them (`57P01` to each),
    /// `immediate` drops them. With `wait`, returns once stopped.
    fn stop_with(&self, mode: &str, wait: bool) {
        let data = self.dir.join("data");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                mode,
                if wait { "-w" } else { "-W" },
                "stop",
            ],
        );
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `pg` started, with an empty database `tg`, and a configuration on it that
/// gives up on the database after 1 s.
async fn on_database(pg: &PrivatePostgres) -> Config {
    pg.start();
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&pg.url("postgres"))
        .await
        .unwrap();
    sqlx::query("CREATE DATABASE tg")
        .execute(&mut conn)
        .await
        .unwrap();
    drop(conn);
    let mut config = Config {
        listen: "127.0.0.1:0".to_owned(),
        database_url: pg.url("tg"),
        shutdown_grace_ms: 2_000,
        ..Config::default()
    };
    config.database.acquire_timeout_ms = 1_000;
    config
}

/// An instance on `config` for an account on the plan `big` (`per_minute`
/// requests a minute, nothing else limited): the server, a live key and a
/// test key.
async fn serve(
    mut config: Config,
    per_minute: Option<u32>,
) -> (taskgate_server::Server, String, String) {
    config.plans.insert(
        "big".parse().unwrap(),
        taskgate_server::config::PlanLimits {
            per_minute,
            per_day: None,
            max_running_tasks: None,
            max_running_test_tasks: None,
        },
    );
    let store = taskgate_server::open_store(&config).await.unwrap();
    let account = admin::create_account(&*store, &config, "chaos", "big", None)
        .await
        .unwrap();
    let account = account["id"].as_str().unwrap();
    let key = async |key_type| {
        let key = admin::create_key(
            &*store,
            admin::NewKey {
                account_id: account,
                key_type,
                name: "chaos",
                scopes: None,
                apis: None,
                expires_in_ms: None,
            },
        )
        .await
        .unwrap();
        key["secret"].as_str().unwrap().to_owned()
    };
    let (live, test) = (key(KeyType::Live).await, key(KeyType::Test).await);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = taskgate_server::start_with_env(
        config,
        store,
        Some(listener),
        std::sync::Arc::new(|_: &str| None),
    )
    .await
    .unwrap();
    (server, live, test)
}

/// Requests sent one after another until told to stop: every answer's
/// status, and the ids of the tasks made.
async fn load(
    client: TestClient,
    stop: tokio_util::sync::CancellationToken,
) -> (Vec<u16>, Vec<String>) {
    let (mut statuses, mut ids) = (Vec::new(), Vec::new());
    while !stop.is_cancelled() {
        let r = client
            .call(
                json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                         "sandbox": {"delay_ms": 200}}),
            )
            .await;
        statuses.push(r.status.as_u16());
        if r.status == 202 {
            ids.push(r.data()["id"].as_str().unwrap().to_owned());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (statuses, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_redis_then_postgresql_under_load_is_503_and_it_recovers_by_itself() {
    let Some(pg) = PrivatePostgres::create() else {
        return;
    };
    let redis_port = free_port();
    let Some(mut redis) = PrivateRedis::start(redis_port) else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("redis-server is required in CI");
        }
        eprintln!("SKIPPED: chaos test (no redis-server)");
        return;
    };
    redis.up().await;
    let config = Config {
        redis_url: Some(format!("redis://127.0.0.1:{redis_port}").parse().unwrap()),
        ..on_database(&pg).await
    };
    // Limited (so the limiter asks Redis), but never reached here.
    let (server, live, test) = serve(config, Some(1_000_000)).await;
    let base = format!("http://{}", server.addr);
    let background_client = TestClient::new(&base, Some(&test));
    let (live, test) = (
        TestClient::new(&base, Some(&live)),
        TestClient::new(&base, Some(&test)),
    );
    let call = json!({"api": "sentiment", "input": {"text": "fine"}});
    live.call(call.clone()).await.expect(200);
    // A task running through the outages.
    let through = test
        .call(
            json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                     "sandbox": {"delay_ms": 1500}}),
        )
        .await
        .expect(202);
    let through = through.data()["id"].as_str().unwrap().to_owned();
    let stop = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn(load(background_client, stop.clone()));

    // Redis away: the limiter refuses (closed), storage still serves reads.
    redis.stop();
    let r = live
        .call(call.clone())
        .await
        .expect_error(503, "rate_limiter_unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let redis = PrivateRedis::start(redis_port).expect("redis-server restarts");
    redis.up().await;
    live.call(call.clone()).await.expect(200);

    // PostgreSQL away.
    pg.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let r = live
            .call(call.clone())
            .await
            .expect_error(503, "storage_unavailable");
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "an answer, not a hang"
        );
    }
    let r = TestClient::new(&base, None)
        .get("/readyz")
        .await
        .expect(503);
    assert_eq!(r.body["error"]["code"], "storage_unavailable");
    assert_eq!(r.body["error"]["details"]["storage"], "down");
    tokio::time::sleep(Duration::from_secs(1)).await;

    pg.start();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = live.call(call.clone()).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "only 503 while it comes back: {}", r.text);
        assert!(Instant::now() < deadline, "the instance did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let (statuses, ids) = background.await.unwrap();
    assert!(
        statuses.iter().all(|s| [202, 503].contains(s)),
        "no answer but 202 and 503 under load: {statuses:?}"
    );
    assert!(
        statuses.contains(&503) && statuses.contains(&202),
        "{statuses:?}"
    );
    // No task lost or stuck: each one made ends, once.
    for id in ids.iter().chain(std::iter::once(&through)) {
        let t = test.wait_terminal(id).await;
        assert_eq!(t["status"], "succeeded", "{t}");
    }
    server.stop().await.unwrap();
}

/// A sync call's task is inserted without waiting for PostgreSQL's WAL
/// flush, and its answer waits for the flush of its end. With PostgreSQL
/// killed under a flow of sync calls: every call answered `200` finds its
/// task stored and succeeded once it is back (an end written late, after
/// the database's restart, finds its task still running: its lease was
/// renewed meanwhile); every other answer is `503` (none is `202`: an end is
/// retried through the restart, within the sync wait); no stored task is
/// left unended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_calls_answered_before_a_postgresql_crash_are_stored_after_it() {
    let Some(pg) = PrivatePostgres::create() else {
        return;
    };
    let config = Config {
        sync_wait_ms: 15_000,
        task_lease_ms: 3_000,
        ..on_database(&pg).await
    };
    let (server, _, secret) = serve(config, None).await;
    let client = TestClient::new(&format!("http://{}", server.addr), Some(&secret));

    // Six callers, one sync call after another each.
    let stop = tokio_util::sync::CancellationToken::new();
    let callers: Vec<_> = (0..6)
        .map(|_| {
            let (client, stop) = (client.clone(), stop.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.is_cancelled() {
                    let r = client
                        .call(json!({"api": "sentiment", "input": {"text": "x"},
                                     "sandbox": {"delay_ms": 20}}))
                        .await;
                    let id = r.body["data"]["id"].as_str().map(str::to_owned);
                    answers.push((r.status.as_u16(), id));
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    pg.stop();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    // Down longer than a lease (about 3.5 s in all, with this call's wait
    // for a connection): the ends of the calls in flight are retried
    // meanwhile, and their tasks' leases lapse; once the database is back,
    // the instance renews them before its sweep would end them.
    client
        .call(json!({"api": "sentiment", "input": {"text": "down"}}))
        .await
        .expect_error(503, "storage_unavailable");
    pg.start();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client
            .call(json!({"api": "sentiment", "input": {"text": "back"}}))
            .await;
        if r.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the instance did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();
    let mut answers = Vec::new();
    for caller in callers {
        answers.extend(caller.await.unwrap());
    }

    // No call is left to `202` by an end it could not write: the ends are
    // retried through the restart, well within the sync wait.
    assert!(
        answers.iter().all(|(s, _)| [200, 503].contains(s)),
        "no answer but 200 and 503: {:?}",
        answers.iter().map(|(s, _)| s).collect::<Vec<_>>()
    );
    let ok: Vec<&String> = answers
        .iter()
        .filter(|(s, _)| *s == 200)
        .filter_map(|(_, id)| id.as_ref())
        .collect();
    assert!(
        ok.len() >= 10,
        "calls were answered before the crash: {}",
        ok.len()
    );
    for id in ok {
        let t = client.get(&format!("/api/v1/tasks/{id}")).await.expect(200);
        assert_eq!(t.data()["status"], "succeeded", "{}", t.text);
    }
    // Nothing stored is left queued or running.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&pg.url("tg"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (open,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{open} tasks never ended");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(conn);
    server.stop().await.unwrap();
}

/// Sync calls (live key), async calls (test key) and reads, one after the
/// other, until told to stop: every answer, and a count of the `200`s.
async fn mixed_load(
    live: TestClient,
    test: TestClient,
    stop: tokio_util::sync::CancellationToken,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<crate::utils::Resp> {
    let mut answers = Vec::new();
    let mut round = 0u32;
    while !stop.is_cancelled() {
        round += 1;
        let r = match round % 3 {
            0 => {
                live.call(json!({"api": "sentiment", "input": {"text": "fine"}}))
                    .await
            }
            1 => {
                test.call(
                    json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                                 "sandbox": {"delay_ms": 50}}),
                )
                .await
            }
            _ => live.get("tasks?limit=5").await,
        };
        if r.status == 200 {
            served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        answers.push(r);
    }
    answers
}

/// PostgreSQL stopped by its operator (`mode`) under load, then started
/// again: no answer is a `500`; each is `200`/`202`, or `503
/// storage_unavailable` in the contract's envelope with `Retry-After`; and
/// the instance serves again by itself.
async fn stopped_under_load(mode: &str) {
    use std::sync::atomic::Ordering;
    let Some(pg) = PrivatePostgres::create() else {
        return;
    };
    let config = Config {
        task_lease_ms: 3_000,
        ..on_database(&pg).await
    };
    let (server, live, test) = serve(config, None).await;
    let base = format!("http://{}", server.addr);
    let (live, test) = (
        TestClient::new(&base, Some(&live)),
        TestClient::new(&base, Some(&test)),
    );
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let loads: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(mixed_load(
                live.clone(),
                test.clone(),
                stop.clone(),
                served.clone(),
            ))
        })
        .collect();
    // `served` grows by `n`: the load runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    let wait_served = async |n: usize| {
        let target = served.load(Ordering::Relaxed) + n;
        while served.load(Ordering::Relaxed) < target {
            assert!(Instant::now() < deadline, "the load stalled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    wait_served(30).await;

    if mode == "smart" {
        // New sessions are refused while the pool's go on serving; then
        // the operator, tired of waiting, makes it fast.
        pg.stop_with("smart", false);
        wait_served(30).await;
        pg.stop_with("fast", true);
    } else {
        pg.stop_with(mode, true);
    }
    // Down: refused, with the contract's 503.
    let r = live
        .call(json!({"api": "sentiment", "input": {"text": "down"}}))
        .await
        .expect_error(503, "storage_unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));

    pg.start();
    loop {
        let r = live
            .call(json!({"api": "sentiment", "input": {"text": "back"}}))
            .await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "only 503 while it comes back: {}", r.text);
        assert!(Instant::now() < deadline, "the instance did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_served(30).await;
    stop.cancel();
    let mut answers = Vec::new();
    for load in loads {
        answers.extend(load.await.unwrap());
    }
    server.stop().await.unwrap();

    let statuses: Vec<u16> = answers.iter().map(|r| r.status.as_u16()).collect();
    assert!(statuses.contains(&503), "the stop was seen: {statuses:?}");
    for r in answers {
        match r.status.as_u16() {
            200 | 202 => {}
            503 => {
                let r = r.expect_error(503, "storage_unavailable");
                assert_eq!(r.header("retry-after"), Some("1"), "{}", r.text);
            }
            _ => panic!("-m {mode}: an answer was {}: {}", r.status, r.text),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_fast_under_load_is_503_never_500() {
    stopped_under_load("fast").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_smart_under_load_is_503_never_500() {
    stopped_under_load("smart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_immediately_under_load_is_503_never_500() {
    stopped_under_load("immediate").await;
}
