//! The `chat` kind's input and output as named components (`ChatInput`,
//! `ChatOutput`, `ChatMessage`, `ChatToolCall`, …), in every document
//! whatever the catalog holds, so that the client libraries have types for
//! them.
//!
//! They are cut out of the schemas every chat API has (`Kind::Chat`'s, the
//! single source in `taskgate_providers::chat::schema`), never written
//! again here: a field added there is in the components at the next start,
//! and in the clients at the next regenerate. Each piece is found by where
//! it is ([`At`]), and every copy of it (say, a tool call in an assistant
//! message and in the output) becomes a `$ref` to it; inlining the
//! references again gives the kind's schemas back exactly (tested below).

use serde_json::{Value, json};
use taskgate_providers::kinds::Kind;

const REF: &str = "#/components/schemas/";

/// Where a piece is, in the schemas cut so far (the input and output first).
enum At {
    /// A JSON pointer into the named schema.
    Pointer(&'static str, &'static str),
    /// The first object schema (depth first) under a JSON pointer into the
    /// named schema whose property `key` is the constant `value`: how a
    /// message is told by its `role` and a content part by its `type`.
    Tagged {
        within: (&'static str, &'static str),
        key: &'static str,
        value: &'static str,
    },
    /// The first schema (depth first) whose `oneOf` refers to that piece.
    OneOfWith(&'static str),
}

struct Piece {
    name: &'static str,
    at: At,
    /// Given to the component when the source gives it no description.
    description: &'static str,
}

const INPUT: &str = "ChatInput";
const OUTPUT: &str = "ChatOutput";

/// Innermost first, so that each outer piece refers to the inner ones.
const PIECES: &[Piece] = &[
    Piece {
        name: "ChatToolCall",
        at: At::Pointer(OUTPUT, "/properties/tool_calls/items"),
        description: "A call of a tool by the model (in `ChatOutput.tool_calls`, and sent back in \
            an assistant message): answer it with a `tool` message naming its `id`.",
    },
    Piece {
        name: "ChatReasoningDetail",
        at: At::Pointer(OUTPUT, "/properties/reasoning_details/items"),
        description: "The provider's own record of a piece of the model's reasoning (in \
            `ChatOutput.reasoning_details`, sent back unchanged in the assistant message that \
            repeats the reply), told apart by `type`: `thinking`, `redacted` or \
            `tool_call_signature`.",
    },
    Piece {
        name: "ChatTextPart",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "type",
            value: "text",
        },
        description: "A part of a message's content: text.",
    },
    Piece {
        name: "ChatImagePart",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "type",
            value: "image",
        },
        description: "A part of a user message's content: an image.",
    },
    Piece {
        name: "ChatDocumentPart",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "type",
            value: "document",
        },
        description: "A part of a user message's content: a document.",
    },
    Piece {
        name: "ChatContentPart",
        at: At::OneOfWith("ChatImagePart"),
        description: "A part of a user message's content: text, an image or a document, told \
            apart by `type`.",
    },
    Piece {
        name: "ChatSystemMessage",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "role",
            value: "system",
        },
        description: "Instructions for the model.",
    },
    Piece {
        name: "ChatUserMessage",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "role",
            value: "user",
        },
        description: "What the user says.",
    },
    Piece {
        name: "ChatAssistantMessage",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "role",
            value: "assistant",
        },
        description: "A reply of the model's.",
    },
    Piece {
        name: "ChatToolMessage",
        at: At::Tagged {
            within: (INPUT, "/properties/messages"),
            key: "role",
            value: "tool",
        },
        description: "A tool's result.",
    },
    Piece {
        name: "ChatMessage",
        at: At::Pointer(INPUT, "/properties/messages/items"),
        description: "A message of the conversation, told apart by `role`: `system`, `user`, \
            `assistant` or `tool`.",
    },
    Piece {
        name: "ChatTool",
        at: At::Pointer(INPUT, "/properties/tools/items"),
        description: "A tool (function) the model may call.",
    },
    Piece {
        name: "ChatToolChoice",
        at: At::Pointer(INPUT, "/properties/tool_choice"),
        description: "Whether and which tool the model calls.",
    },
    Piece {
        name: "ChatResponseFormat",
        at: At::Pointer(INPUT, "/properties/response_format"),
        description: "The reply's form.",
    },
    Piece {
        name: "ChatReasoning",
        at: At::Pointer(INPUT, "/properties/reasoning"),
        description: "How much the model may reason before answering.",
    },
];

const INPUT_DESCRIPTION: &str = "The input of every API of kind `chat`: a chat API's POST /call \
    `input` is a ChatInput (its `<slug>.input` component is this schema). Documents and \
    clients that know no chat API still have it, from the kind itself.";
const OUTPUT_DESCRIPTION: &str = "The output of a task of an API of kind `chat` (the task's \
    `output`, and the `done` stream event's task's): text, tool calls or both, with the \
    finish reason and the answering model.";

