//! API keys: create, get, find by hash, list, revoke, roll, touch.

use std::sync::Arc;

use taskgate_core::{AccountId, ApiList, KeyId, KeyType, Mode, Scope, Scopes};
use taskgate_store::{KeyRecord, Store, StoreError};

use crate::fixtures::{DAY, HOUR, T0, api, at, by, hash_of, key, new_account, new_key};

pub async fn create_get_find_list(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let globex = new_account(&*store, "Globex").await;

    let plain = new_key(&*store, key(acme.id)).await;
    let mut restricted = key(acme.id);
    restricted.name = "restricted test key".to_owned();
    restricted.key_type = KeyType::Restricted;
    restricted.mode = Mode::Test;
    restricted.scopes = Scopes(vec![Scope::TasksRead]);
    restricted.allowed_apis = Some(ApiList(vec![api("language"), api("sentiment")]));
    restricted.expires_at = Some(at(T0 + 30 * DAY));
    restricted.last_used_at = Some(at(T0 + 5));
    let restricted = new_key(&*store, restricted).await;
    let foreign = new_key(&*store, key(globex.id)).await;

    for k in [&plain, &restricted, &foreign] {
        assert_eq!(store.get_key(k.id).await.unwrap().as_ref(), Some(k));
    }
    assert_eq!(store.get_key(KeyId::new()).await.unwrap(), None);

    // By hash: the key with its account.
    let found = store.find_key_by_hash(&hash_of(&restricted)).await.unwrap();
    assert_eq!(found, Some((restricted.clone(), acme.clone())));
    let found = store.find_key_by_hash(&hash_of(&foreign)).await.unwrap();
    assert_eq!(found, Some((foreign.clone(), globex.clone())));
    assert_eq!(store.find_key_by_hash("sha256:nope").await.unwrap(), None);

    // Listed per account, by id.
    assert_eq!(
        store.list_keys(acme.id).await.unwrap(),
        vec![plain.clone(), restricted.clone()]
    );
    assert_eq!(store.list_keys(globex.id).await.unwrap(), vec![foreign]);
    assert!(store.list_keys(AccountId::new()).await.unwrap().is_empty());

    // Hashes and ids are unique, and a key needs an existing account.
    let mut same_hash = key(acme.id);
    assert!(
        store
            .create_key(&same_hash, &hash_of(&plain), &by())
            .await
            .is_err()
    );
    same_hash.id = plain.id;
    assert!(
        store
            .create_key(&same_hash, "sha256:fresh", &by())
            .await
            .is_err()
    );
    let orphan = key(AccountId::new());
    assert!(
        store
            .create_key(&orphan, &hash_of(&orphan), &by())
            .await
            .is_err()
    );
    assert_eq!(store.get_key(orphan.id).await.unwrap(), None);
    assert_eq!(store.list_keys(acme.id).await.unwrap().len(), 2);

    // A revoked key is still found by its hash, with its state.
    let revoked = store
        .revoke_key(plain.id, at(T0 + 9), &by())
        .await
        .unwrap()
        .unwrap();
    let found = store.find_key_by_hash(&hash_of(&plain)).await.unwrap();
    assert_eq!(found, Some((revoked, acme)));
}

pub async fn revoke_keeps_first_time(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let target = new_key(&*store, key(acme.id)).await;
    let bystander = new_key(&*store, key(acme.id)).await;

    let mut expected = target.clone();
    expected.revoked_at = Some(at(T0 + 100));
    let revoked = store
        .revoke_key(target.id, at(T0 + 100), &by())
        .await
        .unwrap();
    assert_eq!(revoked.as_ref(), Some(&expected));

    // Revoking again keeps the first time.
    let again = store
        .revoke_key(target.id, at(T0 + 200), &by())
        .await
        .unwrap();
    assert_eq!(again.as_ref(), Some(&expected));
    let earlier = store
        .revoke_key(target.id, at(T0 + 50), &by())
        .await
        .unwrap();
    assert_eq!(earlier.as_ref(), Some(&expected));
    assert_eq!(store.get_key(target.id).await.unwrap(), Some(expected));

    assert_eq!(
        store.revoke_key(KeyId::new(), at(T0), &by()).await.unwrap(),
        None
    );
    assert_eq!(store.get_key(bystander.id).await.unwrap(), Some(bystander));
}

