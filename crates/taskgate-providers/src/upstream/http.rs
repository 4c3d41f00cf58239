//! What every adapter shares: the connection to one provider and sending a
//! request (here); the two clients a request leaves by (`client`);
//! classifying a failure and reading `Retry-After` (`error`); reading and
//! building bodies (`body`); decoding SSE (`sse`).

mod body;
mod client;
mod error;
mod sse;

pub use client::tls_config;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use parking_lot::Mutex;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use reqwest::{Method, RequestBuilder, Url};
use serde_json::Value;

use super::config::{Protocol, ProviderConfig, Secret};
use super::redact::Redactor;
use body::read_limited;
pub(crate) use body::{is_json, merge_options};
pub(crate) use client::{
    Answer, CONNECT_TIMEOUT, JsonClient, POOL_IDLE_TIMEOUT, direct, json_client,
};
pub(crate) use error::{Class, UpstreamError, error_message};
pub(crate) use sse::read_sse;

/// The `User-Agent` of every request to a provider.
pub(crate) const AGENT: &str = concat!("taskgate/", env!("CARGO_PKG_VERSION"));

/// A request an adapter makes of its provider's API: JSON in (or nothing),
/// an answer out. Sent by the JSON client when the provider allows it.
pub(crate) struct ApiRequest {
    method: Method,
    /// Under the base URL, with any query of its own.
    path: String,
    /// Added to the provider's own headers.
    headers: Vec<(&'static str, &'static str)>,
    body: Option<Value>,
}

impl ApiRequest {
    pub fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// What [`Conn::send`] sends: a request of the API, or one built on
/// reqwest's builder (a multipart upload, a generic API's own).
pub(crate) enum Outgoing {
    Api(ApiRequest),
    Built(RequestBuilder),
}

impl From<ApiRequest> for Outgoing {
    fn from(r: ApiRequest) -> Self {
        Self::Api(r)
    }
}

impl From<RequestBuilder> for Outgoing {
    fn from(rb: RequestBuilder) -> Self {
        Self::Built(rb)
    }
}

/// A path's URL as the provider's requests use it: under the base URL,
/// with the configured query; and the same as hyper's `Uri`, when it is one.
struct Located {
    url: Url,
    uri: Option<hyper::Uri>,
}

/// One provider as configured: where it is and how to sign requests.
pub(crate) struct Conn {
    pub name: String,
    pub protocol: Protocol,
    pub base_url: String,
    pub client: reqwest::Client,
    /// The client of [`ApiRequest`]s; `None` when the environment's proxy
    /// settings send this provider's requests through a proxy.
    pub json_client: Option<JsonClient>,
    pub headers: HeaderMap,
    pub query: Vec<(String, String)>,
    /// Fields added to every request body (JSON or multipart).
    pub body: Vec<(String, String)>,
    /// The credential and the values of the configured headers, query
    /// parameters and body fields, kept out of any message and log line.
    pub redactor: Redactor,
    pub attempt_timeout: Duration,
    pub max_retries: u32,
    pub stream: bool,
    /// The last path asked for and its URL, parsed: a provider's calls
    /// mostly go to one path, and parsing the URL again took 6.2k
    /// instructions of every call (bench/RESULTS.md, fourth session).
    last_url: Mutex<Option<(String, Located)>>,
}

impl Conn {
    /// Builds the connection. `api_key` was resolved from the file or the
    /// environment by the caller; `default_base` is the provider's own address.
    pub fn new(
        name: &str,
        cfg: &ProviderConfig,
        api_key: Option<String>,
        default_base: Option<&str>,
        client: reqwest::Client,
    ) -> Result<Self, String> {
        let base_url = cfg
            .base_url
            .as_deref()
            .or(default_base)
            .ok_or_else(|| format!("providers.{name}: base_url is required"))?
            .trim_end_matches('/')
            .to_owned();
        let parsed = reqwest::Url::parse(&base_url)
            .map_err(|e| format!("providers.{name}.base_url: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("providers.{name}.base_url: must be http or https"));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let key = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("providers.{name}.headers: bad header name {k:?}"))?;
            let mut value = HeaderValue::from_str(v.expose())
                .map_err(|_| format!("providers.{name}.headers.{k}: bad header value"))?;
            value.set_sensitive(true);
            headers.insert(key, value);
        }
        if let Some(key) = &api_key {
            let default_header = match cfg.protocol {
                Protocol::Openai | Protocol::Http => "authorization",
                Protocol::Anthropic => "x-api-key",
                Protocol::Gemini => "x-goog-api-key",
            };
            let header = cfg
                .auth_header
                .as_deref()
                .unwrap_or(default_header)
                .to_ascii_lowercase();
            let value = if header == "authorization" {
                format!("Bearer {key}")
            } else {
                key.clone()
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!("providers.{name}: the API key has characters a header cannot carry")
            })?;
            value.set_sensitive(true);
            let header = HeaderName::from_bytes(header.as_bytes())
                .map_err(|_| format!("providers.{name}.auth_header: bad header name"))?;
            headers.insert(header, value);
        }
        Ok(Self {
            name: name.to_owned(),
            protocol: cfg.protocol,
            base_url,
            client,
            json_client: None,
            headers,
            query: cfg
                .query
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
            body: cfg
                .body
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
            redactor: Redactor::new(
                api_key
                    .iter()
                    .map(String::as_str)
                    .chain(cfg.headers.values().map(Secret::expose))
                    .chain(cfg.query.values().map(Secret::expose))
                    .chain(cfg.body.values().map(Secret::expose))
                    .chain(parsed.password())
                    .chain(Some(parsed.username()).filter(|u| !u.is_empty())),
            ),
            attempt_timeout: Duration::from_millis(cfg.timeout_ms.unwrap_or(60_000).max(1)),
            max_retries: cfg.max_retries.unwrap_or(2),
            stream: cfg.stream.unwrap_or(true),
            last_url: Mutex::new(None),
        })
    }

