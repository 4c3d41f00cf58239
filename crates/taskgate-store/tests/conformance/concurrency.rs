//! Races: many callers at once, exactly one winner.

use std::future::Future;
use std::sync::Arc;

use taskgate_core::{Mode, TaskStatus};
use taskgate_store::{IdempotencyState, Store};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::fixtures::{
    MINUTE, T0, acct, at, begin, event_statuses, fetch, finish, idem, insert, new_account,
    owner_of, runner, task, task_of,
};

/// Runs `n` copies of `op` (given their index) at once, released together;
/// returns their results in index order.
async fn race<T, F, Fut>(n: usize, op: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(n));
    let mut set = JoinSet::new();
    for i in 0..n {
        let barrier = barrier.clone();
        let fut = op(i);
        set.spawn(async move {
            barrier.wait().await;
            (i, fut.await)
        });
    }
    let mut results: Vec<(usize, T)> = set.join_all().await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

pub async fn concurrent_begin_starts_once(store: Arc<dyn Store>) {
    let results = race(50, |i| {
        let store = store.clone();
        async move {
            let b = begin("acct_a", "order-1", "hash-1", T0 + i as i64);
            store.idempotency_begin(&b).await.expect("begin")
        }
    })
    .await;
    let started = results
        .iter()
        .filter(|s| **s == IdempotencyState::Started)
        .count();
    let in_progress = results
        .iter()
        .filter(|s| **s == IdempotencyState::InProgress)
        .count();
    assert_eq!(started, 1, "{results:?}");
    assert_eq!(in_progress, 49, "{results:?}");
}

pub async fn concurrent_stale_takeover_once(store: Arc<dyn Store>) {
    let first = begin("acct_a", "order-1", "hash-1", T0);
    assert_eq!(
        store.idempotency_begin(&first).await.unwrap(),
        IdempotencyState::Started
    );

    // Ten minutes later the record is stale and everyone tries to take it over.
    let results = race(20, |i| {
        let store = store.clone();
        async move {
            let b = begin("acct_a", "order-1", "hash-1", T0 + 10 * MINUTE + i as i64);
            store.idempotency_begin(&b).await.expect("begin")
        }
    })
    .await;
    let started = results
        .iter()
        .filter(|s| **s == IdempotencyState::Started)
        .count();
    assert_eq!(started, 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|s| matches!(s, IdempotencyState::Started | IdempotencyState::InProgress)),
        "{results:?}"
    );

    // Likewise for an expired record, which restarts once.
    store
        .idempotency_complete(
            acct("acct_a"),
            Mode::Live,
            &idem("order-1"),
            owner_of("acct_a", "order-1"),
            200,
            "{}",
        )
        .await
        .unwrap();
    let results = race(20, |_| {
        let store = store.clone();
        async move {
            let b = begin("acct_a", "order-1", "hash-1", T0 + 2 * 24 * 60 * MINUTE);
            store.idempotency_begin(&b).await.expect("begin")
        }
    })
    .await;
    let started = results
        .iter()
        .filter(|s| **s == IdempotencyState::Started)
        .count();
    assert_eq!(started, 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|s| matches!(s, IdempotencyState::Started | IdempotencyState::InProgress)),
        "{results:?}"
    );
}

pub async fn concurrent_claim_once(store: Arc<dyn Store>) {
    let queued = insert(&*store, task("acct_a", "live", "language")).await;
    let results = race(20, |i| {
        let (store, id) = (store.clone(), queued.id);
        async move {
            let runner_id = runner(&format!("runner-{i}"));
            store
                .claim_task(id, &runner_id, at(T0 + 10), at(T0 + MINUTE))
                .await
                .expect("claim")
        }
    })
    .await;
    let winners: Vec<_> = results.into_iter().flatten().collect();
    assert_eq!(winners.len(), 1, "exactly one claim wins");
    let stored = fetch(&*store, queued.id).await;
    assert_eq!(stored, winners[0]);
    assert_eq!(event_statuses(&stored), ["queued", "running"]);
}

pub async fn concurrent_finish_once(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let queued = insert(&*store, task_of(acme.id, "live", "language")).await;
    store
        .claim_task(queued.id, &runner("runner-1"), at(T0 + 10), at(T0 + MINUTE))
        .await
        .unwrap()
        .expect("claim");

    // A result, a cancellation and the sweeper race; one of them ends the task.
    let results = race(12, |i| {
        let (store, id, account) = (store.clone(), queued.id, acme.id);
        async move {
            match i % 3 {
                0 => {
                    let done = finish("succeeded", 1_000, T0 + 20, Some(account));
                    store.finish_task(id, &done).await.expect("finish")
                }
                1 => {
                    let t = store
                        .cancel_task(account, Mode::Live, id, at(T0 + 20))
                        .await;
                    t.expect("cancel").expect("task").status == TaskStatus::Cancelled
                }
                _ => {
                    let ids = store.interrupt_expired(at(T0 + 2 * MINUTE), None).await;
                    !ids.expect("interrupt").is_empty()
                }
            }
        }
    })
    .await;
    // Cancel reports the state afterwards, so a cancel that lost to another
    // cancel also sees "cancelled"; count ends by event instead.
    let stored = fetch(&*store, queued.id).await;
    let statuses = event_statuses(&stored);
    assert_eq!(statuses.len(), 3, "one end event: {statuses:?}");
    assert_eq!(statuses[2], stored.status.as_str());
    let finishes = results.iter().step_by(3).filter(|won| **won).count();
    let sweeps = results
        .iter()
        .skip(2)
        .step_by(3)
        .filter(|won| **won)
        .count();
    match stored.status {
        TaskStatus::Succeeded => assert_eq!((finishes, sweeps), (1, 0)),
        TaskStatus::Cancelled => assert_eq!((finishes, sweeps), (0, 0)),
        TaskStatus::Failed => assert_eq!((finishes, sweeps), (0, 1)),
        other => panic!("unexpected end status {other}"),
    }
    let spend = store.month_spend(acme.id, "2026-01").await.unwrap();
    let charged = if stored.status == TaskStatus::Succeeded {
        1_000
    } else {
        0
    };
    assert_eq!(
        spend, charged,
        "the cost counts once, and only for a result"
    );
}

