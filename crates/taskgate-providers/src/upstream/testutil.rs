//! Helpers for tests against local fake upstreams (never beyond loopback).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use serde_json::Value;

use super::config::{HttpApiConfig, Protocol, ProviderConfig};
use super::{FetchPolicy, Route, Target, Upstream};
use crate::kinds::Kind;
use crate::{ApiSpec, ExecContext, ExecError, Execution, Piece, Pricing, Provider};

/// Serves `router` on 127.0.0.1 at a free port; returns `http://127.0.0.1:PORT`.
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://{addr}")
}

/// A provider of `protocol` at `base_url` with the key `test-key`, quick
/// retries and breaker settings a test can reach.
pub(crate) fn provider(protocol: Protocol, base_url: &str) -> ProviderConfig {
    ProviderConfig {
        protocol,
        base_url: Some(base_url.to_owned()),
        api_key: Some(super::Secret::new("test-key")),
        api_key_env: None,
        auth_header: None,
        headers: Default::default(),
        query: Default::default(),
        body: Default::default(),
        timeout_ms: Some(2_000),
        max_retries: Some(2),
        stream: None,
        breaker_failures: None,
        breaker_cooldown_ms: None,
    }
}

/// An API of `kind` whose groups are `[[(provider, model)]]`: the first
/// group the weighted deployments, the others fallbacks.
pub(crate) fn route(slug: &str, kind: Kind, groups: &[&[(&str, &str)]]) -> Route {
    Route {
        spec: ApiSpec {
            slug: slug.to_owned(),
            name: slug.to_owned(),
            description: String::new(),
            kind: kind.as_str().to_owned(),
            provider: groups[0][0].0.to_owned(),
            pricing: Pricing::PerCall { price_nanos: 0 },
            input_schema: kind.input_schema(),
            output_schema: kind.output_schema(),
            examples: Vec::new(),
            timeout_ms: 30_000,
            max_input_bytes: kind.max_input_bytes(),
        },
        kind,
        groups: groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|(p, m)| Target {
                        provider: (*p).to_owned(),
                        model: (*m).to_owned(),
                        weight: 1,
                    })
                    .collect()
            })
            .collect(),
        http: None,
    }
}

/// Same, for a generic `http` provider with its templates.
pub(crate) fn http_route(slug: &str, kind: Kind, provider: &str, http: HttpApiConfig) -> Route {
    let mut r = route(slug, kind, &[&[(provider, "m")]]);
    r.http = Some(http);
    r
}

/// An [`Upstream`] with `providers` (with their keys) and `routes`. Fetches
/// may reach loopback (`127.0.0.0/8`), where test fakes live.
pub(crate) fn upstream(providers: &[(&str, ProviderConfig)], routes: Vec<Route>) -> Upstream {
    upstream_with(providers, routes, None)
}

/// Same, trusting the test authority ([`test_ca`]) over TLS.
pub(crate) fn upstream_trusting(
    providers: &[(&str, ProviderConfig)],
    routes: Vec<Route>,
) -> Upstream {
    upstream_with(providers, routes, Some(test_ca()))
}

fn upstream_with(
    providers: &[(&str, ProviderConfig)],
    routes: Vec<Route>,
    root: Option<CertificateDer<'static>>,
) -> Upstream {
    let policy = FetchPolicy {
        allow: vec![super::fetch::Cidr::parse("127.0.0.0/8").unwrap()],
        ..FetchPolicy::default()
    };
    let mut u = Upstream::new(policy).unwrap();
    if let Some(root) = root {
        u.trust(root);
    }
    for (name, cfg) in providers {
        let key = cfg.api_key.as_ref().map(|k| k.expose().to_owned());
        u.add_provider(name, cfg, key).unwrap();
    }
    for r in routes {
        u.add_route(r).unwrap();
    }
    u
}

/// Runs `api` with `input` under a 10 s deadline; returns the result and
/// the attempts made.
pub(crate) async fn run(
    u: &Upstream,
    api: &str,
    input: Value,
) -> (Result<Execution, ExecError>, ExecContext) {
    let mut ctx = ExecContext::with_timeout(Duration::from_secs(10));
    let r = u.execute(api, &input, &mut ctx).await;
    (r, ctx)
}

/// A scripted fake upstream: answers requests in order from its script
/// (then with its `always` answer) and remembers what it received.
#[derive(Clone)]
pub(crate) enum Reply {
    Json(u16, Value),
    /// JSON with extra headers (`retry-after`, say).
    JsonWith(u16, Value, Vec<(&'static str, &'static str)>),
    /// SSE chunks, a few milliseconds apart.
    Sse(Vec<String>),
    /// SSE chunks, then the stream stays open for ever.
    SseThenHang(Vec<String>),
    /// SSE chunks `gap` apart.
    Paced(Vec<String>, Duration),
    /// Never answers.
    Hang,
}

/// A request the fake received: URI, headers, body, arrival.
pub(crate) type Received = (String, HeaderMap, Bytes, Instant);

#[derive(Clone, Default)]
pub(crate) struct Fake {
    script: Arc<Mutex<VecDeque<Reply>>>,
    /// What to answer when the script is empty.
    fallback: Arc<Mutex<Option<Reply>>>,
    log: Arc<Mutex<Vec<Received>>>,
    /// Set when a streamed answer's body is dropped (its connection closed).
    pub closed: Arc<AtomicBool>,
}

/// Sets its flag when the stream it lives in is dropped.
struct CloseFlag(Arc<AtomicBool>);

