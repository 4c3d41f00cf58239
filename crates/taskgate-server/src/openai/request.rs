//! A chat completion request read into the `chat` kind's input: OpenAI's
//! names and nestings (`tools[].function`, `function.arguments` as a JSON
//! string, `image_url` and `file` parts, `response_format.json_schema`,
//! `reasoning_effort`) become the kind's, and what the kind cannot carry is
//! refused with the request's own field in `param`.

use serde_json::{Map, Value, json};
use taskgate_providers::chat::Reasoning;

use super::{OpenAiError, metadata_of, model_of};

/// Request fields whose answers a normalized `chat` task cannot carry:
/// refused unless absent, `null` or `false`.
const UNSUPPORTED: [(&str, &str); 7] = [
    ("functions", "Function calling (`functions`, use `tools`)"),
    ("function_call", "`function_call` (use `tool_choice`)"),
    ("logprobs", "`logprobs`"),
    ("top_logprobs", "`top_logprobs`"),
    ("audio", "Audio output (`audio`)"),
    ("modalities", "`modalities`"),
    ("prediction", "`prediction`"),
];

/// Request fields that concern OpenAI's own service, not the model's answer:
/// who the end user is, whether OpenAI keeps the completion, and how its
/// prompt cache is keyed and kept (set by the Agents SDK, LangChain and the
/// Vercel AI SDK when their users ask; they change neither the answer nor
/// its price).
const DROPPED: [&str; 6] = [
    "user",
    "store",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
];

/// A chat completion request, as the task's input and how to answer it.
pub(super) struct ChatRequest {
    pub model: String,
    pub input: Map<String, Value>,
    pub metadata: Value,
    pub extras: super::Extras,
    pub stream: bool,
    pub include_usage: bool,
}

impl ChatRequest {
    pub fn parse(mut body: Map<String, Value>) -> Result<Self, OpenAiError> {
        let model = model_of(&mut body)?;
        let metadata = metadata_of(&mut body);
        let extras = super::Extras::take(&mut body);
        for (field, what) in UNSUPPORTED {
            if body
                .remove(field)
                .is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false)))
            {
                return Err(OpenAiError::unsupported(field, what));
            }
        }
        for field in DROPPED {
            body.remove(field);
        }
        let stream = match body.remove("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(OpenAiError::invalid("stream", "stream must be a boolean.")),
        };
        let include_usage = match body.remove("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => o.get("include_usage") == Some(&Value::Bool(true)),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "stream_options",
                    "stream_options must be an object.",
                ));
            }
        };
        match body.remove("n") {
            None | Some(Value::Null) => {}
            Some(n) if n.as_f64() == Some(1.0) => {}
            Some(_) => return Err(OpenAiError::unsupported("n", "More than one choice (`n`)")),
        }
        let mut input = Map::new();
        let messages = match body.remove("messages") {
            Some(Value::Array(ms)) => ms
                .into_iter()
                .enumerate()
                .map(|(i, m)| message(i, m))
                .collect::<Result<Vec<Value>, _>>()?,
            None => return Err(OpenAiError::invalid("messages", "messages is required.")),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "messages",
                    "messages must be an array.",
                ));
            }
        };
        input.insert("messages".to_owned(), Value::Array(messages));
        if let Some(tools) = present(body.remove("tools")) {
            input.insert("tools".to_owned(), tools_of(tools)?);
        }
        if let Some(choice) = present(body.remove("tool_choice")) {
            input.insert("tool_choice".to_owned(), tool_choice_of(choice)?);
        }
        if let Some(v) = present(body.remove("parallel_tool_calls")) {
            input.insert("parallel_tool_calls".to_owned(), v);
        }
        if let Some(format) = present(body.remove("response_format")) {
            input.insert("response_format".to_owned(), response_format_of(format)?);
        }
        if let Some(effort) = present(body.remove("reasoning_effort"))
            && let Some(reasoning) = reasoning_of(effort)?
        {
            input.insert("reasoning".to_owned(), reasoning);
        }
        // `max_completion_tokens` is the newer name of `max_tokens`; both
        // count the reasoning, the kind's `max_tokens` the answer alone.
        let max_completion = body.remove("max_completion_tokens");
        let max = body.remove("max_tokens");
        if let Some(v) = present(max_completion).or(present(max)) {
            let v = match v.as_u64() {
                Some(n) => {
                    let reasoning = Reasoning::of(input.get("reasoning"));
                    json!(Reasoning::answer_tokens(reasoning, n))
                }
                None => v,
            };
            input.insert("max_tokens".to_owned(), v);
        }
        for field in [
            "temperature",
            "top_p",
            "seed",
            "presence_penalty",
            "frequency_penalty",
        ] {
            if let Some(v) = present(body.remove(field)) {
                input.insert(field.to_owned(), v);
            }
        }
        match body.remove("stop") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                input.insert("stop".to_owned(), json!([s]));
            }
            Some(v) => {
                input.insert("stop".to_owned(), v);
            }
        }
        // Everything else (a provider's own fields) goes to the upstream
        // request as it is.
        if !body.is_empty() {
            input.insert("options".to_owned(), Value::Object(body));
        }
        Ok(Self {
            model,
            input,
            metadata,
            extras,
            stream,
            include_usage,
        })
    }
}

