//! Service configuration. Every field has a default, so no file is needed.
//!
//! A setting is read into the type its users take (an address block, a
//! URL, a price) as the configuration is deserialized, so that a bad value
//! refuses to start naming the setting, and nothing reads its text again
//! later. What serde cannot check alone (ranges, rules over several
//! fields) is [`Config::validate`].

mod redis_url;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use taskgate_core::{Mode, Nanos, PlanName, RunnerId};
use taskgate_providers::kinds::Kind;
use taskgate_providers::upstream::fetch::Cidr;
use taskgate_providers::upstream::{HttpApiConfig, ProviderConfig, Secret, TargetConfig};

pub use redis_url::RedisUrl;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// `sqlite://PATH` (default `sqlite://data/taskgate.db`) or `postgres://…`.
    pub database_url: String,
    /// `redis://…`: where the rate limits of several instances are kept,
    /// so they hold across them. Absent: in this process's memory.
    pub redis_url: Option<RedisUrl>,
    /// When Redis cannot be reached: `closed` (503 `rate_limiter_unavailable`)
    /// or `open` (serve without limits, and log it).
    pub redis_failure: RedisFailure,
    /// Identifies this instance's running tasks in a shared store. Two live
    /// instances must not share one.
    pub instance_id: Option<RunnerId>,
    /// How long a sync POST /call waits before answering 202.
    pub sync_wait_ms: u64,
    /// On SIGTERM: how long requests in flight and running tasks get to
    /// finish; what is still running then ends `interrupted`.
    pub shutdown_grace_ms: u64,
    /// How long a running task's claim holds without renewal (renewed every
    /// third of it): a task whose instance died ends `interrupted` this long
    /// after that instance's last renewal.
    pub task_lease_ms: u64,
    /// Ended tasks older than this many days are deleted (every ten
    /// minutes, oldest first); 0 keeps every task.
    pub task_retention_days: u32,
    /// Ended test-mode tasks older than this many days are deleted, input
    /// and output with them (test keys cost nothing, so nothing else bounds
    /// what they store); 0: they are kept as `task_retention_days` says.
    /// The shorter of the two holds for test tasks.
    pub test_task_retention_days: u32,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Live tasks executed at once by this instance.
    pub workers: usize,
    /// Test-mode tasks executed at once by this instance, on workers of
    /// their own, so that test tasks never take a live task's worker.
    /// Absent: a quarter of `workers`, at least 2.
    pub test_workers: Option<usize>,
    /// Failed authentications per minute from one address before it gets 429.
    pub auth_failures_per_minute: u32,
    /// Reverse proxies (addresses or CIDR blocks) whose forwarding headers
    /// are believed: the client's address (in `client_ip_header`), and
    /// `X-Forwarded-Host` / `X-Forwarded-Proto` for the dashboard. Empty:
    /// every forwarding header is ignored.
    pub trusted_proxies: Vec<Cidr>,
    /// The one header the trusted proxies name the client in:
    /// `x-forwarded-for` (default) or `forwarded`. The other is ignored.
    pub client_ip_header: crate::client_addr::ClientIpHeader,
    /// Connection limits and timeouts against slow or idle clients.
    pub http: HttpConfig,
    /// `[limits]`: what one key may hold open at once.
    pub limits: LimitsConfig,
    /// When set, `GET /metrics` wants `Authorization: Bearer <this>`.
    /// A credential: never shown in a dump, a log line or an error.
    #[serde(deserialize_with = "secret_string")]
    pub metrics_token: Option<Secret>,
    /// `[database]`: PostgreSQL's pool size and timeouts.
    pub database: DatabaseConfig,
    /// `[dashboard]`: sessions and sign-in of the web dashboard.
    pub dashboard: DashboardConfig,
    /// Plans by name.
    pub plans: BTreeMap<PlanName, PlanLimits>,
    /// Plan of the `default` account created at first start.
    pub default_plan: PlanName,
    /// Upstream AI providers by name (`[providers.openai]`).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Overrides and additions for the catalog.
    pub catalog: CatalogConfig,
    /// What URLs that users put in task inputs may reach.
    pub outbound: OutboundConfig,
    /// `text` or `json` logs.
    pub log_format: LogFormat,
    /// A tracing filter: `info`, `warn`, `taskgate_server=debug,info`, …
    pub log_level: String,
}

