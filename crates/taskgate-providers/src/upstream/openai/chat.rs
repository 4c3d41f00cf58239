//! The chat kind in OpenAI's Chat Completions format (OpenAI and the
//! servers compatible with it).
//!
//! | normalized | OpenAI request |
//! |---|---|
//! | `messages[]` system / user / assistant | `messages[]` of the same role; a text stays a string, parts become `[{type:"text",text}, …]` |
//! | `{type:"image", url}` | `{type:"image_url", image_url:{url}}` |
//! | `{type:"image", data, media_type}` | `{type:"image_url", image_url:{url:"data:<media_type>;base64,<data>"}}` |
//! | `{type:"document", data, media_type:"application/pdf"}` | `{type:"file", file:{filename:"document.pdf", file_data:"data:application/pdf;base64,<data>"}}` |
//! | a document by `url`, or `text/plain` | unsupported (OpenAI reads inline PDFs only) |
//! | assistant `tool_calls[{id,name,arguments}]` | `tool_calls[{id, type:"function", function:{name, arguments: <JSON string>}}]` |
//! | `{role:"tool", tool_call_id, content}` | the same |
//! | `tools[{name,description,parameters}]` | `tools[{type:"function", function:{name,description,parameters}}]` |
//! | `tool_choice` `auto` / `none` / `required` / `{name}` | the same strings / `{type:"function", function:{name}}` |
//! | `parallel_tool_calls` | the same |
//! | `response_format` text / json_object / json_schema | `{type:"text"}` / `{type:"json_object"}` / `{type:"json_schema", json_schema:{name, schema, strict}}` |
//! | `reasoning` | `reasoning_effort` (a budget becomes the nearest effort); `max_tokens` is then sent as `max_completion_tokens` (the only one reasoning models take), the reasoning's budget added since it counts reasoning too |
//! | `max_tokens`, `temperature`, `top_p`, `stop`, `seed`, `presence_penalty`, `frequency_penalty` | the same |
//!
//! | OpenAI answer | normalized |
//! |---|---|
//! | `message.content` | `text` (a `refusal` instead of content is the text, finish `content_filter`) |
//! | `message.tool_calls[].function{name, arguments}` | `tool_calls[{id, name, arguments}]`, arguments parsed (not an object: `invalid_upstream_response`) |
//! | `message.reasoning_content` (DeepSeek and other compatibles) | `reasoning` |
//! | `finish_reason` stop / length / tool_calls (function_call) / content_filter | the same; anything else `other` |
//! | `usage.prompt_tokens` (cached part included) / `prompt_tokens_details.cached_tokens` | `input_tokens` / `cached_input_tokens` |
//! | `usage.completion_tokens` (reasoning included) / `completion_tokens_details.reasoning_tokens` | `output_tokens` / `reasoning_tokens` |
//! | streamed `delta.content` / `delta.reasoning_content` | text / reasoning pieces |
//! | streamed `delta.refusal` | text pieces, finish `content_filter` |
//! | streamed `delta.tool_calls[{index, id?, function:{name?, arguments?}}]` | tool-call pieces, assembled by index |

use serde_json::{Value, json};

use super::token_usage;
use crate::chat::{
    ChatInput, ChatOutput, Content, FinishReason, Message, Part, ResponseFormat, Source, ToolCall,
    ToolCallPieces, ToolChoice, ToolMode, arguments_of,
};
use crate::upstream::http::UpstreamError;
use crate::{ExecContext, Execution, Piece, Unsupported, Usage};

/// What an OpenAI-protocol provider cannot carry: documents other than
/// inline PDFs.
pub(crate) fn unsupported(provider: &str, input: &ChatInput) -> Option<Unsupported> {
    for (i, m) in input.messages.iter().enumerate() {
        let Message::User {
            content: Content::Parts(parts),
        } = m
        else {
            continue;
        };
        for (j, part) in parts.iter().enumerate() {
            let Part::Document { source } = part else {
                continue;
            };
            let why = match source {
                Source::Url { .. } => "a document by URL",
                Source::Data { media_type, .. } if media_type != "application/pdf" => {
                    "a document that is not a PDF"
                }
                Source::Data { .. } => continue,
            };
            return Some(Unsupported {
                field: format!("messages[{i}].content[{j}]"),
                message: format!(
                    "The provider {provider} (OpenAI protocol) cannot read {why}: send a PDF's `data` instead."
                ),
            });
        }
    }
    None
}

