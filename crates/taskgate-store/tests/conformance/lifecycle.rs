//! Tasks in motion: claim, finish (and spend), cancel, leases, interruption.

use std::sync::Arc;

use taskgate_core::{
    AccountId, Attempt, AttemptOutcome, Attempts, Mode, RunnerId, TaskId, TaskStatus,
};
use taskgate_store::{Claim, Store, TaskFinish, TaskQuery};

use crate::fixtures::{
    FEB, HOUR, MINUTE, T0, acct, at, ended_task, error_code, event_statuses, events, fetch, finish,
    ids, insert, last_event_at, local_attempt, mode, new_account, runner, running_task, task,
    task_of, unknown_task,
};

pub async fn claim_only_once(store: Arc<dyn Store>) {
    let queued = insert(&*store, task("acct_a", "live", "language")).await;
    let now = T0 + 1_000;
    let lease = now + MINUTE;

    let claimed = store
        .claim_task(queued.id, &runner("runner-1"), at(now), at(lease))
        .await
        .unwrap()
        .expect("a queued task is claimable");
    assert_eq!(claimed.status, TaskStatus::Running);
    assert_eq!(claimed.started_at, Some(at(now)));
    assert_eq!(
        claimed.runner.as_ref().map(RunnerId::as_str),
        Some("runner-1")
    );
    assert_eq!(claimed.lease_until, Some(at(lease)));
    assert_eq!(claimed.completed_at, None);
    // The rest of the task is untouched.
    assert_eq!(claimed.input, queued.input);
    assert_eq!(claimed.metadata, queued.metadata);
    assert_eq!(claimed.attempts, queued.attempts);
    assert_eq!(claimed.created_at, queued.created_at);
    // One event appended to the JSON array.
    assert_eq!(event_statuses(&claimed), ["queued", "running"]);
    assert_eq!(events(&claimed)[0]["at"], T0);
    assert_eq!(last_event_at(&claimed), now);
    // What came back is what is stored.
    assert_eq!(fetch(&*store, queued.id).await, claimed);

    // Only once: a second claim, by anyone, gets nothing and changes nothing.
    for name in ["runner-1", "runner-2"] {
        let again = store
            .claim_task(queued.id, &runner(name), at(now + 5), at(now + HOUR))
            .await;
        assert_eq!(again.unwrap(), None);
    }
    assert_eq!(fetch(&*store, queued.id).await, claimed);

    // Unknown, ended and cancelled tasks cannot be claimed.
    assert_eq!(
        store
            .claim_task(unknown_task(), &runner("runner-1"), at(now), at(lease))
            .await
            .unwrap(),
        None
    );
    let ended = insert(
        &*store,
        ended_task("acct_a", "live", "language", "succeeded"),
    )
    .await;
    assert_eq!(
        store
            .claim_task(ended.id, &runner("runner-1"), at(now), at(lease))
            .await
            .unwrap(),
        None
    );
    assert_eq!(fetch(&*store, ended.id).await, ended);
    let cancelled = insert(&*store, task("acct_a", "live", "language")).await;
    store
        .cancel_task(acct("acct_a"), mode("live"), cancelled.id, at(now))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_task(cancelled.id, &runner("runner-1"), at(now), at(lease))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        fetch(&*store, cancelled.id).await.status,
        TaskStatus::Cancelled
    );
}

