use super::*;
use crate::Pricing;

fn api(slug: &str, kind: &str, output_schema: Value) -> ApiSpec {
    ApiSpec {
        slug: slug.to_owned(),
        name: slug.to_owned(),
        description: String::new(),
        kind: kind.to_owned(),
        provider: "upstream".to_owned(),
        pricing: Pricing::PerCall { price_nanos: 1 },
        input_schema: json!({"type": "object"}),
        output_schema,
        examples: Vec::new(),
        timeout_ms: 1000,
        max_input_bytes: 1000,
    }
}

fn assert_valid(api: &ApiSpec, input: &Value) -> Value {
    let schema = CompiledSchema::compile(&api.output_schema).expect("test schema compiles");
    let execution = simulate(api, input);
    let violations = schema.violations(&execution.output);
    assert!(
        violations.is_empty(),
        "{}: {violations:?}\noutput: {:#}",
        api.slug,
        execution.output
    );
    assert_eq!(execution.usage.units, 1);
    execution.output
}

fn chat() -> ApiSpec {
    api(
        "chat-small",
        "chat",
        json!({
            "type": "object",
            "required": ["id", "object", "created", "model", "choices", "usage"],
            "properties": {
                "id": {"type": "string", "minLength": 8},
                "object": {"const": "chat.completion"},
                "created": {"type": "integer", "minimum": 0},
                "model": {"type": "string"},
                "choices": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["index", "message", "finish_reason"],
                        "properties": {
                            "index": {"type": "integer", "minimum": 0, "maximum": 0},
                            "message": {
                                "type": "object",
                                "required": ["role", "content"],
                                "properties": {
                                    "role": {"enum": ["assistant"]},
                                    "content": {"type": ["string", "null"]}
                                },
                                "additionalProperties": false
                            },
                            "finish_reason": {"enum": ["stop", "length", "content_filter"]}
                        }
                    }
                },
                "usage": {"$ref": "#/$defs/usage"}
            },
            "$defs": {
                "usage": {
                    "type": "object",
                    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
                    "properties": {
                        "prompt_tokens": {"type": "integer", "minimum": 0},
                        "completion_tokens": {"type": "integer", "minimum": 0},
                        "total_tokens": {"type": "integer", "minimum": 0}
                    }
                }
            }
        }),
    )
}

fn realistic() -> Vec<ApiSpec> {
    vec![
        chat(),
        api(
            "embed",
            "embedding",
            json!({
                "type": "object",
                "required": ["embedding", "dimensions"],
                "properties": {
                    "embedding": {
                        "type": "array",
                        "items": {"type": "number", "minimum": -1, "maximum": 1},
                        "minItems": 16,
                        "maxItems": 16
                    },
                    "dimensions": {"const": 16}
                }
            }),
        ),
        api(
            "image",
            "image_generation",
            json!({
                "type": "object",
                "required": ["created", "images"],
                "properties": {
                    "created": {"type": "string", "format": "date-time"},
                    "images": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 4,
                        "items": {
                            "type": "object",
                            "required": ["url", "width", "height"],
                            "properties": {
                                "url": {"type": "string", "format": "uri"},
                                "width": {"type": "integer", "enum": [256, 512, 1024]},
                                "height": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 64},
                                "b64_json": {"type": "string", "contentEncoding": "base64"},
                                "id": {"type": "string", "format": "uuid"}
                            }
                        }
                    }
                }
            }),
        ),
        api(
            "transcribe",
            "transcription",
            json!({
                "type": "object",
                "required": ["text", "duration", "segments"],
                "properties": {
                    "text": {"type": "string"},
                    "language": {"type": "string", "minLength": 2, "maxLength": 3},
                    "duration": {"type": "number", "exclusiveMinimum": 0},
                    "segments": {
                        "type": "array",
                        "items": {
                            "allOf": [
                                {"type": "object", "required": ["start"], "properties": {"start": {"type": "number", "minimum": 0}}},
                                {"required": ["end", "text"], "properties": {"end": {"type": "number", "minimum": 0}, "text": {"type": "string"}}}
                            ]
                        }
                    },
                    "recorded_on": {"type": "string", "format": "date"}
                }
            }),
        ),
        api(
            "classify",
            "classification",
            json!({
                "type": "object",
                "required": ["label", "score", "labels"],
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                    "labels": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["label", "score"],
                            "additionalProperties": false,
                            "properties": {
                                "label": {"type": "string"},
                                "score": {"type": "number", "minimum": 0, "maximum": 1}
                            }
                        }
                    },
                    "tags": {
                        "type": "array",
                        "uniqueItems": true,
                        "items": {"enum": ["a", "b", "c"]},
                        "minItems": 2
                    }
                }
            }),
        ),
    ]
}

