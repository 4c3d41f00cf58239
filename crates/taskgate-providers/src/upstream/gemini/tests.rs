//! Against a local fake that speaks Google's real wire format.

use super::*;
use crate::Provider;
use crate::upstream::Upstream;
use crate::upstream::config::Protocol;
use crate::upstream::testutil::{Fake, Reply, listening, provider, route, run, upstream};
use serde_json::json;

impl Fake {
    /// The fake, and an upstream with one Gemini provider (`g`,
    /// streaming as told) behind the API `api` of `kind` on `model`.
    async fn gemini(
        stream: bool,
        kind: Kind,
        model: &str,
        replies: Vec<Reply>,
    ) -> (Self, Upstream) {
        let (fake, base) = Fake::serve(replies).await;
        let mut p = provider(Protocol::Gemini, &base);
        p.stream = Some(stream);
        let u = upstream(&[("g", p)], vec![route("api", kind, &[&[("g", model)]])]);
        (fake, u)
    }

    async fn chat(stream: bool, replies: Vec<Reply>) -> (Self, Upstream) {
        Self::gemini(stream, Kind::Chat, "gemini-2.5-flash", replies).await
    }
}

/// A `generateContent` answer (or one streamed chunk of it).
fn answer(text: &str, finish: Option<&str>, usage: Option<(i64, i64)>) -> Value {
    let mut c = json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                                       "index": 0}],
                       "modelVersion": "gemini-2.5-flash",
                       "responseId": "xS8iaIu1NdWtgLUPwfHqkQ4"});
    if let Some(f) = finish {
        c["candidates"][0]["finishReason"] = json!(f);
    }
    if let Some((p, o)) = usage {
        c["usageMetadata"] =
            json!({"promptTokenCount": p, "candidatesTokenCount": o, "totalTokenCount": p + o});
    }
    c
}

fn chunk(v: &Value) -> String {
    format!("data: {v}\r\n\r\n")
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::Json(
        status,
        json!({"error": {"code": status, "message": message, "status": code}}),
    )
}

fn hello() -> Value {
    json!({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 64})
}

#[tokio::test]
async fn the_request_is_in_googles_shape() {
    let (fake, u) = Fake::chat(
        false,
        vec![Reply::Json(200, answer("Bien.", Some("STOP"), None))],
    )
    .await;
    let input = json!({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "system", "content": "Use French."},
        {"role": "user", "content": "How are you?"}
    ], "max_tokens": 100, "temperature": 0.2, "top_p": 0.9, "stop": ["END"],
       "options": {"generationConfig": {"topK": 40, "temperature": 1.5,
                                         "thinkingConfig": {"thinkingBudget": 0}},
                   "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                       "threshold": "BLOCK_ONLY_HIGH"}],
                   "contents": []}});
    run(&u, "api", input).await.0.unwrap();
    let (uri, headers, body) = fake.seen(0);
    assert_eq!(uri, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(headers["x-goog-api-key"], "test-key");
    assert!(headers.get("authorization").is_none());
    // Options add fields, inside generationConfig too; they never
    // replace Taskgate's.
    assert_eq!(
        body,
        json!({"contents": [
                  {"role": "user", "parts": [{"text": "Hello"}]},
                  {"role": "model", "parts": [{"text": "Hi!"}]},
                  {"role": "user", "parts": [{"text": "How are you?"}]}],
               "systemInstruction": {"parts": [{"text": "Be brief.\n\nUse French."}]},
               "generationConfig": {"maxOutputTokens": 100, "temperature": 0.2, "topP": 0.9,
                                    "stopSequences": ["END"], "topK": 40,
                                    "thinkingConfig": {"thinkingBudget": 0}},
               "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                   "threshold": "BLOCK_ONLY_HIGH"}]})
    );
}

#[tokio::test]
async fn a_streamed_request_asks_for_sse_and_has_only_what_was_given() {
    let (fake, u) = Fake::chat(
        true,
        vec![Reply::Sse(vec![chunk(&answer("Hi", Some("STOP"), None))])],
    )
    .await;
    run(
        &u,
        "api",
        json!({"messages": [{"role": "user", "content": "Hello"}]}),
    )
    .await
    .0
    .unwrap();
    let (uri, headers, body) = fake.seen(0);
    assert_eq!(
        uri,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(headers["x-goog-api-key"], "test-key");
    assert_eq!(
        body,
        json!({"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]})
    );
}

#[tokio::test]
async fn an_answer_is_normalized_with_its_usage() {
    let (_fake, u) = Fake::chat(
        false,
        vec![Reply::Json(
            200,
            json!({"candidates": [{"content": {"parts": [
                       {"text": "Let me think.", "thought": true},
                       {"text": "Très bien, "}, {"text": "merci."}], "role": "model"},
                       "finishReason": "MAX_TOKENS", "index": 0}],
                   "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 12,
                                     "thoughtsTokenCount": 30, "totalTokenCount": 46},
                   "modelVersion": "gemini-2.5-flash-001"}),
        )],
    )
    .await;
    let (r, ctx) = run(&u, "api", hello()).await;
    let x = r.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Très bien, merci.", "tool_calls": [], "reasoning": "Let me think.",
               "finish_reason": "length", "model": "gemini-2.5-flash-001"})
    );
    // Thinking tokens are billed as output.
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(4),
            output_tokens: Some(42),
            reasoning_tokens: Some(30),
            ..Usage::default()
        }
    );
    assert_eq!(ctx.attempts().len(), 1);
}