impl Config {
    /// The top-level keys, for telling configuration variables from other
    /// `TASKGATE_*` variables in the environment.
    pub const KEYS: [&'static str; 28] = [
        "listen",
        "database_url",
        "redis_url",
        "redis_failure",
        "instance_id",
        "sync_wait_ms",
        "shutdown_grace_ms",
        "task_lease_ms",
        "task_retention_days",
        "test_task_retention_days",
        "max_body_bytes",
        "workers",
        "test_workers",
        "auth_failures_per_minute",
        "trusted_proxies",
        "client_ip_header",
        "http",
        "limits",
        "metrics_token",
        "database",
        "dashboard",
        "plans",
        "default_plan",
        "providers",
        "catalog",
        "outbound",
        "log_format",
        "log_level",
    ];
}

impl PlanLimits {
    /// What an account whose plan was removed from the configuration is held
    /// to: no request accepted, one task at a time (the strictest, not none).
    pub const REMOVED: PlanLimits = PlanLimits {
        per_minute: Some(0),
        per_day: Some(0),
        max_running_tasks: Some(1),
        max_running_test_tasks: Some(1),
    };

    /// The limits of `plan`, or [`PlanLimits::REMOVED`].
    pub fn of(plans: &BTreeMap<PlanName, PlanLimits>, plan: &PlanName) -> PlanLimits {
        plans.get(plan).copied().unwrap_or(Self::REMOVED)
    }

    /// The cap of an account's running tasks of `mode` (`None`: no cap).
    /// Test mode's, unless set, is a quarter of the live cap, at least 2;
    /// under no live cap, no test cap either (test tasks are then held only
    /// by `test_workers`, shared by turns with other accounts' test tasks).
    pub fn running_cap(&self, mode: Mode) -> Option<u32> {
        match mode {
            Mode::Live => self.max_running_tasks,
            Mode::Test => self
                .max_running_test_tasks
                .or(self.max_running_tasks.map(|live| (live / 4).max(2))),
        }
    }
}

impl Config {
    /// Workers of test-mode tasks: `test_workers`, or a quarter of
    /// `workers`, at least 2.
    pub fn test_workers(&self) -> usize {
        self.test_workers.unwrap_or((self.workers / 4).max(2))
    }
}

/// `[http]`: what a connection may take of the server.
/// `[dashboard]`: how long sessions last, how sign-in is limited, and whether
/// cookies are marked `Secure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DashboardConfig {
    /// A session unused for this long ends.
    pub session_idle_minutes: u64,
    /// A session ends this long after sign-in, however it is used.
    pub session_max_hours: u64,
    /// Failed sign-ins per minute from one address, and for one email,
    /// before sign-in is refused for a while (`0`: no limit).
    pub sign_in_failures_per_minute: u32,
    /// Mark cookies `Secure` always. Without it they are `Secure` when the
    /// request came over HTTPS (from a trusted proxy: `X-Forwarded-Proto`).
    pub secure_cookies: bool,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        Self {
            session_idle_minutes: 120,
            session_max_hours: 12,
            sign_in_failures_per_minute: 10,
            secure_cookies: false,
        }
    }
}

/// `[limits]`: server-sent event streams (`GET /api/v1/tasks/{id}/stream`
/// and `stream: true` on `/openai/v1/chat/completions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Streams one key may hold open at once on one instance; one more is
    /// `429 too_many_streams`.
    pub max_streams_per_key: u32,
    /// A stream is ended (with an `expired` event) this long after it
    /// opened, so a forgotten reader cannot hold its slot forever.
    pub stream_max_seconds: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_streams_per_key: 32,
            stream_max_seconds: 3_600,
        }
    }
}

