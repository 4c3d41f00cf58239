//! Every row of the mapping table, both ways, plain and streamed.

use serde_json::{Value, json};

use super::*;
use crate::Provider;
use crate::kinds::Kind;
use crate::upstream::config::Protocol;
use crate::upstream::testutil::{Fake, Reply, listening_all, provider, route, run, upstream};

fn parse(v: Value) -> ChatInput {
    ChatInput::parse(&v).unwrap()
}

fn body(v: Value) -> Value {
    request_body(&parse(v), "gpt-4.1", false)
}

#[test]
fn messages_parts_and_tool_turns_map_to_openai_messages() {
    let b = body(json!({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "url": "https://example.com/cat.png"},
            {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
            {"type": "document", "data": "JVBERi0xLjQ=", "media_type": "application/pdf"}
        ]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22 °C"}
    ]}));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "file", "file": {"filename": "document.pdf",
                                          "file_data": "data:application/pdf;base64,JVBERi0xLjQ="}}
            ]},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "22 °C"}
        ])
    );
    assert_eq!(b["stream"], false);
    assert!(b.get("stream_options").is_none());
}

#[test]
fn tools_choices_formats_and_reasoning_map_to_their_fields() {
    let user = json!([{"role": "user", "content": "x"}]);
    let tools = json!([{"name": "f", "description": "does f", "parameters": {"type": "object"}}, {"name": "g"}]);
    let b = body(
        json!({"messages": user, "tools": tools, "tool_choice": {"name": "g"},
                        "parallel_tool_calls": false, "max_tokens": 9, "temperature": 0.3,
                        "top_p": 0.5, "stop": ["x"]}),
    );
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}}},
               {"type": "function", "function": {"name": "g"}}])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "g"}})
    );
    assert_eq!(b["parallel_tool_calls"], false);
    assert_eq!(
        (&b["max_tokens"], &b["temperature"], &b["top_p"], &b["stop"]),
        (&json!(9), &json!(0.3), &json!(0.5), &json!(["x"]))
    );
    for (choice, wire) in [("auto", "auto"), ("none", "none"), ("required", "required")] {
        let b = body(json!({"messages": user, "tools": tools, "tool_choice": choice}));
        assert_eq!(b["tool_choice"], wire);
    }
    let b = body(json!({"messages": user, "response_format": {"type": "json_object"}}));
    assert_eq!(b["response_format"], json!({"type": "json_object"}));
    let b = body(json!({"messages": user, "response_format": {"type": "text"}}));
    assert_eq!(b["response_format"], json!({"type": "text"}));
    let b = body(json!({"messages": user, "response_format":
        {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true}}));
    assert_eq!(
        b["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}})
    );
    let b = body(json!({"messages": user, "reasoning": {"effort": "high"}, "max_tokens": 50}));
    assert_eq!(b["reasoning_effort"], "high");
    assert_eq!(b["max_completion_tokens"], 50 + 16384);
    assert!(b.get("max_tokens").is_none());
    let b = body(json!({"messages": user, "reasoning": {"max_tokens": 3000}}));
    assert_eq!(b["reasoning_effort"], "medium");
    let b = request_body(&parse(json!({"messages": user})), "m", true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
}

#[test]
fn documents_other_than_inline_pdfs_are_unsupported() {
    let doc = |d: Value| {
        parse(
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, d]}]}),
        )
    };
    let u = unsupported(
        "oa",
        &doc(json!({"type": "document", "url": "https://a.b/c.pdf"})),
    )
    .unwrap();
    assert_eq!(u.field, "messages[0].content[1]");
    assert!(
        u.message.contains("oa") && u.message.contains("by URL"),
        "{}",
        u.message
    );
    let u = unsupported(
        "oa",
        &doc(json!({"type": "document", "data": "aGk=", "media_type": "text/plain"})),
    )
    .unwrap();
    assert!(u.message.contains("not a PDF"), "{}", u.message);
    assert_eq!(
        unsupported(
            "oa",
            &doc(json!({"type": "document", "data": "aGk=", "media_type": "application/pdf"}))
        ),
        None
    );
}

fn completion(message: Value, finish: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-2025-04-14",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
                     "prompt_tokens_details": {"cached_tokens": 100},
                     "completion_tokens_details": {"reasoning_tokens": 30}}})
}

