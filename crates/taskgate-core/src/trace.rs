//! Traces: the W3C trace context (`traceparent`, `tracestate`), the span a
//! piece of work is in (a task-local [`Scope`]), and spans recorded into a
//! [`SpanSink`]. Exporting them (OTLP) is the server's; nothing here does
//! I/O.
//!
//! Tracing off is a `None` [`Tracer`]: nothing is made, sampled or recorded.
//! A span not sampled still has a context, so that the decision travels
//! downstream in `traceparent`, but records nothing.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::RequestId;

/// A trace's id: 16 bytes, never all zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

/// Lower-case hex of `bytes` into `out` (twice their length).
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0xf)];
    }
}

/// Written at once, not a formatting call a byte (ids are written into
/// every propagated request and every exported log line).
fn hex(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut buf = [0u8; 32];
    let out = &mut buf[..bytes.len() * 2];
    hex_into(bytes, out);
    f.write_str(std::str::from_utf8(out).map_err(|_| fmt::Error)?)
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    // Lower case only, as the W3C format says.
    if s.len() != N * 2 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

impl TraceId {
    pub fn random() -> Self {
        loop {
            let id: [u8; 16] = rand::random();
            if id != [0; 16] {
                return TraceId(id);
            }
        }
    }
}

impl SpanId {
    pub fn random() -> Self {
        loop {
            let id: [u8; 8] = rand::random();
            if id != [0; 8] {
                return SpanId(id);
            }
        }
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex(&self.0, f)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex(&self.0, f)
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex(&self.0, f)
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex(&self.0, f)
    }
}

/// Where a span is: its trace, its id, whether it is sampled, and the
/// vendors' `tracestate` carried along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
    pub state: Option<Arc<str>>,
}

/// `tracestate` is at most 32 members of at most 256 characters each; a
/// longer one is dropped rather than cut (the W3C rules).
const MAX_TRACESTATE: usize = 32 * 257;

impl SpanContext {
    /// A caller's context from its `traceparent` (and `tracestate`) headers;
    /// `None` when the header is not a valid version-00 (or later) one.
    pub fn from_headers(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let t = traceparent.trim();
        let mut parts = t.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let version: [u8; 1] = unhex(version)?;
        // Version ff is invalid; a future version may append fields, but
        // version 00 has exactly four.
        if version[0] == 0xff || (version[0] == 0 && parts.next().is_some()) {
            return None;
        }
        let trace_id = TraceId(unhex(trace)?);
        let span_id = SpanId(unhex(span)?);
        let flags: [u8; 1] = unhex(flags)?;
        if trace_id.0 == [0; 16] || span_id.0 == [0; 8] {
            return None;
        }
        let state = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.is_ascii())
            .map(Arc::from);
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
            state,
        })
    }

    /// The `traceparent` header that makes the receiver's work a child of
    /// this span.
    pub fn traceparent(&self) -> String {
        // "00-" trace "-" span "-" flags: 55 bytes.
        let mut buf = [b'-'; 55];
        buf[..2].copy_from_slice(b"00");
        hex_into(&self.trace_id.0, &mut buf[3..35]);
        hex_into(&self.span_id.0, &mut buf[36..52]);
        buf[53..].copy_from_slice(if self.sampled { b"01" } else { b"00" });
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// A new span's context in this span's trace.
    pub fn child(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: SpanId::random(),
            sampled: self.sampled,
            state: self.state.clone(),
        }
    }
}

/// What the work running now belongs to: the span it is in (when tracing is
/// on) and the request it serves (while one is served). Log lines and
/// upstream requests read it.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub span: Option<SpanContext>,
    pub request_id: Option<RequestId>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

impl Scope {
    /// The scope of the work running now, if it has one.
    pub fn current() -> Option<Scope> {
        SCOPE.try_with(Scope::clone).ok()
    }

    /// The span the work running now is in.
    pub fn current_span() -> Option<SpanContext> {
        SCOPE.try_with(|s| s.span.clone()).ok().flatten()
    }

    /// Reads the current scope without copying it.
    pub fn with_current<R>(f: impl FnOnce(Option<&Scope>) -> R) -> R {
        let mut f = Some(f);
        match SCOPE.try_with(|s| (f.take().expect("called once"))(Some(s))) {
            Ok(r) => r,
            Err(_) => (f.take().expect("not called"))(None),
        }
    }

