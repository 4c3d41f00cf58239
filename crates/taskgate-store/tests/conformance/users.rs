//! Users and sessions: one user per email, disabling and new passwords end
//! sessions, sessions are found by their token's hash and purged when stale.

use std::sync::Arc;

use taskgate_core::{Email, Role, UserId, UserStatus};
use taskgate_store::{SessionRecord, Store, StoreError, UserRecord};

use crate::fixtures::{at, by, new_account};

fn user(account: &taskgate_store::Account, email: &str, role: Role) -> UserRecord {
    UserRecord {
        id: UserId::new(),
        account_id: account.id,
        email: Email::normalize(email).unwrap(),
        role,
        status: UserStatus::Active,
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned(),
        created_at: at(1_000),
        last_sign_in_at: None,
    }
}

fn session(user: &UserRecord, token_hash: &str, now: i64) -> SessionRecord {
    SessionRecord {
        token_hash: token_hash.to_owned(),
        user_id: user.id,
        csrf_token: format!("csrf-{token_hash}"),
        created_at: at(now),
        last_seen_at: at(now),
        expires_at: at(now + 1_000_000),
    }
}

pub async fn one_user_per_email(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let globex = new_account(&*store, "Globex").await;
    let ada = user(&acme, "ada@example.com", Role::Owner);
    let bob = user(&globex, "bob@example.com", Role::Member);
    store.create_user(&ada, &by()).await.unwrap();
    store.create_user(&bob, &by()).await.unwrap();
    assert_eq!(store.count_users().await.unwrap(), 2);

    let again = user(&globex, "ADA@example.com", Role::Admin);
    assert!(matches!(
        store.create_user(&again, &by()).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.get_user(ada.id).await.unwrap(), Some(ada.clone()));
    assert_eq!(
        store.find_user_by_email(&ada.email).await.unwrap(),
        Some(ada.clone())
    );
    assert_eq!(
        store
            .find_user_by_email(&Email::normalize("nobody@example.com").unwrap())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.list_users(Some(acme.id)).await.unwrap(),
        vec![ada.clone()]
    );
    assert_eq!(
        store.list_users(None).await.unwrap(),
        vec![ada.clone(), bob]
    );

    store
        .record_sign_in(ada.id, at(5_000), &by())
        .await
        .unwrap();
    let signed = store.get_user(ada.id).await.unwrap().unwrap();
    assert_eq!(signed.last_sign_in_at, Some(at(5_000)));
}

pub async fn disabling_and_new_passwords_end_sessions(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let ada = user(&acme, "ada@example.com", Role::Owner);
    let bob = user(&acme, "bob@example.com", Role::Member);
    store.create_user(&ada, &by()).await.unwrap();
    store.create_user(&bob, &by()).await.unwrap();
    for (u, token) in [(&ada, "a1"), (&ada, "a2"), (&bob, "b1")] {
        store
            .create_session(&session(u, token, 2_000))
            .await
            .unwrap();
    }

    let disabled = store
        .set_user_status(ada.id, UserStatus::Disabled, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(disabled.status, UserStatus::Disabled);
    assert!(store.find_session("a1").await.unwrap().is_none());
    assert!(store.find_session("a2").await.unwrap().is_none());
    assert!(store.find_session("b1").await.unwrap().is_some());

    let changed = store
        .set_password(bob.id, "$argon2id$new", &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.password_hash, "$argon2id$new");
    assert!(store.find_session("b1").await.unwrap().is_none());

    assert!(
        store
            .set_user_status(UserId::new(), UserStatus::Active, &by())
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn sessions_are_found_touched_and_purged(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let ada = user(&acme, "ada@example.com", Role::Admin);
    store.create_user(&ada, &by()).await.unwrap();

    let fresh = session(&ada, "fresh", 10_000);
    let idle = session(&ada, "idle", 1_000);
    let mut over = session(&ada, "over", 10_000);
    over.expires_at = at(15_000);
    for s in [&fresh, &idle, &over] {
        store.create_session(s).await.unwrap();
    }
    let (found, owner) = store.find_session("fresh").await.unwrap().unwrap();
    assert_eq!(found, fresh);
    assert_eq!(owner, ada);
    assert!(store.find_session("missing").await.unwrap().is_none());

    store.touch_session("fresh", at(19_000)).await.unwrap();
    let (touched, _) = store.find_session("fresh").await.unwrap().unwrap();
    assert_eq!(touched.last_seen_at, at(19_000));

    // Now 20 000, idle since before 5 000: `idle` is idle, `over` is over.
    assert_eq!(
        store.purge_sessions(at(20_000), at(5_000)).await.unwrap(),
        2
    );
    assert!(store.find_session("fresh").await.unwrap().is_some());
    assert!(store.find_session("idle").await.unwrap().is_none());
    assert!(store.find_session("over").await.unwrap().is_none());

    store.delete_session("fresh").await.unwrap();
    assert!(store.find_session("fresh").await.unwrap().is_none());
}
