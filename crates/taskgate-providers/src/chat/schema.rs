//! The `chat` kind's input and output JSON Schemas (draft 2020-12). The
//! OpenAPI document embeds them as they are, so they use no `$ref`: shared
//! pieces are built by the functions below.

use serde_json::{Value, json};

use super::input::{DOCUMENT_TYPES, IMAGE_TYPES};

const MAX_TEXT: u64 = 1_000_000;

pub fn input() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1000,
                "description": "The conversation so far. `system` messages give instructions; a `tool` message gives the result of a tool call an earlier `assistant` message made.",
                "items": {"oneOf": [
                    message("system", "Instructions for the model.", text_content()),
                    message("user", "What the user says: text, images and documents.", user_content()),
                    assistant_message(),
                    tool_message(),
                ]}
            },
            "tools": {
                "type": "array",
                "maxItems": 128,
                "description": "Tools (functions) the model may call. Names are unique.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["name"],
                    "properties": {
                        "name": tool_name(),
                        "description": {"type": "string", "maxLength": 10_000,
                                        "description": "What the tool does, for the model."},
                        "parameters": {"type": "object",
                                       "description": "The arguments' JSON Schema, an object schema."}
                    }
                }
            },
            "tool_choice": {
                "description": "`auto` (the model decides, the default), `none` (no tool call), `required` (some tool call) or `{name}` (a call of that tool). `required` and `{name}` need `tools`.",
                "oneOf": [
                    {"type": "string", "enum": ["auto", "none", "required"]},
                    {"type": "object", "additionalProperties": false, "required": ["name"],
                     "properties": {"name": tool_name()}}
                ]
            },
            "parallel_tool_calls": {"type": "boolean",
                                    "description": "Whether the model may call several tools in one reply (the provider's default when left out)."},
            "response_format": {
                "description": "The reply's form: `text` (the default), `json_object` (a JSON object) or `json_schema` (JSON valid for `schema`). The parsed reply is the output's `json`.",
                "oneOf": [
                    {"type": "object", "additionalProperties": false, "required": ["type"],
                     "properties": {"type": {"type": "string", "enum": ["text", "json_object"]}}},
                    {"type": "object", "additionalProperties": false, "required": ["type", "name", "schema"],
                     "properties": {
                        "type": {"const": "json_schema"},
                        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$",
                                 "description": "The schema's name."},
                        "schema": {"type": "object", "description": "The JSON Schema the reply follows."},
                        "strict": {"type": "boolean",
                                   "description": "Whether the provider must follow the schema exactly, where it can."}
                     }}
                ]
            },
            "reasoning": {
                "description": "Let the model reason before answering: an `effort`, or a budget of `max_tokens` (each provider takes the one it knows: effort low, medium, high is a budget of 1024, 4096, 16384 tokens; a budget is the nearest effort).",
                "oneOf": [
                    {"type": "object", "additionalProperties": false, "required": ["effort"],
                     "properties": {"effort": {"type": "string", "enum": ["low", "medium", "high"]}}},
                    {"type": "object", "additionalProperties": false, "required": ["max_tokens"],
                     "properties": {"max_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000}}}
                ]
            },
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000,
                           "description": "Most tokens to generate for the answer; with `reasoning`, the reasoning's budget comes on top."},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "stop": {"type": "array", "maxItems": 4, "items": {"type": "string", "minLength": 1}},
            "seed": {"type": "integer",
                     "description": "Asks for the same answer to the same input, as far as the provider can (OpenAI and compatibles, Gemini; Anthropic has none)."},
            "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2,
                                 "description": "Penalizes tokens that have appeared at all (OpenAI and compatibles, Gemini; Anthropic takes 0 only)."},
            "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2,
                                  "description": "Penalizes tokens by how often they have appeared (OpenAI and compatibles, Gemini; Anthropic takes 0 only)."},
            "options": {
                "type": "object",
                "description": "Provider-specific request fields, merged into the upstream request body as they are (see the API reference)."
            }
        }
    })
}

pub fn output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["text", "tool_calls", "finish_reason", "model"],
        "properties": {
            "text": {"type": "string", "description": "The generated reply (empty when the model only called tools)."},
            "tool_calls": {"type": "array", "description": "The tools the model calls, in order: answer each with a `tool` message.",
                           "items": tool_call()},
            "json": {"description": "The reply parsed, when a JSON `response_format` was asked and the text is JSON."},
            "reasoning": {"type": "string", "description": "The model's reasoning, when the provider returns it."},
            "reasoning_details": reasoning_details(),
            "finish_reason": {"type": "string",
                              "enum": ["stop", "length", "content_filter", "tool_calls", "other"],
                              "description": "`stop` (done), `length` (`max_tokens` reached), `content_filter`, `tool_calls` (the model waits for tool results), `other`."},
            "model": {"type": "string", "description": "The model that answered, as the provider names it."}
        }
    })
}

