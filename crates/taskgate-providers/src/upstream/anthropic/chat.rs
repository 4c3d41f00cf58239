//! The chat kind in Anthropic's Messages format.
//!
//! | normalized | Anthropic request |
//! |---|---|
//! | `system` messages | top-level `system`, their texts joined by a blank line |
//! | user / assistant / tool messages | `messages[]`, consecutive turns of one role merged into one (Anthropic requires turns to alternate); a turn of one text block is sent as a string |
//! | `{type:"text", text}` | `{type:"text", text}` (empty texts left out: Anthropic refuses them) |
//! | `{type:"image", data, media_type}` / `{url}` | `{type:"image", source:{type:"base64", media_type, data}}` / `{source:{type:"url", url}}` |
//! | `{type:"document", data, media_type:"application/pdf"}` / `{url}` | `{type:"document", source:{type:"base64", …}}` / `{source:{type:"url", url}}` |
//! | `{type:"document", data, media_type:"text/plain"}` | `{type:"document", source:{type:"text", media_type:"text/plain", data: <decoded text>}}`; by URL: unsupported |
//! | assistant `tool_calls[{id,name,arguments}]` | `tool_use` blocks `{id, name, input}` |
//! | assistant `reasoning_details` of format `anthropic` (with `reasoning` on) | `thinking` `{thinking, signature}` and `redacted_thinking` `{data}` blocks first, as they came |
//! | `{role:"tool", tool_call_id, content}` | a user turn of `tool_result` blocks `{tool_use_id, content}` (consecutive results in one turn) |
//! | `tools[{name,description,parameters}]` | `tools[{name, description, input_schema}]` (no parameters: `{"type":"object"}`) |
//! | `tool_choice` auto / none / required / `{name}` | `{type:"auto"}` / `{type:"none"}` / `{type:"any"}` / `{type:"tool", name}` |
//! | `parallel_tool_calls: false` | `disable_parallel_tool_use: true` in `tool_choice` (`auto` when no choice was given) |
//! | `reasoning` | `thinking:{type:"enabled", budget_tokens}` (at least 1024, Anthropic's floor); `max_tokens` becomes the budget plus the tokens asked for the answer (or 4096), since Anthropic counts thinking inside `max_tokens` |
//! | `response_format` json_object / json_schema | a forced tool `json_answer` whose `input_schema` is the schema (`{"type":"object"}` for json_object); its input is the reply |
//! | `max_tokens`, `temperature`, `top_p`, `stop` | `max_tokens` (4096 when left out: Anthropic requires it), `temperature`, `top_p`, `stop_sequences` |
//!
//! Refused (unsupported): `seed`, a `presence_penalty` or
//! `frequency_penalty` other than 0 (Anthropic has neither), JSON output beside `tools` or with `reasoning`
//! (forced tool use and thinking do not go together), a JSON schema whose
//! root is not an object, `temperature` or a forced tool choice with
//! `reasoning`, a `text/plain` document by URL.
//!
//! | Anthropic answer | normalized |
//! |---|---|
//! | `text` blocks | `text`, concatenated |
//! | `thinking` blocks | `reasoning`, and each `reasoning_details[{type:"thinking", format:"anthropic", text, signature}]` |
//! | `redacted_thinking` blocks | `reasoning_details[{type:"redacted", format:"anthropic", data}]` (no text) |
//! | `tool_use` blocks | `tool_calls[{id, name, arguments: input}]`; the forced `json_answer`'s input is the `text` (serialized) and `json` |
//! | `stop_reason` end_turn, stop_sequence / max_tokens, model_context_window_exceeded / tool_use / refusal | `stop` / `length` / `tool_calls` (`stop` for `json_answer`) / `content_filter`; else `other` |
//! | `usage.input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` | `input_tokens` (Anthropic counts them apart) |
//! | `usage.cache_read_input_tokens` | `cached_input_tokens` |
//! | `usage.output_tokens` (thinking included) | `output_tokens`; `reasoning_tokens` none (not counted apart) |
//! | streamed `content_block_start` tool_use / `input_json_delta` | tool-call pieces (the `json_answer`'s JSON as text pieces) |
//! | streamed `text_delta` / `thinking_delta` / `signature_delta` / `redacted_thinking` block | text / reasoning / signature / redacted-reasoning pieces |

