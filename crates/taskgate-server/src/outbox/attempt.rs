//! One attempt: the message posted, signed, to its destination, and what
//! came of it. Redirects are not followed; the client connects only to
//! public addresses (unless `webhooks.allow_private_networks`), judged on
//! the address it actually connects to.
//!
//! The request goes by hyper-util's pooled HTTP/1.1 client directly, over
//! the providers' TLS (rustls, Mozilla's roots): reqwest, on that same
//! client, added about 28k instructions a request of its own (its URL
//! parsed again, its layers; `bench/RESULTS.md`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue, LOCATION, RETRY_AFTER, USER_AGENT};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use taskgate_core::trace::{SpanKind, Tracer};
use taskgate_core::{Clock, DeliveryAttempt, Timestamp, WebhookSecret, webhook};
use taskgate_providers::upstream::fetch::{FetchPolicy, permitted_addrs, url_refusal};

use crate::config::WebhooksConfig;

const AGENT: &str = concat!("Taskgate-Webhooks/", env!("CARGO_PKG_VERSION"));

/// How long a connection to a receiver is kept idle for its next delivery.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

type Http = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector<Dns>>, Full<Bytes>>;

/// The start of a receiver's answer kept in the log.
const EXCERPT_BYTES: usize = 1_024;

pub struct Client {
    http: Http,
    timeout: Duration,
    /// Whether only public addresses are reached.
    guarded: bool,
    /// Each attempt's span, when traces are exported.
    tracer: Option<Tracer>,
}

