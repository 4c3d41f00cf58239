//! A Messages API request read into the `chat` kind's input: `system` is a
//! system message, `tool_use` blocks are an assistant's tool calls,
//! `tool_result` blocks are tool messages (put before the rest of their
//! user turn, as the kind has them), `image` and `document` sources are
//! media parts, `thinking` a reasoning budget (or, adaptive, an effort),
//! `output_config` a response format and an effort, `tool_choice` the kind's.

use serde_json::{Map, Value, json};
use taskgate_providers::chat::Reasoning;

use super::AnthropicError;

/// Fields of Anthropic's service, not of the model's answer: dropped. What
/// Claude Code and the SDKs send to steer Anthropic's own service: its tier,
/// its prompt cache (`cache_control`), where it runs (`inference_geo`), its
/// fast mode (`speed`), and its editing of the context it keeps
/// (`context_management`: clearing earlier thinking, which the kind never
/// sends back anyway).
const DROPPED: [&str; 5] = [
    "service_tier",
    "cache_control",
    "inference_geo",
    "speed",
    "context_management",
];

/// A messages request: the task's input and how to answer it.
pub(super) struct MessagesRequest {
    pub model: String,
    pub input: Map<String, Value>,
    pub metadata: Value,
    pub sandbox: Option<Value>,
    pub stream: bool,
}

