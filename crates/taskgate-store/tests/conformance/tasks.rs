//! Tasks at rest: insert, get, list, the queue.

use std::sync::Arc;

use taskgate_core::{
    Attempt, AttemptOutcome, Attempts, Mode, SandboxControls, SandboxOutcome, TaskError, TaskStatus,
};
use taskgate_store::{Store, TaskRecord};

use crate::fixtures::{
    T0, acct, api, at, ended_task, fetch, idem, ids, insert, list_ids, local_attempt, mode, query,
    runner, status, task, unknown_task,
};

pub async fn insert_and_get_scoped(store: Arc<dyn Store>) {
    // Every optional field set, so each column round-trips.
    let mut full = task("acct_a", "live", "sentiment");
    full.status = TaskStatus::Succeeded;
    full.output = Some(r#"{"label":"positive","score":0.91}"#.to_owned());
    full.error = Some(TaskError::new("partial", "one attempt failed"));
    full.units = 2;
    full.input_tokens = Some(1_234);
    full.output_tokens = Some(56);
    full.reasoning_tokens = Some(40);
    full.cached_input_tokens = Some(1_024);
    full.cost_micros = 9_007_199_254_740_993; // needs 64 bits
    full.idempotency_key = Some(idem("idem-1"));
    full.sandbox = Some(SandboxControls {
        delay_ms: 250,
        outcome: SandboxOutcome::Failed,
        error_code: Some("upstream_timeout".to_owned()),
    });
    full.attempts = Attempts(vec![
        Attempt {
            outcome: AttemptOutcome::Failed,
            http_status: Some(503),
            ..local_attempt(T0 + 1)
        },
        local_attempt(T0 + 2),
    ]);
    full.started_at = Some(at(T0 + 1));
    full.completed_at = Some(at(T0 + 2));
    full.runner = Some(runner("runner-1"));
    full.lease_until = Some(at(T0 + 60_000));
    let full = insert(&*store, full).await;
    let minimal = insert(&*store, task("acct_a", "test", "language")).await;

    for t in [&full, &minimal] {
        let got = store.get_task(t.account_id, t.mode, t.id).await.unwrap();
        assert_eq!(got.as_ref(), Some(t));
        assert_eq!(store.get_task_by_id(t.id).await.unwrap().as_ref(), Some(t));
    }

    // Scoped reads: another account or mode does not see the task.
    let (a, b) = (acct("acct_a"), acct("acct_b"));
    assert_eq!(store.get_task(b, Mode::Live, full.id).await.unwrap(), None);
    assert_eq!(store.get_task(a, Mode::Test, full.id).await.unwrap(), None);
    assert_eq!(
        store.get_task(a, Mode::Live, minimal.id).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_task(a, Mode::Live, unknown_task()).await.unwrap(),
        None
    );
    assert_eq!(store.get_task_by_id(unknown_task()).await.unwrap(), None);

    // Ids are unique.
    let mut duplicate = task("acct_b", "live", "language");
    duplicate.id = full.id;
    assert!(store.insert_task(&duplicate).await.is_err());
    assert_eq!(fetch(&*store, full.id).await, full);
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
    running.status = TaskStatus::Running;
    running.runner = Some(runner("runner-1"));
    running.started_at = Some(at(T0 + 1));
    running.lease_until = Some(at(T0 + 30_000));
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
    q.statuses = vec![status("succeeded")];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded]));
    q.statuses = vec![status("queued"), status("failed"), status("cancelled")];
    assert_eq!(
        list_ids(&*store, &q).await,
        ids(&[&queued, &failed, &cancelled])
    );
    q.statuses = vec![status("running"), status("succeeded")];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded, &running]));
    // Every status has a live task here; the test mode has one succeeded task.
    let mut none = query(a, "test");
    none.statuses = vec![status("failed")];
    assert!(list_ids(&*store, &none).await.is_empty());

    // The api filter, alone and with statuses.
    let mut q = query(a, "live");
    q.api = Some(api("language"));
    assert_eq!(
        list_ids(&*store, &q).await,
        ids(&[&queued, &failed, &cancelled])
    );
    q.statuses = vec![status("failed"), status("succeeded")];
    assert_eq!(list_ids(&*store, &q).await, ids(&[&failed]));
    q.api = Some(api("sentiment"));
    assert_eq!(list_ids(&*store, &q).await, ids(&[&succeeded]));
    q.api = Some(api("translate"));
    q.statuses.clear();
    assert!(list_ids(&*store, &q).await.is_empty());

    // Scoping by account and mode.
    let mut q = query(a, "test");
    assert_eq!(list_ids(&*store, &q).await.len(), 1);
    q.account_id = acct("acct_b");
    assert_eq!(list_ids(&*store, &q).await.len(), 0);
    q.mode = mode("live");
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
    let rev = |v: &[&TaskRecord]| v.iter().rev().map(|t| t.id).collect::<Vec<_>>();

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
    q.id_after = Some(t[2].id);
    assert_eq!(list_ids(&*store, &q).await, ids(&t[3..]));
    q.id_after = None;
    q.id_before = Some(t[2].id);
    assert_eq!(list_ids(&*store, &q).await, ids(&t[..2]));
    q.id_after = Some(t[1].id);
    q.id_before = Some(t[5].id);
    assert_eq!(list_ids(&*store, &q).await, ids(&t[2..5]));
    q.descending = true;
    assert_eq!(list_ids(&*store, &q).await, rev(&t[2..5]));
    q.limit = 2;
    assert_eq!(list_ids(&*store, &q).await, rev(&t[3..5]));
    q.id_after = Some(t[4].id);
    q.id_before = Some(t[4].id);
    assert!(list_ids(&*store, &q).await.is_empty());

    // Bounds combine with filters.
    let mut q = query(a, "live");
    q.api = Some(api("language"));
    q.id_after = Some(t[0].id);
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
        .claim_task(q2.id, &runner("runner-1"), at(T0 + 10), at(T0 + 60_000))
        .await
        .unwrap();
    store
        .cancel_task(acct("acct_a"), Mode::Live, q3.id, at(T0 + 10))
        .await
        .unwrap();
    assert_eq!(store.queued_task_ids(100).await.unwrap(), ids(&[&q1, &q4]));
}

