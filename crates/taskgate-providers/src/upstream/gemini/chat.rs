//! The chat kind in Gemini's `generateContent` format.
//!
//! | normalized | Gemini request |
//! |---|---|
//! | `system` messages | `systemInstruction:{parts:[{text}]}`, their texts joined by a blank line |
//! | user / assistant messages | `contents[]` of role `user` / `model`; consecutive turns of one role merged |
//! | `{type:"text", text}` | `{text}` |
//! | `{type:"image"\|"document", data, media_type}` | `{inlineData:{mimeType, data}}` |
//! | `{type:"image"\|"document", url, media_type?}` | `{fileData:{mimeType, fileUri}}`; the type is the one given or the URL's extension's, else unsupported |
//! | assistant `tool_calls[{id,name,arguments}]` | `{functionCall:{name, args}}` parts of the model turn, each with the `thoughtSignature` its `reasoning_details` give (`tool_call_signature`); the first call of a turn without one gets Google's documented stand-in `skip_thought_signature_validator` (Gemini 3 requires one) |
//! | `{role:"tool", tool_call_id, content}` | a `{functionResponse:{name, response:{content}}}` part of a user turn, `name` that of the call `tool_call_id` names |
//! | `tools[{name,description,parameters}]` | `tools:[{functionDeclarations:[{name, description, parametersJsonSchema}]}]` |
//! | `tool_choice` auto / none / required / `{name}` | `toolConfig.functionCallingConfig.mode` AUTO / NONE / ANY / ANY with `allowedFunctionNames:[name]` |
//! | `parallel_tool_calls: false` | unsupported (Gemini has no such switch); `true` is Gemini's way already |
//! | `response_format` json_object / json_schema | `generationConfig.responseMimeType:"application/json"` (+ `responseJsonSchema`) |
//! | `reasoning` | `generationConfig.thinkingConfig:{thinkingBudget, includeThoughts:true}`; `maxOutputTokens` (which counts thoughts) is then `max_tokens` plus the budget |
//! | `max_tokens`, `temperature`, `top_p`, `stop`, `seed`, `presence_penalty`, `frequency_penalty` | `generationConfig.maxOutputTokens`, `temperature`, `topP`, `stopSequences`, `seed`, `presencePenalty`, `frequencyPenalty` |
//!
//! | Gemini answer | normalized |
//! |---|---|
//! | text parts | `text` |
//! | text parts with `thought:true` | `reasoning` |
//! | `functionCall{id?, name, args}` parts | `tool_calls[{id (Gemini's, else call_<n>), name, arguments: args}]` |
//! | a `functionCall` part's `thoughtSignature` | `reasoning_details[{type:"tool_call_signature", format:"gemini", tool_call_id, signature}]` |
//! | `finishReason` STOP / MAX_TOKENS / SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY | `stop` (`tool_calls` when the reply calls a tool) / `length` / `content_filter`; else `other`; a blocked prompt: `content_filter` |
//! | `usageMetadata.promptTokenCount` (cached part included) / `cachedContentTokenCount` | `input_tokens` / `cached_input_tokens` |
//! | `candidatesTokenCount` + `thoughtsTokenCount` / `thoughtsTokenCount` | `output_tokens` (Gemini counts thoughts apart but bills them as output) / `reasoning_tokens` |
//! | streamed chunks (each a whole response) | text, reasoning and tool-call pieces (a call comes whole in one piece) |

use serde_json::{Map, Value, json};

use crate::chat::{
    ChatInput, ChatOutput, Content, FinishReason, Message, Part, ReasoningDetail, ReasoningFormat,
    ResponseFormat, Source, ToolCall, ToolChoice, ToolMode,
};

/// The signature Google documents for a function call Gemini did not make
/// (a conversation from another model, or a client that dropped it), which
/// Gemini 3 then takes without its own.
const NO_SIGNATURE: &str = "skip_thought_signature_validator";
use crate::upstream::http::UpstreamError;
use crate::{ExecContext, Execution, Piece, Unsupported, Usage};

/// What a Gemini provider cannot carry (see the module's table).
pub(crate) fn unsupported(provider: &str, input: &ChatInput) -> Option<Unsupported> {
    if input.parallel_tool_calls == Some(false) {
        return Some(Unsupported {
            field: "parallel_tool_calls".to_owned(),
            message: format!(
                "The provider {provider} (Gemini protocol) has no switch to turn parallel tool calls off."
            ),
        });
    }
    for (i, m) in input.messages.iter().enumerate() {
        let Message::User {
            content: Content::Parts(parts),
        } = m
        else {
            continue;
        };
        for (j, p) in parts.iter().enumerate() {
            if let Part::Image { source } | Part::Document { source } = p
                && source.media_type().is_none()
            {
                return Some(Unsupported {
                    field: format!("messages[{i}].content[{j}]"),
                    message: format!(
                        "The provider {provider} (Gemini protocol) needs a file's type: give `media_type`, or a URL whose extension tells it."
                    ),
                });
            }
        }
    }
    None
}