use std::collections::HashMap;

use base64::Engine;
use serde_json::{Value, json};

use crate::chat::{
    ChatInput, ChatOutput, Content, FinishReason, Message, Part, ReasoningDetail, ReasoningFormat,
    ResponseFormat, Source, ToolCallPieces, ToolChoice, ToolMode,
};
use crate::upstream::http::UpstreamError;
use crate::{ExecContext, Execution, Piece, Unsupported, Usage};

/// The forced tool that carries a JSON reply.
pub(crate) const JSON_TOOL: &str = "json_answer";
/// Anthropic requires `max_tokens`; this is used when the input has none.
const DEFAULT_MAX_TOKENS: u64 = 4096;
/// Anthropic's smallest thinking budget.
const MIN_BUDGET: u64 = 1024;

/// What an Anthropic provider cannot carry (see the module's table).
pub(crate) fn unsupported(provider: &str, input: &ChatInput) -> Option<Unsupported> {
    let refuse = |field: &str, why: &str| {
        Some(Unsupported {
            field: field.to_owned(),
            message: format!("The provider {provider} (Anthropic protocol) {why}."),
        })
    };
    let json = input
        .response_format
        .as_ref()
        .and_then(ResponseFormat::json_schema);
    if let Some(schema) = &json {
        if !input.tools.is_empty() {
            return refuse(
                "response_format",
                "gives JSON output through a forced tool, which cannot go beside `tools`",
            );
        }
        if input.reasoning.is_some() {
            return refuse(
                "response_format",
                "gives JSON output through a forced tool, which cannot go with `reasoning`",
            );
        }
        if schema.get("type").is_some_and(|t| t != "object") {
            return refuse(
                "response_format.schema",
                "takes JSON output schemas whose root is an object only",
            );
        }
    }
    if input.seed.is_some() {
        return refuse("seed", "has no `seed`");
    }
    for (field, value) in [
        ("presence_penalty", input.presence_penalty),
        ("frequency_penalty", input.frequency_penalty),
    ] {
        if value.is_some_and(|v| v != 0.0) {
            return refuse(field, &format!("has no `{field}` (0 only)"));
        }
    }
    if input.reasoning.is_some() {
        // Anthropic takes a temperature of 1 (its default) with thinking, and
        // no other.
        if input.temperature.is_some_and(|t| t != 1.0) {
            return refuse(
                "temperature",
                "cannot set `temperature` other than 1 with `reasoning`",
            );
        }
        if matches!(
            input.tool_choice,
            Some(ToolChoice::Named { .. } | ToolChoice::Mode(ToolMode::Required))
        ) {
            return refuse(
                "tool_choice",
                "cannot force a tool call with `reasoning` (only `auto` or `none`)",
            );
        }
    }
    for (i, m) in input.messages.iter().enumerate() {
        let Message::User {
            content: Content::Parts(parts),
        } = m
        else {
            continue;
        };
        for (j, p) in parts.iter().enumerate() {
            if let Part::Document { source } = p
                && matches!(source, Source::Url { .. })
                && source.media_type().as_deref() == Some("text/plain")
            {
                return refuse(
                    &format!("messages[{i}].content[{j}]"),
                    "reads documents by URL as PDFs only: send a text document's `data`",
                );
            }
        }
    }
    None
}

