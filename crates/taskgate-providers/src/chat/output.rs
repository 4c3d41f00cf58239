//! The `chat` kind's output, typed, and the pieces every family's mapping
//! needs to build it: arguments read from a JSON string, tool calls put
//! together from streamed fragments.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use taskgate_core::task::error_code;

use super::input::{ReasoningDetail, ResponseFormat, ToolCall};
use crate::ExecError;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    /// A reason of the provider's with no normalized name (kept from the
    /// kind's first version, so outputs stored before still read).
    Other,
}

/// A chat call's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatOutput {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// The parsed reply, when a JSON response format was asked and the
    /// text parses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    /// The model's reasoning, when the provider returns it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The provider's record of the reasoning, to send back with this reply
    /// in a later turn (see [`ReasoningDetail`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasoning_details: Vec<ReasoningDetail>,
    pub finish_reason: FinishReason,
    pub model: String,
}

impl ChatOutput {
    /// A reply of `text` only.
    pub fn new(text: String, finish_reason: FinishReason, model: String) -> Self {
        Self {
            text,
            tool_calls: Vec::new(),
            json: None,
            reasoning: None,
            reasoning_details: Vec::new(),
            finish_reason,
            model,
        }
    }

    /// Fills `json` when `format` asked for JSON and the text parses.
    pub fn with_json(mut self, format: Option<&ResponseFormat>) -> Self {
        if format.and_then(ResponseFormat::json_schema).is_some() {
            self.json = serde_json::from_str(self.text.trim()).ok();
        }
        self
    }

    pub fn into_value(self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A tool call's arguments from the JSON string an upstream sent: an
/// object, or nothing at all (no arguments). Anything else is the
/// upstream's fault.
pub fn arguments_of(raw: &str) -> Result<Map<String, Value>, ExecError> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(raw) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ExecError::new(
            error_code::INVALID_UPSTREAM_RESPONSE,
            "The provider sent tool call arguments that are not a JSON object.",
        )),
    }
}

/// Tool calls put together from streamed fragments, by index.
#[derive(Debug, Default)]
pub struct ToolCallPieces {
    calls: BTreeMap<u32, (Option<String>, Option<String>, String)>,
}

impl ToolCallPieces {
    /// Adds a fragment: the id and the name are taken from the first that
    /// has them, the arguments appended.
    pub fn push(&mut self, index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) {
        let call = self.calls.entry(index).or_default();
        if call.0.is_none() {
            call.0 = id.filter(|s| !s.is_empty()).map(str::to_owned);
        }
        if call.1.is_none() {
            call.1 = name.filter(|s| !s.is_empty()).map(str::to_owned);
        }
        call.2.push_str(arguments);
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The whole calls in index order. A call without a name, or whose
    /// arguments are not a JSON object, is an invalid answer; one without an
    /// id is given `call_<index>`.
    pub fn finish(self) -> Result<Vec<ToolCall>, ExecError> {
        self.calls
            .into_iter()
            .map(|(index, (id, name, arguments))| {
                let name = name.ok_or_else(|| {
                    ExecError::new(
                        error_code::INVALID_UPSTREAM_RESPONSE,
                        format!("The provider streamed tool call {index} without a name."),
                    )
                })?;
                Ok(ToolCall {
                    id: id.unwrap_or_else(|| format!("call_{index}")),
                    name,
                    arguments: arguments_of(&arguments)?,
                })
            })
            .collect()
    }
}
