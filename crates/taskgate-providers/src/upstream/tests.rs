//! The route loop and the OpenAI-compatible adapter against local fakes that
//! answer in OpenAI's real wire format: retries, `Retry-After`, fallbacks,
//! weighted deployments, circuit breakers, timeouts, cancel, normalization.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use serde_json::{Value, json};

use super::config::Protocol;
use super::testutil::{Fake, Reply, provider, route, run, serve, upstream, upstream_trusting};
use super::*;
use crate::{ApiStatus, Piece};

fn ok_chat(text: &str) -> Reply {
    Reply::Json(
        200,
        json!({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "logprobs": null,
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
            "system_fingerprint": "fp_06737a9306"
        }),
    )
}

fn error(status: u16, message: &str, retry_after: Option<&'static str>) -> Reply {
    let headers = retry_after
        .map(|v| vec![("retry-after", v)])
        .unwrap_or_default();
    Reply::JsonWith(
        status,
        json!({"error": {"message": message, "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
        headers,
    )
}

fn sse_chunks(words: &[&str]) -> Vec<String> {
    let mut chunks = vec![format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
    )];
    for w in words {
        chunks.push(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
                   "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]})
        ));
    }
    chunks.push(format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    chunks.push(format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
               "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
    ));
    chunks.push("data: [DONE]\n\n".to_owned());
    chunks
}

fn chat_input() -> Value {
    json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5,
           "options": {"seed": 7, "model": "not-this-one", "stream": true}})
}

fn no_stream(base: &str) -> ProviderConfig {
    let mut p = provider(Protocol::Openai, base);
    p.stream = Some(false);
    p
}

#[tokio::test]
async fn chat_request_and_answer_are_normalized() {
    let (fake, base) = Fake::start(vec![ok_chat("Hello there")]).await;
    let u = upstream(
        &[("oa", no_stream(&base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "gpt-4o-mini")]])],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    let x = r.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Hello there", "tool_calls": [], "finish_reason": "stop", "model": "gpt-4o-mini-2024-07-18"})
    );
    assert_eq!(
        (x.usage.input_tokens, x.usage.output_tokens),
        (Some(19), Some(10))
    );
    let seen = fake.raw(0);
    assert_eq!(seen.0, "/v1/chat/completions");
    assert_eq!(seen.1["authorization"], "Bearer test-key");
    assert_eq!(
        fake.body(0),
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}],
               "max_tokens": 5, "seed": 7, "stream": false}),
        "options cannot turn streaming on"
    );
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(ctx.attempts()[0].outcome.as_str(), "succeeded");
    assert_eq!(ctx.attempts()[0].target, "gpt-4o-mini");
}

#[tokio::test]
async fn a_provider_over_tls_is_reached_and_an_untrusted_one_refused() {
    let (fake, base) = Fake::serve_tls(vec![
        ok_chat("Hello there"),
        Reply::Sse(sse_chunks(&["Hel", "lo"])),
    ])
    .await;
    let base = format!("{base}/v1");
    let routes = || {
        vec![
            route("chat", Kind::Chat, &[&[("whole", "gpt-4o-mini")]]),
            route("streamed", Kind::Chat, &[&[("sse", "gpt-4o-mini")]]),
        ]
    };
    let providers = [
        ("whole", no_stream(&base)),
        ("sse", provider(Protocol::Openai, &base)),
    ];
    let u = upstream_trusting(&providers, routes());
    let (r, _) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "Hello there");
    let (r, _) = run(&u, "streamed", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "Hello");
    assert_eq!(fake.requests(), 2);
    assert_eq!(fake.raw(1).0, "/v1/chat/completions");
    // Mozilla's roots alone do not trust the test authority: refused at
    // the handshake, nothing sent, said plainly.
    let u = upstream(&providers, routes());
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    let e = r.unwrap_err();
    assert_eq!(e.message, "Taskgate cannot connect to the provider whole.");
    assert_eq!(ctx.attempts().len(), 3, "a connect failure is retried");
    assert_eq!(fake.requests(), 2);
}

/// A chat on a streaming OpenAI provider answering `reply`: the fake, the
/// execution and the deltas stream readers got.
async fn streamed_chat(reply: Reply) -> (Fake, Execution, Vec<String>) {
    let (fake, base) = Fake::start(vec![reply]).await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "gpt-4o-mini")]])],
    );
    let (mut ctx, deltas) = super::testutil::listening();
    let x = u.execute("chat", &chat_input(), &mut ctx).await.unwrap();
    let deltas = deltas.lock().clone();
    (fake, x, deltas)
}

