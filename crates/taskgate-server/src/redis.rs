//! What Taskgate asks of Redis (the limiters' windows, streams' text and
//! their notices), through the `redis` crate: one multiplexed connection
//! kept by its connection manager (made again on the next call after it
//! breaks), or, when the URL names a node of a Redis Cluster, the crate's
//! cluster connection (slots learned from the cluster, `MOVED` and `ASK`
//! followed). Lua scripts run by `EVALSHA`, loaded on `NOSCRIPT`. Every call
//! has a deadline, so an unreachable Redis is an error at once, never a
//! hang. `redis://[user:password@]host[:port][/db]`.

use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSubStream};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionInfo, FromRedisValue, IntoConnectionInfo,
    RedisConnectionInfo,
};
use tokio::sync::OnceCell;

use crate::config::RedisUrl;

/// A Lua script and its SHA-1, as `EVALSHA` names it.
pub use redis::Script;

/// Longest wait for a connection, and for one command's answer.
const DEADLINE: Duration = Duration::from_millis(1000);
/// Longest wait for one call: a connection (when one is being made), then
/// the answer.
const CALL_DEADLINE: Duration = Duration::from_millis(2 * 1000);

#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error("Redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("the subscription ended")]
    Closed,
}

/// A client of one Redis, or of a Redis Cluster through any of its nodes.
/// Taskgate's keys put what one script touches under one hash tag, so each
/// script runs on one node.
pub struct Redis {
    client: Client,
    /// Where it connects, without credentials, for messages.
    address: String,
    /// Made on the first call that reaches Redis, so that a Redis down at
    /// start is only an error of the calls made meanwhile.
    link: OnceCell<Link>,
}

/// One Redis or a cluster, as found on the first connection.
enum Link {
    One(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Redis {
    /// A client for `url`, read with the configuration (connections are
    /// made when needed).
    pub fn new(url: &RedisUrl) -> Result<Self, String> {
        let info = url
            .url()
            .clone()
            .into_connection_info()
            .map_err(|e| format!("redis_url: {e}"))?;
        let address = info.addr().to_string();
        let client = Client::open(connection_info(info)).map_err(|e| format!("redis_url: {e}"))?;
        Ok(Self {
            client,
            address,
            link: OnceCell::new(),
        })
    }

    /// Where this client connects, without credentials.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Runs a Lua script with its keys and arguments.
    ///
    /// Against one Redis, a call refused a connection (the connection
    /// manager's last attempt, made while Redis was away: nothing was sent)
    /// is sent once more on the connection that refusal set going, so the
    /// first call after Redis is back is answered, as before.
    pub async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, RedisError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        within(CALL_DEADLINE, async {
            Ok(match self.link().await? {
                Link::One(c) => {
                    let mut c = c.clone();
                    match invocation.invoke_async(&mut c).await {
                        Err(e) if e.is_connection_refusal() => {
                            invocation.invoke_async(&mut c).await?
                        }
                        r => r?,
                    }
                }
                Link::Cluster(c) => invocation.invoke_async(&mut c.clone()).await?,
            })
        })
        .await
    }

    /// One command, its words as Redis reads them (`["APPEND", key, text]`);
    /// on a cluster, sent to the node of its key. Sent again after a refused
    /// connection, as [`Redis::eval`].
    pub async fn command<T: FromRedisValue>(&self, words: &[&str]) -> Result<T, RedisError> {
        let mut cmd = Cmd::new();
        for word in words {
            cmd.arg(*word);
        }
        within(CALL_DEADLINE, async {
            Ok(match self.link().await? {
                Link::One(c) => {
                    let mut c = c.clone();
                    match cmd.query_async(&mut c).await {
                        Err(e) if e.is_connection_refusal() => cmd.query_async(&mut c).await?,
                        r => r?,
                    }
                }
                Link::Cluster(c) => cmd.query_async(&mut c.clone()).await?,
            })
        })
        .await
    }

    /// A connection of its own subscribed to `channel`.
    pub async fn subscribe(&self, channel: &str) -> Result<Subscription, RedisError> {
        let mut pubsub = within(DEADLINE, async {
            Ok(self.client.get_async_pubsub().await?)
        })
        .await?;
        within(DEADLINE, async { Ok(pubsub.subscribe(channel).await?) }).await?;
        Ok(Subscription {
            messages: pubsub.into_on_message(),
        })
    }

    /// The link, made on first use: a cluster if the node says it is one.
    /// A failure is the caller's error, and the next call tries again.
    async fn link(&self) -> Result<&Link, RedisError> {
        self.link
            .get_or_try_init(|| async {
                if self.is_cluster().await? {
                    let node = self.client.get_connection_info().clone();
                    let cluster = ClusterClientBuilder::new([node])
                        .tcp_settings(nodelay())
                        .connection_timeout(DEADLINE)
                        .response_timeout(DEADLINE)
                        .build()?
                        .get_async_connection()
                        .await?;
                    return Ok(Link::Cluster(cluster));
                }
                // No retries of its own: a connection lost is made again by
                // the next call, at once (a retry waiting out its backoff
                // would hold every call until then).
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(DEADLINE))
                    .set_response_timeout(Some(DEADLINE))
                    .set_number_of_retries(0);
                let manager =
                    ConnectionManager::new_with_config(self.client.clone(), config).await?;
                Ok::<_, RedisError>(Link::One(manager))
            })
            .await
    }