fn present(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

/// `[{type: "function", function: {name, description?, parameters?,
/// strict?}}]` as the kind's `[{name, description?, parameters?}]`.
/// `strict` is dropped: the kind does not enforce a tool's schema on its
/// arguments, and refusing it would refuse the Agents SDK, which sets it.
fn tools_of(tools: Value) -> Result<Value, OpenAiError> {
    let Value::Array(tools) = tools else {
        return Err(OpenAiError::invalid("tools", "tools must be an array."));
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.into_iter().enumerate() {
        let param = format!("tools[{i}]");
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(_) => {
                return Err(OpenAiError::unsupported(
                    &format!("{param}.type"),
                    "A tool other than a function",
                ));
            }
            None => {
                return Err(OpenAiError::invalid(
                    &format!("{param}.type"),
                    "A tool's type must be \"function\".",
                ));
            }
        }
        let Some(Value::Object(mut f)) = tool.get("function").cloned() else {
            return Err(OpenAiError::invalid(
                &format!("{param}.function"),
                "A tool needs a function object.",
            ));
        };
        let mut t = Map::new();
        for field in ["name", "description", "parameters"] {
            if let Some(v) = present(f.remove(field)) {
                t.insert(field.to_owned(), v);
            }
        }
        out.push(Value::Object(t));
    }
    Ok(Value::Array(out))
}

/// "auto" | "none" | "required" | `{type: "function", function: {name}}`.
fn tool_choice_of(choice: Value) -> Result<Value, OpenAiError> {
    match &choice {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(choice),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match choice.pointer("/function/name") {
                Some(Value::String(name)) => Ok(json!({"name": name})),
                _ => Err(OpenAiError::invalid(
                    "tool_choice.function.name",
                    "tool_choice.function.name is required.",
                )),
            }
        }
        Value::Object(_) => Err(OpenAiError::unsupported(
            "tool_choice",
            "A tool_choice other than a function",
        )),
        _ => Err(OpenAiError::invalid(
            "tool_choice",
            "tool_choice must be \"auto\", \"none\", \"required\" or a function.",
        )),
    }
}

/// `text`, `json_object`, or `json_schema: {name, schema, strict?}` (the
/// kind's format has the schema's fields at its top).
fn response_format_of(format: Value) -> Result<Value, OpenAiError> {
    let kind = format.get("type").and_then(Value::as_str);
    match kind {
        Some("text") => Ok(json!({"type": "text"})),
        Some("json_object") => Ok(json!({"type": "json_object"})),
        Some("json_schema") => {
            let s = format.get("json_schema").cloned().unwrap_or(Value::Null);
            let (Some(name), Some(schema)) = (s.get("name"), s.get("schema")) else {
                return Err(OpenAiError::invalid(
                    "response_format.json_schema",
                    "response_format.json_schema needs a name and a schema.",
                ));
            };
            let mut out = json!({"type": "json_schema", "name": name, "schema": schema});
            if let Some(strict) = present(s.get("strict").cloned()) {
                out["strict"] = strict;
            }
            Ok(out)
        }
        _ => Err(OpenAiError::invalid(
            "response_format",
            "response_format.type must be \"text\", \"json_object\" or \"json_schema\".",
        )),
    }
}

