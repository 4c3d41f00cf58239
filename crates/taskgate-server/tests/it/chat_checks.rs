//! A chat input is checked before anything is stored: the rules past its
//! JSON Schema, then what the API's provider cannot carry. A refused call
//! stores no task and reaches no upstream, for live and test keys alike.

use serde_json::{Value, json};
use taskgate_providers::upstream::Protocol;
use taskgate_server::Config;
use taskgate_server::config::ApiOverride;

use crate::upstream::{Fake, chat_completion, provider};
use crate::utils::{Backend, TestApp, both};

/// A `chat` API `slug` at a provider of `protocol` whose fake listens at
/// `base` (an OpenAI-style base ending in `/v1`).
pub(crate) fn family_api(config: &mut Config, slug: &str, protocol: Protocol, base: &str) {
    family_api_streaming(config, slug, protocol, base, false);
}

/// [`family_api`], streamed from upstream when `stream`.
pub(crate) fn family_api_streaming(
    config: &mut Config,
    slug: &str,
    protocol: Protocol,
    base: &str,
    stream: bool,
) {
    let base = match protocol {
        Protocol::Openai => base.to_owned(),
        _ => base.trim_end_matches("/v1").to_owned(),
    };
    let mut p = provider(&base, stream);
    p.protocol = protocol;
    config.providers.insert(format!("{slug}-provider"), p);
    config.catalog.apis.insert(
        slug.to_owned(),
        ApiOverride {
            kind: Some("chat".parse().unwrap()),
            provider: Some(format!("{slug}-provider")),
            model: Some("some-model".to_owned()),
            input_price_per_1k_tokens_usd: Some("0.01".parse().unwrap()),
            output_price_per_1k_tokens_usd: Some("0.03".parse().unwrap()),
            ..ApiOverride::default()
        },
    );
}

fn call(api: &str, input: Value) -> Value {
    json!({"api": api, "input": input})
}

async fn chat_inputs_breaking_the_chat_rules_are_refused_before_storing(backend: Backend) {
    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("never"));
    let Some(app) = TestApp::builder(backend)
        .config(|c| family_api(c, "chat", Protocol::Openai, &base))
        .start()
        .await
    else {
        return;
    };
    let tool = json!({"name": "get_weather", "parameters": {"type": "object"}});
    for key in [&app.live, &app.test] {
        let c = app.client(key);
        // A forced tool that is not offered: past the schema, against the rules.
        let r = c
            .call(call(
                "chat",
                json!({"messages": [{"role": "user", "content": "Weather?"}],
                       "tools": [tool], "tool_choice": {"name": "get_time"}}),
            ))
            .await
            .expect_error(400, "invalid_input");
        let e = &r.body["error"];
        assert_eq!(e["type"], "invalid_request_error", "{}", r.text);
        assert_eq!(e["param"], "input.tool_choice.name", "{}", r.text);
        assert_eq!(e["details"][0]["path"], "/tool_choice/name", "{}", r.text);
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("input.tool_choice.name: no tool is named"),
            "{}",
            r.text
        );
        // Two tools of one name, and a tool result that answers no call:
        // both reported.
        let r = c
            .call(call(
                "chat",
                json!({"messages": [{"role": "user", "content": "Hi"},
                                    {"role": "assistant", "content": "Let me see."},
                                    {"role": "tool", "tool_call_id": "call_9", "content": "42"}],
                       "tools": [tool, tool]}),
            ))
            .await
            .expect_error(400, "invalid_input");
        let paths: Vec<&str> = r.body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            ["/tools/1/name", "/messages/2/tool_call_id"],
            "{}",
            r.text
        );
        let tasks = c.get("tasks").await.expect(200);
        assert_eq!(tasks.data()["items"], json!([]), "nothing is stored");
    }
    assert_eq!(fake.requests(), 0, "nothing reaches upstream");
    app.stop().await;
}
both!(chat_inputs_breaking_the_chat_rules_are_refused_before_storing);

async fn what_a_provider_cannot_carry_is_an_unsupported_parameter(backend: Backend) {
    let (gemini, gemini_base) = Fake::start().await;
    gemini.always(chat_completion("never"));
    let (openai, openai_base) = Fake::start().await;
    openai.always(chat_completion("Fine."));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            family_api(c, "chat-gemini", Protocol::Gemini, &gemini_base);
            family_api(c, "chat-openai", Protocol::Openai, &openai_base);
        })
        .start()
        .await
    else {
        return;
    };
    let tool = json!({"name": "get_weather", "parameters": {"type": "object"}});
    let input = json!({"messages": [{"role": "user", "content": "Weather?"}],
                       "tools": [tool], "parallel_tool_calls": false});
    for key in [&app.live, &app.test] {
        let c = app.client(key);
        let r = c
            .call(call("chat-gemini", input.clone()))
            .await
            .expect_error(400, "unsupported_parameter");
        let e = &r.body["error"];
        assert_eq!(e["type"], "invalid_request_error", "{}", r.text);
        assert_eq!(e["param"], "input.parallel_tool_calls", "{}", r.text);
        let message = e["message"].as_str().unwrap();
        assert!(message.contains("chat-gemini"), "{message}");
        assert!(message.contains("parallel_tool_calls"), "{message}");
        assert_eq!(c.get("tasks").await.expect(200).data()["items"], json!([]));
    }
    assert_eq!(gemini.requests(), 0, "nothing reaches upstream");
    // The same input is fine where the provider has the switch.
    let r = app
        .client(&app.live)
        .call(call("chat-openai", input))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    assert_eq!(openai.seen.lock()[0].2["parallel_tool_calls"], false);
    app.stop().await;
}
both!(what_a_provider_cannot_carry_is_an_unsupported_parameter);

