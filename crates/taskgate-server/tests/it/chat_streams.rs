//! A chat task's stream carries its pieces: `reasoning` and `tool_call`
//! events beside `delta`, assembled exactly from each family's streamed
//! wire format, and the `done` event with the whole output.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use taskgate_providers::upstream::Protocol;

use crate::chat_checks::family_api_streaming;
use crate::chat_families::weather_tool;
use crate::upstream::{Fake, Reply, chunk, read_events};
use crate::utils::{Backend, TestApp, both};

const GAP: Duration = Duration::from_millis(80);

/// Streams one scripted reply through a `chat` API of `protocol` and checks
/// the events: the reasoning, then each tool call's fragments joined,
/// against the `done` event's output. The done output.
async fn streamed(backend: Backend, protocol: Protocol, reply: Reply) -> Option<Value> {
    let (fake, base) = Fake::start().await;
    fake.then(reply);
    let app = TestApp::builder(backend)
        .config(|c| family_api_streaming(c, "chat", protocol, &base, true))
        .start()
        .await?;
    let c = app.client(&app.live);
    let r = c
        .call(json!({"api": "chat", "mode": "async", "input": {
            "messages": [{"role": "user", "content": "Weather in Paris and Rome?"}],
            "tools": [weather_tool()], "reasoning": {"max_tokens": 1024}}}))
        .await
        .expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let (events, _) = read_events(&c, &id).await;
    let (last, done) = events.last().unwrap();
    assert_eq!(last, "done", "{events:?}");
    assert_eq!(done["status"], "succeeded", "{done}");
    let output = done["output"].clone();

    let reasoning: String = events
        .iter()
        .filter(|(e, _)| e == "reasoning")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasoning,
        output["reasoning"].as_str().unwrap(),
        "{events:?}"
    );
    // Each signature the provider put on its thinking came as a reasoning
    // event of its own, in order.
    let signatures: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "reasoning")
        .filter_map(|(_, d)| d.get("signature"))
        .collect();
    let signed: Vec<&Value> = output["reasoning_details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["type"] == "thinking")
        .filter_map(|d| d.get("signature"))
        .collect();
    assert_eq!(signatures, signed, "{events:?}");
    let first_call = events.iter().position(|(e, _)| e == "tool_call").unwrap();
    let last_reasoning = events.iter().rposition(|(e, _)| e == "reasoning").unwrap();
    assert!(last_reasoning < first_call, "in order: {events:?}");

    // Per index: the id and name of its first fragment, its arguments joined.
    let mut calls: BTreeMap<u64, (Value, Value, String)> = BTreeMap::new();
    for (_, d) in events.iter().filter(|(e, _)| e == "tool_call") {
        let index = d["index"].as_u64().unwrap();
        match calls.get_mut(&index) {
            None => {
                assert!(d["id"].is_string() && d["name"].is_string(), "{d}");
                let args = d["arguments_delta"].as_str().unwrap().to_owned();
                calls.insert(index, (d["id"].clone(), d["name"].clone(), args));
            }
            Some(call) => {
                assert!(d.get("id").is_none() && d.get("name").is_none(), "{d}");
                call.2.push_str(d["arguments_delta"].as_str().unwrap());
            }
        }
    }
    let assembled: Vec<Value> = calls
        .into_values()
        .map(|(id, name, args)| {
            let arguments: Value = serde_json::from_str(&args).unwrap();
            json!({"id": id, "name": name, "arguments": arguments})
        })
        .collect();
    assert_eq!(Value::Array(assembled), output["tool_calls"], "{events:?}");
    assert_eq!(output["finish_reason"], "tool_calls");
    app.stop().await;
    Some(output)
}

fn expected_calls(output: &Value) {
    let args: Vec<&Value> = output["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["arguments"])
        .collect();
    assert_eq!(args, [&json!({"city": "Paris"}), &json!({"city": "Rome"})]);
}

async fn openai_streams_reasoning_and_tool_calls(backend: Backend) {
    let call = |index: u32, id: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
            c["function"]["name"] = json!("get_weather");
        }
        chunk(json!({"tool_calls": [c]}), None)
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(json!({"reasoning_content": "Two cities, "}), None),
        chunk(json!({"reasoning_content": "two calls."}), None),
        call(0, Some("call_p"), ""),
        call(0, None, "{\"city\":"),
        call(0, None, " \"Paris\"}"),
        call(1, Some("call_r"), "{\"ci"),
        call(1, None, "ty\": \"Rome\"}"),
        chunk(json!({}), Some("tool_calls")),
    ];
    let Some(output) = streamed(backend, Protocol::Openai, Reply::Sse(events, GAP, false)).await
    else {
        return;
    };
    expected_calls(&output);
    assert_eq!(output["tool_calls"][1]["id"], "call_r");
}
both!(openai_streams_reasoning_and_tool_calls);