pub async fn finish_only_from_running(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let claimed = running_task(&*store, acme.id, "runner-1", T0 + 10, T0 + MINUTE).await;

    let done = finish("succeeded", 1_500, T0 + 20, Some(acme.id));
    assert!(store.finish_task(claimed.id, &done).await.unwrap());
    let finished = fetch(&*store, claimed.id).await;
    assert_eq!(finished.status, TaskStatus::Succeeded);
    assert_eq!(finished.output, done.output);
    assert_eq!(finished.error, None);
    assert_eq!(finished.units, 3);
    assert_eq!(finished.input_tokens, Some(12));
    assert_eq!(finished.output_tokens, Some(4));
    assert_eq!(finished.reasoning_tokens, Some(3));
    assert_eq!(finished.cached_input_tokens, Some(8));
    assert_eq!(finished.cost_micros, 1_500);
    assert_eq!(finished.attempts, done.attempts);
    assert_eq!(finished.completed_at, Some(at(T0 + 20)));
    assert_eq!(finished.lease_until, None);
    assert_eq!(finished.started_at, Some(at(T0 + 10)));
    assert_eq!(
        finished.runner.as_ref().map(RunnerId::as_str),
        Some("runner-1")
    );
    assert_eq!(finished.input, claimed.input);
    assert_eq!(
        event_statuses(&finished),
        ["queued", "running", "succeeded"]
    );
    assert_eq!(last_event_at(&finished), T0 + 20);

    // A second finish is refused and changes nothing, spend included.
    let late = finish("failed", 9_999, T0 + 30, Some(acme.id));
    assert!(!store.finish_task(claimed.id, &late).await.unwrap());
    assert_eq!(fetch(&*store, claimed.id).await, finished);
    assert_eq!(store.month_spend(acme.id, "2026-01").await.unwrap(), 1_500);

    // A failure keeps its error.
    let other = running_task(&*store, acme.id, "runner-1", T0 + 40, T0 + MINUTE).await;
    let failure = finish("failed", 0, T0 + 50, Some(acme.id));
    assert!(store.finish_task(other.id, &failure).await.unwrap());
    let failed = fetch(&*store, other.id).await;
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.output, None);
    assert_eq!(error_code(&failed).as_deref(), Some("provider_error"));
    assert_eq!(event_statuses(&failed), ["queued", "running", "failed"]);

    // Never claimed, or unknown: refused.
    let queued = insert(&*store, task_of(acme.id, "live", "language")).await;
    let early = finish("succeeded", 700, T0 + 60, Some(acme.id));
    assert!(!store.finish_task(queued.id, &early).await.unwrap());
    assert_eq!(fetch(&*store, queued.id).await, queued);
    assert!(!store.finish_task(unknown_task(), &early).await.unwrap());
    assert_eq!(store.month_spend(acme.id, "2026-01").await.unwrap(), 1_500);
}

pub async fn finish_charges_spend(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let globex = new_account(&*store, "Globex").await;
    assert_eq!(store.month_spend(acme.id, "2026-01").await.unwrap(), 0);
    assert_eq!(
        store
            .month_spend(AccountId::new(), "2026-01")
            .await
            .unwrap(),
        0
    );

    let finish_one = async |account: AccountId,
                            status: &str,
                            cost: i64,
                            when: i64,
                            charge: Option<AccountId>| {
        let t = running_task(&*store, account, "runner-1", when - 10, when + MINUTE).await;
        let done = finish(status, cost, when, charge);
        assert!(store.finish_task(t.id, &done).await.unwrap());
        assert_eq!(fetch(&*store, t.id).await.cost_micros, cost);
    };

    // Live costs add up per account and per month of completion.
    finish_one(acme.id, "succeeded", 1_200, T0 + HOUR, Some(acme.id)).await;
    finish_one(acme.id, "failed", 300, T0 + 2 * HOUR, Some(acme.id)).await;
    finish_one(acme.id, "succeeded", 4_000, FEB - 1, Some(acme.id)).await;
    finish_one(acme.id, "succeeded", 50, FEB, Some(acme.id)).await;
    finish_one(globex.id, "succeeded", 77, T0 + HOUR, Some(globex.id)).await;
    // No cost, or no account to charge (test mode): no spend.
    finish_one(acme.id, "succeeded", 0, T0 + 3 * HOUR, Some(acme.id)).await;
    finish_one(acme.id, "succeeded", 8_000, T0 + 4 * HOUR, None).await;
    finish_one(globex.id, "succeeded", 0, FEB + HOUR, Some(globex.id)).await;

    assert_eq!(store.month_spend(acme.id, "2026-01").await.unwrap(), 5_500);
    assert_eq!(store.month_spend(acme.id, "2026-02").await.unwrap(), 50);
    assert_eq!(store.month_spend(acme.id, "2025-12").await.unwrap(), 0);
    assert_eq!(store.month_spend(globex.id, "2026-01").await.unwrap(), 77);
    assert_eq!(store.month_spend(globex.id, "2026-02").await.unwrap(), 0);

    // Large sums need 64 bits.
    let big = 3_000_000_000_000;
    finish_one(globex.id, "succeeded", big, FEB + 2 * HOUR, Some(globex.id)).await;
    finish_one(globex.id, "succeeded", big, FEB + 3 * HOUR, Some(globex.id)).await;
    assert_eq!(
        store.month_spend(globex.id, "2026-02").await.unwrap(),
        2 * big
    );
}

