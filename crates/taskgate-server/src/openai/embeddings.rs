//! POST /openai/v1/embeddings: an `embedding` task, answered as OpenAI's
//! list of `embedding` objects, as floats or (`encoding_format: "base64"`,
//! the OpenAI SDKs' default) as little-endian 32-bit floats in base64.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use base64::Engine;
use serde_json::{Map, Value, json};
use taskgate_providers::kinds::Kind;

use super::{
    OpenAiError, call_body, metadata_of, model_entry, model_of, output_of, start_call, task_answer,
    until_end,
};
use crate::auth::{Auth, TasksWrite};
use crate::body::JsonObject;
use crate::executor::Told;
use crate::state::AppState;

pub(super) async fn create(
    State(app): State<Arc<AppState>>,
    Auth(principal, ..): Auth<TasksWrite>,
    body: JsonObject,
) -> Result<Response, OpenAiError> {
    let mut body = body.map;
    let model = model_of(&mut body)?;
    let metadata = metadata_of(&mut body);
    let extras = super::Extras::take(&mut body);
    let base64 = match body.remove("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(_) => {
            return Err(OpenAiError::invalid(
                "encoding_format",
                "encoding_format must be \"float\" or \"base64\".",
            ));
        }
    };
    body.remove("user");
    let mut input = Map::new();
    match body.remove("input") {
        Some(v @ Value::String(_)) => {
            input.insert("input".to_owned(), v);
        }
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            input.insert("input".to_owned(), Value::Array(items));
        }
        Some(Value::Array(_)) => {
            return Err(OpenAiError::unsupported(
                "input",
                "Input as token ids (arrays of integers)",
            ));
        }
        None => return Err(OpenAiError::invalid("input", "input is required.")),
        Some(_) => {
            return Err(OpenAiError::invalid(
                "input",
                "input must be a string or an array of strings.",
            ));
        }
    }
    if let Some(d) = body.remove("dimensions").filter(|d| !d.is_null()) {
        input.insert("dimensions".to_owned(), d);
    }
    if !body.is_empty() {
        input.insert("options".to_owned(), Value::Object(body));
    }
    model_entry(&app, &principal, &model, Kind::Embedding)?;

    let started = start_call(
        &app,
        &principal,
        call_body(&model, input, metadata, extras),
        Told::AtEnd,
    )
    .await?;
    let task = until_end(&app, &principal, started).await?;

    let output = output_of(&task);
    let vectors = match output.get("embeddings") {
        Some(Value::Array(v)) => v.as_slice(),
        _ => &[],
    };
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| {
            let embedding = if base64 {
                Value::String(encode(vector))
            } else {
                vector.clone()
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let tokens = task.input_tokens.unwrap_or(0);
    Ok(task_answer(
        &task,
        json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }),
    ))
}

/// A vector as OpenAI's base64 encoding: its numbers as little-endian 32-bit
/// floats.
fn encode(vector: &Value) -> String {
    let numbers = vector.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut bytes = Vec::with_capacity(numbers.len() * 4);
    for n in numbers {
        bytes.extend_from_slice(&(n.as_f64().unwrap_or(0.0) as f32).to_le_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_little_endian_f32() {
        let encoded = encode(&json!([1.0, -2.5]));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert_eq!(bytes.len(), 8);
        assert_eq!(f32::from_le_bytes(bytes[0..4].try_into().unwrap()), 1.0);
        assert_eq!(f32::from_le_bytes(bytes[4..8].try_into().unwrap()), -2.5);
    }
}
