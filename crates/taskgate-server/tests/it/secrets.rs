//! No credential of a provider reaches the log or an answer. Providers of
//! every type (`openai`, `anthropic`, `gemini`, `http`, `http` with a job)
//! carry distinctive secrets in their key, a header, the query string and
//! the body; fake upstreams (raw HTTP on loopback) quote every request back
//! in their errors, fail, break off, hang, refuse cancels, or are not there
//! at all, so each path that logs or reports an upstream failure runs:
//! failures, retries, transport errors, timeouts, streamed errors, a job's
//! polls, failure and cancel, and the circuit breaker. The server's whole
//! log (every target, `TRACE`, `log` records too) is captured, and neither
//! it nor any answer may hold a secret in any form.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};
use taskgate_providers::upstream::{HttpApiConfig, Protocol, ProviderConfig, Secret};
use taskgate_server::config::ApiOverride;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::utils::{Backend, TestApp, TestClient};

/// The server's log, as written.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

/// Runs `body` on a runtime of its own whose every thread (workers and the
/// blocking pool) logs into `capture`: the server started in `body` logs
/// there, and no other test's server does.
fn with_captured_log<F: std::future::Future<Output = ()>>(capture: &Capture, body: F) {
    // `log` records (reqwest's, say) become events of the thread's
    // subscriber; a second install (another test) is refused, harmlessly.
    let _ = tracing_log::LogTracer::init();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let on_threads = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            // For the thread's life: the guard would restore the default.
            std::mem::forget(tracing::dispatcher::set_default(&on_threads));
        })
        .build()
        .unwrap();
    let _guard = tracing::dispatcher::set_default(&dispatch);
    runtime.block_on(body);
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// One provider's secrets. Each has an alphanumeric core, which no encoding
/// changes, so finding the core finds the secret in any form; the rest are
/// characters that URLs and JSON escape.
struct Secrets {
    key: String,
    header: String,
    query: String,
    body: String,
}

impl Secrets {
    fn of(provider: &str) -> Self {
        let tag: String = provider
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let make = |place: &str| format!("ZqX{tag}{place}Secret7f3/+=&x y\"q");
        Self {
            key: make("Key").replace(['"', ' '], "_"),
            header: make("Header").replace('"', "_"),
            query: make("Query"),
            body: make("Body"),
        }
    }

    fn cores(&self) -> Vec<String> {
        [&self.key, &self.header, &self.query, &self.body]
            .iter()
            .map(|s| s[..s.find('/').unwrap()].to_owned())
            .collect()
    }

    fn provider(&self, protocol: Protocol, base_url: &str, breaker: u32) -> ProviderConfig {
        ProviderConfig {
            protocol,
            base_url: Some(base_url.to_owned()),
            api_key: Some(Secret::new(&self.key)),
            api_key_env: None,
            auth_header: None,
            headers: [("x-extra-auth".to_owned(), Secret::new(&self.header))].into(),
            query: [("key".to_owned(), Secret::new(&self.query))].into(),
            body: [("account_token".to_owned(), Secret::new(&self.body))].into(),
            timeout_ms: Some(500),
            max_retries: Some(1),
            stream: Some(true),
            breaker_failures: Some(breaker),
            breaker_cooldown_ms: Some(600_000),
        }
    }
}

/// A fake upstream speaking raw HTTP/1.1, one request per connection. What
/// it does is read from the request: the scenario named in the body
/// (`SCENARIO:name`) or in a job's path (`/jobs/job-name`).
#[derive(Clone)]
struct Upstream {
    protocol: &'static str,
    /// Every request as received (head and body).
    seen: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    async fn start(protocol: &'static str) -> (Self, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Self {
            protocol,
            seen: Arc::default(),
        };
        let server = up.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(server.clone().serve(socket));
            }
        });
        (up, format!("http://{addr}"))
    }

    /// Requests seen for `path` (without the query).
    fn saw(&self, path: &str) -> usize {
        self.seen
            .lock()
            .iter()
            .filter(|r| path_of(r) == path)
            .count()
    }

    async fn serve(self, mut socket: TcpStream) {
        let Some(request) = read_request(&mut socket).await else {
            return;
        };
        self.seen.lock().push(request.clone());
        let path = path_of(&request).to_owned();
        let scenario = request
            .split("SCENARIO:")
            .nth(1)
            .or_else(|| path.split("/jobs/job-").nth(1))
            .map(|s| {
                s.chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
            })
            .unwrap_or_default();
        // The whole request quoted back, as careless services do.
        let echo = format!("rejected request: {request}");
        let error = json!({"error": {"message": echo, "type": "invalid_request_error"}});
        let is_job_path = path.contains("/jobs/");
        match scenario.as_str() {
            "echo400" => respond(&mut socket, 400, &error).await,
            "echo401" => respond(&mut socket, 401, &error).await,
            "echo500" => respond(&mut socket, 500, &error).await,
            "close" => {}
            "hang" => {
                let mut sink = [0u8; 1024];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
            }
            "streamerr" => {
                let event = match self.protocol {
                    "anthropic" => format!(
                        "event: error\ndata: {}\n\n",
                        json!({"type": "error", "error": {"type": "overloaded_error", "message": echo}})
                    ),
                    _ => format!("data: {error}\n\n"),
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    event.len()
                );
                let _ = socket.write_all(format!("{head}{event}").as_bytes()).await;
            }
            // A job submitted: its id names its scenario.
            job if !is_job_path && job.starts_with("job") => {
                respond(
                    &mut socket,
                    201,
                    &json!({"id": format!("job-{job}"), "status": "starting"}),
                )
                .await
            }
            // A job that fails, quoting the request that made it.
            "jobfails" => {
                respond(
                    &mut socket,
                    200,
                    &json!({"status": "failed", "error": echo}),
                )
                .await
            }
            // Polled: one failure (retried), then running until cancelled;
            // the cancel gets no answer.
            "jobcancel" if path.ends_with("/cancel") => {}
            "jobcancel" if self.saw(&path) == 1 => respond(&mut socket, 500, &error).await,
            "jobcancel" => respond(&mut socket, 200, &json!({"status": "processing"})).await,
            _ => respond(&mut socket, 404, &error).await,
        }
    }
}

