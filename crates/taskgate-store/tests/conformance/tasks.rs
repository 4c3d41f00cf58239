//! Tasks at rest: insert, get, list, the queue.

use std::sync::Arc;

use taskgate_store::{Store, TaskRecord};

use crate::fixtures::{T0, ended_task, fetch, ids, insert, list_ids, query, task};

pub async fn insert_and_get_scoped(store: Arc<dyn Store>) {
    // Every optional field set, so each column round-trips.
    let mut full = task("acct_a", "live", "sentiment");
    full.status = "succeeded".to_owned();
    full.output = Some(r#"{"label":"positive","score":0.91}"#.to_owned());
    full.error = Some(r#"{"code":"partial","message":"one attempt failed"}"#.to_owned());
    full.units = 2;
    full.input_tokens = Some(1_234);
    full.output_tokens = Some(56);
    full.cost_micros = 9_007_199_254_740_993; // needs 64 bits
    full.idempotency_key = Some("idem-1".to_owned());
    full.sandbox = Some(r#"{"fail":"never"}"#.to_owned());
    full.attempts =
        r#"[{"provider":"local","ok":false},{"provider":"local","ok":true}]"#.to_owned();
    full.started_at = Some(T0 + 1);
    full.completed_at = Some(T0 + 2);
    full.runner = Some("runner-1".to_owned());
    full.lease_until = Some(T0 + 60_000);
    let full = insert(&*store, full).await;
    let minimal = insert(&*store, task("acct_a", "test", "language")).await;

    for t in [&full, &minimal] {
        let got = store.get_task(&t.account_id, &t.mode, &t.id).await.unwrap();
        assert_eq!(got.as_ref(), Some(t));
        assert_eq!(store.get_task_by_id(&t.id).await.unwrap().as_ref(), Some(t));
    }

    // Scoped reads: another account or mode does not see the task.
    assert_eq!(
        store.get_task("acct_b", "live", &full.id).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_task("acct_a", "test", &full.id).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_task("acct_a", "live", &minimal.id).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .get_task("acct_a", "live", "task_missing")
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.get_task_by_id("task_missing").await.unwrap(), None);

    // Ids are unique.
    let mut duplicate = task("acct_b", "live", "language");
    duplicate.id = full.id.clone();
    assert!(store.insert_task(&duplicate).await.is_err());
    assert_eq!(fetch(&*store, &full.id).await, full);
}

/// What a list returns for a task: everything but the two large documents.
fn summary(t: &TaskRecord) -> TaskRecord {
    TaskRecord {
        input: String::new(),
        output: None,
        ..t.clone()
    }
}

pub async fn list_filters(store: Arc<dyn Store>) {
    let a = "acct_a";
    let queued = insert(&*store, task(a, "live", "language")).await;
    let succeeded = insert(&*store, ended_task(a, "live", "sentiment", "succeeded")).await;
    let failed = insert(&*store, ended_task(a, "live", "language", "failed")).await;
    let mut running = task(a, "live", "sentiment");
    running.status = "running".to_owned();
    running.runner = Some("runner-1".to_owned());
    running.started_at = Some(T0 + 1);
    running.lease_until = Some(T0 + 30_000);
    let running = insert(&*store, running).await;
    let cancelled = insert(&*store, ended_task(a, "live", "language", "cancelled")).await;
    // Same account in test mode, and another account: never listed below.
    insert(&*store, ended_task(a, "test", "language", "succeeded")).await;
    insert(&*store, task("acct_b", "live", "language")).await;

    // No filter: the whole page, by id, as summaries.
    let listed = store.list_tasks(&query(a, "live")).await.unwrap();
    let all = [&queued, &succeeded, &failed, &running, &cancelled];
    let expected: Vec<TaskRecord> = all.iter().map(|t| summary(t)).collect();
    assert_eq!(listed, expected);
    for t in &listed {
        assert_eq!(t.input, "");
        assert_eq!(t.output, None);
    }

    // One status, several statuses, a status nothing has.
    let mut q = query(a, "live");
    q.statuses = vec!["succeeded".to_owned()];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded]));
    q.statuses = vec![
        "queued".to_owned(),
        "failed".to_owned(),
        "cancelled".to_owned(),
    ];
    assert_eq!(
        list_ids(&*store, &q).await,
        ids(&[&queued, &failed, &cancelled])
    );
    q.statuses = vec!["running".to_owned(), "succeeded".to_owned()];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded, &running]));
    q.statuses = vec!["expired".to_owned()];
    assert!(list_ids(&*store, &q).await.is_empty());

    // The api filter, alone and with statuses.
    let mut q = query(a, "live");
    q.api = Some("language".to_owned());
    assert_eq!(
        list_ids(&*store, &q).await,
        ids(&[&queued, &failed, &cancelled])
    );
    q.statuses = vec!["failed".to_owned(), "succeeded".to_owned()];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&failed]));
    q.api = Some("sentiment".to_owned());
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded]));
    q.api = Some("translate".to_owned());
    q.statuses.clear();
    assert!(list_ids(&*store, &q).await.is_empty());

    // Scoping by account and mode.
    let mut q = query(a, "test");
    assert_eq!(list_ids(&*store, &q).await.len(), 1);
    q.account_id = "acct_b".to_owned();
    assert_eq!(list_ids(&*store, &q).await.len(), 0);
    q.mode = "live".to_owned();
    assert_eq!(list_ids(&*store, &q).await.len(), 1);
    assert!(list_ids(&*store, &query("acct_c", "live")).await.is_empty());
}

