//! Idempotency keys: begin, complete, abandon, purge.

use std::sync::Arc;

use taskgate_core::{Mode, RequestId, TaskId};
use taskgate_store::{IdempotencyBegin, IdempotencyState, Store};

use crate::fixtures::{DAY, MINUTE, T0, acct, at, begin, idem, owner_of};

async fn state(store: &dyn Store, b: &IdempotencyBegin) -> IdempotencyState {
    store.idempotency_begin(b).await.expect("idempotency begin")
}

fn done(status_code: i64, response: &str) -> IdempotencyState {
    IdempotencyState::Done {
        status_code,
        response: response.to_owned(),
    }
}

pub async fn begin_outcomes(store: Arc<dyn Store>) {
    let s = &*store;
    let first = begin("acct_a", "order-1", "hash-1", T0);
    assert_eq!(state(s, &first).await, IdempotencyState::Started);

    // The same request while the first is being answered.
    let retry = begin("acct_a", "order-1", "hash-1", T0 + 1_000);
    assert_eq!(state(s, &retry).await, IdempotencyState::InProgress);
    // The same key with another body.
    let other_body = begin("acct_a", "order-1", "hash-2", T0 + 1_000);
    assert_eq!(state(s, &other_body).await, IdempotencyState::Mismatch);

    // Keys are scoped to the account and the mode.
    assert_eq!(
        state(s, &begin("acct_b", "order-1", "hash-2", T0)).await,
        IdempotencyState::Started
    );
    let mut test_mode = begin("acct_a", "order-1", "hash-1", T0);
    test_mode.mode = Mode::Test;
    assert_eq!(state(s, &test_mode).await, IdempotencyState::Started);

    // Completed: the stored answer, byte for byte.
    let response = "{\"id\": \"task_01\",\n  \"status\": \"queued\", \"note\": \"ünïcode ✓\"}";
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_a", "order-1"),
        202,
        response,
    )
    .await
    .unwrap();
    assert_eq!(state(s, &retry).await, done(202, response));
    assert_eq!(state(s, &retry).await, done(202, response));
    assert_eq!(state(s, &other_body).await, IdempotencyState::Mismatch);
    // A done record is never stale: it replays long after it went quiet.
    let much_later = begin("acct_a", "order-1", "hash-1", T0 + DAY - 1);
    assert_eq!(state(s, &much_later).await, done(202, response));

    // The other scopes are still in progress; completing one touches only it.
    s.idempotency_complete(
        acct("acct_b"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_b", "order-1"),
        400,
        r#"{"error":"bad"}"#,
    )
    .await
    .unwrap();
    assert_eq!(
        state(s, &begin("acct_b", "order-1", "hash-2", T0 + 1)).await,
        done(400, r#"{"error":"bad"}"#)
    );
    assert_eq!(state(s, &test_mode).await, IdempotencyState::InProgress);

    // Completing an unknown key does nothing (and does not create it).
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("never-begun"),
        owner_of("acct_a", "never-begun"),
        200,
        "{}",
    )
    .await
    .unwrap();
    assert_eq!(
        state(s, &begin("acct_a", "never-begun", "hash-9", T0 + 2)).await,
        IdempotencyState::Started
    );
}

