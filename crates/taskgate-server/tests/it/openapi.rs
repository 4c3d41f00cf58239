//! The OpenAPI document against the server: what the document admits, the
//! server accepts, and what it refuses, the server refuses (issue 8, part 11).
//! schemathesis (`scripts/schemathesis.sh`) explores the same ground at
//! random; these tests pin the rules it cannot be relied on to meet.

use serde_json::{Map, Value, json};
use taskgate_providers::schema::CompiledSchema;

use crate::utils::{Backend, TestApp, TestClient, both, sentiment};

/// A schema of `doc` by JSON pointer, compiled with the document as its root
/// so that its `$ref`s to `#/components/schemas/…` resolve.
fn schema_at(doc: &Value, pointer: &str) -> CompiledSchema {
    let mut root = doc.pointer(pointer).expect(pointer).clone();
    root["components"] = doc["components"].clone();
    CompiledSchema::compile(&root).expect("the document's schema compiles")
}

fn valid(schema: &CompiledSchema, value: &Value) -> bool {
    schema.violations(value).is_empty()
}

async fn document(client: &TestClient) -> Value {
    let r = client.get("openapi.json").await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

fn call_schema(doc: &Value) -> CompiledSchema {
    schema_at(
        doc,
        "/paths/~1api~1v1~1call/post/requestBody/content/application~1json/schema",
    )
}

/// Every API's example, sent as the document describes a call of it, is
/// admitted by the document and accepted by the server; each body the
/// document refuses, the server refuses with 400.
async fn call_bodies_are_documented_exactly(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let live = app.client(&app.live);
    let doc = document(&live).await;
    let schema = call_schema(&doc);
    let apis = doc["x-taskgate-apis"].as_array().unwrap().clone();
    assert!(!apis.is_empty());
    for api in &apis {
        let slug = api["slug"].as_str().unwrap();
        let details = live.get(&format!("apis/{slug}")).await.expect(200);
        let limit = details.data()["limits"]["timeout_ms"].as_u64().unwrap();
        let Some(example) = details.data()["examples"][0]["input"].as_object() else {
            continue;
        };
        let metadata: Map<String, Value> = (0..16)
            .map(|i| (format!("k{i}"), json!("v".repeat(512))))
            .collect();
        let body = json!({
            "api": slug,
            "input": example,
            "mode": "async",
            "timeout_ms": limit,
            "metadata": metadata,
        });
        assert!(valid(&schema, &body), "{slug}: {body}");
        let r = live.call(body.clone()).await;
        assert_eq!(r.status, 202, "{slug}: {}", r.text);

        let mut refused = Vec::new();
        for (field, value) in [
            ("timeout_ms", json!(limit + 1)),
            ("timeout_ms", json!(0)),
            ("timeout_ms", json!(null)),
            ("mode", json!("later")),
            ("mode", json!(null)),
            ("metadata", json!({"": "x"})),
            ("metadata", json!({"k": "v".repeat(513)})),
            ("metadata", json!({"k": 1})),
            ("sandbox", json!({})),
            ("unknown", json!(1)),
        ] {
            let mut wrong = body.clone();
            wrong[field] = value;
            refused.push(wrong);
        }
        let mut too_many = body.clone();
        too_many["metadata"]["k16"] = json!("v");
        refused.push(too_many);
        for wrong in refused {
            assert!(!valid(&schema, &wrong), "the document admits {wrong}");
            let r = live.call(wrong.clone()).await;
            assert_eq!(r.status, 400, "{wrong}: {}", r.text);
        }
    }
    // Whole numbers are integers, in JSON Schema and on the server.
    let body = json!({"api": "sentiment", "input": {"text": "ok"}, "timeout_ms": 1000.0});
    assert!(valid(&schema, &body));
    live.call(body).await.expect(200);
    app.stop().await;
}
both!(call_bodies_are_documented_exactly);

/// The document a key fetches describes what that key may send: `sandbox`
/// only for test keys, a restricted key's APIs only. A bad key is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_reader_gets_its_own_document() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let sandboxed = json!({
        "api": "sentiment",
        "input": {"text": "ok"},
        "sandbox": {"delay_ms": 10, "outcome": "failed", "error_code": "upstream_error"},
    });

    let anonymous = document(&app.anonymous()).await;
    let test = document(&app.client(&app.test)).await;
    let live = document(&app.client(&app.live)).await;
    assert!(valid(&call_schema(&anonymous), &sandboxed));
    assert!(valid(&call_schema(&test), &sandboxed));
    assert!(!valid(&call_schema(&live), &sandboxed));
    app.client(&app.test)
        .call(sandboxed.clone())
        .await
        .expect(200);
    app.client(&app.live)
        .call(sandboxed.clone())
        .await
        .expect_error(400, "invalid_field");
    // error_code goes with outcome "failed" only, in both.
    let mut wrong = sandboxed.clone();
    wrong["sandbox"]["outcome"] = json!("succeeded");
    assert!(!valid(&call_schema(&test), &wrong));
    app.client(&app.test)
        .call(wrong)
        .await
        .expect_error(400, "invalid_field");

    let restricted = app
        .restricted_client(
            &app.account_id,
            Some(&["tasks:write"]),
            Some(&["sentiment"]),
        )
        .await;
    let mine = document(&restricted).await;
    let slugs: Vec<&str> = mine["x-taskgate-apis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["sentiment"]);
    let schemas = mine["components"]["schemas"].as_object().unwrap();
    assert!(schemas.contains_key("sentiment.call"));
    assert!(!schemas.contains_key("token-count.call"));
    assert!(!schemas.contains_key("Sandbox"));

    let bad = TestClient::new(&app.base, Some("tg_live_not_a_key"));
    bad.get("openapi.json")
        .await
        .expect_error(401, "invalid_api_key");
    app.stop().await;
}

