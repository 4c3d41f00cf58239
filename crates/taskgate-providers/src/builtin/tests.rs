use serde_json::json;

use super::*;
use crate::schema::CompiledSchema;

fn spec(slug: &str) -> ApiSpec {
    Builtin
        .apis()
        .into_iter()
        .find(|api| api.slug == slug)
        .unwrap_or_else(|| panic!("no API {slug}"))
}

fn violations(schema: &Value, instance: &Value) -> Vec<String> {
    CompiledSchema::compile(schema)
        .expect("schema compiles")
        .violations(instance)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn catalog_entries_are_complete() {
    let apis = Builtin.apis();
    let slugs: Vec<&str> = apis.iter().map(|a| a.slug.as_str()).collect();
    assert_eq!(slugs, ["token-count", "language-detect", "sentiment"]);
    assert_eq!(Builtin.name(), "builtin");
    for api in &apis {
        assert_eq!(api.provider, "builtin");
        assert_eq!(
            api.pricing,
            Pricing::PerCall {
                price_nanos: 100_000
            }
        );
        assert_eq!(api.timeout_ms, 30_000);
        assert!(!api.name.is_empty() && api.description.len() > 80);
        assert!(api.examples.len() >= 2);
        let text = &api.input_schema["properties"]["text"];
        assert_eq!(api.input_schema["additionalProperties"], false);
        assert_eq!(api.input_schema["required"], json!(["text"]));
        assert_eq!(text["minLength"], 1);
        let max_chars = text["maxLength"].as_u64().unwrap();
        assert!(api.max_input_bytes >= 4 * max_chars, "{}", api.slug);
    }
    assert_eq!(spec("token-count").kind, "tokenization");
    assert_eq!(spec("sentiment").kind, "classification");
    assert_eq!(spec("language-detect").kind, "classification");
}

#[test]
fn examples_are_valid_and_are_the_real_outputs() {
    for api in Builtin.apis() {
        let which = Api::from_slug(&api.slug).unwrap();
        for example in &api.examples {
            assert_eq!(
                violations(&api.input_schema, &example.input),
                Vec::<String>::new()
            );
            let real = which.compute(&example.input).unwrap().output;
            assert_eq!(
                real, example.output,
                "{}: the example output is not what the code returns for {}",
                api.slug, example.input
            );
            assert_eq!(violations(&api.output_schema, &real), Vec::<String>::new());
        }
    }
}

#[test]
fn token_count_input_schema_rejects_bad_inputs() {
    let schema = spec("token-count").input_schema;
    assert_eq!(
        violations(&schema, &json!({})),
        ["/text: is a required property"]
    );
    assert_eq!(
        violations(&schema, &json!({"text": ""})),
        [r#"/text: "" is shorter than 1 character"#]
    );
    let both = violations(
        &schema,
        &json!({"text": "x", "model": "gpt-4", "encoding": "cl100k_base"}),
    );
    assert_eq!(both.len(), 1);
    assert!(both[0].starts_with("/encoding: "), "{both:?}");
    assert_eq!(
        violations(&schema, &json!({"text": "x", "model": "gpt-99"})).len(),
        1
    );
    assert_eq!(
        violations(&schema, &json!({"text": "x", "encoding": "gpt2"})).len(),
        1
    );
    assert_eq!(
        violations(&schema, &json!({"text": "x", "colour": 1})).len(),
        1
    );
    assert!(violations(&schema, &json!({"text": "x", "model": "gpt-4o"})).is_empty());
}

#[tokio::test]
async fn execute_records_a_succeeded_attempt() {
    let mut attempts = crate::ExecContext::with_timeout(std::time::Duration::from_secs(30));
    let input = json!({"text": "hello world", "model": "gpt-3.5-turbo"});
    let execution = Builtin
        .execute("token-count", &input, &mut attempts)
        .await
        .unwrap();
    assert_eq!(execution.output["token_count"], 2);
    assert_eq!(execution.usage.input_tokens, Some(2));
    assert_eq!(attempts.attempts().len(), 1);
    let attempt = &attempts.attempts()[0];
    assert_eq!(attempt.provider, "builtin");
    assert_eq!(attempt.target, "tiktoken/cl100k_base");
    assert_eq!(attempt.outcome.as_str(), "succeeded");
    assert_eq!(attempt.http_status, None);

    Builtin
        .execute("sentiment", &json!({"text": "great"}), &mut attempts)
        .await
        .unwrap();
    Builtin
        .execute(
            "language-detect",
            &json!({"text": "bonjour à tous"}),
            &mut attempts,
        )
        .await
        .unwrap();
    let targets: Vec<&str> = attempts
        .attempts()
        .iter()
        .map(|a| a.target.as_str())
        .collect();
    assert_eq!(targets, ["tiktoken/cl100k_base", "vader", "whatlang"]);
}

#[tokio::test]
async fn execute_failures() {
    let mut attempts = crate::ExecContext::with_timeout(std::time::Duration::from_secs(30));
    let error = Builtin
        .execute("nope", &json!({"text": "x"}), &mut attempts)
        .await
        .unwrap_err();
    assert_eq!(error.code, "internal_error");
    assert!(attempts.attempts().is_empty());

    let error = Builtin
        .execute("sentiment", &json!({}), &mut attempts)
        .await
        .unwrap_err();
    assert_eq!(error.code, "internal_error");
    assert_eq!(attempts.attempts().len(), 1);
    assert_eq!(attempts.attempts()[0].outcome.as_str(), "failed");
}

#[tokio::test]
async fn large_texts_run_on_the_blocking_pool() {
    let text = "The weather is lovely today and I am very happy. ".repeat(2_000);
    assert!(text.len() > INLINE_MAX_BYTES);
    let input = json!({ "text": text });
    assert!(Api::Sentiment.needs_blocking_pool(&input));
    let mut attempts = crate::ExecContext::with_timeout(std::time::Duration::from_secs(30));
    for slug in ["token-count", "language-detect", "sentiment"] {
        let execution = Builtin.execute(slug, &input, &mut attempts).await.unwrap();
        let direct = Api::from_slug(slug).unwrap().compute(&input).unwrap();
        assert_eq!(execution.output, direct.output, "{slug}");
    }
    assert!(
        attempts
            .attempts()
            .iter()
            .all(|a| a.outcome.as_str() == "succeeded")
    );
}

#[tokio::test]
async fn test_mode_runs_the_real_computation() {
    let api = spec("sentiment");
    let example = &api.examples[0];
    let execution = Builtin.sandbox(&api, &example.input).await.unwrap();
    assert_eq!(execution.output, example.output);
    assert_eq!(execution.usage.units, 1);
}

#[test]
fn simulated_outputs_fit_the_builtin_schemas() {
    for api in Builtin.apis() {
        let output = crate::sandbox::simulate(&api, &api.examples[0].input).output;
        assert_eq!(
            violations(&api.output_schema, &output),
            Vec::<String>::new(),
            "{}",
            api.slug
        );
    }
}

/// Nothing is built at start-up (an encoding is tens of megabytes): each
/// encoding on its first count, on the blocking pool, then inline.
#[test]
fn every_encoding_is_built_on_first_use() {
    for encoding in ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"] {
        let input = json!({"text": "hello world", "encoding": encoding});
        if !token_count::is_ready(&input) {
            assert!(Api::TokenCount.needs_blocking_pool(&input));
        }
        let x = token_count::compute(&input).unwrap();
        assert_eq!(x.output["token_count"], 2, "{encoding}");
        assert!(token_count::is_ready(&input));
        assert!(!Api::TokenCount.needs_blocking_pool(&input));
    }
}

#[test]
#[ignore = "prints the real outputs of the examples, for updating them"]
fn print_example_outputs() {
    for api in Builtin.apis() {
        let which = Api::from_slug(&api.slug).unwrap();
        for example in &api.examples {
            println!(
                "{} {}",
                api.slug,
                which.compute(&example.input).unwrap().output
            );
        }
    }
}