/// The Chat Completions request body, `stream` set either way.
pub(crate) fn request_body(input: &ChatInput, model: &str, stream: bool) -> Value {
    let mut body = json!({
        "model": model,
        "messages": input.messages.iter().map(message).collect::<Vec<_>>(),
    });
    if !input.tools.is_empty() {
        let tools: Vec<Value> = input
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({"name": t.name});
                if let Some(d) = &t.description {
                    f["description"] = json!(d);
                }
                if let Some(p) = &t.parameters {
                    f["parameters"] = p.clone();
                }
                json!({"type": "function", "function": f})
            })
            .collect();
        body["tools"] = json!(tools);
    }
    if let Some(choice) = &input.tool_choice {
        body["tool_choice"] = match choice {
            ToolChoice::Mode(ToolMode::Auto) => json!("auto"),
            ToolChoice::Mode(ToolMode::None) => json!("none"),
            ToolChoice::Mode(ToolMode::Required) => json!("required"),
            ToolChoice::Named { name } => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(p) = input.parallel_tool_calls {
        body["parallel_tool_calls"] = json!(p);
    }
    if let Some(format) = &input.response_format {
        body["response_format"] = match format {
            ResponseFormat::Text => json!({"type": "text"}),
            ResponseFormat::JsonObject => json!({"type": "json_object"}),
            ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            } => {
                let mut s = json!({"name": name, "schema": schema});
                if let Some(strict) = strict {
                    s["strict"] = json!(strict);
                }
                json!({"type": "json_schema", "json_schema": s})
            }
        };
    }
    if let Some(r) = input.reasoning {
        body["reasoning_effort"] = json!(r.effort().as_str());
    }
    match (input.max_tokens, input.reasoning) {
        (Some(n), None) => body["max_tokens"] = json!(n),
        // `max_tokens` is the answer's: the reasoning's budget comes on top,
        // as reasoning models count both in `max_completion_tokens`.
        (Some(n), Some(r)) => body["max_completion_tokens"] = json!(n + r.budget_tokens()),
        (None, _) => {}
    }
    if let Some(t) = input.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(p) = input.top_p {
        body["top_p"] = json!(p);
    }
    if let Some(s) = input.seed {
        body["seed"] = json!(s);
    }
    if let Some(p) = input.presence_penalty {
        body["presence_penalty"] = json!(p);
    }
    if let Some(p) = input.frequency_penalty {
        body["frequency_penalty"] = json!(p);
    }
    if let Some(stop) = &input.stop {
        body["stop"] = json!(stop);
    }
    body["stream"] = json!(stream);
    if stream {
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

fn message(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content_value(content)}),
        Message::User { content } => json!({"role": "user", "content": content_value(content)}),
        // Reasoning details are Anthropic's or Gemini's: not for this family.
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut v = json!({"role": "assistant"});
            if let Some(c) = content {
                v["content"] = content_value(c);
            }
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": c.name,
                            "arguments": Value::Object(c.arguments.clone()).to_string(),
                        }})
                    })
                    .collect();
                v["tool_calls"] = json!(calls);
            }
            v
        }
        Message::Tool {
            tool_call_id,
            content,
        } => {
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": content_value(content)})
        }
    }
}

fn content_value(content: &Content) -> Value {
    match content {
        Content::Text(t) => json!(t),
        Content::Parts(parts) => Value::Array(parts.iter().map(part).collect()),
    }
}

fn part(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { source } => {
            let url = match source {
                Source::Url { url, .. } => url.clone(),
                Source::Data { data, media_type } => format!("data:{media_type};base64,{data}"),
            };
            json!({"type": "image_url", "image_url": {"url": url}})
        }
        // Only inline PDFs get here (`unsupported` refuses the rest).
        Part::Document { source } => {
            let (data, media_type) = match source {
                Source::Data { data, media_type } => (data.as_str(), media_type.as_str()),
                Source::Url { url, .. } => (url.as_str(), "application/pdf"),
            };
            json!({"type": "file", "file": {
                "filename": "document.pdf",
                "file_data": format!("data:{media_type};base64,{data}"),
            }})
        }
    }
}

pub(crate) fn finish_reason(f: Option<&str>) -> FinishReason {
    match f {
        Some("stop") | None => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some(_) => FinishReason::Other,
    }
}

fn invalid(e: crate::ExecError) -> UpstreamError {
    UpstreamError::invalid(e.message)
}

