//! §2 Authentication over HTTP: the header, the key kinds and their states,
//! scopes and `allowed_apis`, the order of checks, modes and accounts kept
//! apart, rolling, `last_used_at`, failed-authentication limits and secrets.

use std::time::{Duration, Instant};

use crate::ops::admin;
use reqwest::Method;
use serde_json::{Value, json};
use taskgate_core::key::hash_key;
use taskgate_core::{ApiKeySecret, KeyType};

use crate::utils::{Backend, Resp, TestApp, TestClient, both, sentiment};

/// The contract's bound for an operator's change to take effect.
const PROPAGATION: Duration = Duration::from_secs(5);

/// GET `path` with a raw `Authorization` header value.
async fn get_with_authorization(app: &TestApp, path: &str, value: &str) -> Resp {
    let c = app.anonymous();
    c.send(c.request(Method::GET, path).header("authorization", value))
        .await
}

/// GET `path` once the contract's 5 s have passed on the server's clock
/// since a change: it answers `status` by then.
async fn after_propagation(app: &TestApp, c: &TestClient, path: &str, status: u16) -> Resp {
    app.clock.advance(PROPAGATION);
    let r = c.get(path).await;
    assert_eq!(
        r.status.as_u16(),
        status,
        "GET {path} still answers {} after {PROPAGATION:?}: {}",
        r.status,
        r.text
    );
    r
}

fn secret(key: &Value) -> String {
    key["secret"]
        .as_str()
        .expect("a new key shows its secret")
        .to_owned()
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

async fn task_ids(c: &TestClient) -> Vec<String> {
    let r = c.get("tasks").await.expect(200);
    r.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect()
}

async fn keys_of(app: &TestApp, account: &str) -> Vec<Value> {
    admin::list_keys(&*app.store, account)
        .await
        .expect("list keys")
        .as_array()
        .unwrap()
        .clone()
}

async fn key_by_id(app: &TestApp, account: &str, key_id: &str) -> Value {
    keys_of(app, account)
        .await
        .into_iter()
        .find(|k| k["id"] == json!(key_id))
        .expect("the key is listed")
}

async fn keys_have_the_contract_format(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    for (t, prefix) in [
        (KeyType::Live, "tg_"),
        (KeyType::Test, "tg_test_"),
        (KeyType::Restricted, "tg_restrict_"),
    ] {
        let scopes: Option<&[&str]> = (t == KeyType::Restricted).then_some(&["apis:read"]);
        let k = app
            .create_key_with(&app.account_id, t, scopes, None, None)
            .await;
        let s = secret(&k);
        let rest = s.strip_prefix(prefix).unwrap();
        assert!(rest.len() >= 36, "{s}");
        assert!(rest.bytes().all(|b| b.is_ascii_alphanumeric()), "{s}");
        assert_eq!(k["hint"], json!(format!("{prefix}…{}", &s[s.len() - 4..])));
        assert_eq!(k["type"], json!(t.as_str()));
        assert_eq!(
            k["mode"],
            json!(if t == KeyType::Test { "test" } else { "live" })
        );
        assert!(id(&k).starts_with("key_"));
        for f in [
            "name",
            "scopes",
            "allowed_apis",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
        ] {
            assert!(k.get(f).is_some(), "key object lacks {f}: {k}");
        }
        app.client(&s).get("apis").await.expect(200);
    }
    app.stop().await;
}
both!(keys_have_the_contract_format);

async fn missing_and_malformed_authorization_are_401(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let r = app
        .anonymous()
        .get("apis")
        .await
        .expect_error(401, "missing_authorization");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    app.anonymous()
        .call(sentiment("x"))
        .await
        .expect_error(401, "missing_authorization");
    let live = app.live.clone();
    for value in [
        "Basic xyz".to_owned(),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        "Token abc".to_owned(),
        format!("Basic {live}"),
        live.clone(),
        format!("Bearer {live} extra"),
    ] {
        let r = get_with_authorization(&app, "apis", &value).await;
        r.expect_error(401, "malformed_authorization");
    }
    // The scheme is case-insensitive (RFC 9110); a token that is no key at all
    // is an invalid key, not a malformed header.
    get_with_authorization(&app, "apis", &format!("bearer {live}"))
        .await
        .expect(200);
    get_with_authorization(&app, "apis", "Bearer xyz")
        .await
        .expect_error(401, "invalid_api_key");
    app.stop().await;
}
both!(missing_and_malformed_authorization_are_401);

async fn invalid_keys_are_indistinguishable(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let live = app.live.clone();
    let mut bad_checksum = live.clone().into_bytes();
    let last = bad_checksum.len() - 1;
    bad_checksum[last] = if bad_checksum[last] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let mut typo = live.clone().into_bytes();
    typo[5] = if typo[5] == b'a' { b'b' } else { b'a' };
    let unknown = ApiKeySecret::generate(KeyType::Live).expose().to_owned();
    let revoked = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, None)
        .await;
    admin::revoke_key(&*app.store, &id(&revoked))
        .await
        .expect("revoke");
    let tokens = [
        String::from_utf8(bad_checksum).unwrap(),
        String::from_utf8(typo).unwrap(),
        unknown,
        secret(&revoked),
        // A real key's secret under another type's prefix: checksum fine, no such key.
        format!("tg_test_{}", live.strip_prefix("tg_").unwrap()),
        "tg_short".to_owned(),
    ];
    let mut first: Option<Resp> = None;
    for token in &tokens {
        let r = app
            .client(token)
            .get("tasks")
            .await
            .expect_error(401, "invalid_api_key");
        assert!(
            !r.text.contains(token.as_str()),
            "the presented key is echoed: {}",
            r.text
        );
        if let Some(f) = &first {
            assert_eq!(r.body["error"], f.body["error"], "{token}");
            assert_eq!(r.body["data"], f.body["data"]);
            assert_eq!(r.header("www-authenticate"), f.header("www-authenticate"));
            assert_eq!(r.header("content-type"), f.header("content-type"));
            assert_ne!(r.body["meta"]["request_id"], f.body["meta"]["request_id"]);
        } else {
            first = Some(r);
        }
    }
    // The same on a write.
    let r = app
        .client(&tokens[3])
        .call(sentiment("x"))
        .await
        .expect_error(401, "invalid_api_key");
    assert_eq!(r.body["error"], first.unwrap().body["error"]);
    app.stop().await;
}
both!(invalid_keys_are_indistinguishable);

