//! The audit log: every audited change appends its event in its own
//! transaction, the events form one chain, verification finds an edited or
//! deleted event, and retention keeps the rest verifiable.

use std::sync::Arc;

use sqlx::{AssertSqlSafe, Connection, PgConnection, SqliteConnection};
use taskgate_core::{
    AccountStatus, ActorType, AuditAction, AuditActor, AuditContext, AuditEvent, AuditTarget,
    Email, Mode, PlanName, Role, Timestamp, UserId, UserStatus, WebhookEndpointId, WebhookEvents,
    WebhookSecret,
};
use taskgate_store::{
    AccountUpdate, AuditQuery, Store, UserRecord, WebhookEndpoint, WebhookEndpointUpdate,
};

use crate::fixtures::{T0, at, by, hash_of, key, new_account, new_key};

fn all() -> AuditQuery {
    AuditQuery {
        limit: 1000,
        ..Default::default()
    }
}

async fn actions(store: &dyn Store, q: &AuditQuery) -> Vec<AuditAction> {
    let mut events = store.list_audit(q).await.expect("list audit");
    events.reverse();
    events.into_iter().map(|e| e.action).collect()
}

fn user(account: taskgate_core::AccountId, email: &str) -> UserRecord {
    UserRecord {
        id: UserId::new(),
        account_id: account,
        email: Email::normalize(email).unwrap(),
        role: Role::Owner,
        status: UserStatus::Active,
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$SECRET-PASSWORD-HASH".into(),
        created_at: at(T0),
        last_sign_in_at: None,
    }
}

fn endpoint(account: taskgate_core::AccountId, secret: &WebhookSecret) -> WebhookEndpoint {
    WebhookEndpoint {
        id: WebhookEndpointId::new(),
        account_id: account,
        mode: Mode::Live,
        url: "https://example.com/hook".into(),
        events: WebhookEvents::DEFAULT,
        description: None,
        disabled: None,
        secret: secret.clone(),
        previous_secret: None,
        previous_until: None,
        failing_since: None,
        created_at: at(T0),
    }
}

