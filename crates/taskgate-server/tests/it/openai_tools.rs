//! `/openai/v1/chat/completions` with tools, images, documents, JSON
//! schemas and reasoning: OpenAI's request shapes reach the provider as the
//! `chat` kind maps them, and answers come back in OpenAI's shape.

use serde_json::{Value, json};

use crate::upstream::{Fake, Reply, chat_api};
use crate::utils::{Backend, Resp, TestApp, TestClient, both};

async fn post(c: &TestClient, body: Value) -> Resp {
    c.send(
        c.request(reqwest::Method::POST, "/openai/v1/chat/completions")
            .json(&body),
    )
    .await
}

/// An OpenAI answer whose message is `message`.
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

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
        "strict": true
    }})
}

async fn a_tool_call_round_trip(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.then(answer(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
        }]}),
        "tool_calls",
    ));
    fake.then(answer(
        json!({"role": "assistant", "content": "It is sunny in Paris."}),
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
        json!({"model": "chat", "messages": [ask], "tools": [weather_tool()],
               "tool_choice": "auto", "parallel_tool_calls": false}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let first = r.header("x-taskgate-task-id").unwrap().to_owned();
    let choice = &r.body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));

    let (_, _, sent) = fake.seen.lock()[0].clone();
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    assert_eq!(sent["tool_choice"], "auto");
    assert_eq!(sent["parallel_tool_calls"], false);

    // The client answers with the assistant's call and the tool's result.
    let r = post(
        &c,
        json!({"model": "chat", "tools": [weather_tool()], "messages": [
            ask,
            choice["message"],
            {"role": "tool", "tool_call_id": "call_1",
             "content": [{"type": "text", "text": "sunny, 21 C"}]}
        ]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let second = r.header("x-taskgate-task-id").unwrap().to_owned();
    assert_eq!(
        r.body["choices"][0]["message"]["content"],
        "It is sunny in Paris."
    );
    assert_eq!(r.body["choices"][0]["finish_reason"], "stop");
    assert!(r.body["choices"][0]["message"].get("tool_calls").is_none());
    let (_, _, sent) = fake.seen.lock()[1].clone();
    let calls = &sent["messages"][1]["tool_calls"][0];
    assert_eq!(calls["id"], "call_1");
    let args: Value =
        serde_json::from_str(calls["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(sent["messages"][2]["role"], "tool");
    assert_eq!(sent["messages"][2]["tool_call_id"], "call_1");

    // Both are tasks of the native API, the output's calls typed.
    let t = c.get(&format!("tasks/{first}")).await.expect(200);
    assert_eq!(
        t.data()["output"]["tool_calls"][0]["arguments"],
        json!({"city": "Paris"})
    );
    let items = c.get("tasks").await.expect(200);
    let ids: Vec<&str> = items.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert!(ids.contains(&first.as_str()) && ids.contains(&second.as_str()));

    // Arguments that are not JSON name their message, and reach nothing.
    let before = fake.requests();
    let r = post(
        &c,
        json!({"model": "chat", "messages": [ask, {"role": "assistant", "tool_calls": [{
            "id": "call_9", "type": "function",
            "function": {"name": "get_weather", "arguments": "{city: Paris"}}]}]}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["error"]["type"], "invalid_request_error");
    assert_eq!(
        r.body["error"]["param"],
        "messages[1].tool_calls[0].function.arguments"
    );
    assert_eq!(fake.requests(), before);
    app.stop().await;
}
both!(a_tool_call_round_trip);

async fn images_documents_schemas_and_reasoning(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(answer(
        json!({"role": "assistant", "content": "{\"colour\":\"red\"}",
               "reasoning_content": "The pixel is red."}),
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
    let schema = json!({"type": "object", "properties": {"colour": {"type": "string"}},
                        "required": ["colour"]});
    let r = post(
        &c,
        json!({"model": "chat", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Which colour?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}}
        ]}],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "colour", "schema": schema, "strict": true}},
        "reasoning_effort": "minimal",
        "max_completion_tokens": 300}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let message = &r.body["choices"][0]["message"];
    assert_eq!(message["content"], "{\"colour\":\"red\"}");
    assert_eq!(message["reasoning_content"], "The pixel is red.");
    let id = r.header("x-taskgate-task-id").unwrap().to_owned();
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(t.data()["output"]["json"], json!({"colour": "red"}));

    let (_, _, sent) = fake.seen.lock()[0].clone();
    let parts = &sent["messages"][0]["content"];
    assert_eq!(parts[0], json!({"type": "text", "text": "Which colour?"}));
    assert_eq!(
        parts[1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(parts[2]["image_url"]["url"], "https://example.com/cat.jpg");
    assert_eq!(parts[3]["type"], "file");
    assert_eq!(
        parts[3]["file"]["file_data"],
        "data:application/pdf;base64,JVBERi0="
    );
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
    assert_eq!(sent["reasoning_effort"], "low");

    // `xhigh` is the kind's most; what concerns OpenAI's own service (its
    // prompt cache's key, the end user's identifier) is dropped, as the
    // agent frameworks send them when asked.
    let r = post(
        &c,
        json!({"model": "chat", "messages": [{"role": "user", "content": "Which colour?"}],
               "reasoning_effort": "xhigh", "prompt_cache_key": "k1",
               "prompt_cache_retention": "24h", "safety_identifier": "u-1"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, _, sent) = fake.seen.lock().last().unwrap().clone();
    assert_eq!(sent["reasoning_effort"], "high");
    for dropped in [
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
    ] {
        assert!(
            sent.get(dropped).is_none(),
            "{dropped} reached the upstream: {sent}"
        );
    }

    // What the route cannot carry is refused, `param` set, nothing sent.
    let before = fake.requests();
    let user =
        |part: Value| json!({"model": "chat", "messages": [{"role": "user", "content": [part]}]});
    let cases = [
        (
            user(json!({"type": "file", "file": {"file_id": "file-1"}})),
            "unsupported_parameter",
            "messages[0].content[0].file.file_id",
        ),
        (
            user(json!({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})),
            "unsupported_parameter",
            "messages[0].content[0]",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "logprobs": true}),
            "unsupported_parameter",
            "logprobs",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"type": "custom", "custom": {"name": "x"}}]}),
            "unsupported_parameter",
            "tools[0].type",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"}),
            "invalid_field",
            "reasoning_effort",
        ),
        (
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}],
                   "tools": [weather_tool()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "invalid_input",
            "tool_choice.name",
        ),
    ];
    for (body, code, param) in cases {
        let r = post(&c, body.clone()).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(r.body["error"]["code"], code, "{}", r.text);
        assert!(
            r.body["error"]["param"]
                .as_str()
                .is_some_and(|p| p.contains(param)),
            "{body}: {}",
            r.text
        );
    }
    assert_eq!(fake.requests(), before);
    app.stop().await;
}
both!(images_documents_schemas_and_reasoning);