    /// A request to `path` under the base URL, signed, with the extra
    /// query, on reqwest's builder.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let rb = match self.locate(path, |at| at.url.clone()) {
            Some(url) => self.client.request(method, url),
            // Not a URL: the client says why when the request is sent.
            None => self
                .client
                .request(method, format!("{}{}", self.base_url, path))
                .query(&self.query),
        };
        rb.headers(self.headers.clone())
    }

    /// `take` of the base URL and `path` joined with the configured query
    /// added, parsed as reqwest would parse the text; `None` if it is not
    /// a URL.
    fn locate<T>(&self, path: &str, take: impl FnOnce(&Located) -> T) -> Option<T> {
        let mut last = self.last_url.lock();
        if let Some((p, at)) = &*last
            && p == path
        {
            return Some(take(at));
        }
        let mut url = Url::parse(&format!("{}{}", self.base_url, path)).ok()?;
        if !self.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&self.query);
        }
        let uri = url.as_str().parse::<hyper::Uri>().ok();
        let at = Located { url, uri };
        let taken = take(&at);
        *last = Some((path.to_owned(), at));
        Some(taken)
    }

    /// A request with a JSON body: `body` and the configured body fields,
    /// which replace any field of the same name.
    pub fn json(&self, method: Method, path: &str, mut body: Value) -> ApiRequest {
        if let Value::Object(fields) = &mut body {
            for (k, v) in &self.body {
                fields.insert(k.clone(), Value::String(v.clone()));
            }
        }
        ApiRequest {
            body: Some(body),
            ..self.api(method, path)
        }
    }

    /// A request without a body.
    pub fn api(&self, method: Method, path: &str) -> ApiRequest {
        ApiRequest {
            method,
            path: path.to_owned(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// `r` on reqwest's builder.
    pub fn built(&self, r: ApiRequest) -> RequestBuilder {
        let mut rb = self.request(r.method, &r.path);
        for (k, v) in r.headers {
            rb = rb.header(k, v);
        }
        match &r.body {
            Some(body) => rb.json(body),
            None => rb,
        }
    }

    /// A multipart form with the configured body fields added.
    pub fn form(&self, mut form: reqwest::multipart::Form) -> reqwest::multipart::Form {
        for (k, v) in &self.body {
            form = form.text(k.clone(), v.clone());
        }
        form
    }

    /// Sends a request and returns the answer if its status is a success;
    /// any failure is classified for the retry loop.
    pub async fn send(&self, request: impl Into<Outgoing>) -> Result<Answer, UpstreamError> {
        let answer = match request.into() {
            Outgoing::Api(r) => {
                // The JSON client, when the provider allows it and the URL
                // is one hyper takes; else reqwest, which says why not.
                let direct = self.json_client.as_ref().and_then(|client| {
                    let uri = self.locate(&r.path, |at| at.uri.clone())??;
                    Some((client, uri))
                });
                match direct {
                    Some((client, uri)) => {
                        let request = self.hyper_request(r, uri)?;
                        self.redactor
                            .send_json(client, request)
                            .await
                            .map(Answer::Json)
                    }
                    None => self.redactor.send(self.built(r)).await.map(Answer::Reqwest),
                }
            }
            Outgoing::Built(rb) => self.redactor.send(rb).await.map(Answer::Reqwest),
        }
        .map_err(|e| self.transport_error(e))?;
        if answer.status().is_success() {
            return Ok(answer);
        }
        Err(self.status_error(answer).await)
    }

    /// `r` as the JSON client sends it: the headers reqwest would send (its
    /// `Accept` and `User-Agent`, unless the provider's own replace them),
    /// and the JSON body with its type.
    fn hyper_request(
        &self,
        r: ApiRequest,
        uri: hyper::Uri,
    ) -> Result<hyper::Request<Full<Bytes>>, UpstreamError> {
        let body = match &r.body {
            Some(v) => serde_json::to_vec(v).map_err(|_| {
                UpstreamError::invalid("The request's body could not be written as JSON.")
            })?,
            None => Vec::new(),
        };
        let mut request = hyper::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = r.method;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        for (k, v) in &self.headers {
            headers.insert(k.clone(), v.clone());
        }
        if r.body.is_some() && !headers.contains_key(CONTENT_TYPE) {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        for (k, v) in r.headers {
            headers.append(k, HeaderValue::from_static(v));
        }
        Ok(request)
    }

    /// Sends a request and reads its JSON body.
    pub async fn send_json(&self, request: impl Into<Outgoing>) -> Result<Value, UpstreamError> {
        let answer = self.send(request).await?;
        self.read_json(answer).await
    }

    /// Reads a successful answer's JSON body.
    pub async fn read_json(&self, answer: Answer) -> Result<Value, UpstreamError> {
        let status = answer.status().as_u16();
        let body = read_limited(answer, &self.redactor)
            .await
            .map_err(|e| self.transport_error(e))?;
        serde_json::from_slice(&body).map_err(|_| {
            UpstreamError::invalid(format!(
                "{} answered with a body that is not JSON",
                self.name
            ))
            .status(status)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configured_header_and_query_values_are_credentials() {
        let mut cfg = crate::upstream::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        cfg.api_key = Some(crate::upstream::Secret::new("sk-KEYSECRET-1"));
        cfg.headers.insert(
            "x-extra-key".to_owned(),
            crate::upstream::Secret::new("HEADERSECRET-2"),
        );
        cfg.query.insert(
            "key".to_owned(),
            crate::upstream::Secret::new("QUERYSECRET-3"),
        );
        let shown = format!("{cfg:?} {}", serde_json::to_string(&cfg).unwrap());
        let conn = Conn::new(
            "p",
            &cfg,
            Some("sk-KEYSECRET-1".to_owned()),
            None,
            reqwest::Client::new(),
        )
        .unwrap();
        let scrubbed = conn
            .scrub("bad key sk-KEYSECRET-1 for https://h/v1?key=QUERYSECRET-3 with HEADERSECRET-2");
        for secret in ["KEYSECRET", "HEADERSECRET", "QUERYSECRET"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
        assert!(conn.headers["x-extra-key"].is_sensitive());
    }

    #[test]
    fn a_requests_url_is_the_base_and_path_parsed_whether_or_not_it_was_the_last() {
        let mut cfg =
            crate::upstream::testutil::provider(Protocol::Openai, "http://127.0.0.1:9/v1/");
        cfg.query
            .insert("key".to_owned(), crate::upstream::Secret::new("q"));
        let conn = Conn::new("p", &cfg, None, None, reqwest::Client::new()).unwrap();
        let paths = [
            "/chat/completions",
            "/chat/completions",
            "/models/gemini-2.0:generateContent",
            "/jobs?x=1&y=%20",
            "/chat/completions",
            "/caf\u{e9} s",
        ];
        for path in paths {
            let request = conn.request(Method::POST, path).build().unwrap();
            let mut expected = Url::parse(&format!("http://127.0.0.1:9/v1{path}")).unwrap();
            expected.query_pairs_mut().append_pair("key", "q");
            assert_eq!(request.url(), &expected, "{path}");
        }
        // Not a URL: the error is the client's, as before.
        let cfg = crate::upstream::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        let bad = Conn::new("p", &cfg, None, None, reqwest::Client::new()).unwrap();
        assert!(bad.request(Method::GET, ":99999999/x").build().is_err());
    }

    #[tokio::test]
    async fn either_client_sends_the_same_request_over_tls() {
        use crate::upstream::testutil::{Fake, Reply, test_ca};
        let (fake, base) = Fake::serve_tls(Vec::new()).await;
        fake.always(Reply::Json(200, json!({"ok": true})));
        let mut cfg = crate::upstream::testutil::provider(Protocol::Anthropic, &base);
        cfg.query.insert("key".to_owned(), Secret::new("q v&1"));
        cfg.headers.insert("x-extra".to_owned(), Secret::new("h1"));
        let tls = tls_config(&[test_ca()]).unwrap();
        let reqwest = reqwest::Client::builder()
            .use_preconfigured_tls(tls.clone())
            .user_agent(AGENT)
            .http1_only()
            .build()
            .unwrap();
        let mut conn = Conn::new("p", &cfg, Some("sk-1234".to_owned()), None, reqwest).unwrap();
        let request = |conn: &Conn| {
            conn.json(
                Method::POST,
                "/v1/messages?beta=true",
                json!({"model": "m"}),
            )
            .header("anthropic-version", "2023-06-01")
        };
        let answer = conn.send(request(&conn)).await.unwrap();
        assert!(matches!(answer, Answer::Reqwest(_)));
        assert_eq!(conn.read_json(answer).await.unwrap(), json!({"ok": true}));
        conn.json_client = Some(json_client(tls));
        for _ in 0..2 {
            let answer = conn.send(request(&conn)).await.unwrap();
            assert!(matches!(answer, Answer::Json(_)));
            assert_eq!(conn.read_json(answer).await.unwrap(), json!({"ok": true}));
        }
        let (by_reqwest, by_hyper) = (fake.raw(0), fake.raw(1));
        assert_eq!(by_reqwest.0, "/v1/messages?beta=true&key=q+v%261");
        assert_eq!(by_hyper.0, by_reqwest.0);
        assert_eq!(by_hyper.1, by_reqwest.1);
        assert_eq!(by_hyper.2, by_reqwest.2);
        assert_eq!(by_hyper.1["x-api-key"], "sk-1234");
        assert_eq!(by_hyper.1["x-extra"], "h1");
        assert_eq!(by_hyper.1["anthropic-version"], "2023-06-01");
        assert_eq!(by_hyper.1["user-agent"], AGENT);
        assert_eq!(by_hyper.1["content-type"], "application/json");
        assert_eq!(
            fake.raw(2).1,
            by_hyper.1,
            "the second on its kept connection"
        );
    }

    #[test]
    fn the_providers_body_fields_are_in_every_body_and_win() {
        let mut cfg = super::super::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        cfg.body = [("account_token".to_owned(), Secret::new("tok-1234"))].into();
        let conn = Conn::new("p", &cfg, None, None, reqwest::Client::new()).unwrap();
        let request = conn.json(
            Method::POST,
            "/x",
            json!({"account_token": "the client's", "model": "m"}),
        );
        let body = request.body.clone().unwrap();
        assert_eq!(body, json!({"account_token": "tok-1234", "model": "m"}));
        assert_eq!(conn.scrub("echo: tok-1234"), "echo: ***");
    }
}
