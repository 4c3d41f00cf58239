//! Usage: what an account's keys asked and spent over a span of time.
//! Requests accepted and refused by the rate limits (per bucket of the span
//! and per key), tasks by API and status, the finished tasks' latency, the
//! plan's limits as the limiter holds them now, and in live mode the spend
//! of the month against the limit. Read from the request counts and the
//! tasks table, never counted on a request's path.

use std::collections::BTreeMap;

use taskgate_core::{AccountId, ApiSlug, KeyId, Micros, Mode, TaskStatus, Timestamp};
use taskgate_store::{Account, StoreError};

use super::Actor;
use crate::config::PlanLimits;
use crate::ratelimit::{Decision, WindowState};
use crate::state::AppState;

/// The most finished tasks whose durations the latency is drawn from (the
/// newest).
pub const LATENCY_SAMPLE: i64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// Unknown, or an account the actor does not see: both look the same.
    #[error("there is no account {0}")]
    AccountNotFound(AccountId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A span of time in buckets: the last `buckets` buckets of `bucket_ms`
/// (starting at multiples of it), the newest holding now.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub bucket_ms: i64,
    pub buckets: i64,
}

/// An account's usage of one mode over a span.
pub struct Usage {
    pub account: Account,
    /// The first bucket's start.
    pub since: Timestamp,
    /// When the figures were read.
    pub now: Timestamp,
    /// Accepted requests per bucket, oldest first.
    pub requests: Vec<i64>,
    /// Requests refused by the rate limits (429) per bucket, oldest first.
    pub limited: Vec<i64>,
    /// Tasks created in the span by API (in the order of their slugs).
    pub tasks: Vec<ApiTasks>,
    /// Per key that did anything in the span, in the order of their ids.
    pub keys: Vec<KeyUsage>,
    /// Over the span's finished tasks (the newest [`LATENCY_SAMPLE`]).
    pub latency: Option<Latency>,
    /// The plan's windows as the limiter holds them now (minute first);
    /// none when the plan has no limits or the limiter does not answer.
    pub windows: Vec<WindowState>,
    /// Live mode only: the month's spend.
    pub spend: Option<MonthSpend>,
}

/// Tasks of one API, by status (in the order of the statuses' names).
pub struct ApiTasks {
    pub api: ApiSlug,
    pub by_status: Vec<(TaskStatus, i64)>,
}

impl ApiTasks {
    pub fn total(&self) -> i64 {
        self.by_status.iter().map(|(_, n)| n).sum()
    }
}

/// One key's part.
pub struct KeyUsage {
    pub key_id: KeyId,
    /// The key's name and hint; `None` for a key the store no longer has.
    pub name: Option<(String, String)>,
    pub requests: i64,
    pub limited: i64,
    pub tasks: i64,
    pub cost: Micros,
}

/// Percentiles (nearest rank) of finished tasks' durations, in ms.
pub struct Latency {
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub tasks: usize,
}

/// The month's spend of an account.
pub struct MonthSpend {
    /// `YYYY-MM`, UTC.
    pub month: String,
    pub spent: Micros,
    /// Held by calls still running.
    pub reserved: Micros,
    /// The limit that holds (the owners' or the operator's ceiling, the
    /// lower), if any.
    pub limit: Option<Micros>,
}

