//! Service configuration. Every field has a default, so no file is needed.
//!
//! A setting is read into the type its users take (an address block, a
//! URL, a price) as the configuration is deserialized, so that a bad value
//! refuses to start naming the setting, and nothing reads its text again
//! later. What serde cannot check alone (ranges, rules over several
//! fields) is [`Config::validate`].
//!
//! `Config` and its top-level settings are here. Each `[section]` of the
//! file has a module of its own (`http`, `limits`, `database`, `dashboard`,
//! `catalog`, `outbound`); `plans` holds a plan's limits, `redis_url` the
//! Redis URL, `secret` how a credential is read, and `validate` the ranges
//! and the rules over several fields.

mod catalog;
mod dashboard;
mod database;
mod http;
mod limits;
mod outbound;
mod plans;
mod redis_url;
mod secret;
mod telemetry;
mod validate;
mod webhooks;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use taskgate_core::{PlanName, RunnerId};
use taskgate_providers::upstream::fetch::Cidr;
use taskgate_providers::upstream::{ProviderConfig, Secret};

pub use catalog::{ApiOverride, CatalogConfig};
pub use dashboard::DashboardConfig;
pub use database::DatabaseConfig;
pub use http::HttpConfig;
pub use limits::LimitsConfig;
pub use outbound::OutboundConfig;
pub use plans::PlanLimits;
pub use redis_url::RedisUrl;
use secret::secret_string;
pub use telemetry::{OtlpProtocol, TelemetryConfig};
pub use webhooks::{Span, WebhooksConfig};

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
    /// Audit log events older than this many days are deleted (with the
    /// other purges, every ten minutes); the hash of the newest deleted is
    /// kept as the checkpoint verification starts from. 0 keeps them all.
    pub audit_retention_days: u32,
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
    /// `[webhooks]`: how task events are delivered.
    pub webhooks: WebhooksConfig,
    /// `[telemetry]`: traces over OTLP.
    pub telemetry: TelemetryConfig,
    /// `text` or `json` logs.
    pub log_format: LogFormat,
    /// A tracing filter: `info`, `warn`, `taskgate_server=debug,info`, …
    pub log_level: String,
}

impl Config {
    /// The top-level keys, for telling configuration variables from other
    /// `TASKGATE_*` variables in the environment.
    pub const KEYS: [&'static str; 31] = [
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
        "audit_retention_days",
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
        "webhooks",
        "telemetry",
        "log_format",
        "log_level",
    ];
}

impl Config {
    /// Workers of test-mode tasks: `test_workers`, or a quarter of
    /// `workers`, at least 2.
    pub fn test_workers(&self) -> usize {
        self.test_workers.unwrap_or((self.workers / 4).max(2))
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
            audit_retention_days: 0,
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
            webhooks: WebhooksConfig::default(),
            telemetry: TelemetryConfig::default(),
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
        }
    }
}
