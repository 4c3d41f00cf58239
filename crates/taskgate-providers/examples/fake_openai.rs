//! A fast fake of OpenAI's chat completions and embeddings endpoints, for
//! measuring the gateway's own overhead (`bench/overhead.sh`) and as the
//! upstream of the client libraries' tests (`scripts/with-server.sh`). `POST /v1/chat/completions`
//! answers at once with a fixed reply in OpenAI's wire format: a
//! `chat.completion` with `usage`, or, when the request has `"stream": true`,
//! the same reply as `chat.completion.chunk` server-sent events, then a usage
//! chunk (when `stream_options.include_usage` is set, as OpenAI does) and
//! `data: [DONE]`. The answers are built once, so a call costs little more
//! than its HTTP exchange. `POST /v1/embeddings` answers one small vector per
//! input text, derived from the text (`dimensions` long, default 3).
//!
//! It also plays the model of an agent loop, so that agent frameworks can be
//! run through the gateway to completion: a request that offers `tools`
//! (and whose `tool_choice` is not `"none"`) is answered with a call of the
//! named tool, or else the first, with arguments made from its `parameters`;
//! a request whose last message is a tool's result is answered with
//! `The tool said: ` and that result. Both stream too (tool-call chunks
//! whose arguments come in two pieces). A request with `reasoning_effort`
//! gets its reasoning as `reasoning_content`, as DeepSeek and other
//! compatible servers send it (the fixed reply then comes this way too).
//! `GET /_fake/last_chat_request` answers the body of the latest chat
//! request, as the fake received it, so tests can see what the gateway sent.
//!
//! The address is the first argument or `FAKE_OPENAI_ADDR`: `HOST:PORT`, or
//! a bare port on 127.0.0.1; port 0 (the default) picks a free one. The
//! address listened on is printed on the first line of stdout.
//! `FAKE_OPENAI_DELAY_MS` makes each chat answer wait that long first, as a
//! model's latency would (`bench/compare.sh` measures in-flight capacity with
//! 50 ms).
//!
//!   cargo run --release -p taskgate-providers --example fake_openai -- 18300

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

const ID: &str = "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT";
const CREATED: u64 = 1_741_569_952;
const MODEL: &str = "gpt-4o-mini-2024-07-18";
const FINGERPRINT: &str = "fp_06737a9306";
/// The reply, as it is streamed.
const PIECES: [&str; 9] = [
    "Hello", "!", " How", " can", " I", " help", " you", " today", "?",
];

/// The parts of a request that choose the shape of the answer.
#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    reasoning_effort: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: Value,
}

#[derive(Deserialize)]
struct Tool {
    function: Function,
}