#[tokio::test]
async fn without_model_version_the_requested_model_is_named() {
    let mut a = answer("Hi", Some("STOP"), Some((2, 1)));
    a.as_object_mut().unwrap().remove("modelVersion");
    let (_fake, u) = Fake::chat(false, vec![Reply::Json(200, a)]).await;
    let x = run(&u, "api", hello()).await.0.unwrap();
    assert_eq!(x.output["model"], "gemini-2.5-flash");
}

#[tokio::test]
async fn a_stream_sends_its_deltas_in_order() {
    let (_fake, u) = Fake::chat(
        true,
        vec![Reply::Sse(vec![
            chunk(&answer("Bonjour", None, Some((8, 1)))),
            chunk(&answer(" le", None, Some((8, 2)))),
            chunk(&answer(" monde", Some("STOP"), Some((8, 4)))),
        ])],
    )
    .await;
    let (mut ctx, deltas) = listening();
    let x = u.execute("api", &hello(), &mut ctx).await.unwrap();
    assert_eq!(*deltas.lock(), vec!["Bonjour", " le", " monde"]);
    assert_eq!(x.output["text"], deltas.lock().concat());
    assert_eq!(
        x.output,
        json!({"text": "Bonjour le monde", "tool_calls": [], "finish_reason": "stop", "model": "gemini-2.5-flash"})
    );
    // The last usageMetadata counts.
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(8),
            output_tokens: Some(4),
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn a_quota_error_is_retried() {
    let (fake, u) = Fake::chat(
        false,
        vec![
            error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"),
            Reply::Json(200, answer("Hi", Some("STOP"), Some((2, 1)))),
        ],
    )
    .await;
    let (r, ctx) = run(&u, "api", hello()).await;
    assert_eq!(r.unwrap().output["text"], "Hi");
    let statuses: Vec<_> = ctx.attempts().iter().map(|a| a.http_status).collect();
    assert_eq!(statuses, vec![Some(429), Some(200)]);
    assert_eq!(fake.requests(), 2);
}

#[tokio::test]
async fn a_bad_request_fails_at_once() {
    let (fake, u) = Fake::chat(
        false,
        vec![
            error(
                400,
                "INVALID_ARGUMENT",
                "* GenerateContentRequest.generation_config.max_output_tokens: must be positive",
            ),
            Reply::Json(200, answer("never", Some("STOP"), None)),
        ],
    )
    .await;
    let (r, ctx) = run(&u, "api", hello()).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert_eq!(e.upstream_status, Some(400));
    assert!(e.message.contains("must be positive"), "{}", e.message);
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn an_error_chunk_mid_stream_fails_the_attempt() {
    let (fake, u) = Fake::chat(
        true,
        vec![
            Reply::Sse(vec![
                chunk(&answer("Bon", None, None)),
                chunk(&json!({"error": {"code": 503, "status": "UNAVAILABLE",
                    "message": "The model is overloaded. Please try again later."}})),
            ]),
            Reply::Sse(vec![chunk(&answer("Bonjour", Some("STOP"), None))]),
        ],
    )
    .await;
    let (mut ctx, deltas) = listening();
    let e = u.execute("api", &hello(), &mut ctx).await.unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert!(e.message.contains("overloaded"), "{}", e.message);
    // The listener saw "Bon": a retry would repeat it.
    assert_eq!(*deltas.lock(), vec!["Bon"]);
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn a_stream_without_a_finish_reason_is_broken() {
    let (_fake, u) = Fake::chat(
        true,
        vec![Reply::Sse(vec![chunk(&answer("Bonjour", None, None))])],
    )
    .await;
    let (mut ctx, _deltas) = listening();
    let e = u.execute("api", &hello(), &mut ctx).await.unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

#[tokio::test]
async fn a_blocked_prompt_is_content_filtered() {
    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                         "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5},
                         "modelVersion": "gemini-2.5-flash"});
    let (_fake, u) = Fake::chat(false, vec![Reply::Json(200, blocked.clone())]).await;
    let x = run(&u, "api", hello()).await.0.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "", "tool_calls": [], "finish_reason": "content_filter", "model": "gemini-2.5-flash"})
    );
    assert_eq!(x.usage.input_tokens, Some(5));

    let (_fake, u) = Fake::chat(true, vec![Reply::Sse(vec![chunk(&blocked)])]).await;
    let x = run(&u, "api", hello()).await.0.unwrap();
    assert_eq!(x.output["text"], "");
    assert_eq!(x.output["finish_reason"], "content_filter");
}

