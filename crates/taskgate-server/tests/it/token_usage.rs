//! Usage beyond input and output tokens (issue 27): a provider that counts
//! reasoning and cached input tokens has them stored and shown wherever the
//! task is (the call's answer, its status, its details, the list, its
//! stream's `done`, the OpenAI door's usage), and its cached input billed at
//! the API's cached input price, exactly.
//!
//! The provider is the test's own, in the process: what an upstream's wire
//! reports is each upstream adapter's business (and its tests'); here the
//! counts come as the `Provider` trait hands them to the executor.

use serde_json::{Value, json};
use taskgate_providers::kinds::Kind;
use taskgate_providers::{ApiSpec, ExecContext, ExecError, Execution, Pricing, Provider, Usage};
use taskgate_server::config::ApiOverride;

use crate::upstream::read_events;
use crate::utils::{Backend, TestApp, TestClient, both};

/// The counts every execution of [`Thinker`] reports: 10,000 input tokens of
/// which 8,000 cached, 1,200 output tokens of which 1,000 reasoning.
const COUNTS: Usage = Usage {
    units: 1,
    input_tokens: Some(10_000),
    output_tokens: Some(1_200),
    reasoning_tokens: Some(1_000),
    cached_input_tokens: Some(8_000),
};

/// A `chat` provider that thinks and reads its prompt cache.
struct Thinker;

#[async_trait::async_trait]
impl Provider for Thinker {
    fn name(&self) -> &str {
        "thinker"
    }

    fn apis(&self) -> Vec<ApiSpec> {
        ["thinker", "thinker-full"]
            .into_iter()
            .map(|slug| ApiSpec {
                slug: slug.to_owned(),
                name: slug.to_owned(),
                description: "Thinks, then answers.".to_owned(),
                kind: Kind::Chat.as_str().to_owned(),
                provider: "thinker".to_owned(),
                // Priced by the configuration, as a declared API is.
                pricing: Pricing::PerCall { price_nanos: 0 },
                input_schema: Kind::Chat.input_schema(),
                output_schema: Kind::Chat.output_schema(),
                examples: Vec::new(),
                timeout_ms: 10_000,
                max_input_bytes: 100_000,
            })
            .collect()
    }

    async fn execute(
        &self,
        _api: &str,
        _input: &Value,
        _ctx: &mut ExecContext,
    ) -> Result<Execution, ExecError> {
        Ok(Execution {
            output: json!({"text": "42", "tool_calls": [], "finish_reason": "stop", "model": "thinker-1"}),
            usage: COUNTS,
        })
    }
}

/// $0.003 / $0.015 per 1K input / output tokens, `cached` per 1K cached.
fn prices(cached: Option<&str>) -> ApiOverride {
    ApiOverride {
        input_price_per_1k_tokens_usd: Some("0.003".parse().unwrap()),
        output_price_per_1k_tokens_usd: Some("0.015".parse().unwrap()),
        cached_input_price_per_1k_tokens_usd: cached.map(|p| p.parse().unwrap()),
        ..ApiOverride::default()
    }
}

fn ask(api: &str) -> Value {
    json!({"api": api, "input": {"messages": [{"role": "user", "content": "The answer?"}]}})
}

/// The task `id`'s usage as every read of it shows it: its status, its
/// details, its list item and its stream's `done` event, all the same.
async fn usage_everywhere(c: &TestClient, id: &str) -> Value {
    let status = c.get(&format!("call/{id}")).await.expect(200);
    let usage = status.data()["usage"].clone();
    let details = c.get(&format!("tasks/{id}")).await.expect(200);
    assert_eq!(details.data()["usage"], usage, "details");
    let list = c.get("tasks?limit=100").await.expect(200);
    let item = list.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .expect("listed")
        .clone();
    assert_eq!(item["usage"], usage, "list item");
    let (events, _) = read_events(c, id).await;
    assert_eq!(events.last().unwrap().0, "done");
    assert_eq!(events.last().unwrap().1["usage"], usage, "stream's done");
    usage
}