/// A restricted key's view: only tasks of the APIs it may call; no API at
/// all matches nothing.
pub async fn list_by_allowed_apis(store: Arc<dyn Store>) {
    let a = "acct_a";
    let lang = insert(&*store, task(a, "live", "language")).await;
    let senti = insert(&*store, task(a, "live", "sentiment")).await;
    let count = insert(&*store, task(a, "live", "token-count")).await;

    let mut q = query(a, "live");
    q.apis = Some(vec![api("sentiment"), api("language")]);
    assert_eq!(list_ids(&*store, &q).await, ids(&[&lang, &senti]));
    // With the single-API filter: both must hold.
    q.api = Some(api("token-count"));
    assert!(list_ids(&*store, &q).await.is_empty());
    q.api = Some(api("language"));
    assert_eq!(list_ids(&*store, &q).await, ids(&[&lang]));
    q.api = None;
    q.apis = Some(vec![api("token-count")]);
    assert_eq!(list_ids(&*store, &q).await, ids(&[&count]));
    q.apis = Some(Vec::new());
    assert!(list_ids(&*store, &q).await.is_empty());
    q.apis = None;
    assert_eq!(list_ids(&*store, &q).await.len(), 3);
}

/// Fair dispatch reads the queue by turns: the oldest of each account's
/// live tasks and of its test tasks first (a lane each).
pub async fn queued_tasks_take_turns(store: Arc<dyn Store>) {
    assert!(store.queued_tasks(10, 100).await.unwrap().is_empty());
    let (a, b, c) = ("acct_a", "acct_b", "acct_c");
    let a1 = insert(&*store, task(a, "live", "language")).await;
    let a2 = insert(&*store, task(a, "live", "language")).await;
    let a3 = insert(&*store, task(a, "test", "language")).await;
    let b1 = insert(&*store, task(b, "live", "language")).await;
    insert(&*store, ended_task(c, "live", "language", "succeeded")).await;
    let c1 = insert(&*store, task(c, "live", "language")).await;
    let b2 = insert(&*store, task(b, "live", "language")).await;
    let turns =
        |v: &[&TaskRecord]| -> Vec<_> { v.iter().map(|t| (t.id, t.account_id, t.mode)).collect() };

    assert_eq!(
        store.queued_tasks(10, 100).await.unwrap(),
        turns(&[&a1, &a3, &b1, &c1, &a2, &b2])
    );
    assert_eq!(
        store.queued_tasks(1, 100).await.unwrap(),
        turns(&[&a1, &a3, &b1, &c1])
    );
    assert_eq!(store.queued_tasks(10, 2).await.unwrap(), turns(&[&a1, &a3]));
    // Claimed tasks leave the queue: A's next one takes its place in turn 1.
    store
        .claim_task(a1.id, &runner("runner-1"), at(T0 + 10), at(T0 + 60_000))
        .await
        .unwrap();
    assert_eq!(
        store.queued_tasks(1, 100).await.unwrap(),
        turns(&[&a2, &a3, &b1, &c1])
    );
    // A backlog of an account's test tasks never hides its live ones.
    let d = "acct_d";
    for _ in 0..3 {
        insert(&*store, task(d, "test", "language")).await;
    }
    let d_live = insert(&*store, task(d, "live", "language")).await;
    let first_turn = store.queued_tasks(1, 100).await.unwrap();
    assert!(first_turn.contains(&(d_live.id, d_live.account_id, d_live.mode)));
}