fn present(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

impl MessagesRequest {
    pub fn parse(mut body: Map<String, Value>) -> Result<Self, AnthropicError> {
        let model = match body.remove("model") {
            Some(Value::String(m)) => m,
            _ => return Err(AnthropicError::invalid("model: Field required (a string).")),
        };
        let max_tokens = match present(body.remove("max_tokens")) {
            Some(v) if v.as_u64().is_some() => v,
            _ => {
                return Err(AnthropicError::invalid(
                    "max_tokens: Field required (a positive integer).",
                ));
            }
        };
        let metadata = body.remove("metadata").unwrap_or(Value::Null);
        let sandbox = body.remove("sandbox");
        let stream = match present(body.remove("stream")) {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(AnthropicError::invalid("stream: must be a boolean.")),
        };
        let mut messages = Vec::new();
        let output_config = OutputConfig::of(present(body.remove("output_config")))?;
        match present(body.remove("system")) {
            None => {}
            Some(system) => {
                let text = texts_of("system", system)?;
                messages.push(json!({"role": "system", "content": text}));
            }
        }
        let Some(Value::Array(turns)) = body.remove("messages") else {
            return Err(AnthropicError::invalid(
                "messages: Field required (an array).",
            ));
        };
        for (i, turn) in turns.into_iter().enumerate() {
            turn_of(i, turn, &mut messages)?;
        }
        let mut input = Map::new();
        input.insert("messages".to_owned(), Value::Array(messages));
        input.insert("max_tokens".to_owned(), max_tokens);
        let mut parallel = None;
        if let Some(tools) = present(body.remove("tools")) {
            input.insert("tools".to_owned(), tools_of(tools)?);
        }
        if let Some(choice) = present(body.remove("tool_choice")) {
            let (choice, disable_parallel) = tool_choice_of(&choice)?;
            input.insert("tool_choice".to_owned(), choice);
            parallel = disable_parallel.then_some(false);
        }
        if let Some(p) = parallel {
            input.insert("parallel_tool_calls".to_owned(), Value::Bool(p));
        }
        if let Some(thinking) = present(body.remove("thinking")) {
            match thinking.get("type").and_then(Value::as_str) {
                Some("enabled") => match thinking.get("budget_tokens").and_then(Value::as_u64) {
                    Some(budget) => {
                        input.insert("reasoning".to_owned(), json!({"max_tokens": budget}));
                    }
                    None => {
                        return Err(AnthropicError::invalid(
                            "thinking.budget_tokens: Field required (an integer).",
                        ));
                    }
                },
                // The model decides how much to think: an effort, the one
                // `output_config` asks for, else medium.
                Some("adaptive") => {
                    let effort = output_config.effort.unwrap_or("medium");
                    input.insert("reasoning".to_owned(), json!({"effort": effort}));
                }
                Some("disabled") => {}
                _ => {
                    return Err(AnthropicError::unsupported(
                        "thinking.type",
                        "A thinking type other than enabled, adaptive or disabled",
                    ));
                }
            }
        }
        for field in ["temperature", "top_p"] {
            if let Some(v) = present(body.remove(field)) {
                input.insert(field.to_owned(), v);
            }
        }
        // Anthropic's structured outputs: `output_config.format`, or the
        // deprecated `output_format` of its beta.
        let format = match (output_config.format, present(body.remove("output_format"))) {
            (Some(f), _) => Some(("output_config.format", f)),
            (None, Some(f)) => Some(("output_format", f)),
            (None, None) => None,
        };
        if let Some((field, format)) = format {
            input.insert(
                "response_format".to_owned(),
                response_format(field, &format)?,
            );
        }
        if let Some(stop) = present(body.remove("stop_sequences")) {
            input.insert("stop".to_owned(), stop);
        }
        // Anthropic's `max_tokens` counts the thinking; the kind's is the
        // answer's alone (each family adds the budget back).
        if let Some(n) = input.get("max_tokens").and_then(Value::as_u64) {
            let reasoning = Reasoning::of(input.get("reasoning"));
            input.insert(
                "max_tokens".to_owned(),
                json!(Reasoning::answer_tokens(reasoning, n)),
            );
        }
        for field in DROPPED {
            body.remove(field);
        }
        // What is left has no place in the kind (top_k, container,
        // mcp_servers…): refused, not dropped.
        if let Some(field) = body.keys().next() {
            return Err(AnthropicError::unsupported(field, &format!("`{field}`")));
        }
        Ok(Self {
            model,
            input,
            metadata,
            sandbox,
            stream,
        })
    }
}

/// `output_config`: the answer's format and the effort asked of adaptive
/// thinking (`xhigh` and `max` are the kind's most, `high`); a token budget
/// for a task of the model's own is not the kind's and is dropped.
#[derive(Default)]
struct OutputConfig {
    format: Option<Value>,
    effort: Option<&'static str>,
}

impl OutputConfig {
    fn of(config: Option<Value>) -> Result<Self, AnthropicError> {
        let Some(config) = config else {
            return Ok(Self::default());
        };
        let Value::Object(mut config) = config else {
            return Err(AnthropicError::invalid("output_config: must be an object."));
        };
        let effort = match present(config.remove("effort")) {
            None => None,
            Some(e) => Some(match e.as_str() {
                Some("low") => "low",
                Some("medium") => "medium",
                Some("high" | "xhigh" | "max") => "high",
                _ => {
                    return Err(AnthropicError::invalid(
                        "output_config.effort: must be low, medium, high, xhigh or max.",
                    ));
                }
            }),
        };
        let format = present(config.remove("format"));
        config.remove("task_budget");
        if let Some(field) = config.keys().next() {
            return Err(AnthropicError::unsupported(
                &format!("output_config.{field}"),
                &format!("`{field}`"),
            ));
        }
        Ok(Self { format, effort })
    }
}

/// `{type: "json_schema", schema}` as the kind's response format.
fn response_format(field: &str, format: &Value) -> Result<Value, AnthropicError> {
    match (
        format.get("type").and_then(Value::as_str),
        format.get("schema"),
    ) {
        (Some("json_schema"), Some(schema)) => {
            Ok(json!({"type": "json_schema", "name": "output", "schema": schema}))
        }
        _ => Err(AnthropicError::invalid(format!(
            "{field}: must be {{\"type\": \"json_schema\", \"schema\": …}}."
        ))),
    }
}

/// A string or text blocks, as one text.
fn texts_of(field: &str, v: Value) -> Result<String, AnthropicError> {
    match v {
        Value::String(s) => Ok(s),
        Value::Array(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.iter().enumerate() {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => texts.push(t.as_str()),
                    _ => {
                        return Err(AnthropicError::unsupported(
                            &format!("{field}.{j}"),
                            "A block other than text here",
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(AnthropicError::invalid(format!(
            "{field}: must be a string or an array of text blocks."
        ))),
    }
}

/// One turn of `messages`, as the kind's messages (a user turn of tool
/// results is tool messages, then a user message with the rest, if any).
fn turn_of(i: usize, turn: Value, out: &mut Vec<Value>) -> Result<(), AnthropicError> {
    let field = format!("messages.{i}");
    let role = turn.get("role").and_then(Value::as_str).unwrap_or("");
    // A system message among the turns (newer Claude Code sends them):
    // text, as the kind's system messages are.
    if role == "system" {
        let content = turn.get("content").cloned().unwrap_or(Value::Null);
        let text = texts_of(&format!("{field}.content"), content)?;
        out.push(json!({"role": "system", "content": text}));
        return Ok(());
    }
    let blocks = match turn.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(b)) => b.clone(),
        _ => {
            return Err(AnthropicError::invalid(format!(
                "{field}.content: must be a string or an array of blocks."
            )));
        }
    };
    match role {
        "user" => {
            let mut parts = Vec::new();
            for (j, b) in blocks.into_iter().enumerate() {
                let at = format!("{field}.content.{j}");
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_result") => {
                        let (message, media) = tool_result(&at, b)?;
                        out.push(message);
                        // Media a tool returned (an image it read) go in the
                        // user message after the tool messages: the kind's
                        // tool messages are text.
                        parts.extend(media);
                    }
                    Some("text") => parts.push(json!({"type": "text", "text": b["text"]})),
                    Some(kind @ ("image" | "document")) => parts.push(media(&at, kind, &b)?),
                    _ => {
                        return Err(AnthropicError::unsupported(
                            &at,
                            "A user block other than text, image, document or tool_result",
                        ));
                    }
                }
            }
            if !parts.is_empty() {
                let content = if parts.iter().all(|p| p["type"] == "text") {
                    let t: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
                    json!(t.join("\n"))
                } else {
                    Value::Array(parts)
                };
                out.push(json!({"role": "user", "content": content}));
            }
        }
        "assistant" => {
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            let mut details = Vec::new();
            for (j, b) in blocks.into_iter().enumerate() {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(b["text"].as_str().unwrap_or("").to_owned()),
                    Some("tool_use") => calls.push(json!({
                        "id": b["id"], "name": b["name"],
                        "arguments": b.get("input").cloned().unwrap_or_else(|| json!({})),
                    })),
                    // Signed thinking goes back to Anthropic as it came
                    // (required before a tool_use it answers); one without
                    // a signature (made by another family) has no use.
                    Some("thinking") => {
                        if let Some(sig) = b.get("signature").and_then(Value::as_str)
                            && !sig.is_empty()
                        {
                            details.push(json!({"type": "thinking", "format": "anthropic",
                                                "text": b["thinking"].as_str().unwrap_or(""),
                                                "signature": sig}));
                        }
                    }
                    Some("redacted_thinking") => {
                        if let Some(data) = b.get("data").and_then(Value::as_str)
                            && !data.is_empty()
                        {
                            details.push(json!({"type": "redacted", "format": "anthropic",
                                                "data": data}));
                        }
                    }
                    _ => {
                        return Err(AnthropicError::unsupported(
                            &format!("{field}.content.{j}"),
                            "An assistant block other than text, tool_use or thinking",
                        ));
                    }
                }
            }
            let mut m = json!({"role": "assistant"});
            if !texts.is_empty() || calls.is_empty() {
                m["content"] = json!(texts.join("\n"));
            }
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            if !details.is_empty() {
                m["reasoning_details"] = Value::Array(details);
            }
            out.push(m);
        }
        _ => {
            return Err(AnthropicError::invalid(format!(
                "{field}.role: must be \"user\", \"assistant\" or \"system\"."
            )));
        }
    }
    Ok(())
}

/// A `tool_result` block as a tool message, and the media parts its
/// content holds (images and documents a tool returned), which the kind
/// carries in a user message. The kind has no error flag: an `is_error`
/// result's text is led by "Error: ", as the model should read it.
fn tool_result(at: &str, b: Value) -> Result<(Value, Vec<Value>), AnthropicError> {
    let Some(Value::String(id)) = b.get("tool_use_id") else {
        return Err(AnthropicError::invalid(format!(
            "{at}.tool_use_id: Field required."
        )));
    };
    let mut media_parts = Vec::new();
    let text = match b.get("content").cloned() {
        None | Some(Value::Null) => String::new(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                let here = format!("{at}.content.{j}");
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(block["text"].as_str().unwrap_or("").to_owned()),
                    Some(kind @ ("image" | "document")) => {
                        media_parts.push(media(&here, kind, block)?);
                    }
                    _ => {
                        return Err(AnthropicError::unsupported(
                            &here,
                            "A tool result block other than text, image or document",
                        ));
                    }
                }
            }
            if texts.is_empty() && !media_parts.is_empty() {
                // Said, so that the model looks for it.
                "The result is in the user message that follows.".to_owned()
            } else {
                texts.join("\n")
            }
        }
        Some(c) => texts_of(&format!("{at}.content"), c)?,
    };
    let text = if b.get("is_error") == Some(&Value::Bool(true)) {
        format!("Error: {text}")
    } else {
        text
    };
    Ok((
        json!({"role": "tool", "tool_call_id": id, "content": text}),
        media_parts,
    ))
}