/// The `generateContent` request body.
pub(crate) fn request_body(input: &ChatInput) -> Value {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for (i, m) in input.messages.iter().enumerate() {
        let (role, parts) = match m {
            Message::System { .. } => continue,
            Message::User { content } => ("user", content.parts().iter().map(part).collect()),
            Message::Assistant {
                content,
                tool_calls,
                reasoning_details,
            } => {
                let mut parts: Vec<Value> = content
                    .iter()
                    .flat_map(Content::parts)
                    .map(|p| part(&p))
                    .filter(|p| p.get("text") != Some(&json!("")))
                    .collect();
                // Gemini 3 requires the signature of the first call of a
                // turn back, on that call: the one it gave, else the
                // documented stand-in.
                parts.extend(tool_calls.iter().enumerate().map(|(k, c)| {
                    let mut p = json!({"functionCall": {"name": c.name, "args": c.arguments}});
                    let given = reasoning_details.iter().find_map(|d| match d {
                        ReasoningDetail::ToolCallSignature {
                            format: ReasoningFormat::Gemini,
                            tool_call_id,
                            signature,
                        } if *tool_call_id == c.id => Some(signature.as_str()),
                        _ => None,
                    });
                    if let Some(sig) = given.or((k == 0).then_some(NO_SIGNATURE)) {
                        p["thoughtSignature"] = json!(sig);
                    }
                    p
                }));
                ("model", parts)
            }
            Message::Tool {
                tool_call_id,
                content,
            } => {
                let name = input.tool_name_of(i, tool_call_id).unwrap_or_default();
                (
                    "user",
                    vec![json!({"functionResponse": {"name": name,
                                                     "response": {"content": content.text()}}})],
                )
            }
        };
        match turns.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let contents: Vec<Value> = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    let mut body = json!({ "contents": contents });
    if let Some(system) = input.system_text() {
        body["systemInstruction"] = json!({ "parts": [{ "text": system }] });
    }
    if !input.tools.is_empty() {
        let declarations: Vec<Value> = input
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name});
                if let Some(text) = &t.description {
                    d["description"] = json!(text);
                }
                if let Some(p) = &t.parameters {
                    d["parametersJsonSchema"] = p.clone();
                }
                d
            })
            .collect();
        body["tools"] = json!([{ "functionDeclarations": declarations }]);
    }
    if let Some(choice) = &input.tool_choice {
        let config = match choice {
            ToolChoice::Mode(ToolMode::Auto) => json!({"mode": "AUTO"}),
            ToolChoice::Mode(ToolMode::None) => json!({"mode": "NONE"}),
            ToolChoice::Mode(ToolMode::Required) => json!({"mode": "ANY"}),
            ToolChoice::Named { name } => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
        };
        body["toolConfig"] = json!({ "functionCallingConfig": config });
    }
    let mut config = Map::new();
    let mut set = |k: &str, v: Value| {
        config.insert(k.to_owned(), v);
    };
    if let Some(n) = input.max_tokens {
        // `max_tokens` is the answer's: Gemini counts thoughts in
        // `maxOutputTokens`, so the thinking budget comes on top.
        let budget = input.reasoning.map_or(0, |r| r.budget_tokens());
        set("maxOutputTokens", json!(n + budget));
    }
    if let Some(t) = input.temperature {
        set("temperature", json!(t));
    }
    if let Some(p) = input.top_p {
        set("topP", json!(p));
    }
    if let Some(stop) = &input.stop {
        set("stopSequences", json!(stop));
    }
    if let Some(seed) = input.seed {
        set("seed", json!(seed));
    }
    // A penalty of 0 asks nothing, and Gemini 2.5 and later refuse the
    // field whatever its value: left out. Another value is sent for the
    // models that take it (the others answer that penalties are not enabled).
    if let Some(p) = input.presence_penalty.filter(|p| *p != 0.0) {
        set("presencePenalty", json!(p));
    }
    if let Some(p) = input.frequency_penalty.filter(|p| *p != 0.0) {
        set("frequencyPenalty", json!(p));
    }
    match &input.response_format {
        Some(ResponseFormat::JsonObject) => set("responseMimeType", json!("application/json")),
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            set("responseMimeType", json!("application/json"));
            set("responseJsonSchema", schema.clone());
        }
        Some(ResponseFormat::Text) | None => {}
    }
    if let Some(r) = input.reasoning {
        set(
            "thinkingConfig",
            json!({"thinkingBudget": r.budget_tokens(), "includeThoughts": true}),
        );
    }
    if !config.is_empty() {
        body["generationConfig"] = Value::Object(config);
    }
    body
}