pub async fn abandon_frees_in_progress_only(store: Arc<dyn Store>) {
    let s = &*store;
    let b = begin("acct_a", "order-1", "hash-1", T0);
    assert_eq!(state(s, &b).await, IdempotencyState::Started);

    // Abandoned (the request failed before an answer): the key is free again,
    // even for another body.
    s.idempotency_abandon(
        acct("acct_a"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_a", "order-1"),
    )
    .await
    .unwrap();
    let other_body = begin("acct_a", "order-1", "hash-2", T0 + 10);
    assert_eq!(state(s, &other_body).await, IdempotencyState::Started);
    assert_eq!(state(s, &other_body).await, IdempotencyState::InProgress);

    // A completed record stays.
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_a", "order-1"),
        201,
        "{}",
    )
    .await
    .unwrap();
    s.idempotency_abandon(
        acct("acct_a"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_a", "order-1"),
    )
    .await
    .unwrap();
    assert_eq!(state(s, &other_body).await, done(201, "{}"));

    // Only the named key is abandoned; unknown keys are fine.
    let kept = begin("acct_a", "order-2", "hash-1", T0);
    assert_eq!(state(s, &kept).await, IdempotencyState::Started);
    s.idempotency_abandon(
        acct("acct_b"),
        Mode::Live,
        &idem("order-2"),
        owner_of("acct_b", "order-2"),
    )
    .await
    .unwrap();
    s.idempotency_abandon(
        acct("acct_a"),
        Mode::Test,
        &idem("order-2"),
        owner_of("acct_a", "order-2"),
    )
    .await
    .unwrap();
    s.idempotency_abandon(
        acct("acct_a"),
        Mode::Live,
        &idem("missing"),
        owner_of("acct_a", "missing"),
    )
    .await
    .unwrap();
    assert_eq!(state(s, &kept).await, IdempotencyState::InProgress);
}

pub async fn expired_records_restart(store: Arc<dyn Store>) {
    let s = &*store;
    // A completed record and an in-progress one, both from T0.
    assert_eq!(
        state(s, &begin("acct_a", "done", "hash-1", T0)).await,
        IdempotencyState::Started
    );
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("done"),
        owner_of("acct_a", "done"),
        200,
        "{}",
    )
    .await
    .unwrap();
    assert_eq!(
        state(s, &begin("acct_a", "open", "hash-1", T0)).await,
        IdempotencyState::Started
    );

    // Just inside the window: still remembered.
    let edge = T0 + DAY;
    assert_eq!(
        state(s, &begin("acct_a", "done", "hash-1", edge)).await,
        done(200, "{}")
    );
    assert_eq!(
        state(s, &begin("acct_a", "done", "hash-2", edge)).await,
        IdempotencyState::Mismatch
    );

    // Expired: forgotten, whatever the body, and the new request owns the key.
    let later = T0 + DAY + 1;
    let fresh = begin("acct_a", "done", "hash-2", later);
    assert_eq!(state(s, &fresh).await, IdempotencyState::Started);
    assert_eq!(state(s, &fresh).await, IdempotencyState::InProgress);
    assert_eq!(
        state(s, &begin("acct_a", "done", "hash-1", later)).await,
        IdempotencyState::Mismatch
    );
    let reopened = begin("acct_a", "open", "hash-1", later);
    assert_eq!(state(s, &reopened).await, IdempotencyState::Started);
    assert_eq!(state(s, &reopened).await, IdempotencyState::InProgress);
}

pub async fn stale_records_taken_over_once(store: Arc<dyn Store>) {
    let s = &*store;
    assert_eq!(
        state(s, &begin("acct_a", "order-1", "hash-1", T0)).await,
        IdempotencyState::Started
    );

    // Not stale yet (stale_before = now - 5 min = T0): in progress.
    let at_edge = begin("acct_a", "order-1", "hash-1", T0 + 5 * MINUTE);
    assert_eq!(state(s, &at_edge).await, IdempotencyState::InProgress);

    // Stale: one request takes it over, the next sees it in progress again.
    let takeover = begin("acct_a", "order-1", "hash-1", T0 + 6 * MINUTE);
    assert_eq!(state(s, &takeover).await, IdempotencyState::Started);
    assert_eq!(state(s, &takeover).await, IdempotencyState::InProgress);
    // The takeover restarted the clock: five minutes later it is not stale.
    let after = begin("acct_a", "order-1", "hash-1", T0 + 10 * MINUTE);
    assert_eq!(state(s, &after).await, IdempotencyState::InProgress);
    // A stale record with another body is a mismatch, not a takeover.
    let other_body = begin("acct_a", "order-1", "hash-2", T0 + 20 * MINUTE);
    assert_eq!(state(s, &other_body).await, IdempotencyState::Mismatch);

    // The new owner completes it; a completed record is never taken over.
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("order-1"),
        owner_of("acct_a", "order-1"),
        202,
        "{\"ok\":true}",
    )
    .await
    .unwrap();
    let much_later = begin("acct_a", "order-1", "hash-1", T0 + 20 * MINUTE);
    assert_eq!(state(s, &much_later).await, done(202, "{\"ok\":true}"));
}

