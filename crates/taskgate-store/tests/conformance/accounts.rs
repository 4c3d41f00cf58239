//! Accounts: create, get, list, count, update.

use std::sync::Arc;

use taskgate_store::{AccountUpdate, Store};

use crate::fixtures::account;

pub async fn create_get_list_count(store: Arc<dyn Store>) {
    assert_eq!(store.count_accounts().await.unwrap(), 0);
    assert!(store.list_accounts().await.unwrap().is_empty());

    let mut first = account("Acme");
    first.monthly_spend_limit_micros = None;
    let mut second = account("Globex");
    second.status = "suspended".to_owned();
    second.created_at += 1_000;
    let third = account("Initech");
    for a in [&first, &second, &third] {
        store.create_account(a).await.expect("create account");
    }

    for a in [&first, &second, &third] {
        assert_eq!(store.get_account(&a.id).await.unwrap().as_ref(), Some(a));
    }
    assert_eq!(store.get_account("acct_missing").await.unwrap(), None);

    // Listed by id, which is creation order.
    let listed = store.list_accounts().await.unwrap();
    assert_eq!(listed, vec![first.clone(), second, third]);
    assert_eq!(store.count_accounts().await.unwrap(), 3);

    // Ids are unique.
    let mut duplicate = account("Duplicate");
    duplicate.id = first.id.clone();
    assert!(store.create_account(&duplicate).await.is_err());
    assert_eq!(store.count_accounts().await.unwrap(), 3);
    assert_eq!(store.get_account(&first.id).await.unwrap(), Some(first));
}

pub async fn update_keeps_absent_fields(store: Arc<dyn Store>) {
    let original = account("Acme");
    let other = account("Bystander");
    store.create_account(&original).await.unwrap();
    store.create_account(&other).await.unwrap();

    // Nothing to change: the account comes back as it was.
    let same = store
        .update_account(&original.id, &AccountUpdate::default())
        .await
        .unwrap();
    assert_eq!(same.as_ref(), Some(&original));

    // Plan only.
    let update = AccountUpdate {
        plan: Some("scale".to_owned()),
        ..AccountUpdate::default()
    };
    let mut expected = original.clone();
    expected.plan = "scale".to_owned();
    let updated = store.update_account(&original.id, &update).await.unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // Status only; the new plan stays.
    let update = AccountUpdate {
        status: Some("suspended".to_owned()),
        ..AccountUpdate::default()
    };
    expected.status = "suspended".to_owned();
    let updated = store.update_account(&original.id, &update).await.unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // A new limit.
    let update = AccountUpdate {
        monthly_spend_limit_micros: Some(Some(7_500_000)),
        ..AccountUpdate::default()
    };
    expected.monthly_spend_limit_micros = Some(7_500_000);
    let updated = store.update_account(&original.id, &update).await.unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // Some(None) clears the limit; the other fields change together with it.
    let update = AccountUpdate {
        plan: Some("enterprise".to_owned()),
        status: Some("active".to_owned()),
        monthly_spend_limit_micros: Some(None),
    };
    expected.plan = "enterprise".to_owned();
    expected.status = "active".to_owned();
    expected.monthly_spend_limit_micros = None;
    let updated = store.update_account(&original.id, &update).await.unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // None for the limit leaves "no limit" alone.
    let update = AccountUpdate {
        plan: Some("starter".to_owned()),
        ..AccountUpdate::default()
    };
    expected.plan = "starter".to_owned();
    let updated = store.update_account(&original.id, &update).await.unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // The update persisted and touched no other account.
    assert_eq!(
        store.get_account(&original.id).await.unwrap(),
        Some(expected)
    );
    assert_eq!(store.get_account(&other.id).await.unwrap(), Some(other));

    // Unknown account: nothing to update, nothing created.
    let update = AccountUpdate {
        plan: Some("scale".to_owned()),
        ..AccountUpdate::default()
    };
    assert_eq!(
        store.update_account("acct_missing", &update).await.unwrap(),
        None
    );
    assert_eq!(store.count_accounts().await.unwrap(), 2);
}
