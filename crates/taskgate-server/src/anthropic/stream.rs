//! A streamed message: Anthropic's events as the task's pieces arrive. Each
//! run of one kind of piece (reasoning, text, one tool call) is a content
//! block, opened when its first piece comes and stopped when another kind
//! starts (a thinking block also at its signature); what the task did not
//! stream (a provider without streaming) is sent whole when it ends.
//!
//! Anthropic's blocks follow one another, where OpenAI-style providers may
//! interleave the fragments of parallel tool calls: a call's fragments that
//! come while another call's block is open are held, and each held call is
//! sent whole, in index order, when that block closes for good (before text
//! or reasoning, or at the end). A fragment of a call whose block text or
//! reasoning has closed since (no provider is known to send one) would open
//! a block of its own.

use std::collections::BTreeMap;

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use taskgate_core::TaskStatus;
use taskgate_store::TaskRecord;

use super::messages::message_of;
use super::{AnthropicError, task_header};
use crate::envelope::Raw;
use crate::service::stream::{Reader, StreamEvent};
use crate::service::tasks::CancelOnDrop;

/// The block open now.
#[derive(PartialEq)]
enum Open {
    None,
    Thinking,
    Text,
    Tool(u32),
    Redacted,
}

/// A tool call held back: its id, its name and its arguments so far.
type Held = (Option<String>, Option<String>, String);

pub(super) struct Events {
    pub model: String,
    pub task: TaskRecord,
    pub first: Option<StreamEvent>,
    pub reader: Reader,
    pub guard: CancelOnDrop,
    started: bool,
    open: Open,
    /// Blocks opened so far: the next one's index.
    blocks: usize,
    sent_text: bool,
    sent_reasoning: bool,
    sent_calls: bool,
    held: BTreeMap<u32, Held>,
    ended: bool,
}

impl Events {
    pub fn new(
        model: String,
        task: TaskRecord,
        first: Option<StreamEvent>,
        reader: Reader,
        guard: CancelOnDrop,
    ) -> Self {
        Self {
            model,
            task,
            first,
            reader,
            guard,
            started: false,
            open: Open::None,
            blocks: 0,
            sent_text: false,
            sent_reasoning: false,
            sent_calls: false,
            held: BTreeMap::new(),
            ended: false,
        }
    }

    pub fn into_response(self) -> Response {
        let id = self.task.id;
        let body = Body::from_stream(futures_util::stream::unfold(self, |mut e| async move {
            e.next().await.map(|b| (Ok::<_, Infallible>(b), e))
        }));
        let mut response = Response::new(body);
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        headers.extend(task_header(id));
        response.extensions_mut().insert(Raw);
        response
    }