#[derive(Deserialize)]
struct Function {
    name: String,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The answers, serialized once.
struct Answers {
    /// How long a chat answer waits before it is sent.
    delay: std::time::Duration,
    completion: Bytes,
    /// The SSE events of a stream, without and with the usage chunk.
    chunks: Vec<Bytes>,
    chunks_with_usage: Vec<Bytes>,
    /// The body of the latest chat request.
    last: parking_lot::Mutex<Bytes>,
}

fn usage() -> Value {
    json!({
        "prompt_tokens": 10,
        "completion_tokens": 9,
        "total_tokens": 19,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

fn answers(delay: std::time::Duration) -> Answers {
    let completion = json!({
        "id": ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": PIECES.concat(),
                "refusal": null,
                "annotations": []
            },
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": usage(),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT
    });
    let stream = |with_usage: bool| {
        let chunk = |choices: Value, usage: Value| {
            let mut c = json!({
                "id": ID,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": MODEL,
                "service_tier": "default",
                "system_fingerprint": FINGERPRINT,
                "choices": choices
            });
            if with_usage {
                c["usage"] = usage;
            }
            Bytes::from(format!("data: {c}\n\n"))
        };
        let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
        let mut out = vec![chunk(
            choice(
                json!({"role": "assistant", "content": "", "refusal": null}),
                Value::Null,
            ),
            Value::Null,
        )];
        for piece in PIECES {
            out.push(chunk(
                choice(json!({"content": piece}), Value::Null),
                Value::Null,
            ));
        }
        out.push(chunk(choice(json!({}), json!("stop")), Value::Null));
        if with_usage {
            out.push(chunk(json!([]), usage()));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        out
    };
    Answers {
        delay,
        completion: Bytes::from(completion.to_string()),
        chunks: stream(false),
        chunks_with_usage: stream(true),
        last: parking_lot::Mutex::new(Bytes::new()),
    }
}

/// The reasoning sent to a request with `reasoning_effort`.
const REASONING: &str = "The user wants an answer; I will give it.";

/// What an agent loop's model does next, when not the fixed reply.
enum Turn {
    /// A call of tool `name`.
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    /// A reply to a tool's result.
    Text(String),
}

fn turn(request: &ChatRequest) -> Option<Turn> {
    if let Some(last) = request.messages.last().filter(|m| m.role == "tool") {
        return Some(Turn::Text(format!(
            "The tool said: {}",
            text_of(&last.content)
        )));
    }
    if request.tools.is_empty() || request.tool_choice.as_ref().is_some_and(|c| c == "none") {
        return None;
    }
    let named = request
        .tool_choice
        .as_ref()
        .and_then(|c| c.pointer("/function/name"))
        .and_then(Value::as_str);
    let tool = named
        .and_then(|n| request.tools.iter().find(|t| t.function.name == n))
        .unwrap_or(&request.tools[0]);
    let schema = tool.function.parameters.clone().unwrap_or(json!({}));
    Some(Turn::Call {
        // Distinct within a conversation, as OpenAI's are.
        id: format!("call_fake_{}", request.messages.len()),
        name: tool.function.name.clone(),
        arguments: example(&schema).to_string(),
    })
}

/// A message's content as text: a string, or its text parts joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        other => other.to_string(),
    }
}

/// A value valid for the simple schemas tools have: each property an agent
/// framework generates (strings, numbers, booleans, enums, nested objects and
/// arrays, nullable types) gets a plain value of its type.
fn example(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(|a| a.get(0)))
    {
        return example(first);
    }
    let ty = match schema.get("type") {
        Some(Value::Array(types)) => types.iter().find(|t| *t != "null").cloned(),
        other => other.cloned(),
    };
    match ty.as_ref().and_then(Value::as_str) {
        Some("string") => json!("Paris"),
        Some("integer") | Some("number") => json!(3),
        Some("boolean") => json!(true),
        Some("null") => Value::Null,
        Some("array") => match schema.get("items") {
            Some(items) if schema.get("minItems").and_then(Value::as_u64).unwrap_or(0) > 0 => {
                json!([example(items)])
            }
            _ => json!([]),
        },
        _ => {
            let mut object = serde_json::Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    object.insert(name.clone(), example(property));
                }
            }
            Value::Object(object)
        }
    }
}

/// A `chat.completion` with `message`, or its chunks when `stream`.
fn answer_turn(turn: Turn, reasoning: bool, stream: bool, with_usage: bool) -> Response {
    let (mut message, finish, mut deltas) = match turn {
        Turn::Call {
            id,
            name,
            arguments,
        } => {
            let half = arguments.len() / 2;
            let half = (half..arguments.len())
                .find(|&i| arguments.is_char_boundary(i))
                .unwrap_or(arguments.len());
            let call = |index_only: bool, args: &str| {
                if index_only {
                    json!({"index": 0, "function": {"arguments": args}})
                } else {
                    json!({"index": 0, "id": id, "type": "function",
                           "function": {"name": name, "arguments": args}})
                }
            };
            let deltas = vec![
                json!({"role": "assistant", "content": null, "tool_calls": [call(false, "")]}),
                json!({"tool_calls": [call(true, &arguments[..half])]}),
                json!({"tool_calls": [call(true, &arguments[half..])]}),
            ];
            let message = json!({"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": id, "type": "function",
                                "function": {"name": name, "arguments": arguments}}]});
            (message, "tool_calls", deltas)
        }
        Turn::Text(text) => {
            let mut deltas = vec![json!({"role": "assistant", "content": ""})];
            deltas.extend(
                text.split_inclusive(' ')
                    .map(|piece| json!({"content": piece})),
            );
            let message = json!({"role": "assistant", "content": text, "refusal": null});
            (message, "stop", deltas)
        }
    };
    if reasoning {
        message["reasoning_content"] = json!(REASONING);
        let mut thinking =
            vec![json!({"role": "assistant", "content": null, "reasoning_content": ""})];
        thinking.extend(
            REASONING
                .split_inclusive(' ')
                .map(|p| json!({"reasoning_content": p})),
        );
        deltas.splice(0..0, thinking);
    }
    if !stream {
        let completion = json!({
            "id": ID, "object": "chat.completion", "created": CREATED, "model": MODEL,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": usage(), "system_fingerprint": FINGERPRINT
        });
        return axum::Json(completion).into_response();
    }
    let chunk = |choices: Value, usage: Option<Value>| {
        let mut c = json!({"id": ID, "object": "chat.completion.chunk", "created": CREATED,
                           "model": MODEL, "system_fingerprint": FINGERPRINT, "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u;
        }
        Bytes::from(format!("data: {c}\n\n"))
    };
    let mut out: Vec<Bytes> = deltas
        .into_iter()
        .map(|d| {
            chunk(
                json!([{"index": 0, "delta": d, "finish_reason": null}]),
                None,
            )
        })
        .collect();
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        None,
    ));
    if with_usage {
        out.push(chunk(json!([]), Some(usage())));
    }
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    sse(out)
}

