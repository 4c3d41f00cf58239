//! Who calls: the principal authentication makes of a key in good standing
//! (what the services are given), and the brief cache of keys by hash that
//! authentication looks them up in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use taskgate_core::{AccountId, ApiList, KeyId, KeyType, Mode, Scopes, Timestamp};
use taskgate_store::{Account, KeyRecord};

use crate::config::PlanLimits;

/// Who is calling, already authenticated, in good standing and within limits.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: KeyId,
    pub key_type: KeyType,
    pub mode: Mode,
    pub scopes: Scopes,
    pub allowed_apis: Option<Arc<ApiList>>,
    pub account_id: AccountId,
    /// The monthly spend limit that holds: the owners' limit under the
    /// operator's ceiling ([`Account::effective_spend_limit_micros`]).
    pub monthly_spend_limit_micros: Option<i64>,
    /// The plan's cap of the account's running tasks of this key's mode
    /// (`None`: no cap): test tasks have a cap of their own.
    pub max_running_tasks: Option<u32>,
}

impl Principal {
    pub fn may_call(&self, slug: &str) -> bool {
        self.allowed_apis
            .as_ref()
            .is_none_or(|apis| apis.contains(slug))
    }
}

impl Principal {
    /// What `key` of `account` may do, under the account's plan `limits`:
    /// what authentication decides once the key is known good (active, its
    /// account active, within its rate limits).
    pub fn of(key: &KeyRecord, account: &Account, limits: PlanLimits) -> Self {
        Principal {
            key_id: key.id,
            key_type: key.key_type,
            mode: key.key_type.mode(),
            scopes: key.scopes.clone(),
            allowed_apis: key.allowed_apis.clone().map(Arc::new),
            account_id: account.id,
            monthly_spend_limit_micros: account.effective_spend_limit_micros(),
            max_running_tasks: limits.running_cap(key.key_type.mode()),
        }
    }
}

/// Key lookups cached briefly: a revoked key or a suspended account takes
/// effect within [`KEY_CACHE_TTL`], well inside the contract's 5 s.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(2);
const KEY_CACHE_MAX: usize = 100_000;

/// A key with its account, as looked up by hash (`None`: no such key).
type Found = Option<Arc<(KeyRecord, Account)>>;

#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (Instant, Found)>>,
    /// Keys used since the last flush, with the time of last use.
    used: Mutex<HashMap<KeyId, Timestamp>>,
}

impl KeyCache {
    /// The key of `hash` with its account, if looked up within the TTL
    /// before `now`.
    pub(crate) fn get(&self, hash: &str, now: Instant) -> Option<Found> {
        let entries = self.entries.lock();
        let (at, v) = entries.get(hash)?;
        (now.saturating_duration_since(*at) < KEY_CACHE_TTL).then(|| v.clone())
    }

    pub(crate) fn put(&self, hash: String, v: Found, now: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() >= KEY_CACHE_MAX {
            entries.retain(|_, (at, _)| now.saturating_duration_since(*at) < KEY_CACHE_TTL);
            if entries.len() >= KEY_CACHE_MAX {
                entries.clear();
            }
        }
        entries.insert(hash, (now, v));
    }

    pub(crate) fn mark_used(&self, key_id: KeyId, at: Timestamp) {
        self.used.lock().insert(key_id, at);
    }

    /// The keys used since the last call, for writing `last_used_at`.
    pub fn take_used(&self) -> Vec<(KeyId, Timestamp)> {
        std::mem::take(&mut *self.used.lock()).into_iter().collect()
    }
}
