//! Rows to store and helpers to read them back.
//!
//! The checks name accounts, modes, runners and times the short way
//! (`acct("acct_a")`, `mode("live")`, `runner("runner-1")`, `at(T0 + 5)`);
//! these helpers turn the names into the domain types the store takes.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde_json::Value;
use taskgate_core::{
    AccountId, AccountStatus, ApiSlug, Attempt, AttemptOutcome, Attempts, AuditActor, AuditContext,
    IdempotencyKey, KeyId, KeyType, Mode, PlanName, RequestId, RunnerId, Scope, Scopes, TaskError,
    TaskEvent, TaskEvents, TaskId, TaskStatus, Timestamp,
};
use taskgate_store::{
    Account, IdempotencyBegin, KeyRecord, Store, TaskFinish, TaskQuery, TaskRecord,
};

pub const MINUTE: i64 = 60_000;

/// Who the checks' changes are made by, for the audit log.
pub fn by() -> AuditContext {
    AuditContext::new(
        AuditActor::operator("conformance"),
        None,
        Some("conformance suite"),
    )
}
pub const HOUR: i64 = 60 * MINUTE;
pub const DAY: i64 = 24 * HOUR;
/// 2026-01-01T00:00:00Z: the clock of the checks.
pub const T0: i64 = 1_767_225_600_000;
/// 2026-02-01T00:00:00Z.
pub const FEB: i64 = T0 + 31 * DAY;

/// The time `ms` Unix milliseconds.
pub fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms)
}

/// The account id a check calls `name` (`acct_a`, `acct_b`, …): the same id
/// for the same name throughout the process.
pub fn acct(name: &str) -> AccountId {
    static NAMES: LazyLock<Mutex<HashMap<String, AccountId>>> = LazyLock::new(Default::default);
    *NAMES
        .lock()
        .unwrap()
        .entry(name.to_owned())
        .or_insert_with(AccountId::new)
}

pub fn mode(name: &str) -> Mode {
    name.parse().expect("a mode")
}

pub fn status(name: &str) -> TaskStatus {
    name.parse().expect("a status")
}

pub fn runner(name: &str) -> RunnerId {
    RunnerId::parse(name).expect("a runner id")
}

pub fn api(name: &str) -> ApiSlug {
    ApiSlug::parse(name).expect("an API slug")
}

pub fn idem(key: &str) -> IdempotencyKey {
    IdempotencyKey::parse(key).expect("an idempotency key")
}

/// A task id no task has.
pub fn unknown_task() -> TaskId {
    TaskId::new()
}

pub fn account(name: &str) -> Account {
    Account {
        id: AccountId::new(),
        name: name.to_owned(),
        plan: PlanName::parse("starter").unwrap(),
        status: AccountStatus::Active,
        monthly_spend_limit_micros: Some(25_000_000),
        max_monthly_spend_limit_micros: None,
        created_at: at(T0),
    }
}

pub async fn new_account(store: &dyn Store, name: &str) -> Account {
    let account = account(name);
    store
        .create_account(&account, &by())
        .await
        .expect("create account");
    account
}

pub fn key(account_id: AccountId) -> KeyRecord {
    KeyRecord {
        id: KeyId::new(),
        account_id,
        name: "default".to_owned(),
        key_type: KeyType::Live,
        mode: Mode::Live,
        scopes: Scopes(vec![Scope::TasksRead, Scope::TasksWrite]),
        allowed_apis: None,
        hint: "tg_live_…a1b2".to_owned(),
        created_at: at(T0),
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    }
}

/// The stored hash of a test key (any unique text will do for the store).
pub fn hash_of(key: &KeyRecord) -> String {
    format!("sha256:{}", key.id)
}

pub async fn new_key(store: &dyn Store, key: KeyRecord) -> KeyRecord {
    store
        .create_key(&key, &hash_of(&key), &by())
        .await
        .expect("create key");
    key
}

pub fn event(status_name: &str, ms: i64) -> TaskEvent {
    TaskEvent::new(status(status_name), at(ms))
}

/// A queued task as the API inserts it.
pub fn task(account_id: &str, mode_name: &str, api_name: &str) -> TaskRecord {
    TaskRecord {
        input: r#"{"text":"Bonjour tout le monde"}"#.to_owned(),
        metadata: r#"{"order":"A-17"}"#.to_owned(),
        timeout_ms: 30_000,
        ..TaskRecord::queued(
            TaskId::new(),
            acct(account_id),
            mode(mode_name),
            api(api_name),
            KeyId::new(),
            at(T0),
        )
    }
}

/// A task of an account the check made (rather than one it names).
pub fn task_of(account_id: AccountId, mode_name: &str, api_name: &str) -> TaskRecord {
    TaskRecord {
        account_id,
        ..task("acct_a", mode_name, api_name)
    }
}

