//! The client's address, for the failed-authentication limit.
//!
//! Behind a reverse proxy every request comes from the proxy. With
//! `trusted_proxies` set, a request whose peer is one of them is attributed
//! to the address its proxies name: `Forwarded` (RFC 7239) `for=` values, or
//! else `X-Forwarded-For`, read right to left, skipping trusted hops; the
//! first untrusted hop is the client. Proxies append, so everything left of
//! that hop came from the client and is ignored. Without the setting, or
//! from an untrusted peer, the headers are ignored: a client cannot dodge
//! the limit by sending them.

use std::net::IpAddr;

use axum::http::HeaderMap;
use taskgate_providers::upstream::fetch::Cidr;

/// Hops read at most, whatever the headers hold.
const MAX_HOPS: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// From the `trusted_proxies` setting: addresses or CIDR blocks.
    pub fn parse(list: &[String]) -> Result<Self, String> {
        list.iter()
            .map(|s| Cidr::parse(s).map_err(|e| format!("config: trusted_proxies: {e}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// The client's address for a request from `peer`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let mut nearest = peer;
        for hop in hops(headers) {
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

/// The forwarded hops, nearest first (right to left), at most [`MAX_HOPS`];
/// `None` for a hop that is not an address (`unknown`, an obfuscated name).
fn hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let forwarded: Vec<&str> = headers
        .get_all("forwarded")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let values: Vec<Option<IpAddr>> = if !forwarded.is_empty() {
        forwarded
            .iter()
            .flat_map(|v| v.split(','))
            .filter_map(|element| {
                element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then(|| parse_node(v))
                })
            })
            .collect()
    } else {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(parse_node)
            .collect()
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

    #[test]
    fn without_trusted_proxies_the_headers_are_ignored() {
        let none = TrustedProxies::default();
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(none.client(ip("10.0.0.1"), &h), ip("10.0.0.1"));
        let some = TrustedProxies::parse(&["10.0.0.0/8".to_owned()]).unwrap();
        // From a peer that is not a trusted proxy: ignored too.
        assert_eq!(some.client(ip("203.0.113.9"), &h), ip("203.0.113.9"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let p =
            TrustedProxies::parse(&["10.0.0.0/8".to_owned(), "192.168.1.1".to_owned()]).unwrap();
        // The client claims 6.6.6.6; its real address was appended by our proxies.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.2.3")]);
        assert_eq!(p.client(ip("192.168.1.1"), &h), ip("198.51.100.7"));
        // Several headers are one list.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        // Forwarded wins over X-Forwarded-For, with quotes, brackets and ports.
        let h = headers(&[
            (
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https",
            ),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("2001:db8::7"));
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
    fn nodes_parse_in_their_forms() {
        assert_eq!(parse_node(" 1.2.3.4 "), Some(ip("1.2.3.4")));
        assert_eq!(parse_node("1.2.3.4:80"), Some(ip("1.2.3.4")));
        assert_eq!(parse_node("\"[::1]:80\""), Some(ip("::1")));
        assert_eq!(parse_node("::1"), Some(ip("::1")));
        assert_eq!(parse_node("_hidden"), None);
        assert_eq!(parse_node(""), None);
    }
}