impl Drop for CloseFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

/// Chunks `gap` apart; with `hang` the stream then stays open. `flag` is
/// dropped with the stream.
fn chunked(chunks: Vec<String>, gap: Duration, hang: bool, flag: CloseFlag) -> Response {
    let stream = futures_util::stream::unfold(
        (chunks.into_iter(), flag),
        move |(mut it, flag)| async move {
            match it.next() {
                Some(c) => {
                    tokio::time::sleep(gap).await;
                    Some((Ok::<_, std::io::Error>(Bytes::from(c)), (it, flag)))
                }
                None if hang => {
                    std::future::pending::<()>().await;
                    None
                }
                None => None,
            }
        },
    );
    event_stream(Body::from_stream(stream))
}

async fn fake_handle(State(f): State<Fake>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    f.log
        .lock()
        .push((uri.to_string(), headers, body, Instant::now()));
    let reply = f
        .script
        .lock()
        .pop_front()
        .or_else(|| f.fallback.lock().clone());
    let flag = CloseFlag(f.closed.clone());
    let quick = Duration::from_millis(5);
    match reply {
        None => (StatusCode::NOT_FOUND, "no script").into_response(),
        Some(Reply::Json(status, body)) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
        }
        Some(Reply::JsonWith(status, body, headers)) => {
            let mut r = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
            for (k, v) in headers {
                r.headers_mut().insert(k, v.parse().unwrap());
            }
            r
        }
        Some(Reply::Sse(chunks)) => chunked(chunks, quick, false, flag),
        Some(Reply::SseThenHang(chunks)) => chunked(chunks, quick, true, flag),
        Some(Reply::Paced(chunks, gap)) => chunked(chunks, gap, false, flag),
        Some(Reply::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
    }
}

impl Fake {
    /// Serves the fake with `replies`; returns it and its base URL.
    pub(crate) async fn serve(replies: Vec<Reply>) -> (Self, String) {
        let (fake, router) = Self::scripted(replies);
        let base = serve(router).await;
        (fake, base)
    }

    /// A fake with `replies`, and the router that answers for it.
    fn scripted(replies: Vec<Reply>) -> (Self, axum::Router) {
        let fake = Fake::default();
        fake.script.lock().extend(replies);
        let router = axum::Router::new()
            .fallback(fake_handle)
            .with_state(fake.clone());
        (fake, router)
    }

    /// Same, over TLS: `https://127.0.0.1:PORT`, with a certificate for
    /// 127.0.0.1 signed by the test authority ([`test_ca`]).
    pub(crate) async fn serve_tls(replies: Vec<Reply>) -> (Self, String) {
        let (fake, router) = Self::scripted(replies);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls_server_config()));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, router) = (acceptor.clone(), router.clone());
                tokio::spawn(async move {
                    // A client that does not trust the certificate leaves
                    // during the handshake.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(
                            hyper_util::rt::TokioIo::new(tls),
                            hyper_util::service::TowerToHyperService::new(router),
                        )
                        .await;
                });
            }
        });
        (fake, format!("https://127.0.0.1:{port}"))
    }

    /// Same, with OpenAI's base URL (`…/v1`).
    pub(crate) async fn start(replies: Vec<Reply>) -> (Self, String) {
        let (fake, base) = Self::serve(replies).await;
        (fake, format!("{base}/v1"))
    }

    /// The answer once the script is used up.
    pub(crate) fn always(&self, reply: Reply) {
        *self.fallback.lock() = Some(reply);
    }

    /// The `i`-th request as it came.
    pub(crate) fn raw(&self, i: usize) -> Received {
        self.log.lock()[i].clone()
    }

    /// The `i`-th request: URI, headers, JSON body (null if not JSON).
    pub(crate) fn seen(&self, i: usize) -> (String, HeaderMap, Value) {
        let (uri, headers, body, _) = self.raw(i);
        (
            uri,
            headers,
            serde_json::from_slice(&body).unwrap_or(Value::Null),
        )
    }

    pub(crate) fn body(&self, i: usize) -> Value {
        self.seen(i).2
    }

    pub(crate) fn requests(&self) -> usize {
        self.log.lock().len()
    }
}

/// The certificate of the test authority that signed the fake's over TLS
/// (`testdata/`; made for these tests alone, valid until 2126).
pub(crate) fn test_ca() -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(include_bytes!("testdata/test-ca.pem")).unwrap()
}

/// The fake's TLS: the certificate for 127.0.0.1 and `localhost`.
fn tls_server_config() -> rustls::ServerConfig {
    let chain =
        vec![CertificateDer::from_pem_slice(include_bytes!("testdata/localhost.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("testdata/localhost.key")).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// An execution context whose streamed text is collected.
pub(crate) fn listening() -> (ExecContext, Arc<Mutex<Vec<String>>>) {
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let ctx =
        ExecContext::with_timeout(Duration::from_secs(10)).stream_to(Arc::new(move |p: Piece| {
            if let Piece::Text(t) = p {
                sink.lock().push(t);
            }
        }));
    (ctx, deltas)
}

/// An execution context whose streamed pieces, all kinds, are collected.
pub(crate) fn listening_all() -> (ExecContext, Arc<Mutex<Vec<Piece>>>) {
    let pieces = Arc::new(Mutex::new(Vec::new()));
    let sink = pieces.clone();
    let ctx = ExecContext::with_timeout(Duration::from_secs(10))
        .stream_to(Arc::new(move |p: Piece| sink.lock().push(p)));
    (ctx, pieces)
}