    async fn next(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        let mut out = String::new();
        if !self.started {
            self.started = true;
            let mut start = message_of(&self.task, &self.model);
            start["content"] = json!([]);
            start["stop_reason"] = Value::Null;
            event(
                &mut out,
                "message_start",
                json!({"type": "message_start", "message": start}),
            );
        }
        let next = match self.first.take() {
            Some(e) => Some(e),
            None => self.reader.next().await,
        };
        match next {
            None => {
                self.ended = true;
                let e = AnthropicError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("The stream of task {} was interrupted.", self.task.id),
                );
                event(&mut out, "error", e.body());
            }
            Some(StreamEvent::KeepAlive) => event(&mut out, "ping", json!({"type": "ping"})),
            Some(StreamEvent::Expired) => {
                // The task goes on: its reader is told where to find it.
                self.ended = true;
                self.guard.disarm();
                let id = self.task.id;
                let e = AnthropicError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "The stream reached its maximum duration; task {id} goes on at /api/v1/tasks/{id}."
                    ),
                );
                event(&mut out, "error", e.body());
            }
            Some(StreamEvent::Reasoning(text)) => {
                self.thinking(
                    &mut out,
                    json!({"type": "thinking_delta", "thinking": text}),
                );
            }
            Some(StreamEvent::ReasoningSignature(sig)) => {
                // Anthropic's signature ends its thinking block.
                self.thinking(
                    &mut out,
                    json!({"type": "signature_delta", "signature": sig}),
                );
                self.close(&mut out);
            }
            Some(StreamEvent::RedactedReasoning(data)) => {
                self.sent_reasoning = true;
                self.release(&mut out);
                self.close(&mut out);
                self.open_block(
                    &mut out,
                    Open::Redacted,
                    json!({"type": "redacted_thinking", "data": data}),
                );
                self.close(&mut out);
            }
            Some(StreamEvent::Delta(text)) => {
                self.sent_text = true;
                self.release(&mut out);
                self.open_block(&mut out, Open::Text, json!({"type": "text", "text": ""}));
                self.delta(&mut out, json!({"type": "text_delta", "text": text}));
            }
            Some(StreamEvent::ToolCall {
                index,
                id,
                name,
                arguments_delta,
            }) => {
                self.sent_calls = true;
                let busy = matches!(self.open, Open::Tool(open) if open != index);
                if busy || self.held.contains_key(&index) {
                    let held = self.held.entry(index).or_default();
                    held.0 = held.0.take().or(id);
                    held.1 = held.1.take().or(name);
                    held.2.push_str(&arguments_delta);
                } else {
                    self.tool_block(&mut out, index, id, name, &arguments_delta);
                }
            }
            Some(StreamEvent::Done(task)) => {
                self.ended = true;
                self.guard.disarm();
                self.release(&mut out);
                self.end(&mut out, &task);
            }
        }
        Some(Bytes::from(out))
    }

    /// A streamed piece of reasoning: the thinking block (opened unless it
    /// is the one open) and `delta` in it.
    fn thinking(&mut self, out: &mut String, delta: Value) {
        self.sent_reasoning = true;
        self.release(out);
        self.open_block(
            out,
            Open::Thinking,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        );
        self.delta(out, delta);
    }

    /// A tool call's block (opened unless it is the one open) and a piece
    /// of its arguments.
    fn tool_block(
        &mut self,
        out: &mut String,
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: &str,
    ) {
        let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
        self.open_block(out, Open::Tool(index), block);
        if !arguments.is_empty() {
            self.delta(
                out,
                json!({"type": "input_json_delta", "partial_json": arguments}),
            );
        }
    }

    /// Sends the held tool calls, each whole in its own block.
    fn release(&mut self, out: &mut String) {
        for (index, (id, name, arguments)) in std::mem::take(&mut self.held) {
            self.close(out);
            self.tool_block(out, index, id, name, &arguments);
        }
    }

    /// Opens a block of `kind` unless it is the one open (closing that).
    fn open_block(&mut self, out: &mut String, kind: Open, block: Value) {
        if self.open == kind {
            return;
        }
        self.close(out);
        self.open = kind;
        event(
            out,
            "content_block_start",
            json!({"type": "content_block_start", "index": self.blocks, "content_block": block}),
        );
        self.blocks += 1;
    }

    fn delta(&self, out: &mut String, delta: Value) {
        event(
            out,
            "content_block_delta",
            json!({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}),
        );
    }

    fn close(&mut self, out: &mut String) {
        if self.open != Open::None {
            event(
                out,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": self.blocks - 1}),
            );
            self.open = Open::None;
        }
    }

    /// The task's end: what was not streamed, whole, then the stop reason.
    fn end(&mut self, out: &mut String, task: &TaskRecord) {
        if task.status != TaskStatus::Succeeded {
            self.close(out);
            event(out, "error", AnthropicError::of_task(task).body());
            return;
        }
        let message = message_of(task, &self.model);
        for (i, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (kind, empty, delta) = match block["type"].as_str() {
                Some("thinking") if !self.sent_reasoning => {
                    self.close(out);
                    self.open_block(
                        out,
                        Open::Thinking,
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    );
                    self.delta(
                        out,
                        json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    );
                    if block["signature"] != "" {
                        self.delta(
                            out,
                            json!({"type": "signature_delta", "signature": block["signature"]}),
                        );
                    }
                    // Each block its own: the next one opens anew.
                    self.close(out);
                    continue;
                }
                Some("redacted_thinking") if !self.sent_reasoning => {
                    self.close(out);
                    self.open_block(out, Open::Redacted, block.clone());
                    self.close(out);
                    continue;
                }
                // Each whole call its own block: an index no streamed call has.
                Some("tool_use") if !self.sent_calls => (
                    Open::Tool(u32::MAX - i as u32),
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ),
                Some("text") if !self.sent_text && (block["text"] != "" || self.blocks == 0) => (
                    Open::Text,
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": block["text"]}),
                ),
                _ => continue,
            };
            self.close(out);
            self.open_block(out, kind, empty);
            self.delta(out, delta);
        }
        self.close(out);
        event(
            out,
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                   // The whole usage, as Anthropic's API now sends it here:
                   // `message_start` went out before the input was counted.
                   "usage": message["usage"]}),
        );
        event(out, "message_stop", json!({"type": "message_stop"}));
    }
}

fn event(out: &mut String, name: &str, data: Value) {
    out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
}