/// The components, in document order: `ChatInput`, `ChatOutput`, then the
/// pieces innermost first.
pub(super) fn components() -> Vec<(String, Value)> {
    let mut out = cut();
    for (name, schema) in &mut out {
        let description = match name.as_str() {
            INPUT => INPUT_DESCRIPTION,
            OUTPUT => OUTPUT_DESCRIPTION,
            other => PIECES
                .iter()
                .find(|p| p.name == other)
                .map_or("", |p| p.description),
        };
        if let Some(schema) = schema.as_object_mut() {
            schema
                .entry("description")
                .or_insert_with(|| json!(description));
        }
    }
    out
}

/// The kind's schemas cut into pieces, with no description added. A piece
/// that is not where [`At`] says (the source changed shape) is left inline,
/// and the test below fails.
fn cut() -> Vec<(String, Value)> {
    let mut done: Vec<(String, Value)> = vec![
        (INPUT.into(), Kind::Chat.input_schema()),
        (OUTPUT.into(), Kind::Chat.output_schema()),
    ];
    for piece in PIECES {
        let Some(found) = find(&done, &piece.at) else {
            continue;
        };
        let reference = json!({ "$ref": format!("{REF}{}", piece.name) });
        for (_, schema) in &mut done {
            replace(schema, &found, &reference);
        }
        done.push((piece.name.into(), found));
    }
    done
}

fn find(done: &[(String, Value)], at: &At) -> Option<Value> {
    let named = |name: &str| done.iter().find(|(n, _)| n == name).map(|(_, s)| s);
    match at {
        At::Pointer(name, pointer) => named(name)?.pointer(pointer).cloned(),
        At::Tagged {
            within: (name, pointer),
            key,
            value,
        } => first(named(name)?.pointer(pointer)?, &|s| {
            s.pointer(&format!("/properties/{key}/const")) == Some(&json!(value))
        }),
        At::OneOfWith(piece) => {
            let reference = json!({ "$ref": format!("{REF}{piece}") });
            done.iter().find_map(|(_, schema)| {
                first(schema, &|s| {
                    s.get("oneOf")
                        .and_then(Value::as_array)
                        .is_some_and(|alternatives| alternatives.contains(&reference))
                })
            })
        }
    }
}

/// The first value (depth first) that `matches`.
fn first(value: &Value, matches: &dyn Fn(&Value) -> bool) -> Option<Value> {
    if matches(value) {
        return Some(value.clone());
    }
    match value {
        Value::Object(map) => map.values().find_map(|v| first(v, matches)),
        Value::Array(items) => items.iter().find_map(|v| first(v, matches)),
        _ => None,
    }
}

/// Every copy of `piece` below `value` (not `value` itself) becomes `reference`.
fn replace(value: &mut Value, piece: &Value, reference: &Value) {
    let children: Vec<&mut Value> = match value {
        Value::Object(map) => map.values_mut().collect(),
        Value::Array(items) => items.iter_mut().collect(),
        _ => return,
    };
    for child in children {
        if child == piece {
            *child = reference.clone();
        } else {
            replace(child, piece, reference);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    /// `value` with its references to `components` replaced by what they name.
    fn inline(value: &Value, components: &Map<String, Value>) -> Value {
        match value {
            Value::Object(map) => {
                if let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix(REF))
                {
                    return inline(&components[name], components);
                }
                Value::Object(
                    map.iter()
                        .map(|(k, v)| (k.clone(), inline(v, components)))
                        .collect(),
                )
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| inline(v, components)).collect())
            }
            other => other.clone(),
        }
    }

    fn cut_map() -> Map<String, Value> {
        cut().into_iter().collect()
    }

    /// The references inlined again are the kind's schemas, exactly.
    #[test]
    fn the_pieces_put_together_are_the_kinds_schemas() {
        let pieces = cut_map();
        assert_eq!(
            inline(&pieces[INPUT], &pieces),
            Kind::Chat.input_schema(),
            "ChatInput"
        );
        assert_eq!(
            inline(&pieces[OUTPUT], &pieces),
            Kind::Chat.output_schema(),
            "ChatOutput"
        );
    }

    /// Every piece is found where it is looked for, and is referred to
    /// (a piece the source moved fails here: update its `At`).
    #[test]
    fn every_piece_is_found_and_used() {
        let all = components();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        let text = Value::Array(all.iter().map(|(_, s)| s.clone()).collect()).to_string();
        for piece in PIECES {
            assert!(names.contains(&piece.name), "{} was not found", piece.name);
            let reference = format!("\"{REF}{}\"", piece.name);
            assert!(
                text.contains(&reference),
                "{} is not referred to",
                piece.name
            );
        }
        for (name, schema) in &all {
            assert!(
                schema["description"].is_string(),
                "{name} has no description"
            );
        }
        // A tool call is the same in an assistant message and in the output.
        let pieces = cut_map();
        assert_eq!(
            pieces["ChatAssistantMessage"]["properties"]["tool_calls"]["items"],
            json!({ "$ref": format!("{REF}ChatToolCall") })
        );
    }
}