/// A successor of `old`, made at `at`.
fn successor(old: &KeyRecord, created_at: i64) -> KeyRecord {
    let mut new = key(old.account_id);
    new.name = format!("{} (rolled)", old.name);
    new.created_at = at(created_at);
    new
}

pub async fn roll_caps_old_expiry(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let grace = at(T0 + DAY);

    // No expiry: the old key now expires at the end of the grace period.
    let forever = new_key(&*store, key(acme.id)).await;
    let new = successor(&forever, T0 + 10);
    store
        .roll_key(forever.id, &new, &hash_of(&new), grace, &by())
        .await
        .expect("roll");
    assert_eq!(store.get_key(new.id).await.unwrap().as_ref(), Some(&new));
    let found = store.find_key_by_hash(&hash_of(&new)).await.unwrap();
    assert_eq!(found, Some((new.clone(), acme.clone())));
    let mut expected = forever.clone();
    expected.expires_at = Some(grace);
    assert_eq!(store.get_key(forever.id).await.unwrap(), Some(expected));

    // An expiry before the grace period ends stays: rolling never lengthens.
    let mut soon = key(acme.id);
    soon.expires_at = Some(grace.minus_ms(HOUR));
    let soon = new_key(&*store, soon).await;
    let new = successor(&soon, T0 + 20);
    store
        .roll_key(soon.id, &new, &hash_of(&new), grace, &by())
        .await
        .expect("roll");
    assert_eq!(store.get_key(soon.id).await.unwrap(), Some(soon));
    assert!(store.get_key(new.id).await.unwrap().is_some());

    // A later expiry is brought forward to the end of the grace period.
    let mut late = key(acme.id);
    late.expires_at = Some(at(T0 + 90 * DAY));
    let late = new_key(&*store, late).await;
    let new = successor(&late, T0 + 30);
    store
        .roll_key(late.id, &new, &hash_of(&new), grace, &by())
        .await
        .expect("roll");
    let mut expected = late.clone();
    expected.expires_at = Some(grace);
    assert_eq!(store.get_key(late.id).await.unwrap(), Some(expected));

    // Both generations are listed; rolling the new key again works too.
    assert_eq!(store.list_keys(acme.id).await.unwrap().len(), 6);
    let newest = successor(&new, T0 + 40);
    store
        .roll_key(new.id, &newest, &hash_of(&newest), at(T0 + 2 * DAY), &by())
        .await
        .expect("roll the rolled key");
    let rolled = store.get_key(new.id).await.unwrap().unwrap();
    assert_eq!(rolled.expires_at, Some(at(T0 + 2 * DAY)));
    assert_eq!(rolled.revoked_at, None);
}

pub async fn roll_refuses_revoked_and_unknown(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let revoked = new_key(&*store, key(acme.id)).await;
    let revoked = store
        .revoke_key(revoked.id, at(T0 + 5), &by())
        .await
        .unwrap()
        .unwrap();

    let new = successor(&revoked, T0 + 10);
    let result = store
        .roll_key(revoked.id, &new, &hash_of(&new), at(T0 + DAY), &by())
        .await;
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "rolling a revoked key: {result:?}"
    );
    assert_eq!(store.get_key(new.id).await.unwrap(), None);
    assert_eq!(store.find_key_by_hash(&hash_of(&new)).await.unwrap(), None);
    assert_eq!(store.get_key(revoked.id).await.unwrap(), Some(revoked));

    let new = successor(&key(acme.id), T0 + 10);
    let result = store
        .roll_key(KeyId::new(), &new, &hash_of(&new), at(T0 + DAY), &by())
        .await;
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "rolling an unknown key: {result:?}"
    );
    assert_eq!(store.get_key(new.id).await.unwrap(), None);
    assert_eq!(store.list_keys(acme.id).await.unwrap().len(), 1);
}