pub async fn list_bounds_order_limit(store: Arc<dyn Store>) {
    let a = "acct_a";
    let mut made = Vec::new();
    for i in 0..7 {
        let api = if i % 2 == 0 { "language" } else { "sentiment" };
        made.push(insert(&*store, task(a, "live", api)).await);
    }
    let t: Vec<&TaskRecord> = made.iter().collect();
    let rev = |v: &[&TaskRecord]| v.iter().rev().map(|t| t.id.clone()).collect::<Vec<_>>();

    // Order and limit.
    let mut q = query(a, "live");
    assert_eq!(list_ids(&*store, &q).await, ids(&t));
    q.descending = true;
    assert_eq!(list_ids(&*store, &q).await, rev(&t));
    q.limit = 2;
    assert_eq!(list_ids(&*store, &q).await, rev(&t[5..]));
    q.descending = false;
    assert_eq!(list_ids(&*store, &q).await, ids(&t[..2]));
    q.limit = 0;
    assert!(list_ids(&*store, &q).await.is_empty());

    // Bounds are strict.
    let mut q = query(a, "live");
    q.id_after = Some(t[2].id.clone());
    assert_eq!(list_ids(&*store, &q).await, ids(&t[3..]));
    q.id_after = None;
    q.id_before = Some(t[2].id.clone());
    assert_eq!(list_ids(&*store, &q).await, ids(&t[..2]));
    q.id_after = Some(t[1].id.clone());
    q.id_before = Some(t[5].id.clone());
    assert_eq!(list_ids(&*store, &q).await, ids(&t[2..5]));
    q.descending = true;
    assert_eq!(list_ids(&*store, &q).await, rev(&t[2..5]));
    q.limit = 2;
    assert_eq!(list_ids(&*store, &q).await, rev(&t[3..5]));
    q.id_after = Some(t[4].id.clone());
    q.id_before = Some(t[4].id.clone());
    assert!(list_ids(&*store, &q).await.is_empty());

    // Bounds combine with filters.
    let mut q = query(a, "live");
    q.api = Some("language".to_owned());
    q.id_after = Some(t[0].id.clone());
    assert_eq!(list_ids(&*store, &q).await, ids(&[t[2], t[4], t[6]]));

    // Keyset pagination visits every task once, in either direction.
    for descending in [false, true] {
        let mut q = query(a, "live");
        q.limit = 3;
        q.descending = descending;
        let mut seen = Vec::new();
        loop {
            let page = list_ids(&*store, &q).await;
            assert!(page.len() <= 3);
            let Some(last) = page.last().cloned() else {
                break;
            };
            seen.extend(page);
            if descending {
                q.id_before = Some(last);
            } else {
                q.id_after = Some(last);
            }
        }
        let expected = if descending { rev(&t) } else { ids(&t) };
        assert_eq!(seen, expected, "pagination (descending: {descending})");
    }
}

pub async fn queued_ids_oldest_first(store: Arc<dyn Store>) {
    assert!(store.queued_task_ids(10).await.unwrap().is_empty());

    let q1 = insert(&*store, task("acct_a", "live", "language")).await;
    insert(
        &*store,
        ended_task("acct_a", "live", "language", "succeeded"),
    )
    .await;
    let q2 = insert(&*store, task("acct_b", "test", "sentiment")).await;
    insert(
        &*store,
        ended_task("acct_b", "live", "language", "cancelled"),
    )
    .await;
    let q3 = insert(&*store, task("acct_a", "live", "sentiment")).await;
    let q4 = insert(&*store, task("acct_c", "live", "language")).await;

    // Every account and mode, oldest first.
    let all = ids(&[&q1, &q2, &q3, &q4]);
    assert_eq!(store.queued_task_ids(100).await.unwrap(), all);
    assert_eq!(store.queued_task_ids(2).await.unwrap(), all[..2]);
    assert!(store.queued_task_ids(0).await.unwrap().is_empty());

    // A claimed or cancelled task leaves the queue.
    store
        .claim_task(&q2.id, "runner-1", T0 + 10, T0 + 60_000)
        .await
        .unwrap();
    store
        .cancel_task("acct_a", "live", &q3.id, T0 + 10)
        .await
        .unwrap();
    assert_eq!(store.queued_task_ids(100).await.unwrap(), ids(&[&q1, &q4]));
}