impl Client {
    pub fn new(config: &WebhooksConfig, tracer: Option<Tracer>) -> Result<Self, String> {
        let timeout = Duration::from_millis(config.timeout_ms);
        let guarded = !config.allow_private_networks;
        let mut http = HttpConnector::new_with_resolver(Dns {
            guard: guarded.then(|| Arc::new(FetchPolicy::default())),
        });
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout));
        let mut tls = taskgate_providers::upstream::tls_config(&[])
            .map_err(|e| format!("cannot build the webhook client: {e}"))?;
        // The connector offers HTTP/1.1 by ALPN itself.
        tls.alpn_protocols.clear();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        // No proxy (a receiver is reached directly, so the address guard
        // judges it), no redirect followed (hyper follows none), nothing
        // retried but a request a kept connection closed on before it was
        // sent: the outbox's own schedule retries a delivery.
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(https);
        Ok(Self {
            http,
            timeout,
            guarded,
            tracer,
        })
    }

    /// Posts `body` to `url` as message `message_id`, signed by `secrets`.
    /// Traced, the attempt is a span of its own (a CLIENT span starting a
    /// trace) and the request carries its `traceparent`.
    pub async fn send(
        &self,
        url: &str,
        message_id: &str,
        secrets: &[&WebhookSecret],
        body: &str,
        clock: &Clock,
    ) -> Sent {
        let Some(tracer) = &self.tracer else {
            return self.post(url, message_id, secrets, body, clock, None).await;
        };
        let mut span = tracer.root("POST", SpanKind::Client, None);
        span.set("http.request.method", "POST");
        if let Ok(parsed) = url::Url::parse(url) {
            if let Some(host) = parsed.host_str() {
                span.set("server.address", host);
            }
            // Without its query, which may hold the receiver's token.
            span.set_with("url.full", || {
                format!(
                    "{}://{}{}",
                    parsed.scheme(),
                    parsed.host_str().unwrap_or_default(),
                    parsed.path()
                )
            });
        }
        span.set_with("taskgate.webhook.message_id", || message_id);
        let traceparent = span.context().traceparent();
        let sent = self
            .post(url, message_id, secrets, body, clock, Some(traceparent))
            .await;
        if let Some(status) = sent.status {
            span.set("http.response.status_code", status);
        }
        if !sent.ok {
            let kind = sent
                .status
                .map_or_else(|| "no_answer".to_owned(), |s| s.to_string());
            span.set("error.type", kind);
            span.fail(sent.error.clone().unwrap_or_default());
        }
        span.end();
        sent
    }

    async fn post(
        &self,
        url: &str,
        message_id: &str,
        secrets: &[&WebhookSecret],
        body: &str,
        clock: &Clock,
        traceparent: Option<String>,
    ) -> Sent {
        let started = Instant::now();
        let Ok(parsed) = url::Url::parse(url) else {
            return Sent::failed("the URL is not valid", started);
        };
        if !matches!(parsed.scheme(), "http" | "https") {
            return Sent::failed("only http and https URLs are sent to", started);
        }
        if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = parsed.host()
            && self.refuses(&parsed)
        {
            return Sent::failed("the URL is not a public address", started);
        }
        let timestamp = clock.now().unix_ms() / 1000;
        let signature = webhook::signature_header(secrets, message_id, timestamp, body.as_bytes());
        // The receiver's URL is its owner's own; no credential of Taskgate's
        // rides on the request but the signature.
        let mut request = hyper::Request::post(parsed.as_str())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("*/*"))
            .header(USER_AGENT, HeaderValue::from_static(AGENT))
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp)
            .header("webhook-signature", signature);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let Ok(request) = request.body(Full::new(Bytes::copy_from_slice(body.as_bytes()))) else {
            return Sent::failed("the URL is not valid", started);
        };
        // The whole exchange within the timeout: connecting, sending, and
        // the answer's start as far as it is kept.
        let exchange = async {
            let response = self.http.request(request).await?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after(v, clock.now()));
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(|l| l.chars().take(200).collect::<String>());
            let excerpt = excerpt(response.into_body()).await;
            Ok::<_, hyper_util::client::legacy::Error>((status, retry_after, location, excerpt))
        };
        let (status, retry_after, location, excerpt) =
            match tokio::time::timeout(self.timeout, exchange).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => {
                    let why = if e.is_connect() {
                        "the connection failed (refused, unreachable, or not a public address)"
                    } else {
                        "the request failed before an answer"
                    };
                    return Sent::failed(why, started);
                }
                Err(_) => {
                    let why = format!("no answer within {} ms", self.timeout.as_millis());
                    return Sent::failed(&why, started);
                }
            };
        let mut sent = Sent {
            status: Some(status.as_u16()),
            ok: status.is_success(),
            gone: status == hyper::StatusCode::GONE,
            error: None,
            excerpt,
            retry_after,
            elapsed: started.elapsed(),
            sent: true,
        };
        if status.is_redirection() {
            sent.error = Some(match location {
                Some(to) => format!("redirects are not followed (to {to})"),
                None => "redirects are not followed".to_owned(),
            });
        } else if sent.gone {
            sent.error =
                Some("the receiver answered 410 Gone: no more events are sent to it".to_owned());
        }
        sent
    }

    /// Whether a URL whose host is an address literal may not be sent to
    /// (names are judged by the resolver, as the client connects).
    fn refuses(&self, url: &url::Url) -> bool {
        self.guarded && url_refusal(url, &FetchPolicy::default()).is_some()
    }
}

/// What an attempt did.
pub struct Sent {
    pub status: Option<u16>,
    pub ok: bool,
    pub gone: bool,
    pub error: Option<String>,
    pub excerpt: Option<String>,
    /// How long the receiver asked to wait before the next attempt.
    pub retry_after: Option<Duration>,
    pub elapsed: Duration,
    sent: bool,
}

impl Sent {
    fn failed(why: &str, started: Instant) -> Self {
        Sent {
            status: None,
            ok: false,
            gone: false,
            error: Some(why.to_owned()),
            excerpt: None,
            retry_after: None,
            elapsed: started.elapsed(),
            sent: true,
        }
    }

    /// Not attempted at all: why.
    pub fn not_sent(why: &str) -> Self {
        Sent {
            sent: false,
            ..Sent::failed(why, Instant::now())
        }
    }

    /// Whether a request was attempted (else its destination is gone).
    pub fn was_sent(&self) -> bool {
        self.sent
    }

