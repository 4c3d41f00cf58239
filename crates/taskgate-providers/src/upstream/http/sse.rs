//! Server-Sent Events: decoding a stream of bytes into events, and reading
//! a streamed answer to its end.

use super::{Answer, Conn, UpstreamError};

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Splits a byte stream into Server-Sent Events (the WHATWG rules: lines
/// end with LF, CRLF or CR; `data:` lines join with LF; a blank line ends an
/// event; comments start with `:`).
#[derive(Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    current: SseEvent,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A CR at the very end may be the first half of a CRLF.
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[pos] == b'\r' && self.buf.get(pos + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buf.drain(..pos + skip).take(pos).collect();
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.current));
                    self.has_data = false;
                } else {
                    self.current = SseEvent::default();
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.find(':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(' ').unwrap_or(v))
                }
                None => (&line[..], ""),
            };
            match field {
                "event" => self.current.event = value.to_owned(),
                "data" => {
                    if self.has_data {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(value);
                    self.has_data = true;
                }
                _ => {}
            }
        }
        events
    }
}

/// Reads an SSE response to its end, handing each event to `on_event`, which
/// returns `false` to stop reading.
pub(crate) async fn read_sse(
    conn: &Conn,
    mut answer: Answer,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, UpstreamError>,
) -> Result<(), UpstreamError> {
    let mut decoder = SseDecoder::default();
    while let Some(chunk) = answer.chunk(&conn.redactor).await {
        let chunk = chunk.map_err(|e| conn.transport_error(e))?;
        for event in decoder.feed(&chunk) {
            if !on_event(event)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_splits_events_across_chunks_and_line_ends() {
        let mut d = SseDecoder::default();
        let mut all = d.feed(b"event: a\r\ndata: {\"x\"");
        all.extend(d.feed(b":1}\r"));
        all.extend(d.feed(b"\n\r\n: comment\n\ndata: one\ndata: two\n\n"));
        assert_eq!(
            all,
            vec![
                SseEvent {
                    event: "a".into(),
                    data: "{\"x\":1}".into()
                },
                SseEvent {
                    event: "".into(),
                    data: "one\ntwo".into()
                },
            ]
        );
    }
}