/// The Messages request body, `stream` set either way.
pub(crate) fn request_body(input: &ChatInput, model: &str, stream: bool) -> Value {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in &input.messages {
        let (role, blocks) = match m {
            Message::System { .. } => continue,
            Message::User { content } => ("user", content.parts().iter().map(block).collect()),
            Message::Assistant {
                content,
                tool_calls,
                reasoning_details,
            } => {
                // Thinking blocks first, as Anthropic gave them; only with
                // thinking on (without it Anthropic has no use for them).
                let thinking = reasoning_details
                    .iter()
                    .filter(|_| input.reasoning.is_some())
                    .filter_map(thinking_block);
                let mut blocks: Vec<Value> = thinking.collect();
                blocks.extend(content.iter().flat_map(Content::parts).map(|p| block(&p)));
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
                }));
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
            } => {
                let result = match content {
                    Content::Text(t) => json!(t),
                    Content::Parts(_) => Value::Array(content.parts().iter().map(block).collect()),
                };
                (
                    "user",
                    vec![
                        json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": result}),
                    ],
                )
            }
        };
        let blocks: Vec<Value> = blocks
            .into_iter()
            .filter(|b| !(b["type"] == "text" && b["text"] == ""))
            .collect();
        match turns.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, blocks)| {
            let content = match blocks.as_slice() {
                [one] if one["type"] == "text" => one["text"].clone(),
                _ => Value::Array(blocks),
            };
            json!({"role": role, "content": content})
        })
        .collect();
    let asked = input.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({"model": model, "max_tokens": asked, "messages": messages});
    if let Some(system) = input.system_text() {
        body["system"] = json!(system);
    }
    if let Some(r) = input.reasoning {
        let budget = r.budget_tokens().max(MIN_BUDGET);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        body["max_tokens"] = json!(budget + asked);
    }
    let mut tools: Vec<Value> = input
        .tools
        .iter()
        .map(|t| {
            let mut v = json!({"name": t.name,
                               "input_schema": t.parameters.clone().unwrap_or(json!({"type": "object"}))});
            if let Some(d) = &t.description {
                v["description"] = json!(d);
            }
            v
        })
        .collect();
    let mut choice = input.tool_choice.as_ref().map(|c| match c {
        ToolChoice::Mode(ToolMode::Auto) => json!({"type": "auto"}),
        ToolChoice::Mode(ToolMode::None) => json!({"type": "none"}),
        ToolChoice::Mode(ToolMode::Required) => json!({"type": "any"}),
        ToolChoice::Named { name } => json!({"type": "tool", "name": name}),
    });
    if let Some(schema) = input
        .response_format
        .as_ref()
        .and_then(ResponseFormat::json_schema)
    {
        tools.push(json!({"name": JSON_TOOL,
                          "description": "Give the answer as this tool's input.",
                          "input_schema": schema}));
        choice = Some(json!({"type": "tool", "name": JSON_TOOL}));
    }
    if input.parallel_tool_calls == Some(false) {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if c["type"] != "none" {
            c["disable_parallel_tool_use"] = json!(true);
        }
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
    }
    if let Some(c) = choice {
        body["tool_choice"] = c;
    }
    if let Some(t) = input.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(p) = input.top_p {
        body["top_p"] = json!(p);
    }
    if let Some(stop) = &input.stop {
        body["stop_sequences"] = json!(stop);
    }
    body["stream"] = json!(stream);
    body
}

/// A thinking block of Anthropic's, from the detail that recorded it.
fn thinking_block(d: &ReasoningDetail) -> Option<Value> {
    match d {
        // Anthropic refuses a thinking block without its signature.
        ReasoningDetail::Thinking {
            format: ReasoningFormat::Anthropic,
            text,
            signature: Some(signature),
        } if !signature.is_empty() => {
            Some(json!({"type": "thinking", "thinking": text, "signature": signature}))
        }
        ReasoningDetail::Redacted {
            format: ReasoningFormat::Anthropic,
            data,
        } if !data.is_empty() => Some(json!({"type": "redacted_thinking", "data": data})),
        _ => None,
    }
}

fn block(p: &Part) -> Value {
    let (kind, source) = match p {
        Part::Text { text } => return json!({"type": "text", "text": text}),
        Part::Image { source } => ("image", source),
        Part::Document { source } => ("document", source),
    };
    let source = match source {
        Source::Url { url, .. } => json!({"type": "url", "url": url}),
        Source::Data { data, media_type } if media_type == "text/plain" => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .unwrap_or_default();
            json!({"type": "text", "media_type": "text/plain",
                   "data": String::from_utf8_lossy(&bytes)})
        }
        Source::Data { data, media_type } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
    };
    json!({"type": kind, "source": source})
}

pub(crate) fn finish_reason(stop: Option<&str>) -> FinishReason {
    match stop {
        Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
        // The second: the model's context window, not `max_tokens`, ran out.
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("refusal") => FinishReason::ContentFilter,
        Some(_) => FinishReason::Other,
    }
}