#[test]
fn realistic_outputs_validate() {
    for api in realistic() {
        for input in [
            json!({}),
            json!({"text": "hello"}),
            json!({"n": [1, 2.5, null]}),
        ] {
            assert_valid(&api, &input);
        }
    }
}

#[test]
fn same_input_same_output_whatever_the_key_order() {
    let api = chat();
    let a: Value = serde_json::from_str(r#"{"a": 1, "b": {"x": true, "y": "z"}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"b": {"y": "z", "x": true}, "a": 1}"#).unwrap();
    assert_eq!(simulate(&api, &a).output, simulate(&api, &b).output);
}

#[test]
fn different_inputs_usually_differ() {
    let api = chat();
    let outputs: Vec<Value> = (0..8)
        .map(|i| simulate(&api, &json!({ "text": format!("prompt {i}") })).output)
        .collect();
    let distinct = outputs
        .iter()
        .enumerate()
        .filter(|(i, o)| !outputs[..*i].contains(o))
        .count();
    assert!(distinct > 4, "{outputs:#?}");
}

#[test]
fn hash_is_stable_across_releases() {
    // Pinned values: a change here means every recorded sandbox output moved.
    let mut hasher = Fnv1a::new();
    hasher.write(b"a");
    assert_eq!(hasher.finish(), 0xaf63_dc4c_8601_ec8c);
    let output = simulate(&chat(), &json!({"text": "hello"})).output;
    assert_eq!(output["object"], "chat.completion");
    assert_eq!(output["id"], "sandbox output for chat-small");
    assert_eq!(output["choices"][0]["message"]["role"], "assistant");
}

#[test]
fn strings_honour_lengths_and_formats() {
    let api = api(
        "s",
        "chat",
        json!({
            "type": "object",
            "required": ["short", "long", "when", "mail", "host", "v4", "v6", "t"],
            "properties": {
                "short": {"type": "string", "maxLength": 3},
                "long": {"type": "string", "minLength": 50},
                "when": {"type": "string", "format": "date-time"},
                "mail": {"type": "string", "format": "email"},
                "host": {"type": "string", "format": "hostname"},
                "v4": {"type": "string", "format": "ipv4"},
                "v6": {"type": "string", "format": "ipv6"},
                "t": {"type": "string", "format": "time"}
            }
        }),
    );
    let output = assert_valid(&api, &json!("x"));
    assert_eq!(output["short"], "san");
    assert_eq!(output["long"].as_str().unwrap().chars().count(), 50);
}

#[test]
fn clashing_optional_properties_fall_back_to_required_only() {
    let api = api(
        "clash",
        "chat",
        json!({
            "type": "object",
            "required": ["a"],
            "maxProperties": 1,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}
        }),
    );
    let output = assert_valid(&api, &json!(null));
    assert_eq!(output.as_object().unwrap().len(), 1);
}

#[test]
fn recursion_unions_tuples_and_min_properties_terminate_validly() {
    let api = api(
        "tree",
        "chat",
        json!({
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "required": ["name"],
                    "minProperties": 3,
                    "properties": {
                        "name": {"oneOf": [{"type": "null"}, {"type": "string", "minLength": 1}]},
                        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "items": false},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                        "weight": {"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 0.50001}
                    }
                }
            }
        }),
    );
    let output = assert_valid(&api, &json!({"k": 1}));
    assert_eq!(output["pair"].as_array().unwrap().len(), 2);
}