fn part(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({ "text": text }),
        Part::Image { source } | Part::Document { source } => match source {
            Source::Data { data, media_type } => {
                json!({"inlineData": {"mimeType": media_type, "data": data}})
            }
            Source::Url { url, .. } => {
                json!({"fileData": {"mimeType": source.media_type(), "fileUri": url}})
            }
        },
    }
}

pub(crate) fn finish_reason(finish: Option<&str>) -> FinishReason {
    match finish {
        Some("STOP") | None => FinishReason::Stop,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY",
        ) => FinishReason::ContentFilter,
        Some(_) => FinishReason::Other,
    }
}

/// What the chunks of an answer (or the one answer) add up to.
#[derive(Default)]
pub(crate) struct Answer {
    text: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    /// The thought signatures on calls.
    details: Vec<ReasoningDetail>,
    /// A call whose arguments were not an object.
    bad_call: bool,
    /// Whether any chunk had a candidate.
    candidates: bool,
    pub finish: Option<String>,
    /// The prompt itself was blocked: there is no candidate.
    pub blocked: bool,
    usage: Option<Value>,
    model: Option<String>,
}

impl Answer {
    /// Takes in a response (or a streamed chunk), sending its pieces to `ctx`.
    pub fn absorb(&mut self, chunk: &Value, mut ctx: Option<&mut ExecContext>) {
        if let Some(candidate) = chunk.pointer("/candidates/0") {
            self.candidates = true;
            let parts = candidate
                .pointer("/content/parts")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            for p in parts {
                let piece = self.part(p);
                if let (Some(ctx), Some(piece)) = (ctx.as_deref_mut(), piece) {
                    ctx.piece(piece);
                }
            }
            if let Some(f) = candidate.get("finishReason").and_then(Value::as_str) {
                self.finish = Some(f.to_owned());
            }
        }
        if chunk.pointer("/promptFeedback/blockReason").is_some() {
            self.blocked = true;
        }
        // Each chunk's counts are the totals so far: the last one wins.
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        if let Some(m) = chunk.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(m.to_owned());
        }
    }

    fn part(&mut self, p: &Value) -> Option<Piece> {
        if let Some(call) = p.get("functionCall") {
            let index = self.calls.len();
            let arguments = match call.get("args") {
                Some(Value::Object(m)) => m.clone(),
                None | Some(Value::Null) => Map::new(),
                Some(_) => {
                    self.bad_call = true;
                    Map::new()
                }
            };
            let c = ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map_or_else(|| format!("call_{index}"), str::to_owned),
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                arguments,
            };
            if let Some(sig) = p
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                self.details.push(ReasoningDetail::ToolCallSignature {
                    format: ReasoningFormat::Gemini,
                    tool_call_id: c.id.clone(),
                    signature: sig.to_owned(),
                });
            }
            let piece = Piece::ToolCall {
                index: index as u32,
                id: Some(c.id.clone()),
                name: Some(c.name.clone()),
                arguments: Value::Object(c.arguments.clone()).to_string(),
            };
            self.calls.push(c);
            return Some(piece);
        }
        let t = p.get("text").and_then(Value::as_str)?;
        if p.get("thought").and_then(Value::as_bool) == Some(true) {
            self.reasoning.push_str(t);
            Some(Piece::Reasoning(t.to_owned()))
        } else {
            self.text.push_str(t);
            Some(Piece::Text(t.to_owned()))
        }
    }

    pub fn finish(self, input: &ChatInput, model: &str) -> Result<Execution, UpstreamError> {
        if !self.candidates && !self.blocked {
            return Err(UpstreamError::invalid("The answer has no `candidates`."));
        }
        if self.bad_call || self.calls.iter().any(|c| c.name.is_empty()) {
            return Err(UpstreamError::invalid(
                "The provider sent a function call without a name or whose args are not an object.",
            ));
        }
        let finish = if self.blocked && !self.candidates {
            FinishReason::ContentFilter
        } else {
            match finish_reason(self.finish.as_deref()) {
                FinishReason::Stop if !self.calls.is_empty() => FinishReason::ToolCalls,
                other => other,
            }
        };
        let u = self.usage.unwrap_or(Value::Null);
        let n = |k: &str| u.get(k).and_then(Value::as_i64).filter(|n| *n >= 0);
        let thoughts = n("thoughtsTokenCount");
        // Google bills thinking tokens as output but counts them apart.
        let output = match (n("candidatesTokenCount"), thoughts) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let mut out = ChatOutput::new(
            self.text,
            finish,
            self.model.unwrap_or_else(|| model.to_owned()),
        );
        out.tool_calls = self.calls;
        out.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        out.reasoning_details = self.details;
        Ok(Execution {
            output: out.with_json(input.response_format.as_ref()).into_value(),
            usage: Usage {
                units: 1,
                input_tokens: n("promptTokenCount"),
                output_tokens: output,
                reasoning_tokens: thoughts,
                cached_input_tokens: n("cachedContentTokenCount"),
            },
        })
    }
}

#[cfg(test)]
mod tests;
