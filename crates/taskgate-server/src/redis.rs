//! A small Redis client for what Taskgate keeps in Redis (the limiter's
//! state): Lua scripts by `EVALSHA`, over a few pooled connections, with a
//! deadline on every step so an unreachable Redis is an error at once,
//! never a hang. RESP2 on TCP; `redis://[user:password@]host[:port][/db]`.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;

/// Connections kept for reuse.
const POOL: usize = 16;
/// Longest wait for a connection, and for one command's answer.
const DEADLINE: Duration = Duration::from_millis(1000);

#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error("cannot reach Redis: {0}")]
    Io(#[from] std::io::Error),
    #[error("Redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Redis answered an error: {0}")]
    Server(String),
    #[error("unexpected answer from Redis: {0}")]
    Protocol(&'static str),
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Text(String),
    Array(Vec<Reply>),
}

impl Reply {
    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Text(s) => s.parse().ok(),
            _ => None,
        }
    }
}

/// Where and how to connect, from a `redis://` URL (the password is never
/// shown: [`Target::display`] leaves it out).
#[derive(Clone)]
struct Target {
    addr: String,
    user: Option<String>,
    password: Option<String>,
    db: Option<u32>,
}

impl Target {
    fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("redis_url must start with redis://")?;
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((a, r)) => (Some(a), r),
            None => (None, rest),
        };
        let (hostport, db) = match rest.split_once('/') {
            Some((h, "")) => (h, None),
            Some((h, d)) => (
                h,
                Some(
                    d.parse::<u32>()
                        .map_err(|_| "redis_url: the database must be a number")?,
                ),
            ),
            None => (rest, None),
        };
        if hostport.is_empty() {
            return Err("redis_url has no host".to_owned());
        }
        let addr = if hostport.contains(':') && !hostport.ends_with(']') {
            hostport.to_owned()
        } else {
            format!("{hostport}:6379")
        };
        let (user, password) = match auth {
            None => (None, None),
            Some(a) => match a.split_once(':') {
                Some((u, p)) => ((!u.is_empty()).then(|| u.to_owned()), Some(p.to_owned())),
                None => (None, Some(a.to_owned())),
            },
        };
        Ok(Self {
            addr,
            user,
            password,
            db,
        })
    }

    /// The address, for messages.
    fn display(&self) -> &str {
        &self.addr
    }
}

type Conn = BufStream<TcpStream>;

/// A client of one Redis, or of a Redis Cluster through any of its nodes:
/// a command on a key goes to the node that serves the key's slot, learned
/// from the cluster's `MOVED` answers (and `ASK` during a migration).
/// Taskgate's keys put what one script touches under one hash tag, so each
/// script runs on one node.
pub struct Redis {
    target: Target,
    /// Idle connections by node address.
    idle: Mutex<HashMap<String, Vec<Conn>>>,
    /// Which node serves a slot, where a cluster said so.
    slots: Mutex<HashMap<u16, String>>,
}

/// Redirections followed for one command at most.
const MAX_REDIRECTS: usize = 5;

