//! Against a local fake that speaks Anthropic's real wire format.

use super::*;
use crate::upstream::Upstream;
use crate::upstream::config::Protocol;
use crate::upstream::testutil::{Fake, Reply, listening, provider, route, run, upstream};
use crate::{Provider, Usage};
use serde_json::json;

impl Fake {
    /// The fake, and an upstream with one Anthropic provider (`claude`,
    /// streaming as told) behind the chat API `chat`.
    async fn anthropic(stream: bool, replies: Vec<Reply>) -> (Self, Upstream) {
        let (fake, base) = Fake::serve(replies).await;
        let mut p = provider(Protocol::Anthropic, &base);
        p.stream = Some(stream);
        let u = upstream(
            &[("claude", p)],
            vec![route(
                "chat",
                Kind::Chat,
                &[&[("claude", "claude-haiku-4-5")]],
            )],
        );
        (fake, u)
    }
}

fn sse(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed message whose text is `words`, as Anthropic sends it.
fn message_stream(words: &[&str]) -> Vec<String> {
    let mut out = vec![
        sse(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
                "type": "message", "role": "assistant", "content": [],
                "model": "claude-haiku-4-5-20251001", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ),
        sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        sse("ping", json!({"type": "ping"})),
    ];
    for w in words {
        out.push(sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}),
        ));
    }
    out.push(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    out.push(sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 15}}),
    ));
    out.push(sse("message_stop", json!({"type": "message_stop"})));
    out
}

fn error(status: u16, kind: &str, message: &str) -> Reply {
    let headers: &'static [_] = if status == 429 {
        &[("retry-after", "0")]
    } else {
        &[]
    };
    Reply::JsonWith(
        status,
        json!({"type": "error", "error": {"type": kind, "message": message}}),
        headers.to_vec(),
    )
}

fn message(text: &str, stop_reason: &str) -> Reply {
    Reply::JsonWith(
        200,
        json!({"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
               "content": [{"type": "text", "text": text}],
               "model": "claude-haiku-4-5-20251001", "stop_reason": stop_reason,
               "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 3}}),
        vec![],
    )
}

fn hello() -> Value {
    json!({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 64})
}

#[tokio::test]
async fn the_request_is_in_anthropics_shape() {
    let (fake, u) = Fake::anthropic(false, vec![message("Bien.", "end_turn")]).await;
    let input = json!({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "system", "content": "Use French."},
        {"role": "user", "content": "How are you?"}
    ], "temperature": 0.2, "top_p": 0.9, "stop": ["END"],
       "options": {"metadata": {"user_id": "u-1"}, "top_k": 5, "model": "other", "max_tokens": 1, "stream": true}});
    run(&u, "chat", input).await.0.unwrap();
    let (uri, headers, body) = fake.seen(0);
    assert_eq!(uri, "/v1/messages");
    assert_eq!(headers["x-api-key"], "test-key");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(headers.get("authorization").is_none());
    // Options add fields; they never replace Taskgate's.
    assert_eq!(
        body,
        json!({"model": "claude-haiku-4-5", "max_tokens": 4096,
               "system": "Be brief.\n\nUse French.",
               "messages": [{"role": "user", "content": "Hello"},
                            {"role": "assistant", "content": "Hi!"},
                            {"role": "user", "content": "How are you?"}],
               "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"],
               "metadata": {"user_id": "u-1"}, "top_k": 5, "stream": false})
    );
}

#[tokio::test]
async fn without_system_messages_there_is_no_system_field() {
    let (fake, u) = Fake::anthropic(true, vec![Reply::Sse(message_stream(&["Hi"]))]).await;
    run(&u, "chat", hello()).await.0.unwrap();
    assert_eq!(
        fake.seen(0).2,
        json!({"model": "claude-haiku-4-5", "max_tokens": 64,
               "messages": [{"role": "user", "content": "Hello"}], "stream": true})
    );
}

#[tokio::test]
async fn a_message_is_normalized_with_its_usage() {
    let (_fake, u) = Fake::anthropic(
        false,
        vec![Reply::JsonWith(
            200,
            json!({"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
                   "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                               {"type": "text", "text": "Très bien, "},
                               {"type": "text", "text": "merci."}],
                   "model": "claude-haiku-4-5-20251001", "stop_reason": "max_tokens",
                   "stop_sequence": null, "usage": {"input_tokens": 40, "output_tokens": 6}}),
            vec![],
        )],
    )
    .await;
    let (r, ctx) = run(&u, "chat", hello()).await;
    let x = r.unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Très bien, merci.", "tool_calls": [], "reasoning": "Hmm.",
               "reasoning_details": [{"type": "thinking", "format": "anthropic",
                                      "text": "Hmm.", "signature": "sig"}],
               "finish_reason": "length", "model": "claude-haiku-4-5-20251001"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(40),
            output_tokens: Some(6),
            ..Usage::default()
        }
    );
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(ctx.attempts()[0].http_status, Some(200));
}

