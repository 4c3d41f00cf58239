//! A provider's credentials kept out of every text Taskgate writes: log
//! lines, task errors, answers.
//!
//! A credential travels in a header, in the query string or in the body of
//! each request, and comes back in text Taskgate did not write: an HTTP
//! client's error names the request's URL (query and all), a provider quotes
//! the request in its error message. So every such text passes through one
//! [`Redactor`] before it is written anywhere:
//!
//! - a request to a provider is sent only by [`Redactor::send`] or
//!   [`Redactor::send_json`] (clippy's `disallowed-methods` refuses
//!   `RequestBuilder::send` and hyper-util's `Client::request` elsewhere),
//!   whose error carries its text already redacted and no URL;
//! - an error leaving an adapter has its message redacted by the route loop
//!   (`Conn::redacted`), whatever path made it;
//! - a response body error met while reading goes through
//!   [`Redactor::describe`].
//!
//! A credential is matched in every form it takes in such text: as given,
//! percent-encoded (a query value, by `application/x-www-form-urlencoded`
//! or by the URL's own rules), and escaped as in a JSON string.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use reqwest::{RequestBuilder, Response};

use crate::upstream::http::JsonClient;

/// What replaces a credential.
const MASK: &str = "***";

/// A credential shorter than this is not one, and replacing it would garble
/// ordinary text.
const MIN_SECRET_LEN: usize = 4;

/// The credentials of one provider, in each form they can take in text.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    /// Longest first, so a form is masked before a shorter one inside it.
    forms: Arc<[String]>,
}

impl Redactor {
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut forms: Vec<String> = Vec::new();
        for s in secrets {
            let s = s.as_ref();
            if s.len() < MIN_SECRET_LEN {
                continue;
            }
            forms.push(s.to_owned());
            forms.push(url::form_urlencoded::byte_serialize(s.as_bytes()).collect());
            forms.push(percent_encode_all(s));
            forms.push(percent_encode_all(s).to_ascii_lowercase());
            forms.push(url_userinfo_form(s));
            if let Ok(json) = serde_json::to_string(s) {
                forms.push(json[1..json.len() - 1].to_owned());
            }
        }
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        Self {
            forms: forms.into(),
        }
    }

    /// `text` with every credential, in any of its forms, masked.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for form in self.forms.iter() {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), MASK);
            }
        }
        out
    }

    /// An HTTP client error as a log line may show it: what failed and why
    /// (its causes), the URL without its query, every credential masked.
    pub fn describe(&self, e: &reqwest::Error) -> String {
        let mut text = e.to_string();
        if let Some(url) = e.url() {
            let mut shown = url.clone();
            shown.set_query(None);
            let _ = shown.set_password(None);
            let _ = shown.set_username("");
            text = text.replace(url.as_str(), shown.as_str());
        }
        self.scrub(&with_causes(text, e))
    }

    /// Sends a JSON request by hyper-util's client ([`JsonClient`]): the
    /// other way a request leaves for a provider. Its errors name no URL;
    /// their text is redacted all the same.
    pub async fn send_json(
        &self,
        client: &JsonClient,
        mut request: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<Incoming>, Transport> {
        crate::trace::propagate_headers(request.headers_mut());
        #[allow(clippy::disallowed_methods)] // the one place allowed
        let sent = client.request(request).await;
        sent.map_err(|e| Transport {
            what: if e.is_connect() {
                "cannot connect to"
            } else {
                "failed to reach"
            },
            detail: self.scrub(&with_causes(e.to_string(), &e)),
        })
    }

    /// A JSON answer's body broken off while it was read.
    pub fn broken_answer(&self, e: &hyper::Error) -> Transport {
        Transport {
            what: "broke off the answer from",
            detail: self.scrub(&with_causes(e.to_string(), e)),
        }
    }

    /// Sends a request to the provider: the one way a request leaves for a
    /// provider, so a failure is never seen unredacted.
    pub async fn send(&self, rb: RequestBuilder) -> Result<Response, Transport> {
        let rb = crate::trace::propagate(rb);
        #[allow(clippy::disallowed_methods)] // the one place allowed
        let sent = rb.send().await;
        sent.map_err(|e| self.transport(&e))
    }

    /// A failure of the client (sending, or reading an answer), redacted.
    pub fn transport(&self, e: &reqwest::Error) -> Transport {
        Transport {
            what: if e.is_connect() {
                "cannot connect to"
            } else if e.is_timeout() {
                "timed out talking to"
            } else if e.is_body() || e.is_decode() {
                "broke off the answer from"
            } else {
                "failed to reach"
            },
            detail: self.describe(e),
        }
    }
}

