//! Traces over OTLP (issue 29): a collector of our own on loopback takes
//! the exports (OTLP/HTTP protobuf, or gRPC), decodes their protobuf and
//! the tests read the spans: names, kinds, attributes, parents across a
//! `202`, and the `traceparent` the fake upstream receives.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::upstream::{Fake, Reply, chat_api, chat_completion};
use crate::utils::{Backend, TestApp, both, eventually, sentiment};

/// Protobuf's wire values, as far as the tests read them.
#[derive(Debug, Clone)]
enum Wire {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32(u32),
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// A message's fields in order.
fn fields(b: &[u8]) -> Vec<(u32, Wire)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at);
        let field = (key >> 3) as u32;
        let value = match key & 7 {
            0 => Wire::Varint(varint(b, &mut at)),
            1 => {
                let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                at += 8;
                Wire::Fixed64(v)
            }
            2 => {
                let n = varint(b, &mut at) as usize;
                let v = b[at..at + n].to_vec();
                at += n;
                Wire::Bytes(v)
            }
            5 => {
                let v = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                at += 4;
                Wire::Fixed32(v)
            }
            w => panic!("wire type {w}"),
        };
        out.push((field, value));
    }
    out
}

fn all(b: &[u8], n: u32) -> Vec<Vec<u8>> {
    fields(b)
        .into_iter()
        .filter_map(|(f, v)| match (f == n, v) {
            (true, Wire::Bytes(b)) => Some(b),
            _ => None,
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `common.v1.AnyValue` as JSON.
fn any_value(b: &[u8]) -> Value {
    match fields(b).into_iter().next() {
        Some((1, Wire::Bytes(s))) => json!(String::from_utf8(s).unwrap()),
        Some((2, Wire::Varint(v))) => json!(v != 0),
        Some((3, Wire::Varint(v))) => json!(v as i64),
        Some((4, Wire::Fixed64(v))) => json!(f64::from_bits(v)),
        Some((5, Wire::Bytes(arr))) => {
            Value::Array(all(&arr, 1).iter().map(|v| any_value(v)).collect())
        }
        other => panic!("value {other:?}"),
    }
}

fn attributes(kvs: Vec<Vec<u8>>) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| {
            let key = String::from_utf8(all(kv, 1).remove(0)).unwrap();
            let value = all(kv, 2).first().map_or(Value::Null, |v| any_value(v));
            (key, value)
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent: Option<String>,
    name: String,
    kind: u64,
    attrs: BTreeMap<String, Value>,
    error: Option<String>,
    flags: u32,
    resource: BTreeMap<String, Value>,
}

impl Span {
    fn attr(&self, key: &str) -> &Value {
        self.attrs.get(key).unwrap_or(&Value::Null)
    }
}

/// An `ExportTraceServiceRequest`'s spans.
fn spans_of(request: &[u8]) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in all(request, 1) {
        let resource = all(&rs, 1)
            .first()
            .map(|r| attributes(all(r, 1)))
            .unwrap_or_default();
        for ss in all(&rs, 2) {
            let scope = all(&ss, 1).remove(0);
            assert_eq!(all(&scope, 1)[0], b"taskgate");
            for s in all(&ss, 2) {
                let f = fields(&s);
                let bytes = |n: u32| {
                    f.iter().find_map(|(k, v)| match (k, v) {
                        (k, Wire::Bytes(b)) if *k == n => Some(b.clone()),
                        _ => None,
                    })
                };
                let kind = f
                    .iter()
                    .find_map(|(k, v)| match (k, v) {
                        (6, Wire::Varint(v)) => Some(*v),
                        _ => None,
                    })
                    .unwrap_or(0);
                let flags = f
                    .iter()
                    .find_map(|(k, v)| match (k, v) {
                        (16, Wire::Fixed32(v)) => Some(*v),
                        _ => None,
                    })
                    .unwrap_or(0);
                let error = bytes(15).map(|st| {
                    String::from_utf8(all(&st, 2).first().cloned().unwrap_or_default()).unwrap()
                });
                out.push(Span {
                    trace_id: hex(&bytes(1).unwrap()),
                    span_id: hex(&bytes(2).unwrap()),
                    parent: bytes(4).map(|p| hex(&p)),
                    name: String::from_utf8(bytes(5).unwrap()).unwrap(),
                    kind,
                    attrs: attributes(all(&s, 9)),
                    error,
                    flags,
                    resource: resource.clone(),
                });
            }
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Ok,
    /// Never answers.
    Hang,
    /// Answers 503.
    Refuse,
}

/// A collector on loopback: OTLP/HTTP at `/v1/traces`, OTLP/gRPC at the
/// trace service's path.
#[derive(Clone)]
struct Collector {
    url: String,
    got: Arc<Mutex<Vec<Span>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Collector {
    async fn start(answer: Answer) -> Self {
        let got = Arc::new(Mutex::new(Vec::new()));
        let headers = Arc::new(Mutex::new(Vec::new()));
        type S = (Arc<Mutex<Vec<Span>>>, Arc<Mutex<Vec<HeaderMap>>>, Answer);
        async fn http(State((got, seen, answer)): State<S>, h: HeaderMap, body: Bytes) -> Response {
            match answer {
                Answer::Hang => std::future::pending::<()>().await,
                Answer::Refuse => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
                Answer::Ok => {}
            }
            assert_eq!(h["content-type"], "application/x-protobuf");
            seen.lock().push(h);
            got.lock().extend(spans_of(&body));
            StatusCode::OK.into_response()
        }
        async fn grpc(State((got, seen, _)): State<S>, h: HeaderMap, body: Bytes) -> Response {
            assert_eq!(h["content-type"], "application/grpc");
            assert_eq!(body[0], 0, "not compressed");
            let n = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
            assert_eq!(body.len(), n + 5);
            seen.lock().push(h);
            got.lock().extend(spans_of(&body[5..]));
            // An empty ExportTraceServiceResponse; the status with it.
            Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "0")
                .body(axum::body::Body::from(vec![0u8, 0, 0, 0, 0]))
                .unwrap()
        }
        let app = Router::new()
            .route("/v1/traces", axum::routing::post(http))
            .route(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                axum::routing::post(grpc),
            )
            .with_state((got.clone(), headers.clone(), answer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector {
            url: format!("http://{addr}"),
            got,
            headers,
        }
    }

    /// The spans got so far.
    fn spans(&self) -> Vec<Span> {
        self.got.lock().clone()
    }

    /// The span named `name` of trace `trace`, once it came.
    async fn span(&self, trace: &str, name: &str) -> Span {
        let what = format!("the span {name} of trace {trace}");
        eventually(Duration::from_secs(10), &what, || async {
            self.got
                .lock()
                .iter()
                .find(|s| s.trace_id == trace && s.name == name)
                .cloned()
        })
        .await
    }
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

async fn traced_app(backend: Backend, collector: &Collector, fake_base: &str) -> Option<TestApp> {
    let endpoint = collector.url.clone();
    let base = fake_base.to_owned();
    TestApp::builder(backend)
        .config(move |c| {
            c.telemetry.otlp_endpoint = Some(endpoint);
            c.telemetry.export_interval_ms = 50;
            c.telemetry
                .otlp_headers
                .insert("x-collector-key".to_owned(), "k-123".to_owned());
            chat_api(c, &base, false);
        })
        .start()
        .await
}

fn chat_call() -> Value {
    json!({ "api": "chat", "input": { "messages": [{ "role": "user", "content": "Hi" }], "max_tokens": 50 } })
}

/// A sync call: the request's span a child of the caller's, the task's of
/// the request's, the upstream attempt's of the task's with the GenAI
/// attributes; the upstream got the attempt's traceparent.
async fn a_calls_spans_are_one_trace(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = traced_app(backend, &collector, &base).await else {
        return;
    };
    let live = app.client(&app.live);
    let r = live
        .send(
            live.request(reqwest::Method::POST, "call")
                .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
                .header("tracestate", "vendor=abc")
                .json(&chat_call()),
        )
        .await
        .expect(200);
    let task_id = r.data()["id"].as_str().unwrap().to_owned();
    let request_id = r.headers["x-request-id"].to_str().unwrap().to_owned();

    let server = collector.span(CALLER_TRACE, "POST /api/v1/call").await;
    assert_eq!(server.kind, 2, "SERVER");
    assert_eq!(server.parent.as_deref(), Some(CALLER_SPAN));
    assert_eq!(server.flags & 0x301, 0x301, "sampled, its parent remote");
    assert_eq!(server.attr("http.request.method"), "POST");
    assert_eq!(server.attr("http.route"), "/api/v1/call");
    assert_eq!(server.attr("url.path"), "/api/v1/call");
    assert_eq!(server.attr("http.response.status_code"), 200);
    assert_eq!(server.attr("taskgate.request_id"), request_id.as_str());
    assert_eq!(server.attr("taskgate.account_id"), app.account_id.as_str());
    assert!(
        server
            .attr("taskgate.key_id")
            .as_str()
            .unwrap()
            .starts_with("key_"),
        "{:?}",
        server.attrs
    );
    assert_eq!(server.resource["service.name"], "taskgate");
    assert!(server.resource.contains_key("service.version"));

    let task = collector.span(CALLER_TRACE, "taskgate.task").await;
    assert_eq!(task.parent.as_deref(), Some(server.span_id.as_str()));
    assert_eq!(task.attr("taskgate.task.id"), task_id.as_str());
    assert_eq!(task.attr("taskgate.api"), "chat");
    assert_eq!(task.attr("taskgate.task.status"), "succeeded");
    assert_eq!(task.attr("taskgate.task.mode"), "live");
    assert_eq!(task.error, None);

    let attempt = collector.span(CALLER_TRACE, "chat gpt-4o-mini").await;
    assert_eq!(attempt.kind, 3, "CLIENT");
    assert_eq!(attempt.parent.as_deref(), Some(task.span_id.as_str()));
    for (k, v) in [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.provider.name", json!("openai")),
        ("gen_ai.request.model", json!("gpt-4o-mini")),
        ("gen_ai.request.max_tokens", json!(50)),
        ("gen_ai.response.model", json!("gpt-4o-mini-2024-07-18")),
        ("gen_ai.response.id", json!("chatcmpl-abc123")),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("gen_ai.usage.input_tokens", json!(19)),
        ("gen_ai.usage.output_tokens", json!(10)),
        ("server.address", json!("127.0.0.1")),
        ("taskgate.attempt", json!(1)),
    ] {
        assert_eq!(attempt.attr(k), &v, "{k}: {:?}", attempt.attrs);
    }
    // The upstream request is the attempt span's child, the caller's
    // tracestate carried along.
    let seen = fake.seen.lock().clone();
    let (_, headers, body) = seen.last().unwrap();
    assert_eq!(
        headers["traceparent"],
        format!("00-{CALLER_TRACE}-{}-01", attempt.span_id).as_str()
    );
    assert_eq!(headers["tracestate"], "vendor=abc");
    // Contents are not recorded: no span holds the message or the reply.
    assert_eq!(body["messages"][0]["content"], "Hi");
    for s in collector.spans() {
        for v in s.attrs.values() {
            let text = v.to_string();
            assert!(
                !text.contains("Hello!") && !text.contains("\"Hi\""),
                "{}: {text}",
                s.name
            );
            assert!(!text.contains(&app.live), "no key secret in {}", s.name);
        }
    }
    // The collector's own headers were sent.
    assert_eq!(collector.headers.lock()[0]["x-collector-key"], "k-123");
    app.stop().await;
}
both!(a_calls_spans_are_one_trace);

/// An async call's task span is the request's child though it ends after
/// the `202`; a failed attempt says its error.
async fn the_task_span_crosses_the_202_and_failures_say_why(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Json(
        400,
        json!({"error": {"message": "bad", "type": "invalid_request_error"}}),
    ));
    let Some(app) = traced_app(backend, &collector, &base).await else {
        return;
    };
    let live = app.client(&app.live);
    let mut body = chat_call();
    body["mode"] = json!("async");
    let r = live
        .send(
            live.request(reqwest::Method::POST, "call")
                .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
                .json(&body),
        )
        .await
        .expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    live.wait_terminal(&id).await;
    let server = collector.span(CALLER_TRACE, "POST /api/v1/call").await;
    assert_eq!(server.attr("http.response.status_code"), 202);
    let task = collector.span(CALLER_TRACE, "taskgate.task").await;
    assert_eq!(task.parent.as_deref(), Some(server.span_id.as_str()));
    assert_eq!(task.attr("taskgate.task.status"), "failed");
    assert!(task.error.is_some());
    let attempt = collector.span(CALLER_TRACE, "chat gpt-4o-mini").await;
    assert_eq!(attempt.parent.as_deref(), Some(task.span_id.as_str()));
    assert_eq!(attempt.attr("http.response.status_code"), 400);
    assert!(
        attempt.attr("error.type").is_string(),
        "{:?}",
        attempt.attrs
    );
    assert!(attempt.error.is_some());
    app.stop().await;
}
both!(the_task_span_crosses_the_202_and_failures_say_why);

/// A built-in API's work has a span of its own (provider `taskgate`); a
/// call without `traceparent` starts a trace; a caller that did not sample
/// is followed (nothing exported, the decision passed on); probes are not
/// traced.
async fn built_in_apis_and_unsampled_callers(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = traced_app(backend, &collector, &base).await else {
        return;
    };
    let live = app.client(&app.live);
    let r = live.call(sentiment("lovely")).await.expect(200);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let task = eventually(
        Duration::from_secs(10),
        "the sentiment task's span",
        || async {
            collector
                .spans()
                .into_iter()
                .find(|s| s.name == "taskgate.task" && s.attr("taskgate.task.id") == id.as_str())
        },
    )
    .await;
    let builtin = eventually(Duration::from_secs(10), "the built-in span", || async {
        collector
            .spans()
            .into_iter()
            .find(|s| s.trace_id == task.trace_id && s.attr("gen_ai.provider.name") == "taskgate")
    })
    .await;
    assert_eq!(builtin.parent.as_deref(), Some(task.span_id.as_str()));
    assert_eq!(builtin.attr("gen_ai.request.model"), "sentiment");
    let server = collector.span(&task.trace_id, "POST /api/v1/call").await;
    assert_eq!(server.parent, None, "a trace of its own");

    live.get("/healthz").await.expect(200);
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    live.send(
        live.request(reqwest::Method::POST, "call")
            .header("traceparent", format!("00-{unsampled}-b7ad6b7169203331-00"))
            .json(&chat_call()),
    )
    .await
    .expect(200);
    let seen = fake.seen.lock().clone();
    let parent = seen.last().unwrap().1["traceparent"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        parent.starts_with(&format!("00-{unsampled}-")) && parent.ends_with("-00"),
        "{parent}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        collector.spans().iter().all(|s| s.trace_id != unsampled),
        "nothing of an unsampled trace"
    );
    assert!(
        collector.spans().iter().all(|s| s.name != "GET /healthz"),
        "probes are not traced"
    );
    app.stop().await;
}
both!(built_in_apis_and_unsampled_callers);

/// OTLP/gRPC: the same spans, framed, over HTTP/2.
async fn grpc_exports(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let endpoint = collector.url.clone();
    let Some(app) = TestApp::builder(backend)
        .config(move |c| {
            c.telemetry.otlp_endpoint = Some(endpoint);
            c.telemetry.otlp_protocol = taskgate_server::config::OtlpProtocol::Grpc;
            c.telemetry.export_interval_ms = 50;
        })
        .start()
        .await
    else {
        return;
    };
    let live = app.client(&app.live);
    live.call(sentiment("fine")).await.expect(200);
    eventually(Duration::from_secs(10), "spans over gRPC", || async {
        collector
            .spans()
            .iter()
            .any(|s| s.name == "POST /api/v1/call")
            .then_some(())
    })
    .await;
    assert_eq!(collector.headers.lock()[0]["te"], "trailers");
    app.stop().await;
}
both!(grpc_exports);

/// A collector that never answers, one that refuses, or none at all:
/// calls are answered as ever, and the server stops in time.
async fn a_silent_or_missing_collector_changes_nothing(backend: Backend) {
    let silent = Collector::start(Answer::Hang).await;
    let refusing = Collector::start(Answer::Refuse).await;
    for endpoint in [
        silent.url.clone(),
        refusing.url.clone(),
        "http://127.0.0.1:9".to_owned(),
    ] {
        let Some(app) = TestApp::builder(backend)
            .config(move |c| {
                c.telemetry.otlp_endpoint = Some(endpoint);
                c.telemetry.export_interval_ms = 20;
                c.telemetry.export_timeout_ms = 300;
                c.telemetry.max_queue = 8;
                c.telemetry.max_batch = 4;
            })
            .start()
            .await
        else {
            return;
        };
        let live = app.client(&app.live);
        for i in 0..30 {
            live.call(sentiment(&format!("call {i}"))).await.expect(200);
        }
        live.get("tasks").await.expect(200);
        app.stop().await;
    }
}
both!(a_silent_or_missing_collector_changes_nothing);

/// The OpenAI and Anthropic doors: the same trace under the caller's, the
/// upstream request the attempt's child.
async fn the_other_doors_are_traced_alike(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("Hello!"));
    let Some(app) = traced_app(backend, &collector, &base).await else {
        return;
    };
    let c = app.client(&app.live);
    for (trace, path, body) in [
        (
            "11111111111111111111111111111111",
            "/openai/v1/chat/completions",
            json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]}),
        ),
        (
            "22222222222222222222222222222222",
            "/anthropic/v1/messages",
            json!({"model": "chat", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}),
        ),
    ] {
        let r = c
            .request(reqwest::Method::POST, path)
            .header("traceparent", format!("00-{trace}-{CALLER_SPAN}-01"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}: {}", r.text().await.unwrap());
        let server = collector.span(trace, &format!("POST {path}")).await;
        assert_eq!(server.parent.as_deref(), Some(CALLER_SPAN));
        assert_eq!(server.attr("taskgate.account_id"), app.account_id.as_str());
        let task = collector.span(trace, "taskgate.task").await;
        assert_eq!(task.parent.as_deref(), Some(server.span_id.as_str()));
        let attempt = collector.span(trace, "chat gpt-4o-mini").await;
        assert_eq!(attempt.parent.as_deref(), Some(task.span_id.as_str()));
        let seen = fake.seen.lock().clone();
        assert_eq!(
            seen.last().unwrap().1["traceparent"],
            format!("00-{trace}-{}-01", attempt.span_id).as_str()
        );
    }
    app.stop().await;
}
both!(the_other_doors_are_traced_alike);

/// A webhook delivery attempt is a CLIENT span of its own, and the request
/// carries its traceparent.
async fn webhook_attempts_are_traced(backend: Backend) {
    let collector = Collector::start(Answer::Ok).await;
    let endpoint = collector.url.clone();
    let Some(app) = TestApp::builder(backend)
        .config(move |c| {
            c.telemetry.otlp_endpoint = Some(endpoint);
            c.telemetry.export_interval_ms = 50;
            c.webhooks.allow_private_networks = true;
        })
        .start()
        .await
    else {
        return;
    };
    let rx = crate::webhooks::Receiver::start().await;
    let live = app.client(&app.live);
    live.post("webhook_endpoints", json!({ "url": rx.url }))
        .await
        .expect(201);
    live.call(sentiment("hooked")).await.expect(200);
    let got = rx.wait_for(1).await;
    let parent = got[0].header("traceparent").to_owned();
    let message_id = got[0].header("webhook-id").to_owned();
    let span = eventually(Duration::from_secs(10), "the delivery's span", || async {
        collector
            .spans()
            .into_iter()
            .find(|s| s.attr("taskgate.webhook.message_id") == message_id.as_str())
    })
    .await;
    assert_eq!(span.name, "POST");
    assert_eq!(span.kind, 3, "CLIENT");
    assert_eq!(span.attr("http.response.status_code"), 200);
    assert_eq!(span.attr("server.address"), "127.0.0.1");
    assert_eq!(
        parent,
        format!("00-{}-{}-01", span.trace_id, span.span_id),
        "the receiver can join the trace"
    );
    app.stop().await;
}
both!(webhook_attempts_are_traced);