pub async fn finish_after_cancel_is_dropped(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let claimed = running_task(&*store, acme.id, "runner-1", T0 + 10, T0 + MINUTE).await;
    let cancelled = store
        .cancel_task(acme.id, mode("live"), claimed.id, at(T0 + 15))
        .await
        .unwrap()
        .expect("cancel");
    assert_eq!(cancelled.status, TaskStatus::Cancelled);

    let late = finish("succeeded", 2_000, T0 + 20, Some(acme.id));
    assert!(!store.finish_task(claimed.id, &late).await.unwrap());
    let stored = fetch(&*store, claimed.id).await;
    assert_eq!(stored, cancelled);
    assert_eq!(stored.output, None);
    assert_eq!(stored.cost_micros, 0);
    assert_eq!(event_statuses(&stored), ["queued", "running", "cancelled"]);
    assert_eq!(store.month_spend(acme.id, "2026-01").await.unwrap(), 0);

    // The stopped execution's attempts are recorded, and nothing else moves.
    let attempts = Attempts(vec![Attempt {
        provider: "openai".to_owned(),
        outcome: AttemptOutcome::Cancelled,
        ..local_attempt(T0 + 15)
    }]);
    assert!(
        store
            .record_cancelled_attempts(claimed.id, &attempts)
            .await
            .unwrap()
    );
    let stored = fetch(&*store, claimed.id).await;
    assert_eq!(stored.attempts, attempts);
    assert_eq!(stored.status, TaskStatus::Cancelled);
    assert_eq!(stored.completed_at, cancelled.completed_at);

    // Only a cancelled task's attempts can be set this way.
    let other = running_task(&*store, acme.id, "runner-1", T0 + 30, T0 + MINUTE).await;
    assert!(
        !store
            .record_cancelled_attempts(other.id, &attempts)
            .await
            .unwrap()
    );
    assert_eq!(fetch(&*store, other.id).await.attempts, other.attempts);
}

pub async fn cancel_transitions(store: Arc<dyn Store>) {
    let a = "acct_a";

    // Queued → cancelled.
    let queued = insert(&*store, task(a, "live", "language")).await;
    let cancelled = store
        .cancel_task(acct(a), mode("live"), queued.id, at(T0 + 100))
        .await
        .unwrap()
        .expect("cancel a queued task");
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(cancelled.completed_at, Some(at(T0 + 100)));
    assert_eq!(cancelled.lease_until, None);
    assert_eq!(cancelled.input, queued.input);
    assert_eq!(event_statuses(&cancelled), ["queued", "cancelled"]);
    assert_eq!(last_event_at(&cancelled), T0 + 100);
    assert_eq!(fetch(&*store, queued.id).await, cancelled);

    // Running → cancelled, with its event after the running one.
    let running = running_task(&*store, acct(a), "runner-1", T0 + 200, T0 + HOUR).await;
    let cancelled_running = store
        .cancel_task(acct(a), mode("live"), running.id, at(T0 + 300))
        .await
        .unwrap()
        .expect("cancel a running task");
    assert_eq!(cancelled_running.status, TaskStatus::Cancelled);
    assert_eq!(cancelled_running.completed_at, Some(at(T0 + 300)));
    assert_eq!(cancelled_running.started_at, Some(at(T0 + 200)));
    assert_eq!(cancelled_running.lease_until, None);
    assert_eq!(
        event_statuses(&cancelled_running),
        ["queued", "running", "cancelled"]
    );
    let ats: Vec<_> = events(&cancelled_running)
        .iter()
        .map(|e| e["at"].as_i64())
        .collect();
    assert_eq!(ats, [Some(T0), Some(T0 + 200), Some(T0 + 300)]);
    assert_eq!(fetch(&*store, running.id).await, cancelled_running);

    // Cancelling again returns the task unchanged.
    let again = store
        .cancel_task(acct(a), mode("live"), running.id, at(T0 + 400))
        .await
        .unwrap();
    assert_eq!(again.as_ref(), Some(&cancelled_running));

    // Ended tasks are returned unchanged.
    for status in ["succeeded", "failed"] {
        let ended = insert(&*store, ended_task(a, "live", "language", status)).await;
        let result = store
            .cancel_task(acct(a), mode("live"), ended.id, at(T0 + 500))
            .await
            .unwrap();
        assert_eq!(result.as_ref(), Some(&ended));
        assert_eq!(fetch(&*store, ended.id).await, ended);
    }

    // Unknown, or someone else's (other account or mode): None, untouched.
    assert_eq!(
        store
            .cancel_task(acct(a), mode("live"), unknown_task(), at(T0))
            .await
            .unwrap(),
        None
    );
    let other = insert(&*store, task(a, "live", "language")).await;
    assert_eq!(
        store
            .cancel_task(acct("acct_b"), mode("live"), other.id, at(T0))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .cancel_task(acct(a), mode("test"), other.id, at(T0))
            .await
            .unwrap(),
        None
    );
    assert_eq!(fetch(&*store, other.id).await, other);
}

