//! A chat API served through a template written before chat carried tool
//! calls still answers in the kind's shape.

use axum::Router;
use axum::routing::post;
use serde_json::json;

use super::super::config::Protocol;
use super::super::testutil::{http_route, provider, run, serve, upstream};
use super::*;
use crate::schema::CompiledSchema;

#[tokio::test]
async fn a_chat_template_without_tool_calls_answers_none() {
    let app = Router::new().route(
        "/generate",
        post(|| async { axum::Json(json!({"reply": "Hello!"})) }),
    );
    let base = serve(app).await;
    let http = HttpApiConfig {
        method: None,
        path: "/generate".into(),
        body: Some(json!({"prompt": "{{input.messages}}"})),
        output: json!({"text": "{{response.reply}}", "finish_reason": "stop", "model": "{{model}}"}),
        usage: Default::default(),
        job: None,
    };
    let u = upstream(
        &[("svc", provider(Protocol::Http, &base))],
        vec![http_route("chat", Kind::Chat, "svc", http)],
    );
    let x = run(
        &u,
        "chat",
        json!({"messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await
    .0
    .unwrap();
    assert_eq!(
        x.output,
        json!({"text": "Hello!", "tool_calls": [], "finish_reason": "stop", "model": "m"})
    );
    let schema = CompiledSchema::compile(&Kind::Chat.output_schema()).unwrap();
    assert!(schema.is_valid(&x.output));
}