#[tokio::test]
async fn streamed_chat_sends_deltas_and_keeps_the_whole_text() {
    let (fake, x, deltas) = streamed_chat(Reply::Sse(sse_chunks(&["Hel", "lo", " wörld"]))).await;
    assert_eq!(deltas, vec!["Hel", "lo", " wörld"]);
    assert_eq!(x.output["text"], "Hello wörld");
    assert_eq!(x.output["finish_reason"], "stop");
    assert_eq!(
        (x.usage.input_tokens, x.usage.output_tokens),
        (Some(9), Some(3))
    );
    let body = fake.body(0);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn a_streamed_chat_answered_whole_is_read_whole() {
    // A server that ignores `"stream": true` and answers `application/json`.
    let (fake, x, deltas) = streamed_chat(ok_chat("Hello")).await;
    assert_eq!(fake.body(0)["stream"], true);
    assert_eq!(x.output["text"], "Hello");
    assert_eq!(x.output["finish_reason"], "stop");
    assert_eq!(
        (x.usage.input_tokens, x.usage.output_tokens),
        (Some(19), Some(10))
    );
    assert_eq!(deltas, vec!["Hello"], "stream readers get the text");
}

#[tokio::test]
async fn a_streamed_chat_answered_with_json_that_is_no_completion_fails_clearly() {
    let (_fake, base) = Fake::start(vec![Reply::Json(200, json!({"object": "list"}))]).await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "gpt-4o-mini")]])],
    );
    let (r, _) = run(&u, "chat", chat_input()).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
    assert!(e.message.contains("no `choices`"), "{}", e.message);
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let (fake, base) = Fake::start(vec![
        error(429, "Rate limit reached for gpt-4o-mini", Some("1")),
        ok_chat("ok"),
    ])
    .await;
    let u = upstream(
        &[("oa", no_stream(&base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "gpt-4o-mini")]])],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "ok");
    let outcomes: Vec<_> = ctx
        .attempts()
        .iter()
        .map(|a| (a.outcome.as_str(), a.http_status))
        .collect();
    assert_eq!(
        outcomes,
        vec![("failed", Some(429)), ("succeeded", Some(200))]
    );
    let waited = fake.raw(1).3 - fake.raw(0).3;
    assert!(
        waited >= Duration::from_millis(950),
        "waited only {waited:?}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_the_fallback_serves() {
    let (primary, base1) = Fake::start(vec![]).await;
    primary.always(error(503, "The server is overloaded", None));
    let (fallback, base2) = Fake::start(vec![ok_chat("from fallback")]).await;
    let u = upstream(
        &[("one", no_stream(&base1)), ("two", no_stream(&base2))],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("one", "m1")], &[("two", "m2")]],
        )],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "from fallback");
    assert_eq!(primary.requests(), 3, "the first try and max_retries = 2");
    let targets: Vec<_> = ctx
        .attempts()
        .iter()
        .map(|a| (a.provider.as_str(), a.target.as_str(), a.outcome.as_str()))
        .collect();
    assert_eq!(
        targets,
        vec![
            ("one", "m1", "failed"),
            ("one", "m1", "failed"),
            ("one", "m1", "failed"),
            ("two", "m2", "succeeded")
        ]
    );
    assert_eq!(fallback.body(0)["model"], "m2");
}

#[tokio::test]
async fn a_bad_request_fails_at_once_with_the_providers_message() {
    let (primary, base1) =
        Fake::start(vec![error(400, "max_tokens is too large: 99999999.", None)]).await;
    let (fallback, base2) = Fake::start(vec![ok_chat("never")]).await;
    let u = upstream(
        &[("one", no_stream(&base1)), ("two", no_stream(&base2))],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("one", "m1")], &[("two", "m2")]],
        )],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert_eq!(e.upstream_status, Some(400));
    assert!(
        e.message.contains("max_tokens is too large"),
        "{}",
        e.message
    );
    assert_eq!((primary.requests(), fallback.requests()), (1, 0));
    assert_eq!(ctx.attempts().len(), 1);
}