pub async fn renew_counts_own_running_tasks(store: Arc<dyn Store>) {
    let a = "acct_a";
    let mine1 = running_task(&*store, acct(a), "runner-a", T0, T0 + MINUTE).await;
    let mine2 = running_task(&*store, acct(a), "runner-a", T0, T0 + MINUTE).await;
    let theirs = running_task(&*store, acct(a), "runner-b", T0, T0 + MINUTE).await;
    // runner-a's finished and cancelled tasks are not renewed.
    let done = running_task(&*store, acct(a), "runner-a", T0, T0 + MINUTE).await;
    assert!(
        store
            .finish_task(done.id, &finish("succeeded", 0, T0 + 5, None))
            .await
            .unwrap()
    );
    let gone = running_task(&*store, acct(a), "runner-a", T0, T0 + MINUTE).await;
    store
        .cancel_task(acct(a), mode("live"), gone.id, at(T0 + 5))
        .await
        .unwrap();
    let queued = insert(&*store, task(a, "live", "language")).await;
    let lost = running_task(&*store, acct(a), "runner-a", T0, T0 + MINUTE).await;
    // Every id the runner names, but only its running ones are renewed; a
    // running task it does not name (its execution was lost) is not.
    let named: Vec<TaskId> = [&mine1, &mine2, &theirs, &done, &gone, &queued]
        .iter()
        .map(|t| t.id)
        .collect();

    assert_eq!(
        store
            .renew_leases(&runner("runner-a"), &named, at(T0 + 2 * MINUTE))
            .await
            .unwrap(),
        2
    );
    assert_eq!(fetch(&*store, lost.id).await, lost);
    for t in [&mine1, &mine2] {
        let renewed = fetch(&*store, t.id).await;
        assert_eq!(renewed.lease_until, Some(at(T0 + 2 * MINUTE)));
        assert_eq!(renewed.status, TaskStatus::Running);
        assert_eq!(renewed.events, t.events);
    }
    assert_eq!(fetch(&*store, theirs.id).await, theirs);
    assert_eq!(fetch(&*store, done.id).await.lease_until, None);
    assert_eq!(fetch(&*store, gone.id).await.lease_until, None);
    assert_eq!(fetch(&*store, queued.id).await, queued);

    assert_eq!(
        store
            .renew_leases(&runner("runner-b"), &named, at(T0 + 3 * MINUTE))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .renew_leases(&runner("runner-z"), &named, at(T0 + 3 * MINUTE))
            .await
            .unwrap(),
        0
    );
}