fn tool_name() -> Value {
    json!({"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"})
}

fn tool_call() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["id", "name", "arguments"],
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 256,
                   "description": "The call's id, which the `tool` message answering it names."},
            "name": tool_name(),
            "arguments": {"type": "object", "description": "The arguments, valid for the tool's `parameters` as the model understood them."}
        }
    })
}

fn message(role: &str, description: &str, content: Value) -> Value {
    json!({
        "type": "object",
        "description": description,
        "additionalProperties": false,
        "required": ["role", "content"],
        "properties": {"role": {"const": role}, "content": content}
    })
}

fn assistant_message() -> Value {
    json!({
        "type": "object",
        "description": "A reply of the model's: text, tool calls, or both (leave out `content` rather than set it to null).",
        "additionalProperties": false,
        "required": ["role"],
        "anyOf": [{"required": ["content"]}, {"required": ["tool_calls"]}],
        "properties": {
            "role": {"const": "assistant"},
            "content": text_content(),
            "tool_calls": {"type": "array", "maxItems": 128, "items": tool_call()},
            "reasoning_details": reasoning_details()
        }
    })
}

/// The provider's record of its reasoning, carried from an output to the
/// assistant message that repeats it.
fn reasoning_details() -> Value {
    let format = json!({"type": "string", "enum": ["anthropic", "gemini"],
                        "description": "The family whose wire format this is: sent back to that family only."});
    let opaque = json!({"type": "string", "minLength": 1, "maxLength": MAX_TEXT});
    json!({
        "type": "array",
        "maxItems": 1000,
        "description": "The provider's own record of the model's reasoning (Anthropic's signed thinking blocks, Gemini's thought signatures on tool calls). Send it back unchanged in the `assistant` message that repeats this reply: a provider that requires it (Anthropic with thinking and tools, Gemini 3 with function calls) refuses a tool loop without it.",
        "items": {"oneOf": [
            {"type": "object", "additionalProperties": false,
             "required": ["type", "format", "text"],
             "properties": {"type": {"const": "thinking"}, "format": format,
                            "text": {"type": "string", "maxLength": MAX_TEXT},
                            "signature": opaque}},
            {"type": "object", "additionalProperties": false,
             "required": ["type", "format", "data"],
             "properties": {"type": {"const": "redacted"}, "format": format, "data": opaque}},
            {"type": "object", "additionalProperties": false,
             "required": ["type", "format", "tool_call_id", "signature"],
             "properties": {"type": {"const": "tool_call_signature"}, "format": format,
                            "tool_call_id": {"type": "string", "minLength": 1, "maxLength": 256},
                            "signature": opaque}}
        ]}
    })
}

fn tool_message() -> Value {
    json!({
        "type": "object",
        "description": "A tool's result, answering the call of an earlier assistant message.",
        "additionalProperties": false,
        "required": ["role", "tool_call_id", "content"],
        "properties": {
            "role": {"const": "tool"},
            "tool_call_id": {"type": "string", "minLength": 1, "maxLength": 256},
            "content": text_content()
        }
    })
}

fn text_part() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string", "maxLength": MAX_TEXT}}
    })
}

/// A text, or text parts.
fn text_content() -> Value {
    json!({"oneOf": [
        {"type": "string", "maxLength": MAX_TEXT},
        {"type": "array", "maxItems": 1000, "items": text_part()}
    ]})
}

/// A text, or parts: text, images, documents.
fn user_content() -> Value {
    json!({"oneOf": [
        {"type": "string", "maxLength": MAX_TEXT},
        {"type": "array", "maxItems": 1000, "items": {"oneOf": [
            text_part(),
            media_part("image", &IMAGE_TYPES, "An image, inline (`data`, base64, with its `media_type`) or at a public `url`."),
            media_part("document", &DOCUMENT_TYPES, "A document, inline (`data`, base64, with its `media_type`) or at a public `url` (its `media_type` given or told by the extension). Which types a provider reads differs: see the API reference."),
        ]}}
    ]})
}

fn media_part(kind: &str, types: &[&str], description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "additionalProperties": false,
        "required": ["type"],
        "properties": {
            "type": {"const": kind},
            "url": {"type": "string", "format": "uri", "maxLength": 4096},
            "data": {"type": "string", "minLength": 1, "contentEncoding": "base64"},
            "media_type": {"type": "string", "enum": types}
        },
        "oneOf": [
            {"required": ["url"], "not": {"required": ["data"]}},
            {"required": ["data", "media_type"], "not": {"required": ["url"]}}
        ]
    })
}