/// The path of a request's target, without its query.
fn path_of(request: &str) -> &str {
    let target = request.split(' ').nth(1).unwrap_or_default();
    target.split('?').next().unwrap_or_default()
}

/// The request's head and body (by `content-length`), as text.
async fn read_request(socket: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Some(String::from_utf8_lossy(&buf).into_owned());
            }
        }
    }
}

async fn respond(socket: &mut TcpStream, status: u16, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
}

/// A `chat` API served by `provider`, through a template for `http`.
fn api(provider: &str, job: bool) -> ApiOverride {
    let http = provider.starts_with("http").then(|| {
        let mut http = json!({
            "path": "/v1/generate",
            "body": {"prompt": "{{input.messages.0.content}}", "model": "{{model}}"},
            "output": {"text": "{{response.text}}", "finish_reason": "stop", "model": "{{model}}"}
        });
        if job {
            http["job"] = json!({
                "id": "{{response.id}}",
                "status_path": "/v1/jobs/{{job.id}}",
                "status": "{{response.status}}",
                "done": ["succeeded"],
                "failed": ["failed"],
                "cancel_path": "/v1/jobs/{{job.id}}/cancel",
                "poll_interval_ms": 20
            });
        }
        serde_json::from_value::<HttpApiConfig>(http).unwrap()
    });
    ApiOverride {
        kind: Some("chat".parse().unwrap()),
        provider: Some(provider.to_owned()),
        model: Some("model-1".to_owned()),
        input_price_per_1k_tokens_usd: Some("0.01".parse().unwrap()),
        output_price_per_1k_tokens_usd: Some("0.01".parse().unwrap()),
        http,
        ..ApiOverride::default()
    }
}

fn chat(api: &str, scenario: &str) -> Value {
    json!({"api": api, "input": {"messages": [{"role": "user", "content": format!("SCENARIO:{scenario}")}]}})
}

const PROTOCOLS: [(&str, Protocol); 5] = [
    ("openai", Protocol::Openai),
    ("anthropic", Protocol::Anthropic),
    ("gemini", Protocol::Gemini),
    ("http", Protocol::Http),
    ("httpjob", Protocol::Http),
];

