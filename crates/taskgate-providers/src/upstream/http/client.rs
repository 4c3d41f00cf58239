//! The two clients a provider's requests leave by, and the answer either
//! gives back.
//!
//! A provider's JSON requests (a chat, an embedding, an image: every call's
//! hot path) go through hyper-util's pooled client directly: reqwest, built
//! on that same client, added about 28k instructions a call (8% of a call)
//! of its own, parsing the URL twice more and boxing the request through
//! its layers (bench/RESULTS.md, sixth session). Everything else (multipart
//! uploads, a generic API's cancel requests) and every provider reached
//! through a proxy from the environment goes through reqwest, as before.
//! Both speak HTTP/1.1 over the same TLS: rustls with ring and Mozilla's
//! roots ([`tls_config`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::upstream::redact::{Redactor, Transport};

/// How long connecting (and the TLS handshake) may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an idle connection is kept for the next request.
pub(crate) const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// TCP keep-alive probes on a provider's connections (reqwest's defaults,
/// kept when the JSON requests left it): first after 15 s idle, then every
/// 15 s, three unanswered drop the connection.
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;
/// Data unacknowledged this long drops the connection (Linux).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// hyper-util's pooled HTTP/1.1 client, over TLS or not.
pub(crate) type JsonClient =
    hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The TLS both clients use: TLS 1.2 and 1.3 by rustls (the process's
/// default crypto provider, else ring), Mozilla's roots and `extra_roots`,
/// HTTP/1.1 by ALPN.
pub fn tls_config(
    extra_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<rustls::ClientConfig, String> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for root in extra_roots {
        roots
            .add(root.clone())
            .map_err(|e| format!("a trusted root cannot be used: {e}"))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The JSON requests' client of one provider.
pub(crate) fn json_client(mut tls: rustls::ClientConfig) -> JsonClient {
    // The connector offers HTTP/1.1 by ALPN itself, and refuses a config
    // that already does.
    tls.alpn_protocols.clear();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_keepalive(Some(KEEPALIVE));
    http.set_keepalive_interval(Some(KEEPALIVE));
    http.set_keepalive_retries(Some(KEEPALIVE_RETRIES));
    http.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(https)
}

/// Whether requests to `base_url` may leave by the JSON client: not when
/// `proxies` (the environment's `HTTPS_PROXY`, `NO_PROXY` and the rest,
/// read as reqwest reads them) would send them through a proxy, which only
/// reqwest speaks.
pub(crate) fn direct(
    base_url: &str,
    proxies: &hyper_util::client::proxy::matcher::Matcher,
) -> bool {
    base_url
        .parse::<hyper::Uri>()
        .is_ok_and(|uri| proxies.intercept(&uri).is_none())
}

/// A provider's answer, from either client: its status and headers, and
/// its body read chunk by chunk.
pub(crate) enum Answer {
    Json(hyper::Response<Incoming>),
    Reqwest(reqwest::Response),
}

impl Answer {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Json(r) => r.status(),
            Self::Reqwest(r) => r.status(),
        }
    }

    pub fn headers(&self) -> &HeaderMap {
        match self {
            Self::Json(r) => r.headers(),
            Self::Reqwest(r) => r.headers(),
        }
    }

    /// The body's next piece; `None` at its end. A failure is redacted.
    pub async fn chunk(&mut self, redactor: &Redactor) -> Option<Result<Bytes, Transport>> {
        match self {
            Self::Json(r) => loop {
                match r.body_mut().frame().await? {
                    Ok(frame) => {
                        if let Ok(data) = frame.into_data() {
                            return Some(Ok(data));
                        }
                    }
                    Err(e) => return Some(Err(redactor.broken_answer(&e))),
                }
            },
            Self::Reqwest(r) => r
                .chunk()
                .await
                .map_err(|e| redactor.transport(&e))
                .transpose(),
        }
    }
}

#[cfg(test)]
mod tests {
    use hyper_util::client::proxy::matcher::Matcher;

    use super::*;

    #[test]
    fn a_provider_behind_a_proxy_is_left_to_reqwest() {
        let proxied = Matcher::builder()
            .https("http://proxy.internal:3128")
            .no("localhost, .corp.example")
            .build();
        assert!(!direct("https://api.openai.com/v1", &proxied));
        assert!(direct("https://llm.corp.example/v1", &proxied));
        assert!(
            direct("http://localhost:8000/v1", &proxied),
            "no HTTP proxy set"
        );
        let everything = Matcher::builder().all("http://proxy.internal:3128").build();
        assert!(!direct("http://127.0.0.1:8000/v1", &everything));
        assert!(direct(
            "http://127.0.0.1:8000/v1",
            &Matcher::builder().build()
        ));
    }
}
