//! Every row of the mapping table, both ways, plain and streamed.

use serde_json::{Value, json};

use super::*;
use crate::Provider;
use crate::kinds::Kind;
use crate::upstream::config::Protocol;
use crate::upstream::testutil::{Fake, Reply, listening_all, provider, route, upstream};

fn parse(v: Value) -> ChatInput {
    ChatInput::parse(&v).unwrap()
}

fn body(v: Value) -> Value {
    request_body(&parse(v))
}

fn user() -> Value {
    json!([{"role": "user", "content": "x"}])
}

#[test]
fn turns_parts_calls_and_results_map_to_contents() {
    let b = body(json!({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
            {"type": "image", "url": "https://example.com/cat.jpg"},
            {"type": "document", "url": "https://example.com/file", "media_type": "application/pdf"},
            {"type": "document", "data": "aGVsbG8=", "media_type": "text/plain"}
        ]},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "call_1", "name": "get_time", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "22 °C"},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "noon"}]},
        {"role": "user", "content": "Thanks"}
    ]}));
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [
                {"text": "Look:"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
                {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/file"}},
                {"inlineData": {"mimeType": "text/plain", "data": "aGVsbG8="}}
            ]},
            {"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                 "thoughtSignature": "skip_thought_signature_validator"},
                {"functionCall": {"name": "get_time", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"content": "22 °C"}}},
                {"functionResponse": {"name": "get_time", "response": {"content": "noon"}}},
                {"text": "Thanks"}
            ]}
        ])
    );
}

#[test]
fn tools_choices_formats_and_reasoning_map_to_their_fields() {
    let tools = json!([{"name": "f", "description": "does f", "parameters": {"type": "object"}}, {"name": "g"}]);
    let b = body(
        json!({"messages": user(), "tools": tools, "tool_choice": {"name": "g"},
                        "parallel_tool_calls": true, "max_tokens": 10, "temperature": 0.2,
                        "top_p": 0.9, "stop": ["END"], "reasoning": {"effort": "low"},
                        "response_format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}}),
    );
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [
            {"name": "f", "description": "does f", "parametersJsonSchema": {"type": "object"}},
            {"name": "g"}]}])
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}})
    );
    assert_eq!(
        b["generationConfig"],
        json!({"maxOutputTokens": 10 + 1024, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"],
               "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
               "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
    );
    for (choice, mode) in [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")] {
        let b = body(json!({"messages": user(), "tools": tools, "tool_choice": choice}));
        assert_eq!(
            b["toolConfig"],
            json!({"functionCallingConfig": {"mode": mode}})
        );
    }
    let b = body(json!({"messages": user(), "response_format": {"type": "json_object"}}));
    assert_eq!(
        b["generationConfig"],
        json!({"responseMimeType": "application/json"})
    );
    let b = body(json!({"messages": user(), "response_format": {"type": "text"}}));
    assert!(b.get("generationConfig").is_none());
}

#[test]
fn no_parallel_switch_and_untyped_urls_are_unsupported() {
    let u = unsupported(
        "g",
        &parse(json!({"messages": user(), "tools": [{"name": "f"}], "parallel_tool_calls": false})),
    )
    .unwrap();
    assert_eq!(u.field, "parallel_tool_calls");
    assert!(u.message.contains("g (Gemini protocol)"), "{}", u.message);
    let u = unsupported(
        "g",
        &parse(json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "x"}, {"type": "image", "url": "https://a.b/pic"}]}]})),
    )
    .unwrap();
    assert_eq!(u.field, "messages[0].content[1]");
    assert_eq!(
        unsupported(
            "g",
            &parse(json!({"messages": [{"role": "user", "content": [
                {"type": "image", "url": "https://a.b/pic", "media_type": "image/png"}]}]}))
        ),
        None
    );
}

fn answer_of(v: Value, input: Value) -> Result<Execution, UpstreamError> {
    let mut a = Answer::default();
    a.absorb(&v, None);
    a.finish(&parse(input), "gemini-2.5-pro")
}

