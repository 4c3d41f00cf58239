//! Usage: request counts add up per key and minute and sum into buckets;
//! task aggregates count by API, status and key.

use std::sync::Arc;

use taskgate_core::{KeyId, Timestamp};
use taskgate_store::{RequestCount, Store};

use crate::fixtures::{acct, ended_task, insert, mode};

fn count(key: KeyId, minute: i64, requests: i64, limited: i64) -> RequestCount {
    RequestCount {
        account_id: acct("acct_a"),
        key_id: key,
        mode: mode("live"),
        minute,
        requests,
        limited,
    }
}

pub async fn request_counts_add_up_in_buckets(store: Arc<dyn Store>) {
    let (k1, k2) = (KeyId::new(), KeyId::new());
    let hour = 3_600_000;
    let base = 1_767_225_600_000; // an hour's start
    store
        .add_request_counts(&[count(k1, base, 3, 0), count(k2, base + 60_000, 1, 2)])
        .await
        .unwrap();
    // The same minute again: added, not replaced.
    store
        .add_request_counts(&[count(k1, base, 2, 1), count(k1, base + hour, 7, 0)])
        .await
        .unwrap();
    // A test key's requests (a key has one mode) are not live ones.
    let mut test = count(KeyId::new(), base, 100, 0);
    test.mode = mode("test");
    store.add_request_counts(&[test]).await.unwrap();

    let by_hour = store
        .request_buckets(
            acct("acct_a"),
            mode("live"),
            Timestamp::from_unix_ms(base),
            hour,
        )
        .await
        .unwrap();
    let got: Vec<(KeyId, i64, i64, i64)> = by_hour
        .iter()
        .map(|b| (b.key_id, b.bucket, b.requests, b.limited))
        .collect();
    let mut want = vec![(k1, base, 5, 1), (k2, base, 1, 2), (k1, base + hour, 7, 0)];
    want.sort_by_key(|w| (w.1, w.0));
    assert_eq!(got, want);
    let later = store
        .request_buckets(
            acct("acct_a"),
            mode("live"),
            Timestamp::from_unix_ms(base + hour),
            60_000,
        )
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(
        store
            .purge_request_counts(Timestamp::from_unix_ms(base + hour))
            .await
            .unwrap(),
        3
    );
}

pub async fn task_counts_and_durations(store: Arc<dyn Store>) {
    let since = Timestamp::now().minus_ms(60_000);
    insert(
        &*store,
        ended_task("acct_a", "live", "sentiment", "succeeded"),
    )
    .await;
    insert(
        &*store,
        ended_task("acct_a", "live", "sentiment", "succeeded"),
    )
    .await;
    insert(&*store, ended_task("acct_a", "live", "sentiment", "failed")).await;
    insert(&*store, ended_task("acct_a", "test", "sentiment", "failed")).await;
    insert(&*store, ended_task("acct_b", "live", "sentiment", "failed")).await;
    let counts = store
        .task_counts(acct("acct_a"), mode("live"), since)
        .await
        .unwrap();
    let total: i64 = counts.iter().map(|c| c.tasks).sum();
    assert_eq!(total, 3);
    let succeeded: i64 = counts
        .iter()
        .filter(|c| c.status.as_str() == "succeeded")
        .map(|c| c.tasks)
        .sum();
    assert_eq!(succeeded, 2);
    assert!(counts.iter().all(|c| c.api.as_str() == "sentiment"));
    let durations = store
        .task_durations(acct("acct_a"), mode("live"), since, 2)
        .await
        .unwrap();
    assert_eq!(durations, vec![1, 1]);
}
