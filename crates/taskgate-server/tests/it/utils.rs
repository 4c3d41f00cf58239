//! The black-box harness: a real server on port 0 over a fresh store, keys
//! made the way an operator makes them, and a client that speaks HTTP.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ops::admin;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use taskgate_core::KeyType;
use taskgate_server::config::PlanLimits;
use taskgate_server::{Config, Server};
use taskgate_store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs one async test body against both backends, as two tests.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(crate::utils::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(crate::utils::Backend::Postgres).await
            }
        }
    };
}
pub(crate) use both;

pub fn postgres_admin_url() -> String {
    std::env::var("TASKGATE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

enum Db {
    Sqlite(PathBuf),
    Postgres { admin: String, name: String },
}

pub struct TestApp {
    pub server: Option<Server>,
    pub base: String,
    pub store: Arc<dyn Store>,
    pub config: Config,
    pub account_id: String,
    /// Secrets of the default account's keys.
    pub live: String,
    pub test: String,
    /// The server's clock: tests move it instead of waiting (a key's
    /// expiry, the key cache's lifetime, a limiter's window, a sandbox's
    /// delay, a lease). Another instance of the app reads it too.
    pub clock: taskgate_core::Clock,
    db: Db,
}

pub struct Builder {
    backend: Backend,
    config: Config,
    plan: String,
    /// Providers of the test's own, served beside the configuration's.
    providers: Vec<Arc<dyn taskgate_providers::Provider>>,
}

impl TestApp {
    pub fn builder(backend: Backend) -> Builder {
        let mut config = Config {
            listen: "127.0.0.1:0".to_owned(),
            log_format: taskgate_server::config::LogFormat::Text,
            // Tests stop servers with tasks still running: no long grace.
            shutdown_grace_ms: 2_000,
            ..Config::default()
        };
        config.plans.insert(
            "tiny".parse().unwrap(),
            PlanLimits {
                per_minute: Some(5),
                per_day: Some(8),
                max_running_tasks: None,
                max_running_test_tasks: None,
            },
        );
        Builder {
            backend,
            config,
            plan: "enterprise".to_owned(),
            providers: Vec::new(),
        }
    }

    /// An app whose default account is on the unlimited plan.
    pub async fn start(backend: Backend) -> Option<TestApp> {
        Self::builder(backend).start().await
    }

    pub async fn create_account(&self, plan: &str) -> String {
        let a = admin::create_account(&*self.store, &self.config, "acme", plan, None)
            .await
            .expect("create account");
        a["id"].as_str().unwrap().to_owned()
    }

    pub async fn create_key(&self, account: &str, key_type: KeyType) -> String {
        self.create_key_with(account, key_type, None, None, None)
            .await["secret"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn create_key_with(
        &self,
        account: &str,
        key_type: KeyType,
        scopes: Option<&[&str]>,
        apis: Option<&[&str]>,
        expires_in_ms: Option<i64>,
    ) -> Value {
        admin::create_key(
            &*self.store,
            admin::NewKey {
                account_id: account,
                key_type,
                name: "test key",
                scopes: scopes.map(|s| s.iter().map(|x| x.to_string()).collect()),
                apis: apis.map(|s| s.iter().map(|x| x.to_string()).collect()),
                expires_in_ms,
            },
        )
        .await
        .expect("create key")
    }

    /// A client with a new restricted key of `account`.
    pub async fn restricted_client(
        &self,
        account: &str,
        scopes: Option<&[&str]>,
        apis: Option<&[&str]>,
    ) -> TestClient {
        let key = self
            .create_key_with(account, KeyType::Restricted, scopes, apis, None)
            .await;
        self.client(key["secret"].as_str().unwrap())
    }

    pub fn client(&self, key: &str) -> TestClient {
        TestClient::new(&self.base, Some(key))
    }

    pub fn anonymous(&self) -> TestClient {
        TestClient::new(&self.base, None)
    }

    /// Another instance on the same store, as a second process runs one:
    /// its own pool, listener and runner id; `f` adjusts its configuration.
    pub async fn another_instance(&self, f: impl FnOnce(&mut Config)) -> Server {
        let mut config = self.config.clone();
        f(&mut config);
        let store = taskgate_server::open_store(&config)
            .await
            .expect("open store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // The same time as this one: processes on one machine share it.
        taskgate_server::start_with(
            config,
            store,
            Some(listener),
            std::sync::Arc::new(|_: &str| None),
            self.clock.clone(),
        )
        .await
        .expect("server starts")
    }

    /// Stops the server and drops the store.
    pub async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await.expect("clean stop");
        }
        match &self.db {
            Db::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Db::Postgres { admin, name } => {
                if let Ok(pool) = sqlx::PgPool::connect(admin).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await;
                }
            }
        }
    }
}

impl Builder {
    pub fn plan(mut self, plan: &str) -> Self {
        self.plan = plan.to_owned();
        self
    }

    pub fn config(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.config);
        self
    }

    /// Serves the APIs of `provider` too (a test's own, in the process).
    pub fn provider(mut self, provider: impl taskgate_providers::Provider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    pub async fn start(self) -> Option<TestApp> {
        let Builder {
            backend,
            mut config,
            plan,
            providers,
        } = self;
        let unique = format!(
            "{}_{}",
            std::process::id(),
            taskgate_core::RequestId::new().to_string().to_lowercase()
        );
        let db = match backend {
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("taskgate_it_{unique}.db"));
                config.database_url = format!("sqlite://{}", path.display());
                Db::Sqlite(path)
            }
            Backend::Postgres => {
                let admin = postgres_admin_url();
                // One connection attempt, not a pool (which retries for 30 s):
                // without a server the suite must skip fast.
                let connect = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    <sqlx::PgConnection as sqlx::Connection>::connect(&admin),
                );
                let mut conn = match connect
                    .await
                    .unwrap_or_else(|_| Err(sqlx::Error::PoolTimedOut))
                {
                    Ok(c) => c,
                    Err(e) if !in_ci() => {
                        eprintln!("SKIPPED: PostgreSQL suite (no server at {admin}: {e})");
                        return None;
                    }
                    Err(e) => panic!("PostgreSQL is required in CI ({admin}): {e}"),
                };
                let name = format!("tg_it_{unique}");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let _ = sqlx::Connection::close(conn).await;
                let (prefix, _) = admin.rsplit_once('/').expect("database url has a path");
                config.database_url = format!("{prefix}/{name}");
                Db::Postgres { admin, name }
            }
        };
        let store = taskgate_server::open_store(&config)
            .await
            .expect("open store");
        let account = admin::create_account(&*store, &config, "default", &plan, None)
            .await
            .expect("account");
        let account_id = account["id"].as_str().unwrap().to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let clock = taskgate_core::Clock::adjustable();
        let env: taskgate_server::catalog::EnvLookup = Arc::new(|_: &str| None);
        let server = if providers.is_empty() {
            taskgate_server::start_with(
                config.clone(),
                store.clone(),
                Some(listener),
                env,
                clock.clone(),
            )
            .await
        } else {
            let catalog =
                taskgate_server::catalog::Catalog::from_config_with(&config, &env, providers)
                    .expect("catalog");
            taskgate_server::start_with_catalog(
                config.clone(),
                store.clone(),
                Some(listener),
                catalog,
                clock.clone(),
            )
            .await
        }
        .expect("server starts");
        let base = format!("http://{}", server.addr);
        let mut app = TestApp {
            server: Some(server),
            base,
            store,
            config,
            account_id: account_id.clone(),
            live: String::new(),
            test: String::new(),
            clock,
            db,
        };
        app.live = app.create_key(&account_id, KeyType::Live).await;
        app.test = app.create_key(&account_id, KeyType::Test).await;
        Some(app)
    }
}

