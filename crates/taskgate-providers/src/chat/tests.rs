use serde_json::{Value, json};

use super::*;
use crate::schema::CompiledSchema;

fn full_input() -> Value {
    json!({
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image", "url": "https://example.com/cat.png"},
                {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
                {"type": "document", "data": "JVBERi0xLjQ=", "media_type": "application/pdf"},
                {"type": "document", "url": "https://example.com/a.pdf", "media_type": "application/pdf"}
            ]},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "22 °C"},
            {"role": "assistant", "content": "It is 22 °C."}
        ],
        "tools": [{"name": "get_weather", "description": "Weather of a city",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        "tool_choice": {"name": "get_weather"},
        "parallel_tool_calls": false,
        "response_format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true},
        "reasoning": {"effort": "medium"},
        "max_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": ["END"],
        "options": {"seed": 1}
    })
}

fn violations(input: Value) -> Vec<String> {
    ChatInput::parse(&input)
        .unwrap_err()
        .into_iter()
        .map(|v| v.to_string())
        .collect()
}

#[test]
fn a_full_input_is_valid_parses_and_reads_back_the_same() {
    let schema = CompiledSchema::compile(&schema::input()).unwrap();
    let input = full_input();
    assert_eq!(schema.violations(&input), vec![]);
    let parsed = ChatInput::parse(&input).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), input);
    assert_eq!(
        parsed.tool_name_of(parsed.messages.len(), "call_1"),
        Some("get_weather")
    );
    assert_eq!(parsed.forced_tool().unwrap().name, "get_weather");
    assert_eq!(parsed.system_text().as_deref(), Some("Be brief."));
    let Message::User {
        content: Content::Parts(parts),
    } = &parsed.messages[1]
    else {
        panic!("{:?}", parsed.messages[1]);
    };
    assert_eq!(
        parts[1],
        Part::Image {
            source: Source::Url {
                url: "https://example.com/cat.png".into(),
                media_type: None
            }
        }
    );
}

#[test]
fn the_schema_refuses_media_outside_user_messages_and_null_content() {
    let schema = CompiledSchema::compile(&schema::input()).unwrap();
    for bad in [
        json!({"messages": [{"role": "system", "content": [{"type": "image", "url": "https://a.b/c.png"}]}]}),
        json!({"messages": [{"role": "assistant", "content": null}]}),
        json!({"messages": [{"role": "assistant"}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "image", "data": "AAAA"}]}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "document", "data": "AAAA", "media_type": "image/png"}]}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}),
        json!({"messages": [{"role": "user", "content": "x"}], "reasoning": {"effort": "max"}}),
    ] {
        assert!(!schema.is_valid(&bad), "{bad}");
    }
}

#[test]
fn the_rules_beyond_the_schema_are_each_reported() {
    let v = violations(json!({"messages": [{"role": "assistant", "content": null}]}));
    assert!(v[0].starts_with("/messages/0/content: is null"), "{v:?}");
    let v = violations(json!({"messages": [
        {"role": "system", "content": [{"type": "image", "url": "https://a.b/c.png"}]},
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
        {"role": "user", "content": [{"type": "document", "data": "not base64!", "media_type": "application/pdf"},
                                     {"type": "image", "data": "AAAA", "media_type": "image/tiff"}]}
    ], "tools": [{"name": "a b"}, {"name": "t"}, {"name": "t"}], "tool_choice": {"name": "u"}}));
    assert_eq!(
        v,
        vec![
            "/tools/0/name: must be 1 to 64 letters, digits, `_` or `-`",
            "/tools/2/name: another tool is named \"t\"",
            "/tool_choice/name: no tool is named \"u\"",
            "/messages/0/content/0: an image may only be in a user message",
            "/messages/1/tool_call_id: answers no tool call of an earlier assistant message (\"nope\")",
            "/messages/2/content/0/data: is not valid base64",
            "/messages/2/content/1/media_type: an image must be one of image/png, image/jpeg, image/gif, image/webp",
        ]
    );
    let v = violations(
        json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}),
    );
    assert_eq!(v, vec!["/tool_choice: `required` needs `tools`"]);
    let v = violations(
        json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"name": "f"}}),
    );
    assert_eq!(v, vec!["/tool_choice/name: no tool is named \"f\""]);
    let v = violations(json!({"messages": [
        {"role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": {}}, {"id": "a", "name": "f", "arguments": {}}]}
    ]}));
    assert_eq!(
        v,
        vec!["/messages/0/tool_calls/1/id: another tool call of this message has the id \"a\""]
    );
    // Across turns an id may come again (a provider without ids gives
    // `call_0` in every answer), and a tool result names the latest call.
    let again = json!({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "call_0", "name": "f", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "1"},
        {"role": "assistant", "tool_calls": [{"id": "call_0", "name": "g", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "2"}
    ]});
    let parsed = ChatInput::parse(&again).expect("ids may come again across turns");
    assert_eq!(parsed.tool_name_of(2, "call_0"), Some("f"));
    assert_eq!(parsed.tool_name_of(4, "call_0"), Some("g"));
    // A tool result must follow its call.
    let v = violations(json!({"messages": [
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": {}}]}
    ]}));
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn reasoning_budgets_and_efforts_convert() {
    let effort = |e| Reasoning::Effort { effort: e };
    assert_eq!(effort(Effort::Low).budget_tokens(), 1024);
    assert_eq!(effort(Effort::Medium).budget_tokens(), 4096);
    assert_eq!(effort(Effort::High).budget_tokens(), 16384);
    let budget = |n| Reasoning::Budget { max_tokens: n };
    assert_eq!(budget(5000).budget_tokens(), 5000);
    assert_eq!(budget(2047).effort(), Effort::Low);
    assert_eq!(budget(2048).effort(), Effort::Medium);
    assert_eq!(budget(8191).effort(), Effort::Medium);
    assert_eq!(budget(8192).effort(), Effort::High);
    assert_eq!(effort(Effort::High).effort(), Effort::High);
}