pub async fn interrupt_expired_and_dead_runner(store: Arc<dyn Store>) {
    let a = "acct_a";
    let now = T0 + HOUR;
    // runner-a stopped renewing: its lease ran out.
    let expired = running_task(&*store, acct(a), "runner-a", T0, now - MINUTE).await;
    // runner-b is alive: its fresh lease is respected.
    let alive = running_task(&*store, acct(a), "runner-b", T0, now + MINUTE).await;
    // runner-dead is this instance's previous life: its lease is still fresh.
    let orphan = running_task(&*store, acct(a), "runner-dead", T0, now + MINUTE).await;
    let queued = insert(&*store, task(a, "live", "language")).await;
    let ended = insert(&*store, ended_task(a, "live", "language", "succeeded")).await;

    assert_eq!(
        store.interrupt_expired(at(now), None).await.unwrap(),
        ids(&[&expired])
    );
    let interrupted = fetch(&*store, expired.id).await;
    assert_eq!(interrupted.status, TaskStatus::Failed);
    assert_eq!(error_code(&interrupted).as_deref(), Some("interrupted"));
    assert_eq!(interrupted.completed_at, Some(at(now)));
    assert_eq!(interrupted.lease_until, None);
    assert_eq!(
        event_statuses(&interrupted),
        ["queued", "running", "failed"]
    );
    assert_eq!(last_event_at(&interrupted), now);
    assert_eq!(fetch(&*store, orphan.id).await, orphan);

    // The dead runner's tasks end whatever their lease; others stay.
    let dead = store
        .interrupt_expired(at(now), Some(&runner("runner-dead")))
        .await
        .unwrap();
    assert_eq!(dead, ids(&[&orphan]));
    let interrupted = fetch(&*store, orphan.id).await;
    assert_eq!(interrupted.status, TaskStatus::Failed);
    assert_eq!(error_code(&interrupted).as_deref(), Some("interrupted"));
    assert_eq!(
        event_statuses(&interrupted),
        ["queued", "running", "failed"]
    );

    assert_eq!(fetch(&*store, alive.id).await, alive);
    assert_eq!(fetch(&*store, queued.id).await, queued);
    assert_eq!(fetch(&*store, ended.id).await, ended);

    // Nothing left to interrupt; a late result of an interrupted task is dropped.
    assert!(
        store
            .interrupt_expired(at(now), Some(&runner("runner-dead")))
            .await
            .unwrap()
            .is_empty()
    );
    let late = finish("succeeded", 100, now + 1, Some(acct(a)));
    assert!(!store.finish_task(expired.id, &late).await.unwrap());
    assert_eq!(fetch(&*store, expired.id).await.status, TaskStatus::Failed);

    // Once its lease runs out, the live runner's task is interrupted too.
    let later = now + 2 * MINUTE;
    assert_eq!(
        store.interrupt_expired(at(later), None).await.unwrap(),
        ids(&[&alive])
    );
    // Several at once.
    let x = running_task(&*store, acct(a), "runner-c", later, later + MINUTE).await;
    let y = running_task(&*store, acct(a), "runner-c", later, later + MINUTE).await;
    let mut both = store
        .interrupt_expired(at(later + HOUR), None)
        .await
        .unwrap();
    both.sort();
    assert_eq!(both, ids(&[&x, &y]));
}

/// Spend reservations: the check and the reservation are one step, and a
/// task's end (finish, cancel, interrupt) gives its reservation back, the
/// finish charging the real cost instead.
pub async fn reservations_hold_the_limit_and_are_settled(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let jan = at(T0).month_key();
    let reserve = |amount: i64| {
        let store = store.clone();
        async move {
            store
                .reserve_spend(acme.id, &at(T0).month_key(), amount, 100)
                .await
                .unwrap()
        }
    };
    assert!(!reserve(101).await, "more than the limit");
    assert!(reserve(60).await);
    assert!(!reserve(41).await, "past the limit with the reservations");
    assert!(reserve(40).await);
    assert_eq!(store.month_reserved(acme.id, &jan).await.unwrap(), 100);
    assert!(!reserve(0).await, "the limit is reached");
    store.release_spend(acme.id, &jan, 40).await.unwrap();
    store.release_spend(acme.id, &jan, 60).await.unwrap();
    assert_eq!(store.month_reserved(acme.id, &jan).await.unwrap(), 0);

    // A running task holding a reservation of `amount`.
    let reserved_running = |amount: i64, lease_until: i64| {
        let store = store.clone();
        async move {
            let mut t = task_of(acme.id, "live", "language");
            t.reserved_micros = amount;
            let t = insert(&*store, t).await;
            store
                .claim_task(t.id, &runner("runner-1"), at(T0 + 1), at(lease_until))
                .await
                .unwrap()
                .unwrap()
        }
    };

    // A finished task: its reservation back, its real cost charged.
    assert!(reserve(50).await);
    let t = reserved_running(50, T0 + HOUR).await;
    assert!(
        store
            .finish_task(t.id, &finish("succeeded", 30, T0 + 2, Some(acme.id)))
            .await
            .unwrap()
    );
    assert_eq!(store.month_reserved(acme.id, &jan).await.unwrap(), 0);
    assert_eq!(store.month_spend(acme.id, &jan).await.unwrap(), 30);

    // Created in January, finished in February: the reservation goes back
    // in January, the cost is charged in February; many at once, as sums.
    let feb = at(FEB).month_key();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        assert!(reserve(15).await);
        tasks.push(reserved_running(15, FEB + HOUR).await.id);
    }
    let mut finishes = tokio::task::JoinSet::new();
    for id in tasks {
        let store = store.clone();
        finishes.spawn(async move {
            let done = finish("succeeded", 7, FEB + 5, Some(acme.id));
            store.finish_task(id, &done).await.unwrap()
        });
    }
    assert!(finishes.join_all().await.into_iter().all(|ended| ended));
    assert_eq!(store.month_reserved(acme.id, &jan).await.unwrap(), 0);
    assert_eq!(store.month_spend(acme.id, &jan).await.unwrap(), 30);
    assert_eq!(store.month_reserved(acme.id, &feb).await.unwrap(), 0);
    assert_eq!(store.month_spend(acme.id, &feb).await.unwrap(), 28);

    // Cancelled (queued or running) and interrupted tasks give theirs back.
    for end in ["cancel queued", "cancel running", "interrupt"] {
        assert!(reserve(20).await, "{end}");
        let mut t = task_of(acme.id, "live", "language");
        t.reserved_micros = 20;
        let t = insert(&*store, t).await;
        if end != "cancel queued" {
            store
                .claim_task(t.id, &runner("runner-1"), at(T0 + 1), at(T0 + 2))
                .await
                .unwrap()
                .unwrap();
        }
        if end == "interrupt" {
            assert_eq!(
                store.interrupt_expired(at(T0 + 10), None).await.unwrap(),
                vec![t.id]
            );
        } else {
            store
                .cancel_task(acme.id, mode("live"), t.id, at(T0 + 3))
                .await
                .unwrap();
        }
        assert_eq!(
            store.month_reserved(acme.id, &jan).await.unwrap(),
            0,
            "{end}"
        );
    }
    assert_eq!(store.month_spend(acme.id, &jan).await.unwrap(), 30);
}