/// `reasoning_effort` as the kind's reasoning: `minimal` is `low` (the
/// least the kind asks of every family), `xhigh` is `high` (its most),
/// `none` asks for nothing.
fn reasoning_of(effort: Value) -> Result<Option<Value>, OpenAiError> {
    let effort = match effort.as_str() {
        Some("none") => return Ok(None),
        Some("minimal" | "low") => "low",
        Some("medium") => "medium",
        Some("high" | "xhigh") => "high",
        _ => {
            return Err(OpenAiError::invalid(
                "reasoning_effort",
                "reasoning_effort must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\".",
            ));
        }
    };
    Ok(Some(json!({"effort": effort})))
}

/// One message, as the `chat` kind takes it: `developer` is `system`;
/// assistant tool calls have their arguments parsed; content parts are the
/// kind's parts (a content of text parts only is their text).
fn message(i: usize, m: Value) -> Result<Value, OpenAiError> {
    let param = |field: &str| format!("messages[{i}].{field}");
    let Value::Object(mut m) = m else {
        return Err(OpenAiError::invalid(
            &format!("messages[{i}]"),
            "Each message must be an object.",
        ));
    };
    let role = match m.remove("role") {
        Some(Value::String(r)) => match r.as_str() {
            "developer" => "system".to_owned(),
            "system" | "user" | "assistant" | "tool" => r,
            "function" => {
                return Err(OpenAiError::unsupported(
                    &param("role"),
                    "A message of role \"function\" (use \"tool\")",
                ));
            }
            _ => {
                return Err(OpenAiError::invalid(
                    &param("role"),
                    "role must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\".",
                ));
            }
        },
        _ => return Err(OpenAiError::invalid(&param("role"), "role is required.")),
    };
    let mut out = Map::new();
    let content = match present(m.remove("content")) {
        Some(c) => Some(content_of(i, c)?),
        // An assistant message that only calls tools has no content.
        None if role == "assistant" => None,
        None => {
            return Err(OpenAiError::invalid(
                &param("content"),
                "content is required.",
            ));
        }
    };
    if role == "tool" {
        match m.remove("tool_call_id") {
            Some(Value::String(id)) => {
                out.insert("tool_call_id".to_owned(), Value::String(id));
            }
            _ => {
                return Err(OpenAiError::invalid(
                    &param("tool_call_id"),
                    "A tool message needs its tool_call_id.",
                ));
            }
        }
    }
    out.insert("role".to_owned(), Value::String(role.clone()));
    if let Some(c) = content {
        out.insert("content".to_owned(), c);
    }
    if let Some(calls) = present(m.remove("tool_calls")) {
        if role != "assistant" {
            return Err(OpenAiError::invalid(
                &param("tool_calls"),
                "Only an assistant message may have tool_calls.",
            ));
        }
        out.insert("tool_calls".to_owned(), tool_calls_of(i, calls)?);
    }
    // Taskgate's own field, as a completion gave it (checked by the kind).
    // Another gateway's items of the same name (OpenRouter's
    // `reasoning.text`, …) are not Taskgate's to send back: left out.
    if role == "assistant"
        && let Some(Value::Array(details)) = present(m.remove("reasoning_details"))
    {
        let ours: Vec<Value> = details
            .into_iter()
            .filter(|d| {
                matches!(
                    d.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted" | "tool_call_signature")
                ) && matches!(
                    d.get("format").and_then(Value::as_str),
                    Some("anthropic" | "gemini")
                )
            })
            .collect();
        if !ours.is_empty() {
            out.insert("reasoning_details".to_owned(), Value::Array(ours));
        }
    }
    Ok(Value::Object(out))
}

