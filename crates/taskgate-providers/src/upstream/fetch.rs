//! Fetching a URL that a user put in a task's input (an audio or image URL).
//!
//! Such a URL must not let a caller reach what only Taskgate can reach: the
//! loopback interface, private networks, link-local addresses (and with them
//! the cloud metadata service at 169.254.169.254). The check is made on the
//! addresses a name resolves to, by the resolver the HTTP client connects
//! with, so a name that resolves to a private address is refused, and it is
//! made again on every redirect. Size and time are limited.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde::{Deserialize, Serialize};
use taskgate_core::task::error_code;

use super::http::UpstreamError;

const MAX_REDIRECTS: usize = 5;

/// What user-supplied URLs may reach.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    /// Networks allowed although not public, e.g. `10.1.0.0/16` for an
    /// internal media server. Empty by default.
    pub allow: Vec<Cidr>,
    /// Largest body fetched.
    pub max_bytes: usize,
    /// Deadline of the whole fetch.
    pub timeout: Duration,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            max_bytes: 25 * 1024 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

impl FetchPolicy {
    /// Whether a connection to `ip` is allowed: public, or in `allow`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow.iter().any(|c| c.contains(ip))
    }
}

/// An address block such as `10.0.0.0/8` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: bad prefix length"))?,
        };
        Ok(Self { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

/// `10.0.0.0/8`, or the address alone for a block of one address: the forms
/// [`Cidr::parse`] reads.
impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == one {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// Read from and written as its text, so the configuration holds blocks,
/// not strings to parse again.
impl Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Cidr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address or CIDR block, e.g. \"10.0.0.0/8\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Cidr, E> {
                Cidr::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// An IPv4 address carried inside IPv6 (mapped, or NAT64) is judged as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            ip
        }
        v4 => v4,
    }
}

/// Whether `ip` is an ordinary address of the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                  // "this network"
        || a == 10                            // private
        || a == 127                           // loopback
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 169 && b == 254)             // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)     // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)     // documentation
        || (a == 192 && b == 88 && c == 99)   // 6to4 relay anycast
        || (a == 192 && b == 168)             // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100)  // documentation
        || (a == 203 && b == 0 && c == 113)   // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00        // unique local (fd00:ec2::254 metadata too)
        || (s[0] & 0xffc0) == 0xfe80        // link-local
        || (s[0] & 0xffc0) == 0xfec0        // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00        // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard-only
        || s[0] == 0x2002) // 6to4: embeds an IPv4 address we do not check
}

/// `host`'s addresses by the system resolver, only those `policy` permits
/// kept (all of them without one); an error if none is left. What an HTTP
/// client's resolver answers so that it connects to nothing else, whatever
/// a name resolves to at the moment it connects (no DNS rebinding between
/// a check and a connection): the fetcher's, and webhook deliveries'.
pub async fn permitted_addrs(
    host: &str,
    policy: Option<&FetchPolicy>,
) -> std::io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await?
        .filter(|a| policy.is_none_or(|p| p.permits(a.ip())))
        .collect();
    if addrs.is_empty() {
        return Err(std::io::Error::other(format!(
            "{host} does not resolve to a public address"
        )));
    }
    Ok(addrs)
}

