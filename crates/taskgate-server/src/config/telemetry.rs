//! `[telemetry]`: traces exported over OTLP. Off until an endpoint is set,
//! here or by the standard `OTEL_*` variables, which take precedence over
//! the file (as `TASKGATE_*` variables do): see [`TelemetryConfig::apply_otel_env`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with a protobuf body, to `{endpoint}/v1/traces`.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/gRPC (`TraceService/Export`), over HTTP/2.
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's base URL (`http://localhost:4318`; for gRPC
    /// `http://localhost:4317`). Traces go to `{otlp_endpoint}/v1/traces`
    /// over HTTP. Unset (and no `otlp_traces_endpoint`): tracing is off.
    pub otlp_endpoint: Option<String>,
    /// The full URL traces are sent to, used as it is
    /// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); wins over `otlp_endpoint`.
    pub otlp_traces_endpoint: Option<String>,
    pub otlp_protocol: OtlpProtocol,
    /// Headers sent with every export (a collector's API key, say). Never
    /// logged.
    pub otlp_headers: BTreeMap<String, String>,
    /// The share of new traces recorded, 0.0 to 1.0.
    pub sample_ratio: f64,
    /// Whether a caller's `traceparent` decides for its trace (the
    /// `parentbased_*` samplers, the default); else `sample_ratio` decides
    /// every trace.
    pub parent_based: bool,
    /// `service.name` of the spans.
    pub service_name: String,
    /// More attributes of the resource (`OTEL_RESOURCE_ATTRIBUTES`).
    pub resource_attributes: BTreeMap<String, String>,
    /// The longest a span waits before its batch is sent
    /// (`OTEL_BSP_SCHEDULE_DELAY`).
    pub export_interval_ms: u64,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`).
    pub export_timeout_ms: u64,
    /// Spans held waiting for export; past this, new spans are dropped
    /// (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub max_queue: usize,
    /// Spans sent in one export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub max_batch: usize,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            otlp_traces_endpoint: None,
            otlp_protocol: OtlpProtocol::HttpProtobuf,
            otlp_headers: BTreeMap::new(),
            sample_ratio: 1.0,
            parent_based: true,
            service_name: "taskgate".to_owned(),
            resource_attributes: BTreeMap::new(),
            export_interval_ms: 5_000,
            export_timeout_ms: 10_000,
            max_queue: 2_048,
            max_batch: 512,
        }
    }
}

/// Splits `k=v,k2=v2` (the `OTEL_*_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`
/// form, values percent-encoded).
fn pairs(text: &str, name: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("{name}: {item:?} is not key=value"));
        };
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={}", s.trim().replace('+', "%2B")).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        out.insert(decode(k), decode(v));
    }
    Ok(out)
}

impl TelemetryConfig {
    /// Whether traces are exported at all.
    pub fn enabled(&self) -> bool {
        self.traces_url().is_some()
    }

    /// Where traces are sent.
    pub fn traces_url(&self) -> Option<String> {
        if let Some(url) = &self.otlp_traces_endpoint {
            return Some(url.clone());
        }
        let base = self.otlp_endpoint.as_deref()?.trim_end_matches('/');
        Some(match self.otlp_protocol {
            OtlpProtocol::HttpProtobuf => format!("{base}/v1/traces"),
            OtlpProtocol::Grpc => base.to_owned(),
        })
    }

    /// Takes the standard variables (`env` reads one): the OTLP endpoint,
    /// protocol, headers and time-out (the `TRACES_` ones before the
    /// general ones), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
    /// `OTEL_TRACES_SAMPLER` and `_ARG`, the batch processor's `OTEL_BSP_*`,
    /// and `OTEL_SDK_DISABLED=true` (tracing off whatever else is set).
    pub fn apply_otel_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let either = |specific: &str, general: &str| {
            get(specific)
                .map(|v| (specific.to_owned(), v))
                .or_else(|| get(general).map(|v| (general.to_owned(), v)))
        };
        if let Some(v) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            self.otlp_traces_endpoint = Some(v.trim().to_owned());
        }
        if let Some(v) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            self.otlp_endpoint = Some(v.trim().to_owned());
        }
        if let Some((name, v)) = either(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ) {
            self.otlp_protocol = OtlpProtocol::parse(&v)
                .ok_or_else(|| format!("{name}: {v:?} is not supported (http/protobuf or grpc)"))?;
        }
        if let Some((name, v)) = either(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ) {
            self.otlp_headers.extend(pairs(&v, &name)?);
        }
        if let Some((name, v)) = either(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ) {
            self.export_timeout_ms = number(&name, &v)?;
        }
        if let Some(v) = get("OTEL_SERVICE_NAME") {
            self.service_name = v.trim().to_owned();
        }
        if let Some(v) = get("OTEL_RESOURCE_ATTRIBUTES") {
            let attrs = pairs(&v, "OTEL_RESOURCE_ATTRIBUTES")?;
            if let Some(name) = attrs.get("service.name")
                && get("OTEL_SERVICE_NAME").is_none()
            {
                self.service_name = name.clone();
            }
            self.resource_attributes.extend(attrs);
        }
        if let Some(v) = get("OTEL_BSP_SCHEDULE_DELAY") {
            self.export_interval_ms = number("OTEL_BSP_SCHEDULE_DELAY", &v)?;
        }
        if let Some(v) = get("OTEL_BSP_MAX_QUEUE_SIZE") {
            self.max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", &v)? as usize;
        }
        if let Some(v) = get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
            self.max_batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &v)? as usize;
        }
        if let Some(sampler) = get("OTEL_TRACES_SAMPLER") {
            let arg = || -> Result<f64, String> {
                match get("OTEL_TRACES_SAMPLER_ARG") {
                    None => Ok(1.0),
                    Some(a) => a
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|r| (0.0..=1.0).contains(r))
                        .ok_or_else(|| {
                            format!("OTEL_TRACES_SAMPLER_ARG: {a:?} is not a ratio from 0 to 1")
                        }),
                }
            };
            (self.parent_based, self.sample_ratio) = match sampler.trim() {
                "always_on" => (false, 1.0),
                "always_off" => (false, 0.0),
                "traceidratio" => (false, arg()?),
                "parentbased_always_on" => (true, 1.0),
                "parentbased_always_off" => (true, 0.0),
                "parentbased_traceidratio" => (true, arg()?),
                other => {
                    return Err(format!(
                        "OTEL_TRACES_SAMPLER: {other:?} is not supported (always_on, always_off, \
                         traceidratio, parentbased_always_on, parentbased_always_off, \
                         parentbased_traceidratio)"
                    ));
                }
            };
        }
        if get("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            self.otlp_endpoint = None;
            self.otlp_traces_endpoint = None;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), String> {
        for (name, url) in [
            ("telemetry.otlp_endpoint", &self.otlp_endpoint),
            ("telemetry.otlp_traces_endpoint", &self.otlp_traces_endpoint),
        ] {
            if let Some(url) = url {
                let parsed = url::Url::parse(url)
                    .map_err(|e| format!("config: {name}: {url:?} is not a URL ({e})"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(format!("config: {name}: only http and https URLs"));
                }
            }
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err("config: telemetry.sample_ratio must be from 0.0 to 1.0".to_owned());
        }
        if !(1..=600_000).contains(&self.export_timeout_ms) {
            return Err("config: telemetry.export_timeout_ms must be 1 to 600000".to_owned());
        }
        if !(1..=600_000).contains(&self.export_interval_ms) {
            return Err("config: telemetry.export_interval_ms must be 1 to 600000".to_owned());
        }
        if !(1..=1_000_000).contains(&self.max_queue)
            || !(1..=self.max_queue).contains(&self.max_batch)
        {
            return Err(
                "config: telemetry.max_queue must be 1 to 1000000 and max_batch 1 to max_queue"
                    .to_owned(),
            );
        }
        for (k, v) in &self.otlp_headers {
            if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(v).is_err()
            {
                // The value may be a secret: only the name is said.
                return Err(format!(
                    "config: telemetry.otlp_headers: {k:?} is not a valid header"
                ));
            }
        }
        Ok(())
    }
}

fn number(name: &str, v: &str) -> Result<u64, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{name}: {v:?} is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<TelemetryConfig, String> {
        let mut c = TelemetryConfig::default();
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        c.apply_otel_env(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))?;
        Ok(c)
    }

    #[test]
    fn the_standard_variables_are_read() {
        assert!(!TelemetryConfig::default().enabled());
        let c = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).unwrap();
        assert_eq!(
            c.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        let c = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://other:9/traces",
            ),
        ])
        .unwrap();
        assert_eq!(c.traces_url().as_deref(), Some("http://other:9/traces"));
        let c = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-api-key=abc%3D%3D, team = core",
            ),
            ("OTEL_SERVICE_NAME", "gateway"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ])
        .unwrap();
        assert_eq!(c.otlp_protocol, OtlpProtocol::Grpc);
        assert_eq!(c.traces_url().as_deref(), Some("http://collector:4317"));
        assert_eq!(c.otlp_headers["x-api-key"], "abc==");
        assert_eq!(c.otlp_headers["team"], "core");
        assert_eq!(c.service_name, "gateway");
        assert_eq!(c.resource_attributes["deployment.environment"], "prod");
        assert!(!c.parent_based);
        assert!((c.sample_ratio - 0.25).abs() < 1e-9);
        let off = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ])
        .unwrap();
        assert!(!off.enabled());
        assert!(with(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]).is_err());
        assert!(with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]).is_err());
        assert!(
            with(&[
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "2")
            ])
            .is_err()
        );
    }

    #[test]
    fn bad_settings_are_refused_without_their_values() {
        let mut c = TelemetryConfig {
            otlp_endpoint: Some("ftp://x".to_owned()),
            ..TelemetryConfig::default()
        };
        assert!(c.validate().is_err());
        c.otlp_endpoint = Some("http://127.0.0.1:4318".to_owned());
        assert!(c.validate().is_ok());
        c.otlp_headers
            .insert("authorization".to_owned(), "secret\nvalue".to_owned());
        let e = c.validate().unwrap_err();
        assert!(!e.contains("secret"), "{e}");
    }
}
