//! The `taskgate` binary, run as an operator runs it (api-v1.md §8): migrate,
//! accounts and keys with `--json`, clear errors, and `serve` across a first
//! start, a `kill -9` and a restart on the same store.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use taskgate_core::Timestamp;

fn now_ms() -> i64 {
    Timestamp::now().unix_ms()
}
use taskgate_core::{ApiKeySecret, KeyType};

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

/// A fresh directory under the system temp dir, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "taskgate_cli_{tag}_{}_{nanos}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn database_url(&self) -> String {
        format!("sqlite://{}", self.0.join("t.db").display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary, in `dir` (so no stray `./taskgate.toml` is read), on the
/// directory's store, with no `TASKGATE_*` from the test's environment.
fn taskgate(dir: &TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskgate"));
    cmd.current_dir(dir.path());
    for (k, _) in std::env::vars() {
        // Nor may a developer's own provider keys reach a test's server.
        let provider = ["OPENAI_", "ANTHROPIC_", "GEMINI_"]
            .iter()
            .any(|p| k.starts_with(p));
        if k.starts_with("TASKGATE_") || provider {
            cmd.env_remove(k);
        }
    }
    cmd.env("TASKGATE_DATABASE_URL", dir.database_url());
    cmd
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn run(dir: &TempDir, args: &[&str]) -> Output {
    let out = taskgate(dir).args(args).output().expect("run taskgate");
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a command that must succeed and print one JSON document.
fn json_of(dir: &TempDir, args: &[&str]) -> Value {
    let out = run(dir, args);
    assert!(out.ok, "taskgate {args:?} failed: {}", out.stderr);
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("taskgate {args:?} printed no JSON ({e}): {}", out.stdout))
}

/// Runs a command that must fail: non-zero exit, nothing on stdout, and a
/// message on stderr that contains `needle`.
fn fails(dir: &TempDir, args: &[&str], needle: &str) -> String {
    let out = run(dir, args);
    assert!(
        !out.ok,
        "taskgate {args:?} should fail; printed: {}",
        out.stdout
    );
    assert!(
        out.stdout.trim().is_empty(),
        "taskgate {args:?} printed on stdout: {}",
        out.stdout
    );
    assert!(
        out.stderr.contains(needle),
        "taskgate {args:?}: stderr lacks {needle:?}: {}",
        out.stderr
    );
    assert!(
        out.stderr.len() < 2000,
        "an error message, not a dump: {}",
        out.stderr
    );
    out.stderr
}

fn ts(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    assert!(
        s.len() == 24 && s.ends_with('Z'),
        "not RFC 3339 with ms: {s}"
    );
    Timestamp::parse_rfc3339(s).unwrap().unix_ms()
}

fn keys_of(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|k| k["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn migrate_accounts_and_keys() {
    let dir = TempDir::new("admin");
    assert_eq!(
        json_of(&dir, &["migrate", "--json"]),
        json!({ "migrated": true, "backend": "sqlite" })
    );
    // Again: nothing to do, still fine; and a sentence without --json.
    let out = run(&dir, &["migrate"]);
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);

    // Accounts.
    let before = now_ms();
    let acct = json_of(
        &dir,
        &[
            "accounts", "create", "--name", "acme", "--plan", "pro", "--json",
        ],
    );
    for f in [
        "id",
        "name",
        "plan",
        "status",
        "monthly_spend_limit_usd",
        "created_at",
    ] {
        assert!(acct.get(f).is_some(), "account lacks {f}: {acct}");
    }
    let id = acct["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("acct_") && id.len() == 31, "{id}");
    assert_eq!(acct["name"], json!("acme"));
    assert_eq!(acct["plan"], json!("pro"));
    assert_eq!(acct["status"], json!("active"));
    assert_eq!(acct["monthly_spend_limit_usd"], json!(null));
    let created = ts(&acct["created_at"]);
    assert!(created >= before - 1000 && created <= now_ms() + 1000);

    let capped = json_of(
        &dir,
        &[
            "accounts",
            "create",
            "--name",
            "capped",
            "--monthly-spend-limit",
            "25",
            "--json",
        ],
    );
    assert_eq!(capped["plan"], json!("free"), "the default plan");
    assert_eq!(capped["monthly_spend_limit_usd"], json!("25.00"));

    let suspended = json_of(
        &dir,
        &["accounts", "update", &id, "--status", "suspended", "--json"],
    );
    assert_eq!(suspended["id"], json!(id));
    assert_eq!(suspended["status"], json!("suspended"));
    assert_eq!(suspended["plan"], json!("pro"), "what was not named stays");
    assert_eq!(suspended["created_at"], acct["created_at"]);
    let changed = json_of(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--plan",
            "enterprise",
            "--monthly-spend-limit",
            "0.50",
            "--status",
            "active",
            "--json",
        ],
    );
    assert_eq!(changed["plan"], json!("enterprise"));
    assert_eq!(changed["status"], json!("active"));
    assert_eq!(changed["monthly_spend_limit_usd"], json!("0.50"));
    let lifted = json_of(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--monthly-spend-limit",
            "none",
            "--json",
        ],
    );
    assert_eq!(lifted["monthly_spend_limit_usd"], json!(null));
    let all = json_of(&dir, &["accounts", "list", "--json"]);
    assert_eq!(all.as_array().unwrap().len(), 2);

    // A restricted key: the key object plus its secret, shown this once.
    let ci = json_of(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "restricted",
            "--name",
            "ci",
            "--scopes",
            "apis:read",
            "--apis",
            "sentiment",
            "--expires-in",
            "30d",
            "--json",
        ],
    );
    for f in [
        "id",
        "name",
        "type",
        "mode",
        "scopes",
        "allowed_apis",
        "hint",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
        "secret",
    ] {
        assert!(ci.get(f).is_some(), "key lacks {f}: {ci}");
    }
    let ci_id = ci["id"].as_str().unwrap().to_owned();
    assert!(ci_id.starts_with("key_"), "{ci_id}");
    assert_eq!(ci["name"], json!("ci"));
    assert_eq!(ci["type"], json!("restricted"));
    assert_eq!(ci["mode"], json!("live"));
    assert_eq!(ci["scopes"], json!(["apis:read"]));
    assert_eq!(ci["allowed_apis"], json!(["sentiment"]));
    assert_eq!(ci["last_used_at"], json!(null));
    assert_eq!(ci["revoked_at"], json!(null));
    assert_eq!(ts(&ci["expires_at"]) - ts(&ci["created_at"]), 30 * DAY_MS);
    let ci_secret = ci["secret"].as_str().unwrap().to_owned();
    let parsed = ApiKeySecret::parse(&ci_secret).expect("the secret is a well-formed key");
    assert_eq!(parsed.key_type(), KeyType::Restricted);
    assert!(ci_secret.starts_with("tg_restrict_"));
    assert_eq!(
        ci["hint"],
        json!(format!(
            "tg_restrict_…{}",
            &ci_secret[ci_secret.len() - 4..]
        ))
    );

    let live = json_of(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "live",
            "--name",
            "prod",
            "--json",
        ],
    );
    let live_id = live["id"].as_str().unwrap().to_owned();
    let live_secret = live["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        ApiKeySecret::parse(&live_secret).unwrap().key_type(),
        KeyType::Live
    );
    assert_eq!(live["mode"], json!("live"));
    assert_eq!(
        live["scopes"],
        json!([
            "apis:read",
            "tasks:read",
            "tasks:write",
            "webhooks:read",
            "webhooks:write"
        ])
    );
    assert_eq!(live["allowed_apis"], json!(null));
    assert_eq!(live["expires_at"], json!(null));
    let test = json_of(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "test",
            "--name",
            "dev",
            "--json",
        ],
    );
    let test_secret = test["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        ApiKeySecret::parse(&test_secret).unwrap().key_type(),
        KeyType::Test
    );
    assert_eq!(test["mode"], json!("test"));

    // Listing never shows a secret, in JSON or for people.
    let secrets = [&ci_secret, &live_secret, &test_secret];
    let out = run(&dir, &["keys", "list", "--account", &id, "--json"]);
    assert!(out.ok, "{}", out.stderr);
    let list: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let mut ids = keys_of(&list);
    ids.sort();
    let mut expected = vec![
        ci_id.clone(),
        live_id.clone(),
        test["id"].as_str().unwrap().to_owned(),
    ];
    expected.sort();
    assert_eq!(ids, expected);
    for k in list.as_array().unwrap() {
        assert!(k.get("secret").is_none(), "{k}");
        assert!(k["hint"].as_str().unwrap().contains('…'));
    }
    let listed_ci = list
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == json!(ci_id))
        .unwrap();
    let mut without_secret = ci.clone();
    without_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(
        listed_ci, &without_secret,
        "the listed key is the created key minus its secret"
    );
    let human = run(&dir, &["keys", "list", "--account", &id]);
    assert!(human.ok);
    for s in secrets {
        assert!(
            !out.stdout.contains(s.as_str()) && !human.stdout.contains(s.as_str()),
            "a secret was printed"
        );
        // Not even its random part.
        let random = &s[s.find('_').unwrap() + 1..][..20];
        assert!(!out.stdout.contains(random) && !human.stdout.contains(random));
    }
    assert!(human.stdout.contains(&ci_id));

    // Roll: a new key like the old one; the old one lives on for the grace.
    let t0 = now_ms();
    let rolled = json_of(&dir, &["keys", "roll", &live_id, "--grace", "1h", "--json"]);
    let rolled_id = rolled["id"].as_str().unwrap().to_owned();
    assert_ne!(rolled_id, live_id);
    assert_eq!(rolled["rolled_from"], json!(live_id));
    let rolled_secret = rolled["secret"].as_str().unwrap();
    assert_ne!(rolled_secret, live_secret);
    assert_eq!(
        ApiKeySecret::parse(rolled_secret).unwrap().key_type(),
        KeyType::Live
    );
    for f in [
        "name",
        "type",
        "mode",
        "scopes",
        "allowed_apis",
        "expires_at",
    ] {
        assert_eq!(rolled[f], live[f], "rolled key's {f}");
    }
    let list = json_of(&dir, &["keys", "list", "--account", &id, "--json"]);
    assert_eq!(keys_of(&list).len(), 4);
    let old = list
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == json!(live_id))
        .unwrap();
    let old_expiry = ts(&old["expires_at"]);
    assert!(
        old_expiry >= t0 + HOUR_MS - 1000 && old_expiry <= now_ms() + HOUR_MS + 1000,
        "old key expires in an hour: {old}"
    );
    assert_eq!(old["revoked_at"], json!(null));

    // Revoke: at once, and a second revoke changes nothing.
    let revoked = json_of(&dir, &["keys", "revoke", &ci_id, "--json"]);
    assert_eq!(revoked["id"], json!(ci_id));
    let revoked_at = ts(&revoked["revoked_at"]);
    assert!(revoked_at <= now_ms() + 1000 && revoked_at >= t0 - 1000);
    assert!(revoked.get("secret").is_none());
    let again = json_of(&dir, &["keys", "revoke", &ci_id, "--json"]);
    assert_eq!(again["revoked_at"], revoked["revoked_at"]);
    fails(&dir, &["keys", "roll", &ci_id], "revoked");

    // Errors: non-zero exit and a clear message; nothing is created.
    let missing = "acct_01JD0000000000000000000000";
    fails(
        &dir,
        &["accounts", "create", "--name", "x", "--plan", "gold"],
        "unknown plan \"gold\"",
    );
    fails(
        &dir,
        &[
            "accounts", "create", "--name", "x", "--plan", "gold", "--json",
        ],
        "unknown plan",
    );
    fails(
        &dir,
        &["accounts", "create", "--name", "  ", "--plan", "pro"],
        "--name",
    );
    fails(
        &dir,
        &["accounts", "update", missing, "--status", "suspended"],
        "no account",
    );
    fails(
        &dir,
        &["accounts", "update", &id, "--status", "paused"],
        "--status must be active or suspended",
    );
    fails(&dir, &["accounts", "update", &id], "nothing to change");
    fails(
        &dir,
        &["accounts", "update", &id, "--monthly-spend-limit", "lots"],
        "invalid amount \"lots\"",
    );
    fails(
        &dir,
        &["accounts", "update", &id, "--monthly-spend-limit=-5"],
        "invalid amount",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            missing,
            "--type",
            "live",
            "--name",
            "x",
        ],
        "no account",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            "nonsense",
            "--type",
            "live",
            "--name",
            "x",
        ],
        "no account",
    );
    fails(&dir, &["keys", "list", "--account", missing], "no account");
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "live",
            "--name",
            "x",
            "--expires-in",
            "5y",
        ],
        "invalid duration",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "live",
            "--name",
            "x",
            "--expires-in",
            "30",
        ],
        "invalid duration",
    );
    fails(
        &dir,
        &["keys", "roll", &rolled_id, "--grace", "soon"],
        "invalid duration",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "restricted",
            "--name",
            "x",
        ],
        "--scopes",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "live",
            "--name",
            "x",
            "--scopes",
            "apis:read",
        ],
        "--scopes applies to restricted keys only",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "test",
            "--name",
            "x",
            "--apis",
            "sentiment",
        ],
        "--apis",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "restricted",
            "--name",
            "x",
            "--scopes",
            "apis:write",
        ],
        "apis:write",
    );
    fails(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &id,
            "--type",
            "admin",
            "--name",
            "x",
        ],
        "admin",
    );
    fails(
        &dir,
        &["keys", "revoke", "key_01JD0000000000000000000000"],
        "no key",
    );
    fails(&dir, &["keys", "revoke", "garbage"], "no key");
    fails(
        &dir,
        &["keys", "roll", "key_01JD0000000000000000000000"],
        "no key",
    );
    fails(&dir, &["accounts", "frobnicate"], "frobnicate");
    let list = json_of(&dir, &["keys", "list", "--account", &id, "--json"]);
    assert_eq!(keys_of(&list).len(), 4, "failed commands created nothing");
    assert_eq!(
        json_of(&dir, &["accounts", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // A store that cannot be opened is a clear error too.
    let out = taskgate(&dir)
        .env("TASKGATE_DATABASE_URL", "mysql://nowhere/db")
        .args(["accounts", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}

/// A `taskgate serve` child process, killed (SIGKILL) when dropped, even on
/// panic.
struct Serve {
    child: Child,
    stdout: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    log: PathBuf,
    base: String,
}

impl Serve {
    fn start(dir: &TempDir, port: u16, life: usize) -> Serve {
        Self::start_with(dir, port, life, &[])
    }

    fn start_with(dir: &TempDir, port: u16, life: usize, env: &[(&str, &str)]) -> Serve {
        let log = dir.path().join(format!("serve{life}.log"));
        let mut child = taskgate(dir)
            .arg("serve")
            .env("TASKGATE_LISTEN", format!("127.0.0.1:{port}"))
            // One worker (and one for test tasks, which have their own): a
            // second task waits `queued` behind the first.
            .env("TASKGATE_WORKERS", "1")
            .env("TASKGATE_TEST_WORKERS", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn taskgate serve");
        let pipe = child.stdout.take().unwrap();
        let stdout = Arc::new(Mutex::new(String::new()));
        let sink = stdout.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Serve {
            child,
            stdout,
            reader: Some(reader),
            log,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until this process says it listens and `/healthz` answers.
    /// (Its own line first: another test's server may hold the port, picked
    /// free a moment before, and would answer `/healthz` in its place.)
    async fn ready(&mut self, http: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "taskgate serve exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if !self.log().contains("taskgate is listening") {
                assert!(
                    Instant::now() < deadline,
                    "taskgate serve never listened:\n{}",
                    self.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let answer = http.get(format!("{}/healthz", self.base)).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "taskgate serve never became ready:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The value printed after `label` (e.g. `test key:`), once it is printed.
    async fn printed(&self, label: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.stdout().contains(label) {
            assert!(
                Instant::now() < deadline,
                "{label:?} never printed:\n{}",
                self.stdout()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        after(&self.stdout(), label)
    }

    /// `kill -9`, then everything it printed.
    fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.stdout()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().unwrap().port()
}

/// The value after `label` on the line that has it, e.g. `live key: tg_…`.
fn after(text: &str, label: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no {label:?} in:\n{text}"));
    line.split(label).nth(1).unwrap().trim().to_owned()
}

struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let r = req.bearer_auth(&self.key).send().await.expect("request");
        let status = r.status().as_u16();
        let body = r.json::<Value>().await.unwrap_or(Value::Null);
        (status, body)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}/api/v1/{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(
            self.http
                .post(format!("{}/api/v1/{path}", self.base))
                .json(&body),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_first_start_kill_and_restart() {
    let dir = TempDir::new("serve");
    let port = free_port();
    // No pooled connections: they would outlive the killed process.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // First start on an empty store: an account and two keys, printed once.
    let mut first = Serve::start(&dir, port, 1);
    first.ready(&http).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !first.stdout().contains("test key:") {
        assert!(
            Instant::now() < deadline,
            "no keys printed at first start:\n{}",
            first.stdout()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while !first.stdout().contains("password:") {
        assert!(
            Instant::now() < deadline,
            "no admin printed at first start:\n{}",
            first.stdout()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let banner = first.stdout();
    // The dashboard's address and its first admin, labelled.
    assert!(
        banner.contains(&format!("Dashboard: http://127.0.0.1:{port}/dashboard")),
        "{banner}"
    );
    assert_eq!(after(&banner, "email:"), "admin@taskgate.local", "{banner}");
    assert!(after(&banner, "password:").len() >= 12, "{banner}");
    let live = after(&banner, "live key:");
    let test = after(&banner, "test key:");
    assert_eq!(
        ApiKeySecret::parse(&live).map(|k| k.key_type()),
        Some(KeyType::Live),
        "{banner}"
    );
    assert_eq!(
        ApiKeySecret::parse(&test).map(|k| k.key_type()),
        Some(KeyType::Test),
        "{banner}"
    );
    assert!(banner.contains("default"), "{banner}");
    // The printed curl example names this server and a key, and works.
    assert!(
        banner.contains(&format!("curl -s http://127.0.0.1:{port}/api/v1/call")),
        "{banner}"
    );
    let bearer = after(&banner, "Authorization: Bearer ");
    let bearer = bearer.trim_end_matches(['\'', '\\', ' ']).to_owned();
    assert!(bearer == test || bearer == live, "{banner}");
    let example = after(&banner, "-d '");
    let example: Value =
        serde_json::from_str(example.trim_end_matches('\'')).expect("the example body is JSON");
    let api = Api {
        http: http.clone(),
        base: first.base.clone(),
        key: bearer,
    };
    let (status, body) = api.post("call", example).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], json!("succeeded"), "{body}");
    assert_eq!(body["data"]["output"]["label"], json!("positive"));
    let live_api = Api {
        http: http.clone(),
        base: first.base.clone(),
        key: live.clone(),
    };
    assert_eq!(live_api.get("apis").await.0, 200);

    // A task running for a minute, and one queued behind it (one worker).
    let api = Api {
        http: http.clone(),
        base: first.base.clone(),
        key: test.clone(),
    };
    let (status, body) = api
        .post(
            "call",
            json!({ "api": "sentiment", "input": { "text": "slow" }, "mode": "async",
                              "sandbox": { "delay_ms": 60000 } }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let running = body["data"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = api.get(&format!("call/{running}")).await;
        if body["data"]["status"] == json!("running") {
            break;
        }
        assert!(Instant::now() < deadline, "the task never started: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = api
        .post(
            "call",
            json!({ "api": "sentiment", "input": { "text": "I love this" }, "mode": "async" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let queued = body["data"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        api.get(&format!("call/{queued}")).await.1["data"]["status"],
        json!("queued")
    );

    // kill -9, then start again on the same store and address.
    let printed = first.kill();
    assert_eq!(printed.matches("live key:").count(), 1, "{printed}");
    let mut second = Serve::start(&dir, port, 2);
    second.ready(&http).await;
    let api = Api {
        http: http.clone(),
        base: second.base.clone(),
        key: test.clone(),
    };
    let deadline = Instant::now() + Duration::from_secs(12);
    let (mut first_task, mut second_task);
    loop {
        let (status, body) = api.get("tasks?limit=10").await;
        assert_eq!(status, 200, "{body}");
        let items = body["data"]["items"].as_array().unwrap().clone();
        let find = |id: &str| {
            items
                .iter()
                .find(|t| t["id"] == json!(id))
                .cloned()
                .unwrap()
        };
        first_task = find(&running);
        second_task = find(&queued);
        let done = |t: &Value| {
            ["succeeded", "failed", "cancelled"].contains(&t["status"].as_str().unwrap())
        };
        if done(&first_task) && done(&second_task) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "tasks left unfinished after the restart:\n{first_task}\n{second_task}\n{}",
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The task the dead process was running is not left running.
    assert_eq!(first_task["status"], json!("failed"), "{first_task}");
    assert_eq!(
        first_task["error"]["code"],
        json!("interrupted"),
        "{first_task}"
    );
    assert_eq!(first_task["usage"]["cost_usd"], json!("0.000000"));
    let (_, d) = api.get(&format!("tasks/{running}")).await;
    let statuses: Vec<&str> = d["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "running", "failed"], "{d}");
    // The task it left queued gets run.
    assert_eq!(second_task["status"], json!("succeeded"), "{second_task}");
    let (_, t) = api.get(&format!("call/{queued}")).await;
    assert_eq!(t["data"]["output"]["label"], json!("positive"), "{t}");
    // The keys of the first start still work; the second start printed none.
    let live_api = Api {
        http: http.clone(),
        base: second.base.clone(),
        key: live,
    };
    assert_eq!(live_api.get("tasks").await.0, 200);
    let printed = second.kill();
    assert!(
        !printed.contains("tg_") && !printed.contains("key:") && !printed.contains("password:"),
        "a restart printed keys or a password:\n{printed}"
    );
}

/// Runs a command with `input` on its standard input.
fn with_stdin(dir: &TempDir, args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = taskgate(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `taskgate users …`: create (a password read from stdin, or generated and
/// printed once), list, disable, enable, reset a password; clear refusals.
#[test]
fn users_commands() {
    let dir = TempDir::new("users");
    let account = json_of(&dir, &["--json", "accounts", "create", "--name", "acme"]);
    let account = account["id"].as_str().unwrap().to_owned();

    let out = with_stdin(
        &dir,
        &[
            "--json",
            "users",
            "create",
            "--account",
            &account,
            "--email",
            "Ada@Example.com",
            "--role",
            "owner",
            "--password-stdin",
        ],
        "violet kettle drums at noon\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ada: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ada["email"], json!("ada@example.com"));
    assert_eq!(ada["role"], json!("owner"));
    assert!(
        ada.get("password").is_none(),
        "a chosen password is not printed"
    );

    let bob = json_of(
        &dir,
        &[
            "--json",
            "users",
            "create",
            "--account",
            &account,
            "--email",
            "bob@example.com",
            "--role",
            "member",
        ],
    );
    let generated = bob["password"].as_str().unwrap();
    assert!(generated.len() >= 12);
    let stored = json_of(&dir, &["--json", "users", "list", "--account", &account]);
    assert_eq!(stored.as_array().unwrap().len(), 2);
    assert!(
        !stored.to_string().contains(generated),
        "passwords are not listed"
    );

    let off = json_of(&dir, &["--json", "users", "disable", "bob@example.com"]);
    assert_eq!(off["status"], json!("disabled"));
    let on = json_of(
        &dir,
        &["--json", "users", "enable", bob["id"].as_str().unwrap()],
    );
    assert_eq!(on["status"], json!("active"));
    let reset = json_of(
        &dir,
        &["--json", "users", "reset-password", "bob@example.com"],
    );
    assert_ne!(reset["password"].as_str().unwrap(), generated);

    fails(
        &dir,
        &[
            "users",
            "create",
            "--account",
            &account,
            "--email",
            "ada@example.com",
            "--role",
            "member",
        ],
        "exists",
    );
    fails(
        &dir,
        &[
            "users",
            "create",
            "--account",
            &account,
            "--email",
            "x@example.com",
            "--role",
            "boss",
        ],
        "unknown role",
    );
    fails(&dir, &["users", "disable", "nobody@example.com"], "no user");
    let out = with_stdin(
        &dir,
        &[
            "users",
            "create",
            "--account",
            &account,
            "--email",
            "c@example.com",
            "--role",
            "member",
            "--password-stdin",
        ],
        "password1234\n",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("too common"));
}

/// A fake OpenAI server: embeddings, and chat streamed as OpenAI streams it.
async fn fake_openai() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    use axum::extract::State;
    use axum::http::{HeaderMap, Uri};
    use axum::response::IntoResponse;

    type Seen = Arc<Mutex<Vec<(String, String)>>>;
    async fn handle(
        State(seen): State<Seen>,
        uri: Uri,
        headers: HeaderMap,
        body: String,
    ) -> axum::response::Response {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        seen.lock().unwrap().push((uri.path().to_owned(), auth));
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        match uri.path() {
            "/v1/embeddings" => axum::Json(serde_json::json!({
                "object": "list",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 0.125]}],
                "model": body["model"], "usage": {"prompt_tokens": 4, "total_tokens": 4}
            }))
            .into_response(),
            "/v1/chat/completions" => {
                assert_eq!(body["stream"], true, "chat is streamed by default");
                let chunks = ["Hi", " there"]
                    .iter()
                    .map(|w| serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                        "model": body["model"], "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]}))
                    .chain([serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                        "model": body["model"], "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})])
                    .map(|c| format!("data: {c}\n\n"))
                    .collect::<String>()
                    + "data: [DONE]\n\n";
                ([("content-type", "text/event-stream")], chunks).into_response()
            }
            _ => (axum::http::StatusCode::NOT_FOUND, "unknown").into_response(),
        }
    }
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_keys_in_the_environment_bring_default_apis() {
    let dir = TempDir::new("envkeys");
    let port = free_port();
    let (base, seen) = fake_openai().await;
    let http = reqwest::Client::new();
    let mut serve = Serve::start_with(
        &dir,
        port,
        1,
        &[
            ("OPENAI_API_KEY", "sk-env-secret-123"),
            ("OPENAI_BASE_URL", &base),
            ("ANTHROPIC_API_KEY", "sk-ant-env-secret-456"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ],
    );
    serve.ready(&http).await;
    let api = Api {
        http: http.clone(),
        base: serve.base.clone(),
        key: serve.printed("live key:").await,
    };
    let (status, list) = api.get("apis?limit=100").await;
    assert_eq!(status, 200);
    let slugs: Vec<&str> = list["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["slug"].as_str().unwrap())
        .collect();
    for slug in [
        "openai-chat",
        "openai-embedding",
        "openai-image",
        "openai-transcription",
        "openai-moderation",
        "anthropic-chat",
        "sentiment",
    ] {
        assert!(slugs.contains(&slug), "{slug} missing from {slugs:?}");
    }
    assert!(!slugs.iter().any(|s| s.starts_with("gemini")), "{slugs:?}");

    let (status, t) = api
        .post(
            "call",
            serde_json::json!({"api": "openai-embedding", "input": {"input": "hello"}}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(
        t["data"]["output"]["embeddings"],
        serde_json::json!([[0.25, -0.5, 0.125]])
    );
    assert_eq!(t["data"]["output"]["model"], "text-embedding-3-small");
    // 4 tokens at $0.00002 per 1K: 0.00000008 USD rounds to 0.000000.
    assert_eq!(t["data"]["usage"]["input_tokens"], 4);
    let (status, t) = api
        .post(
            "call",
            serde_json::json!({"api": "openai-chat", "input": {"messages": [{"role": "user", "content": "Hi"}]}}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["data"]["output"]["text"], "Hi there");
    // $0.15 / $0.60 per 1M tokens: 3 in, 2 out = 0.00000165 USD → 0.000002.
    assert_eq!(t["data"]["usage"]["cost_usd"], "0.000002");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            seen.iter()
                .all(|(_, auth)| auth == "Bearer sk-env-secret-123")
        );
    }
    let out = serve.kill();
    for secret in ["sk-env-secret-123", "sk-ant-env-secret-456"] {
        assert!(!out.contains(secret) && !serve.log().contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_hands_back_what_it_cannot_finish() {
    let dir = TempDir::new("drain");
    let port = free_port();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut serve = Serve::start_with(
        &dir,
        port,
        1,
        &[
            ("TASKGATE_SHUTDOWN_GRACE_MS", "1500"),
            ("TASKGATE_WORKERS", "4"),
            // The calls are a test key's: they run on the test workers.
            ("TASKGATE_TEST_WORKERS", "4"),
        ],
    );
    serve.ready(&http).await;
    let api = Api {
        http: http.clone(),
        base: serve.base.clone(),
        key: serve.printed("test key:").await,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    // A task that cannot finish within the grace.
    let (status, long) = api
        .post(
            "call",
            json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                   "sandbox": {"delay_ms": 60000}}),
        )
        .await;
    assert_eq!(status, 202, "{long}");
    let long = long["data"]["id"].as_str().unwrap().to_owned();
    loop {
        let (_, t) = api.get(&format!("call/{long}")).await;
        if t["data"]["status"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "the long task never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A sync call in flight when the signal comes: it is answered.
    let in_flight = Api {
        http: http.clone(),
        base: api.base.clone(),
        key: api.key.clone(),
    };
    let sync = tokio::spawn(async move {
        in_flight
            .post(
                "call",
                json!({"api": "sentiment", "input": {"text": "x"},
                       "sandbox": {"delay_ms": 700}}),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = serve.child.id().to_string();
    let term = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(term.success());
    let (status, body) = sync.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], "succeeded");

    // It exits 0 once the grace is over.
    let exit = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(10),
            "taskgate serve did not exit after SIGTERM:\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "exit status {exit}:\n{}", serve.log());
    // The task it could not finish was handed back at the stop: ended
    // `interrupted`, not left `running` for a lease to lapse.
    let store = taskgate_store::connect(&dir.database_url()).await.unwrap();
    let id = taskgate_core::TaskId::parse(&long).unwrap();
    let task = store.get_task_by_id(id).await.unwrap().unwrap();
    assert_eq!(task.status.as_str(), "failed");
    assert_eq!(task.error.unwrap().code, "interrupted");
}

/// A fresh PostgreSQL database for a test (dropped at the end), or `None`
/// without a server (skipped, except in CI).
async fn postgres_database(name: &str) -> Option<(String, String)> {
    let admin = std::env::var("TASKGATE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let connect = tokio::time::timeout(
        Duration::from_secs(5),
        <sqlx::PgConnection as sqlx::Connection>::connect(&admin),
    );
    let mut conn = match connect.await.unwrap_or(Err(sqlx::Error::PoolTimedOut)) {
        Ok(c) => c,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("PostgreSQL is required in CI ({admin}): {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: PostgreSQL test (no server at {admin}: {e})");
            return None;
        }
    };
    let db = format!("tg_cli_{name}_{}", std::process::id());
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let (prefix, _) = admin.rsplit_once('/').expect("a database in the URL");
    Some((format!("{prefix}/{db}"), admin))
}

async fn drop_database(admin: &str, url: &str) {
    let db = url.rsplit('/').next().unwrap();
    if let Ok(mut conn) = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await {
        let sql = format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)");
        let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_an_instance_loses_no_running_task() {
    let Some((url, admin)) = postgres_database("kill9").await else {
        return;
    };
    let (dir_a, dir_b) = (TempDir::new("kill9a"), TempDir::new("kill9b"));
    let env = [
        ("TASKGATE_DATABASE_URL", url.as_str()),
        ("TASKGATE_WORKERS", "256"),
        // The tasks are a test key's: they run on the test workers.
        ("TASKGATE_TEST_WORKERS", "256"),
        ("TASKGATE_TASK_LEASE_MS", "3000"),
        // No rate limit and no cap of running tasks for the first account.
        ("TASKGATE_DEFAULT_PLAN", "enterprise"),
    ];
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut a = Serve::start_with(&dir_a, free_port(), 1, &env);
    a.ready(&http).await;
    let key = a.printed("test key:").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut b = Serve::start_with(&dir_b, free_port(), 1, &env);
    b.ready(&http).await;
    let on = |s: &Serve| Api {
        http: http.clone(),
        base: s.base.clone(),
        key: key.clone(),
    };
    let (on_a, on_b) = (on(&a), on(&b));

    // 200 tasks running on B (accepted there with workers free).
    let mut ids = Vec::new();
    for _ in 0..200 {
        let (status, t) = on_b
            .post(
                "call",
                json!({"api": "sentiment", "input": {"text": "x"}, "mode": "async",
                       "sandbox": {"delay_ms": 120000}}),
            )
            .await;
        assert_eq!(status, 202, "{t}");
        ids.push(t["data"]["id"].as_str().unwrap().to_owned());
    }
    let count = |status: &'static str| {
        let on_a = &on_a;
        async move {
            let (mut n, mut cursor) = (0, None::<String>);
            loop {
                let mut path = format!("tasks?status={status}&limit=100");
                if let Some(c) = &cursor {
                    path.push_str(&format!("&cursor={c}"));
                }
                let (_, page) = on_a.get(&path).await;
                n += page["data"]["items"].as_array().unwrap().len();
                match page["data"]["next_cursor"].as_str() {
                    Some(c) => cursor = Some(c.to_owned()),
                    None => return n,
                }
            }
        }
    };
    while count("running").await < 200 {
        assert!(Instant::now() < deadline, "the 200 tasks never all ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    b.kill();
    // A takes them back once B's leases lapse (3 s): each ends exactly once.
    let deadline = Instant::now() + Duration::from_secs(30);
    while count("failed").await < 200 {
        assert!(
            Instant::now() < deadline,
            "tasks of the killed instance stayed running:\n{}",
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(count("running").await, 0);
    for id in &ids {
        let (_, t) = on_a.get(&format!("tasks/{id}")).await;
        let t = &t["data"];
        assert_eq!(t["status"], "failed", "{t}");
        assert_eq!(t["error"]["code"], "interrupted", "{t}");
        let ends = t["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                ["succeeded", "failed", "cancelled"].contains(&e["status"].as_str().unwrap())
            })
            .count();
        assert_eq!(ends, 1, "exactly one end: {t}");
    }
    a.kill();
    drop_database(&admin, &url).await;
}

/// The binary allocates with jemalloc, built with the settings of
/// `.cargo/config.toml` (one arena per CPU, unused pages given back by a
/// background thread after 200 ms), unprefixed (it reads `MALLOC_CONF`,
/// as the C library's `malloc` it replaces would): jemalloc prints its
/// options at exit when asked to.
#[cfg(unix)]
#[test]
fn the_binary_allocates_with_the_configured_jemalloc() {
    let out = Command::new(env!("CARGO_BIN_EXE_taskgate"))
        .arg("--version")
        .env("MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = String::from_utf8_lossy(&out.stderr);
    for option in [
        "opt.percpu_arena: \"percpu\"",
        "opt.background_thread: true",
        "opt.dirty_decay_ms: 200",
        "opt.muzzy_decay_ms: 0",
    ] {
        assert!(
            stats.contains(option),
            "{option} not in jemalloc's stats:\n{stats}"
        );
    }
}

/// Issue 25: the first admin's email is the operator's to choose
/// (`--admin-email`, or `TASKGATE_ADMIN_EMAIL`), and the data directory and
/// database a first start makes are private (0700, 0600).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_first_admin_email_and_private_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("admin-email");
    let port = free_port();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let data = dir.path().join("private");
    let mut serve = Serve::start_with(
        &dir,
        port,
        1,
        &[
            ("TASKGATE_ADMIN_EMAIL", " Ops@Example.COM "),
            (
                "TASKGATE_DATABASE_URL",
                &format!("sqlite://{}/taskgate.db", data.display()),
            ),
        ],
    );
    serve.ready(&http).await;
    assert_eq!(serve.printed("email:").await, "ops@example.com");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("taskgate.db")), 0o600);
    serve.kill();
    // A malformed email is refused before anything starts.
    let out = taskgate(&dir)
        .args(["serve", "--admin-email", "not an email"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--admin-email"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `accounts update --max-monthly-spend-limit`: the operator's ceiling on
/// the owners' limit, set, shown, changed with the owners' limit in one
/// command, removed with `none`; a bad amount is a clear error.
#[test]
fn the_operator_sets_a_spend_ceiling() {
    let dir = TempDir::new("ceiling");
    let acct = json_of(
        &dir,
        &[
            "accounts",
            "create",
            "--name",
            "acme",
            "--monthly-spend-limit",
            "50",
            "--json",
        ],
    );
    assert_eq!(acct["max_monthly_spend_limit_usd"], json!(null));
    let id = acct["id"].as_str().unwrap().to_owned();
    let capped = json_of(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--max-monthly-spend-limit",
            "20",
            "--json",
        ],
    );
    assert_eq!(capped["max_monthly_spend_limit_usd"], json!("20.00"));
    assert_eq!(
        capped["monthly_spend_limit_usd"],
        json!("50.00"),
        "the owners' limit is kept (the lower of the two holds)"
    );
    let both = json_of(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--monthly-spend-limit",
            "none",
            "--max-monthly-spend-limit",
            "12.5",
            "--json",
        ],
    );
    assert_eq!(both["monthly_spend_limit_usd"], json!(null));
    assert_eq!(both["max_monthly_spend_limit_usd"], json!("12.50"));
    let listed = json_of(&dir, &["accounts", "list", "--json"]);
    assert_eq!(listed[0]["max_monthly_spend_limit_usd"], json!("12.50"));
    fails(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--max-monthly-spend-limit",
            "lots",
        ],
        "--max-monthly-spend-limit",
    );
    let lifted = json_of(
        &dir,
        &[
            "accounts",
            "update",
            &id,
            "--max-monthly-spend-limit",
            "none",
            "--json",
        ],
    );
    assert_eq!(lifted["max_monthly_spend_limit_usd"], json!(null));
}

/// `TASKGATE_METRICS_TOKEN` is read like any setting; a value figment reads
/// as a number is refused with a message that does not quote it.
#[test]
fn a_metrics_token_from_the_environment_is_never_echoed() {
    let dir = TempDir::new("metricstoken");
    let out = taskgate(&dir)
        .args(["migrate", "--json"])
        .env("TASKGATE_METRICS_TOKEN", "918273645546372819")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.to_lowercase().contains("metrics_token"), "{stderr}");
    assert!(stderr.contains("must be a string"), "{stderr}");
    assert!(!stderr.contains("918273645546372819"), "{stderr}");
    let out = taskgate(&dir)
        .args(["migrate", "--json"])
        .env("TASKGATE_METRICS_TOKEN", "\"918273645546372819\"")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs one statement on the directory's SQLite store, beside the binary.
fn raw_sql(dir: &TempDir, sql: String) {
    use sqlx::Connection;
    let url = dir.database_url();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async move {
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
        });
}

/// `audit list` shows the operator's changes newest first, filtered;
/// `audit verify` exits 0 on a whole chain and 1 naming the first event
/// that does not match once a row is edited, and once one is deleted.
#[test]
fn audit_list_and_verify() {
    let dir = TempDir::new("audit");
    json_of(&dir, &["migrate", "--json"]);
    let account = json_of(&dir, &["accounts", "create", "--name", "acme", "--json"]);
    let account = account["id"].as_str().unwrap().to_owned();
    let key = json_of(
        &dir,
        &[
            "keys",
            "create",
            "--account",
            &account,
            "--type",
            "live",
            "--name",
            "ci",
            "--json",
        ],
    );
    let secret = key["secret"].as_str().unwrap().to_owned();
    let key_id = key["id"].as_str().unwrap().to_owned();
    json_of(&dir, &["keys", "revoke", &key_id, "--json"]);

    let list = json_of(&dir, &["audit", "list", "--json"]);
    let actions: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["key.revoked", "key.created", "account.created"]);
    let first = &list[2];
    assert_eq!(first["actor"]["type"], "operator");
    assert!(first["actor"]["id"].as_str().unwrap().starts_with("cli"));
    assert_eq!(first["target"], json!({"type": "account", "id": account}));
    assert!(first["id"].as_str().unwrap().starts_with("aud_"));
    assert_eq!(first["hash"].as_str().unwrap().len(), 64);
    assert!(!list.to_string().contains(&secret), "the key's secret");
    let only = |args: &[&str]| {
        let mut all = vec!["audit", "list", "--json"];
        all.extend_from_slice(args);
        json_of(&dir, &all).as_array().unwrap().len()
    };
    assert_eq!(only(&["--action", "key.created"]), 1);
    assert_eq!(only(&["--account", &account]), 3);
    assert_eq!(only(&["--since", "1h"]), 3);
    assert_eq!(only(&["--since", "2999-01-01T00:00:00Z"]), 0);
    fails(
        &dir,
        &["audit", "list", "--action", "key.eaten"],
        "key.created",
    );
    let text = run(&dir, &["audit", "list"]);
    assert!(
        text.ok && text.stdout.lines().count() == 3,
        "{}",
        text.stdout
    );

    let v = json_of(&dir, &["audit", "verify", "--json"]);
    assert_eq!(
        (v["ok"].clone(), v["checked"].clone()),
        (json!(true), json!(3))
    );
    assert!(run(&dir, &["audit", "verify"]).ok);

    // An edited row: named, exit 1.
    let created = list[1]["id"].as_str().unwrap().to_owned();
    raw_sql(
        &dir,
        format!(
            "UPDATE audit_events SET changes = REPLACE(changes, '\"ci\"', '\"cd\"') WHERE id = '{created}'"
        ),
    );
    let out = run(&dir, &["audit", "verify", "--json"]);
    assert!(!out.ok);
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["first_bad_event"], created.as_str());
    let out = run(&dir, &["audit", "verify"]);
    assert!(!out.ok && out.stdout.contains(&created), "{}", out.stdout);

    // Put back, then a row deleted: the event after it is named.
    raw_sql(
        &dir,
        format!(
            "UPDATE audit_events SET changes = REPLACE(changes, '\"cd\"', '\"ci\"') WHERE id = '{created}'"
        ),
    );
    assert!(run(&dir, &["audit", "verify"]).ok);
    raw_sql(
        &dir,
        format!("DELETE FROM audit_events WHERE id = '{created}'"),
    );
    let out = run(&dir, &["audit", "verify", "--json"]);
    assert!(!out.ok);
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["first_bad_event"], list[0]["id"]);
}

/// `log_format = "json"` and the standard OpenTelemetry variables, as an
/// operator sets them: every stderr line is one flat JSON object, a
/// request's line carries its id, and spans reach the collector named by
/// `OTEL_EXPORTER_OTLP_ENDPOINT` under `OTEL_SERVICE_NAME` with
/// `OTEL_EXPORTER_OTLP_HEADERS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_and_otel_variables() {
    use axum::body::Bytes;
    use axum::http::HeaderMap;

    type Got = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;
    let got: Got = Arc::default();
    async fn collect(
        axum::extract::State(got): axum::extract::State<Got>,
        headers: HeaderMap,
        body: Bytes,
    ) -> &'static str {
        got.lock().unwrap().push((headers, body.to_vec()));
        ""
    }
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(collect))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = TempDir::new("jsonlogs");
    let http = reqwest::Client::new();
    let mut serve = Serve::start_with(
        &dir,
        free_port(),
        1,
        &[
            ("TASKGATE_LOG_FORMAT", "json"),
            ("TASKGATE_LOG_LEVEL", "taskgate_server=debug,info"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-team-key=s3cr3t-team-key"),
            ("OTEL_SERVICE_NAME", "edge-gateway"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    serve.ready(&http).await;
    let key = serve.printed("live key:").await;
    let r = http
        .post(format!("{}/api/v1/call", serve.base))
        .bearer_auth(&key)
        .json(&json!({"api": "sentiment", "input": {"text": "great"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let request_id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let found = got
            .lock()
            .unwrap()
            .iter()
            .find(|(_, b)| {
                b.windows(b"POST /api/v1/call".len())
                    .any(|w| w == b"POST /api/v1/call")
            })
            .cloned();
        if let Some(found) = found {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "no span exported:\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(body.0["content-type"], "application/x-protobuf");
    assert_eq!(body.0["x-team-key"], "s3cr3t-team-key");
    assert!(
        body.1.windows(12).any(|w| w == b"edge-gateway"),
        "service.name from OTEL_SERVICE_NAME"
    );
    // The request's own line, with its id at the top level.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !serve.log().contains(&request_id) {
        assert!(
            Instant::now() < deadline,
            "no line of {request_id}:\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.kill();
    let log = serve.log();
    assert!(
        !log.contains("s3cr3t-team-key"),
        "a header's value is never logged"
    );
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for line in &lines {
        for k in ["timestamp", "level", "target", "message"] {
            assert!(line[k].is_string(), "{k} in {line}");
        }
        assert!(line.get("fields").is_none(), "flat: {line}");
    }
    let listening = lines
        .iter()
        .find(|l| l["message"] == "taskgate is listening")
        .expect("the listening line");
    assert!(listening["addr"].is_string(), "{listening}");
    let served = lines
        .iter()
        .find(|l| l["message"] == "request served" && l["request_id"] == request_id.as_str())
        .unwrap_or_else(|| panic!("the request's line in:\n{log}"));
    assert_eq!(served["route"], "/api/v1/call");
    assert_eq!(served["status"], 200);
    assert!(
        served["trace_id"].as_str().is_some_and(|t| t.len() == 32),
        "{served}"
    );
}