#[test]
fn media_types_come_from_urls_when_not_given() {
    assert_eq!(
        media_type_of_url("https://a.b/x.JPG?size=2"),
        Some("image/jpeg")
    );
    assert_eq!(
        media_type_of_url("https://a.b/doc.pdf#p=2"),
        Some("application/pdf")
    );
    assert_eq!(media_type_of_url("https://a.b/download"), None);
    let s = Source::Url {
        url: "https://a.b/x.webp".into(),
        media_type: None,
    };
    assert_eq!(s.media_type().as_deref(), Some("image/webp"));
}

#[test]
fn outputs_are_valid_for_the_schema_and_json_is_filled_when_asked() {
    let schema = CompiledSchema::compile(&schema::output()).unwrap();
    let format = ResponseFormat::JsonObject;
    let out = ChatOutput::new(" {\"a\": 1} ".into(), FinishReason::Stop, "m".into())
        .with_json(Some(&format));
    assert_eq!(out.json, Some(json!({"a": 1})));
    let plain = ChatOutput::new("{\"a\": 1}".into(), FinishReason::Stop, "m".into())
        .with_json(Some(&ResponseFormat::Text));
    assert_eq!(plain.json, None);
    let not_json =
        ChatOutput::new("nope".into(), FinishReason::Length, "m".into()).with_json(Some(&format));
    assert_eq!(not_json.json, None);
    let mut calls = ChatOutput::new(String::new(), FinishReason::ToolCalls, "m".into());
    calls.tool_calls.push(ToolCall {
        id: "c".into(),
        name: "f".into(),
        arguments: arguments_of("{\"x\": [1]}").unwrap(),
    });
    calls.reasoning = Some("hmm".into());
    for o in [out, plain, not_json, calls] {
        let v = o.into_value();
        assert_eq!(schema.violations(&v), vec![], "{v}");
    }
}

#[test]
fn arguments_must_be_an_object_or_nothing() {
    assert_eq!(arguments_of("").unwrap(), serde_json::Map::new());
    assert_eq!(arguments_of("  ").unwrap(), serde_json::Map::new());
    for bad in ["[1]", "\"x\"", "{\"a\":", "null"] {
        assert_eq!(
            arguments_of(bad).unwrap_err().code,
            "invalid_upstream_response",
            "{bad}"
        );
    }
}

#[test]
fn streamed_tool_call_fragments_assemble_by_index() {
    let mut p = ToolCallPieces::default();
    p.push(1, Some("call_b"), Some("g"), "");
    p.push(0, Some("call_a"), Some("f"), "{\"ci");
    p.push(0, None, None, "ty\": \"Par");
    p.push(1, None, None, "{}");
    p.push(0, Some("ignored"), Some("ignored"), "is\"}");
    let calls = p.finish().unwrap();
    assert_eq!(
        serde_json::to_value(&calls).unwrap(),
        json!([{"id": "call_a", "name": "f", "arguments": {"city": "Paris"}},
               {"id": "call_b", "name": "g", "arguments": {}}])
    );
    let mut p = ToolCallPieces::default();
    p.push(0, None, Some("f"), "{\"a\"");
    assert_eq!(p.finish().unwrap_err().code, "invalid_upstream_response");
    let mut p = ToolCallPieces::default();
    p.push(0, Some("x"), None, "{}");
    assert_eq!(p.finish().unwrap_err().code, "invalid_upstream_response");
    let mut p = ToolCallPieces::default();
    p.push(3, None, Some("f"), "");
    assert_eq!(p.finish().unwrap()[0].id, "call_3");
}
