//! Service configuration. Every field has a default, so no file is needed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// `sqlite://PATH` (default `sqlite://data/taskgate.db`) or `postgres://…`.
    pub database_url: String,
    /// Reserved for the Redis rate-limit backend (scale-out).
    pub redis_url: Option<String>,
    /// Identifies this instance's running tasks in a shared store. Two live
    /// instances must not share one.
    pub instance_id: Option<String>,
    /// How long a sync POST /call waits before answering 202.
    pub sync_wait_ms: u64,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Tasks executed at once by this instance.
    pub workers: usize,
    /// Failed authentications per minute from one address before it gets 429.
    pub auth_failures_per_minute: u32,
    /// Plans by name.
    pub plans: BTreeMap<String, PlanLimits>,
    /// Plan of the `default` account created at first start.
    pub default_plan: String,
    /// Overrides and additions for the catalog.
    pub catalog: CatalogConfig,
    /// `text` or `json` logs.
    pub log_format: String,
    /// A tracing filter: `info`, `warn`, `taskgate_server=debug,info`, …
    pub log_level: String,
}

impl Config {
    /// The top-level keys, for telling configuration variables from other
    /// `TASKGATE_*` variables in the environment.
    pub const KEYS: [&'static str; 13] = [
        "listen",
        "database_url",
        "redis_url",
        "instance_id",
        "sync_wait_ms",
        "max_body_bytes",
        "workers",
        "auth_failures_per_minute",
        "plans",
        "default_plan",
        "catalog",
        "log_format",
        "log_level",
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLimits {
    /// Requests in any rolling 60 s; absent means unlimited.
    pub per_minute: Option<u32>,
    /// Requests per UTC day; absent means unlimited.
    pub per_day: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Built-in API slugs to leave out of the catalog.
    pub disabled: Vec<String>,
    /// Per-API overrides, by slug.
    pub apis: BTreeMap<String, ApiOverride>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiOverride {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Price per call in USD, as a decimal string, e.g. `"0.0002"`.
    pub price_per_call_usd: Option<String>,
    pub timeout_ms: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        let mut plans = BTreeMap::new();
        plans.insert(
            "free".to_owned(),
            PlanLimits {
                per_minute: Some(60),
                per_day: Some(1_000),
            },
        );
        plans.insert(
            "pro".to_owned(),
            PlanLimits {
                per_minute: Some(300),
                per_day: Some(50_000),
            },
        );
        plans.insert(
            "enterprise".to_owned(),
            PlanLimits {
                per_minute: None,
                per_day: None,
            },
        );
        Self {
            listen: "127.0.0.1:8080".to_owned(),
            database_url: "sqlite://data/taskgate.db".to_owned(),
            redis_url: None,
            instance_id: None,
            sync_wait_ms: 30_000,
            max_body_bytes: 10 * 1024 * 1024,
            workers: 256,
            auth_failures_per_minute: 30,
            plans,
            default_plan: "free".to_owned(),
            catalog: CatalogConfig::default(),
            log_format: "text".to_owned(),
            log_level: "info".to_owned(),
        }
    }
}

impl Config {
    /// Checks what serde cannot: cross-field rules.
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
        if self.workers == 0 {
            return Err("config: workers must be at least 1".to_owned());
        }
        if self.max_body_bytes < 1024 {
            return Err("config: max_body_bytes must be at least 1024".to_owned());
        }
        for (slug, o) in &self.catalog.apis {
            if let Some(p) = &o.price_per_call_usd {
                taskgate_core::money::parse_decimal(p, 9)
                    .map_err(|e| format!("config: catalog.apis.{slug}.price_per_call_usd: {e}"))?;
            }
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err("config: log_format must be text or json".to_owned());
        }
        Ok(())
    }
}
