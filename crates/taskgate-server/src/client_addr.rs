//! What a request's proxies say: the client's address (for the limits on
//! failed authentication and sign-in), the host the browser asked for and
//! whether it came over HTTPS (for the dashboard).
//!
//! Behind a reverse proxy every request comes from the proxy. With
//! `trusted_proxies` set, a request whose peer is one of them is attributed
//! to the address its proxies name in ONE header, the one
//! `client_ip_header` names (`X-Forwarded-For` by default, or `Forwarded`
//! of RFC 7239), read right to left, skipping trusted hops; the first
//! untrusted hop is the client. Proxies append, so everything left of that
//! hop came from the client and is ignored. The other header is never read:
//! a proxy that sets one passes the other through as the client sent it
//! (nginx passes `Forwarded`), and preferring it would let a client pick
//! its own address. Without the setting, or from an untrusted peer, every
//! forwarding header is ignored: a client cannot dodge a limit, spoof the
//! origin check or the cookie's `Secure` by sending them.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};
use taskgate_providers::upstream::fetch::Cidr;

use crate::service::Origin;
use crate::state::AppState;

/// Hops read at most, whatever the headers hold.
const MAX_HOPS: usize = 32;

/// The header whose hops name the client (`client_ip_header`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientIpHeader {
    #[default]
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    #[serde(rename = "forwarded")]
    Forwarded,
}

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    blocks: Vec<Cidr>,
    header: ClientIpHeader,
}

impl TrustedProxies {
    /// From the `trusted_proxies` setting (addresses or CIDR blocks, read
    /// as such with the configuration) and the header they name the client in.
    pub fn new(blocks: &[Cidr], header: ClientIpHeader) -> Self {
        Self {
            blocks: blocks.to_vec(),
            header,
        }
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.blocks.iter().any(|c| c.contains(ip))
    }

    /// Whether a request from `peer` came through one of our proxies, so
    /// that its forwarding headers are believed.
    pub fn is_trusted(&self, peer: Option<IpAddr>) -> bool {
        peer.is_some_and(|p| self.trusts(p))
    }

    /// `X-Forwarded-Host` of a request from a trusted proxy; `None` from
    /// any other peer.
    pub fn forwarded_host<'h>(
        &self,
        peer: Option<IpAddr>,
        headers: &'h HeaderMap,
    ) -> Option<&'h str> {
        if !self.is_trusted(peer) {
            return None;
        }
        headers
            .get("x-forwarded-host")
            .and_then(|h| h.to_str().ok())
    }

    /// Whether a trusted proxy says the request came over HTTPS
    /// (`X-Forwarded-Proto: https`).
    pub fn forwarded_https(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
        self.is_trusted(peer)
            && headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
    }

    /// The client's address for a request from `peer`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut nearest = peer;
        for hop in hops(self.header, headers) {
            match hop {
                // A hop that names no address was not written by a proxy
                // of ours: the last trusted hop answers for it.
                None => return nearest,
                Some(ip) if self.trusts(ip) => nearest = ip,
                Some(ip) => return ip,
            }
        }
        nearest
    }
}

/// A request's origin for the audit log: its client's address (as the
/// trusted proxies name it) and its `User-Agent`. Every door that changes
/// something takes it beside its principal.
impl FromRequestParts<Arc<AppState>> for Origin {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<AppState>,
    ) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(a)| a.ip());
        let ip = peer.map(|p| app.trusted_proxies.client(p, &parts.headers));
        let user_agent = parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok());
        Ok(Origin::http(ip, user_agent))
    }
}

/// The forwarded hops, nearest first (right to left), at most [`MAX_HOPS`];
/// `None` for a hop that is not an address (`unknown`, an obfuscated name).
fn hops(header: ClientIpHeader, headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let values: Vec<Option<IpAddr>> = match header {
        ClientIpHeader::Forwarded => headers
            .get_all("forwarded")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|element| {
                element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then(|| parse_node(v))
                })
            })
            .collect(),
        ClientIpHeader::XForwardedFor => headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(parse_node)
            .collect(),
    };
    values.into_iter().rev().take(MAX_HOPS).collect()
}