fn sse(chunks: Vec<Bytes>) -> Response {
    let body = Body::from_stream(futures_util::stream::iter(
        chunks.into_iter().map(Ok::<_, Infallible>),
    ));
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

async fn last_chat_request(State(answers): State<Arc<Answers>>) -> Response {
    let body = answers.last.lock().clone();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

async fn chat(State(answers): State<Arc<Answers>>, body: Bytes) -> Response {
    *answers.last.lock() = body.clone();
    let Ok(request) = serde_json::from_slice::<ChatRequest>(&body) else {
        let error = json!({"error": {
            "message": "We could not parse the JSON body of your request.",
            "type": "invalid_request_error",
            "param": null,
            "code": null
        }});
        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    if !answers.delay.is_zero() {
        tokio::time::sleep(answers.delay).await;
    }
    let with_usage = request
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let reasoning = request.reasoning_effort.is_some();
    let next = match turn(&request) {
        None if reasoning => Some(Turn::Text(PIECES.concat())),
        next => next,
    };
    if let Some(next) = next {
        return answer_turn(next, reasoning, request.stream, with_usage);
    }
    if !request.stream {
        return (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            answers.completion.clone(),
        )
            .into_response();
    }
    sse(if with_usage {
        answers.chunks_with_usage.clone()
    } else {
        answers.chunks.clone()
    })
}

#[derive(Deserialize)]
struct EmbeddingRequest {
    input: EmbeddingInput,
    #[serde(default)]
    dimensions: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum EmbeddingInput {
    One(String),
    Many(Vec<String>),
}

/// One vector per text: the same text always gets the same vector.
async fn embeddings(body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<EmbeddingRequest>(&body) else {
        let error = json!({"error": {
            "message": "'input' must be a string or an array of strings.",
            "type": "invalid_request_error",
            "param": "input",
            "code": null
        }});
        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let texts = match request.input {
        EmbeddingInput::One(t) => vec![t],
        EmbeddingInput::Many(ts) => ts,
    };
    let dimensions = request.dimensions.unwrap_or(3).clamp(1, 4096);
    let tokens: usize = texts
        .iter()
        .map(|t| t.split_whitespace().count().max(1))
        .sum();
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let seed = text
                .bytes()
                .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
            let vector: Vec<f32> = (0..dimensions)
                .map(|d| ((seed.rotate_left(d as u32 * 5) % 2001) as f32 - 1000.0) / 1000.0)
                .collect();
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    }))
    .into_response()
}

#[tokio::main]
async fn main() {
    let arg = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("FAKE_OPENAI_ADDR").ok())
        .unwrap_or_else(|| "0".to_owned());
    let addr = if arg.contains(':') {
        arg
    } else {
        format!("127.0.0.1:{arg}")
    };
    let delay = match std::env::var("FAKE_OPENAI_DELAY_MS") {
        Ok(ms) => std::time::Duration::from_millis(
            ms.parse()
                .unwrap_or_else(|_| panic!("FAKE_OPENAI_DELAY_MS is not a number: {ms}")),
        ),
        Err(_) => std::time::Duration::ZERO,
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
        .route("/_fake/last_chat_request", get(last_chat_request))
        .with_state(Arc::new(answers(delay)));
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
    let local = listener.local_addr().expect("the listener has an address");
    println!("fake OpenAI listening on http://{local}");
    axum::serve(listener, app).await.expect("the server runs");
}