#[tokio::test]
async fn refused_credentials_move_on_without_quoting_the_key() {
    let (primary, base1) = Fake::start(vec![error(
        401,
        "Incorrect API key provided: test-key. You can find your API key at https://platform.openai.com/account/api-keys.",
        None,
    )])
    .await;
    let (_fallback, base2) = Fake::start(vec![ok_chat("two")]).await;
    let u = upstream(
        &[("one", no_stream(&base1)), ("two", no_stream(&base2))],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("one", "m1")], &[("two", "m2")]],
        )],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "two");
    assert_eq!(primary.requests(), 1, "a 401 is not retried");
    assert_eq!(ctx.attempts()[0].http_status, Some(401));

    // Alone, the refusal is the task's error, without the key.
    let (_p, base) = Fake::start(vec![error(
        401,
        "Incorrect API key provided: test-key.",
        None,
    )])
    .await;
    let u = upstream(
        &[("one", no_stream(&base))],
        vec![route("chat", Kind::Chat, &[&[("one", "m1")]])],
    );
    let e = run(&u, "chat", chat_input()).await.0.unwrap_err();
    assert!(!e.message.contains("test-key"), "{}", e.message);
    assert_eq!(e.upstream_status, Some(401));
}

#[tokio::test]
async fn breakers_open_skip_the_target_and_drive_the_api_status() {
    let (primary, base1) = Fake::start(vec![]).await;
    primary.always(error(500, "boom", None));
    let (fallback, base2) = Fake::start(vec![]).await;
    fallback.always(ok_chat("fb"));
    let mut p1 = no_stream(&base1);
    p1.max_retries = Some(0);
    p1.breaker_failures = Some(2);
    p1.breaker_cooldown_ms = Some(60_000);
    let u = upstream(
        &[("one", p1), ("two", no_stream(&base2))],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("one", "m1")], &[("two", "m2")]],
        )],
    );
    assert_eq!(u.status("chat"), ApiStatus::Available);
    run(&u, "chat", chat_input()).await.0.unwrap();
    assert_eq!(u.status("chat"), ApiStatus::Available, "one failure of two");
    run(&u, "chat", chat_input()).await.0.unwrap();
    assert_eq!(u.status("chat"), ApiStatus::Degraded);
    let before = primary.requests();
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "fb");
    assert_eq!(primary.requests(), before, "an open circuit is skipped");
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(ctx.attempts()[0].provider, "two");

    // With every target open, the API is unavailable and fails at once.
    fallback.always(error(502, "bad gateway", None));
    let mut p2 = no_stream(&base2);
    p2.max_retries = Some(0);
    p2.breaker_failures = Some(1);
    let mut p1 = no_stream(&base1);
    p1.max_retries = Some(0);
    p1.breaker_failures = Some(1);
    let u = upstream(
        &[("one", p1), ("two", p2)],
        vec![route(
            "chat",
            Kind::Chat,
            &[&[("one", "m1")], &[("two", "m2")]],
        )],
    );
    run(&u, "chat", chat_input()).await.0.unwrap_err();
    assert_eq!(u.status("chat"), ApiStatus::Unavailable);
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    assert!(r.unwrap_err().message.contains("circuit open"));
    assert!(ctx.attempts().is_empty());
}

#[tokio::test]
async fn a_hanging_upstream_times_out_per_attempt() {
    let (fake, base) = Fake::start(vec![]).await;
    fake.always(Reply::Hang);
    let mut p = no_stream(&base);
    p.timeout_ms = Some(200);
    p.max_retries = Some(1);
    let u = upstream(
        &[("oa", p)],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let (r, ctx) = run(&u, "chat", chat_input()).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, "upstream_timeout");
    let outcomes: Vec<_> = ctx.attempts().iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, vec!["timeout", "timeout"]);
}

