//! Every row of the mapping table, both ways, plain and streamed.

use serde_json::{Value, json};

use super::*;
use crate::Provider;
use crate::kinds::Kind;
use crate::upstream::Upstream;
use crate::upstream::config::Protocol;
use crate::upstream::testutil::{Fake, Reply as Answer, listening_all, provider, route, upstream};

fn parse(v: Value) -> ChatInput {
    ChatInput::parse(&v).unwrap()
}

fn body(v: Value) -> Value {
    request_body(&parse(v), "claude-sonnet-4-5", false)
}

fn user() -> Value {
    json!([{"role": "user", "content": "x"}])
}

#[test]
fn turns_blocks_and_tool_results_map_to_alternating_messages() {
    let b = body(json!({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "url": "https://example.com/cat.png"},
            {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
            {"type": "document", "data": "JVBERi0xLjQ=", "media_type": "application/pdf"},
            {"type": "document", "url": "https://example.com/a.pdf"},
            {"type": "document", "data": "aGVsbG8=", "media_type": "text/plain"}
        ]},
        {"role": "user", "content": "And?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "toolu_1", "name": "f", "arguments": {"a": 1}},
            {"id": "toolu_2", "name": "g", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "one"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "Done."}
    ]}));
    assert_eq!(b["system"], "Be brief.");
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
                {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
                {"type": "text", "text": "And?"}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "two"}]}
            ]},
            {"role": "assistant", "content": "Done."}
        ])
    );
    assert_eq!(b["max_tokens"], 4096);
}

#[test]
fn tools_choices_and_parallel_calls_map_to_tool_choice() {
    let tools = json!([{"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {}}},
                       {"name": "g"}]);
    let b = body(
        json!({"messages": user(), "tools": tools, "tool_choice": {"name": "g"},
                        "parallel_tool_calls": false, "temperature": 0.2, "top_p": 0.9,
                        "stop": ["END"], "max_tokens": 10}),
    );
    assert_eq!(
        b["tools"],
        json!([{"name": "f", "description": "does f", "input_schema": {"type": "object", "properties": {}}},
               {"name": "g", "input_schema": {"type": "object"}}])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "g", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        (
            &b["temperature"],
            &b["top_p"],
            &b["stop_sequences"],
            &b["max_tokens"]
        ),
        (&json!(0.2), &json!(0.9), &json!(["END"]), &json!(10))
    );
    for (choice, wire) in [
        ("auto", json!({"type": "auto"})),
        ("none", json!({"type": "none"})),
        ("required", json!({"type": "any"})),
    ] {
        let b = body(json!({"messages": user(), "tools": tools, "tool_choice": choice}));
        assert_eq!(b["tool_choice"], wire);
    }
    let b = body(json!({"messages": user(), "tools": tools, "parallel_tool_calls": false}));
    assert_eq!(
        b["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    let b = body(
        json!({"messages": user(), "tools": tools, "tool_choice": "none", "parallel_tool_calls": false}),
    );
    assert_eq!(b["tool_choice"], json!({"type": "none"}));
}

#[test]
fn reasoning_is_thinking_with_room_for_the_answer() {
    let b =
        body(json!({"messages": user(), "reasoning": {"effort": "medium"}, "max_tokens": 1000}));
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert_eq!(b["max_tokens"], 5096);
    let b = body(json!({"messages": user(), "reasoning": {"max_tokens": 100}}));
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(b["max_tokens"], 1024 + 4096);
}

#[test]
fn json_output_is_a_forced_tool() {
    let b = body(
        json!({"messages": user(), "response_format": {"type": "json_schema", "name": "a",
                        "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}),
    );
    assert_eq!(
        b["tools"],
        json!([{"name": "json_answer", "description": "Give the answer as this tool's input.",
                "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "json_answer"})
    );
    let b = body(json!({"messages": user(), "response_format": {"type": "json_object"}}));
    assert_eq!(b["tools"][0]["input_schema"], json!({"type": "object"}));
    let b = body(json!({"messages": user(), "response_format": {"type": "text"}}));
    assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
}

#[test]
fn what_anthropic_cannot_carry_is_unsupported() {
    let json_format = json!({"type": "json_object"});
    for (input, field) in [
        (
            json!({"messages": user(), "response_format": json_format, "tools": [{"name": "f"}]}),
            "response_format",
        ),
        (
            json!({"messages": user(), "response_format": json_format, "reasoning": {"effort": "low"}}),
            "response_format",
        ),
        (
            json!({"messages": user(), "response_format": {"type": "json_schema", "name": "a", "schema": {"type": "array"}}}),
            "response_format.schema",
        ),
        (
            json!({"messages": user(), "temperature": 0.5, "reasoning": {"effort": "low"}}),
            "temperature",
        ),
        (
            json!({"messages": user(), "tools": [{"name": "f"}], "tool_choice": "required", "reasoning": {"effort": "low"}}),
            "tool_choice",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "document", "url": "https://a.b/notes.txt"}]}]}),
            "messages[0].content[0]",
        ),
    ] {
        let u = unsupported("claude", &parse(input.clone())).unwrap_or_else(|| panic!("{input}"));
        assert_eq!(u.field, field, "{input}");
        assert!(u.message.contains("claude"), "{}", u.message);
    }
    let fine = json!({"messages": user(), "tools": [{"name": "f"}], "tool_choice": "auto", "reasoning": {"effort": "low"}});
    assert_eq!(unsupported("claude", &parse(fine)), None);
    // A temperature of 1, Anthropic's default, goes with thinking.
    let one = json!({"messages": user(), "temperature": 1, "reasoning": {"effort": "low"}});
    assert_eq!(unsupported("claude", &parse(one)), None);
}

fn message(content: Value, stop: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "content": content,
           "model": "claude-sonnet-4-5-20250929", "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 10, "cache_read_input_tokens": 200,
                     "cache_creation_input_tokens": 30, "output_tokens": 50}})
}

