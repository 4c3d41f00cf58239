//! What an execution carries besides its input: the attempts it makes, the
//! deadline it must meet, and where a streaming API sends its output.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use taskgate_core::trace::Tracer;

use crate::{Attempt, AttemptOutcome, LocalClock};

/// A piece of a streaming API's output, as it is generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text of the reply.
    Text(String),
    /// Text of the model's reasoning, where the provider shows it.
    Reasoning(String),
    /// The provider's signature over the reasoning sent since the last
    /// signature (Anthropic's `signature_delta`, at a thinking block's end).
    ReasoningSignature(String),
    /// A block of reasoning the provider gives encrypted only (Anthropic's
    /// `redacted_thinking`).
    RedactedReasoning(String),
    /// A fragment of the tool call at `index` (0, 1, … in the reply's
    /// order): the first fragment of a call carries its `id` and `name`,
    /// and the `arguments` fragments, joined, are the call's JSON object.
    ToolCall {
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
}

/// Receives a streaming API's output as it is generated.
pub type DeltaSink = Arc<dyn Fn(Piece) + Send + Sync>;

/// The state of one execution, owned by the executor and lent to the provider.
///
/// When the execution is stopped from outside (its deadline passed, the task
/// was cancelled) the provider's future is dropped mid-attempt; the attempt it
/// had open is then closed by [`ExecContext::abandon`] so that it is recorded.
pub struct ExecContext {
    attempts: Vec<Attempt>,
    open: Option<(LocalClock, String, String)>,
    deadline: Instant,
    deltas: Option<DeltaSink>,
    streamed: bool,
    /// Counts streamed pieces, for telling a slow stream from a stalled one.
    progress: Arc<AtomicU64>,
    /// Makes the attempts' spans, when traces are exported.
    tracer: Option<Tracer>,
    /// The upstream's id of its answer to the current attempt, for its span.
    response_id: Option<String>,
}

impl ExecContext {
    /// An execution that must be done by `deadline`.
    pub fn new(deadline: Instant) -> Self {
        Self {
            attempts: Vec::new(),
            open: None,
            deadline,
            deltas: None,
            streamed: false,
            progress: Arc::new(AtomicU64::new(0)),
            tracer: None,
            response_id: None,
        }
    }

    /// Records the attempts' spans with `tracer` (none: not traced).
    pub fn traced(mut self, tracer: Option<Tracer>) -> Self {
        self.tracer = tracer;
        self
    }

    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_ref()
    }

    /// Notes the upstream's id of its answer (`chatcmpl-…`, `msg_…`), for
    /// the attempt's span; a no-op when not traced.
    pub fn response_id(&mut self, id: &str) {
        if self.tracer.is_some() && !id.is_empty() {
            self.response_id = Some(id.to_owned());
        }
    }

    /// The id noted by the attempt that just ended.
    pub fn take_response_id(&mut self) -> Option<String> {
        self.response_id.take()
    }

    /// An execution with a deadline `timeout` from now.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self::new(Instant::now() + timeout)
    }

    /// Sends streamed output to `sink`.
    pub fn stream_to(mut self, sink: DeltaSink) -> Self {
        self.deltas = Some(sink);
        self
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether anyone listens for streamed output.
    pub fn wants_stream(&self) -> bool {
        self.deltas.is_some()
    }

    /// Sends a piece of generated text to the listener, if any.
    pub fn delta(&mut self, text: &str) {
        if !text.is_empty() {
            self.piece(Piece::Text(text.to_owned()));
        }
    }

    /// Sends a piece of generated output to the listener, if any. Empty
    /// text and reasoning pieces are dropped.
    pub fn piece(&mut self, piece: Piece) {
        if matches!(&piece, Piece::Text(t) | Piece::Reasoning(t) if t.is_empty()) {
            return;
        }
        self.streamed = true;
        self.progress.fetch_add(1, Ordering::Relaxed);
        if let Some(sink) = &self.deltas {
            sink(piece);
        }
    }

    /// A counter that moves with every streamed piece of output.
    pub fn progress(&self) -> Arc<AtomicU64> {
        self.progress.clone()
    }

    /// Whether output of the current attempt has been streamed already (then
    /// the attempt cannot be retried without the listener seeing it twice).
    pub fn has_streamed(&self) -> bool {
        self.streamed
    }

    /// Opens an attempt at `target` of `provider`.
    pub fn begin(&mut self, provider: &str, target: &str) {
        self.streamed = false;
        self.response_id = None;
        self.open = Some((LocalClock::start(), provider.to_owned(), target.to_owned()));
    }

    /// Closes the open attempt with its outcome.
    pub fn end(&mut self, outcome: AttemptOutcome, http_status: Option<u16>) {
        if let Some((clock, provider, target)) = self.open.take() {
            self.attempts
                .push(clock.finished(&provider, target, outcome, http_status));
        }
    }

    /// Records an attempt made without `begin`/`end` (in-process work).
    pub fn push(&mut self, attempt: Attempt) {
        self.attempts.push(attempt);
    }

    /// Closes an attempt left open by a dropped execution with `outcome`
    /// (`timeout` or `cancelled`).
    pub fn abandon(&mut self, outcome: AttemptOutcome) {
        self.end(outcome, None);
    }

    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    pub fn into_attempts(mut self) -> Vec<Attempt> {
        self.abandon(AttemptOutcome::Failed);
        self.attempts
    }
}