#[tokio::test]
async fn an_answer_without_candidates_is_invalid() {
    let (_fake, u) = Fake::chat(
        false,
        vec![Reply::Json(
            200,
            json!({"modelVersion": "gemini-2.5-flash"}),
        )],
    )
    .await;
    let e = run(&u, "api", hello()).await.0.unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

#[tokio::test]
async fn one_text_is_embedded_with_embed_content() {
    let (fake, u) = Fake::gemini(
        false,
        Kind::Embedding,
        "models/gemini-embedding-001",
        vec![Reply::Json(
            200,
            json!({"embedding": {"values": [0.1, -0.2, 0.3]}}),
        )],
    )
    .await;
    let input = json!({"input": "hello", "dimensions": 3,
                       "options": {"taskType": "RETRIEVAL_QUERY"}});
    let x = run(&u, "api", input).await.0.unwrap();
    assert_eq!(
        x.output,
        json!({"embeddings": [[0.1, -0.2, 0.3]], "dimensions": 3,
               "model": "models/gemini-embedding-001"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: None,
            output_tokens: None,
            ..Usage::default()
        }
    );
    let (uri, headers, body) = fake.seen(0);
    assert_eq!(uri, "/v1beta/models/gemini-embedding-001:embedContent");
    assert_eq!(headers["x-goog-api-key"], "test-key");
    assert_eq!(
        body,
        json!({"model": "models/gemini-embedding-001",
               "content": {"parts": [{"text": "hello"}]},
               "outputDimensionality": 3, "taskType": "RETRIEVAL_QUERY"})
    );
}

#[tokio::test]
async fn many_texts_are_embedded_in_one_batch() {
    let (fake, u) = Fake::gemini(
        false,
        Kind::Embedding,
        "gemini-embedding-001",
        vec![Reply::Json(
            200,
            json!({"embeddings": [{"values": [0.1, 0.2]}, {"values": [0.3, 0.4]}]}),
        )],
    )
    .await;
    let input = json!({"input": ["a", "b"], "options": {"taskType": "RETRIEVAL_DOCUMENT"}});
    let x = run(&u, "api", input).await.0.unwrap();
    assert_eq!(
        x.output,
        json!({"embeddings": [[0.1, 0.2], [0.3, 0.4]], "dimensions": 2,
               "model": "gemini-embedding-001"})
    );
    assert_eq!(x.usage.input_tokens, None);
    let (uri, _, body) = fake.seen(0);
    assert_eq!(
        uri,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    // Options are fields of each text's request.
    let request = |text: &str| {
        json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": text}]},
               "taskType": "RETRIEVAL_DOCUMENT"})
    };
    assert_eq!(body, json!({"requests": [request("a"), request("b")]}));
}

#[tokio::test]
async fn a_batch_missing_vectors_is_invalid() {
    let (_fake, u) = Fake::gemini(
        false,
        Kind::Embedding,
        "gemini-embedding-001",
        vec![Reply::Json(200, json!({"embeddings": [{"values": [0.1]}]}))],
    )
    .await;
    let e = run(&u, "api", json!({"input": ["a", "b"]}))
        .await
        .0
        .unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

#[test]
fn finish_reasons_are_normalized() {
    for (finish, want) in [
        (Some("STOP"), "stop"),
        (None, "stop"),
        (Some("MAX_TOKENS"), "length"),
        (Some("SAFETY"), "content_filter"),
        (Some("RECITATION"), "content_filter"),
        (Some("BLOCKLIST"), "content_filter"),
        (Some("PROHIBITED_CONTENT"), "content_filter"),
        (Some("SPII"), "content_filter"),
        (Some("MALFORMED_FUNCTION_CALL"), "other"),
        (Some("OTHER"), "other"),
    ] {
        assert_eq!(
            serde_json::to_value(chat::finish_reason(finish)).unwrap(),
            want,
            "{finish:?}"
        );
    }
}