/// The cap of running tasks counts the account's running tasks in the store:
/// a capped insert or claim is refused at the cap and writes nothing.
pub async fn capped_inserts_and_claims_hold_the_cap(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let other = new_account(&*store, "Other").await;
    let running = |account| {
        let t = task_of(account, "live", "language");
        t.claimed(&runner("runner-1"), at(T0), at(T0 + MINUTE))
            .unwrap()
    };
    assert!(
        store
            .insert_running_capped(&running(acme.id), 2)
            .await
            .unwrap()
    );
    let queued = insert(&*store, task_of(acme.id, "live", "language")).await;
    let claim_under = |id, cap| {
        let store = store.clone();
        async move {
            store
                .claim_task_capped(
                    id,
                    acme.id,
                    Mode::Live,
                    &runner("runner-2"),
                    at(T0 + 1),
                    at(T0 + MINUTE),
                    cap,
                )
                .await
                .unwrap()
        }
    };
    let claim = |id| claim_under(id, 2);
    assert!(matches!(claim(queued.id).await, Claim::Claimed(_)));
    assert!(
        matches!(claim_under(queued.id, 9).await, Claim::Gone),
        "claimed once"
    );
    // Two running: at the cap of 2, for inserts and claims alike.
    let refused = running(acme.id);
    assert!(!store.insert_running_capped(&refused, 2).await.unwrap());
    assert!(store.get_task_by_id(refused.id).await.unwrap().is_none());
    let waiting = insert(&*store, task_of(acme.id, "live", "language")).await;
    assert!(matches!(claim(waiting.id).await, Claim::AtCap));
    assert_eq!(fetch(&*store, waiting.id).await.status, TaskStatus::Queued);
    // Another account's tasks do not count.
    assert!(
        store
            .insert_running_capped(&running(other.id), 1)
            .await
            .unwrap()
    );
    // One ends: room for one more.
    let done = finish("succeeded", 0, T0 + 5, None);
    assert!(store.finish_task(queued.id, &done).await.unwrap());
    assert!(matches!(claim(waiting.id).await, Claim::Claimed(_)));
    // Only running tasks go through the capped insert.
    let queued_task = task_of(acme.id, "live", "language");
    assert!(store.insert_running_capped(&queued_task, 9).await.is_err());
}

