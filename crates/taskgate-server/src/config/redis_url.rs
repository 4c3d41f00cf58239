//! `redis_url`: the Redis that keeps the limits of several instances.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use url::Url;

/// A `redis://[user:password@]host[:port][/db]` URL, read once with the
/// configuration into the [`Url`] the client connects to: the `redis` crate
/// reads the URL form (with the user and password percent-decoded), and
/// takes a `Url` as it is (`IntoConnectionInfo for Url`). A value the
/// client would refuse (another scheme, no host, a database that is not a
/// number) is refused here, at start, naming the setting; the client is
/// made from the parsed URL only.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(Url);

impl RedisUrl {
    /// The URL's text, which reads back as the same URL.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn url(&self) -> &Url {
        &self.0
    }
}

impl FromStr for RedisUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if !text.starts_with("redis://") {
            return Err("redis_url must start with redis://".to_owned());
        }
        let url = Url::parse(text).map_err(|e| format!("redis_url: {e}"))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err("redis_url has no host".to_owned());
        }
        let db = url.path().trim_matches('/');
        if !db.is_empty() && db.parse::<u32>().is_err() {
            return Err("redis_url: the database must be a number".to_owned());
        }
        Ok(Self(url))
    }
}

/// Without the password: a configuration dump must not show it.
impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        f.debug_tuple("RedisUrl").field(&shown.as_str()).finish()
    }
}

impl Serialize for RedisUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RedisUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RedisUrl;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a redis:// URL")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RedisUrl, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> RedisUrl {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_documented_forms_read() {
        let u = url("redis://127.0.0.1:6380/2");
        assert_eq!(u.as_str(), "redis://127.0.0.1:6380/2");
        assert_eq!(
            (u.url().host_str(), u.url().port(), u.url().path()),
            (Some("127.0.0.1"), Some(6380), "/2")
        );
        let u = url("redis://:s3cret@cache.internal");
        assert_eq!(u.as_str(), "redis://:s3cret@cache.internal");
        assert_eq!(u.url().password(), Some("s3cret"));
        let u = url("redis://app:pw@[::1]:7000");
        assert_eq!(
            (u.url().username(), u.url().password()),
            ("app", Some("pw"))
        );
        assert_eq!(u.url().host_str(), Some("[::1]"));
        url("redis://h/");
    }

    #[test]
    fn its_text_reads_back_as_the_same_url() {
        // Written back (a configuration dump), it must mean this URL.
        for s in [
            "redis://:p@ss@cache:6379/1",
            "redis://User:pw@Cache.Internal",
            "redis://h:6379/?protocol=resp3",
        ] {
            let u = url(s);
            assert_eq!(&Url::parse(u.as_str()).unwrap(), u.url(), "{s}");
        }
        assert_eq!(url("redis://:p@ss@cache").url().password(), Some("p%40ss"));
    }

    #[test]
    fn what_the_client_refuses_is_refused_naming_the_setting() {
        for bad in [
            "http://x",
            "rediss://x",
            "redis://h/x",
            "redis://",
            "redis://:pw@",
            "redis://h:port",
        ] {
            let e = bad
                .parse::<RedisUrl>()
                .err()
                .unwrap_or_else(|| panic!("{bad}"));
            assert!(e.contains("redis_url"), "{bad}: {e}");
        }
    }

    #[test]
    fn its_debug_hides_the_password() {
        let shown = format!("{:?}", url("redis://app:s3cret@h"));
        assert!(
            !shown.contains("s3cret") && shown.contains("***"),
            "{shown}"
        );
    }

    #[test]
    fn it_serializes_back_to_its_text() {
        let u = url("redis://:pw@h:1/3");
        let json = serde_json::to_value(&u).unwrap();
        assert_eq!(json, "redis://:pw@h:1/3");
        assert_eq!(serde_json::from_value::<RedisUrl>(json).unwrap(), u);
    }
}