#[test]
fn a_message_with_thinking_and_tool_use_is_normalized_with_cache_tokens() {
    let input = parse(json!({"messages": user(), "tools": [{"name": "f"}]}));
    let x = Reply::new(&input)
        .message(
            &message(
                json!([{"type": "thinking", "thinking": "Use f.", "signature": "s"},
                       {"type": "redacted_thinking", "data": "xx"},
                       {"type": "text", "text": "Calling f."},
                       {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"q": "x"}}]),
                "tool_use",
            ),
            "m",
        )
        .unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Calling f.", "reasoning": "Use f.", "finish_reason": "tool_calls",
               "reasoning_details": [
                   {"type": "thinking", "format": "anthropic", "text": "Use f.", "signature": "s"},
                   {"type": "redacted", "format": "anthropic", "data": "xx"}],
               "tool_calls": [{"id": "toolu_9", "name": "f", "arguments": {"q": "x"}}],
               "model": "claude-sonnet-4-5-20250929"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(240),
            output_tokens: Some(50),
            reasoning_tokens: None,
            cached_input_tokens: Some(200),
        }
    );
}

#[test]
fn the_forced_json_answer_is_the_text_and_json_and_stops() {
    let input = parse(json!({"messages": user(), "response_format": {"type": "json_object"}}));
    let x = Reply::new(&input)
        .message(
            &message(
                json!([{"type": "tool_use", "id": "toolu_1", "name": "json_answer", "input": {"n": 3}}]),
                "tool_use",
            ),
            "m",
        )
        .unwrap();
    assert_eq!(x.output["text"], "{\"n\":3}");
    assert_eq!(x.output["json"], json!({"n": 3}));
    assert_eq!(x.output["tool_calls"], json!([]));
    assert_eq!(x.output["finish_reason"], "stop");
    let plain = parse(json!({"messages": user()}));
    let e = Reply::new(&plain)
        .message(
            &message(
                json!([{"type": "tool_use", "id": "t", "name": "f", "input": "oops"}]),
                "tool_use",
            ),
            "m",
        )
        .unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

fn sse(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

async fn streamed(events: Vec<Value>, input: Value) -> (Fake, Execution, Vec<Piece>) {
    let (fake, base) = Fake::serve(vec![Answer::Sse(events.into_iter().map(sse).collect())]).await;
    let u: Upstream = upstream(
        &[("claude", provider(Protocol::Anthropic, &base))],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("claude", "claude-sonnet-4-5")]],
        )],
    );
    let (mut ctx, pieces) = listening_all();
    let x = u.execute("chat", &input, &mut ctx).await.unwrap();
    let pieces = pieces.lock().clone();
    (fake, x, pieces)
}

fn start(usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
           "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "usage": usage}})
}