/// The `p`-th percentile (nearest rank) of sorted `values`.
fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The usage of `account` in `mode` over the `span` that ends now.
pub async fn read(
    app: &AppState,
    actor: Actor<'_>,
    account: AccountId,
    mode: Mode,
    span: Span,
) -> Result<Usage, UsageError> {
    if !actor.sees(account) {
        return Err(UsageError::AccountNotFound(account));
    }
    let now = app.clock.now();
    let last = now.unix_ms() - now.unix_ms().rem_euclid(span.bucket_ms);
    let since = Timestamp::from_unix_ms(last - (span.buckets - 1) * span.bucket_ms);
    let store = &app.store;
    let (found, buckets, counts, durations, keys) = tokio::try_join!(
        store.get_account(account),
        store.request_buckets(account, mode, since, span.bucket_ms),
        store.task_counts(account, mode, since),
        store.task_durations(account, mode, since, LATENCY_SAMPLE),
        store.list_keys(account),
    )?;
    let account = found.ok_or(UsageError::AccountNotFound(account))?;

    let n = span.buckets as usize;
    let (mut requests, mut limited) = (vec![0i64; n], vec![0i64; n]);
    // Per key: requests, refused, tasks, cost.
    let mut per_key: BTreeMap<KeyId, (i64, i64, i64, i64)> = BTreeMap::new();
    for b in &buckets {
        let i = ((b.bucket - since.unix_ms()) / span.bucket_ms).clamp(0, span.buckets - 1) as usize;
        requests[i] += b.requests;
        limited[i] += b.limited;
        let k = per_key.entry(b.key_id).or_default();
        k.0 += b.requests;
        k.1 += b.limited;
    }
    // By API, then status, in the order of their names.
    let mut by_api: BTreeMap<(&str, &str), (&ApiSlug, TaskStatus, i64)> = BTreeMap::new();
    for c in &counts {
        by_api
            .entry((c.api.as_str(), c.status.as_str()))
            .or_insert((&c.api, c.status, 0))
            .2 += c.tasks;
        let k = per_key.entry(c.key_id).or_default();
        k.2 += c.tasks;
        k.3 += c.cost_micros;
    }
    let mut tasks: Vec<ApiTasks> = Vec::new();
    for (api, status, n) in by_api.into_values() {
        match tasks.last_mut() {
            Some(last) if last.api == *api => last.by_status.push((status, n)),
            _ => tasks.push(ApiTasks {
                api: api.clone(),
                by_status: vec![(status, n)],
            }),
        }
    }
    let names: BTreeMap<KeyId, (&str, &str)> = keys
        .iter()
        .map(|k| (k.id, (k.name.as_str(), k.hint.as_str())))
        .collect();
    let keys = per_key
        .into_iter()
        .map(|(key_id, (requests, limited, tasks, cost))| KeyUsage {
            key_id,
            name: names
                .get(&key_id)
                .map(|(name, hint)| ((*name).to_owned(), (*hint).to_owned())),
            requests,
            limited,
            tasks,
            cost: Micros(cost),
        })
        .collect();

    let mut sorted = durations;
    sorted.sort_unstable();
    let latency = (!sorted.is_empty()).then(|| Latency {
        p50: percentile(&sorted, 50.0),
        p90: percentile(&sorted, 90.0),
        p99: percentile(&sorted, 99.0),
        tasks: sorted.len(),
    });

    // The limits as the limiter holds them now (one account, both modes).
    let plan_limits = PlanLimits::of(&app.config.plans, &account.plan);
    // Without an answer from the limiter (Redis unreachable), no windows.
    let windows = app
        .limiter
        .peek(account.id, plan_limits)
        .await
        .unwrap_or_else(|_| Decision::unlimited())
        .windows;

    let spend = match mode {
        Mode::Test => None,
        Mode::Live => {
            let month = now.month_key();
            let (spent, reserved) = tokio::try_join!(
                store.month_spend(account.id, &month),
                store.month_reserved(account.id, &month),
            )?;
            Some(MonthSpend {
                month,
                spent: Micros(spent),
                reserved: Micros(reserved),
                limit: account.effective_spend_limit_micros().map(Micros),
            })
        }
    };

    Ok(Usage {
        account,
        since,
        now,
        requests,
        limited,
        tasks,
        keys,
        latency,
        windows,
        spend,
    })
}

#[cfg(test)]
mod tests {
    use taskgate_core::{Email, Role};

    use super::*;
    use crate::service::testing::TestState;
    use crate::service::users::{self, NewUser};

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 90.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    /// A user reads their own account's usage, not another's; an admin
    /// reads any account's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn usage_is_read_by_who_sees_the_account() {
        let t = TestState::start(|_| {}).await;
        let other = crate::service::accounts::create(
            t.store(),
            &t.app.config,
            Actor::Operator,
            &crate::service::Origin::default(),
            crate::service::accounts::NewAccount {
                name: "other".to_owned(),
                plan: t.app.config.default_plan.clone(),
                monthly_spend_limit: None,
            },
        )
        .await
        .unwrap();
        let make = |email: &str, role| NewUser {
            account: t.account.id,
            email: Email::normalize(email).unwrap(),
            role,
            password: None,
        };
        let member = users::create(
            t.store(),
            Actor::Operator,
            &crate::service::Origin::default(),
            make("m@example.com", Role::Member),
        )
        .await
        .unwrap()
        .user;
        let admin = users::create(
            t.store(),
            Actor::Operator,
            &crate::service::Origin::default(),
            make("a@example.com", Role::Admin),
        )
        .await
        .unwrap()
        .user;
        let day = Span {
            bucket_ms: 3_600_000,
            buckets: 24,
        };
        let mine = read(&t.app, Actor::User(&member), t.account.id, Mode::Live, day)
            .await
            .unwrap();
        assert_eq!(mine.account.id, t.account.id);
        assert_eq!((mine.requests.len(), mine.limited.len()), (24, 24));
        assert!(mine.spend.is_some() && mine.latency.is_none());
        let test = read(&t.app, Actor::User(&member), t.account.id, Mode::Test, day)
            .await
            .unwrap();
        assert!(test.spend.is_none(), "test mode spends nothing");
        let e = read(&t.app, Actor::User(&member), other.id, Mode::Live, day).await;
        assert!(matches!(e, Err(UsageError::AccountNotFound(id)) if id == other.id));
        assert!(
            read(&t.app, Actor::User(&admin), other.id, Mode::Live, day)
                .await
                .is_ok()
        );
        t.stop().await;
    }
}
