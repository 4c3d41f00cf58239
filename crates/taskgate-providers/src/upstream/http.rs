//! What every adapter shares: the connection to one provider and sending a
//! request (here); classifying a failure and reading `Retry-After`
//! (`error`); reading and building bodies (`body`); decoding SSE (`sse`).

mod body;
mod error;
mod sse;

use std::time::Duration;

use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, Url};
use serde_json::Value;

use super::config::{Protocol, ProviderConfig, Secret};
use super::redact::Redactor;
use body::read_limited;
pub(crate) use body::{is_json, merge_options};
pub(crate) use error::{Class, UpstreamError, error_message};
pub(crate) use sse::read_sse;

/// One provider as configured: where it is and how to sign requests.
pub(crate) struct Conn {
    pub name: String,
    pub protocol: Protocol,
    pub base_url: String,
    pub client: reqwest::Client,
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
    last_url: Mutex<Option<(String, Url)>>,
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

    /// A request to `path` under the base URL, signed, with the extra query.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let rb = match self.url(path) {
            Some(url) => self.client.request(method, url),
            // Not a URL: the client says why when the request is sent.
            None => self
                .client
                .request(method, format!("{}{}", self.base_url, path)),
        };
        let mut rb = rb.headers(self.headers.clone());
        if !self.query.is_empty() {
            rb = rb.query(&self.query);
        }
        rb
    }

    /// The base URL and `path` joined, parsed as the client would parse
    /// the text; `None` if it is not a URL.
    fn url(&self, path: &str) -> Option<Url> {
        let mut last = self.last_url.lock();
        if let Some((p, url)) = &*last
            && p == path
        {
            return Some(url.clone());
        }
        let url = Url::parse(&format!("{}{}", self.base_url, path)).ok()?;
        *last = Some((path.to_owned(), url.clone()));
        Some(url)
    }

    /// A request with a JSON body: `body` and the configured body fields,
    /// which replace any field of the same name.
    pub fn json(&self, method: Method, path: &str, mut body: Value) -> RequestBuilder {
        if let Value::Object(fields) = &mut body {
            for (k, v) in &self.body {
                fields.insert(k.clone(), Value::String(v.clone()));
            }
        }
        self.request(method, path).json(&body)
    }

    /// A multipart form with the configured body fields added.
    pub fn form(&self, mut form: reqwest::multipart::Form) -> reqwest::multipart::Form {
        for (k, v) in &self.body {
            form = form.text(k.clone(), v.clone());
        }
        form
    }

    /// Sends a request and returns the response if its status is a success;
    /// any failure is classified for the retry loop.
    pub async fn send(&self, rb: RequestBuilder) -> Result<Response, UpstreamError> {
        let resp = self
            .redactor
            .send(rb)
            .await
            .map_err(|e| self.transport_error(e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(self.status_error(resp).await)
    }

    /// Sends a request and reads its JSON body.
    pub async fn send_json(&self, rb: RequestBuilder) -> Result<Value, UpstreamError> {
        let resp = self.send(rb).await?;
        self.read_json(resp).await
    }

    /// Reads a successful answer's JSON body.
    pub async fn read_json(&self, resp: Response) -> Result<Value, UpstreamError> {
        let status = resp.status().as_u16();
        let body = read_limited(resp)
            .await
            .map_err(|e| self.transport_error(self.redactor.transport(&e)))?;
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

    #[test]
    fn the_providers_body_fields_are_in_every_body_and_win() {
        let mut cfg = super::super::testutil::provider(Protocol::Openai, "http://127.0.0.1:9");
        cfg.body = [("account_token".to_owned(), Secret::new("tok-1234"))].into();
        let conn = Conn::new("p", &cfg, None, None, reqwest::Client::new()).unwrap();
        let request = conn
            .json(
                Method::POST,
                "/x",
                json!({"account_token": "the client's", "model": "m"}),
            )
            .build()
            .unwrap();
        let body: Value =
            serde_json::from_slice(request.body().unwrap().as_bytes().unwrap()).unwrap();
        assert_eq!(body, json!({"account_token": "tok-1234", "model": "m"}));
        assert_eq!(conn.scrub("echo: tok-1234"), "echo: ***");
    }
}