#[test]
fn an_answer_with_tool_calls_reasoning_and_cached_tokens_is_normalized() {
    let input = parse(json!({"messages": [{"role": "user", "content": "x"}]}));
    let x = answer(
        &completion(
            json!({"role": "assistant", "content": null, "reasoning_content": "Think.",
                   "tool_calls": [{"id": "call_a", "type": "function",
                                   "function": {"name": "f", "arguments": "{\"a\": 1}"}},
                                  {"id": "call_b", "type": "function",
                                   "function": {"name": "g", "arguments": ""}}]}),
            "tool_calls",
        ),
        &input,
        "gpt-4.1",
    )
    .unwrap();
    assert_eq!(
        x.output,
        json!({"text": "", "tool_calls": [{"id": "call_a", "name": "f", "arguments": {"a": 1}},
                                          {"id": "call_b", "name": "g", "arguments": {}}],
               "reasoning": "Think.", "finish_reason": "tool_calls", "model": "gpt-4.1-2025-04-14"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(120),
            output_tokens: Some(40),
            reasoning_tokens: Some(30),
            cached_input_tokens: Some(100),
        }
    );
}

#[test]
fn finish_reasons_refusals_json_and_bad_arguments() {
    for (wire, ours) in [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("weird", "other"),
    ] {
        let v = completion(json!({"role": "assistant", "content": "x"}), wire);
        let input = parse(json!({"messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(
            answer(&v, &input, "m").unwrap().output["finish_reason"],
            ours
        );
    }
    let input = parse(
        json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}),
    );
    let v = completion(
        json!({"role": "assistant", "content": "{\"a\": [1]}"}),
        "stop",
    );
    assert_eq!(
        answer(&v, &input, "m").unwrap().output["json"],
        json!({"a": [1]})
    );
    let v = completion(
        json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
        "stop",
    );
    let o = answer(&v, &input, "m").unwrap().output;
    assert_eq!(
        (&o["text"], &o["finish_reason"]),
        (&json!("I can't help with that."), &json!("content_filter"))
    );
    let v = completion(
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
               "function": {"name": "f", "arguments": "{not json"}}]}),
        "tool_calls",
    );
    let e = answer(&v, &input, "m").unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

fn sse(chunks: &[Value]) -> Reply {
    let mut out: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push("data: [DONE]\n\n".to_owned());
    Reply::Sse(out)
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "deepseek-reasoner",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

#[tokio::test]
async fn streamed_tool_calls_and_reasoning_are_pieces_and_assemble_exactly() {
    let (fake, base) = Fake::start(vec![sse(&[
        chunk(
            json!({"role": "assistant", "reasoning_content": "Weather "}),
            None,
        ),
        chunk(json!({"reasoning_content": "needed."}), None),
        chunk(json!({"content": "Checking."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                                     "function": {"name": "get_weather", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Pa"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_y", "type": "function",
                                     "function": {"name": "get_time", "arguments": "{}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "ris\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20,
               "prompt_tokens_details": {"cached_tokens": 10},
               "completion_tokens_details": {"reasoning_tokens": 5}}}),
    ])])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "deepseek-reasoner")]])],
    );
    let (mut ctx, pieces) = listening_all();
    let input = json!({"messages": [{"role": "user", "content": "Weather in Paris?"}],
                       "tools": [{"name": "get_weather"}, {"name": "get_time"}]});
    let x = u.execute("chat", &input, &mut ctx).await.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Checking.", "reasoning": "Weather needed.", "finish_reason": "tool_calls",
               "model": "deepseek-reasoner",
               "tool_calls": [{"id": "call_x", "name": "get_weather", "arguments": {"city": "Paris"}},
                              {"id": "call_y", "name": "get_time", "arguments": {}}]})
    );
    assert_eq!(
        (x.usage.cached_input_tokens, x.usage.reasoning_tokens),
        (Some(10), Some(5))
    );
    let pieces = pieces.lock().clone();
    assert_eq!(pieces[0], Piece::Reasoning("Weather ".into()));
    assert_eq!(pieces[2], Piece::Text("Checking.".into()));
    assert_eq!(
        pieces[3],
        Piece::ToolCall {
            index: 0,
            id: Some("call_x".into()),
            name: Some("get_weather".into()),
            arguments: String::new()
        }
    );
    assert_eq!(pieces.len(), 7, "{pieces:?}");
    assert_eq!(fake.body(0)["tools"][1]["function"]["name"], "get_time");
}

#[tokio::test]
async fn streamed_arguments_that_are_not_json_fail_the_task() {
    let (_fake, base) = Fake::start(vec![sse(&[
        chunk(json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\""}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ])])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let input = json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]});
    let (r, _) = run(&u, "chat", input).await;
    assert_eq!(r.unwrap_err().code, "invalid_upstream_response");
}

#[tokio::test]
async fn the_route_refuses_what_a_target_cannot_carry_before_any_call() {
    let (fake, base) = Fake::start(vec![]).await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let input = json!({"messages": [{"role": "user", "content": [
        {"type": "document", "url": "https://example.com/a.pdf"}]}]});
    let u2 = u.unsupported("chat", &parse(input.clone())).unwrap();
    assert_eq!(u2.field, "messages[0].content[0]");
    let (r, _) = run(&u, "chat", input).await;
    assert_eq!(r.unwrap_err().code, "unsupported_parameter");
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn a_streamed_refusal_is_the_text_and_a_content_filter() {
    let (_fake, base) = Fake::start(vec![sse(&[
        chunk(
            json!({"role": "assistant", "content": null, "refusal": ""}),
            None,
        ),
        chunk(json!({"refusal": "I can't "}), None),
        chunk(json!({"refusal": "help."}), None),
        chunk(json!({}), Some("stop")),
    ])])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let input = json!({"messages": [{"role": "user", "content": "x"}]});
    let x = run(&u, "chat", input).await.0.unwrap();
    assert_eq!(
        (&x.output["text"], &x.output["finish_reason"]),
        (&json!("I can't help."), &json!("content_filter"))
    );
}