async fn reasoning_and_cached_tokens_are_stored_shown_and_billed(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .provider(Thinker)
        .config(|c| {
            c.catalog
                .apis
                .insert("thinker".to_owned(), prices(Some("0.0003")));
            c.catalog
                .apis
                .insert("thinker-full".to_owned(), prices(None));
        })
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.live);

    // The catalog shows the cached price where the API has one.
    let api = c.get("apis/thinker").await.expect(200);
    assert_eq!(
        api.data()["pricing"],
        json!({"unit": "1k_tokens", "input_price_usd": "0.0030", "output_price_usd": "0.0150",
               "cached_input_price_usd": "0.0003"})
    );
    let api = c.get("apis/thinker-full").await.expect(200);
    assert_eq!(
        api.data()["pricing"],
        json!({"unit": "1k_tokens", "input_price_usd": "0.0030", "output_price_usd": "0.0150"})
    );

    // 2,000 uncached × 0.003 + 8,000 cached × 0.0003 + 1,200 × 0.015, per
    // 1K: 0.006 + 0.0024 + 0.018 = 0.0264 USD. Reasoning is output already.
    let r = c.call(ask("thinker")).await.expect(200);
    let t = r.data();
    assert_eq!(t["status"], "succeeded", "{}", r.text);
    let expected = json!({"units": 1, "input_tokens": 10_000, "output_tokens": 1_200,
                          "reasoning_tokens": 1_000, "cached_input_tokens": 8_000,
                          "cost_usd": "0.026400"});
    assert_eq!(t["usage"], expected);
    let id = t["id"].as_str().unwrap().to_owned();
    assert_eq!(usage_everywhere(&c, &id).await, expected);
    // And the dashboard's task page.
    crate::dashboard::user(&app, &app.account_id, "owner@example.com", "owner").await;
    let mut browser = crate::dashboard::signed_in(&app, "owner@example.com").await;
    let page = browser.get(&format!("/dashboard/tasks/{id}")).await;
    assert!(
        page.text.contains(
            "1 units, 10000 input tokens (8000 cached), 1200 output tokens (1000 reasoning)"
        ),
        "{}",
        page.text
    );

    // Without a cached price, cached input costs the input price:
    // 10,000 × 0.003 + 1,200 × 0.015 per 1K = 0.048 USD.
    let r = c.call(ask("thinker-full")).await.expect(200);
    let full = r.data();
    assert_eq!(full["usage"]["cached_input_tokens"], 8_000);
    assert_eq!(full["usage"]["cost_usd"], "0.048000");

    // The OpenAI door: OpenAI's details of the prompt and the completion.
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/openai/v1/chat/completions")
                .json(&json!({"model": "thinker",
                              "messages": [{"role": "user", "content": "The answer?"}]})),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert_eq!(
        r.body["usage"],
        json!({"prompt_tokens": 10_000, "completion_tokens": 1_200, "total_tokens": 11_200,
               "prompt_tokens_details": {"cached_tokens": 8_000},
               "completion_tokens_details": {"reasoning_tokens": 1_000}})
    );
    let door_task = r.header("x-taskgate-task-id").unwrap().to_owned();
    let door = c.get(&format!("call/{door_task}")).await.expect(200);
    assert_eq!(door.data()["usage"], expected);

    // The Anthropic door: its input_tokens leave out the cache's reads, which
    // it counts apart, as Anthropic does.
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/anthropic/v1/messages")
                .json(&json!({"model": "thinker", "max_tokens": 100,
                              "messages": [{"role": "user", "content": "The answer?"}]})),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert_eq!(
        r.body["usage"],
        json!({"input_tokens": 2_000, "output_tokens": 1_200,
               "cache_read_input_tokens": 8_000})
    );
    // Streamed, the same usage comes in `message_delta`.
    let r = c
        .send(
            c.request(reqwest::Method::POST, "/anthropic/v1/messages")
                .json(
                    &json!({"model": "thinker", "max_tokens": 100, "stream": true,
                              "messages": [{"role": "user", "content": "The answer?"}]}),
                ),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let delta = r
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "message_delta")
        .expect("a message_delta event");
    assert_eq!(
        delta["usage"],
        json!({"input_tokens": 2_000, "output_tokens": 1_200,
               "cache_read_input_tokens": 8_000}),
        "{}",
        r.text
    );

    // A test key's task runs the sandbox, which counts none of them: null,
    // not zero, and free.
    let test = app.client(&app.test);
    let r = test.call(ask("thinker")).await.expect(200);
    let usage = &r.data()["usage"];
    assert_eq!(usage["reasoning_tokens"], Value::Null, "{}", r.text);
    assert_eq!(usage["cached_input_tokens"], Value::Null);
    assert_eq!(usage["cost_usd"], "0.000000");
    app.stop().await;
}
both!(reasoning_and_cached_tokens_are_stored_shown_and_billed);