/// Token counts as Anthropic reports them; a later report's fields win.
#[derive(Default)]
pub(crate) struct Counts {
    input: Option<i64>,
    cache_read: Option<i64>,
    cache_creation: Option<i64>,
    output: Option<i64>,
}

impl Counts {
    pub fn absorb(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_i64).filter(|n| *n >= 0);
        for (slot, key) in [
            (&mut self.input, "input_tokens"),
            (&mut self.cache_read, "cache_read_input_tokens"),
            (&mut self.cache_creation, "cache_creation_input_tokens"),
            (&mut self.output, "output_tokens"),
        ] {
            if let Some(v) = n(key) {
                *slot = Some(v);
            }
        }
    }

    pub fn usage(&self) -> Usage {
        let input = match (self.input, self.cache_read, self.cache_creation) {
            (None, None, None) => None,
            (a, b, c) => Some(a.unwrap_or(0) + b.unwrap_or(0) + c.unwrap_or(0)),
        };
        Usage {
            units: 1,
            input_tokens: input,
            output_tokens: self.output,
            reasoning_tokens: None,
            cached_input_tokens: self.cache_read,
        }
    }
}

/// A reply as it is put together, from one message or from its events.
pub(crate) struct Reply<'a> {
    input: &'a ChatInput,
    text: String,
    reasoning: String,
    /// The thinking blocks as they came, and which block index each is.
    details: Vec<ReasoningDetail>,
    detail_at: HashMap<u64, usize>,
    calls: ToolCallPieces,
    /// What each content block index is: a tool call's ordinal, the JSON
    /// answer (`None`), or not a tool.
    tools: HashMap<u64, Option<u32>>,
    json_forced: bool,
    stop: Option<String>,
    pub model: Option<String>,
    pub counts: Counts,
}

impl<'a> Reply<'a> {
    pub fn new(input: &'a ChatInput) -> Self {
        Self {
            input,
            text: String::new(),
            reasoning: String::new(),
            details: Vec::new(),
            detail_at: HashMap::new(),
            calls: ToolCallPieces::default(),
            tools: HashMap::new(),
            json_forced: input
                .response_format
                .as_ref()
                .and_then(ResponseFormat::json_schema)
                .is_some(),
            stop: None,
            model: None,
            counts: Counts::default(),
        }
    }