async fn revoking_a_key_in_use_takes_effect_within_5s(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let k = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, None)
        .await;
    let c = app.client(&secret(&k));
    c.get("apis").await.expect(200);
    let shown = admin::revoke_key(&*app.store, &id(&k))
        .await
        .expect("revoke");
    assert!(shown["revoked_at"].is_string(), "{shown}");
    after_propagation(&app, &c, "apis", 401)
        .await
        .expect_error(401, "invalid_api_key");
    // Other keys of the account are untouched.
    app.client(&app.live).get("apis").await.expect(200);
    app.stop().await;
}
both!(revoking_a_key_in_use_takes_effect_within_5s);

async fn expired_key_is_api_key_expired(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let k = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, Some(1_500))
        .await;
    assert!(k["expires_at"].is_string(), "{k}");
    let c = app.client(&secret(&k));
    c.get("apis").await.expect(200);
    // Past its expiry (and the key cache's lifetime) on the server's clock.
    app.clock.advance(Duration::from_millis(2_100));
    let r = c.get("apis").await.expect_error(401, "api_key_expired");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    c.call(sentiment("x"))
        .await
        .expect_error(401, "api_key_expired");
    app.stop().await;
}
both!(expired_key_is_api_key_expired);

async fn suspension_takes_effect_within_5s_and_reactivation_restores(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let (live, test) = (app.client(&app.live), app.client(&app.test));
    live.get("apis").await.expect(200);
    test.get("tasks").await.expect(200);
    admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        None,
        Some("suspended"),
        None,
    )
    .await
    .expect("suspend");
    after_propagation(&app, &live, "apis", 403)
        .await
        .expect_error(403, "account_suspended");
    after_propagation(&app, &test, "tasks", 403)
        .await
        .expect_error(403, "account_suspended");
    live.call(sentiment("x"))
        .await
        .expect_error(403, "account_suspended");
    // Nothing was created while suspended.
    admin::update_account(
        &*app.store,
        &app.config,
        &app.account_id,
        None,
        Some("active"),
        None,
    )
    .await
    .expect("reactivate");
    after_propagation(&app, &live, "tasks", 200).await;
    assert!(task_ids(&live).await.is_empty());
    live.call(sentiment("x")).await.expect(200);
    after_propagation(&app, &test, "apis", 200).await;
    app.stop().await;
}
both!(suspension_takes_effect_within_5s_and_reactivation_restores);

