//! The chat kind end to end through `POST /call`, per provider family: each
//! fake upstream speaks its family's real wire format, and the test checks
//! what it received and what the client got back (tool calls both ways,
//! images and PDFs, JSON output, reasoning, cached and reasoning tokens, an
//! upstream's broken tool arguments).

use serde_json::{Value, json};
use taskgate_providers::upstream::Protocol;

use crate::chat_checks::family_api;
use crate::upstream::{Fake, Reply};
use crate::utils::{Backend, TestApp, TestClient, both};

/// A 1×1 PNG and a tiny PDF, base64.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
pub(crate) const PDF: &str =
    "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDw+PgplbmRvYmoKdHJhaWxlcgo8PD4+CiUlRU9G";

pub(crate) fn weather_tool() -> Value {
    json!({"name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}})
}

fn ask_with_tools() -> Value {
    json!({"messages": [{"role": "user", "content": "Weather in Paris?"}],
           "tools": [weather_tool()], "tool_choice": "auto"})
}

/// The second turn of a tool loop, with an image and a PDF in the question.
fn answer_the_tool(id: &str) -> Value {
    json!({"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Weather in Paris? Also, what are these?"},
            {"type": "image", "data": PNG, "media_type": "image/png"},
            {"type": "document", "data": PDF, "media_type": "application/pdf"}]},
        {"role": "assistant", "tool_calls": [{"id": id, "name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"role": "tool", "tool_call_id": id, "content": "18°C, sunny"}],
        "tools": [weather_tool()]})
}

fn json_schema_format() -> Value {
    json!({"type": "json_schema", "name": "answer",
           "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
}

async fn succeeded(c: &TestClient, api: &str, input: Value) -> Value {
    let r = c
        .call(json!({"api": api, "input": input}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    r.data().clone()
}

async fn start(backend: Backend, protocol: Protocol) -> Option<(TestApp, Fake)> {
    let (fake, base) = Fake::start().await;
    let app = TestApp::builder(backend)
        .config(|c| family_api(c, "chat", protocol, &base))
        .start()
        .await?;
    Some((app, fake))
}

fn last_body(fake: &Fake) -> Value {
    fake.seen.lock().last().unwrap().2.clone()
}

async fn openai_chat_end_to_end(backend: Backend) {
    let Some((app, fake)) = start(backend, Protocol::Openai).await else {
        return;
    };
    let c = app.client(&app.live);
    let message = |m: Value, finish: &str, usage: Value| {
        Reply::Json(
            200,
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
                   "choices": [{"index": 0, "message": m, "finish_reason": finish}], "usage": usage}),
        )
    };
    let usage = json!({"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25});
    fake.then(message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
        "tool_calls",
        usage.clone(),
    ));
    let t = succeeded(&c, "chat", ask_with_tools()).await;
    assert_eq!(
        t["output"]["tool_calls"],
        json!([{"id": "call_abc", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(t["output"]["finish_reason"], "tool_calls");
    let body = last_body(&fake);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        body["tools"][0]["function"]["parameters"],
        weather_tool()["parameters"]
    );
    assert_eq!(body["tool_choice"], "auto");

    fake.then(message(
        json!({"role": "assistant", "content": "18°C and sunny."}),
        "stop",
        usage.clone(),
    ));
    let t = succeeded(&c, "chat", answer_the_tool("call_abc")).await;
    assert_eq!(t["output"]["text"], "18°C and sunny.");
    let body = last_body(&fake);
    let m = &body["messages"];
    assert_eq!(m[0]["content"][1]["type"], "image_url");
    assert_eq!(
        m[0]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{PNG}")
    );
    assert_eq!(m[0]["content"][2]["type"], "file");
    assert_eq!(
        m[0]["content"][2]["file"]["file_data"],
        format!("data:application/pdf;base64,{PDF}")
    );
    assert_eq!(m[1]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(m[1]["tool_calls"][0]["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(
        m[1]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(
        m[2],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "18°C, sunny"})
    );

    // JSON output and reasoning, with cached and reasoning tokens counted.
    fake.then(message(
        json!({"role": "assistant", "content": "{\"n\": 7}", "reasoning_content": "Seven it is."}),
        "stop",
        json!({"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140,
               "prompt_tokens_details": {"cached_tokens": 64},
               "completion_tokens_details": {"reasoning_tokens": 30}}),
    ));
    let t = succeeded(
        &c,
        "chat",
        json!({"messages": [{"role": "user", "content": "A number"}],
               "response_format": json_schema_format(), "reasoning": {"effort": "high"}}),
    )
    .await;
    assert_eq!(t["output"]["json"], json!({"n": 7}));
    assert_eq!(t["output"]["reasoning"], "Seven it is.");
    assert_eq!(t["usage"]["input_tokens"], 100);
    assert_eq!(t["usage"]["output_tokens"], 40);
    let body = last_body(&fake);
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        json_schema_format()["schema"]
    );

    // Tool arguments that are not JSON fail the task.
    fake.then(message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_bad", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": Par"}}]}),
        "tool_calls",
        usage,
    ));
    let r = c
        .call(json!({"api": "chat", "input": ask_with_tools()}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], "failed", "{}", r.text);
    assert_eq!(r.data()["error"]["code"], "invalid_upstream_response");
    app.stop().await;
}
both!(openai_chat_end_to_end);

async fn anthropic_chat_end_to_end(backend: Backend) {
    let Some((app, fake)) = start(backend, Protocol::Anthropic).await else {
        return;
    };
    let c = app.client(&app.live);
    let message = |content: Value, stop: &str, usage: Value| {
        Reply::Json(
            200,
            json!({"id": "msg_01", "type": "message", "role": "assistant", "content": content,
                   "model": "claude-x", "stop_reason": stop, "stop_sequence": null, "usage": usage}),
        )
    };
    let usage = json!({"input_tokens": 20, "output_tokens": 5});
    fake.then(message(
        json!([{"type": "text", "text": "Let me look."},
               {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}]),
        "tool_use",
        usage.clone(),
    ));
    let t = succeeded(&c, "chat", ask_with_tools()).await;
    assert_eq!(
        t["output"]["tool_calls"],
        json!([{"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(t["output"]["finish_reason"], "tool_calls");
    let body = last_body(&fake);
    assert_eq!(body["tools"][0]["name"], "get_weather");
    assert_eq!(
        body["tools"][0]["input_schema"],
        weather_tool()["parameters"]
    );
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));

    fake.then(message(
        json!([{"type": "text", "text": "18°C and sunny."}]),
        "end_turn",
        usage.clone(),
    ));
    let t = succeeded(&c, "chat", answer_the_tool("toolu_01")).await;
    assert_eq!(t["output"]["text"], "18°C and sunny.");
    let m = last_body(&fake)["messages"].clone();
    assert_eq!(
        m[0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}})
    );
    assert_eq!(
        m[0]["content"][2],
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}})
    );
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(
        m[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}})
    );
    assert_eq!(m[2]["role"], "user");
    assert_eq!(m[2]["content"][0]["type"], "tool_result");
    assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_01");

    // JSON output through the forced tool.
    fake.then(message(
        json!([{"type": "tool_use", "id": "toolu_02", "name": "json_answer", "input": {"n": 7}}]),
        "tool_use",
        usage,
    ));
    let t = succeeded(
        &c,
        "chat",
        json!({"messages": [{"role": "user", "content": "A number"}],
               "response_format": json_schema_format()}),
    )
    .await;
    assert_eq!(t["output"]["json"], json!({"n": 7}));
    assert_eq!(t["output"]["tool_calls"], json!([]));
    let body = last_body(&fake);
    assert_eq!(body["tools"][0]["name"], "json_answer");
    assert_eq!(
        body["tools"][0]["input_schema"],
        json_schema_format()["schema"]
    );

    // Reasoning, with cached input counted in the whole input.
    fake.then(message(
        json!([{"type": "thinking", "thinking": "Seven it is.", "signature": "sig"},
               {"type": "text", "text": "7"}]),
        "end_turn",
        json!({"input_tokens": 10, "cache_read_input_tokens": 64,
               "cache_creation_input_tokens": 6, "output_tokens": 40}),
    ));
    let t = succeeded(
        &c,
        "chat",
        json!({"messages": [{"role": "user", "content": "A number"}],
               "reasoning": {"max_tokens": 2000}, "max_tokens": 100}),
    )
    .await;
    assert_eq!(t["output"]["reasoning"], "Seven it is.");
    assert_eq!(t["output"]["text"], "7");
    assert_eq!(t["usage"]["input_tokens"], 80);
    let body = last_body(&fake);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert_eq!(body["max_tokens"], 2100);
    app.stop().await;
}
both!(anthropic_chat_end_to_end);

async fn gemini_chat_end_to_end(backend: Backend) {
    let Some((app, fake)) = start(backend, Protocol::Gemini).await else {
        return;
    };
    let c = app.client(&app.live);
    let reply = |parts: Value, usage: Value| {
        Reply::Json(
            200,
            json!({"candidates": [{"content": {"parts": parts, "role": "model"},
                                   "finishReason": "STOP", "index": 0}],
                   "usageMetadata": usage, "modelVersion": "gemini-x"}),
        )
    };
    let usage = json!({"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25});
    fake.then(reply(
        json!([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]),
        usage.clone(),
    ));
    let t = succeeded(&c, "chat", ask_with_tools()).await;
    let calls = t["output"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{t}");
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"), "{t}");
    assert_eq!(calls[0]["name"], "get_weather");
    assert_eq!(calls[0]["arguments"], json!({"city": "Paris"}));
    assert_eq!(t["output"]["finish_reason"], "tool_calls");
    let body = last_body(&fake);
    let declared = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declared["name"], "get_weather");
    assert_eq!(
        declared["parametersJsonSchema"],
        weather_tool()["parameters"]
    );
    assert_eq!(body["toolConfig"]["functionCallingConfig"]["mode"], "AUTO");

    let id = calls[0]["id"].as_str().unwrap().to_owned();
    fake.then(reply(json!([{"text": "18°C and sunny."}]), usage));
    let t = succeeded(&c, "chat", answer_the_tool(&id)).await;
    assert_eq!(t["output"]["text"], "18°C and sunny.");
    let contents = last_body(&fake)["contents"].clone();
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": PNG}})
    );
    assert_eq!(
        contents[0]["parts"][2],
        json!({"inlineData": {"mimeType": "application/pdf", "data": PDF}})
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][0]["functionCall"]["args"],
        json!({"city": "Paris"})
    );
    assert_eq!(contents[2]["role"], "user");
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "get_weather", "{contents}");

    // JSON output with reasoning; thoughts are output, cached input counted.
    fake.then(reply(
        json!([{"text": "Seven it is.", "thought": true}, {"text": "{\"n\": 7}"}]),
        json!({"promptTokenCount": 100, "cachedContentTokenCount": 64,
               "candidatesTokenCount": 10, "thoughtsTokenCount": 30, "totalTokenCount": 140}),
    ));
    let t = succeeded(
        &c,
        "chat",
        json!({"messages": [{"role": "user", "content": "A number"}],
               "response_format": json_schema_format(), "reasoning": {"max_tokens": 1000}}),
    )
    .await;
    assert_eq!(t["output"]["json"], json!({"n": 7}));
    assert_eq!(t["output"]["reasoning"], "Seven it is.");
    assert_eq!(t["usage"]["input_tokens"], 100);
    assert_eq!(t["usage"]["output_tokens"], 40);
    let config = &last_body(&fake)["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["responseJsonSchema"], json_schema_format()["schema"]);
    assert_eq!(
        config["thinkingConfig"],
        json!({"thinkingBudget": 1000, "includeThoughts": true})
    );
    app.stop().await;
}
both!(gemini_chat_end_to_end);

async fn test_mode_answers_forced_tools_and_schemas(backend: Backend) {
    let Some((app, fake)) = start(backend, Protocol::Anthropic).await else {
        return;
    };
    let c = app.client(&app.test);
    let mut input = ask_with_tools();
    input["tool_choice"] = json!({"name": "get_weather"});
    let t = succeeded(&c, "chat", input.clone()).await;
    let calls = t["output"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{t}");
    assert_eq!(calls[0]["name"], "get_weather");
    let tool_schema =
        taskgate_providers::schema::CompiledSchema::compile(&weather_tool()["parameters"]).unwrap();
    assert!(tool_schema.is_valid(&calls[0]["arguments"]), "{t}");
    assert_eq!(t["output"]["finish_reason"], "tool_calls");
    // Deterministic per input.
    assert_eq!(succeeded(&c, "chat", input).await["output"], t["output"]);

    let t = succeeded(
        &c,
        "chat",
        json!({"messages": [{"role": "user", "content": "A number"}],
               "response_format": json_schema_format()}),
    )
    .await;
    let schema =
        taskgate_providers::schema::CompiledSchema::compile(&json_schema_format()["schema"])
            .unwrap();
    assert!(schema.is_valid(&t["output"]["json"]), "{t}");
    let text: Value = serde_json::from_str(t["output"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, t["output"]["json"]);
    assert_eq!(fake.requests(), 0, "test mode never calls upstream");
    app.stop().await;
}
both!(test_mode_answers_forced_tools_and_schemas);
