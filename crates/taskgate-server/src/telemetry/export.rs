//! The span exporter: ended spans wait in a bounded buffer and are sent in
//! batches by one task, one export at a time. Recording a span never waits:
//! with the buffer full the span is dropped. It wakes the sender only for a
//! batch's first span and when a batch is full, not for each span (a wake-up
//! a span was a tenth of a traced call's cost). A collector that is down,
//! refuses or never answers costs the batch (after the export's time-out)
//! and a warning at most once a minute, nothing else.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use taskgate_core::trace::{SpanData, SpanSink};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::otlp::{self, Resource};
use crate::config::{OtlpProtocol, TelemetryConfig};

const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// The longest the last batches may take at a stop.
const FINAL_FLUSH: Duration = Duration::from_secs(3);
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The sink the tracer records into.
pub struct Exporter {
    spans: Mutex<Vec<SpanData>>,
    /// A batch was begun, or filled.
    ready: Notify,
    max_queue: usize,
    max_batch: usize,
    dropped: Arc<AtomicU64>,
}

impl SpanSink for Exporter {
    fn record(&self, span: SpanData) {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        if spans.len() >= self.max_queue {
            drop(spans);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("taskgate_trace_spans_dropped_total").increment(1);
            return;
        }
        spans.push(span);
        let waiting = spans.len();
        drop(spans);
        if waiting == 1 || waiting == self.max_batch {
            self.ready.notify_one();
        }
    }
}

impl Exporter {
    /// Up to `max_batch` of the spans waiting, the oldest first.
    fn take(&self, batch: &mut Vec<SpanData>) {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        let n = spans.len().min(self.max_batch);
        batch.extend(spans.drain(..n));
    }