/// A non-streamed chat completion.
pub(crate) fn answer(
    v: &Value,
    input: &ChatInput,
    model: &str,
) -> Result<Execution, UpstreamError> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| UpstreamError::invalid("The chat answer has no `choices`."))?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut finish = finish_reason(choice.get("finish_reason").and_then(Value::as_str));
    let text = match (message.get("content"), message.get("refusal")) {
        (Some(Value::String(s)), _) => s.clone(),
        (Some(Value::Null) | None, Some(Value::String(refusal))) => {
            finish = FinishReason::ContentFilter;
            refusal.clone()
        }
        (Some(Value::Null) | None, _) => String::new(),
        (Some(_), _) => {
            return Err(UpstreamError::invalid(
                "The chat answer's content is not text.",
            ));
        }
    };
    let mut out = ChatOutput::new(text, finish, super::model_of(v, model));
    for (i, c) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = c.pointer("/function/name").and_then(Value::as_str);
        let Some(name) = name else {
            return Err(UpstreamError::invalid(
                "The chat answer has a tool call without a name.",
            ));
        };
        let raw = c.pointer("/function/arguments").and_then(Value::as_str);
        out.tool_calls.push(ToolCall {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_owned),
            name: name.to_owned(),
            arguments: arguments_of(raw.unwrap_or("")).map_err(invalid)?,
        });
    }
    out.reasoning = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    Ok(Execution {
        output: out.with_json(input.response_format.as_ref()).into_value(),
        usage: v.get("usage").map(token_usage).unwrap_or_default(),
    })
}

/// The pieces of the answer whole, for stream readers of a server that
/// answered a streamed request whole.
pub(crate) fn replay(x: &Execution, ctx: &mut ExecContext) {
    let o = &x.output;
    if let Some(r) = o.get("reasoning").and_then(Value::as_str) {
        ctx.piece(Piece::Reasoning(r.to_owned()));
    }
    if let Some(t) = o.get("text").and_then(Value::as_str) {
        ctx.delta(t);
    }
    for (i, c) in o["tool_calls"].as_array().into_iter().flatten().enumerate() {
        ctx.piece(Piece::ToolCall {
            index: i as u32,
            id: c["id"].as_str().map(str::to_owned),
            name: c["name"].as_str().map(str::to_owned),
            arguments: c["arguments"].to_string(),
        });
    }
}

/// A streamed chat completion, chunk by chunk.
#[derive(Default)]
pub(crate) struct Streamed {
    text: String,
    reasoning: String,
    calls: ToolCallPieces,
    finish: Option<String>,
    refused: bool,
    model: Option<String>,
    usage: Option<Usage>,
}

impl Streamed {
    /// Takes in one chunk, sending its pieces to `ctx`.
    pub fn absorb(&mut self, chunk: &Value, ctx: &mut ExecContext) {
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            self.model.get_or_insert_with(|| m.to_owned());
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(r) = delta.get("reasoning_content").and_then(Value::as_str) {
                self.reasoning.push_str(r);
                ctx.piece(Piece::Reasoning(r.to_owned()));
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
                ctx.delta(t);
            }
            // A refusal streams in place of the content.
            if let Some(t) = delta
                .get("refusal")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.refused = true;
                self.text.push_str(t);
                ctx.delta(t);
            }
            for (n, c) in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let index = c.get("index").and_then(Value::as_u64).unwrap_or(n as u64) as u32;
                let id = c.get("id").and_then(Value::as_str);
                let name = c.pointer("/function/name").and_then(Value::as_str);
                let args = c
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.calls.push(index, id, name, args);
                ctx.piece(Piece::ToolCall {
                    index,
                    id: id.map(str::to_owned),
                    name: name.map(str::to_owned),
                    arguments: args.to_owned(),
                });
            }
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(f.to_owned());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(token_usage(u));
        }
    }

    /// Whether the last choice chunk said why the reply ended.
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    pub fn finish(self, input: &ChatInput, model: &str) -> Result<Execution, UpstreamError> {
        let finish = match finish_reason(self.finish.as_deref()) {
            FinishReason::Stop if self.refused => FinishReason::ContentFilter,
            other => other,
        };
        let mut out = ChatOutput::new(
            self.text,
            finish,
            self.model.unwrap_or_else(|| model.to_owned()),
        );
        out.tool_calls = self.calls.finish().map_err(invalid)?;
        out.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        Ok(Execution {
            output: out.with_json(input.response_format.as_ref()).into_value(),
            usage: self.usage.unwrap_or(Usage {
                units: 1,
                ..Usage::default()
            }),
        })
    }
}

#[cfg(test)]
mod tests;