/// A task that already ended with `status` (inserted as such).
pub fn ended_task(account_id: &str, mode: &str, api: &str, status_name: &str) -> TaskRecord {
    let mut t = task(account_id, mode, api);
    t.status = status(status_name);
    t.output = (status_name == "succeeded").then(|| r#"{"language":"fr"}"#.to_owned());
    t.error = (status_name == "failed").then(|| TaskError::new("provider_error", "boom"));
    t.events = TaskEvents(vec![
        event("queued", T0),
        event("running", T0 + 1),
        event(status_name, T0 + 2),
    ]);
    t.started_at = Some(at(T0 + 1));
    t.completed_at = Some(at(T0 + 2));
    t.runner = Some(runner("runner-old"));
    t
}

pub async fn insert(store: &dyn Store, task: TaskRecord) -> TaskRecord {
    store.insert_task(&task).await.expect("insert task");
    task
}

pub async fn fetch(store: &dyn Store, id: TaskId) -> TaskRecord {
    store
        .get_task_by_id(id)
        .await
        .expect("get task")
        .unwrap_or_else(|| panic!("task {id} missing"))
}

/// A queued task, inserted and claimed by `runner` at `now`.
pub async fn running_task(
    store: &dyn Store,
    account_id: AccountId,
    runner_name: &str,
    now: i64,
    lease_until: i64,
) -> TaskRecord {
    let t = insert(store, task_of(account_id, "live", "language")).await;
    store
        .claim_task(t.id, &runner(runner_name), at(now), at(lease_until))
        .await
        .expect("claim")
        .expect("queued task is claimable")
}

/// An attempt made by the local provider.
pub fn local_attempt(ms: i64) -> Attempt {
    Attempt {
        provider: "local".to_owned(),
        target: "language".to_owned(),
        started_at: at(ms),
        duration_ms: 1,
        outcome: AttemptOutcome::Succeeded,
        http_status: None,
    }
}

pub fn finish(
    status_name: &str,
    cost_micros: i64,
    completed_at: i64,
    charge: Option<AccountId>,
) -> TaskFinish {
    let succeeded = status_name == "succeeded";
    TaskFinish {
        status: status(status_name),
        output: succeeded.then(|| r#"{"language":"fr","confidence":0.98}"#.to_owned()),
        error: (!succeeded).then(|| TaskError::new("provider_error", "boom")),
        units: 3,
        input_tokens: Some(12),
        output_tokens: Some(4),
        reasoning_tokens: Some(3),
        cached_input_tokens: Some(8),
        cost_micros,
        attempts: Attempts(vec![local_attempt(completed_at - 1)]),
        completed_at: at(completed_at),
        message: None,
        charge_account: charge,
    }
}

/// The task's `events`, as the JSON they are stored as.
pub fn events(t: &TaskRecord) -> Vec<Value> {
    match serde_json::to_value(&t.events) {
        Ok(Value::Array(items)) => items,
        other => panic!("events of {} is not a JSON array: {other:?}", t.id),
    }
}

pub fn event_statuses(t: &TaskRecord) -> Vec<String> {
    t.events.iter().map(|e| e.status.to_string()).collect()
}

/// The `at` of the task's last event, in Unix milliseconds.
pub fn last_event_at(t: &TaskRecord) -> i64 {
    t.events.last().expect("an event").at.unix_ms()
}

pub fn error_code(t: &TaskRecord) -> Option<String> {
    t.error.as_ref().map(|e| e.code.clone())
}

pub fn query(account_id: &str, mode_name: &str) -> TaskQuery {
    TaskQuery {
        descending: false,
        ..TaskQuery::new(acct(account_id), mode(mode_name), 100)
    }
}

pub async fn list_ids(store: &dyn Store, q: &TaskQuery) -> Vec<TaskId> {
    let tasks = store.list_tasks(q).await.expect("list tasks");
    tasks.into_iter().map(|t| t.id).collect()
}

pub fn ids(tasks: &[&TaskRecord]) -> Vec<TaskId> {
    tasks.iter().map(|t| t.id).collect()
}

/// The request that the checks let hold `key` of `account` (the same one for
/// the same names throughout the process), unless a check names another.
pub fn owner_of(account: &str, key: &str) -> RequestId {
    static OWNERS: LazyLock<Mutex<HashMap<(String, String), RequestId>>> =
        LazyLock::new(Default::default);
    *OWNERS
        .lock()
        .unwrap()
        .entry((account.to_owned(), key.to_owned()))
        .or_insert_with(RequestId::new)
}

/// An idempotency request at `now`, by [`owner_of`] the key: records expire
/// after a day and go stale after five minutes.
pub fn begin(account_id: &str, key: &str, request_hash: &str, now: i64) -> IdempotencyBegin {
    IdempotencyBegin {
        account_id: acct(account_id),
        mode: Mode::Live,
        key: idem(key),
        owner: owner_of(account_id, key),
        request_hash: request_hash.to_owned(),
        now: at(now),
        expired_before: at(now - DAY),
        stale_before: at(now - 5 * MINUTE),
    }
}
