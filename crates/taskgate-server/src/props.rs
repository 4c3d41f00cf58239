//! Property tests of the parsers at the edge of the API: the Authorization
//! header, the query strings of GET /tasks and GET /apis, cursors, and the
//! parts of a POST /call body checked before its input schema. Whatever a
//! client sends: no panic, an answer in the contract's terms, and what the
//! service writes (cursors) reads back.

use std::sync::Arc;

use axum::http::HeaderValue;
use proptest::prelude::*;
use serde_json::{Map, Value};
use taskgate_core::{
    AccountId, ApiKeySecret, ApiList, ApiSlug, KeyId, KeyType, Mode, Scopes, TaskId, Timestamp,
};
use taskgate_providers::schema::CompiledSchema;

use crate::auth::api_key_of;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::principal::Principal;
use crate::query::{QueryPairs, cursor};
use crate::v1::{apis, tasks};

/// Whether `s` matches the JSON Schema `pattern`, as a client would check it.
fn matches(pattern: &str, s: &str) -> bool {
    let schema = serde_json::json!({ "type": "string", "pattern": pattern });
    CompiledSchema::compile(&schema)
        .unwrap()
        .violations(&Value::String(s.to_owned()))
        .is_empty()
}

fn principal(allowed: Option<Vec<&str>>) -> Principal {
    Principal {
        key_id: KeyId::new(),
        key_type: KeyType::Live,
        mode: Mode::Live,
        scopes: Scopes::all(),
        allowed_apis: allowed.map(|list| {
            Arc::new(ApiList(
                list.iter().map(|s| ApiSlug::parse(s).unwrap()).collect(),
            ))
        }),
        account_id: AccountId::new(),
        monthly_spend_limit_micros: None,
        max_running_tasks: None,
    }
}

/// Query strings made of the parameters the endpoints know (and a few they
/// do not), with values near and far from valid ones.
fn query_string() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "status",
        "api",
        "created_after",
        "created_before",
        "order",
        "limit",
        "cursor",
        "kind",
        "provider",
        "q",
        "nope",
        "",
    ]);
    let value = prop_oneof![
        any::<String>(),
        prop::sample::select(vec![
            "queued,running",
            "succeeded",
            "asc",
            "desc",
            "20",
            "0",
            "101",
            "-1",
            "2026-11-21T13:45:12Z",
            "sentiment",
            "Not A Slug",
            "chat",
            "%ZZ",
            "a=b&c",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec((key, value), 0..6)
        .prop_map(|pairs| serde_urlencoded::to_string(&pairs).unwrap_or_default())
}

/// Any JSON value, a few levels deep.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        prop::sample::select(vec![
            "succeeded",
            "failed",
            "timeout",
            "upstream_error",
            "x"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "delay_ms",
                    "outcome",
                    "error_code",
                    "order",
                    "a",
                    "",
                    "x-long-key"
                ])
                .prop_map(str::to_owned),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn authorization_headers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let _ = api_key_of(Some(&value));
        }
    }

    #[test]
    fn a_bearer_key_is_accepted_in_any_case_of_the_scheme(upper in any::<bool>()) {
        let key = ApiKeySecret::generate(KeyType::Test);
        let scheme = if upper { "BEARER" } else { "bearer" };
        let value = HeaderValue::from_str(&format!("{scheme} {}", key.expose())).unwrap();
        prop_assert_eq!(api_key_of(Some(&value)).map(|k| k.hash()).ok(), Some(key.hash()));
    }

    #[test]
    fn task_list_queries_never_panic(raw in any::<String>(), q in query_string(), restricted in any::<bool>()) {
        let who = principal(restricted.then(|| vec!["sentiment"]));
        for text in [raw, q] {
            let Ok(pairs) = QueryPairs::parse(&text) else { continue };
            match tasks::list_query(&who, &pairs) {
                Ok(Some(page)) => {
                    prop_assert!((2..=101).contains(&page.limit));
                    prop_assert_eq!(page.apis.is_some(), restricted);
                }
                Ok(None) => {}
                Err(e) => prop_assert_eq!(e.status.as_u16(), 400),
            }
        }
    }

    #[test]
    fn api_list_queries_never_panic(raw in any::<String>(), q in query_string(), restricted in any::<bool>()) {
        let none: crate::catalog::EnvLookup = Arc::new(|_: &str| None);
        let catalog = Catalog::from_config(&Config::default(), &none).unwrap();
        let who = principal(restricted.then(|| vec!["sentiment"]));
        for text in [raw, q] {
            let Ok(pairs) = QueryPairs::parse(&text) else { continue };
            match apis::select(&catalog, &who, &pairs) {
                Ok((page, _)) => {
                    prop_assert!(page.len() <= 100);
                    prop_assert!(!restricted || page.iter().all(|e| e.spec.slug == "sentiment"));
                }
                Err(e) => prop_assert_eq!(e.status.as_u16(), 400),
            }
        }
    }

    #[test]
    fn cursors_never_panic_and_round_trip(raw in any::<String>(), ms in 0u64..(1 << 48), desc in any::<bool>(), slug in "[a-z0-9_-]{1,64}") {
        let _ = (cursor::task(&raw), cursor::api(&raw));
        let id = TaskId::floor(Timestamp::from_unix_ms(ms as i64));
        let made = cursor::after_task(desc, id);
        prop_assert_eq!(cursor::task(&made), Some((desc, id)));
        prop_assert!(matches(cursor::TASKS_PATTERN, &made));
        let slug = ApiSlug::parse(&slug).unwrap();
        let made = cursor::after_api(&slug);
        prop_assert_eq!(cursor::api(&made), Some(slug));
        prop_assert!(matches(cursor::APIS_PATTERN, &made));
    }

    /// Every string the documented patterns admit is a cursor the server
    /// takes: the OpenAPI document promises exactly that.
    #[test]
    fn every_documented_cursor_is_accepted(tasks in "(desc|asc)_[0-7][0-9A-HJKMNP-TV-Z]{25}", apis in "asc_[a-z0-9_-]{1,64}") {
        prop_assert!(cursor::task(&tasks).is_some());
        prop_assert!(cursor::api(&apis).is_some());
    }

    #[test]
    fn call_body_parts_never_panic(value in json()) {
        let _ = crate::service::calls::check_sandbox(value.clone());
        if let Value::Object(m) = value {
            let _ = crate::service::calls::check_metadata(m);
        }
    }
}