/// Live and test tasks have caps of their own: an account's running test
/// tasks never count against its live cap, nor its live ones against its
/// test cap.
pub async fn caps_count_each_mode_apart(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let running = |mode_name| {
        task_of(acme.id, mode_name, "language")
            .claimed(&runner("runner-1"), at(T0), at(T0 + MINUTE))
            .unwrap()
    };
    let claim = |id, mode, cap| {
        let store = store.clone();
        async move {
            store
                .claim_task_capped(
                    id,
                    acme.id,
                    mode,
                    &runner("runner-2"),
                    at(T0 + 1),
                    at(T0 + MINUTE),
                    cap,
                )
                .await
                .unwrap()
        }
    };
    // The test cap of 2 is full.
    let first_test = running("test");
    assert!(store.insert_running_capped(&first_test, 2).await.unwrap());
    assert!(
        store
            .insert_running_capped(&running("test"), 2)
            .await
            .unwrap()
    );
    assert!(
        !store
            .insert_running_capped(&running("test"), 2)
            .await
            .unwrap()
    );
    let test_waiting = insert(&*store, task_of(acme.id, "test", "language")).await;
    assert!(matches!(
        claim(test_waiting.id, Mode::Test, 2).await,
        Claim::AtCap
    ));
    // A live cap of 1 is empty all the same: a live task starts, by insert
    // or by claim.
    let live_queued = insert(&*store, task_of(acme.id, "live", "language")).await;
    assert!(matches!(
        claim(live_queued.id, Mode::Live, 1).await,
        Claim::Claimed(_)
    ));
    assert!(
        !store
            .insert_running_capped(&running("live"), 1)
            .await
            .unwrap()
    );
    // The live task running does not hold back the test tasks either: one
    // test task ends, and the waiting one starts under its cap of 2.
    let done = finish("succeeded", 0, T0 + 5, None);
    assert!(store.finish_task(first_test.id, &done).await.unwrap());
    assert!(matches!(
        claim(test_waiting.id, Mode::Test, 2).await,
        Claim::Claimed(_)
    ));
}

/// Retention: ended tasks created before the bound go, oldest first and at
/// most `limit` at a time; newer ones and unfinished ones stay.
pub async fn purge_removes_old_ended_tasks_only(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let made_at = |ms: i64, status_name: &str| {
        let mut t = ended_task("acct_a", "live", "language", status_name);
        t.account_id = acme.id;
        t.id = TaskId::floor(at(ms)); // `at` never goes back in time
        t.created_at = at(ms);
        t
    };
    let mut old = Vec::new();
    for (i, status_name) in ["succeeded", "failed", "cancelled"].iter().enumerate() {
        old.push(
            insert(&*store, made_at(T0 + i as i64, status_name))
                .await
                .id,
        );
    }
    let mut queued_old = task_of(acme.id, "live", "language");
    queued_old.id = TaskId::floor(at(T0 + 5));
    let queued_old = insert(&*store, queued_old).await.id;
    let recent = insert(&*store, made_at(T0 + HOUR, "succeeded")).await.id;

    let bound = at(T0 + MINUTE);
    assert_eq!(
        store.purge_tasks(bound, None, 2).await.unwrap(),
        2,
        "at most the limit"
    );
    assert!(
        store.get_task_by_id(old[0]).await.unwrap().is_none(),
        "oldest first"
    );
    assert!(store.get_task_by_id(old[1]).await.unwrap().is_none());
    assert!(store.get_task_by_id(old[2]).await.unwrap().is_some());
    assert_eq!(store.purge_tasks(bound, None, 2).await.unwrap(), 1);
    assert_eq!(store.purge_tasks(bound, None, 2).await.unwrap(), 0);
    assert_eq!(fetch(&*store, queued_old).await.status, TaskStatus::Queued);
    fetch(&*store, recent).await;
}