/// A credential read from the file or a `TASKGATE_*` variable. Only a string
/// is taken: figment reads `TASKGATE_X=1234` as a number, and serde's own
/// error would then quote it, so the refusal here names no value.
fn secret_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    struct Visitor;
    const NOT_A_STRING: &str = "must be a string (in an environment variable, a value that \
         reads as a number, true/false, a list or a table must be put in double quotes)";
    impl<'v> serde::de::Visitor<'v> for Visitor {
        type Value = Option<Secret>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if v.is_empty() {
                return Err(E::custom("must not be empty (leave it out for none)"));
            }
            Ok(Some(Secret::new(v)))
        }
        // The defaults' `None`, as figment hands it back.
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'v>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_seq<A: serde::de::SeqAccess<'v>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(serde::de::Error::custom(NOT_A_STRING))
        }
        fn visit_map<A: serde::de::MapAccess<'v>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(serde::de::Error::custom(NOT_A_STRING))
        }
    }
    d.deserialize_any(Visitor)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// A request's headers must arrive within this (and so must the next
    /// request's on a kept-alive connection); else the connection is closed.
    pub header_read_timeout_ms: u64,
    /// A request's whole body must arrive within this; else `408
    /// request_timeout` and the connection is closed.
    pub body_read_timeout_ms: u64,
    /// A kept-alive connection with no request in flight for this long is
    /// closed.
    pub idle_timeout_ms: u64,
    /// Open connections at most; more wait to be accepted.
    pub max_connections: usize,
    /// Bytes of large request bodies (over 256 KiB) read and parsed at once
    /// at most; a body past it waits its turn up to half the body time-out,
    /// then gets 503 `server_busy`.
    pub max_large_body_bytes_in_flight: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 10_000,
            max_large_body_bytes_in_flight: 64 * 1024 * 1024,
        }
    }
}

/// `[database]`: the PostgreSQL connection pool (SQLite keeps its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connections per instance at most.
    pub max_connections: u32,
    /// Longest wait for a connection; past it the request is answered 503
    /// `storage_unavailable`, so a database that is down is never a hang.
    pub acquire_timeout_ms: u64,
    /// Longest run of one statement before PostgreSQL cancels it.
    pub statement_timeout_ms: u64,
    /// Times a batch of task writes that met a serialization failure or a
    /// deadlock is run again before its writes fail.
    pub retries: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        let d = taskgate_store::PoolOptions::default();
        Self {
            max_connections: d.max_connections,
            acquire_timeout_ms: d.acquire_timeout.as_millis() as u64,
            statement_timeout_ms: d.statement_timeout.as_millis() as u64,
            retries: d.retries,
        }
    }
}

impl DatabaseConfig {
    pub fn pool(&self) -> taskgate_store::PoolOptions {
        taskgate_store::PoolOptions {
            max_connections: self.max_connections,
            acquire_timeout: std::time::Duration::from_millis(self.acquire_timeout_ms),
            statement_timeout: std::time::Duration::from_millis(self.statement_timeout_ms),
            retries: self.retries,
        }
    }
}