async fn scopes_limit_what_a_restricted_key_may_do(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let task = app
        .client(&app.live)
        .call(sentiment("hello"))
        .await
        .expect(200);
    let task_id = id(task.data());
    let ro = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&["apis:read"]),
            None,
            None,
        )
        .await;
    assert_eq!(ro["type"], json!("restricted"));
    assert_eq!(ro["mode"], json!("live"));
    assert_eq!(ro["scopes"], json!(["apis:read"]));
    assert!(secret(&ro).starts_with("tg_restrict_"));
    let ro = app.client(&secret(&ro));
    ro.get("apis").await.expect(200);
    ro.get("apis/sentiment").await.expect(200);
    for path in [
        "tasks".to_owned(),
        format!("tasks/{task_id}"),
        format!("call/{task_id}"),
    ] {
        let r = ro
            .get(&path)
            .await
            .expect_error(403, "insufficient_permissions");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("tasks:read"),
            "{}",
            r.text
        );
    }
    ro.call(sentiment("x"))
        .await
        .expect_error(403, "insufficient_permissions");
    ro.post(&format!("tasks/{task_id}/cancel"), json!({}))
        .await
        .expect_error(403, "insufficient_permissions");

    let reader = app
        .restricted_client(&app.account_id, Some(&["tasks:read"]), None)
        .await;
    reader
        .get("apis")
        .await
        .expect_error(403, "insufficient_permissions");
    reader
        .get("apis/sentiment")
        .await
        .expect_error(403, "insufficient_permissions");
    assert_eq!(task_ids(&reader).await, vec![task_id.clone()]);
    reader.get(&format!("call/{task_id}")).await.expect(200);
    reader.get(&format!("tasks/{task_id}")).await.expect(200);
    reader
        .call(sentiment("x"))
        .await
        .expect_error(403, "insufficient_permissions");

    let writer = app
        .restricted_client(&app.account_id, Some(&["tasks:write"]), None)
        .await;
    let made = writer.call(sentiment("x")).await.expect(200);
    assert_eq!(made.data()["mode"], json!("live"));
    writer
        .get(&format!("call/{}", id(made.data())))
        .await
        .expect_error(403, "insufficient_permissions");
    writer
        .get("apis")
        .await
        .expect_error(403, "insufficient_permissions");
    // A finished task is not cancellable: the scope passed, the request itself is refused.
    writer
        .post(&format!("tasks/{task_id}/cancel"), json!({}))
        .await
        .expect_error(409, "task_not_cancellable");
    app.stop().await;
}
both!(scopes_limit_what_a_restricted_key_may_do);