/// `test_task_retention_days`: a purge of one mode deletes that mode's old
/// ended tasks whole (input and output with them), oldest first, and
/// leaves the other mode's, the recent ones and the unfinished ones.
pub async fn purge_of_one_mode_leaves_the_other(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let made_at = |ms: i64, mode_name: &str, status_name: &str| {
        let mut t = ended_task("acct_a", mode_name, "language", status_name);
        t.account_id = acme.id;
        t.id = TaskId::floor(at(ms));
        t.created_at = at(ms);
        t
    };
    let old_live = insert(&*store, made_at(T0, "live", "succeeded")).await.id;
    let mut old_test = Vec::new();
    for (i, status_name) in ["succeeded", "failed", "cancelled"].iter().enumerate() {
        old_test.push(
            insert(&*store, made_at(T0 + 1 + i as i64, "test", status_name))
                .await
                .id,
        );
    }
    let old_live_2 = insert(&*store, made_at(T0 + 10, "live", "failed")).await.id;
    let mut running_test = task_of(acme.id, "test", "language");
    running_test.id = TaskId::floor(at(T0 + 20));
    let running_test = running_test
        .claimed(&runner("runner-1"), at(T0 + 20), at(T0 + HOUR))
        .unwrap();
    store.insert_task(&running_test).await.unwrap();
    let mut queued_test = task_of(acme.id, "test", "language");
    queued_test.id = TaskId::floor(at(T0 + 21));
    let queued_test = insert(&*store, queued_test).await.id;
    let recent_test = insert(&*store, made_at(T0 + HOUR, "test", "succeeded"))
        .await
        .id;

    let bound = at(T0 + MINUTE);
    assert_eq!(
        store.purge_tasks(bound, Some(Mode::Test), 2).await.unwrap(),
        2,
        "at most the limit"
    );
    assert!(store.get_task_by_id(old_test[0]).await.unwrap().is_none());
    assert!(store.get_task_by_id(old_test[1]).await.unwrap().is_none());
    assert!(store.get_task_by_id(old_test[2]).await.unwrap().is_some());
    assert_eq!(
        store.purge_tasks(bound, Some(Mode::Test), 2).await.unwrap(),
        1
    );
    assert_eq!(
        store.purge_tasks(bound, Some(Mode::Test), 2).await.unwrap(),
        0
    );
    // Live tasks as old stay, as do unfinished and recent test tasks.
    fetch(&*store, old_live).await;
    fetch(&*store, old_live_2).await;
    assert_eq!(
        fetch(&*store, running_test.id).await.status,
        TaskStatus::Running
    );
    assert_eq!(fetch(&*store, queued_test).await.status, TaskStatus::Queued);
    fetch(&*store, recent_test).await;
    // A purge of live tasks takes the live ones only.
    assert_eq!(
        store
            .purge_tasks(bound, Some(Mode::Live), 10)
            .await
            .unwrap(),
        2
    );
    assert!(store.get_task_by_id(old_live).await.unwrap().is_none());
    assert!(store.get_task_by_id(old_live_2).await.unwrap().is_none());
    fetch(&*store, recent_test).await;
}

/// A task's usage counts, reasoning and cached input included, as each way
/// of ending it writes them: a stored running task, a task stored already
/// claimed, and a sync call's task (held back by SQLite until its end);
/// counts a provider did not report stay unknown, not zero.
pub async fn usage_counts_round_trip_every_way_a_task_ends(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let claimed = || {
        task_of(acme.id, "live", "language")
            .claimed(&runner("runner-1"), at(T0 + 1), at(T0 + MINUTE))
            .unwrap()
    };
    let counted = TaskFinish {
        input_tokens: Some(2_000),
        output_tokens: Some(300),
        reasoning_tokens: Some(256),
        cached_input_tokens: Some(1_536),
        ..finish("succeeded", 77, T0 + 20, Some(acme.id))
    };
    let unknown = TaskFinish {
        reasoning_tokens: None,
        cached_input_tokens: None,
        ..counted.clone()
    };

    let stored = running_task(&*store, acme.id, "runner-1", T0 + 1, T0 + MINUTE).await;
    let capped = claimed();
    assert!(store.insert_running_capped(&capped, 10).await.unwrap());
    let untold = claimed();
    store.insert_task_unflushed(&untold).await.unwrap();
    let bare = running_task(&*store, acme.id, "runner-1", T0 + 1, T0 + MINUTE).await;

    for (t, f) in [
        (&stored, &counted),
        (&capped, &counted),
        (&untold, &counted),
        (&bare, &unknown),
    ] {
        assert!(store.finish_task(t.id, f).await.unwrap());
        let got = fetch(&*store, t.id).await;
        assert_eq!(
            (
                got.input_tokens,
                got.output_tokens,
                got.reasoning_tokens,
                got.cached_input_tokens,
                got.cost_micros,
            ),
            (
                f.input_tokens,
                f.output_tokens,
                f.reasoning_tokens,
                f.cached_input_tokens,
                77,
            ),
            "{}",
            t.id
        );
        // The list reads the same columns.
        let listed = store
            .list_tasks(&TaskQuery::new(acme.id, Mode::Live, 100))
            .await
            .unwrap();
        let row = listed.iter().find(|r| r.id == t.id).expect("listed");
        assert_eq!(
            (row.reasoning_tokens, row.cached_input_tokens),
            (f.reasoning_tokens, f.cached_input_tokens)
        );
    }
}