/// `seed` and the penalties are the kind's own fields: each family gets
/// them in its own names, and Anthropic, which has none of them, refuses
/// them before any upstream call; through the OpenAI door too.
async fn seed_and_penalties_map_or_are_refused(backend: Backend) {
    let (anthropic, anthropic_base) = Fake::start().await;
    let (gemini, gemini_base) = Fake::start().await;
    gemini.always(crate::upstream::Reply::Json(
        200,
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                               "finishReason": "STOP"}]}),
    ));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            family_api(c, "chat-anthropic", Protocol::Anthropic, &anthropic_base);
            family_api(c, "chat-gemini", Protocol::Gemini, &gemini_base);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let input = json!({"messages": [{"role": "user", "content": "Hi"}],
                       "seed": 7, "presence_penalty": 0.5, "frequency_penalty": -0.5});
    let r = c.call(call("chat-gemini", input.clone())).await.expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    let config = gemini.seen.lock()[0].2["generationConfig"].clone();
    assert_eq!(
        (
            &config["seed"],
            &config["presencePenalty"],
            &config["frequencyPenalty"]
        ),
        (&json!(7), &json!(0.5), &json!(-0.5))
    );
    // A penalty of 0 asks nothing: not sent (Gemini 2.5 refuses the field).
    let zero = json!({"messages": [{"role": "user", "content": "Hi"}],
                      "presence_penalty": 0, "frequency_penalty": 0.0});
    let r = c.call(call("chat-gemini", zero)).await.expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    let config = gemini.seen.lock()[1].2["generationConfig"].clone();
    assert!(
        config.get("presencePenalty").is_none() && config.get("frequencyPenalty").is_none(),
        "{config}"
    );
    for (field, value) in [
        ("seed", json!(7)),
        ("presence_penalty", json!(0.5)),
        ("frequency_penalty", json!(1)),
    ] {
        let mut one = json!({"messages": [{"role": "user", "content": "Hi"}]});
        one[field] = value.clone();
        let r = c
            .call(call("chat-anthropic", one))
            .await
            .expect_error(400, "unsupported_parameter");
        assert_eq!(
            r.body["error"]["param"],
            format!("input.{field}"),
            "{}",
            r.text
        );
        let mut body = json!({"model": "chat-anthropic",
                              "messages": [{"role": "user", "content": "Hi"}]});
        body[field] = value;
        let r = c.post("/openai/v1/chat/completions", body).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(r.body["error"]["param"], field, "{}", r.text);
    }
    assert_eq!(anthropic.requests(), 0, "nothing reaches Anthropic");
    app.stop().await;
}
both!(seed_and_penalties_map_or_are_refused);

/// `max_output_tokens` of a chat API: an input's `max_tokens` above it is
/// lowered to it (Claude Code asks 32,000 of models that take less), the
/// stored input too; a smaller one is untouched.
async fn max_output_tokens_lowers_what_is_asked(backend: Backend) {
    let (openai, base) = Fake::start().await;
    openai.always(chat_completion("Fine."));
    let Some(app) = TestApp::builder(backend)
        .config(|c| {
            family_api(c, "chat-openai", Protocol::Openai, &base);
            c.catalog
                .apis
                .get_mut("chat-openai")
                .unwrap()
                .max_output_tokens = Some(1000);
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);
    let ask = |n: u64| json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": n});
    let r = c.call(call("chat-openai", ask(32000))).await.expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    assert_eq!(openai.seen.lock()[0].2["max_tokens"], 1000);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let t = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(t.data()["input"]["max_tokens"], 1000);
    let r = c.call(call("chat-openai", ask(200))).await.expect(200);
    assert_eq!(r.data()["status"], "succeeded", "{}", r.text);
    assert_eq!(openai.seen.lock()[1].2["max_tokens"], 200);
    // Through the Anthropic door, which Claude Code uses.
    let r = c
        .post(
            "/anthropic/v1/messages",
            json!({"model": "chat-openai", "max_tokens": 32000,
                   "messages": [{"role": "user", "content": "Hi"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(openai.seen.lock()[2].2["max_tokens"], 1000);
    app.stop().await;
}
both!(max_output_tokens_lowers_what_is_asked);