/// The data of each event of a streamed answer.
async fn stream_data(c: &TestClient, body: Value) -> Vec<String> {
    let r = c
        .request(reqwest::Method::POST, "/openai/v1/chat/completions")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: ").map(str::to_owned))
        .collect()
}

async fn streamed_tool_calls_and_reasoning(backend: Backend) {
    let (fake, base) = Fake::start().await;
    let delta = |d: Value, finish: Option<&str>| crate::upstream::chunk(d, finish);
    fake.then(Reply::Sse(
        vec![
            delta(
                json!({"role": "assistant", "reasoning_content": "Think"}),
                None,
            ),
            delta(json!({"reasoning_content": " twice."}), None),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": ""}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
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
    let events = stream_data(
        &c,
        json!({"model": "chat", "stream": true, "tools": [weather_tool()],
               "messages": [{"role": "user", "content": "Weather in Paris?"}]}),
    )
    .await;
    assert_eq!(events.last().unwrap(), "[DONE]", "{events:?}");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| d["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning, "Think twice.");
    // The call's fragments as they came: the first with its id and name.
    let fragments: Vec<&Value> = deltas
        .iter()
        .filter_map(|d| d["tool_calls"].get(0))
        .collect();
    assert!(fragments.len() >= 2, "streamed, not whole: {events:?}");
    assert_eq!(fragments[0]["id"], "call_1");
    assert_eq!(fragments[0]["type"], "function");
    assert_eq!(fragments[0]["function"]["name"], "get_weather");
    assert!(fragments.iter().all(|f| f["index"] == 0));
    assert!(fragments[1..].iter().all(|f| f.get("id").is_none()));
    let arguments: String = fragments
        .iter()
        .filter_map(|f| f["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({"city": "Paris"})
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(last["choices"][0]["delta"], json!({}));
    app.stop().await;
}
both!(streamed_tool_calls_and_reasoning);

/// Through the OpenAI door to an Anthropic upstream with reasoning on: the
/// message's `reasoning_details` (Taskgate's own field) carry the signed
/// thinking, and an assistant message that sends them back gets them to
/// Anthropic before its `tool_use`.
async fn reasoning_details_carry_signed_thinking_through_the_openai_door(backend: Backend) {
    use taskgate_providers::upstream::Protocol;
    let (fake, base) = Fake::start().await;
    fake.always(Reply::Json(
        200,
        json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "thinking", "thinking": "Use it.", "signature": "sig-9"},
                           {"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                            "input": {"city": "Oslo"}}],
               "stop_reason": "tool_use", "stop_sequence": null,
               "usage": {"input_tokens": 9, "output_tokens": 3}}),
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| crate::chat_checks::family_api(c, "claude", Protocol::Anthropic, &base))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let ask = json!({"role": "user", "content": "Weather in Oslo?"});
    let r = post(
        &c,
        json!({"model": "claude", "reasoning_effort": "low", "tools": [weather_tool()],
               "messages": [ask]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let message = r.body["choices"][0]["message"].clone();
    assert_eq!(
        message["reasoning_details"],
        json!([{"type": "thinking", "format": "anthropic", "text": "Use it.", "signature": "sig-9"}])
    );
    // Another gateway's item of the same field is left out, not refused.
    let mut back = message.clone();
    back["reasoning_details"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "reasoning.text", "text": "x", "format": "anthropic-claude-v1"}));
    let r = post(
        &c,
        json!({"model": "claude", "reasoning_effort": "low", "tools": [weather_tool()],
               "messages": [ask, back,
                            {"role": "tool", "tool_call_id": "toolu_9", "content": "cold"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let sent = fake.seen.lock()[1].2.clone();
    assert_eq!(
        sent["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Use it.", "signature": "sig-9"})
    );
    assert_eq!(sent["messages"][1]["content"][1]["type"], "tool_use");

    // Streamed, the details come whole in a delta before the finish.
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/openai/v1/chat/completions")
                .json(
                    &json!({"model": "claude", "reasoning_effort": "low", "stream": true,
                              "tools": [weather_tool()], "messages": [ask]}),
                ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let chunks: Vec<Value> = r
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let with = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"].get("reasoning_details").is_some())
        .expect("a delta with the details");
    assert_eq!(
        chunks[with]["choices"][0]["delta"]["reasoning_details"],
        message["reasoning_details"]
    );
    let finish = chunks
        .iter()
        .position(|c| c["choices"][0]["finish_reason"] == "tool_calls")
        .unwrap();
    assert!(with < finish, "{}", r.text);
    app.stop().await;
}
both!(reasoning_details_carry_signed_thinking_through_the_openai_door);