#[tokio::test]
async fn dropping_the_execution_closes_the_upstream_connection() {
    let (fake, base) =
        Fake::start(vec![Reply::SseThenHang(sse_chunks(&["one"])[..2].to_vec())]).await;
    let u = Arc::new(upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    ));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let runner = u.clone();
    let task = tokio::spawn(async move {
        let mut ctx = ExecContext::with_timeout(Duration::from_secs(30)).stream_to(Arc::new(
            move |p: Piece| {
                if let Piece::Text(t) = p {
                    let _ = tx.send(t);
                }
            },
        ));
        runner.execute("chat", &chat_input(), &mut ctx).await
    });
    assert_eq!(
        rx.recv().await.as_deref(),
        Some("one"),
        "the stream started"
    );
    assert!(!fake.closed.load(Ordering::SeqCst));
    task.abort(); // what a cancel does to the task's future
    let deadline = Instant::now() + Duration::from_secs(5);
    while !fake.closed.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the upstream connection stayed open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stream_that_breaks_after_output_is_not_retried() {
    let mut chunks = sse_chunks(&["partial"])[..2].to_vec();
    chunks.push(format!(
        "data: {}\n\n",
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}})
    ));
    let (fake, base) = Fake::start(vec![Reply::Sse(chunks), ok_chat("second")]).await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let mut ctx =
        ExecContext::with_timeout(Duration::from_secs(10)).stream_to(Arc::new(|_: Piece| {}));
    let e = u
        .execute("chat", &chat_input(), &mut ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert!(e.message.contains("while streaming"), "{}", e.message);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn deployments_share_traffic_by_weight() {
    let (heavy, base1) = Fake::start(vec![]).await;
    heavy.always(ok_chat("a"));
    let (light, base2) = Fake::start(vec![]).await;
    light.always(ok_chat("b"));
    let mut r = route("chat", Kind::Chat, &[&[("heavy", "m"), ("light", "m")]]);
    r.groups[0][0].weight = 4;
    let u = upstream(
        &[("heavy", no_stream(&base1)), ("light", no_stream(&base2))],
        vec![r],
    );
    for _ in 0..200 {
        run(&u, "chat", chat_input()).await.0.unwrap();
    }
    let (h, l) = (heavy.requests(), light.requests());
    assert_eq!(h + l, 200);
    // 4:1 expects 160:40; the chance of the light one getting 80+ is nil.
    assert!(h > 120 && l > 10, "heavy {h}, light {l}");
}

#[tokio::test]
async fn embeddings_keep_input_order_and_count_tokens() {
    let (fake, base) = Fake::start(vec![Reply::Json(
        200,
        json!({"object": "list", "data": [
            {"object": "embedding", "index": 1, "embedding": [0.3, 0.4]},
            {"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}
        ], "model": "text-embedding-3-small", "usage": {"prompt_tokens": 8, "total_tokens": 8}}),
    )])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route(
            "emb",
            Kind::Embedding,
            &[&[("oa", "text-embedding-3-small")]],
        )],
    );
    let (r, _) = run(&u, "emb", json!({"input": ["a", "b"], "dimensions": 2})).await;
    let x = r.unwrap();
    assert_eq!(
        x.output,
        json!({"embeddings": [[0.1, 0.2], [0.3, 0.4]], "dimensions": 2, "model": "text-embedding-3-small"})
    );
    assert_eq!(
        (x.usage.input_tokens, x.usage.output_tokens),
        (Some(8), None)
    );
    assert_eq!(fake.raw(0).0, "/v1/embeddings");
    assert_eq!(fake.body(0)["dimensions"], 2);
    assert_eq!(fake.body(0)["encoding_format"], "float");
}

#[tokio::test]
async fn moderation_becomes_a_classification() {
    let (_fake, base) = Fake::start(vec![Reply::Json(
        200,
        json!({"id": "modr-970d409ef3bef3b70c73d8232df86e7d", "model": "omni-moderation-latest",
               "results": [{"flagged": true,
                            "categories": {"harassment": false, "violence": true, "self-harm": false},
                            "category_scores": {"harassment": 0.42, "violence": 0.91, "self-harm": 0.001}}]}))])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route(
            "mod",
            Kind::Classification,
            &[&[("oa", "omni-moderation-latest")]],
        )],
    );
    let x = run(&u, "mod", json!({"text": "I will hurt you"}))
        .await
        .0
        .unwrap();
    assert_eq!(x.output["label"], "violence");
    assert_eq!(x.output["score"], 0.91);
    assert_eq!(x.output["flagged"], true);
    assert_eq!(
        x.output["labels"][0],
        json!({"label": "violence", "score": 0.91})
    );
    assert_eq!(x.output["labels"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn images_count_one_unit_per_image() {
    let (fake, base) = Fake::start(vec![Reply::Json(
        200,
        json!({"created": 1713833628, "data": [
            {"url": "https://oaidalleapiprodscus.blob.core.windows.net/a.png", "revised_prompt": "A lighthouse"},
            {"b64_json": "iVBORw0KGgo="}
        ]}))])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route(
            "img",
            Kind::ImageGeneration,
            &[&[("oa", "dall-e-3")]],
        )],
    );
    let x = run(
        &u,
        "img",
        json!({"prompt": "lighthouse", "n": 2, "size": "1024x1024"}),
    )
    .await
    .0
    .unwrap();
    assert_eq!(x.usage.units, 2);
    assert_eq!(x.output["images"][1], json!({"b64_json": "iVBORw0KGgo="}));
    assert_eq!(fake.raw(0).0, "/v1/images/generations");
    assert_eq!(fake.body(0)["size"], "1024x1024");
}