/// `log_format`: how log lines are written on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// What the rate limiter does when Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisFailure {
    /// Refuse requests with 503 `rate_limiter_unavailable`.
    Closed,
    /// Serve requests without limits, logging an error.
    Open,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLimits {
    /// Requests in any rolling 60 s; absent means unlimited.
    pub per_minute: Option<u32>,
    /// Requests per UTC day; absent means unlimited.
    pub per_day: Option<u32>,
    /// Live tasks of one account running at once, over every instance
    /// sharing the store; more wait `queued`. Absent means no cap.
    #[serde(default)]
    pub max_running_tasks: Option<u32>,
    /// Test-mode tasks of one account running at once, counted and queued
    /// apart from its live ones, so that they never delay a live task.
    /// Absent: see [`PlanLimits::running_cap`].
    #[serde(default)]
    pub max_running_test_tasks: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// API slugs to leave out of the catalog.
    pub disabled: Vec<String>,
    /// APIs by slug: an entry with a `provider` declares an upstream API;
    /// an entry without one overrides a built-in or default API.
    pub apis: BTreeMap<String, ApiOverride>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiOverride {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Price per call in USD, as a decimal string, e.g. `"0.0002"`.
    pub price_per_call_usd: Option<Nanos>,
    /// Price per 1,000 input tokens in USD (with `output_price_per_1k_tokens_usd`).
    pub input_price_per_1k_tokens_usd: Option<Nanos>,
    /// Price per 1,000 output tokens in USD.
    pub output_price_per_1k_tokens_usd: Option<Nanos>,
    pub timeout_ms: Option<u64>,
    /// The kind (`chat`, `embedding`, `image_generation`, `transcription`,
    /// `classification`) of a declared API.
    pub kind: Option<Kind>,
    /// The provider (a `[providers.NAME]`) that serves a declared API.
    pub provider: Option<String>,
    /// The provider's model.
    pub model: Option<String>,
    /// Weight of the primary target among `deployments` (default 1).
    pub weight: Option<u32>,
    /// More deployments sharing the traffic with the primary target, by weight.
    pub deployments: Vec<TargetConfig>,
    /// Targets tried in order when the deployments fail.
    pub fallbacks: Vec<TargetConfig>,
    /// How an `http` provider serves this API.
    pub http: Option<HttpApiConfig>,
    /// The keys of the input's `options` clients may send (`["*"]`: any).
    /// Default: those of the kind that do not change the upstream's price.
    pub allowed_options: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboundConfig {
    /// Networks (CIDR) that user-supplied URLs may reach although they are
    /// not public, e.g. `["10.20.0.0/16"]`. Empty by default.
    pub allow_networks: Vec<Cidr>,
    /// Largest file fetched from a user-supplied URL.
    pub max_fetch_bytes: usize,
    /// Deadline of such a fetch.
    pub fetch_timeout_ms: u64,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        Self {
            allow_networks: Vec::new(),
            max_fetch_bytes: 25 * 1024 * 1024,
            fetch_timeout_ms: 30_000,
        }
    }
}

/// A plan name of the defaults (valid by construction).
fn plan(name: &str) -> PlanName {
    PlanName::parse(name).unwrap_or_else(|e| unreachable!("{e}"))
}

impl Default for Config {
    fn default() -> Self {
        let mut plans = BTreeMap::new();
        plans.insert(
            plan("free"),
            PlanLimits {
                per_minute: Some(60),
                per_day: Some(1_000),
                max_running_tasks: Some(8),
                max_running_test_tasks: None,
            },
        );
        plans.insert(
            plan("pro"),
            PlanLimits {
                per_minute: Some(300),
                per_day: Some(50_000),
                max_running_tasks: Some(64),
                max_running_test_tasks: None,
            },
        );
        plans.insert(
            plan("enterprise"),
            PlanLimits {
                per_minute: None,
                per_day: None,
                max_running_tasks: None,
                max_running_test_tasks: None,
            },
        );
        Self {
            listen: "127.0.0.1:8080".to_owned(),
            database_url: "sqlite://data/taskgate.db".to_owned(),
            redis_url: None,
            redis_failure: RedisFailure::Closed,
            instance_id: None,
            sync_wait_ms: 30_000,
            shutdown_grace_ms: 30_000,
            task_retention_days: 0,
            test_task_retention_days: 7,
            task_lease_ms: 30_000,
            max_body_bytes: 10 * 1024 * 1024,
            workers: 256,
            test_workers: None,
            auth_failures_per_minute: 30,
            trusted_proxies: Vec::new(),
            client_ip_header: Default::default(),
            http: HttpConfig::default(),
            limits: LimitsConfig::default(),
            metrics_token: None,
            database: DatabaseConfig::default(),
            dashboard: DashboardConfig::default(),
            plans,
            default_plan: plan("free"),
            providers: BTreeMap::new(),
            catalog: CatalogConfig::default(),
            outbound: OutboundConfig::default(),
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
        }
    }
}

/// `config: NAME must be from MIN to MAX (got V)` unless `value` is in range.
fn in_range(name: &str, value: u64, min: u64, max: u64) -> Result<(), String> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "config: {name} must be from {min} to {max} (got {value})"
        ))
    }
}

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