async fn no_secret_in_the_log_or_an_answer(backend: Backend, log: Capture) {
    let mut secrets: Vec<(String, Secrets)> = Vec::new();
    let mut upstreams = Vec::new();
    // A port where nothing listens: connections are refused.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut providers = Vec::new();
    for (name, protocol) in PROTOCOLS {
        let (up, base) = Upstream::start(name).await;
        let s = Secrets::of(name);
        providers.push((name.to_owned(), s.provider(protocol, &base, 1_000)));
        let down = format!("{name}-down");
        let d = Secrets::of(&down);
        // Opens after two failures: one call, retried once.
        providers.push((
            down.clone(),
            d.provider(protocol, &format!("http://{closed}"), 2),
        ));
        secrets.push((name.to_owned(), s));
        secrets.push((down, d));
        upstreams.push((name, up));
    }
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            for (name, p) in &providers {
                c.providers.insert(name.clone(), p.clone());
                c.catalog.apis.insert(
                    format!("chat-{name}"),
                    api(name, name.starts_with("httpjob")),
                );
            }
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let mut answers: Vec<String> = Vec::new();
    let mut tasks: Vec<String> = Vec::new();
    let mut keep = |r: crate::utils::Resp, answers: &mut Vec<String>| {
        if let Some(id) = r.body["data"]["id"].as_str() {
            tasks.push(id.to_owned());
        }
        answers.push(r.text.clone());
        r
    };

    for (name, _) in PROTOCOLS {
        let api = format!("chat-{name}");
        let mut scenarios = vec!["echo400", "echo401", "echo500", "close", "hang"];
        match name {
            "httpjob" => scenarios = vec!["jobfails"],
            "http" => {}
            _ => scenarios.push("streamerr"),
        }
        for scenario in scenarios {
            let r = keep(c.call(chat(&api, scenario)).await, &mut answers);
            assert_eq!(r.status, 200, "{name} {scenario}: {}", r.text);
            assert_eq!(
                r.body["data"]["status"], "failed",
                "{name} {scenario}: {}",
                r.text
            );
        }
        // Refused connections, retried, open the circuit; then the circuit
        // refuses.
        let down = format!("chat-{name}-down");
        for _ in 0..2 {
            let r = keep(c.call(chat(&down, "echo500")).await, &mut answers);
            assert_eq!(r.body["data"]["status"], "failed", "{}", r.text);
        }
        let r = keep(c.get(&format!("apis/{down}")).await, &mut answers);
        assert_eq!(
            r.body["data"]["status"], "unavailable",
            "{name}: {}",
            r.text
        );
        // The OpenAI-compatible door reports the failure its own way.
        let r = keep(
            c.post(
                "/openai/v1/chat/completions",
                json!({"model": api, "messages": [{"role": "user", "content": "SCENARIO:echo400"}]}),
            )
            .await,
            &mut answers,
        );
        assert!(r.status.as_u16() >= 400, "{}", r.text);
    }

    // A job cancelled while it runs: its poll failed once (retried), the
    // cancel upstream gets no answer, and that failure is logged.
    let job_upstream = &upstreams.iter().find(|(n, _)| *n == "httpjob").unwrap().1;
    let mut call = chat("chat-httpjob", "jobcancel");
    call["mode"] = json!("async");
    let r = keep(c.call(call).await, &mut answers);
    assert_eq!(r.status, 202, "{}", r.text);
    let id = r.body["data"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while job_upstream.saw("/v1/jobs/job-jobcancel") < 3 {
        assert!(Instant::now() < deadline, "the job was not polled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    keep(
        c.post(&format!("tasks/{id}/cancel"), json!({})).await,
        &mut answers,
    );
    while !log.text().contains("could not cancel the upstream job") {
        assert!(
            Instant::now() < deadline,
            "the refused cancel was not logged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every task in full (errors, attempts), the lists, the catalog.
    for id in &tasks {
        let r = c.get(&format!("tasks/{id}")).await;
        answers.push(r.text);
    }
    for path in ["tasks?limit=100", "apis"] {
        answers.push(c.get(path).await.text);
    }
    answers.push(TestClient::new(&app.base, None).get("/metrics").await.text);
    app.stop().await;

    // The secrets were sent, in every place, to each provider that is up.
    for (name, up) in &upstreams {
        let sent = up.seen.lock().join("\n");
        let (_, s) = secrets.iter().find(|(n, _)| n == name).unwrap();
        for core in s.cores() {
            assert!(sent.contains(&core), "{name} was not sent {core}");
        }
    }
    let log = log.text();
    // Each path that logs ran.
    for line in [
        "upstream transport error",
        "job poll failed, retrying",
        "could not cancel the upstream job",
    ] {
        assert!(log.contains(line), "no {line:?} in the log");
    }
    // The quoted requests reached the answers, masked.
    assert!(
        answers
            .iter()
            .any(|a| a.contains("rejected request") && a.contains("***")),
        "no provider's message was shown"
    );
    for (name, s) in &secrets {
        for core in s.cores() {
            if let Some(at) = log.find(&core) {
                let line = log[..at].rsplit('\n').next().unwrap_or_default();
                panic!("{name}'s secret {core} is in the log: {line}…");
            }
            for a in &answers {
                assert!(
                    !a.contains(&core),
                    "{name}'s secret {core} is in an answer: {a}"
                );
            }
        }
    }
}

#[test]
fn no_provider_secret_reaches_the_log_or_an_answer_sqlite() {
    let log = Capture::default();
    with_captured_log(
        &log,
        no_secret_in_the_log_or_an_answer(Backend::Sqlite, log.clone()),
    );
}

#[test]
fn no_provider_secret_reaches_the_log_or_an_answer_postgres() {
    let log = Capture::default();
    with_captured_log(
        &log,
        no_secret_in_the_log_or_an_answer(Backend::Postgres, log.clone()),
    );
}
