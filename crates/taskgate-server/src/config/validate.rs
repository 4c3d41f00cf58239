//! What serde cannot check as the configuration is read: every number
//! within its range, and the rules over several fields.

use super::Config;

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
        in_range(
            "audit_retention_days",
            self.audit_retention_days.into(),
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
        self.webhooks.validate()?;
        self.telemetry.validate()?;
        for (slug, o) in &self.catalog.apis {
            if o.price_per_call_usd.is_some()
                && (o.input_price_per_1k_tokens_usd.is_some()
                    || o.output_price_per_1k_tokens_usd.is_some())
            {
                return Err(format!(
                    "config: catalog.apis.{slug}: price per call and per 1K tokens cannot both be set"
                ));
            }
            if o.price_per_call_usd.is_some() && o.cached_input_price_per_1k_tokens_usd.is_some() {
                return Err(format!(
                    "config: catalog.apis.{slug}: cached_input_price_per_1k_tokens_usd prices tokens \
                     and cannot be set with price_per_call_usd"
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
    use crate::config::ApiOverride;

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
    fn test_mode_settings_out_of_range_refuse_to_start() {
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
    fn a_cached_input_price_beside_a_price_per_call_refuses_to_start() {
        let usd = |s: &str| Some(taskgate_core::Nanos::parse_usd(s).unwrap());
        refused(
            |c| {
                c.catalog.apis.insert(
                    "sentiment".to_owned(),
                    ApiOverride {
                        price_per_call_usd: usd("0.001"),
                        cached_input_price_per_1k_tokens_usd: usd("0.0001"),
                        ..Default::default()
                    },
                );
            },
            "catalog.apis.sentiment: cached_input_price_per_1k_tokens_usd",
        );
        // With token prices it is valid.
        let mut c = Config::default();
        c.catalog.apis.insert(
            "openai-chat".to_owned(),
            ApiOverride {
                input_price_per_1k_tokens_usd: usd("0.001"),
                output_price_per_1k_tokens_usd: usd("0.002"),
                cached_input_price_per_1k_tokens_usd: usd("0.0001"),
                ..Default::default()
            },
        );
        c.validate().unwrap();
    }

    #[test]
    fn a_cached_input_price_is_read_like_the_other_prices() {
        let read = |price: &str| {
            serde_json::from_str::<crate::config::CatalogConfig>(&format!(
                r#"{{"apis": {{"openai-chat": {{"cached_input_price_per_1k_tokens_usd": {price}}}}}}}"#
            ))
        };
        let c = read("\"0.000075\"").unwrap();
        assert_eq!(
            c.apis["openai-chat"].cached_input_price_per_1k_tokens_usd,
            Some(taskgate_core::Nanos(75_000))
        );
        // A number (which would pass through a float), a negative or a
        // malformed price is refused as the other prices are.
        for bad in ["0.000075", "\"-0.1\"", "\"abc\"", "\"0.0000000001\""] {
            assert!(read(bad).is_err(), "{bad}");
        }
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