impl Config {
    /// Every number of the configuration within its range, so that none can
    /// make a request fail or the server panic. `0` is accepted only where it
    /// has a documented meaning (`sync_wait_ms`: answer 202 at once;
    /// `auth_failures_per_minute`: no limit; `max_retries`: no retry).
    fn check_numbers(&self) -> Result<(), String> {
        in_range("sync_wait_ms", self.sync_wait_ms, 0, HOUR_MS)?;
        in_range("shutdown_grace_ms", self.shutdown_grace_ms, 0, HOUR_MS)?;
        in_range(
            "task_retention_days",
            self.task_retention_days.into(),
            0,
            36_500,
        )?;
        in_range(
            "test_task_retention_days",
            self.test_task_retention_days.into(),
            0,
            36_500,
        )?;
        in_range("task_lease_ms", self.task_lease_ms, 3_000, HOUR_MS)?;
        in_range(
            "database.max_connections",
            self.database.max_connections.into(),
            1,
            10_000,
        )?;
        in_range(
            "database.acquire_timeout_ms",
            self.database.acquire_timeout_ms,
            100,
            HOUR_MS,
        )?;
        in_range(
            "database.statement_timeout_ms",
            self.database.statement_timeout_ms,
            100,
            DAY_MS,
        )?;
        in_range("database.retries", self.database.retries.into(), 0, 100)?;
        in_range("max_body_bytes", self.max_body_bytes as u64, 1024, 1 << 30)?;
        in_range("workers", self.workers as u64, 1, 100_000)?;
        if let Some(n) = self.test_workers {
            in_range("test_workers", n as u64, 1, 100_000)?;
        }
        in_range(
            "auth_failures_per_minute",
            self.auth_failures_per_minute.into(),
            0,
            1_000_000,
        )?;
        for (name, plan) in &self.plans {
            // Leaving a window out means unlimited; a present one admits something.
            if let Some(n) = plan.per_minute {
                in_range(
                    &format!("plans.{name}.per_minute"),
                    n.into(),
                    1,
                    u32::MAX.into(),
                )?;
            }
            if let Some(n) = plan.per_day {
                in_range(
                    &format!("plans.{name}.per_day"),
                    n.into(),
                    1,
                    u32::MAX.into(),
                )?;
            }
            if let Some(n) = plan.max_running_tasks {
                in_range(
                    &format!("plans.{name}.max_running_tasks"),
                    n.into(),
                    1,
                    1_000_000,
                )?;
            }
            if let Some(n) = plan.max_running_test_tasks {
                in_range(
                    &format!("plans.{name}.max_running_test_tasks"),
                    n.into(),
                    1,
                    1_000_000,
                )?;
            }
        }
        let h = &self.http;
        in_range(
            "http.header_read_timeout_ms",
            h.header_read_timeout_ms,
            100,
            HOUR_MS,
        )?;
        in_range(
            "http.body_read_timeout_ms",
            h.body_read_timeout_ms,
            100,
            DAY_MS,
        )?;
        in_range("http.idle_timeout_ms", h.idle_timeout_ms, 100, DAY_MS)?;
        in_range(
            "http.max_connections",
            h.max_connections as u64,
            1,
            1_000_000,
        )?;
        in_range(
            "http.max_large_body_bytes_in_flight",
            h.max_large_body_bytes_in_flight,
            1024 * 1024,
            1 << 40,
        )?;
        in_range(
            "limits.max_streams_per_key",
            self.limits.max_streams_per_key.into(),
            1,
            1_000_000,
        )?;
        in_range(
            "limits.stream_max_seconds",
            self.limits.stream_max_seconds,
            1,
            7 * 24 * 3_600,
        )?;
        let d = &self.dashboard;
        in_range(
            "dashboard.session_idle_minutes",
            d.session_idle_minutes,
            1,
            30 * 24 * 60,
        )?;
        in_range(
            "dashboard.session_max_hours",
            d.session_max_hours,
            1,
            90 * 24,
        )?;
        in_range(
            "dashboard.sign_in_failures_per_minute",
            d.sign_in_failures_per_minute.into(),
            0,
            1_000_000,
        )?;
        let o = &self.outbound;
        in_range(
            "outbound.max_fetch_bytes",
            o.max_fetch_bytes as u64,
            1,
            1 << 30,
        )?;
        in_range("outbound.fetch_timeout_ms", o.fetch_timeout_ms, 1, HOUR_MS)?;
        for (name, p) in &self.providers {
            let at = |field: &str| format!("providers.{name}.{field}");
            if let Some(v) = p.timeout_ms {
                in_range(&at("timeout_ms"), v, 1, DAY_MS)?;
            }
            if let Some(v) = p.max_retries {
                in_range(&at("max_retries"), v.into(), 0, 10)?;
            }
            if let Some(v) = p.breaker_failures {
                in_range(&at("breaker_failures"), v.into(), 1, 1_000_000)?;
            }
            if let Some(v) = p.breaker_cooldown_ms {
                in_range(&at("breaker_cooldown_ms"), v, 1, DAY_MS)?;
            }
        }
        for (slug, o) in &self.catalog.apis {
            let at = |field: &str| format!("catalog.apis.{slug}.{field}");
            if let Some(v) = o.timeout_ms {
                in_range(&at("timeout_ms"), v, 1, DAY_MS)?;
            }
            if let Some(v) = o.weight {
                in_range(&at("weight"), v.into(), 1, 1_000_000)?;
            }
            for (list, targets) in [("deployments", &o.deployments), ("fallbacks", &o.fallbacks)] {
                for (i, t) in targets.iter().enumerate() {
                    if let Some(v) = t.weight {
                        in_range(&at(&format!("{list}[{i}].weight")), v.into(), 1, 1_000_000)?;
                    }
                }
            }
            if let Some(v) = o
                .http
                .as_ref()
                .and_then(|h| h.job.as_ref())
                .and_then(|j| j.poll_interval_ms)
            {
                in_range(&at("http.job.poll_interval_ms"), v, 1, HOUR_MS)?;
            }
        }
        Ok(())
    }