/// `192.0.2.60`, `"[2001:db8::1]:4711"`, `198.51.100.17:8080`.
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Ok(ip) = s.parse() {
        return Some(ip);
    }
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, _port) = s.rsplit_once(':')?;
    host.parse().ok()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_headers_are_ignored() {
        let none = TrustedProxies::default();
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(none.client(ip("10.0.0.1"), &h), ip("10.0.0.1"));
        let some = TrustedProxies::new(&[cidr("10.0.0.0/8")], ClientIpHeader::default());
        // From a peer that is not a trusted proxy: ignored too.
        assert_eq!(some.client(ip("203.0.113.9"), &h), ip("203.0.113.9"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let blocks = [cidr("10.0.0.0/8"), cidr("192.168.1.1")];
        let p = TrustedProxies::new(&blocks, ClientIpHeader::XForwardedFor);
        // The client claims 6.6.6.6; its real address was appended by our proxies.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.2.3")]);
        assert_eq!(p.client(ip("192.168.1.1"), &h), ip("198.51.100.7"));
        // Several headers are one list.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        // Only the named header is read: a client's own Forwarded (which
        // nginx passes through) picks nothing.
        let h = headers(&[
            (
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https",
            ),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        let h2 = headers(&[("forwarded", "for=6.6.6.6")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h2), ip("10.0.0.2"));
        // With `forwarded` named, X-Forwarded-For is the one ignored; quotes,
        // brackets and ports parse.
        let f = TrustedProxies::new(&blocks, ClientIpHeader::Forwarded);
        assert_eq!(f.client(ip("10.0.0.2"), &h), ip("2001:db8::7"));
        let h3 = headers(&[("x-forwarded-for", "6.6.6.6")]);
        assert_eq!(f.client(ip("10.0.0.2"), &h3), ip("10.0.0.2"));
        // Every hop trusted: the farthest one.
        let h = headers(&[("x-forwarded-for", "10.9.9.9, 10.8.8.8")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.9.9.9"));
        // A hop that is not an address: the nearest trusted hop answers.
        let h = headers(&[("x-forwarded-for", "198.51.100.7, unknown, 10.8.8.8")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.8.8.8"));
        // No header: the peer.
        assert_eq!(p.client(ip("10.0.0.2"), &HeaderMap::new()), ip("10.0.0.2"));
    }

    #[test]
    fn host_and_proto_are_believed_only_from_a_trusted_peer() {
        let p = TrustedProxies::new(&[cidr("10.0.0.0/8")], ClientIpHeader::default());
        let h = headers(&[
            ("x-forwarded-host", "taskgate.example"),
            ("x-forwarded-proto", "https"),
        ]);
        let proxy = Some(ip("10.0.0.2"));
        assert_eq!(p.forwarded_host(proxy, &h), Some("taskgate.example"));
        assert!(p.forwarded_https(proxy, &h));
        for other in [Some(ip("203.0.113.9")), None] {
            assert_eq!(p.forwarded_host(other, &h), None);
            assert!(!p.forwarded_https(other, &h));
        }
        let none = TrustedProxies::default();
        assert_eq!(none.forwarded_host(proxy, &h), None);
        assert!(!none.forwarded_https(proxy, &h));
    }

    #[test]
    fn nodes_parse_in_their_forms() {
        assert_eq!(parse_node(" 1.2.3.4 "), Some(ip("1.2.3.4")));
        assert_eq!(parse_node("1.2.3.4:80"), Some(ip("1.2.3.4")));
        assert_eq!(parse_node("\"[::1]:80\""), Some(ip("::1")));
        assert_eq!(parse_node("::1"), Some(ip("::1")));
        assert_eq!(parse_node("_hidden"), None);
        assert_eq!(parse_node(""), None);
    }
}