    /// A non-streamed message.
    pub fn message(mut self, v: &Value, model: &str) -> Result<Execution, UpstreamError> {
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| UpstreamError::invalid("The message has no `content`."))?;
        for (i, b) in blocks.iter().enumerate() {
            self.start(i as u64, b, &mut None);
            match b["type"].as_str() {
                Some("text") => self.text.push_str(b["text"].as_str().unwrap_or("")),
                Some("thinking") => {
                    let text = b["thinking"].as_str().unwrap_or("");
                    self.reasoning.push_str(text);
                    self.details.push(ReasoningDetail::Thinking {
                        format: ReasoningFormat::Anthropic,
                        text: text.to_owned(),
                        signature: b["signature"]
                            .as_str()
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    });
                }
                Some("tool_use") => {
                    let input = match &b["input"] {
                        Value::Object(_) => b["input"].to_string(),
                        Value::Null => String::new(),
                        _ => "not an object".to_owned(),
                    };
                    self.input_json(i as u64, &input, &mut None);
                }
                _ => {}
            }
        }
        self.stop = v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
        self.counts.absorb(&v["usage"]);
        self.finish(model)
    }

    /// A content block starts (streamed `content_block_start`).
    pub fn start(&mut self, index: u64, b: &Value, ctx: &mut Option<&mut ExecContext>) {
        match b["type"].as_str() {
            Some("tool_use") => {}
            Some("redacted_thinking") => {
                let data = b["data"].as_str().unwrap_or("").to_owned();
                if data.is_empty() {
                    return;
                }
                if let Some(ctx) = ctx {
                    ctx.piece(Piece::RedactedReasoning(data.clone()));
                }
                self.details.push(ReasoningDetail::Redacted {
                    format: ReasoningFormat::Anthropic,
                    data,
                });
                return;
            }
            // A streamed thinking block starts empty; a whole one is read
            // by `message`.
            Some("thinking") if ctx.is_some() => {
                self.detail_at.insert(index, self.details.len());
                self.details.push(ReasoningDetail::Thinking {
                    format: ReasoningFormat::Anthropic,
                    text: String::new(),
                    signature: None,
                });
                return;
            }
            _ => return,
        }
        let name = b["name"].as_str().unwrap_or("");
        if self.json_forced && name == JSON_TOOL {
            self.tools.insert(index, None);
            return;
        }
        let ordinal = self.tools.values().filter(|t| t.is_some()).count() as u32;
        self.tools.insert(index, Some(ordinal));
        let id = b["id"].as_str();
        self.calls.push(ordinal, id, Some(name), "");
        if let Some(ctx) = ctx {
            ctx.piece(Piece::ToolCall {
                index: ordinal,
                id: id.map(str::to_owned),
                name: Some(name.to_owned()),
                arguments: String::new(),
            });
        }
    }

    /// A streamed `content_block_delta`.
    pub fn delta(&mut self, index: u64, d: &Value, ctx: &mut ExecContext) {
        match d["type"].as_str() {
            Some("text_delta") => {
                let t = d["text"].as_str().unwrap_or("");
                self.text.push_str(t);
                ctx.delta(t);
            }
            Some("thinking_delta") => {
                let t = d["thinking"].as_str().unwrap_or("");
                self.reasoning.push_str(t);
                if let Some(ReasoningDetail::Thinking { text, .. }) = self.detail(index) {
                    text.push_str(t);
                }
                ctx.piece(Piece::Reasoning(t.to_owned()));
            }
            Some("signature_delta") => {
                let sig = d["signature"].as_str().unwrap_or("");
                if sig.is_empty() {
                    return;
                }
                if let Some(ReasoningDetail::Thinking { signature, .. }) = self.detail(index) {
                    signature.get_or_insert_with(String::new).push_str(sig);
                }
                ctx.piece(Piece::ReasoningSignature(sig.to_owned()));
            }
            Some("input_json_delta") => {
                let part = d["partial_json"].as_str().unwrap_or("");
                self.input_json(index, part, &mut Some(ctx));
            }
            _ => {}
        }
    }

    fn detail(&mut self, index: u64) -> Option<&mut ReasoningDetail> {
        let at = *self.detail_at.get(&index)?;
        self.details.get_mut(at)
    }

    fn input_json(&mut self, index: u64, part: &str, ctx: &mut Option<&mut ExecContext>) {
        match self.tools.get(&index) {
            Some(None) => {
                self.text.push_str(part);
                if let Some(ctx) = ctx {
                    ctx.delta(part);
                }
            }
            Some(Some(ordinal)) => {
                self.calls.push(*ordinal, None, None, part);
                if let Some(ctx) = ctx {
                    ctx.piece(Piece::ToolCall {
                        index: *ordinal,
                        id: None,
                        name: None,
                        arguments: part.to_owned(),
                    });
                }
            }
            None => {}
        }
    }

    /// A streamed `message_delta`.
    pub fn message_delta(&mut self, data: &Value) {
        if let Some(s) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
            self.stop = Some(s.to_owned());
        }
        // These counts are cumulative: the last one is the total.
        self.counts.absorb(&data["usage"]);
    }

    pub fn finish(self, model: &str) -> Result<Execution, UpstreamError> {
        let mut finish = finish_reason(self.stop.as_deref());
        let json_answer = self.tools.values().any(Option::is_none);
        if json_answer && finish == FinishReason::ToolCalls {
            finish = FinishReason::Stop;
        }
        let mut out = ChatOutput::new(
            self.text,
            finish,
            self.model.unwrap_or_else(|| model.to_owned()),
        );
        out.tool_calls = self
            .calls
            .finish()
            .map_err(|e| UpstreamError::invalid(e.message))?;
        out.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        out.reasoning_details = self.details;
        let out = out.with_json(self.input.response_format.as_ref());
        if json_answer && out.json.is_none() && finish == FinishReason::Stop {
            return Err(UpstreamError::invalid(
                "The provider's JSON answer is not a JSON object.",
            ));
        }
        Ok(Execution {
            output: out.into_value(),
            usage: self.counts.usage(),
        })
    }
}

#[cfg(test)]
mod tests;
