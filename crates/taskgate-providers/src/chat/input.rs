//! The `chat` kind's input, typed: what a client sends, whichever provider
//! answers. Its JSON Schema (`schema.rs`) checks the shape; [`ChatInput::parse`]
//! adds the rules a schema cannot say (a tool result answers an earlier call,
//! a forced tool exists, base64 decodes…).

use std::collections::HashSet;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::schema::Violation;

/// Image types every chat provider reads.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// Document types a chat input may carry (what each provider reads differs).
pub const DOCUMENT_TYPES: [&str; 2] = ["application/pdf", "text/plain"];

/// A chat call's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatInput {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Asks for the same answer to the same input, where the provider can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Provider-specific request fields, merged into the upstream body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: Content,
    },
    User {
        content: Content,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The provider's record of the reasoning behind this reply, as the
        /// output's `reasoning_details` gave it: sent back to the family
        /// that made it, left out for any other.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning_details: Vec<ReasoningDetail>,
    },
    Tool {
        tool_call_id: String,
        content: Content,
    },
}

/// A message's content: a text, or parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

impl Content {
    /// The text parts joined (media parts left out).
    pub fn text(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }

    /// The content as parts (a text is one text part).
    pub fn parts(&self) -> Vec<Part> {
        match self {
            Self::Text(t) => vec![Part::Text { text: t.clone() }],
            Self::Parts(parts) => parts.clone(),
        }
    }
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Image {
        #[serde(flatten)]
        source: Source,
    },
    Document {
        #[serde(flatten)]
        source: Source,
    },
}

/// Where a media part's bytes are: inline (base64) or at a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Source {
    Data {
        data: String,
        media_type: String,
    },
    Url {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
}

impl Source {
    /// The media type given, or else guessed from a URL's extension.
    pub fn media_type(&self) -> Option<String> {
        match self {
            Self::Data { media_type, .. } => Some(media_type.clone()),
            Self::Url {
                media_type: Some(m),
                ..
            } => Some(m.clone()),
            Self::Url { url, .. } => media_type_of_url(url).map(str::to_owned),
        }
    }
}

/// The media type a URL's path extension tells, for the types chat reads.
pub fn media_type_of_url(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        _ => return None,
    })
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments' JSON Schema (an object schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(ToolMode),
    /// This tool must be called.
    Named {
        name: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// The model decides.
    Auto,
    /// No tool may be called.
    None,
    /// Some tool must be called.
    Required,
}

/// A call of a tool by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// A provider's own record of the model's reasoning, which a later turn must
/// send back as it was for the provider to go on (Anthropic's signed
/// thinking blocks before a tool call it answers, Gemini's thought signature
/// on a function call). Opaque to Taskgate: only the family that made it
/// reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningDetail {
    /// A block of reasoning and the provider's signature over it.
    Thinking {
        format: ReasoningFormat,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider gives encrypted only.
    Redacted {
        format: ReasoningFormat,
        data: String,
    },
    /// The provider's signature on one of the reply's tool calls.
    ToolCallSignature {
        format: ReasoningFormat,
        tool_call_id: String,
        signature: String,
    },
}

impl ReasoningDetail {
    pub fn format(&self) -> ReasoningFormat {
        match self {
            Self::Thinking { format, .. }
            | Self::Redacted { format, .. }
            | Self::ToolCallSignature { format, .. } => *format,
        }
    }
}

/// Which family's wire format a [`ReasoningDetail`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningFormat {
    Anthropic,
    Gemini,
}

/// The form of the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema {
        name: String,
        schema: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

impl ResponseFormat {
    /// The schema a JSON reply must follow: `None` for text, `{"type":
    /// "object"}` for any JSON object.
    pub fn json_schema(&self) -> Option<Value> {
        match self {
            Self::Text => None,
            Self::JsonObject => Some(serde_json::json!({"type": "object"})),
            Self::JsonSchema { schema, .. } => Some(schema.clone()),
        }
    }
}