    pub fn outcome_label(&self) -> &'static str {
        match (self.ok, self.gone, self.sent) {
            (true, _, _) => "succeeded",
            (_, true, _) => "gone",
            (_, _, false) => "stopped",
            _ => "failed",
        }
    }

    pub fn attempt(&self, at: Timestamp) -> DeliveryAttempt {
        DeliveryAttempt {
            at,
            http_status: self.status,
            duration_ms: self.elapsed.as_millis() as u64,
            error: self.error.clone(),
            response_excerpt: self.excerpt.clone(),
        }
    }
}

/// The start of the answer's body, at most [`EXCERPT_BYTES`] (read no
/// further), as text.
async fn excerpt(mut body: Incoming) -> Option<String> {
    let mut kept = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let room = EXCERPT_BYTES - kept.len();
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if kept.len() >= EXCERPT_BYTES {
            break;
        }
    }
    if kept.is_empty() {
        return None;
    }
    // Cut at a character boundary.
    let text = match std::str::from_utf8(&kept) {
        Ok(s) => s.to_owned(),
        Err(e) => String::from_utf8_lossy(&kept[..e.valid_up_to()]).into_owned(),
    };
    Some(text)
}

/// Names resolved by the system; guarded, only the addresses the policy
/// permits kept (the client connects to no other). An address literal is
/// not resolved: [`Client::refuses`] judges it before the request.
#[derive(Clone)]
struct Dns {
    guard: Option<Arc<FetchPolicy>>,
}

impl tower::Service<Name> for Dns {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = self.guard.clone();
        Box::pin(async move {
            let addrs = permitted_addrs(name.as_str(), guard.as_deref()).await?;
            Ok(addrs.into_iter())
        })
    }
}

/// `Retry-After` as seconds or an HTTP date, from `now`.
fn retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    if let Ok(secs) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    let at = Timestamp::from_system_time(at);
    Some(Duration::from_millis(
        (at.unix_ms() - now.unix_ms()).max(0) as u64
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A receiver on loopback answering `200 thanks` to each request; how
    /// many connections it took.
    async fn receiver() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let taken = Arc::new(AtomicUsize::new(0));
        let counted = taken.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0; 16 * 1024];
                    let mut got = Vec::new();
                    while !got.windows(2).any(|w| w == b"}}") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer =
                        b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nthanks";
                    let _ = conn.write_all(answer).await;
                });
            }
        });
        (port, taken)
    }

    fn client(allow_private_networks: bool) -> Client {
        let config = WebhooksConfig {
            allow_private_networks,
            timeout_ms: 5_000,
            ..WebhooksConfig::default()
        };
        Client::new(&config, None).unwrap()
    }

    /// The guard judges the address a name resolves to, as the client
    /// connects: `localhost` is refused unless private networks are allowed,
    /// and nothing reaches the receiver.
    #[tokio::test]
    async fn a_name_resolving_to_a_private_address_is_not_connected_to() {
        let (port, taken) = receiver().await;
        let url = format!("http://localhost:{port}/hook");
        let secret = WebhookSecret::generate();
        let body = r#"{"type":"webhook.test","data":{}}"#;
        let clock = Clock::system();
        let refused = client(false)
            .send(&url, "msg_1", &[&secret], body, &clock)
            .await;
        assert_eq!(refused.status, None);
        assert!(!refused.ok);
        assert_eq!(
            refused.error.as_deref(),
            Some("the connection failed (refused, unreachable, or not a public address)")
        );
        assert_eq!(taken.load(Ordering::SeqCst), 0, "nothing connected");

        let sent = client(true)
            .send(&url, "msg_1", &[&secret], body, &clock)
            .await;
        assert_eq!((sent.status, sent.ok), (Some(200), true));
        assert_eq!(sent.excerpt.as_deref(), Some("thanks"));
        assert_eq!(taken.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let now = Timestamp::from_unix_ms(1_445_412_480_000); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(retry_after("soon", now), None);
    }
}