/// An assistant message's `tool_calls`, their arguments parsed from the
/// JSON string OpenAI sends them as.
fn tool_calls_of(i: usize, calls: Value) -> Result<Value, OpenAiError> {
    let Value::Array(calls) = calls else {
        return Err(OpenAiError::invalid(
            &format!("messages[{i}].tool_calls"),
            "tool_calls must be an array.",
        ));
    };
    let mut out = Vec::with_capacity(calls.len());
    for (j, call) in calls.into_iter().enumerate() {
        let param = format!("messages[{i}].tool_calls[{j}]");
        let (Some(Value::String(id)), Some(Value::String(name))) =
            (call.get("id"), call.pointer("/function/name"))
        else {
            return Err(OpenAiError::invalid(
                &param,
                format!("{param} needs an id and a function.name."),
            ));
        };
        let arguments = match call.pointer("/function/arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(OpenAiError::invalid(
                        &format!("{param}.function.arguments"),
                        format!("The arguments of {param} are not a JSON object in a string."),
                    ));
                }
            },
            Some(_) => {
                return Err(OpenAiError::invalid(
                    &format!("{param}.function.arguments"),
                    format!("The arguments of {param} must be a JSON string."),
                ));
            }
        };
        out.push(json!({"id": id, "name": name, "arguments": arguments}));
    }
    Ok(Value::Array(out))
}

/// A message's content: a string, or parts (`text`, `image_url`, `file`).
fn content_of(i: usize, content: Value) -> Result<Value, OpenAiError> {
    let parts = match content {
        Value::String(_) => return Ok(content),
        Value::Array(parts) => parts,
        _ => {
            return Err(OpenAiError::invalid(
                &format!("messages[{i}].content"),
                "content must be a string or an array of parts.",
            ));
        }
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.into_iter().enumerate() {
        out.push(part_of(&format!("messages[{i}].content[{j}]"), part)?);
    }
    // Text parts only are one text, as before parts were carried.
    if out.iter().all(|p| p["type"] == "text") {
        let texts: Vec<&str> = out.iter().filter_map(|p| p["text"].as_str()).collect();
        return Ok(Value::String(texts.join("\n")));
    }
    Ok(Value::Array(out))
}

fn part_of(param: &str, part: Value) -> Result<Value, OpenAiError> {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => match part.get("text") {
            Some(Value::String(t)) => Ok(json!({"type": "text", "text": t})),
            _ => Err(OpenAiError::invalid(param, "A text part needs its text.")),
        },
        Some("image_url") => {
            let url = match part.pointer("/image_url/url") {
                Some(Value::String(u)) => u,
                _ => {
                    return Err(OpenAiError::invalid(
                        &format!("{param}.image_url.url"),
                        "An image_url part needs its url.",
                    ));
                }
            };
            media("image", &format!("{param}.image_url.url"), url)
        }
        Some("file") => {
            let file = part.get("file").cloned().unwrap_or(Value::Null);
            if file.get("file_id").is_some_and(|v| !v.is_null()) {
                return Err(OpenAiError::unsupported(
                    &format!("{param}.file.file_id"),
                    "A file by id (there is no files API: send file_data)",
                ));
            }
            match file.get("file_data") {
                Some(Value::String(d)) => media("document", &format!("{param}.file.file_data"), d),
                _ => Err(OpenAiError::invalid(
                    &format!("{param}.file.file_data"),
                    "A file part needs its file_data (a data: URL).",
                )),
            }
        }
        _ => Err(OpenAiError::unsupported(
            param,
            "A content part other than text, image_url or file",
        )),
    }
}

/// A media part from a URL: a `data:` URL is inline data with its media
/// type; http(s) is fetched by the provider.
fn media(kind: &str, param: &str, url: &str) -> Result<Value, OpenAiError> {
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((media_type, data)) = rest
            .split_once(',')
            .and_then(|(head, data)| Some((head.strip_suffix(";base64")?, data)))
        else {
            return Err(OpenAiError::invalid(
                param,
                "A data URL must be data:<media type>;base64,<data>.",
            ));
        };
        return Ok(json!({"type": kind, "data": data, "media_type": media_type}));
    }
    if kind == "image" && (url.starts_with("https://") || url.starts_with("http://")) {
        return Ok(json!({"type": kind, "url": url}));
    }
    Err(OpenAiError::invalid(
        param,
        if kind == "image" {
            "An image URL must be http(s) or a data: URL."
        } else {
            "file_data must be a data: URL."
        },
    ))
}