pub async fn every_change_appends_one_chained_event(store: Arc<dyn Store>) {
    use AuditAction::*;
    let s = &*store;
    assert!(s.list_audit(&all()).await.unwrap().is_empty());
    let v = s.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (0, None), "an empty chain is whole");

    let a = new_account(s, "acct_audit").await;
    let update = |plan: &str| AccountUpdate {
        plan: Some(PlanName::parse(plan).unwrap()),
        status: Some(AccountStatus::Active),
        monthly_spend_limit_micros: Some(Some(5_000_000)),
        max_monthly_spend_limit_micros: None,
    };
    s.update_account(a.id, &update("pro"), &by()).await.unwrap();
    // The same values again change nothing: no event.
    s.update_account(a.id, &update("pro"), &by()).await.unwrap();

    let k = new_key(s, key(a.id)).await;
    s.revoke_key(k.id, at(T0 + 5), &by()).await.unwrap();
    s.revoke_key(k.id, at(T0 + 6), &by()).await.unwrap();
    let old = new_key(s, key(a.id)).await;
    let new = key(a.id);
    s.roll_key(old.id, &new, &hash_of(&new), at(T0 + 10), &by())
        .await
        .unwrap();

    let u = user(a.id, "audited@example.com");
    s.create_user(&u, &by()).await.unwrap();
    s.set_user_status(u.id, UserStatus::Disabled, &by())
        .await
        .unwrap();
    s.set_user_status(u.id, UserStatus::Disabled, &by())
        .await
        .unwrap();
    s.set_user_status(u.id, UserStatus::Active, &by())
        .await
        .unwrap();
    s.set_password(u.id, "$argon2id$NEW-HASH", &by())
        .await
        .unwrap();
    let as_user = AuditContext::new(
        AuditActor::user(u.id, &u.email),
        Some("192.0.2.7".into()),
        Some("Mozilla/5.0"),
    );
    s.set_password(u.id, "$argon2id$OWN-HASH", &as_user)
        .await
        .unwrap();
    s.record_sign_in(u.id, at(T0 + 20), &as_user).await.unwrap();
    s.record_audit(&as_user.entry(
        UserSignInFailed,
        Some(a.id),
        AuditTarget::user(u.id),
        Default::default(),
    ))
    .await
    .unwrap();

    let secret = WebhookSecret::generate();
    let e = endpoint(a.id, &secret);
    s.create_endpoint(&e, &by()).await.unwrap();
    let change = WebhookEndpointUpdate {
        url: None,
        events: None,
        description: Some(Some("ops".into())),
        enabled: Some(false),
    };
    s.update_endpoint(a.id, Mode::Live, e.id, &change, &by())
        .await
        .unwrap();
    s.update_endpoint(a.id, Mode::Live, e.id, &change, &by())
        .await
        .unwrap();
    let rotated = WebhookSecret::generate();
    s.rotate_endpoint_secret(a.id, Mode::Live, e.id, &rotated, at(T0 + 30), &by())
        .await
        .unwrap();
    s.delete_endpoint(a.id, Mode::Live, e.id, at(T0 + 31), &by())
        .await
        .unwrap();
    let signing = WebhookSecret::generate();
    s.rotate_signing_secret(a.id, Mode::Test, &signing, at(T0 + 40), at(T0 + 32), &by())
        .await
        .unwrap();

    assert_eq!(
        actions(s, &all()).await,
        vec![
            AccountCreated,
            AccountUpdated,
            KeyCreated,
            KeyRevoked,
            KeyCreated,
            KeyRolled,
            UserCreated,
            UserDisabled,
            UserEnabled,
            UserPasswordReset,
            UserPasswordChanged,
            UserSignedIn,
            UserSignInFailed,
            WebhookEndpointCreated,
            WebhookEndpointUpdated,
            WebhookEndpointSecretRotated,
            WebhookEndpointDeleted,
            SigningSecretRotated,
        ]
    );
    let events = s.list_audit(&all()).await.unwrap();
    let v = s.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (events.len() as u64, None));

    // What the events say.
    let find = |action| events.iter().find(|e| e.action == action).unwrap();
    let updated = find(AccountUpdated);
    assert_eq!(updated.account_id, Some(a.id));
    assert_eq!(updated.target, AuditTarget::account(a.id));
    assert_eq!(updated.actor.kind, ActorType::Operator);
    assert_eq!(updated.actor.id, "conformance");
    assert_eq!(
        serde_json::to_value(&updated.changes).unwrap(),
        serde_json::json!({
            "plan": ["starter", "pro"],
            "monthly_spend_limit_micros": [25_000_000, 5_000_000],
        })
    );
    let rolled = find(KeyRolled);
    assert_eq!(rolled.target, AuditTarget::key(old.id));
    assert_eq!(rolled.changes["replaced_by"][1], new.id.to_string());
    let own = find(UserPasswordChanged);
    assert_eq!(own.ip.as_deref(), Some("192.0.2.7"));
    assert_eq!(own.user_agent.as_deref(), Some("Mozilla/5.0"));
    assert_eq!(own.actor.email, Some(u.email.clone()));
    let disabled = find(WebhookEndpointUpdated);
    assert_eq!(disabled.changes["disabled"][1], "owner");
    assert_eq!(
        find(SigningSecretRotated).target,
        AuditTarget::signing_secret(Mode::Test)
    );
    for (i, e) in events.iter().enumerate() {
        assert!(e.id.to_string().starts_with("aud_"));
        assert_eq!(e.hash.len(), 64);
        // Newest first; each sealed to the one before it.
        if let Some(older) = events.get(i + 1) {
            assert_eq!(e.seal(&older.hash), e.hash);
        }
    }

    // No secret, no hash of one, anywhere in the log.
    let text = serde_json::to_string(&events).unwrap();
    for secret in [
        hash_of(&k),
        hash_of(&new),
        u.password_hash.clone(),
        "NEW-HASH".into(),
        "OWN-HASH".into(),
        secret.expose(),
        rotated.expose(),
        signing.expose(),
        "whsec_".into(),
        "argon2".into(),
    ] {
        assert!(!text.contains(&secret), "{secret} is in the audit log");
    }
}