fn block_delta(index: u64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

#[tokio::test]
async fn a_stream_of_thinking_text_and_tool_use_is_pieces_and_assembles() {
    let events = vec![
        start(json!({"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1})),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        block_delta(0, json!({"type": "thinking_delta", "thinking": "Need f."})),
        block_delta(0, json!({"type": "signature_delta", "signature": "sig"})),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 4, "content_block": {"type": "redacted_thinking", "data": "enc"}}),
        json!({"type": "content_block_stop", "index": 4}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        block_delta(1, json!({"type": "text_delta", "text": "Sure."})),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}}),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
        block_delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}),
        ),
        block_delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "ris\"}"}),
        ),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop"}),
    ];
    let input = json!({"messages": user(), "tools": [{"name": "f"}, {"name": "g"}]});
    let (fake, x, pieces) = streamed(events, input).await;
    assert_eq!(
        x.output,
        json!({"text": "Sure.", "reasoning": "Need f.", "finish_reason": "tool_calls",
               "reasoning_details": [
                   {"type": "thinking", "format": "anthropic", "text": "Need f.", "signature": "sig"},
                   {"type": "redacted", "format": "anthropic", "data": "enc"}],
               "tool_calls": [{"id": "toolu_a", "name": "f", "arguments": {"city": "Paris"}},
                              {"id": "toolu_b", "name": "g", "arguments": {}}],
               "model": "claude-sonnet-4-5-20250929"})
    );
    assert_eq!(
        (
            x.usage.input_tokens,
            x.usage.cached_input_tokens,
            x.usage.output_tokens
        ),
        (Some(105), Some(100), Some(42))
    );
    assert_eq!(
        pieces,
        vec![
            Piece::Reasoning("Need f.".into()),
            Piece::ReasoningSignature("sig".into()),
            Piece::RedactedReasoning("enc".into()),
            Piece::Text("Sure.".into()),
            Piece::ToolCall {
                index: 0,
                id: Some("toolu_a".into()),
                name: Some("f".into()),
                arguments: String::new()
            },
            Piece::ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: String::new()
            },
            Piece::ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: "{\"city\": \"Pa".into()
            },
            Piece::ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: "ris\"}".into()
            },
            Piece::ToolCall {
                index: 1,
                id: Some("toolu_b".into()),
                name: Some("g".into()),
                arguments: String::new()
            },
        ]
    );
    assert_eq!(fake.body(0)["stream"], true);
}

#[tokio::test]
async fn a_streamed_json_answer_is_streamed_as_text() {
    let events = vec![
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_j", "name": "json_answer", "input": {}}}),
        block_delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"n\": "}),
        ),
        block_delta(0, json!({"type": "input_json_delta", "partial_json": "3}"})),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ];
    let input = json!({"messages": user(), "response_format": {"type": "json_schema", "name": "n",
                       "schema": {"type": "object"}}});
    let (fake, x, pieces) = streamed(events, input).await;
    assert_eq!(x.output["text"], "{\"n\": 3}");
    assert_eq!(x.output["json"], json!({"n": 3}));
    assert_eq!(x.output["finish_reason"], "stop");
    assert_eq!(x.output["tool_calls"], json!([]));
    assert_eq!(
        pieces,
        vec![Piece::Text("{\"n\": ".into()), Piece::Text("3}".into())]
    );
    assert_eq!(
        fake.body(0)["tool_choice"],
        json!({"type": "tool", "name": "json_answer"})
    );
}

#[test]
fn signed_thinking_goes_back_first_to_anthropic_only_with_thinking_on() {
    let messages = json!([
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Calling f.",
         "tool_calls": [{"id": "toolu_1", "name": "f", "arguments": {}}],
         "reasoning_details": [
             {"type": "thinking", "format": "anthropic", "text": "Use f.", "signature": "s1"},
             {"type": "redacted", "format": "anthropic", "data": "enc"},
             {"type": "tool_call_signature", "format": "gemini", "tool_call_id": "toolu_1", "signature": "g"}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"}
    ]);
    let on = body(json!({"messages": messages, "tools": [{"name": "f"}],
                         "reasoning": {"max_tokens": 2000}}));
    assert_eq!(
        on["messages"][1]["content"],
        json!([{"type": "thinking", "thinking": "Use f.", "signature": "s1"},
               {"type": "redacted_thinking", "data": "enc"},
               {"type": "text", "text": "Calling f."},
               {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}])
    );
    // A thinking block without its signature is never sent: Anthropic
    // refuses one.
    let mut unsigned = messages.clone();
    unsigned[1]["reasoning_details"] =
        json!([{"type": "thinking", "format": "anthropic", "text": "Unsigned."}]);
    let b = body(json!({"messages": unsigned, "tools": [{"name": "f"}],
                        "reasoning": {"max_tokens": 2000}}));
    assert_eq!(b["messages"][1]["content"][0]["type"], "text");
    let off = body(json!({"messages": messages, "tools": [{"name": "f"}]}));
    assert_eq!(
        off["messages"][1]["content"],
        json!([{"type": "text", "text": "Calling f."},
               {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}])
    );
}