impl Redis {
    /// A client for `url` (checked now; connections are made when needed).
    pub fn new(url: &str) -> Result<Self, String> {
        Ok(Self {
            target: Target::parse(url)?,
            idle: Mutex::new(HashMap::new()),
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// Where this client connects, without credentials.
    pub fn address(&self) -> &str {
        self.target.display()
    }

    /// Runs a Lua script (cached by Redis under its SHA-1 after the first
    /// use), with its keys and arguments.
    pub async fn eval(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Reply, RedisError> {
        let mut words: Vec<&str> = Vec::with_capacity(3 + keys.len() + args.len());
        let n = keys.len().to_string();
        words.extend(["EVALSHA", script.sha.as_str(), n.as_str()]);
        words.extend(keys);
        words.extend(args);
        let key = keys.first().copied();
        match self.keyed(key, &words).await {
            Err(RedisError::Server(e)) if e.starts_with("NOSCRIPT") => {
                words[0] = "EVAL";
                words[1] = script.source;
                self.keyed(key, &words).await
            }
            other => other,
        }
    }

    /// A command without a key (PING), on the configured node.
    pub async fn command(&self, words: &[&str]) -> Result<Reply, RedisError> {
        self.keyed(None, words).await
    }

    /// A command on `key` (its second word), on the node serving the key.
    pub async fn on_key(&self, words: &[&str]) -> Result<Reply, RedisError> {
        self.keyed(words.get(1).copied(), words).await
    }

    async fn keyed(&self, key: Option<&str>, words: &[&str]) -> Result<Reply, RedisError> {
        let slot = key.map(slot_of);
        let mut addr = slot
            .and_then(|s| self.slots.lock().get(&s).cloned())
            .unwrap_or_else(|| self.target.addr.clone());
        let mut asking = false;
        for _ in 0..=MAX_REDIRECTS {
            match self.on_node(&addr, words, asking).await {
                Err(RedisError::Server(e)) if e.starts_with("MOVED ") || e.starts_with("ASK ") => {
                    let mut parts = e.split(' ');
                    let kind = parts.next().unwrap_or_default();
                    let (Some(moved_slot), Some(to)) = (
                        parts.next().and_then(|s| s.parse::<u16>().ok()),
                        parts.next(),
                    ) else {
                        return Err(RedisError::Protocol("a redirection without a node"));
                    };
                    addr = to.to_owned();
                    asking = kind == "ASK";
                    if !asking {
                        self.slots.lock().insert(moved_slot, addr.clone());
                    }
                }
                other => return other,
            }
        }
        Err(RedisError::Protocol("too many cluster redirections"))
    }

    /// One command on a pooled connection to `addr` (after `ASKING` when a
    /// migration asks for it); a connection that failed is dropped.
    async fn on_node(&self, addr: &str, words: &[&str], asking: bool) -> Result<Reply, RedisError> {
        let pooled = self.idle.lock().get_mut(addr).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect(addr).await?,
        };
        let reply = within(async {
            if asking {
                send(&mut conn, &["ASKING"]).await?;
                read(&mut conn).await?;
            }
            send(&mut conn, words).await?;
            read(&mut conn).await
        })
        .await?;
        let mut idle = self.idle.lock();
        let pool = idle.entry(addr.to_owned()).or_default();
        if pool.len() < POOL {
            pool.push(conn);
        }
        drop(idle);
        match reply {
            Reply::Text(e) if e.starts_with('\u{0}') => Err(RedisError::Server(e[1..].to_owned())),
            r => Ok(r),
        }
    }

    /// A connection of its own subscribed to `channel`.
    pub async fn subscribe(&self, channel: &str) -> Result<Subscription, RedisError> {
        let mut conn = self.connect(&self.target.addr).await?;
        within(async {
            send(&mut conn, &["SUBSCRIBE", channel]).await?;
            read(&mut conn).await
        })
        .await?;
        Ok(Subscription { conn })
    }

    async fn connect(&self, addr: &str) -> Result<Conn, RedisError> {
        let t = &self.target;
        within(async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let mut conn = BufStream::new(stream);
            if let Some(password) = &t.password {
                let mut auth = vec!["AUTH"];
                if let Some(u) = &t.user {
                    auth.push(u);
                }
                auth.push(password);
                expect_ok(&mut conn, &auth).await?;
            }
            if let Some(db) = t.db {
                expect_ok(&mut conn, &["SELECT", &db.to_string()]).await?;
            }
            Ok(conn)
        })
        .await
    }
}

async fn within<T>(f: impl Future<Output = Result<T, RedisError>>) -> Result<T, RedisError> {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or(Err(RedisError::Timeout(DEADLINE)))
}

async fn expect_ok(conn: &mut Conn, words: &[&str]) -> Result<(), RedisError> {
    send(conn, words).await?;
    match read(conn).await? {
        Reply::Text(e) if e.starts_with('\u{0}') => Err(RedisError::Server(
            // AUTH's errors never quote the password, but say only the kind.
            e[1..].split(' ').next().unwrap_or_default().to_owned(),
        )),
        _ => Ok(()),
    }
}

async fn send(conn: &mut Conn, words: &[&str]) -> Result<(), RedisError> {
    let mut out = Vec::with_capacity(16 + words.iter().map(|w| w.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
    for w in words {
        out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        out.extend_from_slice(w.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    conn.write_all(&out).await?;
    conn.flush().await?;
    Ok(())
}

/// Reads one reply. An error reply is returned as text starting with NUL
/// (no valid reply does), for the caller to turn into an error after the
/// connection went back to the pool: it is still in step.
fn read(
    conn: &mut Conn,
) -> std::pin::Pin<Box<dyn Future<Output = Result<Reply, RedisError>> + Send + '_>> {
    Box::pin(async move {
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(RedisError::Protocol("the connection closed"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let (kind, rest) = line
            .split_at_checked(1)
            .ok_or(RedisError::Protocol("an empty line"))?;
        let number = || {
            rest.parse::<i64>()
                .map_err(|_| RedisError::Protocol("a bad length"))
        };
        Ok(match kind {
            "+" => Reply::Text(rest.to_owned()),
            "-" => Reply::Text(format!("\u{0}{rest}")),
            ":" => Reply::Int(number()?),
            "$" => {
                let n = number()?;
                if n < 0 {
                    return Ok(Reply::Nil);
                }
                let mut buf = vec![0u8; n as usize + 2];
                conn.read_exact(&mut buf).await?;
                buf.truncate(n as usize);
                Reply::Text(String::from_utf8(buf).map_err(|_| RedisError::Protocol("not UTF-8"))?)
            }
            "*" => {
                let n = number()?;
                if n < 0 {
                    return Ok(Reply::Nil);
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(read(conn).await?);
                }
                Reply::Array(items)
            }
            _ => return Err(RedisError::Protocol("an unknown reply type")),
        })
    })
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, if not empty) or of the key.
fn slot_of(key: &str) -> u16 {
    let tagged = key
        .find('{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.find('}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged.as_bytes()) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A connection in subscribed mode.
pub struct Subscription {
    conn: Conn,
}

impl Subscription {
    /// The next message (not cancel-safe: read it from a task of its own).
    pub async fn next(&mut self) -> Result<Reply, RedisError> {
        read(&mut self.conn).await
    }
}

/// A Lua script and its SHA-1, as `EVALSHA` names it.
pub struct Script {
    source: &'static str,
    sha: String,
}

impl Script {
    pub fn new(source: &'static str) -> Self {
        Self {
            source,
            sha: sha1_hex(source.as_bytes()),
        }
    }
}

/// SHA-1 (FIPS 180-1), only to name scripts for `EVALSHA`.
fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_known_digests() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = "a".repeat(1000);
        assert_eq!(
            sha1_hex(long.as_bytes()),
            "291e9a6c66994949b57ba5e650361e98fc36b1ba"
        );
    }

    #[test]
    fn slots_follow_hash_tags() {
        // Redis's own examples (CLUSTER KEYSLOT).
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot_of("foo"), 12182);
        assert_eq!(
            slot_of("{user1000}.following"),
            slot_of("{user1000}.followers")
        );
        assert_eq!(slot_of("{}x"), slot_of("{}x"));
        assert_eq!(
            slot_of("taskgate:{acct_1}:minute"),
            slot_of("taskgate:{acct_1}:day")
        );
    }

    #[test]
    fn urls() {
        let t = Target::parse("redis://127.0.0.1:6380/2").unwrap();
        assert_eq!(
            (t.addr.as_str(), t.db, t.password.is_none()),
            ("127.0.0.1:6380", Some(2), true)
        );
        let t = Target::parse("redis://:s3cret@cache.internal").unwrap();
        assert_eq!(t.addr, "cache.internal:6379");
        assert_eq!(t.password.as_deref(), Some("s3cret"));
        assert!(!t.display().contains("s3cret"));
        let t = Target::parse("redis://app:pw@[::1]:7000").unwrap();
        assert_eq!(
            (t.addr.as_str(), t.user.as_deref()),
            ("[::1]:7000", Some("app"))
        );
        assert!(Target::parse("http://x").is_err());
        assert!(Target::parse("redis://h/x").is_err());
    }
}
