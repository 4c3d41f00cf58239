//! §5 The catalog: GET /apis (filters, search, cursors) and GET /apis/{slug}
//! (schemas, examples, limits), and proof that the examples are real.

use serde_json::{Value, json};
use taskgate_core::KeyType;
use taskgate_providers::schema::CompiledSchema;

use crate::utils::{Backend, TestApp, TestClient, both};

const BUILTINS: [&str; 3] = ["language-detect", "sentiment", "token-count"];
const SUMMARY_FIELDS: [&str; 9] = [
    "slug",
    "object",
    "name",
    "description",
    "kind",
    "provider",
    "status",
    "modes",
    "pricing",
];

fn slugs(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {page}"))
        .iter()
        .map(|a| a["slug"].as_str().unwrap().to_owned())
        .collect()
}

async fn details(c: &TestClient, slug: &str) -> Value {
    c.get(&format!("apis/{slug}"))
        .await
        .expect(200)
        .data()
        .clone()
}

fn check_summary(a: &Value) {
    let keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    for f in SUMMARY_FIELDS {
        assert!(keys.contains(&f), "summary lacks {f}: {a}");
    }
    assert_eq!(a["object"], json!("api"));
    assert_eq!(a["provider"], json!("builtin"));
    assert_eq!(a["status"], json!("available"));
    for f in ["name", "description", "kind"] {
        assert!(!a[f].as_str().unwrap().is_empty(), "{f}: {a}");
    }
    let modes = a["modes"].as_array().unwrap();
    assert!(
        modes.contains(&json!("sync")) && modes.contains(&json!("async")),
        "{a}"
    );
    assert_eq!(a["pricing"]["unit"], json!("call"));
    // Money is a decimal string, never a float.
    assert_eq!(a["pricing"]["price_usd"], json!("0.0001"), "{a}");
}

async fn list_shows_the_builtins(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    for key in [&app.live, &app.test] {
        let c = app.client(key);
        let r = c.get("apis").await.expect(200);
        let page = r.data();
        assert_eq!(page["object"], json!("list"));
        assert_eq!(page["has_more"], json!(false));
        assert_eq!(page["next_cursor"], json!(null));
        assert_eq!(slugs(page), BUILTINS, "sorted by slug");
        for a in page["items"].as_array().unwrap() {
            check_summary(a);
            // A summary carries no schemas or examples.
            for absent in ["input_schema", "output_schema", "examples", "limits"] {
                assert!(a.get(absent).is_none(), "{absent} in a summary: {a}");
            }
        }
        let kinds: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["classification", "classification", "tokenization"]);
    }
    app.stop().await;
}
both!(list_shows_the_builtins);

async fn list_filters_and_search(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let cases: [(&str, &[&str]); 11] = [
        ("kind=classification", &["language-detect", "sentiment"]),
        ("kind=tokenization", &["token-count"]),
        ("kind=chat", &[]),
        ("provider=builtin", &BUILTINS),
        ("provider=openai", &[]),
        ("q=sentiment", &["sentiment"]),
        ("q=SENTIMENT", &["sentiment"]),
        // In names and descriptions too, any case.
        ("q=vAdEr", &["sentiment"]),
        ("q=Token%20Count", &["token-count"]),
        ("q=openai", &["token-count"]),
        ("kind=classification&q=iso%20639", &["language-detect"]),
    ];
    for (query, expected) in cases {
        let r = c.get(&format!("apis?{query}")).await.expect(200);
        assert_eq!(slugs(r.data()), expected, "{query}");
        assert_eq!(r.data()["has_more"], json!(false), "{query}");
    }
    assert_eq!(
        slugs(c.get("apis?q=zzz-nothing").await.expect(200).data()),
        Vec::<String>::new()
    );
    app.stop().await;
}
both!(list_filters_and_search);

async fn list_pages_with_cursors(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let mut seen = Vec::new();
    let mut path = "apis?limit=1".to_owned();
    for _ in 0..10 {
        let r = c.get(&path).await.expect(200);
        let page = r.data();
        assert_eq!(slugs(page).len(), 1);
        seen.extend(slugs(page));
        match page["next_cursor"].as_str() {
            Some(cur) => {
                assert_eq!(page["has_more"], json!(true));
                path = format!("apis?limit=1&cursor={cur}");
            }
            None => {
                assert_eq!(page["has_more"], json!(false));
                break;
            }
        }
    }
    assert_eq!(seen, BUILTINS);
    // A filter with a cursor: the client repeats the filter.
    let r = c.get("apis?kind=classification&limit=1").await.expect(200);
    assert_eq!(slugs(r.data()), ["language-detect"]);
    let cur = r.data()["next_cursor"].as_str().unwrap();
    let r = c
        .get(&format!("apis?kind=classification&limit=1&cursor={cur}"))
        .await
        .expect(200);
    assert_eq!(slugs(r.data()), ["sentiment"]);
    assert_eq!(r.data()["has_more"], json!(false));
    let r = c.get("apis?limit=2").await.expect(200);
    assert_eq!(slugs(r.data()), ["language-detect", "sentiment"]);
    assert_eq!(r.data()["has_more"], json!(true));
    app.stop().await;
}
both!(list_pages_with_cursors);

async fn list_refuses_bad_parameters(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    // A well-formed cursor of the task list is not a catalog cursor.
    let tasks_cursor = "desc_01JD0000000000000000000000";
    let cases = [
        ("apis?search=x", "search"),
        ("apis?order=asc", "order"),
        ("apis?limit=0", "limit"),
        ("apis?limit=101", "limit"),
        ("apis?limit=x", "limit"),
        ("apis?cursor=garbage", "cursor"),
        ("apis?cursor=asc_", "cursor"),
        ("apis?cursor=asc_Not%20a%20slug", "cursor"),
        (&format!("apis?cursor={tasks_cursor}") as &str, "cursor"),
        ("apis?kind=a&kind=b", "kind"),
    ];
    for (path, param) in cases {
        let r = c.get(path).await.expect_error(400, "invalid_parameter");
        assert_eq!(r.body["error"]["param"], json!(param), "{path}: {}", r.text);
    }
    app.stop().await;
}
both!(list_refuses_bad_parameters);

