//! `/anthropic/v1/messages`, Anthropic's Messages API over the `chat`
//! kind: tool use round trips, images and documents, JSON by schema,
//! thinking, streamed events, errors in Anthropic's shape, and every
//! request a task of the native API.

use serde_json::{Value, json};

use crate::upstream::{Fake, Reply, chat_api};
use crate::utils::{Backend, Resp, TestApp, TestClient, both};

/// A request with Anthropic's headers: the key as `x-api-key`.
async fn post(c: &TestClient, key: Option<&str>, body: Value) -> Resp {
    let mut req = reqwest::Client::new()
        .post(c.url("/anthropic/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(&body);
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    c.send(req).await
}

fn answer(message: Value, finish: &str) -> Reply {
    Reply::Json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}
        }),
    )
}

/// Asserts an error in Anthropic's shape.
fn anthropic_error(r: &Resp, status: u16, kind: &str) {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    assert_eq!(r.body["type"], "error", "{}", r.text);
    assert_eq!(r.body["error"]["type"], kind, "{}", r.text);
    assert!(r.body["error"]["message"].is_string(), "{}", r.text);
}

fn weather() -> Value {
    json!({"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}})
}

async fn a_tool_use_round_trip(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.then(answer(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
        "tool_calls",
    ));
    fake.then(answer(
        json!({"role": "assistant", "content": "Sunny in Paris."}),
        "stop",
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let ask = json!({"role": "user", "content": "Weather in Paris?"});
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 200, "system": [{"type": "text", "text": "Be brief."}],
               "messages": [ask], "tools": [weather()],
               "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
               "metadata": {"user_id": "u-1"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let first = r.header("x-taskgate-task-id").unwrap().to_owned();
    assert_eq!(
        r.body["id"].as_str().unwrap(),
        format!("msg_{}", first.strip_prefix("task_").unwrap())
    );
    assert_eq!(r.body["type"], "message");
    assert_eq!(r.body["role"], "assistant");
    assert_eq!(r.body["model"], "chat");
    assert_eq!(r.body["stop_reason"], "tool_use");
    assert_eq!(
        r.body["content"],
        json!([{"type": "tool_use", "id": "call_1", "name": "get_weather",
                "input": {"city": "Paris"}}])
    );
    assert_eq!(
        r.body["usage"],
        json!({"input_tokens": 30, "output_tokens": 12})
    );
    let (_, _, sent) = fake.seen.lock()[0].clone();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(sent["max_tokens"], 200);
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    assert_eq!(sent["tool_choice"], "required");
    assert_eq!(sent["parallel_tool_calls"], false);

    // The tool's result goes back as Anthropic's SDKs send it.
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 200, "tools": [weather()], "messages": [
            ask,
            {"role": "assistant", "content": r.body["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1",
                 "content": [{"type": "text", "text": "sunny"}]},
                {"type": "text", "text": "And so?"}
            ]}
        ]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let second = r.header("x-taskgate-task-id").unwrap().to_owned();
    assert_eq!(
        r.body["content"],
        json!([{"type": "text", "text": "Sunny in Paris."}])
    );
    assert_eq!(r.body["stop_reason"], "end_turn");
    let (_, _, sent) = fake.seen.lock()[1].clone();
    let m = sent["messages"].as_array().unwrap();
    assert_eq!(m[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        m[2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"})
    );
    assert_eq!(m[3], json!({"role": "user", "content": "And so?"}));

    // Both are tasks of the native API, with the request's metadata.
    let t = c.get(&format!("tasks/{first}")).await.expect(200);
    assert_eq!(t.data()["metadata"], json!({"user_id": "u-1"}));
    let items = c.get("tasks").await.expect(200);
    let ids: Vec<&str> = items.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert!(ids.contains(&first.as_str()) && ids.contains(&second.as_str()));
    app.stop().await;
}
both!(a_tool_use_round_trip);

async fn media_json_thinking_streams_and_errors(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(answer(
        json!({"role": "assistant", "content": "{\"colour\":\"red\"}",
               "reasoning_content": "Red pixels."}),
        "stop",
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let schema = json!({"type": "object", "properties": {"colour": {"type": "string"}}});
    let body = json!({"model": "chat", "max_tokens": 3000,
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "output_format": {"type": "json_schema", "schema": schema},
    "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        {"type": "text", "text": "Which colour?"}
    ]}]});
    // The key as a bearer token works as well as x-api-key.
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/anthropic/v1/messages")
                .json(&body),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.body["content"],
        json!([{"type": "thinking", "thinking": "Red pixels.", "signature": ""},
               {"type": "text", "text": "{\"colour\":\"red\"}"}])
    );
    let (_, _, sent) = fake.seen.lock()[0].clone();
    let parts = &sent["messages"][0]["content"];
    assert_eq!(
        parts[0]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(
        parts[1]["file"]["file_data"],
        "data:application/pdf;base64,JVBERi0="
    );
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
    assert_eq!(sent["reasoning_effort"], "medium");
    // Anthropic's max_tokens counts the thinking, as OpenAI's
    // max_completion_tokens does: the same limit reaches the upstream, not
    // the budget twice.
    assert_eq!(sent["max_completion_tokens"], 3000, "{sent}");

    // Streamed from a provider that does not stream: Anthropic's events,
    // in order, each block whole.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = post(&c, Some(&app.live), streamed).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let names: Vec<&str> = r
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(r.text.contains("\"thinking_delta\"") && r.text.contains("\"text_delta\""));
    assert!(r.text.contains("\"stop_reason\":\"end_turn\""));

    // Errors in Anthropic's shape; none reaches the provider or makes a task.
    let before = fake.requests();
    let tasks_before = c.get("tasks").await.expect(200).data()["items"]
        .as_array()
        .unwrap()
        .len();
    let hello = json!({"role": "user", "content": "hi"});
    anthropic_error(
        &post(
            &c,
            None,
            json!({"model": "chat", "max_tokens": 5, "messages": [hello]}),
        )
        .await,
        401,
        "authentication_error",
    );
    anthropic_error(
        &post(
            &c,
            Some(&app.live),
            json!({"model": "chat", "messages": [hello]}),
        )
        .await,
        400,
        "invalid_request_error",
    );
    anthropic_error(
        &post(
            &c,
            Some(&app.live),
            json!({"model": "nope", "max_tokens": 5, "messages": [hello]}),
        )
        .await,
        404,
        "not_found_error",
    );
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 5, "top_k": 3, "messages": [hello]}),
    )
    .await;
    anthropic_error(&r, 400, "invalid_request_error");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("top_k")
    );
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 5, "messages": [hello], "tools": [weather()],
               "tool_choice": {"type": "tool", "name": "nope"}}),
    )
    .await;
    anthropic_error(&r, 400, "invalid_request_error");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tool_choice")
    );
    let r = c
        .send(c.request(reqwest::Method::GET, "/anthropic/v1/files"))
        .await;
    anthropic_error(&r, 404, "not_found_error");
    assert_eq!(fake.requests(), before);
    let tasks_after = c.get("tasks").await.expect(200).data()["items"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(tasks_after, tasks_before);
    app.stop().await;
}
both!(media_json_thinking_streams_and_errors);

