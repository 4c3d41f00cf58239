//! Spans as an OTLP `ExportTraceServiceRequest`, in protobuf's wire format
//! (opentelemetry-proto's `collector/trace/v1` and `trace/v1`). Written by
//! hand: the messages are few and only ever encoded here, which a
//! generated-code crate and its build step would not repay.

use taskgate_core::trace::{SpanData, Value};

/// Protobuf's wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.tag(field, VARINT);
            self.varint(v);
        }
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, FIXED64);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, v: u32) {
        self.tag(field, FIXED32);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn double(&mut self, field: u32, v: f64) {
        self.tag(field, FIXED64);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A nested message, written by `f` in place: its length, unknown until
    /// it is written, goes in a byte kept for it, and a length that needs
    /// more makes room by moving the message along (one copy, where a
    /// buffer of its own per message cost an allocation and a copy at every
    /// level of nesting: most of a traced call's export).
    fn message(&mut self, field: u32, f: impl FnOnce(&mut Writer)) {
        self.tag(field, LEN);
        let at = self.0.len();
        self.0.push(0);
        f(self);
        let mut len = (self.0.len() - at - 1) as u64;
        if len < 0x80 {
            self.0[at] = len as u8;
            return;
        }
        let mut prefix = [0u8; 10];
        let mut n = 0;
        while len >= 0x80 {
            prefix[n] = (len as u8) | 0x80;
            len >>= 7;
            n += 1;
        }
        prefix[n] = len as u8;
        self.0.splice(at..=at, prefix[..=n].iter().copied());
    }
}

/// `common.v1.AnyValue`.
fn any_value(w: &mut Writer, v: &Value) {
    match v {
        Value::Str(s) => w.bytes(1, s.as_bytes()),
        Value::Bool(b) => {
            w.tag(2, VARINT);
            w.varint(u64::from(*b));
        }
        Value::Int(n) => {
            w.tag(3, VARINT);
            w.varint(*n as u64);
        }
        Value::Double(d) => w.double(4, *d),
        Value::Strs(list) => w.message(5, |arr| {
            for s in list {
                arr.message(1, |item| item.bytes(1, s.as_bytes()));
            }
        }),
    }
}

/// `common.v1.KeyValue`.
fn key_value(w: &mut Writer, field: u32, key: &str, v: &Value) {
    w.message(field, |kv| {
        kv.string(1, key);
        kv.message(2, |any| any_value(any, v));
    });
}

/// What describes the process that made the spans.
pub struct Resource {
    pub attributes: Vec<(String, Value)>,
}

/// `trace.v1.Span`.
fn span(w: &mut Writer, s: &SpanData) {
    w.bytes(1, &s.context.trace_id.0);
    w.bytes(2, &s.context.span_id.0);
    if let Some(state) = &s.context.state {
        w.string(3, state);
    }
    if let Some(parent) = s.parent {
        w.bytes(4, &parent.0);
    }
    w.string(5, &s.name);
    w.uint(6, s.kind as u64);
    w.fixed64(7, s.start_ns);
    w.fixed64(8, s.end_ns);
    for (k, v) in &s.attributes {
        key_value(w, 9, k, v);
    }
    if let Some(error) = &s.error {
        // Status: message 2, code 3 (2 = ERROR).
        w.message(15, |st| {
            st.string(2, error);
            st.uint(3, 2);
        });
    }
    // Flags: the W3C flags, and whether the parent is known to be remote
    // (bit 8) and is (bit 9).
    let mut flags = u32::from(s.context.sampled) | 0x100;
    if s.parent_remote {
        flags |= 0x200;
    }
    w.fixed32(16, flags);
}

/// An `ExportTraceServiceRequest` of `spans`, all of one resource and one
/// instrumentation scope (this server).
pub fn encode(resource: &Resource, spans: &[SpanData]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256 + spans.len() * 320));
    w.message(1, |rs| {
        rs.message(1, |r| {
            for (k, v) in &resource.attributes {
                key_value(r, 1, k, v);
            }
        });
        rs.message(2, |ss| {
            ss.message(1, |scope| {
                scope.string(1, "taskgate");
                scope.string(2, env!("CARGO_PKG_VERSION"));
            });
            for s in spans {
                ss.message(2, |m| span(m, s));
            }
        });
    });
    w.0
}

#[cfg(test)]
mod tests {
    use taskgate_core::trace::{SpanContext, SpanId, SpanKind, TraceId};

    use super::*;

    #[test]
    fn varints_and_a_span_are_written_as_protobuf_says() {
        let mut w = Writer::default();
        w.varint(300);
        assert_eq!(w.0, [0xac, 0x02]);
        let s = SpanData {
            context: SpanContext {
                trace_id: TraceId([1; 16]),
                span_id: SpanId([2; 8]),
                sampled: true,
                state: None,
            },
            parent: None,
            parent_remote: false,
            name: "n".to_owned(),
            kind: SpanKind::Server,
            start_ns: 1,
            end_ns: 2,
            attributes: vec![("k", Value::Int(-1))],
            error: None,
        };
        let mut w = Writer::default();
        span(&mut w, &s);
        let b = &w.0;
        // trace_id: field 1, LEN, 16 bytes.
        assert_eq!(&b[..2], &[0x0a, 16]);
        assert_eq!(&b[2..18], &[1; 16]);
        // span_id: field 2, LEN, 8 bytes.
        assert_eq!(&b[18..20], &[0x12, 8]);
        // name: field 5.
        assert_eq!(&b[28..31], &[0x2a, 1, b'n']);
        // kind: field 6, varint 2.
        assert_eq!(&b[31..33], &[0x30, 2]);
        // start: field 7, fixed64.
        assert_eq!(b[33], 0x39);
        assert_eq!(&b[34..42], &1u64.to_le_bytes());
        // A negative int is ten bytes of varint.
        assert!(b.windows(2).any(|p| p == [0x18, 0xff]));
    }

    /// A nested message's length is its varint, however long the message.
    #[test]
    fn nested_lengths_are_their_varints() {
        for size in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let body = vec![7u8; size];
            let mut w = Writer::default();
            w.message(3, |m| {
                m.message(1, |inner| inner.0.extend_from_slice(&body));
            });
            let mut inner = Writer::default();
            inner.bytes(1, &body);
            let mut expected = Writer::default();
            expected.bytes(3, &inner.0);
            assert_eq!(w.0, expected.0, "a message of {size} bytes");
        }
    }
}
