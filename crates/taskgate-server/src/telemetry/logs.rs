//! Log lines on stderr: the usual text, or (`log_format = "json"`) one flat
//! JSON object a line, as log shippers expect: `timestamp`, `level`,
//! `target`, `message`, the event's fields at the top level, `request_id`
//! on every line logged while a request is served, and `trace_id` and
//! `span_id` while a traced span is current.

use std::fmt::{self, Write as _};
use std::io;

use taskgate_core::trace::Scope;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::config::LogFormat;

/// Installs the process's logger: `level` is a tracing filter (`info`,
/// `taskgate_server=debug,info`, …; a bad one falls back to `info`).
pub fn init(format: LogFormat, level: &str) {
    init_with(format, level, io::stderr);
}

fn init_with<W>(format: LogFormat, level: &str, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    // Installed once; a second call (tests) keeps the first.
    let _ = match format {
        LogFormat::Json => builder.event_format(FlatJson).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The JSON line format.
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writer.write_str(&line(event, OffsetDateTime::now_utc()))
    }
}

/// An event's line, newline included.
fn line(event: &Event<'_>, at: OffsetDateTime) -> String {
    let meta = event.metadata();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut out = String::with_capacity(256);
    out.push('{');
    let timestamp = at.format(&Rfc3339).unwrap_or_default();
    pair(&mut out, "timestamp", &json_string(&timestamp));
    pair(&mut out, "level", &json_string(meta.level().as_str()));
    pair(&mut out, "target", &json_string(meta.target()));
    pair(
        &mut out,
        "message",
        &json_string(fields.message.as_deref().unwrap_or_default()),
    );
    let mut written: Vec<&str> = Vec::with_capacity(3);
    Scope::with_current(|scope| {
        let Some(scope) = scope else { return };
        if let Some(id) = scope.request_id {
            pair(&mut out, "request_id", &json_string(&id.to_string()));
            written.push("request_id");
        }
        if let Some(span) = &scope.span {
            pair(
                &mut out,
                "trace_id",
                &json_string(&span.trace_id.to_string()),
            );
            pair(&mut out, "span_id", &json_string(&span.span_id.to_string()));
            written.extend(["trace_id", "span_id"]);
        }
    });
    for (name, value) in &fields.rest {
        // A field never hides the line's own keys; one of the scope's keys
        // the scope did not write (a request id logged after its request)
        // takes its place.
        let own = ["timestamp", "level", "target", "message"].contains(&name.as_str());
        if own || written.contains(&name.as_str()) {
            pair(&mut out, &format!("field.{name}"), value);
        } else {
            pair(&mut out, name, value);
        }
    }
    out.push_str("}\n");
    out
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Appends `"key":value` (`value` already JSON).
fn pair(out: &mut String, key: &str, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    out.push_str(&json_string(key));
    out.push(':');
    out.push_str(value);
}

/// An event's message and its other fields, as JSON values.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    rest: Vec<(String, String)>,
}

impl Fields {
    fn put(&mut self, field: &Field, json: String) {
        self.rest.push((field.name().to_owned(), json));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.put(field, json_string(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.to_string());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        let json = serde_json::Number::from_f64(value)
            .map_or_else(|| json_string(&value.to_string()), |n| n.to_string());
        self.put(field, json);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        if field.name() == "message" {
            self.message = Some(text);
        } else {
            self.put(field, json_string(&text));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::Value;
    use taskgate_core::RequestId;
    use taskgate_core::trace::{SpanContext, SpanId, TraceId};

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Lines;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[tokio::test]
    async fn json_lines_are_flat_and_carry_the_request_and_trace() {
        let lines = Lines::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(lines.clone())
            .event_format(FlatJson)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        tracing::warn!(
            code = "x\"y",
            attempts = 3u64,
            ok = true,
            level = "mine",
            "it \"broke\""
        );
        let request_id = RequestId::new();
        let span = SpanContext {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled: true,
            state: None,
        };
        let scope = Scope {
            span: Some(span.clone()),
            request_id: Some(request_id),
        };
        scope
            .run(async { tracing::info!(task = %"task_1", "serving") })
            .await;
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let parsed: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(parsed.len(), 2, "{text}");
        let first = &parsed[0];
        assert_eq!(first["level"], "WARN");
        assert_eq!(first["message"], "it \"broke\"");
        assert_eq!(first["code"], "x\"y");
        assert_eq!(first["attempts"], 3);
        assert_eq!(first["ok"], true);
        assert_eq!(
            first["field.level"], "mine",
            "a field never hides the line's own"
        );
        assert!(first["target"].as_str().unwrap().contains("logs"));
        assert!(first.get("fields").is_none(), "flat");
        assert!(first.get("request_id").is_none(), "no request outside one");
        time::OffsetDateTime::parse(first["timestamp"].as_str().unwrap(), &Rfc3339).unwrap();
        let second = &parsed[1];
        assert_eq!(second["message"], "serving");
        assert_eq!(second["task"], "task_1");
        assert_eq!(second["request_id"], request_id.to_string());
        assert_eq!(second["trace_id"], span.trace_id.to_string());
        assert_eq!(second["span_id"], span.span_id.to_string());
    }
}