#[tokio::test]
async fn transcription_uploads_the_fetched_file() {
    let audio = Router::new().route(
        "/clips/hello.wav",
        axum::routing::get(|| async { Bytes::from_static(b"RIFF....WAVEfmt ") }),
    );
    let audio_base = serve(audio).await;
    let (fake, base) = Fake::start(vec![Reply::Json(
        200,
        json!({"text": "Hello.", "usage": {"type": "tokens", "input_tokens": 14, "output_tokens": 3, "total_tokens": 17}}))])
    .await;
    let u = upstream(
        &[("oa", provider(Protocol::Openai, &base))],
        vec![route(
            "stt",
            Kind::Transcription,
            &[&[("oa", "gpt-4o-transcribe")]],
        )],
    );
    let x = run(
        &u,
        "stt",
        json!({"audio_url": format!("{audio_base}/clips/hello.wav"), "language": "en"}),
    )
    .await
    .0
    .unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Hello.", "model": "gpt-4o-transcribe"})
    );
    assert_eq!(x.usage.input_tokens, Some(14));
    let seen = fake.raw(0);
    assert_eq!(seen.0, "/v1/audio/transcriptions");
    let ct = seen.1["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("multipart/form-data"), "{ct}");
    let body = String::from_utf8_lossy(&seen.2);
    assert!(body.contains("filename=\"hello.wav\""));
    assert!(body.contains("RIFF....WAVEfmt "));
    assert!(body.contains("name=\"language\"\r\n\r\nen"));
}

#[tokio::test]
async fn user_urls_to_private_addresses_are_refused_before_any_call() {
    let (fake, base) = Fake::start(vec![]).await;
    let mut u = Upstream::new(FetchPolicy::default()).unwrap();
    u.add_provider("oa", &provider(Protocol::Openai, &base), Some("k".into()))
        .unwrap();
    u.add_route(route("stt", Kind::Transcription, &[&[("oa", "whisper-1")]]))
        .unwrap();
    for url in [
        "http://127.0.0.1:9/a.mp3",
        "http://localhost:9/a.mp3",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/a.mp3",
        "http://10.0.0.1/a.mp3",
        "file:///etc/passwd",
    ] {
        let e = run(&u, "stt", json!({"audio_url": url}))
            .await
            .0
            .unwrap_err();
        assert_eq!(e.code, "upstream_error", "{url}");
        assert!(
            e.message.contains("not a public address")
                || e.message.contains("only http")
                || e.message.contains("cannot be reached"),
            "{url}: {}",
            e.message
        );
    }
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn redirects_to_private_addresses_are_refused() {
    // 127.0.0.2 is allowed here (it plays a public host); 127.0.0.1 is not.
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let target =
        serve(Router::new().route("/secret", axum::routing::get(|| async { "internal data" })))
            .await;
    let redirect = Router::new().route(
        "/a.mp3",
        axum::routing::get(move || {
            let to = format!("{target}/secret");
            async move { axum::response::Redirect::temporary(&to) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, redirect).await.unwrap() });
    let fetcher = Fetcher::new(FetchPolicy {
        allow: vec![fetch::Cidr::parse("127.0.0.2/32").unwrap()],
        ..FetchPolicy::default()
    })
    .unwrap();
    let e = fetcher
        .fetch(&format!("http://{addr}/a.mp3"))
        .await
        .unwrap_err();
    assert!(e.message.contains("redirects"), "{}", e.message);

    // A file over the size limit is refused too.
    let big = Router::new().route("/big.mp3", axum::routing::get(|| async { vec![0u8; 4096] }));
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, big).await.unwrap() });
    let fetcher = Fetcher::new(FetchPolicy {
        allow: vec![fetch::Cidr::parse("127.0.0.2/32").unwrap()],
        max_bytes: 1024,
        ..FetchPolicy::default()
    })
    .unwrap();
    let e = fetcher
        .fetch(&format!("http://{addr}/big.mp3"))
        .await
        .unwrap_err();
    assert!(e.message.contains("larger than 1024"), "{}", e.message);
}

