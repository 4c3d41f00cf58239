//! The audit log through the real doors (issue 29): every change made at
//! the dashboard, the API and the operator's commands writes its event,
//! naming who and from where, on both stores; no secret is ever in it; the
//! chain verifies; the dashboard's Audit log shows owners their account's
//! events and admins everyone's.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ORIGIN, USER_AGENT};
use serde_json::json;
use taskgate_core::{ActorType, AuditAction, AuditEvent, KeyType};
use taskgate_server::service::audit;
use taskgate_store::AuditQuery;

use crate::dashboard::{PASSWORD, signed_in, user};
use crate::ops::users;
use crate::utils::{Backend, TestApp, both};

async fn events(app: &TestApp) -> Vec<AuditEvent> {
    let mut all = app
        .store
        .list_audit(&AuditQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    all.reverse();
    all
}

fn last(events: &[AuditEvent], action: AuditAction) -> &AuditEvent {
    events
        .iter()
        .rev()
        .find(|e| e.action == action)
        .unwrap_or_else(|| panic!("no {action} event in {events:#?}"))
}

async fn every_change_is_audited(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.webhooks.allow_private_networks = true)
        .start()
        .await
    else {
        return;
    };
    let mut secrets = vec![app.live.clone(), app.test.clone(), PASSWORD.to_owned()];

    // The operator's commands: the first start's account and keys, then a user.
    user(&app, &app.account_id, "owner@example.com", "owner").await;
    user(&app, &app.account_id, "root@example.com", "admin").await;
    let made = users::create_user(
        &*app.store,
        &app.account_id,
        "m@example.com",
        "member",
        None,
    )
    .await
    .unwrap();
    secrets.push(made["password"].as_str().unwrap_or_default().to_owned());
    let e = events(&app).await;
    assert_eq!(e[0].action, AuditAction::AccountCreated);
    assert_eq!(e[0].actor.kind, ActorType::Operator);
    let created = last(&e, AuditAction::UserCreated);
    assert_eq!(created.actor.kind, ActorType::Operator);
    assert!(created.actor.id.starts_with("cli"), "{:?}", created.actor);
    assert_eq!(created.changes["role"][1], "member");

    // A refused sign-in, with its address and user agent.
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/dashboard/sign-in", app.base))
        .header(ORIGIN, &app.base)
        .header(USER_AGENT, "audit-test/1.0")
        .form(&[
            ("email", "owner@example.com"),
            ("password", "guess 1234567"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let e = events(&app).await;
    let failed = last(&e, AuditAction::UserSignInFailed);
    assert_eq!(failed.ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(failed.user_agent.as_deref(), Some("audit-test/1.0"));
    assert_eq!(failed.changes["reason"][1], "wrong_password");
    assert_eq!(
        failed.actor.email.as_ref().map(|e| e.as_str()),
        Some("owner@example.com")
    );

    // The owner at the dashboard: keys, the spend limit, their password.
    let mut owner = signed_in(&app, "owner@example.com").await;
    let e = events(&app).await;
    let signed = last(&e, AuditAction::UserSignedIn);
    assert_eq!(signed.actor.kind, ActorType::User);
    assert_eq!(signed.ip.as_deref(), Some("127.0.0.1"));

    let csrf = owner.get("/dashboard/keys/new").await.csrf();
    let page = owner
        .post(
            "/dashboard/keys/new",
            &[
                ("csrf", &csrf),
                ("mode", "live"),
                ("name", "audited"),
                ("preset", "full"),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    secrets.push(page.secret());
    let key = last(&events(&app).await, AuditAction::KeyCreated).clone();
    assert_eq!(
        key.actor.email.as_ref().unwrap().as_str(),
        "owner@example.com"
    );
    assert_eq!(key.changes["name"][1], "audited");
    let key_id = key.target.id.clone();

    let path = format!("/dashboard/keys/{key_id}/roll");
    let csrf = owner.get(&path).await.csrf();
    let page = owner.post(&path, &[("csrf", &csrf), ("grace", "1h")]).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    secrets.push(page.secret());
    let path = format!("/dashboard/keys/{key_id}/revoke");
    let csrf = owner.get(&path).await.csrf();
    let r = owner.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);

    let csrf = owner.get("/dashboard/settings").await.csrf();
    let r = owner
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &csrf), ("spend_limit", "12")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);

    // Webhooks at the dashboard, then at the API with a key.
    let csrf = owner.get("/dashboard/webhooks/new").await.csrf();
    let r = owner
        .post(
            "/dashboard/webhooks/new",
            &[
                ("csrf", &csrf),
                ("mode", "live"),
                ("url", "http://127.0.0.1:9/hook"),
                ("event", "task.succeeded"),
                ("description", "ops"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let live = app.client(&app.live);
    let made = live
        .post(
            "webhook_endpoints",
            json!({ "url": "http://127.0.0.1:9/api" }),
        )
        .await
        .expect(201);
    let id = made.data()["id"].as_str().unwrap().to_owned();
    secrets.push(made.data()["secret"].as_str().unwrap().to_owned());
    let rotated = live
        .post(&format!("webhook_endpoints/{id}/rotate_secret"), json!({}))
        .await
        .expect(200);
    secrets.push(rotated.data()["secret"].as_str().unwrap().to_owned());
    live.request(reqwest::Method::DELETE, &format!("webhook_endpoints/{id}"))
        .send()
        .await
        .unwrap();
    let e = events(&app).await;
    let by_key = last(&e, AuditAction::WebhookEndpointSecretRotated);
    assert_eq!(by_key.actor.kind, ActorType::ApiKey);
    assert!(by_key.actor.id.starts_with("key_"));
    assert_eq!(by_key.ip.as_deref(), Some("127.0.0.1"));
    last(&e, AuditAction::WebhookEndpointDeleted);

    // The admin: accounts and users.
    let mut root = signed_in(&app, "root@example.com").await;
    let csrf = root.get("/dashboard/admin").await.csrf();
    let r = root
        .post(
            "/dashboard/admin/accounts",
            &[
                ("csrf", &csrf),
                ("name", "Globex"),
                ("plan", "pro"),
                ("spend_limit", ""),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let globex = last(&events(&app).await, AuditAction::AccountCreated).clone();
    assert_eq!(globex.changes["name"][1], "Globex");
    let path = format!("/dashboard/admin/accounts/{}", globex.target.id);
    let r = root
        .post(&path, &[("csrf", &csrf), ("status", "suspended")])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let member = last(&events(&app).await, AuditAction::UserCreated)
        .target
        .id
        .clone();
    let path = format!("/dashboard/admin/users/{member}");
    for action in ["disable", "enable"] {
        let r = root
            .post(&path, &[("csrf", &csrf), ("action", action)])
            .await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    }
    let r = root
        .post(&path, &[("csrf", &csrf), ("action", "reset-password")])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // The dashboard's Audit log: an owner sees their account's, an admin all.
    let page = owner.get("/dashboard/audit").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("key.rolled"));
    assert!(!page.text.contains("Globex"), "another account's event");
    let page = owner.get("/dashboard/audit?action=key.revoked").await;
    assert!(page.text.contains("key.revoked") && !page.text.contains("<code>key.rolled"));
    let page = root.get("/dashboard/audit").await;
    assert!(page.text.contains("Globex"));
    let page = root.get("/dashboard/audit?since=nope").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    // The owner's own password, last (it ends their sessions).
    let csrf = owner.get("/dashboard/password").await.csrf();
    let new = "a brand new passphrase 42";
    let r = owner
        .post(
            "/dashboard/password",
            &[
                ("csrf", &csrf),
                ("current", PASSWORD),
                ("new", new),
                ("confirm", new),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    secrets.push(new.to_owned());

    let e = events(&app).await;
    let acct: taskgate_core::AccountId = app.account_id.parse().unwrap();
    for (action, actor) in [
        (AuditAction::KeyRolled, "owner@example.com"),
        (AuditAction::KeyRevoked, "owner@example.com"),
        (AuditAction::AccountUpdated, "root@example.com"),
        (AuditAction::UserDisabled, "root@example.com"),
        (AuditAction::UserEnabled, "root@example.com"),
        (AuditAction::UserPasswordReset, "root@example.com"),
        (AuditAction::UserPasswordChanged, "owner@example.com"),
        (AuditAction::WebhookEndpointCreated, "owner@example.com"),
    ] {
        let found = e
            .iter()
            .find(|e| {
                e.action == action
                    && (e.actor.id == actor
                        || e.actor.email.as_ref().is_some_and(|m| m.as_str() == actor))
            })
            .unwrap_or_else(|| panic!("no {action} by {actor}"));
        assert!(found.id.to_string().starts_with("aud_"));
    }
    let limit = e
        .iter()
        .find(|e| e.action == AuditAction::AccountUpdated && e.account_id == Some(acct))
        .unwrap();
    assert_eq!(limit.changes["monthly_spend_limit_micros"][1], 12_000_000);

    // No secret anywhere in the stored log.
    let text = serde_json::to_string(&e).unwrap();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        assert!(!text.contains(secret.as_str()), "a secret is in the log");
    }
    assert!(!text.contains("argon2") && !text.contains("whsec_"));
    let v = app.store.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (e.len() as u64, None));

    app.stop().await;
}
both!(every_change_is_audited);

/// Members may not read the log; the navigation offers it to owners only.
async fn members_cannot_read_the_log(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "mem@example.com", "member").await;
    let mut member = signed_in(&app, "mem@example.com").await;
    let keys = member.get("/dashboard/keys").await;
    assert!(!keys.text.contains("/dashboard/audit"));
    assert_eq!(
        member.get("/dashboard/audit").await.status,
        StatusCode::FORBIDDEN
    );
    app.stop().await;
}
both!(members_cannot_read_the_log);

/// `audit_retention_days`' purge (what the housekeeping runs, with the
/// server's clock): events older than the retention go, the checkpoint
/// keeps what is left verifiable, and the chain goes on from it.
async fn retention_keeps_the_rest_verifiable(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let old = events(&app).await;
    assert!(!old.is_empty());
    let kept = |days| audit::purge(&*app.store, days, app.clock.now());
    assert_eq!(kept(0).await.unwrap(), 0, "0 keeps every event");
    assert_eq!(kept(1).await.unwrap(), 0, "nothing is a day old yet");
    app.clock.advance(Duration::from_secs(2 * 86_400));
    assert_eq!(kept(1).await.unwrap(), old.len() as u64);
    let v = app.store.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (0, None));
    assert_eq!(v.checkpoint.hash, old.last().unwrap().hash);
    app.create_key(&app.account_id, KeyType::Test).await;
    let v = app.store.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (1, None));
    app.stop().await;
}
both!(retention_keeps_the_rest_verifiable);