    /// Runs `work` in this scope. Not an `async fn`: one would lay out
    /// `work` twice in its future (the argument and the scope's copy), and a
    /// future awaiting it carries that size for as long as it waits.
    pub fn run<F: Future>(self, work: F) -> impl Future<Output = F::Output> {
        SCOPE.scope(self, work)
    }

    /// This scope with `span` as its span (the request id kept).
    pub fn with_span(&self, span: Option<SpanContext>) -> Scope {
        Scope {
            span,
            request_id: self.request_id,
        }
    }
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A span's kind (OTLP's `SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
    Strs(Vec<String>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Int(i64::from(n))
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Value::Int(i64::from(n))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Self {
        Value::Strs(v)
    }
}

/// A span that has ended, as a sink receives it.
#[derive(Debug, Clone)]
pub struct SpanData {
    pub context: SpanContext,
    pub parent: Option<SpanId>,
    /// Whether the parent came from another process (`traceparent`).
    pub parent_remote: bool,
    pub name: String,
    pub kind: SpanKind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// `Some` when the span failed: its description.
    pub error: Option<String>,
}

/// Where ended spans go (the server's OTLP exporter). `record` must not
/// block: a sink that cannot keep up drops spans.
pub trait SpanSink: Send + Sync + 'static {
    fn record(&self, span: SpanData);
}

/// How root spans are sampled (`OTEL_TRACES_SAMPLER`): children follow
/// their parent's decision when the sampler is parent-based.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// The share of new traces sampled, 0.0 to 1.0.
    pub ratio: f64,
    /// Whether a caller's decision (`traceparent`'s flag) is followed.
    pub parent_based: bool,
}

impl Sampler {
    fn samples(&self, trace_id: TraceId) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        if self.ratio <= 0.0 {
            return false;
        }
        // The trace id's low 8 bytes against the ratio (the SDKs'
        // TraceIdRatioBased): every service with the same ratio decides
        // alike for the same trace.
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id.0[8..]);
        let x = u64::from_be_bytes(low) >> 1;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bound = (self.ratio * (1u64 << 63) as f64) as u64;
        x < bound
    }
}

/// Makes spans and hands the ended ones to its sink.
#[derive(Clone)]
pub struct Tracer {
    sink: Arc<dyn SpanSink>,
    sampler: Sampler,
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("sampler", &self.sampler)
            .finish_non_exhaustive()
    }
}

impl Tracer {
    pub fn new(sink: Arc<dyn SpanSink>, sampler: Sampler) -> Self {
        Tracer { sink, sampler }
    }

    /// A span whose parent is a caller's (`remote`), or a new trace's root.
    pub fn root(
        &self,
        name: impl Into<String>,
        kind: SpanKind,
        remote: Option<&SpanContext>,
    ) -> ActiveSpan {
        let context = match remote {
            Some(p) => SpanContext {
                sampled: if self.sampler.parent_based {
                    p.sampled
                } else {
                    self.sampler.samples(p.trace_id)
                },
                ..p.child()
            },
            None => {
                let trace_id = TraceId::random();
                SpanContext {
                    trace_id,
                    span_id: SpanId::random(),
                    sampled: self.sampler.samples(trace_id),
                    state: None,
                }
            }
        };
        self.start(name, kind, context, remote.map(|p| (p.span_id, true)))
    }

    /// A span under `parent` (of this process).
    pub fn child(
        &self,
        name: impl Into<String>,
        kind: SpanKind,
        parent: &SpanContext,
    ) -> ActiveSpan {
        self.start(name, kind, parent.child(), Some((parent.span_id, false)))
    }

    /// A span under the current scope's span, or a new trace's root.
    pub fn in_current(&self, name: impl Into<String>, kind: SpanKind) -> ActiveSpan {
        match Scope::current_span() {
            Some(parent) => self.child(name, kind, &parent),
            None => self.root(name, kind, None),
        }
    }

    fn start(
        &self,
        name: impl Into<String>,
        kind: SpanKind,
        context: SpanContext,
        parent: Option<(SpanId, bool)>,
    ) -> ActiveSpan {
        ActiveSpan {
            sink: context.sampled.then(|| self.sink.clone()),
            data: SpanData {
                context,
                parent: parent.map(|p| p.0),
                parent_remote: parent.is_some_and(|p| p.1),
                name: name.into(),
                kind,
                start_ns: now_ns(),
                end_ns: 0,
                attributes: Vec::new(),
                error: None,
            },
        }
    }
}

/// A span being recorded; [`ActiveSpan::end`] records it. One that is
/// dropped without `end` is not recorded.
#[derive(Debug)]
pub struct ActiveSpan {
    /// `None` when the span is not sampled: it records nothing.
    sink: Option<Arc<dyn SpanSink>>,
    data: SpanData,
}

impl fmt::Debug for dyn SpanSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SpanSink")
    }
}

impl ActiveSpan {
    pub fn context(&self) -> &SpanContext {
        &self.data.context
    }

    /// Whether what is set on it is kept (it is sampled).
    pub fn is_recording(&self) -> bool {
        self.sink.is_some()
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if self.sink.is_some() {
            self.data.attributes.push((key, value.into()));
        }
    }

    /// Sets `key` from a value made only when the span records.
    pub fn set_with<V: Into<Value>>(&mut self, key: &'static str, value: impl FnOnce() -> V) {
        if self.sink.is_some() {
            self.data.attributes.push((key, value().into()));
        }
    }

    /// Marks the span failed.
    pub fn fail(&mut self, description: impl Into<String>) {
        if self.sink.is_some() {
            self.data.error = Some(description.into());
        }
    }

    /// Sets when it started (a task's span starts at its creation).
    pub fn started_at(&mut self, ns: u64) {
        self.data.start_ns = ns;
    }

    pub fn end(mut self) {
        if let Some(sink) = self.sink.take() {
            self.data.end_ns = now_ns().max(self.data.start_ns);
            sink.record(self.data);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn traceparent_round_trips_and_bad_ones_are_refused() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = SpanContext::from_headers(header, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(c.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id.to_string(), "00f067aa0ba902b7");
        assert!(c.sampled);
        assert_eq!(c.state.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(c.traceparent(), header);
        let unsampled = SpanContext::from_headers(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            None,
        )
        .unwrap();
        assert!(!unsampled.sampled);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(SpanContext::from_headers(bad, None).is_none(), "{bad}");
        }
        // A later version may add fields.
        assert!(
            SpanContext::from_headers(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more",
                None
            )
            .is_some()
        );
    }

    #[derive(Default)]
    struct Kept(Mutex<Vec<SpanData>>);

    impl SpanSink for Kept {
        fn record(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
    }

    #[test]
    fn sampling_follows_the_ratio_and_the_parent() {
        let kept = Arc::new(Kept::default());
        let all = Tracer::new(
            kept.clone(),
            Sampler {
                ratio: 1.0,
                parent_based: true,
            },
        );
        let mut root = all.root("root", SpanKind::Server, None);
        root.set("a", 1i64);
        let child = all.child("child", SpanKind::Client, root.context());
        assert_eq!(child.context().trace_id, root.context().trace_id);
        child.end();
        root.end();
        let spans = kept.0.lock().unwrap().clone();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].parent, Some(spans[1].context.span_id));
        assert!(!spans[0].parent_remote);
        assert_eq!(spans[1].attributes, vec![("a", Value::Int(1))]);

        // A caller that did not sample: followed, nothing recorded.
        let remote = SpanContext::from_headers(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            None,
        )
        .unwrap();
        let s = all.root("x", SpanKind::Server, Some(&remote));
        assert!(!s.is_recording());
        assert_eq!(s.context().trace_id, remote.trace_id);
        s.end();
        assert_eq!(kept.0.lock().unwrap().len(), 2);

        let none = Tracer::new(
            kept.clone(),
            Sampler {
                ratio: 0.0,
                parent_based: false,
            },
        );
        assert!(!none.root("y", SpanKind::Server, None).is_recording());
        let half = Sampler {
            ratio: 0.5,
            parent_based: false,
        };
        let sampled = (0..4000)
            .filter(|_| half.samples(TraceId::random()))
            .count();
        assert!((1600..2400).contains(&sampled), "{sampled}");
    }

    #[tokio::test]
    async fn the_scope_is_the_tasks() {
        assert!(Scope::current().is_none());
        let span = SpanContext {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled: true,
            state: None,
        };
        let scope = Scope {
            span: Some(span.clone()),
            request_id: None,
        };
        let seen = scope.run(async { Scope::current_span() }).await;
        assert_eq!(seen, Some(span));
    }
}