/// A streaming provider's text and tool call fragments, as Anthropic's
/// blocks and deltas while they come.
async fn streamed_pieces_are_blocks(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let delta = |d: Value, finish: Option<&str>| crate::upstream::chunk(d, finish);
    fake.then(Reply::Sse(
        vec![
            delta(json!({"role": "assistant", "content": "Let me "}), None),
            delta(json!({"content": "look."}), None),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":"}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
                None,
            ),
            delta(json!({}), Some("tool_calls")),
        ],
        std::time::Duration::from_millis(30),
        false,
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 100, "stream": true, "tools": [weather()],
               "messages": [{"role": "user", "content": "Weather in Paris?"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let events = events_of(&r.text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Let me look.");
    // Text deltas came one by one, in block 0; the call is block 1.
    let text_deltas = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .count();
    assert!(text_deltas >= 2, "{}", r.text);
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(starts.len(), 2, "{}", r.text);
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(
        starts[1]["content_block"],
        json!({"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}})
    );
    let json: String = events
        .iter()
        .filter(|(_, d)| d["index"] == 1)
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json).unwrap(),
        json!({"city": "Paris"})
    );
    let stops = names.iter().filter(|n| **n == "content_block_stop").count();
    assert_eq!(stops, 2);
    let end = &events[events.len() - 2].1;
    assert_eq!(end["delta"]["stop_reason"], "tool_use");
    app.stop().await;
}
both!(streamed_pieces_are_blocks);

/// What Claude Code sends today goes through: adaptive thinking with
/// `output_config`'s effort, `output_config.format`, a system message among
/// the turns, an image a tool returned, and the fields that steer
/// Anthropic's own service (`context_management`, `cache_control`, `speed`,
/// `inference_geo`), which are dropped.
async fn what_claude_code_sends_goes_through(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(answer(
        json!({"role": "assistant", "content": "{\"colour\":\"red\"}"}),
        "stop",
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let schema = json!({"type": "object", "properties": {"colour": {"type": "string"}}});
    let png = "iVBORw0KGgo=";
    let body = json!({"model": "chat", "max_tokens": 3000,
    "thinking": {"type": "adaptive"},
    "output_config": {"effort": "xhigh", "format": {"type": "json_schema", "schema": schema}},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "cache_control": {"type": "ephemeral"}, "speed": "fast", "inference_geo": "us",
    "system": [{"type": "text", "text": "You read images.", "cache_control": {"type": "ephemeral"}}],
    "tools": [weather()],
    "messages": [
        {"role": "user", "content": "Look at the picture."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]},
            {"type": "text", "text": "Which colour?", "cache_control": {"type": "ephemeral"}}]},
        {"role": "system", "content": "Answer in JSON."}
    ]});
    let r = post(&c, Some(&app.live), body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, _, sent) = fake.seen.lock()[0].clone();
    // Adaptive thinking at xhigh is the kind's most: high.
    assert_eq!(sent["reasoning_effort"], "high", "{sent}");
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
    for dropped in [
        "context_management",
        "cache_control",
        "speed",
        "inference_geo",
    ] {
        assert!(
            sent.get(dropped).is_none(),
            "{dropped} reached the upstream: {sent}"
        );
    }
    let messages = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user", "system"],
        "{sent}"
    );
    assert_eq!(messages[3]["tool_call_id"], "toolu_1");
    assert_eq!(
        messages[4]["content"][0]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
    assert_eq!(messages[4]["content"][1]["text"], "Which colour?");
    assert_eq!(messages[5]["content"], "Answer in JSON.");

    // Claude Code posts to `/v1/messages?beta=true`: the query changes nothing.
    let r = c
        .send(
            reqwest::Client::new()
                .post(c.url("/anthropic/v1/messages?beta=true"))
                .header("x-api-key", &app.live)
                .header("anthropic-version", "2023-06-01")
                .header(
                    "anthropic-beta",
                    "claude-code-20250219,interleaved-thinking-2025-05-14",
                )
                .json(&body),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["type"], "message", "{}", r.text);

    // An effort that is not one of Anthropic's is refused in its shape.
    let mut bad = body;
    bad["output_config"]["effort"] = json!("huge");
    let before = fake.requests();
    let r = post(&c, Some(&app.live), bad).await;
    anthropic_error(&r, 400, "invalid_request_error");
    assert_eq!(fake.requests(), before);
    app.stop().await;
}
both!(what_claude_code_sends_goes_through);

/// The events of a streamed message: (name, data).
fn events_of(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|e| {
            let (name, data) = e.split_once('\n')?;
            Some((
                name.strip_prefix("event: ")?.to_owned(),
                serde_json::from_str(data.strip_prefix("data: ")?).ok()?,
            ))
        })
        .collect()
}

/// Claude Code's tool loop with thinking on, against an Anthropic upstream:
/// the signed thinking block comes back to the client (plain and streamed)
/// and, sent back with the tool's result, reaches Anthropic again first in
/// the assistant turn, as Anthropic requires.
async fn signed_thinking_survives_a_tool_loop(backend: Backend) {
    use taskgate_providers::upstream::Protocol;
    let (fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            // The same upstream, read whole and streamed.
            crate::chat_checks::family_api_streaming(
                c,
                "claude",
                Protocol::Anthropic,
                &base,
                false,
            );
            crate::chat_checks::family_api_streaming(
                c,
                "claude-s",
                Protocol::Anthropic,
                &base,
                true,
            );
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let usage = json!({"input_tokens": 20, "output_tokens": 5});
    fake.then(Reply::Json(
        200,
        json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"},
                           {"type": "redacted_thinking", "data": "enc-1"},
                           {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                            "input": {"city": "Paris"}}],
               "stop_reason": "tool_use", "stop_sequence": null, "usage": usage}),
    ));
    let ask = json!({"role": "user", "content": "Weather in Paris?"});
    let thinking = json!({"type": "enabled", "budget_tokens": 1024});
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "claude", "max_tokens": 2048, "thinking": thinking,
               "tools": [weather()], "messages": [ask]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let content = r.body["content"].clone();
    assert_eq!(
        content,
        json!([{"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"},
               {"type": "redacted_thinking", "data": "enc-1"},
               {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                "input": {"city": "Paris"}}])
    );
    // The task's output records them for /api/v1 callers too.
    let id = r.header("x-taskgate-task-id").unwrap().to_owned();
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(
        t.data()["output"]["reasoning_details"],
        json!([{"type": "thinking", "format": "anthropic", "text": "Use the tool.", "signature": "sig-1"},
               {"type": "redacted", "format": "anthropic", "data": "enc-1"}])
    );

    // The second turn, streamed: the upstream's signature comes through as
    // a signature_delta that closes the thinking block.
    fake.then(Reply::Events(
        vec![
            json!({"type": "message_start", "message": {"id": "msg_02", "type": "message",
                   "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null,
                   "usage": {"input_tokens": 30, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "thinking_delta", "thinking": "Sunny, say so."}}),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "signature_delta", "signature": "sig-2"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": "Sunny."}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ],
        std::time::Duration::from_millis(5),
    ));
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "claude-s", "max_tokens": 2048, "thinking": thinking, "stream": true,
               "tools": [weather()], "messages": [
                   ask,
                   {"role": "assistant", "content": content},
                   {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, _, sent) = fake.seen.lock()[1].clone();
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"},
               {"type": "redacted_thinking", "data": "enc-1"},
               {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                "input": {"city": "Paris"}}])
    );
    let events = events_of(&r.text);
    let blocks: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| (&d["index"], &d["content_block"]["type"]))
        .collect();
    assert_eq!(
        blocks,
        [(&json!(0), &json!("thinking")), (&json!(1), &json!("text"))],
        "{}",
        r.text
    );
    let signature: Vec<&Value> = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "signature_delta")
        .map(|(_, d)| &d["index"])
        .collect();
    assert_eq!(signature, [&json!(0)], "{}", r.text);
    let sig: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["signature"].as_str())
        .collect();
    assert_eq!(sig, "sig-2");
    app.stop().await;
}
both!(signed_thinking_survives_a_tool_loop);

