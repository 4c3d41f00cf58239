//! One attempt: the message posted, signed, to its destination, and what
//! came of it. Redirects are not followed; the client connects only to
//! public addresses (unless `webhooks.allow_private_networks`), judged on
//! the address it actually connects to.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use taskgate_core::trace::{SpanKind, Tracer};
use taskgate_core::{Clock, DeliveryAttempt, Timestamp, WebhookSecret, webhook};
use taskgate_providers::upstream::fetch::{FetchPolicy, guarded_resolver, url_refusal};

use crate::config::WebhooksConfig;

/// The start of a receiver's answer kept in the log.
const EXCERPT_BYTES: usize = 1_024;

pub struct Client {
    http: reqwest::Client,
    timeout: Duration,
    /// Whether only public addresses are reached.
    guarded: bool,
    /// Each attempt's span, when traces are exported.
    tracer: Option<Tracer>,
}

impl Client {
    pub fn new(config: &WebhooksConfig, tracer: Option<Tracer>) -> Result<Self, String> {
        let timeout = Duration::from_millis(config.timeout_ms);
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("Taskgate-Webhooks/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .http1_only()
            // Nothing to retry on HTTP/1.1 (reqwest's default retries HTTP/2
            // refusals), and no copy of each delivery kept in case: the
            // outbox's own schedule retries a delivery.
            .retry(reqwest::retry::never().max_retries_per_request(0));
        if !config.allow_private_networks {
            builder = builder.dns_resolver(guarded_resolver(FetchPolicy::default()));
        }
        let http = builder
            .build()
            .map_err(|e| format!("cannot build the webhook client: {e}"))?;
        Ok(Self {
            http,
            timeout,
            guarded: !config.allow_private_networks,
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
        if let Ok(parsed) = reqwest::Url::parse(url) {
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
        let Ok(parsed) = reqwest::Url::parse(url) else {
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
        let mut request = self
            .http
            .post(parsed)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_owned());
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        #[allow(clippy::disallowed_methods)]
        let request = request.send();
        let response = match request.await {
            Ok(r) => r,
            Err(e) => {
                let why = if e.is_timeout() {
                    format!("no answer within {} ms", self.timeout.as_millis())
                } else if e.is_connect() {
                    "the connection failed (refused, unreachable, or not a public address)"
                        .to_owned()
                } else {
                    "the request failed before an answer".to_owned()
                };
                return Sent::failed(&why, started);
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, clock.now()));
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(|l| l.chars().take(200).collect::<String>());
        let excerpt = excerpt(response).await;
        let mut sent = Sent {
            status: Some(status.as_u16()),
            ok: status.is_success(),
            gone: status == reqwest::StatusCode::GONE,
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
    fn refuses(&self, url: &reqwest::Url) -> bool {
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
async fn excerpt(response: reqwest::Response) -> Option<String> {
    let mut kept = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
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
    use super::*;

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