async fn details_have_schemas_examples_limits(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let list = c.get("apis").await.expect(200);
    for summary in list.data()["items"].as_array().unwrap() {
        let slug = summary["slug"].as_str().unwrap();
        let d = details(&c, slug).await;
        check_summary(&d);
        for f in SUMMARY_FIELDS {
            assert_eq!(
                d[f], summary[f],
                "{slug}: details.{f} differs from the summary"
            );
        }
        let input_schema =
            CompiledSchema::compile(&d["input_schema"]).expect("input_schema is JSON Schema");
        let output_schema =
            CompiledSchema::compile(&d["output_schema"]).expect("output_schema is JSON Schema");
        assert_eq!(d["input_schema"]["type"], json!("object"));
        assert!(
            d["input_schema"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("text"))
        );
        let examples = d["examples"].as_array().unwrap();
        assert!(!examples.is_empty(), "{slug} has no examples");
        for e in examples {
            let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["input", "output"], "{slug}: {e}");
            assert!(
                input_schema.is_valid(&e["input"]),
                "{slug}: example input violates input_schema: {e}"
            );
            assert!(
                output_schema.is_valid(&e["output"]),
                "{slug}: example output violates output_schema: {e}"
            );
        }
        let limits = &d["limits"];
        assert!(
            limits["timeout_ms"].as_u64().is_some_and(|t| t > 0),
            "{slug}: {limits}"
        );
        assert!(
            limits["max_input_bytes"].as_u64().is_some_and(|b| b > 0),
            "{slug}: {limits}"
        );
    }
    let sentiment = details(&c, "sentiment").await;
    assert_eq!(sentiment["kind"], json!("classification"));
    for f in ["label", "score", "labels"] {
        assert!(
            sentiment["output_schema"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!(f)),
            "{f}"
        );
    }

    for slug in ["nope", "SENTIMENT", "sentiment2", "%20"] {
        let r = c
            .get(&format!("apis/{slug}"))
            .await
            .expect_error(404, "api_not_found");
        assert!(!r.body["error"]["message"].as_str().unwrap().is_empty());
    }
    app.stop().await;
}
both!(details_have_schemas_examples_limits);

/// Every example, run live, gives exactly the example's output: the catalog's
/// examples are real runs, not illustrations.
async fn examples_are_real(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.live);
    let mut count = 0;
    for slug in BUILTINS {
        let d = details(&c, slug).await;
        for e in d["examples"].as_array().unwrap() {
            let r = c
                .call(json!({ "api": slug, "input": e["input"] }))
                .await
                .expect(200);
            assert_eq!(r.data()["status"], json!("succeeded"), "{slug}: {}", r.text);
            assert_eq!(
                r.data()["output"],
                e["output"],
                "{slug}: example input {}",
                e["input"]
            );
            count += 1;
        }
    }
    assert!(count >= 3);
    app.stop().await;
}
both!(examples_are_real);

/// Test mode: each API answers with an output that satisfies its schema.
async fn test_mode_outputs_satisfy_the_schema(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let c = app.client(&app.test);
    for slug in BUILTINS {
        let d = details(&c, slug).await;
        let schema = CompiledSchema::compile(&d["output_schema"]).unwrap();
        let required: Vec<&str> = d["output_schema"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let inputs = [
            d["examples"][0]["input"].clone(),
            json!({ "text": "Bonjour tout le monde, quelle belle journée." }),
        ];
        for input in inputs {
            let r = c
                .call(json!({ "api": slug, "input": input }))
                .await
                .expect(200);
            let t = r.data();
            assert_eq!(t["status"], json!("succeeded"), "{slug}: {}", r.text);
            assert_eq!(t["mode"], json!("test"));
            assert_eq!(t["usage"]["cost_usd"], json!("0.000000"));
            for f in &required {
                assert!(
                    t["output"].get(*f).is_some(),
                    "{slug}: output lacks {f}: {}",
                    t["output"]
                );
            }
            let violations = schema.violations(&t["output"]);
            assert!(
                violations.is_empty(),
                "{slug}: {violations:?}: {}",
                t["output"]
            );
        }
    }
    app.stop().await;
}
both!(test_mode_outputs_satisfy_the_schema);

/// A restricted key sees only its allowed APIs.
async fn restricted_keys_see_their_apis_only(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let key = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&["apis:read"]),
            Some(&["sentiment"]),
            None,
        )
        .await;
    let c = app.client(key["secret"].as_str().unwrap());
    assert_eq!(slugs(c.get("apis").await.expect(200).data()), ["sentiment"]);
    assert_eq!(
        slugs(c.get("apis?kind=classification").await.expect(200).data()),
        ["sentiment"]
    );
    details(&c, "sentiment").await;
    c.get("apis/token-count")
        .await
        .expect_error(403, "insufficient_permissions");
    // Without apis:read, the catalog is closed.
    let key = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&["tasks:read"]),
            None,
            None,
        )
        .await;
    let c = app.client(key["secret"].as_str().unwrap());
    c.get("apis")
        .await
        .expect_error(403, "insufficient_permissions");
    c.get("apis/sentiment")
        .await
        .expect_error(403, "insufficient_permissions");
    app.stop().await;
}
both!(restricted_keys_see_their_apis_only);