#[derive(Clone)]
pub struct TestClient {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the status and, for errors, the contract's envelope and code.
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        self.check_envelope();
        self
    }

    pub fn expect_error(self, status: u16, code: &str) -> Self {
        let r = self.expect(status);
        assert_eq!(r.body["success"], json!(false), "{}", r.text);
        assert_eq!(r.body["error"]["code"], json!(code), "{}", r.text);
        r
    }

    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    fn check_envelope(&self) {
        let b = &self.body;
        let rid = b["meta"]["request_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no meta.request_id: {}", self.text));
        assert!(rid.starts_with("req_"), "{rid}");
        assert_eq!(self.header("x-request-id"), Some(rid));
        assert!(b["meta"]["latency_ms"].is_number(), "{}", self.text);
        let success = self.status.is_success();
        assert_eq!(b["success"], json!(success), "{}", self.text);
        if success {
            assert!(b.get("error").is_none());
        } else {
            assert_eq!(b["data"], Value::Null);
            let e = &b["error"];
            assert!(
                e["type"].is_string() && e["code"].is_string() && e["message"].is_string(),
                "{}",
                self.text
            );
            let expected_type = match self.status.as_u16() {
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                409 => "conflict_error",
                429 => "rate_limit_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            assert_eq!(e["type"], json!(expected_type), "{}", self.text);
        }
    }
}

impl TestClient {
    pub fn new(base: &str, key: Option<&str>) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.to_owned(),
            key: key.map(str::to_owned),
        }
    }

    pub fn url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("{}{path}", self.base)
        } else {
            format!("{}/api/v1/{path}", self.base)
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, self.url(path));
        if let Some(k) = &self.key {
            r = r.bearer_auth(k);
        }
        r
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let r = req.send().await.expect("request sent");
        let status = r.status();
        let headers = r.headers().clone();
        let text = r.text().await.expect("body read");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(self.request(reqwest::Method::POST, path).json(&body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(self.request(reqwest::Method::PATCH, path).json(&body))
            .await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Resp {
        self.send(
            self.request(reqwest::Method::POST, path)
                .header("content-type", "application/json")
                .body(body),
        )
        .await
    }

    /// POST /call.
    pub async fn call(&self, body: Value) -> Resp {
        self.post("call", body).await
    }

    pub async fn call_idempotent(&self, key: &str, body: Value) -> Resp {
        self.send(
            self.request(reqwest::Method::POST, "call")
                .header("idempotency-key", key)
                .json(&body),
        )
        .await
    }

    /// Polls a task until it is terminal.
    pub async fn wait_terminal(&self, id: &str) -> Value {
        let what = format!("task {id} finished");
        eventually(Duration::from_secs(20), &what, || async move {
            let r = self.get(&format!("call/{id}")).await.expect(200);
            let status = r.data()["status"].as_str().unwrap();
            ["succeeded", "failed", "cancelled"]
                .contains(&status)
                .then(|| r.data().clone())
        })
        .await
    }
}

/// Polls `check` until it gives `Some`, failing (saying `what` was awaited)
/// after `within`: a wait on a condition with a deadline, where a fixed
/// sleep would be too short on a busy machine and too long on an idle one.
pub async fn eventually<T, F>(within: Duration, what: &str, mut check: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn sentiment(text: &str) -> Value {
    json!({ "api": "sentiment", "input": { "text": text } })
}
