//! Webhooks: endpoints, signing secrets, and the outbox of deliveries that
//! every change of a task writes in its own commit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use taskgate_core::{
    AccountId, DeliveryAttempt, DeliveryStatus, Mode, RunnerId, TaskId, TaskStatus, Timestamp,
    WebhookEndpointId, WebhookEvent, WebhookEvents, WebhookSecret,
};
use taskgate_store::{
    ClaimedDelivery, DeliveryOutcome, DeliveryQuery, DeliverySink, Destination, Store, TaskRecord,
    WebhookDelivery, WebhookEndpoint, WebhookEndpointUpdate,
};

use crate::fixtures::{
    MINUTE, T0, at, by, finish, insert, new_account, runner, running_task, task_of,
};

fn endpoint(account: AccountId, mode: Mode, events: &[WebhookEvent]) -> WebhookEndpoint {
    WebhookEndpoint {
        id: WebhookEndpointId::new(),
        account_id: account,
        mode,
        url: "https://hooks.example.com/taskgate".to_owned(),
        events: WebhookEvents::of(events),
        description: Some("orders".to_owned()),
        disabled: None,
        secret: WebhookSecret::generate(),
        previous_secret: None,
        previous_until: None,
        failing_since: None,
        created_at: at(T0),
    }
}

fn all_events() -> Vec<WebhookEvent> {
    WebhookEvent::ALL.to_vec()
}

fn everything(account: AccountId) -> DeliveryQuery {
    DeliveryQuery {
        account_id: account,
        mode: Mode::Live,
        endpoint_id: None,
        task_id: None,
        status: None,
        before: None,
        limit: 1000,
    }
}

/// `(task, event, endpoint or url)` of every delivery of the account, oldest first.
async fn outbox(store: &dyn Store, account: AccountId) -> Vec<(TaskId, &'static str, String)> {
    let mut rows = store.list_deliveries(&everything(account)).await.unwrap();
    rows.reverse();
    rows.iter().map(key).collect()
}

/// `(task, event, endpoint or url)` of a delivery.
fn key(d: &WebhookDelivery) -> (TaskId, &'static str, String) {
    let to = match (d.endpoint_id, &d.url) {
        (Some(e), _) => e.to_string(),
        (None, Some(url)) => url.clone(),
        (None, None) => panic!("a delivery goes somewhere"),
    };
    (
        d.task_id.expect("a task's event"),
        d.event_type.as_str(),
        to,
    )
}

