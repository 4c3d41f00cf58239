//! Accounts: create, get, list, count, update.

use std::sync::Arc;

use taskgate_core::{AccountId, AccountStatus, PlanName};
use taskgate_store::{AccountUpdate, Store};

use crate::fixtures::{account, by};

fn plan(name: &str) -> PlanName {
    PlanName::parse(name).expect("a plan name")
}

pub async fn create_get_list_count(store: Arc<dyn Store>) {
    assert_eq!(store.count_accounts().await.unwrap(), 0);
    assert!(store.list_accounts().await.unwrap().is_empty());

    let mut first = account("Acme");
    first.monthly_spend_limit_micros = None;
    let mut second = account("Globex");
    second.status = AccountStatus::Suspended;
    second.created_at = second.created_at.plus_ms(1_000);
    let third = account("Initech");
    for a in [&first, &second, &third] {
        store
            .create_account(a, &by())
            .await
            .expect("create account");
    }

    for a in [&first, &second, &third] {
        assert_eq!(store.get_account(a.id).await.unwrap().as_ref(), Some(a));
    }
    assert_eq!(store.get_account(AccountId::new()).await.unwrap(), None);

    // Listed by id, which is creation order.
    let listed = store.list_accounts().await.unwrap();
    assert_eq!(listed, vec![first.clone(), second, third]);
    assert_eq!(store.count_accounts().await.unwrap(), 3);

    // Ids are unique.
    let mut duplicate = account("Duplicate");
    duplicate.id = first.id;
    assert!(store.create_account(&duplicate, &by()).await.is_err());
    assert_eq!(store.count_accounts().await.unwrap(), 3);
    assert_eq!(store.get_account(first.id).await.unwrap(), Some(first));
}

pub async fn update_keeps_absent_fields(store: Arc<dyn Store>) {
    let original = account("Acme");
    let other = account("Bystander");
    store.create_account(&original, &by()).await.unwrap();
    store.create_account(&other, &by()).await.unwrap();

    // Nothing to change: the account comes back as it was.
    let same = store
        .update_account(original.id, &AccountUpdate::default(), &by())
        .await
        .unwrap();
    assert_eq!(same.as_ref(), Some(&original));

    // Plan only.
    let update = AccountUpdate {
        plan: Some(plan("scale")),
        ..AccountUpdate::default()
    };
    let mut expected = original.clone();
    expected.plan = plan("scale");
    let updated = store
        .update_account(original.id, &update, &by())
        .await
        .unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // Status only; the new plan stays.
    let update = AccountUpdate {
        status: Some(AccountStatus::Suspended),
        ..AccountUpdate::default()
    };
    expected.status = AccountStatus::Suspended;
    let updated = store
        .update_account(original.id, &update, &by())
        .await
        .unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // A new limit.
    let update = AccountUpdate {
        monthly_spend_limit_micros: Some(Some(7_500_000)),
        ..AccountUpdate::default()
    };
    expected.monthly_spend_limit_micros = Some(7_500_000);
    let updated = store
        .update_account(original.id, &update, &by())
        .await
        .unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // Some(None) clears the limit; the other fields change together with it.
    let update = AccountUpdate {
        plan: Some(plan("enterprise")),
        status: Some(AccountStatus::Active),
        monthly_spend_limit_micros: Some(None),
        max_monthly_spend_limit_micros: None,
    };
    expected.plan = plan("enterprise");
    expected.status = AccountStatus::Active;
    expected.monthly_spend_limit_micros = None;
    let updated = store
        .update_account(original.id, &update, &by())
        .await
        .unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // None for the limit leaves "no limit" alone.
    let update = AccountUpdate {
        plan: Some(plan("starter")),
        ..AccountUpdate::default()
    };
    expected.plan = plan("starter");
    let updated = store
        .update_account(original.id, &update, &by())
        .await
        .unwrap();
    assert_eq!(updated.as_ref(), Some(&expected));

    // The update persisted and touched no other account.
    assert_eq!(
        store.get_account(original.id).await.unwrap(),
        Some(expected)
    );
    assert_eq!(store.get_account(other.id).await.unwrap(), Some(other));

    // Unknown account: nothing to update, nothing created.
    let update = AccountUpdate {
        plan: Some(plan("scale")),
        ..AccountUpdate::default()
    };
    assert_eq!(
        store
            .update_account(AccountId::new(), &update, &by())
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.count_accounts().await.unwrap(), 2);
}

/// The operator's ceiling is stored on its own: set, changed, removed, and
/// left alone by updates that do not name it (nor does setting it touch
/// the owners' limit). The limit that holds is the lower of the two.
pub async fn spend_ceiling(store: Arc<dyn Store>) {
    let mut with_ceiling = account("Capped");
    with_ceiling.max_monthly_spend_limit_micros = Some(100_000_000);
    store.create_account(&with_ceiling, &by()).await.unwrap();
    assert_eq!(
        store.get_account(with_ceiling.id).await.unwrap().as_ref(),
        Some(&with_ceiling)
    );
    assert_eq!(
        with_ceiling.effective_spend_limit_micros(),
        Some(25_000_000)
    );

    // A ceiling below the owners' limit: it holds at once; their limit stays.
    let update = AccountUpdate {
        max_monthly_spend_limit_micros: Some(Some(10_000_000)),
        ..AccountUpdate::default()
    };
    let lowered = store
        .update_account(with_ceiling.id, &update, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lowered.monthly_spend_limit_micros, Some(25_000_000));
    assert_eq!(lowered.max_monthly_spend_limit_micros, Some(10_000_000));
    assert_eq!(lowered.effective_spend_limit_micros(), Some(10_000_000));

    // The owners' limit changes without touching the ceiling; "none" of
    // theirs leaves the ceiling to hold.
    let update = AccountUpdate {
        monthly_spend_limit_micros: Some(None),
        ..AccountUpdate::default()
    };
    let own_none = store
        .update_account(with_ceiling.id, &update, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(own_none.monthly_spend_limit_micros, None);
    assert_eq!(own_none.max_monthly_spend_limit_micros, Some(10_000_000));
    assert_eq!(own_none.effective_spend_limit_micros(), Some(10_000_000));

    // Both in one update; then the ceiling removed, the owners' limit kept.
    let update = AccountUpdate {
        monthly_spend_limit_micros: Some(Some(3_000_000)),
        max_monthly_spend_limit_micros: Some(Some(5_000_000)),
        ..AccountUpdate::default()
    };
    let both = store
        .update_account(with_ceiling.id, &update, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(both.effective_spend_limit_micros(), Some(3_000_000));
    let update = AccountUpdate {
        max_monthly_spend_limit_micros: Some(None),
        ..AccountUpdate::default()
    };
    let removed = store
        .update_account(with_ceiling.id, &update, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(removed.monthly_spend_limit_micros, Some(3_000_000));
    assert_eq!(removed.max_monthly_spend_limit_micros, None);
    assert_eq!(
        store.get_account(with_ceiling.id).await.unwrap(),
        Some(removed.clone())
    );
    let mut neither = removed;
    neither.monthly_spend_limit_micros = None;
    assert_eq!(neither.effective_spend_limit_micros(), None);
}