/// The cursors the server writes match the documented patterns, and the
/// `order`/`cursor` object admits exactly the pairs the server accepts.
async fn cursors_are_documented_exactly(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    for text in ["a", "b", "c"] {
        c.call(sentiment(text)).await.expect(200);
    }
    let doc = document(&c).await;
    let params = |path: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .clone()
    };
    let tasks = params("/api/v1/tasks");
    let page = tasks.iter().position(|p| p["name"] == "page").unwrap();
    assert_eq!(tasks[page]["style"], json!("form"));
    assert_eq!(tasks[page]["explode"], json!(true));
    let page_schema = schema_at(
        &doc,
        &format!("/paths/~1api~1v1~1tasks/get/parameters/{page}/schema"),
    );
    let apis = params("/api/v1/apis");
    let cursor = apis.iter().position(|p| p["name"] == "cursor").unwrap();
    let apis_cursor = schema_at(
        &doc,
        &format!("/paths/~1api~1v1~1apis/get/parameters/{cursor}/schema"),
    );

    for order in ["desc", "asc"] {
        let r = c
            .get(&format!("tasks?limit=1&order={order}"))
            .await
            .expect(200);
        let cursor = r.data()["next_cursor"].as_str().unwrap().to_owned();
        for sent in [None, Some("desc"), Some("asc")] {
            let mut pair = json!({"cursor": cursor});
            let mut path = format!("tasks?limit=1&cursor={cursor}");
            if let Some(o) = sent {
                pair["order"] = json!(o);
                path.push_str(&format!("&order={o}"));
            }
            let documented = valid(&page_schema, &pair);
            let status = c.get(&path).await.status.as_u16();
            assert_eq!(documented, sent.is_none_or(|o| o == order), "{pair}");
            assert_eq!(status, if documented { 200 } else { 400 }, "{pair}");
        }
    }
    let r = c.get("apis?limit=1").await.expect(200);
    let cursor = r.data()["next_cursor"].clone();
    assert!(valid(&apis_cursor, &cursor), "{cursor}");
    app.stop().await;
}
both!(cursors_are_documented_exactly);

/// The events of a task's stream are what the document says an event is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_events_are_documented() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let c = app.client(&app.live);
    let doc = document(&c).await;
    let event_schema = schema_at(
        &doc,
        "/paths/~1api~1v1~1tasks~1{id}~1stream/get/responses/200/content/text~1event-stream/schema",
    );
    let id = c.call(sentiment("fine")).await.expect(200).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stream = c.get(&format!("tasks/{id}/stream")).await;
    assert_eq!(stream.status, 200);
    let mut events = 0;
    for block in stream.text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = json!({});
        for line in block.lines() {
            let (field, value) = line.split_once(": ").expect(line);
            event[field] = json!(value);
        }
        assert!(valid(&event_schema, &event), "{event}");
        let task_schema = schema_at(&doc, "/components/schemas/Task");
        let data: Value = serde_json::from_str(event["data"].as_str().unwrap()).unwrap();
        assert!(valid(&task_schema, &data), "{data}");
        events += 1;
    }
    assert_eq!(events, 1, "{}", stream.text);
    app.stop().await;
}