/// Parallel tool calls whose fragments interleave (OpenAI-style providers
/// may) come out as one whole block per call, never a call split in two.
async fn interleaved_tool_call_fragments_stay_one_block_each(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let delta = |d: Value, finish: Option<&str>| crate::upstream::chunk(d, finish);
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        delta(json!({"tool_calls": [c]}), None)
    };
    fake.then(Reply::Sse(
        vec![
            delta(json!({"role": "assistant", "content": null}), None),
            call(0, Some("call_a"), Some("get_weather"), "{\"city\":"),
            call(1, Some("call_b"), Some("get_weather"), "{\"city\":"),
            call(0, None, None, "\"Paris\"}"),
            call(1, None, None, "\"Rome\"}"),
            delta(json!({}), Some("tool_calls")),
        ],
        std::time::Duration::from_millis(5),
        false,
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, true))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let r = post(
        &c,
        Some(&app.live),
        json!({"model": "chat", "max_tokens": 100, "stream": true, "tools": [weather()],
               "messages": [{"role": "user", "content": "Paris and Rome?"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let events = events_of(&r.text);
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| &d["content_block"])
        .collect();
    assert_eq!(
        starts,
        [
            &json!({"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {}}),
            &json!({"type": "tool_use", "id": "call_b", "name": "get_weather", "input": {}})
        ],
        "{}",
        r.text
    );
    for (index, city) in [(0, "Paris"), (1, "Rome")] {
        let json: String = events
            .iter()
            .filter(|(_, d)| d["index"] == index)
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            json!({"city": city}),
            "{}",
            r.text
        );
    }
    app.stop().await;
}
both!(interleaved_tool_call_fragments_stay_one_block_each);

/// `count_tokens`, which Claude Code asks often: an estimate of the input's
/// tokens, with no task made, nothing sent upstream, the door's errors.
async fn count_tokens_estimates_without_a_task(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let count = |body: Value| {
        let c = &c;
        let key = app.live.clone();
        async move {
            c.send(
                reqwest::Client::new()
                    .post(c.url("/anthropic/v1/messages/count_tokens?beta=true"))
                    .header("anthropic-version", "2023-06-01")
                    .header("x-api-key", key)
                    .json(&body),
            )
            .await
        }
    };
    let short = count(json!({"model": "chat",
                             "messages": [{"role": "user", "content": "Hello there"}]}))
    .await;
    assert_eq!(short.status, 200, "{}", short.text);
    let n = short.body["input_tokens"].as_u64().unwrap();
    assert!(n > 0, "{}", short.text);
    assert_eq!(short.body.as_object().unwrap().len(), 1, "{}", short.text);
    let long = count(
        json!({"model": "chat", "system": "Be brief.", "tools": [weather()],
                            "messages": [{"role": "user", "content": "Hello there ".repeat(100)}]}),
    )
    .await;
    assert_eq!(long.status, 200, "{}", long.text);
    assert!(
        long.body["input_tokens"].as_u64().unwrap() > n + 100,
        "{}",
        long.text
    );
    let unknown =
        count(json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]})).await;
    anthropic_error(&unknown, 404, "not_found_error");
    let bad = count(json!({"model": "chat", "messages": "x"})).await;
    anthropic_error(&bad, 400, "invalid_request_error");
    let anonymous = c
        .send(
            reqwest::Client::new()
                .post(c.url("/anthropic/v1/messages/count_tokens"))
                .json(&json!({"model": "chat", "messages": []})),
        )
        .await;
    anthropic_error(&anonymous, 401, "authentication_error");
    assert_eq!(fake.requests(), 0, "nothing went upstream");
    let tasks = c.get("tasks").await.expect(200);
    assert_eq!(tasks.data()["items"], json!([]), "no task was made");
    app.stop().await;
}
both!(count_tokens_estimates_without_a_task);

/// `GET /models` and `/models/{id}` list the chat APIs as Anthropic's model
/// objects; every answer of the door has Anthropic's `request-id` header.
async fn models_and_request_ids(backend: Backend) {
    let (_fake, base) = Fake::start().await;
    let Some(app) = TestApp::builder(backend)
        .config(|c| chat_api(c, &base, false))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let get = |path: &str| {
        c.send(
            reqwest::Client::new()
                .get(c.url(path))
                .header("x-api-key", &app.live)
                .header("anthropic-version", "2023-06-01"),
        )
    };
    let r = get("/anthropic/v1/models").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let models = r.body["data"].as_array().unwrap();
    assert_eq!(models.len(), 1, "only chat APIs: {}", r.text);
    assert_eq!(models[0]["type"], "model");
    assert_eq!(models[0]["id"], "chat");
    assert_eq!(models[0]["display_name"], "Fake GPT");
    assert!(
        models[0]["created_at"].as_str().unwrap().ends_with('Z'),
        "{}",
        r.text
    );
    assert_eq!(r.body["has_more"], false);
    assert_eq!(
        (&r.body["first_id"], &r.body["last_id"]),
        (&json!("chat"), &json!("chat"))
    );
    assert_eq!(r.header("request-id"), r.header("x-request-id"));
    assert!(r.header("request-id").is_some());
    let one = get("/anthropic/v1/models/chat").await;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(one.body, models[0]);
    let none = get("/anthropic/v1/models/sentiment").await;
    anthropic_error(&none, 404, "not_found_error");
    assert!(none.header("request-id").is_some());
    app.stop().await;
}
both!(models_and_request_ids);