    fn waiting(&self) -> usize {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Where and how batches are sent.
struct Target {
    client: reqwest::Client,
    url: String,
    /// The URL as logs may show it (no user or password).
    shown: String,
    protocol: OtlpProtocol,
    headers: HeaderMap,
    resource: Resource,
}

/// Starts the exporter of `config` (which must be enabled); it sends what
/// is left when `stop` is cancelled, then ends.
pub fn start(
    config: &TelemetryConfig,
    resource: Resource,
    stop: CancellationToken,
) -> anyhow::Result<(Arc<Exporter>, JoinHandle<()>)> {
    let Some(url) = config.traces_url() else {
        anyhow::bail!("telemetry: no OTLP endpoint");
    };
    let timeout = Duration::from_millis(config.export_timeout_ms);
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none());
    builder = match config.otlp_protocol {
        OtlpProtocol::HttpProtobuf => builder.http1_only(),
        // Plain-text gRPC is HTTP/2 without a TLS handshake to agree on it.
        OtlpProtocol::Grpc if url.starts_with("http://") => builder.http2_prior_knowledge(),
        OtlpProtocol::Grpc => builder,
    };
    let client = builder.build()?;
    let mut headers = HeaderMap::new();
    for (k, v) in &config.otlp_headers {
        let (Ok(k), Ok(mut v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) else {
            anyhow::bail!("telemetry.otlp_headers: {k:?} is not a valid header");
        };
        v.set_sensitive(true);
        headers.insert(k, v);
    }
    let url = match config.otlp_protocol {
        OtlpProtocol::HttpProtobuf => url,
        OtlpProtocol::Grpc => format!("{}{GRPC_PATH}", url.trim_end_matches('/')),
    };
    let shown = match url::Url::parse(&url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "the collector".to_owned(),
    };
    let dropped = Arc::new(AtomicU64::new(0));
    let exporter = Arc::new(Exporter {
        spans: Mutex::new(Vec::new()),
        ready: Notify::new(),
        max_queue: config.max_queue,
        max_batch: config.max_batch,
        dropped: dropped.clone(),
    });
    let target = Target {
        client,
        url,
        shown,
        protocol: config.otlp_protocol,
        headers,
        resource,
    };
    let batching = Batching {
        exporter: exporter.clone(),
        interval: Duration::from_millis(config.export_interval_ms),
    };
    let task = tokio::spawn(batching.run(target, stop));
    Ok((exporter, task))
}

struct Batching {
    exporter: Arc<Exporter>,
    interval: Duration,
}

/// Failures since the last warning, said at most once a minute.
#[derive(Default)]
struct Warnings {
    last: Option<Instant>,
    failed: u64,
    error: String,
}

impl Warnings {
    fn failed(&mut self, error: String, dropped: &AtomicU64, shown: &str) {
        self.failed += 1;
        self.error = error;
        if self.last.is_some_and(|t| t.elapsed() < WARN_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        tracing::warn!(
            collector = %shown,
            failed_exports = self.failed,
            dropped_spans = dropped.swap(0, Ordering::Relaxed),
            error = %self.error,
            "traces could not be exported; their spans are dropped"
        );
        self.failed = 0;
    }
}

impl Batching {
    async fn run(self, target: Target, stop: CancellationToken) {
        let exporter = &self.exporter;
        let mut warnings = Warnings::default();
        let mut batch = Vec::with_capacity(exporter.max_batch);
        loop {
            // A batch's first span; then more until it is full or the first
            // has waited its interval.
            if exporter.waiting() == 0 {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    _ = exporter.ready.notified() => {}
                }
            }
            let due = tokio::time::Instant::now() + self.interval;
            while exporter.waiting() < exporter.max_batch {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep_until(due) => break,
                    _ = exporter.ready.notified() => {}
                }
            }
            exporter.take(&mut batch);
            if !batch.is_empty() {
                if let Err(e) = target.send(&batch).await {
                    warnings.failed(e, &exporter.dropped, &target.shown);
                }
                batch.clear();
            }
            if stop.is_cancelled() {
                break;
            }
        }
        // At a stop: what is waiting, within a bound.
        let flush = async {
            loop {
                exporter.take(&mut batch);
                if batch.is_empty() {
                    return;
                }
                if let Err(e) = target.send(&batch).await {
                    warnings.failed(e, &exporter.dropped, &target.shown);
                    return;
                }
                batch.clear();
            }
        };
        let _ = tokio::time::timeout(FINAL_FLUSH, flush).await;
    }
}

impl Target {
    async fn send(&self, spans: &[SpanData]) -> Result<(), String> {
        let message = otlp::encode(&self.resource, spans);
        let request = self.client.post(&self.url).headers(self.headers.clone());
        match self.protocol {
            OtlpProtocol::HttpProtobuf => {
                let r = request
                    .header(CONTENT_TYPE, "application/x-protobuf")
                    .body(message)
                    .send()
                    .await
                    .map_err(describe)?;
                if r.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("the collector answered {}", r.status()))
                }
            }
            OtlpProtocol::Grpc => {
                // A gRPC message: not compressed (0), its length, itself.
                let mut framed = Vec::with_capacity(message.len() + 5);
                framed.push(0);
                framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                framed.extend_from_slice(&message);
                let r = request
                    .header(CONTENT_TYPE, "application/grpc")
                    .header("te", "trailers")
                    .body(framed)
                    .send()
                    .await
                    .map_err(describe)?;
                if !r.status().is_success() {
                    return Err(format!("the collector answered HTTP {}", r.status()));
                }
                let status_of = |h: &HeaderMap| {
                    h.get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                // A failure may come in the headers alone; success comes in
                // the trailers.
                let mut status = status_of(r.headers());
                if status.is_none() {
                    let response: axum::http::Response<reqwest::Body> = r.into();
                    let collected = response
                        .into_body()
                        .collect()
                        .await
                        .map_err(|e| format!("the collector's answer broke off: {e}"))?;
                    status = collected.trailers().and_then(status_of);
                }
                match status.as_deref() {
                    Some("0") => Ok(()),
                    Some(code) => Err(format!("the collector answered grpc-status {code}")),
                    None => Err("the collector's answer had no grpc-status".to_owned()),
                }
            }
        }
    }
}

/// A send's failure, without the URL (which may hold credentials).
fn describe(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer within the export time-out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.without_url().to_string()
    }
}