/// How much the model may reason before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reasoning {
    Effort { effort: Effort },
    Budget { max_tokens: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

impl Reasoning {
    /// A budget in tokens: 1024, 4096 or 16384 for an effort, else the one given.
    /// The reasoning an input's `reasoning` field asks for, if any.
    pub fn of(field: Option<&Value>) -> Option<Self> {
        field.and_then(|r| Self::deserialize(r).ok())
    }

    /// The tokens of the answer alone, from a limit on the wire that counts
    /// the reasoning too (Anthropic's `max_tokens` with thinking, OpenAI's
    /// `max_completion_tokens`): the kind's `max_tokens` is the answer's, and
    /// each family adds the budget back (at least 1 is left).
    pub fn answer_tokens(reasoning: Option<Self>, wire_max: u64) -> u64 {
        match reasoning {
            Some(r) => wire_max.saturating_sub(r.budget_tokens()).max(1),
            None => wire_max,
        }
    }

    pub fn budget_tokens(self) -> u64 {
        match self {
            Self::Effort {
                effort: Effort::Low,
            } => 1024,
            Self::Effort {
                effort: Effort::Medium,
            } => 4096,
            Self::Effort {
                effort: Effort::High,
            } => 16384,
            Self::Budget { max_tokens } => max_tokens,
        }
    }

    /// An effort: the one given, else the nearest to the budget (below
    /// 2048 low, below 8192 medium, else high).
    pub fn effort(self) -> Effort {
        match self {
            Self::Effort { effort } => effort,
            Self::Budget { max_tokens } if max_tokens < 2048 => Effort::Low,
            Self::Budget { max_tokens } if max_tokens < 8192 => Effort::Medium,
            Self::Budget { .. } => Effort::High,
        }
    }
}

impl ChatInput {
    /// Reads an input that satisfies the kind's JSON Schema and checks the
    /// rules across its fields; every broken rule is reported.
    pub fn parse(input: &Value) -> Result<ChatInput, Vec<Violation>> {
        let mut violations = Vec::new();
        if let Some(messages) = input.get("messages").and_then(Value::as_array) {
            for (i, m) in messages.iter().enumerate() {
                if m.get("content").is_some_and(Value::is_null) {
                    violations.push(violation(
                        format!("/messages/{i}/content"),
                        "is null: leave `content` out instead",
                    ));
                }
            }
        }
        // From the borrowed value: an input of inline files is not copied twice.
        let parsed = match ChatInput::deserialize(input) {
            Ok(p) => p,
            Err(e) => {
                violations.push(violation(String::new(), e.to_string()));
                return Err(violations);
            }
        };
        parsed.check(&mut violations);
        if violations.is_empty() {
            Ok(parsed)
        } else {
            Err(violations)
        }
    }

    fn check(&self, out: &mut Vec<Violation>) {
        let mut names = HashSet::new();
        for (i, tool) in self.tools.iter().enumerate() {
            if !valid_tool_name(&tool.name) {
                out.push(violation(
                    format!("/tools/{i}/name"),
                    "must be 1 to 64 letters, digits, `_` or `-`",
                ));
            }
            if !names.insert(tool.name.as_str()) {
                out.push(violation(
                    format!("/tools/{i}/name"),
                    format!("another tool is named {:?}", tool.name),
                ));
            }
        }
        match &self.tool_choice {
            Some(ToolChoice::Mode(ToolMode::Required)) if self.tools.is_empty() => {
                out.push(violation("/tool_choice", "`required` needs `tools`"));
            }
            Some(ToolChoice::Named { name }) if !names.contains(name.as_str()) => {
                out.push(violation(
                    "/tool_choice/name",
                    format!("no tool is named {name:?}"),
                ));
            }
            _ => {}
        }
        // The ids of the calls made so far. An id is unique within one
        // assistant message; across them it may come again, as the ids a
        // provider without ids is given (`call_0`, …) do in a tool loop.
        let mut calls: HashSet<&str> = HashSet::new();
        for (i, m) in self.messages.iter().enumerate() {
            let (content, media) = match m {
                Message::User { content } => (Some(content), true),
                Message::System { content } | Message::Tool { content, .. } => {
                    (Some(content), false)
                }
                Message::Assistant {
                    content,
                    tool_calls,
                    ..
                } => {
                    if content.is_none() && tool_calls.is_empty() {
                        out.push(violation(
                            format!("/messages/{i}"),
                            "an assistant message needs `content` or `tool_calls`",
                        ));
                    }
                    let mut here: HashSet<&str> = HashSet::new();
                    for (j, call) in tool_calls.iter().enumerate() {
                        calls.insert(call.id.as_str());
                        if !here.insert(call.id.as_str()) {
                            out.push(violation(
                                format!("/messages/{i}/tool_calls/{j}/id"),
                                format!(
                                    "another tool call of this message has the id {:?}",
                                    call.id
                                ),
                            ));
                        }
                    }
                    (content.as_ref(), false)
                }
            };
            if let Message::Tool { tool_call_id, .. } = m
                && !calls.contains(tool_call_id.as_str())
            {
                out.push(violation(
                    format!("/messages/{i}/tool_call_id"),
                    format!(
                        "answers no tool call of an earlier assistant message ({tool_call_id:?})"
                    ),
                ));
            }
            if let Some(Content::Parts(parts)) = content {
                for (j, part) in parts.iter().enumerate() {
                    check_part(part, media, &format!("/messages/{i}/content/{j}"), out);
                }
            }
        }
    }

    /// The system messages' texts joined by a blank line, if any.
    pub fn system_text(&self) -> Option<String> {
        let texts: Vec<String> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::System { content } => Some(content.text()),
                _ => None,
            })
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n\n"))
    }

    /// The tool the reply must call, if a tool call is forced: the named
    /// one, or the first for `required`.
    pub fn forced_tool(&self) -> Option<&Tool> {
        match &self.tool_choice {
            Some(ToolChoice::Named { name }) => self.tools.iter().find(|t| &t.name == name),
            Some(ToolChoice::Mode(ToolMode::Required)) => self.tools.first(),
            _ => None,
        }
    }

    /// The name of the tool called with `id` by the latest assistant message
    /// before message `before` (ids may come again in later turns).
    pub fn tool_name_of(&self, before: usize, id: &str) -> Option<&str> {
        self.messages[..before.min(self.messages.len())]
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| c.name.as_str()),
                _ => None,
            })
    }
}

fn check_part(part: &Part, media: bool, path: &str, out: &mut Vec<Violation>) {
    let (source, kinds, what) = match part {
        Part::Text { .. } => return,
        Part::Image { source } => (source, &IMAGE_TYPES[..], "an image"),
        Part::Document { source } => (source, &DOCUMENT_TYPES[..], "a document"),
    };
    if !media {
        out.push(violation(
            path,
            format!("{what} may only be in a user message"),
        ));
    }
    let given = match source {
        Source::Data { media_type, .. } => Some(media_type),
        Source::Url { media_type, .. } => media_type.as_ref(),
    };
    if let Some(m) = given
        && !kinds.contains(&m.as_str())
    {
        out.push(violation(
            format!("{path}/media_type"),
            format!("{what} must be one of {}", kinds.join(", ")),
        ));
    }
    if let Source::Data { data, .. } = source
        && base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .is_err()
    {
        out.push(violation(format!("{path}/data"), "is not valid base64"));
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn violation(path: impl Into<String>, message: impl Into<String>) -> Violation {
    Violation {
        path: path.into(),
        message: message.into(),
    }
}