#[tokio::test]
async fn a_stream_sends_its_deltas_in_order() {
    let (fake, u) = Fake::anthropic(
        true,
        vec![Reply::Sse(message_stream(&["Hello", " from", " Claude"]))],
    )
    .await;
    let (mut ctx, deltas) = listening();
    let x = u.execute("chat", &hello(), &mut ctx).await.unwrap();
    assert_eq!(*deltas.lock(), vec!["Hello", " from", " Claude"]);
    assert_eq!(x.output["text"], deltas.lock().concat());
    assert_eq!(
        x.output,
        json!({"text": "Hello from Claude", "tool_calls": [], "finish_reason": "stop",
               "model": "claude-haiku-4-5-20251001"})
    );
    assert_eq!(
        x.usage,
        Usage {
            units: 1,
            input_tokens: Some(25),
            output_tokens: Some(15),
            ..Usage::default()
        }
    );
    let body = fake.seen(0).2;
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn a_rate_limit_is_retried() {
    let (fake, u) = Fake::anthropic(
        false,
        vec![
            error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            message("Hi", "end_turn"),
        ],
    )
    .await;
    let (r, ctx) = run(&u, "chat", hello()).await;
    assert_eq!(r.unwrap().output["text"], "Hi");
    let statuses: Vec<_> = ctx.attempts().iter().map(|a| a.http_status).collect();
    assert_eq!(statuses, vec![Some(429), Some(200)]);
    assert_eq!(ctx.attempts()[0].outcome.as_str(), "failed");
    assert_eq!(fake.requests(), 2);
}

#[tokio::test]
async fn a_bad_request_fails_at_once() {
    let (fake, u) = Fake::anthropic(
        false,
        vec![
            error(
                400,
                "invalid_request_error",
                "max_tokens: 999999 > 64000, which is the maximum",
            ),
            message("never", "end_turn"),
        ],
    )
    .await;
    let (r, ctx) = run(&u, "chat", hello()).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert_eq!(e.upstream_status, Some(400));
    assert!(
        e.message
            .contains("max_tokens: 999999 > 64000, which is the maximum"),
        "{}",
        e.message
    );
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn an_error_event_after_text_fails_the_attempt() {
    let mut events = message_stream(&["Hel"]);
    events.truncate(4); // message_start … the first delta
    events.push(sse(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let (fake, u) = Fake::anthropic(
        true,
        vec![Reply::Sse(events), Reply::Sse(message_stream(&["Hello"]))],
    )
    .await;
    let (mut ctx, deltas) = listening();
    let e = u.execute("chat", &hello(), &mut ctx).await.unwrap_err();
    assert_eq!(e.code, "upstream_error");
    assert!(e.message.contains("Overloaded"), "{}", e.message);
    // The listener saw "Hel": a retry would repeat it.
    assert_eq!(*deltas.lock(), vec!["Hel"]);
    assert_eq!(ctx.attempts().len(), 1);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn an_error_event_before_any_text_is_retried() {
    let events = vec![
        message_stream(&[])[0].clone(),
        sse(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    let (_fake, u) = Fake::anthropic(
        true,
        vec![Reply::Sse(events), Reply::Sse(message_stream(&["Hello"]))],
    )
    .await;
    let (mut ctx, deltas) = listening();
    let x = u.execute("chat", &hello(), &mut ctx).await.unwrap();
    assert_eq!(x.output["text"], "Hello");
    assert_eq!(*deltas.lock(), vec!["Hello"]);
    let outcomes: Vec<_> = ctx.attempts().iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, vec!["failed", "succeeded"]);
}

#[tokio::test]
async fn a_stream_without_message_stop_is_broken() {
    let mut events = message_stream(&["Hello", " wor"]);
    events.pop(); // message_stop
    let (_fake, u) = Fake::anthropic(true, vec![Reply::Sse(events)]).await;
    let (mut ctx, _deltas) = listening();
    let e = u.execute("chat", &hello(), &mut ctx).await.unwrap_err();
    assert_eq!(e.code, "invalid_upstream_response");
}

#[test]
fn stop_reasons_are_normalized() {
    for (stop, want) in [
        (Some("end_turn"), "stop"),
        (Some("stop_sequence"), "stop"),
        (Some("max_tokens"), "length"),
        (Some("model_context_window_exceeded"), "length"),
        (Some("tool_use"), "tool_calls"),
        (Some("refusal"), "content_filter"),
        (Some("pause_turn"), "other"),
        (None, "stop"),
    ] {
        assert_eq!(
            serde_json::to_value(chat::finish_reason(stop)).unwrap(),
            want,
            "{stop:?}"
        );
    }
}
