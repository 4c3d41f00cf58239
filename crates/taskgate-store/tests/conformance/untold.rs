//! Tasks stored with `insert_task_unflushed` (a sync call's, told of only at
//! its end): whatever a backend does to save writes (SQLite holds them until
//! their end), every read and write of tasks finds them as if inserted.

use std::sync::Arc;

use taskgate_core::{Mode, TaskStatus};
use taskgate_store::{Claim, Store, TaskRecord};

use crate::fixtures::{
    MINUTE, T0, at, event_statuses, fetch, finish, list_ids, new_account, query, runner, task_of,
};

/// A task as a sync call stores it: claimed by its runner at once.
fn untold(account: taskgate_core::AccountId) -> TaskRecord {
    task_of(account, "live", "language")
        .claimed(&runner("runner-1"), at(T0), at(T0 + MINUTE))
        .unwrap()
}

pub async fn every_read_finds_it(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let t = untold(acme.id);
    store.insert_task_unflushed(&t).await.unwrap();

    // A page first (the dashboard's read), then the other reads.
    let mut q = query("x", "live");
    q.account_id = acme.id;
    assert_eq!(list_ids(&*store, &q).await, vec![t.id]);
    let got = store
        .get_task(acme.id, t.mode, t.id)
        .await
        .unwrap()
        .expect("get_task finds it");
    assert_eq!(got.status, TaskStatus::Running);
    assert_eq!(fetch(&*store, t.id).await.status, TaskStatus::Running);
    let settled = store.settle_task(t.id).await.unwrap().expect("settled");
    assert_eq!(settled.id, t.id);
    assert_eq!(
        store
            .renew_leases(&runner("runner-1"), &[t.id], at(T0 + 2 * MINUTE))
            .await
            .unwrap(),
        1,
        "its lease is renewed"
    );
}

pub async fn ends_with_every_event(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let t = untold(acme.id);
    store.insert_task_unflushed(&t).await.unwrap();
    let done = finish("succeeded", 1_500, T0 + 10, Some(acme.id));
    assert!(store.finish_task(t.id, &done).await.unwrap());

    let stored = fetch(&*store, t.id).await;
    assert_eq!(stored.status, TaskStatus::Succeeded);
    assert_eq!(event_statuses(&stored), ["queued", "running", "succeeded"]);
    assert_eq!(stored.cost_micros, 1_500);
    assert_eq!(stored.input, t.input, "the input as inserted");
    assert_eq!(
        store
            .month_spend(acme.id, &at(T0 + 10).month_key())
            .await
            .unwrap(),
        1_500
    );
    assert!(!store.finish_task(t.id, &done).await.unwrap(), "ended once");
}

pub async fn cancel_and_sweeper_find_it(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let t = untold(acme.id);
    store.insert_task_unflushed(&t).await.unwrap();
    let cancelled = store
        .cancel_task(acme.id, t.mode, t.id, at(T0 + 5))
        .await
        .unwrap()
        .expect("found");
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let done = finish("succeeded", 0, T0 + 10, None);
    assert!(
        !store.finish_task(t.id, &done).await.unwrap(),
        "a cancelled task's result is dropped"
    );

    let lost = untold(acme.id);
    store.insert_task_unflushed(&lost).await.unwrap();
    let interrupted = store
        .interrupt_expired(at(T0 + 2 * MINUTE), None)
        .await
        .unwrap();
    assert_eq!(interrupted, vec![lost.id], "its lease expired");
}

pub async fn caps_count_it(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    store.insert_task_unflushed(&untold(acme.id)).await.unwrap();

    let refused = untold(acme.id);
    assert!(
        !store.insert_running_capped(&refused, 1).await.unwrap(),
        "one running already, at a cap of 1"
    );
    let queued = task_of(acme.id, "live", "language");
    store.insert_task(&queued).await.unwrap();
    let claim = store
        .claim_task_capped(
            queued.id,
            acme.id,
            Mode::Live,
            &runner("runner-2"),
            at(T0 + 1),
            at(T0 + MINUTE),
            1,
        )
        .await
        .unwrap();
    assert!(matches!(claim, Claim::AtCap), "claims too");
}

pub async fn usage_counts_it(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let t = untold(acme.id);
    store.insert_task_unflushed(&t).await.unwrap();
    let counts = store
        .task_counts(acme.id, t.mode, at(T0 - MINUTE))
        .await
        .unwrap();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!(counts[0].status, TaskStatus::Running);
    assert_eq!(counts[0].tasks, 1);
}