/// Resolves names with the system resolver and keeps only permitted addresses.
struct GuardedResolver {
    policy: Arc<FetchPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let addrs = permitted_addrs(name.as_str(), Some(&policy)).await?;
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Fetches user-supplied URLs under a [`FetchPolicy`].
pub struct Fetcher {
    client: reqwest::Client,
    policy: Arc<FetchPolicy>,
}

impl Fetcher {
    pub fn new(policy: FetchPolicy) -> Result<Self, String> {
        let policy = Arc::new(policy);
        let check = policy.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error("too many redirects");
            }
            match url_refusal(attempt.url(), &check) {
                Some(why) => attempt.error(why),
                None => attempt.follow(),
            }
        });
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver {
                policy: policy.clone(),
            }))
            .redirect(redirects)
            .connect_timeout(Duration::from_secs(10))
            .timeout(policy.timeout)
            .user_agent(concat!("taskgate/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .http1_only()
            .build()
            .map_err(|e| format!("cannot build the fetch client: {e}"))?;
        Ok(Self { client, policy })
    }

    /// Fetches `url`: its body and a file name taken from its path.
    pub(crate) async fn fetch(&self, url: &str) -> Result<(Bytes, Option<String>), UpstreamError> {
        let refuse = |why: String| UpstreamError::fatal(error_code::UPSTREAM_ERROR, why);
        let parsed = reqwest::Url::parse(url)
            .map_err(|_| refuse(format!("The URL {} is not valid.", preview(url))))?;
        if let Some(why) = url_refusal(&parsed, &self.policy) {
            return Err(refuse(format!(
                "The URL {} is refused: {why}.",
                preview(url)
            )));
        }
        let filename = parsed
            .path_segments()
            .and_then(|mut s| s.next_back())
            .filter(|s| !s.is_empty() && s.contains('.'))
            .map(str::to_owned);
        // A user's URL, not a provider's: no credential of Taskgate's rides
        // on it, and the client's error is not shown (only `why`).
        #[allow(clippy::disallowed_methods)]
        let resp = self.client.get(parsed).send().await.map_err(|e| {
            let why = if e.is_timeout() {
                "it did not answer in time".to_owned()
            } else if e.is_redirect() {
                "it redirects to an address that is not allowed".to_owned()
            } else {
                // Includes the resolver's refusal of non-public addresses.
                "it cannot be reached, or it is not a public address".to_owned()
            };
            refuse(format!("Cannot fetch {}: {why}.", preview(url)))
        })?;
        if !resp.status().is_success() {
            return Err(refuse(format!(
                "Cannot fetch {}: it answered HTTP {}.",
                preview(url),
                resp.status().as_u16()
            )));
        }
        let limit = self.policy.max_bytes;
        if resp.content_length().is_some_and(|n| n > limit as u64) {
            return Err(refuse(too_large(url, limit)));
        }
        let mut body = BytesMut::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| {
                refuse(format!(
                    "Cannot fetch {}: the download broke off or took too long.",
                    preview(url)
                ))
            })?;
            if body.len() + chunk.len() > limit {
                return Err(refuse(too_large(url, limit)));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body.freeze(), filename))
    }
}

fn too_large(url: &str, limit: usize) -> String {
    format!(
        "Cannot fetch {}: it is larger than {} bytes.",
        preview(url),
        limit
    )
}

/// Why a URL may not be fetched, judged before any connection: its scheme,
/// and its host when that is an address literal (names are judged by the
/// resolver).
pub fn url_refusal(url: &reqwest::Url, policy: &FetchPolicy) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Some("only http and https URLs are fetched".to_owned());
    }
    match url.host() {
        None => Some("it has no host".to_owned()),
        Some(url::Host::Ipv4(ip)) if !policy.permits(IpAddr::V4(ip)) => {
            Some("it is not a public address".to_owned())
        }
        Some(url::Host::Ipv6(ip)) if !policy.permits(IpAddr::V6(ip)) => {
            Some("it is not a public address".to_owned())
        }
        _ => None,
    }
}

fn preview(url: &str) -> String {
    let mut s: String = url.chars().take(64).collect();
    if url.chars().count() > 64 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(s)), "{s} must not be public");
        }
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(s)), "{s} is public");
        }
    }

    #[test]
    fn cidr_blocks_match_their_addresses() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains(ip("10.1.200.3")));
        assert!(!c.contains(ip("10.2.0.1")));
        assert!(c.contains(ip("::ffff:10.1.0.9")));
        assert!(Cidr::parse("127.0.0.2").unwrap().contains(ip("127.0.0.2")));
        assert!(!Cidr::parse("127.0.0.2").unwrap().contains(ip("127.0.0.1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("1.2.3.4")));
        assert!(Cidr::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("nope").is_err());
    }

    #[test]
    fn cidr_blocks_read_back_as_written() {
        for s in ["10.0.0.0/8", "192.168.1.1", "fd00::/8", "::1", "0.0.0.0/0"] {
            let c: Cidr = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
            let json = serde_json::to_value(c).unwrap();
            assert_eq!(serde_json::from_value::<Cidr>(json).unwrap(), c);
        }
        assert_eq!(
            Cidr::parse("127.0.0.1/32").unwrap().to_string(),
            "127.0.0.1"
        );
        let e = serde_json::from_value::<Cidr>(serde_json::json!("nope")).unwrap_err();
        assert!(
            e.to_string().contains("not an address or CIDR block"),
            "{e}"
        );
    }
}