async fn allowed_apis_limit_calls_and_the_catalog(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let all = ["apis:read", "tasks:read", "tasks:write"];
    let k = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&all),
            Some(&["sentiment"]),
            None,
        )
        .await;
    assert_eq!(k["allowed_apis"], json!(["sentiment"]));
    let c = app.client(&secret(&k));
    c.call(sentiment("I love this")).await.expect(200);
    let other = json!({ "api": "language-detect", "input": { "text": "bonjour tout le monde" } });
    app.client(&app.live).call(other.clone()).await.expect(200);
    c.call(other)
        .await
        .expect_error(403, "insufficient_permissions");
    // Even a slug that does not exist: the key may not learn what the catalog holds.
    c.call(json!({ "api": "no-such-api", "input": { "text": "x" } }))
        .await
        .expect_error(403, "insufficient_permissions");
    c.get("apis/language-detect")
        .await
        .expect_error(403, "insufficient_permissions");
    c.get("apis/no-such-api")
        .await
        .expect_error(403, "insufficient_permissions");
    c.get("apis/sentiment").await.expect(200);
    let listed = c.get("apis").await.expect(200);
    let slugs: Vec<&str> = listed.data()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, vec!["sentiment"]);
    let everything = app.client(&app.live).get("apis").await.expect(200);
    assert!(everything.data()["items"].as_array().unwrap().len() > 1);
    app.stop().await;
}
both!(allowed_apis_limit_calls_and_the_catalog);

async fn checks_run_in_the_contract_order(backend: Backend) {
    let Some(app) = TestApp::builder(backend).plan("tiny").start().await else {
        return;
    };
    let acct = app.account_id.clone();
    let ro = app
        .restricted_client(&acct, Some(&["apis:read"]), None)
        .await;
    let only = app
        .restricted_client(
            &acct,
            Some(&["apis:read", "tasks:write"]),
            Some(&["sentiment"]),
        )
        .await;
    let expired = app
        .create_key_with(&acct, KeyType::Live, None, None, Some(1))
        .await;
    let expired = app.client(&secret(&expired));
    let live = app.client(&app.live);
    // Past the key's 1 ms of life on the server's clock.
    app.clock.advance(Duration::from_millis(5));

    // 1 before everything: no key, bad key, expired key, whatever the request.
    let anon = app.anonymous();
    anon.post_raw("call", "{not json")
        .await
        .expect_error(401, "missing_authorization");
    anon.get("tasks/garbage")
        .await
        .expect_error(401, "missing_authorization");
    anon.send(anon.request(Method::DELETE, "tasks"))
        .await
        .expect_error(401, "missing_authorization");
    app.client("tg_nope")
        .post_raw("call", "{not json")
        .await
        .expect_error(401, "invalid_api_key");
    expired
        .post_raw("call", "{not json")
        .await
        .expect_error(401, "api_key_expired");
    // 4 before 5: scope and allowed APIs before the request's own errors (these count: 3).
    ro.post_raw("call", "{not json")
        .await
        .expect_error(403, "insufficient_permissions");
    ro.get("tasks/garbage")
        .await
        .expect_error(403, "insufficient_permissions");
    only.call(json!({ "api": "no-such-api", "input": {} }))
        .await
        .expect_error(403, "insufficient_permissions");
    // 5: the request itself (these count too: 5 of 5).
    live.call(json!({ "api": "no-such-api", "input": {} }))
        .await
        .expect_error(404, "api_not_found");
    live.get("tasks/garbage")
        .await
        .expect_error(404, "task_not_found");
    // 3 before 4: the limit is reached, a key lacking the scope is told 429.
    ro.get("tasks")
        .await
        .expect_error(429, "rate_limit_exceeded");
    live.get("apis")
        .await
        .expect_error(429, "rate_limit_exceeded");
    // 1 before 3.
    expired
        .get("apis")
        .await
        .expect_error(401, "api_key_expired");
    anon.get("apis")
        .await
        .expect_error(401, "missing_authorization");
    // 2 before 3 and 4: a suspended account is told so, whatever the key lacks.
    admin::update_account(
        &*app.store,
        &app.config,
        &acct,
        None,
        Some("suspended"),
        None,
    )
    .await
    .expect("suspend");
    after_propagation(&app, &ro, "tasks", 403)
        .await
        .expect_error(403, "account_suspended");
    after_propagation(&app, &live, "apis", 403)
        .await
        .expect_error(403, "account_suspended");
    ro.post_raw("call", "{not json")
        .await
        .expect_error(403, "account_suspended");
    // 1 before 2.
    expired
        .get("apis")
        .await
        .expect_error(401, "api_key_expired");
    app.stop().await;
}
both!(checks_run_in_the_contract_order);