#[test]
fn function_calls_thoughts_and_cached_tokens_come_back_normalized() {
    let x = answer_of(
        json!({"candidates": [{"content": {"role": "model", "parts": [
                   {"text": "Need weather.", "thought": true},
                   {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "c2lnMQ=="},
                   {"functionCall": {"id": "fc_7", "name": "get_time"}}]},
                   "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 300, "cachedContentTokenCount": 256,
                                 "candidatesTokenCount": 20, "thoughtsTokenCount": 80},
               "modelVersion": "gemini-2.5-pro"}),
        json!({"messages": user(), "tools": [{"name": "get_weather"}, {"name": "get_time"}]}),
    )
    .unwrap();
    assert_eq!(
        x.output,
        json!({"text": "", "reasoning": "Need weather.", "finish_reason": "tool_calls",
               "reasoning_details": [{"type": "tool_call_signature", "format": "gemini",
                                      "tool_call_id": "call_0", "signature": "c2lnMQ=="}],
               "tool_calls": [{"id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}},
                              {"id": "fc_7", "name": "get_time", "arguments": {}}],
               "model": "gemini-2.5-pro"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(300),
            output_tokens: Some(100),
            reasoning_tokens: Some(80),
            cached_input_tokens: Some(256),
        }
    );
}

#[test]
fn json_answers_are_parsed_and_bad_calls_refused() {
    let x = answer_of(
        json!({"candidates": [{"content": {"parts": [{"text": "{\"n\": 1}"}]}, "finishReason": "STOP"}]}),
        json!({"messages": user(), "response_format": {"type": "json_object"}}),
    )
    .unwrap();
    assert_eq!(x.output["json"], json!({"n": 1}));
    assert_eq!(x.output["finish_reason"], "stop");
    let e = answer_of(
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]},
                               "finishReason": "STOP"}]}),
        json!({"messages": user()}),
    )
    .unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

fn chunk(parts: Value, finish: Option<&str>) -> String {
    let mut c = json!({"candidates": [{"content": {"role": "model", "parts": parts}}],
                       "modelVersion": "gemini-2.5-flash",
                       "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7}});
    if let Some(f) = finish {
        c["candidates"][0]["finishReason"] = json!(f);
    }
    format!("data: {c}\r\n\r\n")
}

#[tokio::test]
async fn streamed_chunks_are_pieces_and_calls_come_whole() {
    let (fake, base) = Fake::serve(vec![Reply::Sse(vec![
        chunk(json!([{"text": "Thinking…", "thought": true}]), None),
        chunk(json!([{"text": "Let me look."}]), None),
        chunk(
            json!([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"name": "get_time", "args": {}}}]),
            Some("STOP"),
        ),
    ])])
    .await;
    let u = upstream(
        &[("g", provider(Protocol::Gemini, &base))],
        vec![route("chat", Kind::Chat, &[&[("g", "gemini-2.5-flash")]])],
    );
    let (mut ctx, pieces) = listening_all();
    let input = json!({"messages": user(), "tools": [{"name": "get_weather"}, {"name": "get_time"}],
                       "tool_choice": "required"});
    let x = u.execute("chat", &input, &mut ctx).await.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Let me look.", "reasoning": "Thinking…", "finish_reason": "tool_calls",
               "tool_calls": [{"id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}},
                              {"id": "call_1", "name": "get_time", "arguments": {}}],
               "model": "gemini-2.5-flash"})
    );
    assert_eq!(
        (x.usage.output_tokens, x.usage.reasoning_tokens),
        (Some(12), Some(7))
    );
    assert_eq!(
        *pieces.lock(),
        vec![
            Piece::Reasoning("Thinking…".into()),
            Piece::Text("Let me look.".into()),
            Piece::ToolCall {
                index: 0,
                id: Some("call_0".into()),
                name: Some("get_weather".into()),
                arguments: "{\"city\":\"Paris\"}".into()
            },
            Piece::ToolCall {
                index: 1,
                id: Some("call_1".into()),
                name: Some("get_time".into()),
                arguments: "{}".into()
            },
        ]
    );
    assert_eq!(
        fake.body(0)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
}

#[test]
fn a_calls_thought_signature_goes_back_on_that_call_and_no_other_familys() {
    let b = body(json!({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_0", "name": "f", "arguments": {}},
            {"id": "call_1", "name": "f", "arguments": {"n": 2}}],
         "reasoning_details": [
             {"type": "thinking", "format": "anthropic", "text": "t", "signature": "a"},
             {"type": "tool_call_signature", "format": "gemini", "tool_call_id": "call_1", "signature": "g1"}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a"},
        {"role": "tool", "tool_call_id": "call_1", "content": "b"}
    ], "tools": [{"name": "f"}]}));
    assert_eq!(
        b["contents"][1]["parts"],
        json!([{"functionCall": {"name": "f", "args": {}},
                "thoughtSignature": "skip_thought_signature_validator"},
               {"functionCall": {"name": "f", "args": {"n": 2}}, "thoughtSignature": "g1"}])
    );
}
