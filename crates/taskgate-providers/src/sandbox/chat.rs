//! Test-mode answers of chat APIs that follow what the input asks: a call
//! of the forced tool with arguments generated from its `parameters`, JSON
//! generated from the asked schema, else a plain reply. Each is a pure
//! function of the API and the input.

use serde_json::{Map, Value, json};

use super::{generate, seed_of, simulate};
use crate::chat::{ChatInput, ChatOutput, FinishReason, ResponseFormat, ToolCall};
use crate::{ApiSpec, Execution};

/// A simulated chat answer by `model` for `input`.
pub fn simulate_chat(api: &ApiSpec, input: &Value, model: &str) -> Execution {
    let mut x = simulate(api, input);
    let text = x
        .output
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let seed = seed_of(&[&json!(api.slug), input]);
    let out = match ChatInput::parse(input) {
        Ok(chat) => answer(&chat, &api.slug, seed, text, model),
        Err(_) => ChatOutput::new(text, FinishReason::Stop, model.to_owned()),
    };
    x.output = out.into_value();
    x
}

fn answer(chat: &ChatInput, slug: &str, seed: u64, text: String, model: &str) -> ChatOutput {
    if let Some(tool) = chat.forced_tool() {
        let schema = tool
            .parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        let arguments = match generate(&schema, slug, seed) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut out = ChatOutput::new(String::new(), FinishReason::ToolCalls, model.to_owned());
        out.tool_calls.push(ToolCall {
            id: format!("call_{:016x}", seed),
            name: tool.name.clone(),
            arguments,
        });
        return out;
    }
    if let Some(schema) = chat
        .response_format
        .as_ref()
        .and_then(ResponseFormat::json_schema)
    {
        let value = generate(&schema, slug, seed);
        let mut out = ChatOutput::new(value.to_string(), FinishReason::Stop, model.to_owned());
        out.json = Some(value);
        return out;
    }
    ChatOutput::new(text, FinishReason::Stop, model.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;
    use crate::{Pricing, schema::CompiledSchema};

    fn api() -> ApiSpec {
        ApiSpec {
            slug: "chat".into(),
            name: "chat".into(),
            description: String::new(),
            kind: "chat".into(),
            provider: "upstream".into(),
            pricing: Pricing::PerCall { price_nanos: 0 },
            input_schema: Kind::Chat.input_schema(),
            output_schema: Kind::Chat.output_schema(),
            examples: Vec::new(),
            timeout_ms: 1000,
            max_input_bytes: 1000,
        }
    }

    fn weather() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["city", "days", "unit"],
               "properties": {"city": {"type": "string", "minLength": 2, "maxLength": 40},
                              "days": {"type": "integer", "minimum": 1, "maximum": 7},
                              "unit": {"enum": ["c", "f"]},
                              "hourly": {"type": "boolean"},
                              "spots": {"type": "array", "maxItems": 3,
                                        "items": {"type": "object", "required": ["lat"],
                                                  "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}}}}}})
    }

    fn check(output: &Value) {
        let schema = CompiledSchema::compile(&Kind::Chat.output_schema()).unwrap();
        assert_eq!(schema.violations(output), vec![], "{output}");
    }

    #[test]
    fn a_forced_tool_is_called_with_arguments_valid_for_its_schema() {
        let validator = jsonschema::validator_for(&weather()).unwrap();
        for choice in [json!({"name": "get_weather"}), json!("required")] {
            let input = json!({"messages": [{"role": "user", "content": "Weather?"}],
                               "tools": [{"name": "get_weather", "parameters": weather()}, {"name": "other"}],
                               "tool_choice": choice});
            let x = simulate_chat(&api(), &input, "gpt-4.1");
            check(&x.output);
            assert_eq!(x.output["finish_reason"], "tool_calls");
            assert_eq!(x.output["text"], "");
            let call = &x.output["tool_calls"][0];
            assert_eq!(call["name"], "get_weather");
            assert!(
                validator.is_valid(&call["arguments"]),
                "{}",
                call["arguments"]
            );
            assert_eq!(simulate_chat(&api(), &input, "gpt-4.1").output, x.output);
        }
        let other = json!({"messages": [{"role": "user", "content": "Other?"}],
                           "tools": [{"name": "get_weather", "parameters": weather()}]});
        let y = simulate_chat(&api(), &other, "m");
        assert_eq!(y.output["tool_calls"], json!([]));
        assert_eq!(y.output["finish_reason"], "stop");
        check(&y.output);
    }

    #[test]
    fn a_json_schema_is_answered_with_json_valid_for_it() {
        let input = json!({"messages": [{"role": "user", "content": "Forecast"}],
                           "response_format": {"type": "json_schema", "name": "w", "schema": weather()}});
        let x = simulate_chat(&api(), &input, "m");
        check(&x.output);
        let json = &x.output["json"];
        assert!(
            jsonschema::validator_for(&weather())
                .unwrap()
                .is_valid(json)
        );
        assert_eq!(
            serde_json::from_str::<Value>(x.output["text"].as_str().unwrap()).unwrap(),
            *json
        );
        let other = json!({"messages": [{"role": "user", "content": "Another forecast"}],
                           "response_format": {"type": "json_schema", "name": "w", "schema": weather()}});
        assert_eq!(simulate_chat(&api(), &input, "m").output, x.output);
        assert_ne!(simulate_chat(&api(), &other, "m").output, x.output);
        let object = json!({"messages": [{"role": "user", "content": "x"}],
                            "response_format": {"type": "json_object"}});
        assert!(simulate_chat(&api(), &object, "m").output["json"].is_object());
    }

    /// Schemas a client sends cannot make test mode run long or large: a
    /// billion characters, items or properties asked for, a `$ref` to the
    /// root under two required properties (2^32 values unbounded), a
    /// property named like the ones `minProperties` adds. Each answer is
    /// bounded and comes at once (this test would hang or run out of memory
    /// otherwise).
    #[test]
    fn hostile_schemas_are_answered_small_and_at_once() {
        let huge = 1_000_000_000_000u64;
        let schemas = [
            json!({"type": "object", "required": ["s"],
                   "properties": {"s": {"type": "string", "minLength": huge}}}),
            json!({"type": "object", "required": ["a"],
                   "properties": {"a": {"type": "array", "minItems": huge}}}),
            json!({"type": "object", "minProperties": huge}),
            json!({"type": "object", "required": ["a", "b"],
                   "properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}}}),
            json!({"type": "object", "minProperties": 3,
                   "properties": {"sandbox_0": {"type": "string"}, "sandbox_1": {"type": "string"}}}),
            json!({"allOf": [{"$ref": "#"}, {"$ref": "#"}, {"$ref": "#"}], "type": "object"}),
        ];
        for schema in schemas {
            for input in [
                json!({"messages": [{"role": "user", "content": "x"}],
                       "response_format": {"type": "json_schema", "name": "h", "schema": schema}}),
                json!({"messages": [{"role": "user", "content": "x"}],
                       "tools": [{"name": "h", "parameters": schema}], "tool_choice": {"name": "h"}}),
            ] {
                let x = simulate_chat(&api(), &input, "m");
                check(&x.output);
                assert!(x.output.to_string().len() < 200_000, "{schema}");
            }
        }
    }

    #[test]
    fn a_plain_chat_is_a_plain_reply() {
        let x = simulate_chat(
            &api(),
            &json!({"messages": [{"role": "user", "content": "Hi"}]}),
            "m",
        );
        check(&x.output);
        assert_eq!(
            x.output,
            json!({"text": "sandbox output for chat", "tool_calls": [], "finish_reason": "stop", "model": "m"})
        );
    }
}