async fn test_and_live_data_are_separate(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let (live, test) = (app.client(&app.live), app.client(&app.test));
    let all = ["apis:read", "tasks:read", "tasks:write"];
    let restricted = app
        .create_key_with(&app.account_id, KeyType::Restricted, Some(&all), None, None)
        .await;
    let restricted = app.client(&secret(&restricted));
    let l = id(live.call(sentiment("live one")).await.expect(200).data());
    let running = test
        .call(json!({ "api": "sentiment", "input": { "text": "slow" }, "mode": "async", "sandbox": { "delay_ms": 5000 } }))
        .await
        .expect(202);
    let t = id(running.data());
    assert_eq!(running.data()["mode"], json!("test"));

    for (c, other) in [(&test, &l), (&live, &t), (&restricted, &t)] {
        c.get(&format!("call/{other}"))
            .await
            .expect_error(404, "task_not_found");
        c.get(&format!("tasks/{other}"))
            .await
            .expect_error(404, "task_not_found");
        c.post(&format!("tasks/{other}/cancel"), json!({}))
            .await
            .expect_error(404, "task_not_found");
    }
    // The cancel from the wrong mode changed nothing.
    let still = test.get(&format!("call/{t}")).await.expect(200);
    assert!(
        ["queued", "running"].contains(&still.data()["status"].as_str().unwrap()),
        "{}",
        still.text
    );

    assert_eq!(task_ids(&live).await, vec![l.clone()]);
    assert_eq!(task_ids(&restricted).await, vec![l.clone()]);
    assert_eq!(task_ids(&test).await, vec![t.clone()]);
    restricted.get(&format!("tasks/{l}")).await.expect(200);
    let r = test
        .post(&format!("tasks/{t}/cancel"), json!({}))
        .await
        .expect(200);
    assert_eq!(r.data()["status"], json!("cancelled"));
    app.stop().await;
}
both!(test_and_live_data_are_separate);

async fn accounts_are_isolated(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let other = app.create_account("enterprise").await;
    let (a_live, a_test) = (app.client(&app.live), app.client(&app.test));
    let b_live = app.client(&app.create_key(&other, KeyType::Live).await);
    let b_test = app.client(&app.create_key(&other, KeyType::Test).await);
    let a1 = id(a_live.call(sentiment("mine")).await.expect(200).data());
    let a2 = id(a_test.call(sentiment("mine too")).await.expect(200).data());
    let b1 = id(b_live.call(sentiment("theirs")).await.expect(200).data());
    for (c, foreign) in [
        (&b_live, &a1),
        (&b_test, &a2),
        (&b_live, &a2),
        (&a_live, &b1),
        (&a_test, &b1),
    ] {
        let r = c
            .get(&format!("call/{foreign}"))
            .await
            .expect_error(404, "task_not_found");
        assert!(
            !r.text.contains("mine") && !r.text.contains("theirs"),
            "{}",
            r.text
        );
        c.get(&format!("tasks/{foreign}"))
            .await
            .expect_error(404, "task_not_found");
        c.post(&format!("tasks/{foreign}/cancel"), json!({}))
            .await
            .expect_error(404, "task_not_found");
    }
    assert_eq!(task_ids(&a_live).await, vec![a1]);
    assert_eq!(task_ids(&a_test).await, vec![a2]);
    assert_eq!(task_ids(&b_live).await, vec![b1]);
    assert!(task_ids(&b_test).await.is_empty());
    app.stop().await;
}
both!(accounts_are_isolated);