/// An `image` or `document` block's `base64` or `url` source as a part.
fn media(at: &str, kind: &str, b: &Value) -> Result<Value, AnthropicError> {
    let source = b.get("source").cloned().unwrap_or(Value::Null);
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => Ok(json!({
            "type": kind, "data": source["data"], "media_type": source["media_type"],
        })),
        Some("url") => Ok(json!({"type": kind, "url": source["url"]})),
        _ => Err(AnthropicError::unsupported(
            &format!("{at}.source.type"),
            "A source other than base64 or url",
        )),
    }
}

/// `[{name, description?, input_schema}]` as the kind's tools; Anthropic's
/// server tools (a `type` such as `web_search_20250305`) are refused.
fn tools_of(tools: Value) -> Result<Value, AnthropicError> {
    let Value::Array(tools) = tools else {
        return Err(AnthropicError::invalid("tools: must be an array."));
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.into_iter().enumerate() {
        if t.get("type")
            .and_then(Value::as_str)
            .is_some_and(|k| k != "custom")
        {
            return Err(AnthropicError::unsupported(
                &format!("tools.{i}.type"),
                "A server tool",
            ));
        }
        let mut tool = json!({"name": t["name"]});
        if let Some(d) = present(t.get("description").cloned()) {
            tool["description"] = d;
        }
        if let Some(s) = present(t.get("input_schema").cloned()) {
            tool["parameters"] = s;
        }
        out.push(tool);
    }
    Ok(Value::Array(out))
}

/// `{type: auto | any | tool | none, name?, disable_parallel_tool_use?}`:
/// the kind's choice, and whether parallel calls are off.
fn tool_choice_of(choice: &Value) -> Result<(Value, bool), AnthropicError> {
    let choice_of = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => match choice.get("name") {
            Some(Value::String(n)) => json!({"name": n}),
            _ => return Err(AnthropicError::invalid("tool_choice.name: Field required.")),
        },
        _ => {
            return Err(AnthropicError::invalid(
                "tool_choice.type: must be auto, any, tool or none.",
            ));
        }
    };
    let disable = choice.get("disable_parallel_tool_use") == Some(&Value::Bool(true));
    Ok((choice_of, disable))
}
