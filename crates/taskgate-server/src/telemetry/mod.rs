//! What the server tells about itself beyond metrics: traces over OTLP
//! (`export.rs`, `otlp.rs`), the spans of a request (`spans.rs`) and JSON
//! log lines (`logs.rs`).
//!
//! Off (no endpoint) there is no tracer: no span is made, nothing is
//! sampled, no header is read or sent.

mod export;
pub mod logs;
mod otlp;
pub mod spans;

use parking_lot::Mutex;
use taskgate_core::trace::{Sampler, Tracer, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::TelemetryConfig;
use spans::TaskSpans;

/// The tracer, and the exporter that sends its spans.
pub struct Telemetry {
    /// `None`: tracing is off.
    pub tracer: Option<Tracer>,
    /// Whether requests run in a [`taskgate_core::trace::Scope`]: when
    /// traced, or when log lines carry their request's id (JSON logs).
    pub scoped: bool,
    /// Tasks' spans waiting for a worker.
    pub tasks: TaskSpans,
    exporter: Mutex<Option<JoinHandle<()>>>,
    stop: CancellationToken,
}

impl Telemetry {
    pub fn off(scoped: bool) -> Self {
        Telemetry {
            tracer: None,
            scoped,
            tasks: TaskSpans::default(),
            exporter: Mutex::new(None),
            stop: CancellationToken::new(),
        }
    }

    /// Starts exporting to `config`'s collector, if it names one;
    /// `instance` is this instance's id (`service.instance.id`). Requests
    /// are scoped when traced or when `json_logs`.
    pub fn start(
        config: &TelemetryConfig,
        instance: &str,
        json_logs: bool,
    ) -> anyhow::Result<Self> {
        if !config.enabled() {
            return Ok(Telemetry::off(json_logs));
        }
        let mut attributes: Vec<(String, Value)> = vec![
            (
                "service.name".to_owned(),
                config.service_name.clone().into(),
            ),
            (
                "service.version".to_owned(),
                env!("CARGO_PKG_VERSION").into(),
            ),
            ("service.instance.id".to_owned(), instance.into()),
            ("telemetry.sdk.name".to_owned(), "taskgate".into()),
            ("telemetry.sdk.language".to_owned(), "rust".into()),
            (
                "telemetry.sdk.version".to_owned(),
                env!("CARGO_PKG_VERSION").into(),
            ),
        ];
        for (k, v) in &config.resource_attributes {
            if !attributes.iter().any(|(have, _)| have == k) {
                attributes.push((k.clone(), v.clone().into()));
            }
        }
        let stop = CancellationToken::new();
        let (sink, task) = export::start(config, otlp::Resource { attributes }, stop.clone())?;
        let tracer = Tracer::new(
            sink,
            Sampler {
                ratio: config.sample_ratio,
                parent_based: config.parent_based,
            },
        );
        tracing::info!(
            protocol = ?config.otlp_protocol,
            ratio = config.sample_ratio,
            "traces are exported over OTLP"
        );
        Ok(Telemetry {
            tracer: Some(tracer),
            scoped: true,
            tasks: TaskSpans::default(),
            exporter: Mutex::new(Some(task)),
            stop,
        })
    }

    /// Sends the spans still queued (within a few seconds) and stops.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let task = self.exporter.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