async fn rolling_without_grace_stops_the_old_key(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let old = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, None)
        .await;
    let old_client = app.client(&secret(&old));
    old_client.get("apis").await.expect(200);
    let new = admin::roll_key(&*app.store, &id(&old), 0)
        .await
        .expect("roll");
    assert_eq!(new["rolled_from"], json!(id(&old)));
    assert_ne!(id(&new), id(&old));
    assert_eq!(new["type"], json!("live"));
    app.client(&secret(&new)).get("apis").await.expect(200);
    // Rolling sets the old key's expiry to now: it answers as an expired key
    // (the key existed and was valid; "expired" tells its owner what happened).
    after_propagation(&app, &old_client, "apis", 401)
        .await
        .expect_error(401, "api_key_expired");
    let listed = key_by_id(&app, &app.account_id, &id(&old)).await;
    assert!(listed["expires_at"].is_string(), "{listed}");
    // Once rolled, the old key cannot be rolled again.
    assert!(admin::roll_key(&*app.store, &id(&old), 0).await.is_err());
    app.stop().await;
}
both!(rolling_without_grace_stops_the_old_key);

async fn rolling_with_grace_keeps_both_keys(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let old = app
        .create_key_with(
            &app.account_id,
            KeyType::Restricted,
            Some(&["apis:read"]),
            Some(&["sentiment"]),
            None,
        )
        .await;
    let old_client = app.client(&secret(&old));
    old_client.get("apis").await.expect(200);
    let before = taskgate_core::Timestamp::now().unix_ms();
    let new = admin::roll_key(&*app.store, &id(&old), 3_600_000)
        .await
        .expect("roll");
    // The new key is like the old one.
    assert_eq!(new["type"], json!("restricted"));
    assert_eq!(new["scopes"], json!(["apis:read"]));
    assert_eq!(new["allowed_apis"], json!(["sentiment"]));
    assert_eq!(new["expires_at"], json!(null));
    let new_client = app.client(&secret(&new));
    for c in [&old_client, &new_client] {
        c.get("apis").await.expect(200);
        c.get("tasks")
            .await
            .expect_error(403, "insufficient_permissions");
    }
    // Both still work after the key cache has turned over.
    app.clock.advance(Duration::from_millis(2_100));
    old_client.get("apis").await.expect(200);
    new_client.get("apis").await.expect(200);
    let listed = key_by_id(&app, &app.account_id, &id(&old)).await;
    let expires = taskgate_core::Timestamp::parse_rfc3339(listed["expires_at"].as_str().unwrap())
        .unwrap()
        .unix_ms();
    assert!(
        (before + 3_600_000 - 5_000..=before + 3_600_000 + 60_000).contains(&expires),
        "{listed}"
    );
    app.stop().await;
}
both!(rolling_with_grace_keeps_both_keys);