pub async fn a_change_that_fails_writes_no_event(store: Arc<dyn Store>) {
    let s = &*store;
    let a = new_account(s, "acct_audit_fail").await;
    let u = user(a.id, "dup@example.com");
    s.create_user(&u, &by()).await.unwrap();
    let again = UserRecord {
        id: UserId::new(),
        ..u.clone()
    };
    assert!(s.create_user(&again, &by()).await.is_err());
    let missing = taskgate_core::KeyId::new();
    assert!(
        s.revoke_key(missing, at(T0), &by())
            .await
            .unwrap()
            .is_none()
    );
    let dup = a.clone();
    assert!(s.create_account(&dup, &by()).await.is_err());
    let got = actions(s, &all()).await;
    assert_eq!(
        got,
        vec![AuditAction::AccountCreated, AuditAction::UserCreated]
    );
    assert_eq!(s.verify_audit().await.unwrap().broken, None);
}

pub async fn lists_filter_by_account_action_and_time(store: Arc<dyn Store>) {
    let s = &*store;
    let a = new_account(s, "acct_audit_a").await;
    let b = new_account(s, "acct_audit_b").await;
    new_key(s, key(a.id)).await;
    new_key(s, key(b.id)).await;
    let q = |f: fn(&mut AuditQuery)| {
        let mut q = all();
        f(&mut q);
        q
    };
    let mine = s
        .list_audit(&AuditQuery {
            account_id: Some(a.id),
            ..all()
        })
        .await
        .unwrap();
    assert_eq!(mine.len(), 2);
    assert!(mine.iter().all(|e| e.account_id == Some(a.id)));
    let keys = s
        .list_audit(&q(|q| q.action = Some(AuditAction::KeyCreated)))
        .await
        .unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].account_id, Some(b.id), "newest first");
    let future = s
        .list_audit(&AuditQuery {
            since: Some(Timestamp::now().plus_ms(60_000)),
            ..all()
        })
        .await
        .unwrap();
    assert!(future.is_empty());
    let page = s
        .list_audit(&AuditQuery { limit: 2, ..all() })
        .await
        .unwrap();
    assert_eq!(page.len(), 2);
    let rest = s
        .list_audit(&AuditQuery {
            before: Some(page[1].id),
            ..all()
        })
        .await
        .unwrap();
    assert_eq!(rest.len(), 2);
    assert!(rest.iter().all(|e| !page.contains(e)));
}

/// Concurrent changes still make one linear chain.
pub async fn concurrent_appends_make_one_chain(store: Arc<dyn Store>) {
    let id = new_account(&*store, "acct_audit_many").await.id;
    let mut joins = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        joins.push(tokio::spawn(async move {
            for _ in 0..5 {
                new_key(&*store, key(id)).await;
            }
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    let v = store.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (21, None));
}

pub async fn retention_keeps_the_rest_verifiable(store: Arc<dyn Store>) {
    let s = &*store;
    let a = new_account(s, "acct_audit_old").await;
    new_key(s, key(a.id)).await;
    let events = s.list_audit(&all()).await.unwrap();
    let cut = Timestamp::now().plus_ms(1);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    new_key(s, key(a.id)).await;
    assert_eq!(s.purge_audit(cut).await.unwrap(), 2);
    assert_eq!(s.purge_audit(cut).await.unwrap(), 0);
    let left = s.list_audit(&all()).await.unwrap();
    assert_eq!(left.len(), 1);
    let v = s.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (1, None));
    assert_eq!(v.checkpoint.hash, events[0].hash, "the newest deleted");
    assert_eq!(v.checkpoint.at, Some(events[0].at));
    // Everything deleted: the chain is still whole, and goes on.
    assert_eq!(s.purge_audit(Timestamp::now().plus_ms(1)).await.unwrap(), 1);
    let v = s.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (0, None));
    new_key(s, key(a.id)).await;
    let v = s.verify_audit().await.unwrap();
    assert_eq!((v.checked, v.broken), (1, None));
}

