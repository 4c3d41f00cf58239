//! Prometheus metrics: requests by route and status, tasks by api and status,
//! upstream attempts by provider, model and outcome.
//!
//! One recorder per process (the `metrics` crate's rule), installed on first
//! use; several servers in one test process share it.
//!
//! A histogram keeps each value recorded until it is folded into its buckets,
//! which the exporter does when `/metrics` is read or at an upkeep. Nothing
//! else does it, so without a scraper an instance kept every request's
//! duration for ever (8 bytes a value, a few values a request). A thread of
//! the recorder's does the upkeep every [`UPKEEP_EVERY`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use parking_lot::RwLock;
use taskgate_core::{ApiSlug, Mode, TaskStatus};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often recorded values are folded into the histograms' buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(1);

/// Upkeeps done so far.
static UPKEEPS: AtomicU64 = AtomicU64::new(0);

const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("taskgate_http_request_duration_seconds".to_owned()),
                    &LATENCY_BUCKETS,
                )
                .ok()?
                .set_buckets_for_metric(
                    Matcher::Full("taskgate_upstream_attempt_duration_seconds".to_owned()),
                    &LATENCY_BUCKETS,
                )
                .ok()?;
            match builder.install_recorder() {
                Ok(handle) => {
                    let kept = handle.clone();
                    let upkeep = std::thread::Builder::new()
                        .name("taskgate-metrics".to_owned())
                        .spawn(move || {
                            loop {
                                std::thread::sleep(UPKEEP_EVERY);
                                kept.run_upkeep();
                                UPKEEPS.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    if let Err(e) = upkeep {
                        tracing::warn!(error = %e, "metrics upkeep not started");
                    }
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
            }
        })
        .as_ref()
}

pub fn render() -> String {
    install().map(|h| h.render()).unwrap_or_default()
}

/// The `method` label: any token is a valid HTTP method, so only the
/// standard ones are named and every other is `other`, keeping the number of
/// series bounded whatever clients send.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Records one answered request. `route` is the route table's pattern, or
/// `unmatched`: a closed set, like the methods and the status codes.
pub fn record_request(method: &Method, route: &str, status: StatusCode, elapsed: Duration) {
    let method = method_label(method);
    let series = REQUESTS.get(&(method, status.as_u16()), [route, ""], || {
        let labels = [
            ("method", method.to_owned()),
            ("route", route.to_owned()),
            ("status", status.as_u16().to_string()),
        ];
        Series {
            total: metrics::counter!("taskgate_http_requests_total", &labels),
            seconds: metrics::histogram!("taskgate_http_request_duration_seconds", &labels),
        }
    });
    series.total.increment(1);
    series.seconds.record(elapsed.as_secs_f64());
}

pub fn record_task(api: &ApiSlug, mode: Mode, status: TaskStatus) {
    metrics::counter!(
        "taskgate_tasks_total",
        "api" => api.to_string(),
        "mode" => mode.as_str(),
        "status" => status.as_str()
    )
    .increment(1);
}

/// One attempt at an upstream provider (built-in and sandbox work is not an
/// upstream attempt and is not counted here).
pub fn record_attempt(a: &taskgate_providers::Attempt) {
    if a.provider == taskgate_providers::builtin::PROVIDER_NAME || a.provider == "sandbox" {
        return;
    }
    let outcome = a.outcome.as_str();
    let series = ATTEMPTS.get(&outcome, [&a.provider, &a.target], || {
        let labels = [
            ("provider", a.provider.clone()),
            ("model", a.target.clone()),
            ("outcome", outcome.to_owned()),
        ];
        Series {
            total: metrics::counter!("taskgate_upstream_attempts_total", &labels),
            seconds: metrics::histogram!("taskgate_upstream_attempt_duration_seconds", &labels),
        }
    });
    series.total.increment(1);
    series.seconds.record(a.duration_ms as f64 / 1000.0);
}

/// A count and a histogram of durations with the same labels.
#[derive(Clone)]
struct Series {
    total: metrics::Counter,
    seconds: metrics::Histogram,
}

/// The series of each label set, made once and kept: asking the recorder for
/// them on every request built their labels' strings and looked the two up
/// in its maps, about 5k instructions a request and as many an attempt
/// (bench/RESULTS.md). Looked up by the label values themselves, without
/// building anything: first the closed part (`K`: the method and the status,
/// the outcome), then up to two strings (the route; the provider and the
/// model).
///
/// Nothing is kept until the recorder is installed (a handle made before it
/// counts nowhere), and at most [`Cache::MAX`] label sets are: past that the
/// recorder is asked each time, as before, so no label a client could vary
/// grows memory.
struct Cache<K> {
    by: RwLock<HashMap<K, Names>>,
    len: AtomicUsize,
}

impl<K: std::hash::Hash + Eq + Copy> Cache<K> {
    const MAX: usize = 4096;

    fn new() -> Self {
        Self {
            by: RwLock::new(HashMap::new()),
            len: AtomicUsize::new(0),
        }
    }

    fn get(&self, key: &K, [a, b]: [&str; 2], make: impl FnOnce() -> Series) -> Series {
        if let Some(series) = self
            .by
            .read()
            .get(key)
            .and_then(|m| m.get(a))
            .and_then(|m| m.get(b))
        {
            return series.clone();
        }
        let series = make();
        if HANDLE.get().is_some_and(Option::is_some) && self.len.load(Ordering::Relaxed) < Self::MAX
        {
            let mut by = self.by.write();
            let under = by.entry(*key).or_default().entry(a.to_owned()).or_default();
            if !under.contains_key(b) {
                under.insert(b.to_owned(), series.clone());
                self.len.fetch_add(1, Ordering::Relaxed);
            }
        }
        series
    }
}

/// By method and status, then route.
static REQUESTS: LazyLock<Cache<(&'static str, u16)>> = LazyLock::new(Cache::new);

/// By outcome, then provider and model.
static ATTEMPTS: LazyLock<Cache<&'static str>> = LazyLock::new(Cache::new);

/// Series by two strings.
type Names = HashMap<String, HashMap<String, Series>>;

/// One attempt at a webhook delivery: `outcome` is `succeeded`, `failed`
/// (its receiver answered otherwise, or did not answer) or `gone` (410).
pub fn record_webhook_attempt(outcome: &'static str, elapsed: Duration) {
    let labels = [("outcome", outcome)];
    metrics::counter!("taskgate_webhook_attempts_total", &labels).increment(1);
    metrics::histogram!("taskgate_webhook_attempt_duration_seconds", &labels)
        .record(elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values recorded and never scraped are folded into their buckets by
    /// the upkeep thread (a histogram kept each of them otherwise), and still
    /// count when `/metrics` is read.
    #[test]
    fn histograms_are_kept_up_without_a_scrape() {
        install().expect("the recorder installs");
        let before = UPKEEPS.load(Ordering::Relaxed);
        for _ in 0..1_000 {
            metrics::histogram!("taskgate_upkeep_test_seconds").record(0.01);
        }
        let deadline = std::time::Instant::now() + 5 * UPKEEP_EVERY;
        while UPKEEPS.load(Ordering::Relaxed) < before + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "no upkeep ran within {:?}",
                5 * UPKEEP_EVERY
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = render();
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix("taskgate_upkeep_test_seconds_count "))
            .expect("the histogram is rendered");
        assert_eq!(count.trim(), "1000");
    }

    /// The kept series count what the recorder would: every request and
    /// attempt, each under its own labels, however often its series is
    /// reused.
    #[test]
    fn kept_series_count_every_record_under_its_labels() {
        install().expect("the recorder installs");
        for _ in 0..3 {
            record_request(
                &Method::GET,
                "/kept/{id}",
                StatusCode::OK,
                Duration::from_millis(1),
            );
        }
        record_request(
            &Method::GET,
            "/kept/{id}",
            StatusCode::NOT_FOUND,
            Duration::ZERO,
        );
        let attempt = |model: &str, outcome| taskgate_core::Attempt {
            provider: "kept-provider".to_owned(),
            target: model.to_owned(),
            started_at: taskgate_core::Timestamp::UNIX_EPOCH,
            duration_ms: 5,
            outcome,
            http_status: None,
        };
        for _ in 0..2 {
            record_attempt(&attempt("m-1", taskgate_core::AttemptOutcome::Succeeded));
        }
        record_attempt(&attempt("m-2", taskgate_core::AttemptOutcome::Succeeded));
        record_attempt(&attempt("m-1", taskgate_core::AttemptOutcome::Failed));
        let text = render();
        let value = |prefix: &str, labels: &[&str]| -> String {
            text.lines()
                .find(|l| l.starts_with(prefix) && labels.iter().all(|x| l.contains(x)))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap_or_else(|| panic!("no {prefix} {labels:?} in\n{text}"))
                .to_owned()
        };
        let route = "route=\"/kept/{id}\"";
        assert_eq!(
            value("taskgate_http_requests_total{", &[route, "status=\"200\""]),
            "3"
        );
        assert_eq!(
            value("taskgate_http_requests_total{", &[route, "status=\"404\""]),
            "1"
        );
        assert_eq!(
            value(
                "taskgate_http_request_duration_seconds_count{",
                &[route, "status=\"200\""]
            ),
            "3"
        );
        let ok = "outcome=\"succeeded\"";
        let m1 = "model=\"m-1\"";
        assert_eq!(value("taskgate_upstream_attempts_total{", &[m1, ok]), "2");
        assert_eq!(
            value("taskgate_upstream_attempts_total{", &["model=\"m-2\"", ok]),
            "1"
        );
        assert_eq!(
            value(
                "taskgate_upstream_attempts_total{",
                &[m1, "outcome=\"failed\""]
            ),
            "1"
        );
        assert_eq!(
            value(
                "taskgate_upstream_attempt_duration_seconds_count{",
                &[m1, ok]
            ),
            "2"
        );
    }

    #[test]
    fn made_up_methods_share_one_label() {
        assert_eq!(method_label(&Method::POST), "POST");
        for m in ["FOO", "get", "X-1", "PROPFIND"] {
            let method = Method::from_bytes(m.as_bytes()).unwrap();
            assert_eq!(method_label(&method), "other", "{m}");
        }
    }
}