async fn last_used_at_is_recorded(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let used = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, None)
        .await;
    let idle = app
        .create_key_with(&app.account_id, KeyType::Live, None, None, None)
        .await;
    assert_eq!(
        key_by_id(&app, &app.account_id, &id(&used)).await["last_used_at"],
        json!(null)
    );
    let before = taskgate_core::Timestamp::now().unix_ms();
    app.client(&secret(&used)).get("apis").await.expect(200);
    let started = Instant::now();
    let at = loop {
        let k = key_by_id(&app, &app.account_id, &id(&used)).await;
        if let Some(s) = k["last_used_at"].as_str() {
            break s.to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "last_used_at never set: {k}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(at.ends_with('Z') && at.len() == 24, "{at}");
    let ms = taskgate_core::Timestamp::parse_rfc3339(&at)
        .unwrap()
        .unix_ms();
    assert!(
        ms >= before - 1_000 && ms <= taskgate_core::Timestamp::now().unix_ms() + 1_000,
        "{at}"
    );
    assert_eq!(
        key_by_id(&app, &app.account_id, &id(&idle)).await["last_used_at"],
        json!(null)
    );
    app.stop().await;
}
both!(last_used_at_is_recorded);

async fn repeated_failed_authentications_are_rate_limited(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.auth_failures_per_minute = 5)
        .start()
        .await
    else {
        return;
    };
    let live = app.client(&app.live);
    app.anonymous()
        .get("apis")
        .await
        .expect_error(401, "missing_authorization");
    get_with_authorization(&app, "apis", "Basic xyz")
        .await
        .expect_error(401, "malformed_authorization");
    app.client("tg_nope")
        .get("apis")
        .await
        .expect_error(401, "invalid_api_key");
    app.client("tg_nope")
        .call(sentiment("x"))
        .await
        .expect_error(401, "invalid_api_key");
    // Successes neither count nor reset the count.
    live.get("apis").await.expect(200);
    app.client("tg_nope")
        .get("tasks")
        .await
        .expect_error(401, "invalid_api_key");
    // Five failures: the address is now refused, even with a valid key.
    let r = live
        .get("apis")
        .await
        .expect_error(429, "rate_limit_exceeded");
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(r.body["error"]["details"].is_array(), "{}", r.text);
    app.anonymous()
        .get("apis")
        .await
        .expect_error(429, "rate_limit_exceeded");
    app.client(&app.test)
        .call(sentiment("x"))
        .await
        .expect_error(429, "rate_limit_exceeded");
    // Paths outside /api/v1 that need no key are not affected.
    assert_eq!(app.anonymous().get("/healthz").await.status, 200);
    // A minute later on the server's clock, the address may try again.
    app.clock.advance(Duration::from_secs(60));
    live.get("apis").await.expect(200);
    app.stop().await;
}
both!(repeated_failed_authentications_are_rate_limited);

async fn secrets_never_appear_after_creation(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let all = ["apis:read", "tasks:read", "tasks:write"];
    let restricted = secret(
        &app.create_key_with(&app.account_id, KeyType::Restricted, Some(&all), None, None)
            .await,
    );
    let secrets = [app.live.clone(), app.test.clone(), restricted];
    let mut texts: Vec<String> = Vec::new();
    for s in &secrets {
        let c = app.client(s);
        let t = c.call(sentiment("secret check")).await.expect(200);
        let tid = id(t.data());
        for path in [
            format!("call/{tid}"),
            format!("tasks/{tid}"),
            "tasks".to_owned(),
            "apis".to_owned(),
        ] {
            texts.push(c.get(&path).await.expect(200).text);
        }
        texts.push(c.get("tasks/garbage").await.text);
        texts.push(c.call(json!({ "api": "sentiment" })).await.text);
        // A near miss of the key: the answer does not echo it.
        let near = format!("{}X", &s[..s.len() - 1]);
        texts.push(app.client(&near).get("apis").await.text);
        texts.push(
            get_with_authorization(&app, "apis", &format!("Basic {s}"))
                .await
                .text,
        );
    }
    texts.push(
        admin::list_keys(&*app.store, &app.account_id)
            .await
            .unwrap()
            .to_string(),
    );
    let revoked = keys_of(&app, &app.account_id)
        .await
        .into_iter()
        .find(|k| k["type"] == json!("restricted"))
        .unwrap();
    texts.push(
        admin::revoke_key(&*app.store, &id(&revoked))
            .await
            .unwrap()
            .to_string(),
    );
    let live_key = keys_of(&app, &app.account_id)
        .await
        .into_iter()
        .find(|k| k["type"] == json!("live"))
        .unwrap();
    let rolled = admin::roll_key(&*app.store, &id(&live_key), 0)
        .await
        .unwrap();
    texts.push(app.anonymous().get("/metrics").await.text);
    for s in &secrets {
        let random = &s[s.len() - 36..];
        let hash = hash_key(s);
        for text in &texts {
            assert!(!text.contains(random), "a secret leaked: {text}");
            assert!(!text.contains(&hash), "a key hash leaked: {text}");
        }
        assert!(
            !rolled.to_string().contains(random),
            "a roll shows the old secret"
        );
    }
    app.stop().await;
}
both!(secrets_never_appear_after_creation);