pub async fn purge_removes_old_records(store: Arc<dyn Store>) {
    let s = &*store;
    assert_eq!(s.idempotency_purge(at(T0 + DAY)).await.unwrap(), 0);

    for (key, ms) in [("a", T0), ("b", T0 + 10), ("c", T0 + 20), ("d", T0 + 30)] {
        assert_eq!(
            state(s, &begin("acct_a", key, "hash-1", ms)).await,
            IdempotencyState::Started
        );
    }
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("a"),
        owner_of("acct_a", "a"),
        200,
        "{}",
    )
    .await
    .unwrap();
    s.idempotency_complete(
        acct("acct_a"),
        Mode::Live,
        &idem("c"),
        owner_of("acct_a", "c"),
        200,
        "{}",
    )
    .await
    .unwrap();

    // Created strictly before the bound: done or not.
    assert_eq!(s.idempotency_purge(at(T0 + 20)).await.unwrap(), 2);
    assert_eq!(s.idempotency_purge(at(T0 + 20)).await.unwrap(), 0);

    let now = T0 + 40;
    for key in ["a", "b"] {
        let b = begin("acct_a", key, "hash-2", now);
        assert_eq!(
            state(s, &b).await,
            IdempotencyState::Started,
            "purged key {key}"
        );
    }
    assert_eq!(
        state(s, &begin("acct_a", "c", "hash-1", now)).await,
        done(200, "{}")
    );
    assert_eq!(
        state(s, &begin("acct_a", "d", "hash-1", now)).await,
        IdempotencyState::InProgress
    );

    assert_eq!(s.idempotency_purge(at(now + 1)).await.unwrap(), 4);
}

/// A record is fenced by its owner: a request whose stale key was taken over
/// can neither complete nor free it, and the task an owner made is kept so
/// that the next request answers with it instead of making another.
pub async fn records_are_fenced_by_their_owner(store: Arc<dyn Store>) {
    let s = &*store;
    let (a, key) = (acct("acct_a"), idem("fenced"));
    let first = IdempotencyBegin {
        owner: RequestId::new(),
        ..begin("acct_a", "fenced", "hash-1", T0)
    };
    assert_eq!(state(s, &first).await, IdempotencyState::Started);

    // Only the owner attaches, completes or frees.
    let stranger = RequestId::new();
    let task = TaskId::new();
    assert!(
        !s.idempotency_attach(a, Mode::Live, &key, stranger, task)
            .await
            .unwrap()
    );
    assert!(
        !s.idempotency_complete(a, Mode::Live, &key, stranger, 200, "{}")
            .await
            .unwrap()
    );
    s.idempotency_abandon(a, Mode::Live, &key, stranger)
        .await
        .unwrap();
    assert_eq!(state(s, &first).await, IdempotencyState::InProgress);

    // The first request is presumed dead; another takes the key over.
    let second = IdempotencyBegin {
        owner: RequestId::new(),
        ..begin("acct_a", "fenced", "hash-1", T0 + 6 * MINUTE)
    };
    assert_eq!(state(s, &second).await, IdempotencyState::Started);
    // The first one wakes up: it can neither free nor complete the key.
    s.idempotency_abandon(a, Mode::Live, &key, first.owner)
        .await
        .unwrap();
    assert!(
        !s.idempotency_complete(a, Mode::Live, &key, first.owner, 500, "{\"late\":true}")
            .await
            .unwrap()
    );
    assert_eq!(state(s, &second).await, IdempotencyState::InProgress);

    // The second makes its task; once attached, abandoning never frees the
    // key (a task exists), even for its owner.
    assert!(
        s.idempotency_attach(a, Mode::Live, &key, second.owner, task)
            .await
            .unwrap()
    );
    s.idempotency_abandon(a, Mode::Live, &key, second.owner)
        .await
        .unwrap();
    assert_eq!(state(s, &second).await, IdempotencyState::InProgress);

    // The second dies before answering: the next request, once the record is
    // stale, gets the key and the task to answer with, never a fresh start.
    let third = IdempotencyBegin {
        owner: RequestId::new(),
        ..begin("acct_a", "fenced", "hash-1", T0 + 12 * MINUTE)
    };
    assert_eq!(
        state(s, &third).await,
        IdempotencyState::Orphaned { task_id: task }
    );
    assert!(
        !s.idempotency_complete(a, Mode::Live, &key, second.owner, 200, "{\"second\":1}")
            .await
            .unwrap()
    );
    assert!(
        s.idempotency_complete(a, Mode::Live, &key, third.owner, 202, "{\"third\":1}")
            .await
            .unwrap()
    );
    assert_eq!(state(s, &first).await, done(202, "{\"third\":1}"));
}