/// A request that got no (whole) answer: what happened, for the task's
/// error, and the HTTP client's account of it, redacted, for the log.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    pub what: &'static str,
    pub detail: String,
}

/// `text` followed by the text of each of `e`'s causes.
fn with_causes(mut text: String, e: &dyn std::error::Error) -> String {
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Every byte but ASCII letters and digits as `%XX` (upper case): the most
/// any encoder escapes.
fn percent_encode_all(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `s` as a URL shows it when it is the password of its authority: the
/// least any encoder escapes in a URL.
fn url_userinfo_form(s: &str) -> String {
    let mut url = url::Url::parse("http://h/").expect("a valid URL");
    match url.set_password(Some(s)) {
        Ok(()) => url.password().unwrap_or(s).to_owned(),
        Err(()) => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ODD: &str = "k3y/with+odd=chars&\"quotes\" and spaces é";

    #[test]
    fn every_form_of_a_secret_is_masked() {
        let r = Redactor::new([ODD, "plainSECRET123"]);
        let form: String = url::form_urlencoded::byte_serialize(ODD.as_bytes()).collect();
        let mut url = url::Url::parse("http://h/p").unwrap();
        url.query_pairs_mut().append_pair("key", ODD);
        let _ = url.set_password(Some(ODD));
        let json = serde_json::to_string(ODD).unwrap();
        for text in [
            format!("raw {ODD} end"),
            format!("query ?key={form} end"),
            format!("url {url} end"),
            format!("json {json} end"),
            format!("all {} end", percent_encode_all(ODD)),
            "bearer plainSECRET123".to_owned(),
        ] {
            let s = r.scrub(&text);
            assert!(!s.contains("k3y"), "{text} -> {s}");
            assert!(!s.contains("plainSECRET123"), "{text} -> {s}");
            assert!(s.ends_with("end") || s.starts_with("bearer"), "{s}");
        }
    }

    #[test]
    fn short_values_are_not_secrets() {
        let r = Redactor::new(["v1", ""]);
        assert_eq!(r.scrub("api v1 here"), "api v1 here");
    }

    #[tokio::test]
    async fn a_client_error_shows_no_url_query_nor_credential() {
        // Nothing listens on port 9 of loopback (discard): refused at once.
        let secret = "q-SECRET-9f8e/+=";
        let r = Redactor::new([secret]);
        let rb = reqwest::Client::new()
            .post("http://user:pa55word-SECRET@127.0.0.1:9/v1/x")
            .query(&[("key", secret)]);
        let e = r.send(rb).await.unwrap_err();
        assert_eq!(e.what, "cannot connect to");
        assert!(!e.detail.contains("SECRET"), "{}", e.detail);
        assert!(!e.detail.contains("key="), "{}", e.detail);
        assert!(e.detail.contains("127.0.0.1:9/v1/x"), "{}", e.detail);
    }

    #[tokio::test]
    async fn a_json_client_error_shows_no_credential() {
        let secret = "q-SECRET-9f8e";
        let r = Redactor::new([secret]);
        let client =
            crate::upstream::http::json_client(crate::upstream::http::tls_config(&[]).unwrap());
        let mut request = hyper::Request::new(Full::new(Bytes::from_static(b"{}")));
        *request.uri_mut() = format!("http://127.0.0.1:9/v1/x?key={secret}")
            .parse()
            .unwrap();
        let e = r.send_json(&client, request).await.unwrap_err();
        assert_eq!(e.what, "cannot connect to");
        assert!(!e.detail.contains("SECRET"), "{}", e.detail);
        assert!(e.detail.contains("refused"), "{}", e.detail);
    }
}