    /// Checks what serde cannot: ranges and cross-field rules.
    pub fn validate(&self) -> Result<(), String> {
        if self.plans.is_empty() {
            return Err("config: at least one plan is needed".to_owned());
        }
        if !self.plans.contains_key(&self.default_plan) {
            return Err(format!(
                "config: default_plan {:?} is not a plan",
                self.default_plan
            ));
        }
        self.check_numbers()?;
        for (slug, o) in &self.catalog.apis {
            if o.price_per_call_usd.is_some()
                && (o.input_price_per_1k_tokens_usd.is_some()
                    || o.output_price_per_1k_tokens_usd.is_some())
            {
                return Err(format!(
                    "config: catalog.apis.{slug}: price per call and per 1K tokens cannot both be set"
                ));
            }
            if o.provider.is_none()
                && (o.kind.is_some()
                    || o.model.is_some()
                    || !o.deployments.is_empty()
                    || !o.fallbacks.is_empty()
                    || o.http.is_some())
            {
                return Err(format!(
                    "config: catalog.apis.{slug}: kind, model, deployments, fallbacks and http need a provider"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(change: impl FnOnce(&mut Config), setting: &str) {
        let mut c = Config::default();
        change(&mut c);
        let e = c.validate().expect_err(setting);
        assert!(e.contains(setting), "{e} does not name {setting}");
    }

    #[test]
    fn the_defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn numbers_out_of_range_refuse_to_start_naming_the_setting() {
        refused(|c| c.sync_wait_ms = u64::MAX, "sync_wait_ms");
        refused(|c| c.max_body_bytes = 10, "max_body_bytes");
        refused(|c| c.workers = 0, "workers");
        refused(
            |c| c.limits.max_streams_per_key = 0,
            "limits.max_streams_per_key",
        );
        refused(
            |c| c.limits.stream_max_seconds = 0,
            "limits.stream_max_seconds",
        );
        refused(|c| c.workers = usize::MAX, "workers");
        refused(
            |c| c.auth_failures_per_minute = u32::MAX,
            "auth_failures_per_minute",
        );
        refused(
            |c| {
                c.plans.values_mut().for_each(|p| p.per_minute = Some(0));
            },
            ".per_minute",
        );
        refused(
            |c| c.outbound.max_fetch_bytes = 0,
            "outbound.max_fetch_bytes",
        );
        refused(
            |c| c.outbound.fetch_timeout_ms = 0,
            "outbound.fetch_timeout_ms",
        );
        refused(
            |c| {
                c.catalog.apis.insert(
                    "sentiment".to_owned(),
                    ApiOverride {
                        timeout_ms: Some(0),
                        ..Default::default()
                    },
                );
            },
            "catalog.apis.sentiment.timeout_ms",
        );
        refused(
            |c| {
                c.catalog.apis.insert(
                    "sentiment".to_owned(),
                    ApiOverride {
                        timeout_ms: Some(u64::MAX),
                        ..Default::default()
                    },
                );
            },
            "catalog.apis.sentiment.timeout_ms",
        );
    }

    #[test]
    fn test_caps_default_to_a_quarter_of_the_live_cap_at_least_two() {
        let c = Config::default();
        let cap = |plan: &str, mode| c.plans[&plan.parse::<PlanName>().unwrap()].running_cap(mode);
        assert_eq!(cap("free", Mode::Live), Some(8));
        assert_eq!(cap("free", Mode::Test), Some(2));
        assert_eq!(cap("pro", Mode::Test), Some(16));
        assert_eq!(
            cap("enterprise", Mode::Test),
            None,
            "no live cap, no test cap"
        );
        let set = PlanLimits {
            max_running_test_tasks: Some(5),
            ..PlanLimits::REMOVED
        };
        assert_eq!(set.running_cap(Mode::Test), Some(5));
        assert_eq!(set.running_cap(Mode::Live), Some(1));
        assert_eq!(PlanLimits::REMOVED.running_cap(Mode::Test), Some(1));
        assert_eq!(c.test_workers(), 64);
        let small = Config {
            workers: 3,
            ..Default::default()
        };
        assert_eq!(small.test_workers(), 2);
        refused(
            |c| {
                c.plans
                    .values_mut()
                    .for_each(|p| p.max_running_test_tasks = Some(0));
            },
            ".max_running_test_tasks",
        );
        refused(|c| c.test_workers = Some(0), "test_workers");
        refused(
            |c| c.test_task_retention_days = 36_501,
            "test_task_retention_days",
        );
    }

    #[test]
    fn zero_means_off_where_documented() {
        let c = Config {
            sync_wait_ms: 0,
            auth_failures_per_minute: 0,
            test_task_retention_days: 0,
            ..Default::default()
        };
        c.validate().unwrap();
    }
}