async fn anthropic_streams_thinking_and_tool_use(backend: Backend) {
    let delta = |index: u32, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
    let tool = |index: u32, id: &str| {
        json!({"type": "content_block_start", "index": index, "content_block":
               {"type": "tool_use", "id": id, "name": "get_weather", "input": {}}})
    };
    let json_delta = |index: u32, s: &str| {
        delta(
            index,
            json!({"type": "input_json_delta", "partial_json": s}),
        )
    };
    let stop = |index: u32| json!({"type": "content_block_stop", "index": index});
    let events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [], "model": "claude-x", "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "Two cities, "}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "two calls."}),
        ),
        delta(0, json!({"type": "signature_delta", "signature": "sig"})),
        stop(0),
        tool(1, "toolu_p"),
        json_delta(1, ""),
        json_delta(1, "{\"city\":"),
        json_delta(1, " \"Paris\"}"),
        stop(1),
        tool(2, "toolu_r"),
        json_delta(2, "{\"city\": \"Rome\"}"),
        stop(2),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ];
    let Some(output) = streamed(backend, Protocol::Anthropic, Reply::Events(events, GAP)).await
    else {
        return;
    };
    expected_calls(&output);
    assert_eq!(output["tool_calls"][0]["id"], "toolu_p");
    assert_eq!(
        output["reasoning_details"],
        json!([{"type": "thinking", "format": "anthropic",
                "text": "Two cities, two calls.", "signature": "sig"}])
    );
}
both!(anthropic_streams_thinking_and_tool_use);

async fn gemini_streams_thoughts_and_function_calls(backend: Backend) {
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut c = json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
                           "modelVersion": "gemini-x"});
        if let Some(f) = finish {
            c["candidates"][0]["finishReason"] = json!(f);
            c["usageMetadata"] = json!({"promptTokenCount": 10, "candidatesTokenCount": 8,
                                        "thoughtsTokenCount": 12, "totalTokenCount": 30});
        }
        c
    };
    let events = vec![
        chunk(json!([{"text": "Two cities, ", "thought": true}]), None),
        chunk(json!([{"text": "two calls.", "thought": true}]), None),
        chunk(
            json!([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]),
            Some("STOP"),
        ),
    ];
    let Some(output) = streamed(backend, Protocol::Gemini, Reply::Events(events, GAP)).await else {
        return;
    };
    expected_calls(&output);
}
both!(gemini_streams_thoughts_and_function_calls);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_stream_across_instances_through_redis_in_order() {
    let Some(redis) = crate::instances::redis_url().await else {
        return;
    };
    let (fake, base) = Fake::start().await;
    let call = |id: Option<&str>, args: &str| {
        let mut c = json!({"index": 0, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
            c["function"]["name"] = json!("get_weather");
        }
        chunk(json!({"tool_calls": [c]}), None)
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(json!({"reasoning_content": "One city, "}), None),
        chunk(json!({"reasoning_content": "one call."}), None),
        chunk(json!({"content": "Let me "}), None),
        chunk(json!({"content": "look."}), None),
        call(Some("call_p"), "{\"city\":"),
        call(None, " \"Pa"),
        call(None, "ris\"}"),
        chunk(json!({}), Some("tool_calls")),
    ];
    fake.always(Reply::Sse(events, Duration::from_millis(150), false));
    let Some(a) = TestApp::builder(Backend::Postgres)
        .config(|c| {
            family_api_streaming(c, "chat", Protocol::Openai, &base, true);
            c.redis_url = Some(redis.parse().unwrap());
        })
        .start()
        .await
    else {
        return;
    };
    let b = a.another_instance(|_| {}).await;
    let on_b = crate::utils::TestClient::new(&format!("http://{}", b.addr), Some(&a.live));
    let on_a = a.client(&a.live);
    // Runs on B; read on A, arriving once some output exists.
    let id = on_b
        .call(json!({"api": "chat", "mode": "async", "input": {
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [weather_tool()]}}))
        .await
        .expect(202)
        .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fake.requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream was never called"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (events, _) = read_events(&on_a, &id).await;
    let mut kinds: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    kinds.dedup();
    assert_eq!(
        kinds,
        ["reasoning", "delta", "tool_call", "done"],
        "{events:?}"
    );
    let joined = |kind: &str, field: &str| -> String {
        events
            .iter()
            .filter(|(e, _)| e == kind)
            .map(|(_, d)| d[field].as_str().unwrap())
            .collect()
    };
    assert_eq!(joined("reasoning", "text"), "One city, one call.");
    assert_eq!(joined("delta", "text"), "Let me look.");
    let args: Value = serde_json::from_str(&joined("tool_call", "arguments_delta")).unwrap();
    let done = &events.last().unwrap().1;
    assert_eq!(done["output"]["tool_calls"][0]["arguments"], args);
    assert_eq!(args, json!({"city": "Paris"}));
    let first = events.iter().find(|(e, _)| e == "tool_call").unwrap();
    assert_eq!(first.1["id"], "call_p");
    b.stop().await.unwrap();
    a.stop().await;
}

async fn a_test_key_streams_its_simulated_tool_call(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| family_api_streaming(c, "chat", Protocol::Anthropic, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let r = c
        .call(
            json!({"api": "chat", "mode": "async", "sandbox": {"delay_ms": 1500}, "input": {
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [weather_tool()], "tool_choice": {"name": "get_weather"}}}),
        )
        .await
        .expect(202);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let (events, _) = read_events(&c, &id).await;
    let done = &events.last().unwrap().1;
    let calls: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "tool_call")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    let expected = &done["output"]["tool_calls"][0];
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["id"], expected["id"]);
    assert_eq!(calls[0]["name"], "get_weather");
    let args: Value = serde_json::from_str(calls[0]["arguments_delta"].as_str().unwrap()).unwrap();
    assert_eq!(&args, &expected["arguments"]);
    assert_eq!(fake.requests(), 0);
    app.stop().await;
}
both!(a_test_key_streams_its_simulated_tool_call);