/// Concurrent reservations against one limit: exactly as many as fit.
pub async fn concurrent_reservations_never_overshoot(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let month = at(T0).month_key();
    let results = race(25, |_| {
        let store = store.clone();
        let month = month.clone();
        async move {
            store
                .reserve_spend(acme.id, &month, 10, 100)
                .await
                .expect("reserve")
        }
    })
    .await;
    assert_eq!(results.iter().filter(|r| **r).count(), 10, "{results:?}");
    assert_eq!(store.month_reserved(acme.id, &month).await.unwrap(), 100);
}

/// Many writes at once (committed together by a batching writer): each
/// caller's answer holds, every task is stored, claimed once and finished
/// with its spend.
pub async fn concurrent_writes_each_commit(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let ended = race(120, |i| {
        let (store, account) = (store.clone(), acme.id);
        async move {
            let t = insert(&*store, task_of(account, "live", "language")).await;
            let claimed = store
                .claim_task(t.id, &runner("runner-1"), at(T0 + 10), at(T0 + MINUTE))
                .await
                .expect("claim")
                .expect("claimable");
            assert_eq!(claimed.status, TaskStatus::Running);
            let done = finish("succeeded", 10, T0 + 20 + i as i64, Some(account));
            assert!(store.finish_task(t.id, &done).await.expect("finish"));
            t.id
        }
    })
    .await;
    for id in ended {
        let t = fetch(&*store, id).await;
        assert_eq!(t.status, TaskStatus::Succeeded);
        assert_eq!(event_statuses(&t), ["queued", "running", "succeeded"]);
        assert_eq!(
            t.output.as_deref(),
            Some(r#"{"language":"fr","confidence":0.98}"#)
        );
        assert_eq!(
            (t.units, t.input_tokens, t.output_tokens),
            (3, Some(12), Some(4))
        );
        assert_eq!((t.cost_micros, t.attempts.0.len()), (10, 1));
        assert_eq!(t.lease_until, None);
    }
    // Tasks stored already running, many at once, are stored as given.
    let stored = race(60, |i| {
        let (store, account) = (store.clone(), acme.id);
        async move {
            let mut t = task_of(
                account,
                if i % 2 == 0 { "live" } else { "test" },
                "language",
            )
            .claimed(&runner("runner-2"), at(T0 + i as i64), at(T0 + MINUTE))
            .unwrap();
            t.idempotency_key = (i % 3 == 0).then(|| idem(&format!("key-{i}")));
            t.reserved_micros = i as i64;
            store.insert_task(&t).await.expect("insert");
            t
        }
    })
    .await;
    for t in stored {
        assert_eq!(fetch(&*store, t.id).await, t);
    }
    let spent = store
        .month_spend(acme.id, &at(T0 + 20).month_key())
        .await
        .expect("spend");
    assert_eq!(spent, 120 * 10);
}

/// A write that fails (a task id stored already) fails alone: the writes
/// committed with it hold.
pub async fn a_failing_write_fails_alone(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let taken = insert(&*store, task_of(acme.id, "live", "language")).await;
    let results = race(40, |i| {
        let (store, account, taken) = (store.clone(), acme.id, taken.clone());
        async move {
            let t = if i == 20 {
                taken
            } else {
                task_of(account, "live", "language")
            };
            (t.id, store.insert_task(&t).await.is_ok())
        }
    })
    .await;
    for (i, (id, stored)) in results.into_iter().enumerate() {
        assert_eq!(stored, i != 20, "write {i}");
        fetch(&*store, id).await;
    }
}

/// Capped claims and inserts racing (as instances do) never overshoot the
/// cap.
pub async fn concurrent_capped_starts_never_overshoot(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let mut queued = Vec::new();
    for _ in 0..20 {
        queued.push(
            insert(&*store, task_of(acme.id, "live", "language"))
                .await
                .id,
        );
    }
    let started = race(40, |i| {
        let (store, account, id) = (store.clone(), acme.id, queued[i % 20]);
        async move {
            if i < 20 {
                matches!(
                    store
                        .claim_task_capped(
                            id,
                            account,
                            taskgate_core::Mode::Live,
                            &runner("runner-1"),
                            at(T0),
                            at(T0 + MINUTE),
                            5
                        )
                        .await
                        .expect("claim"),
                    taskgate_store::Claim::Claimed(_)
                )
            } else {
                let t = task_of(account, "live", "language")
                    .claimed(&runner("runner-2"), at(T0), at(T0 + MINUTE))
                    .unwrap();
                store.insert_running_capped(&t, 5).await.expect("insert")
            }
        }
    })
    .await;
    assert_eq!(started.iter().filter(|s| **s).count(), 5, "{started:?}");
}