pub async fn endpoints_are_kept_per_account_and_mode(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let live = endpoint(acme.id, Mode::Live, &[WebhookEvent::TaskSucceeded]);
    let test = endpoint(acme.id, Mode::Test, &[WebhookEvent::TaskFailed]);
    store.create_endpoint(&live, &by()).await.unwrap();
    store.create_endpoint(&test, &by()).await.unwrap();

    let got = store
        .get_endpoint(acme.id, Mode::Live, live.id)
        .await
        .unwrap();
    assert_eq!(got.as_ref(), Some(&live));
    assert!(
        store
            .get_endpoint(acme.id, Mode::Test, live.id)
            .await
            .unwrap()
            .is_none()
    );
    let list = store
        .list_endpoints(acme.id, Mode::Live, None, 10)
        .await
        .unwrap();
    assert_eq!(list, vec![live.clone()]);
    assert!(
        store
            .list_endpoints(acme.id, Mode::Live, Some(live.id), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let update = WebhookEndpointUpdate {
        url: Some("https://other.example.com/".to_owned()),
        events: Some(WebhookEvents::of(&all_events())),
        description: Some(None),
        enabled: Some(false),
    };
    let changed = store
        .update_endpoint(acme.id, Mode::Live, live.id, &update, &by())
        .await
        .unwrap()
        .expect("updated");
    assert_eq!(changed.url, "https://other.example.com/");
    assert_eq!(changed.events, WebhookEvents::of(&all_events()));
    assert_eq!(changed.description, None);
    assert_eq!(
        changed.disabled.as_deref(),
        Some(WebhookEndpoint::DISABLED_BY_OWNER)
    );
    assert_eq!(changed.secret, live.secret, "the secret is kept");
    let enabled = WebhookEndpointUpdate {
        enabled: Some(true),
        ..Default::default()
    };
    let back = store
        .update_endpoint(acme.id, Mode::Live, live.id, &enabled, &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.disabled, None);
    assert_eq!(back.url, changed.url, "absent fields are kept");

    let new = WebhookSecret::generate();
    let rotated = store
        .rotate_endpoint_secret(acme.id, Mode::Live, live.id, &new, at(T0 + MINUTE), &by())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.secret, new);
    assert_eq!(rotated.previous_secret.as_ref(), Some(&live.secret));
    assert_eq!(
        rotated.signing_secrets(at(T0)).len(),
        2,
        "both sign while they overlap"
    );
    assert_eq!(rotated.signing_secrets(at(T0 + MINUTE)), vec![&new]);

    assert!(
        !store
            .delete_endpoint(acme.id, Mode::Test, live.id, at(T0), &by())
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_endpoint(acme.id, Mode::Live, live.id, at(T0), &by())
            .await
            .unwrap()
    );
    assert!(store.get_endpoint_by_id(live.id).await.unwrap().is_none());
    assert!(store.get_endpoint_by_id(test.id).await.unwrap().is_some());
}

pub async fn an_endpoint_that_keeps_failing_is_disabled(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let e = endpoint(acme.id, Mode::Live, &all_events());
    store.create_endpoint(&e, &by()).await.unwrap();
    let cutoff = at(T0);
    assert!(
        !store
            .endpoint_attempted(e.id, false, at(T0 + 1), cutoff)
            .await
            .unwrap()
    );
    let failing = store.get_endpoint_by_id(e.id).await.unwrap().unwrap();
    assert_eq!(failing.failing_since, Some(at(T0 + 1)));
    // A success forgets it; failing again starts over.
    assert!(
        !store
            .endpoint_attempted(e.id, true, at(T0 + 2), cutoff)
            .await
            .unwrap()
    );
    assert!(
        !store
            .endpoint_attempted(e.id, false, at(T0 + 3), cutoff)
            .await
            .unwrap()
    );
    // Failing since before the cutoff: disabled.
    assert!(
        store
            .endpoint_attempted(e.id, false, at(T0 + 9), at(T0 + 5))
            .await
            .unwrap()
    );
    let off = store.get_endpoint_by_id(e.id).await.unwrap().unwrap();
    assert_eq!(
        off.disabled.as_deref(),
        Some(WebhookEndpoint::DISABLED_FAILING)
    );
    store
        .disable_endpoint(e.id, WebhookEndpoint::DISABLED_GONE)
        .await
        .unwrap();
    let still = store.get_endpoint_by_id(e.id).await.unwrap().unwrap();
    assert_eq!(
        still.disabled.as_deref(),
        Some(WebhookEndpoint::DISABLED_FAILING),
        "first reason kept"
    );
}

pub async fn signing_secrets_are_made_once_and_rotate(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let (a, b) = (WebhookSecret::generate(), WebhookSecret::generate());
    let first = store
        .signing_secret(acme.id, Mode::Live, &a, at(T0))
        .await
        .unwrap();
    assert_eq!(first.secret, a);
    let again = store
        .signing_secret(acme.id, Mode::Live, &b, at(T0))
        .await
        .unwrap();
    assert_eq!(again.secret, a, "made once");
    let test = store
        .signing_secret(acme.id, Mode::Test, &b, at(T0))
        .await
        .unwrap();
    assert_eq!(test.secret, b, "one per mode");
    let c = WebhookSecret::generate();
    let rotated = store
        .rotate_signing_secret(acme.id, Mode::Live, &c, at(T0 + MINUTE), at(T0), &by())
        .await
        .unwrap();
    assert_eq!(rotated.secret, c);
    assert_eq!(rotated.previous_secret, Some(a));
    assert_eq!(rotated.signing_secrets(at(T0)).len(), 2);
}

pub async fn every_change_of_a_task_writes_its_deliveries(store: Arc<dyn Store>) {
    writes_every_changes_deliveries(store).await;
}

/// The same deliveries are written where the store holds them for a sender
/// as it writes them (SQLite); each one handed over is one of them, with
/// its endpoint.
pub async fn deliveries_handed_over_are_the_same_deliveries(store: Arc<dyn Store>) {
    let sink = Sink::new("sender-1", 1_000);
    if !store.deliver_fresh_to(sink.clone()) {
        return;
    }
    let (got, ids) = writes_every_changes_deliveries(store).await;
    let handed = sink.handed();
    assert!(
        handed.len() >= 5,
        "the ends and starts the writer wrote: {handed:?}"
    );
    for c in &handed {
        let d = &c.delivery;
        let row = key(d);
        assert!(got.contains(&row), "{row:?} was written");
        assert_eq!(ids.get(&d.seq), Some(&row), "as the row of its seq");
        assert_eq!(c.endpoint.as_ref().map(|e| e.id), d.endpoint_id);
        assert_eq!(c.task.as_ref().map(|t| t.id), d.task_id);
    }
    assert_eq!(sink.given_back.load(Ordering::SeqCst), 0);
}

/// Every change of a task: the deliveries written, and each one's row by
/// seq.
async fn writes_every_changes_deliveries(
    store: Arc<dyn Store>,
) -> (
    Vec<(TaskId, &'static str, String)>,
    std::collections::HashMap<i64, (TaskId, &'static str, String)>,
) {
    let acme = new_account(&*store, "Acme").await;
    let other = new_account(&*store, "Other").await;
    let all = endpoint(acme.id, Mode::Live, &all_events());
    let ends = endpoint(acme.id, Mode::Live, &[WebhookEvent::TaskSucceeded]);
    let mut off = endpoint(acme.id, Mode::Live, &all_events());
    off.disabled = Some(WebhookEndpoint::DISABLED_BY_OWNER.to_owned());
    let test_mode = endpoint(acme.id, Mode::Test, &all_events());
    let others = endpoint(other.id, Mode::Live, &all_events());
    for e in [&all, &ends, &off, &test_mode, &others] {
        store.create_endpoint(e, &by()).await.unwrap();
    }
    let (a, e) = (all.id.to_string(), ends.id.to_string());

    // Queued, claimed, succeeded.
    let t1 = running_task(&*store, acme.id, "runner-1", T0, T0 + MINUTE).await;
    assert!(
        store
            .finish_task(t1.id, &finish("succeeded", 0, T0 + 5, None))
            .await
            .unwrap()
    );
    // Stored running (a sync call's), failed.
    let t2 = task_of(acme.id, "live", "language")
        .claimed(&runner("runner-1"), at(T0), at(T0 + MINUTE))
        .unwrap();
    store.insert_task_unflushed(&t2).await.unwrap();
    assert!(
        store
            .finish_task(t2.id, &finish("failed", 0, T0 + 6, None))
            .await
            .unwrap()
    );
    // Cancelled while queued, with a call's own webhook wanting only that.
    let t3 = task_of(acme.id, "live", "language");
    let hook = "https://calls.example.com/hook";
    store
        .attach_task_webhook(
            t3.id,
            acme.id,
            Mode::Live,
            hook,
            WebhookEvents::of(&[WebhookEvent::TaskCancelled]),
            at(T0),
        )
        .await
        .unwrap();
    let t3 = insert(&*store, t3).await;
    store
        .cancel_task(acme.id, Mode::Live, t3.id, at(T0 + 7))
        .await
        .unwrap();
    // Interrupted: its runner stopped renewing.
    let t4 = running_task(&*store, acme.id, "runner-2", T0, T0 + 1).await;
    let swept = store.interrupt_expired(at(T0 + 8), None).await.unwrap();
    assert_eq!(swept, vec![t4.id]);

    let got = outbox(&*store, acme.id).await;
    let want = vec![
        (t1.id, "task.running", a.clone()),
        (t1.id, "task.succeeded", a.clone()),
        (t1.id, "task.succeeded", e.clone()),
        (t2.id, "task.running", a.clone()),
        (t2.id, "task.failed", a.clone()),
        (t3.id, "task.cancelled", a.clone()),
        (t3.id, "task.cancelled", hook.to_owned()),
        (t4.id, "task.running", a.clone()),
        (t4.id, "task.failed", a.clone()),
    ];
    let sorted = |mut v: Vec<(TaskId, &'static str, String)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(got), sorted(want.clone()));
    let rows = store.list_deliveries(&everything(acme.id)).await.unwrap();
    assert!(
        rows.iter()
            .all(|d| d.status == DeliveryStatus::Pending && d.attempts.0.is_empty())
    );
    assert!(
        rows.iter()
            .all(|d| d.next_attempt_at.is_some() && d.payload.is_none())
    );
    let other_rows = store.list_deliveries(&everything(other.id)).await.unwrap();
    assert!(
        other_rows.is_empty(),
        "another account's endpoint hears nothing"
    );
    // Filters.
    let mut by_task = everything(acme.id);
    by_task.task_id = Some(t1.id);
    assert_eq!(store.list_deliveries(&by_task).await.unwrap().len(), 3);
    let mut by_endpoint = everything(acme.id);
    by_endpoint.endpoint_id = Some(ends.id);
    assert_eq!(store.list_deliveries(&by_endpoint).await.unwrap().len(), 1);
    let mut page = everything(acme.id);
    page.limit = 2;
    let first = store.list_deliveries(&page).await.unwrap();
    page.before = Some(first[1].seq);
    let second = store.list_deliveries(&page).await.unwrap();
    assert!(second[0].seq < first[1].seq, "newest first, then older");
    let by_seq = rows.iter().map(|d| (d.seq, key(d))).collect();
    (sorted(want), by_seq)
}

fn outcome(status: DeliveryStatus, next: Option<i64>, claimed: i64) -> DeliveryOutcome {
    DeliveryOutcome {
        attempt: DeliveryAttempt {
            at: at(claimed),
            http_status: Some(500),
            duration_ms: 12,
            error: None,
            response_excerpt: Some("oops".to_owned()),
        },
        status,
        next_attempt_at: next.map(at),
        payload: r#"{"type":"task.succeeded"}"#.to_owned(),
        claimed_at: at(claimed),
    }
}

/// The deliveries of a claim, without what was read with them.
fn deliveries(claimed: Vec<ClaimedDelivery>) -> Vec<WebhookDelivery> {
    claimed.into_iter().map(|c| c.delivery).collect()
}

/// An account with one endpoint and one task's running event for it.
async fn one_delivery(store: &dyn Store) -> (AccountId, WebhookDelivery) {
    let (acme, _, _, d) = one_delivery_of(store).await;
    (acme, d)
}

async fn one_delivery_of(
    store: &dyn Store,
) -> (AccountId, WebhookEndpoint, TaskRecord, WebhookDelivery) {
    let acme = new_account(store, "Acme").await;
    let e = endpoint(acme.id, Mode::Live, &all_events());
    store.create_endpoint(&e, &by()).await.unwrap();
    let t = running_task(store, acme.id, "runner-1", T0, T0 + MINUTE).await;
    let mut rows = store.list_deliveries(&everything(acme.id)).await.unwrap();
    assert_eq!(rows.len(), 1, "the running event");
    (acme.id, e, t, rows.remove(0))
}

pub async fn senders_hold_deliveries_under_a_lease(store: Arc<dyn Store>) {
    let (acme, d) = one_delivery(&*store).await;
    let (r1, r2) = (runner("sender-1"), runner("sender-2"));
    let now = T0 + 10;
    let got = deliveries(
        store
            .claim_deliveries(&r1, at(now), at(now + MINUTE), 10, 8, None)
            .await
            .unwrap()
            .deliveries,
    );
    assert_eq!(got.iter().map(|d| d.seq).collect::<Vec<_>>(), vec![d.seq]);
    let none = store
        .claim_deliveries(&r2, at(now), at(now + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert!(none.is_empty(), "held by sender-1");
    // Sender-1 stopped: past its lease, another takes it; or itself, restarted, at once.
    let own = store
        .claim_deliveries(&r1, at(now + 1), at(now + MINUTE), 10, 8, Some(&r1))
        .await
        .unwrap()
        .deliveries;
    assert_eq!(own.len(), 1, "its previous life's holding is taken back");
    let later = now + 2 * MINUTE;
    let taken = deliveries(
        store
            .claim_deliveries(&r2, at(later), at(later + MINUTE), 10, 8, None)
            .await
            .unwrap()
            .deliveries,
    );
    assert_eq!(taken.len(), 1);
    // Only the holder writes the outcome.
    let failed = outcome(DeliveryStatus::Failed, Some(later + MINUTE), later);
    assert!(
        !store
            .record_delivery(&taken[0], &r1, &failed)
            .await
            .unwrap()
    );
    assert!(
        store
            .record_delivery(&taken[0], &r2, &failed)
            .await
            .unwrap()
    );
    let row = store
        .get_delivery(acme, Mode::Live, d.seq)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, DeliveryStatus::Failed);
    assert_eq!(row.attempts.0.len(), 1);
    assert_eq!(row.attempts.0[0].http_status, Some(500));
    assert_eq!(row.next_attempt_at, Some(at(later + MINUTE)));
    assert_eq!(row.payload.as_deref(), Some(r#"{"type":"task.succeeded"}"#));
    assert!(
        store
            .claim_deliveries(&r2, at(later + 1), at(later + MINUTE), 10, 8, None)
            .await
            .unwrap()
            .deliveries
            .is_empty(),
        "not due yet"
    );
    assert!(
        store
            .get_delivery(acme, Mode::Test, d.seq)
            .await
            .unwrap()
            .is_none()
    );

    // A replay makes it due now; one asked while an attempt runs is kept.
    let replay_at = later + 5;
    let replayed = store
        .retry_delivery(acme, Mode::Live, d.seq, at(replay_at))
        .await
        .unwrap();
    assert_eq!(replayed.unwrap().next_attempt_at, Some(at(replay_at)));
    let again = store
        .claim_deliveries(&r1, at(replay_at), at(replay_at + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert_eq!(again.len(), 1);
    store
        .retry_delivery(acme, Mode::Live, d.seq, at(replay_at + 3))
        .await
        .unwrap();
    let done = DeliveryOutcome {
        status: DeliveryStatus::Succeeded,
        ..outcome(DeliveryStatus::Succeeded, None, replay_at)
    };
    assert!(
        store
            .record_delivery(&again[0].delivery, &r1, &done)
            .await
            .unwrap()
    );
    let row = store
        .get_delivery(acme, Mode::Live, d.seq)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, DeliveryStatus::Succeeded);
    assert_eq!(row.attempts.0.len(), 2);
    assert_eq!(
        row.next_attempt_at,
        Some(at(replay_at + 3)),
        "the replay asked meanwhile stays"
    );
}

pub async fn tests_and_deletes_and_purges(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let e = endpoint(acme.id, Mode::Live, &all_events());
    store.create_endpoint(&e, &by()).await.unwrap();
    let test = store
        .enqueue_test(&e, r#"{"type":"webhook.test"}"#, at(T0))
        .await
        .unwrap();
    assert_eq!(test.event_type, WebhookEvent::WebhookTest);
    assert_eq!(test.task_id, None);
    assert!(test.message_id().starts_with("msg_"));
    assert_eq!(test.endpoint_id, Some(e.id));
    // Deleting the endpoint stops what it had still to receive.
    assert!(
        store
            .delete_endpoint(acme.id, Mode::Live, e.id, at(T0), &by())
            .await
            .unwrap()
    );
    let row = store
        .get_delivery(acme.id, Mode::Live, test.seq)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.status, row.next_attempt_at),
        (DeliveryStatus::Failed, None)
    );
    assert!(
        store
            .claim_deliveries(&runner("s"), at(T0 + 1), at(T0 + MINUTE), 10, 8, None)
            .await
            .unwrap()
            .deliveries
            .is_empty()
    );
    assert_eq!(store.purge_deliveries(at(T0), 100).await.unwrap(), 0);
    assert_eq!(store.purge_deliveries(at(T0 + 1), 100).await.unwrap(), 1);
    assert!(
        store
            .get_delivery(acme.id, Mode::Live, test.seq)
            .await
            .unwrap()
            .is_none()
    );
}

/// A claim takes at most a destination's turns free, destinations taking
/// turns, and says whether it left any due (a turn freed then finds more).
pub async fn claims_take_turns_per_destination(store: Arc<dyn Store>) {
    let acme = new_account(&*store, "Acme").await;
    let (a, b) = (
        endpoint(acme.id, Mode::Live, &all_events()),
        endpoint(acme.id, Mode::Live, &all_events()),
    );
    store.create_endpoint(&a, &by()).await.unwrap();
    store.create_endpoint(&b, &by()).await.unwrap();
    for _ in 0..5 {
        store.enqueue_test(&a, "{}", at(T0)).await.unwrap();
    }
    store.enqueue_test(&b, "{}", at(T0 + 1)).await.unwrap();
    let s = runner("sender-1");
    let to = |list: &[WebhookDelivery], e: &WebhookEndpoint| {
        list.iter().filter(|d| d.endpoint_id == Some(e.id)).count()
    };
    let claim = |at_ms: i64, limit: i64| {
        let store = store.clone();
        let s = s.clone();
        async move {
            store
                .claim_deliveries(&s, at(at_ms), at(T0 + MINUTE), limit, 2, None)
                .await
                .unwrap()
        }
    };
    let first = claim(T0 + 5, 10).await;
    assert!(first.more, "three of A left");
    let first = deliveries(first.deliveries);
    assert_eq!(
        (to(&first, &a), to(&first, &b)),
        (2, 1),
        "two of A at once, B not kept waiting"
    );
    let second = claim(T0 + 6, 10).await;
    assert!(second.deliveries.is_empty(), "A's two are still held");
    assert!(second.more, "and three more of A are due");
    let done = DeliveryOutcome {
        status: DeliveryStatus::Succeeded,
        ..outcome(DeliveryStatus::Succeeded, None, T0 + 5)
    };
    let first_of_a = first.iter().find(|d| d.endpoint_id == Some(a.id)).unwrap();
    assert!(store.record_delivery(first_of_a, &s, &done).await.unwrap());
    let third = claim(T0 + 7, 10).await;
    assert!(third.more, "two of A left");
    let third = deliveries(third.deliveries);
    assert_eq!(to(&third, &a), 1, "one more of A as one ended");
    // Every one held ends: A's last two are taken, and nothing is left.
    for d in first.iter().chain(&third) {
        if d.seq != first_of_a.seq {
            assert!(store.record_delivery(d, &s, &done).await.unwrap());
        }
    }
    let last = claim(T0 + 8, 10).await;
    assert_eq!(to(&deliveries(last.deliveries), &a), 2);
    assert!(!last.more, "A's last two taken");
    // The claim's limit leaves some too.
    store.enqueue_test(&b, "{}", at(T0 + 9)).await.unwrap();
    store.enqueue_test(&b, "{}", at(T0 + 9)).await.unwrap();
    let one = claim(T0 + 10, 1).await;
    assert_eq!(
        (one.deliveries.len(), one.more),
        (1, true),
        "one taken, one left"
    );
    let other = claim(T0 + 10, 10).await;
    assert_eq!((other.deliveries.len(), other.more), (1, false));
    let none = claim(T0 + 11, 10).await;
    assert_eq!(
        (none.deliveries.len(), none.more),
        (0, false),
        "nothing due"
    );
}

/// A claim carries what its attempt reads, as it stands at the claim: the
/// endpoint (a change made after the delivery was written shows), and the
/// task while the body is not made; once it is, the task is not read.
pub async fn a_claim_reads_what_its_attempt_needs(store: Arc<dyn Store>) {
    let (acme, e, t, d) = one_delivery_of(&*store).await;
    let disabled = WebhookEndpointUpdate {
        enabled: Some(false),
        ..WebhookEndpointUpdate::default()
    };
    store
        .update_endpoint(acme, Mode::Live, e.id, &disabled, &by())
        .await
        .unwrap();
    let s = runner("sender-1");
    let now = T0 + 10;
    let mut first = store
        .claim_deliveries(&s, at(now), at(now + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert_eq!(first.len(), 1);
    let c = first.remove(0);
    assert_eq!(c.delivery.seq, d.seq);
    let read = c.endpoint.expect("its endpoint");
    assert_eq!(
        (read.id, &read.url, &read.secret),
        (e.id, &e.url, &e.secret)
    );
    assert_eq!(
        read.disabled.as_deref(),
        Some(WebhookEndpoint::DISABLED_BY_OWNER),
        "as it stands at the claim"
    );
    let task = c.task.expect("its task, for the body");
    assert_eq!((task.id, task.status), (t.id, t.status));
    // Failed once: the body is stored, so the next claim reads no task.
    let failed = outcome(DeliveryStatus::Failed, Some(now + 1), now);
    assert!(
        store
            .record_delivery(&c.delivery, &s, &failed)
            .await
            .unwrap()
    );
    let mut again = store
        .claim_deliveries(&s, at(now + 1), at(now + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert_eq!(again.len(), 1);
    let c = again.remove(0);
    assert!(c.delivery.payload.is_some());
    assert!(c.task.is_none(), "the stored body is sent as it is");
    assert_eq!(c.endpoint.map(|e| e.id), Some(e.id));
}

/// A sender as the store sees it, with `turns` turns in all, recording what
/// it is handed.
struct Sink {
    runner: RunnerId,
    turns: AtomicUsize,
    committed: Mutex<Vec<ClaimedDelivery>>,
    given_back: AtomicUsize,
    waiting: AtomicUsize,
}

impl Sink {
    fn new(name: &str, turns: usize) -> Arc<Self> {
        Arc::new(Self {
            runner: runner(name),
            turns: AtomicUsize::new(turns),
            committed: Mutex::new(Vec::new()),
            given_back: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        })
    }

    fn handed(&self) -> Vec<ClaimedDelivery> {
        self.committed.lock().unwrap().clone()
    }
}

impl DeliverySink for Sink {
    fn runner(&self) -> &RunnerId {
        &self.runner
    }

    fn lease_end(&self, now: Timestamp) -> Timestamp {
        at(now.unix_ms() + MINUTE)
    }

    fn has_room(&self) -> bool {
        true
    }

    fn take_turn(&self, _to: &Destination) -> bool {
        self.turns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    fn committed(&self, deliveries: Vec<ClaimedDelivery>) {
        self.committed.lock().unwrap().extend(deliveries);
    }

    fn give_back(&self, deliveries: Vec<ClaimedDelivery>) {
        self.given_back
            .fetch_add(deliveries.len(), Ordering::SeqCst);
    }

    fn waiting(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
    }
}

/// Where the store can (SQLite: one process owns it), a delivery it writes
/// is held for this process's sender in that commit and handed over with
/// its endpoint and the task as written, when its destination has a turn
/// free; otherwise it is written unheld, for the claim.
pub async fn fresh_deliveries_go_to_the_sender_in_their_commit(store: Arc<dyn Store>) {
    let sink = Sink::new("sender-1", 1);
    if !store.deliver_fresh_to(sink.clone()) {
        assert_eq!(
            store.backend(),
            "postgres",
            "only where instances share the outbox"
        );
        return;
    }
    let acme = new_account(&*store, "Acme").await;
    let e = endpoint(acme.id, Mode::Live, &[WebhookEvent::TaskSucceeded]);
    store.create_endpoint(&e, &by()).await.unwrap();

    // A sync call's task, stored as it ends.
    let t = task_of(acme.id, "live", "language")
        .claimed(&runner("runner-1"), at(T0), at(T0 + MINUTE))
        .unwrap();
    store.insert_task_unflushed(&t).await.unwrap();
    assert!(
        store
            .finish_task(t.id, &finish("succeeded", 0, T0 + 5, None))
            .await
            .unwrap()
    );
    let handed = sink.handed();
    assert_eq!(handed.len(), 1, "handed over as it committed");
    let c = &handed[0];
    assert_eq!(c.delivery.event_type, WebhookEvent::TaskSucceeded);
    assert_eq!(c.delivery.task_id, Some(t.id));
    assert_eq!(
        c.endpoint.as_ref().map(|x| (x.id, &x.secret)),
        Some((e.id, &e.secret))
    );
    let task = c.task.as_ref().expect("the task as written, for the body");
    assert_eq!((task.id, task.status), (t.id, TaskStatus::Succeeded));

    // Held for the sender: no claim takes it.
    let other = runner("sender-2");
    let claimed = store
        .claim_deliveries(&other, at(T0 + 10), at(T0 + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert!(claimed.is_empty(), "held by the sender");

    // No turn free now: the next end is written unheld, and the claim told.
    let t2 = running_task(&*store, acme.id, "runner-1", T0, T0 + MINUTE).await;
    assert!(
        store
            .finish_task(t2.id, &finish("succeeded", 0, T0 + 6, None))
            .await
            .unwrap()
    );
    assert_eq!(sink.handed().len(), 1, "not handed over");
    assert!(sink.waiting.load(Ordering::SeqCst) >= 1, "the claim told");
    let claimed = store
        .claim_deliveries(&other, at(T0 + 10), at(T0 + MINUTE), 10, 8, None)
        .await
        .unwrap()
        .deliveries;
    assert_eq!(
        claimed
            .iter()
            .map(|c| c.delivery.task_id)
            .collect::<Vec<_>>(),
        vec![Some(t2.id)],
        "left for the claim"
    );

    // The first one's outcome is its holder's to write, as a claimed one's;
    // written with the next commit, a read sees it.
    let done = outcome(DeliveryStatus::Succeeded, None, T0 + 5);
    assert!(
        !store
            .record_delivery(&c.delivery, &other, &done)
            .await
            .unwrap()
    );
    store
        .record_delivery_soon(&c.delivery, &sink.runner, &done)
        .await
        .unwrap();
    let row = store
        .get_delivery(acme.id, Mode::Live, c.delivery.seq)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.status, row.next_attempt_at),
        (DeliveryStatus::Succeeded, None)
    );
    assert_eq!(row.attempts.0.len(), 1, "its attempt kept");
    assert_eq!(sink.given_back.load(Ordering::SeqCst), 0);
}

/// Where instances share the store, every one's sender hears of each commit
/// that writes deliveries, so none waits for its poll; a commit that writes
/// none says nothing. Where one process owns the store, its writer hands its
/// deliveries over instead.
pub async fn senders_hear_of_deliveries_as_they_are_written(store: Arc<dyn Store>) {
    let Some(mut words) = store.deliveries_written().await.unwrap() else {
        assert_eq!(store.backend(), "sqlite", "one process owns the store");
        return;
    };
    let mut other_instance = store.deliveries_written().await.unwrap().unwrap();
    let acme = new_account(&*store, "Acme").await;
    let e = endpoint(acme.id, Mode::Live, &[WebhookEvent::TaskSucceeded]);
    store.create_endpoint(&e, &by()).await.unwrap();

    // No endpoint wants a failure: no delivery, no word.
    let failed = running_task(&*store, acme.id, "runner-1", T0, T0 + MINUTE).await;
    assert!(
        store
            .finish_task(failed.id, &finish("failed", 0, T0 + 5, None))
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(words.try_recv().is_err(), "no delivery was written");

    let ok = running_task(&*store, acme.id, "runner-1", T0, T0 + MINUTE).await;
    assert!(
        store
            .finish_task(ok.id, &finish("succeeded", 0, T0 + 5, None))
            .await
            .unwrap()
    );
    for rx in [&mut words, &mut other_instance] {
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .expect("told within 10 s")
            .expect("still following");
    }
    assert_eq!(outbox(&*store, acme.id).await.len(), 1);
}

/// Two instances' senders claiming at once never both take one delivery:
/// a claim that read a delivery as free, then finds it taken by a claim
/// that committed meanwhile, leaves it (PostgreSQL re-reads the row it
/// locks, so the lease's test must be in the locking part of the claim).
pub async fn concurrent_claims_never_take_one_delivery_twice(store: Arc<dyn Store>, url: String) {
    let acme = new_account(&*store, "Acme").await;
    let mut written = 0;
    for _ in 0..20 {
        let e = endpoint(acme.id, Mode::Live, &all_events());
        store.create_endpoint(&e, &by()).await.unwrap();
        for _ in 0..10 {
            store
                .enqueue_test(&e, r#"{"type":"webhook.test"}"#, at(T0))
                .await
                .unwrap();
            written += 1;
        }
    }
    let other = taskgate_store::connect(&url).await.unwrap();
    let claim_all = |store: Arc<dyn Store>, name: &'static str| async move {
        let mut got = Vec::new();
        let mut empty = 0;
        while empty < 3 {
            let claimed = store
                .claim_deliveries(&runner(name), at(T0 + 1), at(T0 + MINUTE), 7, 100, None)
                .await
                .unwrap()
                .deliveries;
            if claimed.is_empty() {
                empty += 1;
            }
            got.extend(claimed.into_iter().map(|c| c.delivery.seq));
        }
        got
    };
    let (a, b) = tokio::join!(
        tokio::spawn(claim_all(store.clone(), "sender-1")),
        tokio::spawn(claim_all(other, "sender-2"))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut all: Vec<i64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    let claimed = all.len();
    all.dedup();
    assert_eq!(
        (claimed, all.len()),
        (written, written),
        "each delivery claimed once ({} and {})",
        a.len(),
        b.len()
    );
}