/// The chat kind's input and output are components of every document, with
/// a chat API in the catalog or not; with one, `ChatInput` judges inputs as
/// the API's own schema does, and a chat task's output is a `ChatOutput`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_types_are_components_whatever_the_catalog() {
    use taskgate_providers::upstream::Protocol;

    use crate::chat_checks::family_api;
    use crate::upstream::{Fake, chat_completion};

    let Some(plain) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    let doc = document(&plain.anonymous()).await;
    for name in [
        "ChatInput",
        "ChatOutput",
        "ChatMessage",
        "ChatToolCall",
        "StreamToolCall",
    ] {
        assert!(doc["components"]["schemas"][name].is_object(), "{name}");
    }
    plain.stop().await;

    let (fake, base) = Fake::start().await;
    fake.always(chat_completion("never"));
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| family_api(c, "chat", Protocol::Openai, &base))
        .start()
        .await
    else {
        return;
    };
    let c = app.client(&app.test);
    let doc = document(&c).await;
    let chat_input = schema_at(&doc, "/components/schemas/ChatInput");
    let api_input = schema_at(&doc, "/components/schemas/chat.input");
    let tool = json!({"name": "get_weather",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"]}});
    let input = json!({"messages": [{"role": "user", "content": "Weather in Paris?"}],
                       "tools": [tool], "tool_choice": {"name": "get_weather"}});
    let task = c
        .call(json!({"api": "chat", "input": input}))
        .await
        .expect(200);
    let output = task.data()["output"].clone();
    assert!(
        valid(&schema_at(&doc, "/components/schemas/ChatOutput"), &output),
        "{output}"
    );
    let call = output["tool_calls"][0].clone();
    assert!(
        valid(&schema_at(&doc, "/components/schemas/ChatToolCall"), &call),
        "{call}"
    );

    let answered = json!({"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                     {"type": "image", "url": "https://example.com/a.png"}]},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "21"}],
        "tools": [tool], "reasoning": {"effort": "low"},
        "response_format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}}});
    let mut inputs = vec![input, answered.clone()];
    for (pointer, value) in [
        ("/messages/1/content/1/media_type", json!("image/png")),
        ("/messages/2/content", Value::Null),
        ("/messages/3/role", json!("robot")),
        ("/tool_choice", json!("sometimes")),
        ("/reasoning/max_tokens", json!(100)),
        ("/response_format/strict", json!("yes")),
        ("/extra", json!(1)),
    ] {
        let mut wrong = answered.clone();
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        wrong.pointer_mut(parent).unwrap()[last] = value;
        inputs.push(wrong);
    }
    for input in &inputs {
        assert_eq!(
            valid(&chat_input, input),
            valid(&api_input, input),
            "{input}"
        );
    }
    assert!(valid(&chat_input, &answered));
    app.client(&app.test)
        .call(json!({"api": "chat", "input": answered}))
        .await
        .expect(200);
    app.stop().await;
}

/// The webhooks' operations answer what the document says (each answer
/// validates against its documented schema), their parameters and bodies
/// are constrained as the server checks them, a call's `webhook` is part of
/// the call's body, and the `webhooks` section describes the five events
/// whose messages a receiver gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_operations_are_documented() {
    use crate::webhooks::Receiver;

    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.webhooks.allow_private_networks = true)
        .start()
        .await
    else {
        return;
    };
    let rx = Receiver::start().await;
    let c = app.client(&app.live);
    let doc = document(&c).await;
    let mut events: Vec<&str> = doc["webhooks"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    events.sort_unstable();
    assert_eq!(
        events,
        [
            "task.cancelled",
            "task.failed",
            "task.running",
            "task.succeeded",
            "webhook.test"
        ]
    );
    let pointer = |path: &str| path.replace('~', "~0").replace('/', "~1");
    // Asserts that `r` is documented for `path`'s `method` at its status.
    let answers = |r: &crate::utils::Resp, path: &str, method: &str| {
        let at = format!(
            "/paths/{}/{method}/responses/{}/content/application~1json/schema",
            pointer(path),
            r.status.as_u16()
        );
        assert!(valid(&schema_at(&doc, &at), &r.body), "{at}: {}", r.text);
    };
    let body_of = |path: &str, method: &str| {
        schema_at(
            &doc,
            &format!(
                "/paths/{}/{method}/requestBody/content/application~1json/schema",
                pointer(path)
            ),
        )
    };
    let param = |path: &str, name: &str| {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let i = params.iter().position(|p| p["name"] == name).unwrap();
        schema_at(
            &doc,
            &format!("/paths/{}/get/parameters/{i}/schema", pointer(path)),
        )
    };
    let endpoints = "/api/v1/webhook_endpoints";
    let endpoint = "/api/v1/webhook_endpoints/{id}";

    let create = body_of(endpoints, "post");
    for wrong in [
        json!({}),
        json!({"url": rx.url, "events": []}),
        json!({"url": rx.url, "events": ["task.done"]}),
        json!({"url": rx.url, "colour": "red"}),
        json!({"url": rx.url, "description": "d".repeat(501)}),
    ] {
        assert!(!valid(&create, &wrong), "the document admits {wrong}");
        c.post("webhook_endpoints", wrong.clone())
            .await
            .expect_error(400, "invalid_field");
    }
    let mut ids = Vec::new();
    for body in [
        json!({"url": rx.url}),
        json!({"url": rx.url, "events": ["task.running", "task.succeeded", "webhook.test"],
               "description": "mine"}),
    ] {
        assert!(valid(&create, &body), "{body}");
        let r = c.post("webhook_endpoints", body).await.expect(201);
        answers(&r, endpoints, "post");
        assert!(r.data()["secret"].as_str().unwrap().starts_with("whsec_"));
        ids.push(r.data()["id"].as_str().unwrap().to_owned());
    }
    let id = ids[1].clone();

    let page = c.get("webhook_endpoints?limit=1").await.expect(200);
    answers(&page, endpoints, "get");
    assert_eq!(page.data()["items"][0]["id"], json!(ids[0]), "oldest first");
    assert!(page.data()["items"][0].get("secret").is_none());
    let cursor = page.data()["next_cursor"].clone();
    assert!(valid(&param(endpoints, "cursor"), &cursor), "{cursor}");
    let next = c
        .get(&format!(
            "webhook_endpoints?limit=1&cursor={}",
            cursor.as_str().unwrap()
        ))
        .await
        .expect(200);
    answers(&next, endpoints, "get");
    assert_eq!(next.data()["items"][0]["id"], json!(id));
    let r = c.get("webhook_endpoints?cursor=whd_x").await;
    answers(&r.expect_error(400, "invalid_parameter"), endpoints, "get");

    let r = c.get(&format!("webhook_endpoints/{id}")).await.expect(200);
    answers(&r, endpoint, "get");
    let update = body_of(endpoint, "patch");
    let change = json!({"enabled": false, "description": null, "events": ["webhook.test", "task.succeeded"]});
    assert!(valid(&update, &change));
    let patch = |body: Value| {
        c.send(
            c.request(reqwest::Method::PATCH, &format!("webhook_endpoints/{id}"))
                .json(&body),
        )
    };
    let r = patch(change).await.expect(200);
    answers(&r, endpoint, "patch");
    assert_eq!(r.data()["disabled_reason"], json!("owner"));
    for wrong in [
        json!({"enabled": "no"}),
        json!({"url": null}),
        json!({"events": []}),
        json!({"secret": "whsec_x"}),
    ] {
        assert!(!valid(&update, &wrong), "the document admits {wrong}");
        answers(
            &patch(wrong).await.expect_error(400, "invalid_field"),
            endpoint,
            "patch",
        );
    }
    let r = patch(json!({"enabled": true})).await.expect(200);
    answers(&r, endpoint, "patch");

    let r = c
        .get(&format!("webhook_endpoints/{id}/secret"))
        .await
        .expect(200);
    answers(&r, &format!("{endpoint}/secret"), "get");
    let r = c
        .post(&format!("webhook_endpoints/{id}/rotate_secret"), json!({}))
        .await
        .expect(200);
    answers(&r, &format!("{endpoint}/rotate_secret"), "post");
    let r = c
        .post(&format!("webhook_endpoints/{id}/test"), json!({}))
        .await
        .expect(202);
    answers(&r, &format!("{endpoint}/test"), "post");
    let test_delivery = r.data()["id"].as_str().unwrap().to_owned();
    let r = c.get("webhooks/secret").await.expect(200);
    answers(&r, "/api/v1/webhooks/secret", "get");
    let r = c
        .post("webhooks/secret/rotate", json!({}))
        .await
        .expect(200);
    answers(&r, "/api/v1/webhooks/secret/rotate", "post");

    // A call's own webhook is part of the call's body, exactly.
    let calls = call_schema(&doc);
    let mut call = sentiment("webhooks");
    call["webhook"] = json!({"url": rx.url, "events": ["task.succeeded"]});
    assert!(valid(&calls, &call), "{call}");
    let mut defaults = sentiment("webhooks");
    defaults["webhook"] = json!({"url": rx.url, "events": null});
    assert!(valid(&calls, &defaults), "{defaults}");
    c.call(defaults.clone()).await.expect(200);
    defaults["webhook"] = Value::Null;
    assert!(valid(&calls, &defaults), "{defaults}");
    c.call(defaults).await.expect(200);
    let task = c.call(call.clone()).await.expect(200);
    let task_id = task.data()["id"].as_str().unwrap().to_owned();
    for wrong in [
        json!({"events": ["task.succeeded"]}),
        json!({"url": rx.url, "events": ["webhook.test"]}),
        json!({"url": rx.url, "events": []}),
        json!({"url": rx.url, "secret": "x"}),
        json!("https://example.com"),
    ] {
        let mut bad = call.clone();
        bad["webhook"] = wrong;
        assert!(!valid(&calls, &bad), "the document admits {bad}");
        c.call(bad).await.expect_error(400, "invalid_field");
    }

    // What the receiver gets (the test event, the tasks' events to both
    // endpoints and to the calls' own webhooks) is what `webhooks` says.
    let got = rx.wait_for(5).await;
    for message in &got {
        let body = message.json();
        let kind = body["type"].as_str().unwrap();
        let op = &doc["webhooks"][kind]["post"];
        for h in op["parameters"].as_array().unwrap() {
            assert!(
                !message.header(h["name"].as_str().unwrap()).is_empty(),
                "{h}"
            );
        }
        let at = format!("/webhooks/{kind}/post/requestBody/content/application~1json/schema");
        assert!(valid(&schema_at(&doc, &at), &body), "{at}: {body}");
    }

    let deliveries = "/api/v1/webhook_deliveries";
    let r = c
        .get(&format!("webhook_deliveries?task_id={task_id}&limit=1"))
        .await
        .expect(200);
    answers(&r, deliveries, "get");
    let cursor = r.data()["next_cursor"].clone();
    assert!(valid(&param(deliveries, "cursor"), &cursor), "{cursor}");
    let r = c
        .get(&format!(
            "webhook_deliveries?endpoint_id={id}&status=succeeded&cursor={}",
            cursor.as_str().unwrap()
        ))
        .await
        .expect(200);
    answers(&r, deliveries, "get");
    for (name, value) in [
        ("status", "done"),
        ("endpoint_id", "whd_x"),
        ("task_id", "x"),
    ] {
        assert!(!valid(&param(deliveries, name), &json!(value)));
        let r = c.get(&format!("webhook_deliveries?{name}={value}")).await;
        answers(&r.expect_error(400, "invalid_parameter"), deliveries, "get");
    }
    let delivery = "/api/v1/webhook_deliveries/{id}";
    let r = c
        .get(&format!("webhook_deliveries/{test_delivery}"))
        .await
        .expect(200);
    answers(&r, delivery, "get");
    let r = c
        .post(
            &format!("webhook_deliveries/{test_delivery}/retry"),
            json!({}),
        )
        .await
        .expect(202);
    answers(&r, &format!("{delivery}/retry"), "post");
    let missing = "whd_01JD0000000000000000000000";
    let r = c.get(&format!("webhook_deliveries/{missing}")).await;
    answers(
        &r.expect_error(404, "webhook_delivery_not_found"),
        delivery,
        "get",
    );

    let r = c
        .send(c.request(reqwest::Method::DELETE, &format!("webhook_endpoints/{id}")))
        .await
        .expect(200);
    answers(&r, endpoint, "delete");
    let r = c.get(&format!("webhook_endpoints/{id}")).await;
    answers(
        &r.expect_error(404, "webhook_endpoint_not_found"),
        endpoint,
        "get",
    );

    // Without the scope: 403, documented.
    let reader = app
        .restricted_client(&app.account_id, Some(&["webhooks:read"]), None)
        .await;
    let r = reader
        .post("webhook_endpoints", json!({"url": rx.url}))
        .await;
    answers(
        &r.expect_error(403, "insufficient_permissions"),
        endpoints,
        "post",
    );
    app.stop().await;
}