pub async fn roll_is_atomic(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let old = new_key(&*store, key(acme.id)).await;
    let other = new_key(&*store, key(acme.id)).await;

    // The new key cannot be stored (its hash is taken): the old key keeps its
    // expiry and nothing is created.
    let new = successor(&old, T0 + 10);
    let result = store
        .roll_key(old.id, &new, &hash_of(&other), at(T0 + DAY), &by())
        .await;
    assert!(result.is_err(), "a duplicate hash must fail the roll");
    assert_eq!(store.get_key(old.id).await.unwrap(), Some(old.clone()));
    assert_eq!(store.get_key(new.id).await.unwrap(), None);
    assert_eq!(
        store.list_keys(acme.id).await.unwrap(),
        vec![old.clone(), other]
    );

    // The store still works afterwards.
    store
        .roll_key(old.id, &new, &hash_of(&new), at(T0 + DAY), &by())
        .await
        .expect("roll after a failed roll");
    assert_eq!(store.get_key(new.id).await.unwrap(), Some(new));
}

pub async fn touch_only_moves_forward(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let first = new_key(&*store, key(acme.id)).await;
    let second = new_key(&*store, key(acme.id)).await;
    let untouched = new_key(&*store, key(acme.id)).await;

    let last_used = |k: Option<KeyRecord>| k.expect("key").last_used_at;

    store.touch_keys(&[]).await.expect("nothing to touch");
    store
        .touch_keys(&[(first.id, at(T0 + 100)), (second.id, at(T0 + 200))])
        .await
        .unwrap();
    assert_eq!(
        last_used(store.get_key(first.id).await.unwrap()),
        Some(at(T0 + 100))
    );
    assert_eq!(
        last_used(store.get_key(second.id).await.unwrap()),
        Some(at(T0 + 200))
    );

    // Earlier or equal times are ignored; later ones win, also within a batch;
    // unknown ids are ignored.
    store
        .touch_keys(&[
            (first.id, at(T0 + 50)),
            (second.id, at(T0 + 300)),
            (second.id, at(T0 + 250)),
            (KeyId::new(), at(T0 + 400)),
        ])
        .await
        .unwrap();
    assert_eq!(
        last_used(store.get_key(first.id).await.unwrap()),
        Some(at(T0 + 100))
    );
    assert_eq!(
        last_used(store.get_key(second.id).await.unwrap()),
        Some(at(T0 + 300))
    );

    store
        .touch_keys(&[(first.id, at(T0 + 100)), (first.id, at(T0 + 150))])
        .await
        .unwrap();
    let touched = store.get_key(first.id).await.unwrap().unwrap();
    let mut expected = first.clone();
    expected.last_used_at = Some(at(T0 + 150));
    assert_eq!(touched, expected, "touching changes only last_used_at");

    assert_eq!(store.get_key(untouched.id).await.unwrap(), Some(untouched));
}

/// Long lists of keys come in pages of one mode, by id; counts say how many
/// work now.
pub async fn pages_and_counts_of_one_mode(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let mut live = Vec::new();
    for i in 0..7 {
        let mut k = key(acme.id);
        if i == 1 {
            k.revoked_at = Some(at(T0 + HOUR));
        }
        if i == 2 {
            k.expires_at = Some(at(T0 + DAY));
        }
        live.push(new_key(&*store, k).await);
    }
    let mut test = key(acme.id);
    test.key_type = KeyType::Test;
    test.mode = Mode::Test;
    let test = new_key(&*store, test).await;

    let first = store
        .list_keys_page(acme.id, Mode::Live, None, 3)
        .await
        .unwrap();
    assert_eq!(first, live[..3].to_vec());
    let rest = store
        .list_keys_page(acme.id, Mode::Live, Some(first[2].id), 10)
        .await
        .unwrap();
    assert_eq!(rest, live[3..].to_vec());
    assert_eq!(
        store
            .list_keys_page(acme.id, Mode::Test, None, 10)
            .await
            .unwrap(),
        vec![test]
    );
    // Two days on, the revoked and the expired one no longer work.
    let counts = store
        .count_keys(acme.id, Mode::Live, at(T0 + 2 * DAY))
        .await
        .unwrap();
    assert_eq!(counts, (7, 5));
    assert_eq!(
        store.count_keys(acme.id, Mode::Live, at(T0)).await.unwrap(),
        (7, 7)
    );
}
