//! Requests counted for the dashboard's Usage: per account, key and minute,
//! accepted or refused by the rate limits. A request adds one to a map under
//! the lock of its key's shard (so concurrent requests of different keys
//! rarely meet); the maps go to the store in batches (`lib.rs`, every second).

use std::collections::HashMap;
use std::hash::BuildHasher;

use parking_lot::Mutex;
use taskgate_core::{AccountId, KeyId, Mode};
use taskgate_store::RequestCount;

type Minute = (AccountId, KeyId, Mode, i64);

const SHARDS: usize = 16;

pub struct RequestCounter {
    shards: Vec<Mutex<HashMap<Minute, (i64, i64)>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for RequestCounter {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: Default::default(),
        }
    }
}

impl RequestCounter {
    /// One request of `key` at `now_ms`: accepted, or refused (`limited`).
    pub fn count(&self, account: AccountId, key: KeyId, mode: Mode, now_ms: i64, limited: bool) {
        let minute = now_ms - now_ms.rem_euclid(60_000);
        let shard = self.hasher.hash_one(key) as usize % SHARDS;
        let mut counts = self.shards[shard].lock();
        let c = counts.entry((account, key, mode, minute)).or_default();
        if limited {
            c.1 += 1;
        } else {
            c.0 += 1;
        }
    }

    /// The counts since the last call.
    pub fn take(&self) -> Vec<RequestCount> {
        self.shards
            .iter()
            .flat_map(|s| std::mem::take(&mut *s.lock()))
            .map(
                |((account_id, key_id, mode, minute), (requests, limited))| RequestCount {
                    account_id,
                    key_id,
                    mode,
                    minute,
                    requests,
                    limited,
                },
            )
            .collect()
    }

    /// Puts counts back (their write failed), to be written with the next.
    pub fn restore(&self, counts: Vec<RequestCount>) {
        for c in counts {
            let shard = self.hasher.hash_one(c.key_id) as usize % SHARDS;
            let mut map = self.shards[shard].lock();
            let e = map
                .entry((c.account_id, c.key_id, c.mode, c.minute))
                .or_default();
            e.0 += c.requests;
            e.1 += c.limited;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_minute_and_kind() {
        let c = RequestCounter::default();
        let (a, k) = (AccountId::new(), KeyId::new());
        c.count(a, k, Mode::Live, 120_000, false);
        c.count(a, k, Mode::Live, 179_999, false);
        c.count(a, k, Mode::Live, 150_000, true);
        c.count(a, k, Mode::Live, 180_000, false);
        let mut taken = c.take();
        taken.sort_by_key(|r| r.minute);
        let got: Vec<(i64, i64, i64)> = taken
            .iter()
            .map(|r| (r.minute, r.requests, r.limited))
            .collect();
        assert_eq!(got, vec![(120_000, 2, 1), (180_000, 1, 0)]);
        assert!(c.take().is_empty());
        c.restore(taken);
        assert_eq!(c.take().len(), 2);
    }
}