/// Runs one statement on the store's database, beside the store.
async fn raw(url: &str, sql: String) {
    if url.starts_with("sqlite:") {
        let mut conn = SqliteConnection::connect(url).await.expect("open sqlite");
        sqlx::query(AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .expect("raw statement");
    } else {
        let mut conn = PgConnection::connect(url).await.expect("open postgres");
        sqlx::query(AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .expect("raw statement");
    }
}

async fn three_events(s: &dyn Store) -> Vec<AuditEvent> {
    let a = new_account(s, "acct_audit_tamper").await;
    new_key(s, key(a.id)).await;
    let mut test = key(a.id);
    test.mode = Mode::Test;
    new_key(s, test).await;
    let mut events = s.list_audit(&all()).await.unwrap();
    events.reverse();
    assert_eq!(events.len(), 3);
    events
}

pub async fn verify_names_an_edited_event(store: Arc<dyn Store>, url: String) {
    let events = three_events(&*store).await;
    raw(
        &url,
        format!(
            "UPDATE audit_events SET changes = REPLACE(changes, 'live', 'test') WHERE id = '{}'",
            events[1].id
        ),
    )
    .await;
    let v = store.verify_audit().await.unwrap();
    let broken = v.broken.expect("an edited event breaks the chain");
    assert_eq!(broken.id, Some(events[1].id.to_string()));
    assert_eq!(v.checked, 2);

    // Its hash recomputed too: the next one no longer follows.
    let forged = {
        let mut e = store.list_audit(&all()).await.unwrap()[1].clone();
        assert_eq!(e.id, events[1].id);
        e.hash = e.seal(&events[0].hash);
        e.hash
    };
    raw(
        &url,
        format!(
            "UPDATE audit_events SET hash = '{forged}' WHERE id = '{}'",
            events[1].id
        ),
    )
    .await;
    let broken = store.verify_audit().await.unwrap().broken.unwrap();
    assert_eq!(broken.id, Some(events[2].id.to_string()));
}

pub async fn verify_names_the_event_after_a_deleted_one(store: Arc<dyn Store>, url: String) {
    let events = three_events(&*store).await;
    raw(
        &url,
        format!("DELETE FROM audit_events WHERE id = '{}'", events[1].id),
    )
    .await;
    let broken = store.verify_audit().await.unwrap().broken.unwrap();
    assert_eq!(broken.id, Some(events[2].id.to_string()));

    // The last one deleted: the head no longer matches.
    raw(
        &url,
        format!("DELETE FROM audit_events WHERE id = '{}'", events[2].id),
    )
    .await;
    let broken = store.verify_audit().await.unwrap().broken.unwrap();
    assert_eq!(broken.id, None);
    assert!(
        broken.reason.contains(&events[0].id.to_string()),
        "{}",
        broken.reason
    );
}

pub async fn verify_names_an_event_that_no_longer_decodes(store: Arc<dyn Store>, url: String) {
    let events = three_events(&*store).await;
    raw(
        &url,
        format!(
            "UPDATE audit_events SET action = 'key.eaten' WHERE id = '{}'",
            events[0].id
        ),
    )
    .await;
    let broken = store.verify_audit().await.unwrap().broken.unwrap();
    assert_eq!(broken.id, Some(events[0].id.to_string()));
}