    /// Whether the node of the URL has cluster mode on.
    async fn is_cluster(&self) -> Result<bool, RedisError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(DEADLINE))
            .set_response_timeout(Some(DEADLINE));
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let info: String = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut conn)
            .await?;
        Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
    }
}

/// The connection settings of a parsed URL: `redis://secret@host` (no
/// colon) names a password, not a user (as Taskgate always read it); and
/// `TCP_NODELAY`.
fn connection_info(info: ConnectionInfo) -> ConnectionInfo {
    let settings = info.redis_settings();
    let password_only = match (settings.username(), settings.password()) {
        (Some(secret), None) => Some(
            RedisConnectionInfo::default()
                .set_db(settings.db())
                .set_password(secret),
        ),
        _ => None,
    };
    let info = match password_only {
        Some(settings) => info.set_redis_settings(settings),
        None => info,
    };
    info.set_tcp_settings(nodelay())
}

/// Requests go out at once: each is small, and waited for.
fn nodelay() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

async fn within<T>(
    deadline: Duration,
    f: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, RedisError> {
    tokio::time::timeout(deadline, f)
        .await
        .unwrap_or(Err(RedisError::Timeout(deadline)))
}

/// A connection in subscribed mode.
pub struct Subscription {
    messages: PubSubStream,
}

impl Subscription {
    /// Waits for the next message (cancel-safe); an error once the
    /// connection has ended.
    pub async fn next(&mut self) -> Result<(), RedisError> {
        self.messages
            .next()
            .await
            .map(drop)
            .ok_or(RedisError::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(url: &str) -> Redis {
        Redis::new(&url.parse().unwrap()).unwrap()
    }

    #[test]
    fn every_url_the_configuration_reads_makes_a_client() {
        for s in [
            "redis://:p@ss@cache:6379/1",
            "redis://User:pw@Cache.Internal",
            "redis://h:6379/?protocol=resp3",
        ] {
            let url: RedisUrl = s.parse().unwrap();
            Redis::new(&url).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }

    #[test]
    fn urls() {
        let r = new("redis://127.0.0.1:6380/2");
        assert_eq!(r.address(), "127.0.0.1:6380");
        let info = r.client.get_connection_info().redis_settings();
        assert_eq!((info.db(), info.password()), (2, None));

        let r = new("redis://:s3cret@cache.internal");
        assert_eq!(r.address(), "cache.internal:6379");
        let info = r.client.get_connection_info().redis_settings();
        assert_eq!((info.username(), info.password()), (None, Some("s3cret")));
        assert!(!r.address().contains("s3cret"));

        // Without a colon, what comes before `@` is the password.
        let r = new("redis://s3cret@cache.internal");
        let info = r.client.get_connection_info().redis_settings();
        assert_eq!((info.username(), info.password()), (None, Some("s3cret")));

        let r = new("redis://app:pw@[::1]:7000");
        assert_eq!(r.address(), "::1:7000");
        let info = r.client.get_connection_info().redis_settings();
        assert_eq!(
            (info.username(), info.password()),
            (Some("app"), Some("pw"))
        );
    }
}
