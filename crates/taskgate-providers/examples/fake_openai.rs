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
use axum::routing::post;
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
    }
}

async fn chat(State(answers): State<Arc<Answers>>, body: Bytes) -> Response {
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
    let chunks = if request.stream_options.is_some_and(|o| o.include_usage) {
        answers.chunks_with_usage.clone()
    } else {
        answers.chunks.clone()
    };
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
        .with_state(Arc::new(answers(delay)));
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
    let local = listener.local_addr().expect("the listener has an address");
    println!("fake OpenAI listening on http://{local}");
    axum::serve(listener, app).await.expect("the server runs");
}