#[tokio::test]
async fn a_flapping_upstream_is_ridden_out_by_retries() {
    let flaps = (0..10).flat_map(|_| [error(502, "Bad gateway", None), ok_chat("ok")]);
    let (fake, base) = Fake::start(flaps.collect()).await;
    let mut p = no_stream(&base);
    p.breaker_failures = Some(2);
    let u = upstream(
        &[("oa", p)],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    for _ in 0..10 {
        let (r, ctx) = run(&u, "chat", chat_input()).await;
        assert_eq!(r.unwrap().output["text"], "ok");
        assert_eq!(ctx.attempts().len(), 2);
    }
    // Every failure was followed by a success: the circuit never opened.
    assert_eq!(u.status("chat"), ApiStatus::Available);
    assert_eq!(fake.requests(), 20);
}

#[tokio::test]
async fn a_recovered_target_is_probed_and_closes_its_circuit() {
    let (fake, base) = Fake::start(vec![error(500, "down", None)]).await;
    fake.always(ok_chat("back"));
    let mut p = no_stream(&base);
    p.max_retries = Some(0);
    p.breaker_failures = Some(1);
    p.breaker_cooldown_ms = Some(300);
    let u = upstream(
        &[("oa", p)],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    run(&u, "chat", chat_input()).await.0.unwrap_err();
    assert_eq!(u.status("chat"), ApiStatus::Unavailable);
    let e = run(&u, "chat", chat_input()).await.0.unwrap_err();
    assert!(e.message.contains("circuit open"), "{}", e.message);
    assert_eq!(
        fake.requests(),
        1,
        "nothing is sent while the circuit is open"
    );
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(u.status("chat"), ApiStatus::Degraded, "half-open");
    let (r, _) = run(&u, "chat", chat_input()).await;
    assert_eq!(r.unwrap().output["text"], "back");
    assert_eq!(u.status("chat"), ApiStatus::Available);
}

#[tokio::test]
async fn a_slow_stream_outlives_the_attempt_timeout_while_it_makes_progress() {
    // Pieces 150 ms apart (about 1.2 s in all) under a 400 ms attempt timeout.
    let (fake, base) = Fake::start(vec![]).await;
    fake.always(Reply::Paced(
        sse_chunks(&["a", "b", "c", "d", "e"]),
        Duration::from_millis(150),
    ));
    let mut p = provider(Protocol::Openai, &base);
    p.timeout_ms = Some(400);
    p.max_retries = Some(0);
    let u = upstream(
        &[("oa", p)],
        vec![route("chat", Kind::Chat, &[&[("oa", "m")]])],
    );
    let mut ctx =
        ExecContext::with_timeout(Duration::from_secs(10)).stream_to(Arc::new(|_: Piece| {}));
    let x = u.execute("chat", &chat_input(), &mut ctx).await.unwrap();
    assert_eq!(x.output["text"], "abcde");

    // A stream that stalls after its first pieces is still cut off.
    fake.always(Reply::SseThenHang(sse_chunks(&["a"])[..2].to_vec()));
    let mut ctx =
        ExecContext::with_timeout(Duration::from_secs(10)).stream_to(Arc::new(|_: Piece| {}));
    let e = u
        .execute("chat", &chat_input(), &mut ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code, "upstream_timeout");
    assert_eq!(ctx.attempts().last().unwrap().outcome.as_str(), "timeout");
}

#[tokio::test]
async fn azure_style_providers_sign_with_a_header_and_a_query() {
    let (fake, base) = Fake::start(vec![ok_chat("from Azure")]).await;
    let mut p = no_stream(&format!("{base}/openai/deployments/gpt-4o-mini"));
    p.auth_header = Some("api-key".to_owned());
    p.query
        .insert("api-version".to_owned(), Secret::new("2024-10-21"));
    p.headers
        .insert("x-ms-client".to_owned(), Secret::new("taskgate"));
    let u = upstream(
        &[("azure", p)],
        vec![route("chat", Kind::Chat, &[&[("azure", "gpt-4o-mini")]])],
    );
    let x = run(&u, "chat", chat_input()).await.0.unwrap();
    assert_eq!(x.output["text"], "from Azure");
    let (uri, headers, _, _) = fake.raw(0);
    assert_eq!(
        uri,
        "/v1/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(headers["api-key"], "test-key");
    assert_eq!(headers["x-ms-client"], "taskgate");
    assert!(headers.get("authorization").is_none());
}
