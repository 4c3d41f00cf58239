//! Rows to store and helpers to read them back.

use serde_json::Value;
use taskgate_core::ids::{IdKind, new_id};
use taskgate_store::{
    Account, IdempotencyBegin, KeyRecord, Store, TaskFinish, TaskQuery, TaskRecord,
};

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 60 * MINUTE;
pub const DAY: i64 = 24 * HOUR;
/// 2026-01-01T00:00:00Z: the clock of the checks.
pub const T0: i64 = 1_767_225_600_000;
/// 2026-02-01T00:00:00Z.
pub const FEB: i64 = T0 + 31 * DAY;

pub fn account(name: &str) -> Account {
    Account {
        id: new_id(IdKind::Account),
        name: name.to_owned(),
        plan: "starter".to_owned(),
        status: "active".to_owned(),
        monthly_spend_limit_micros: Some(25_000_000),
        created_at: T0,
    }
}

pub async fn new_account(store: &dyn Store, name: &str) -> Account {
    let account = account(name);
    store
        .create_account(&account)
        .await
        .expect("create account");
    account
}

pub fn key(account_id: &str) -> KeyRecord {
    KeyRecord {
        id: new_id(IdKind::Key),
        account_id: account_id.to_owned(),
        name: "default".to_owned(),
        key_type: "secret".to_owned(),
        mode: "live".to_owned(),
        scopes: r#"["tasks:read","tasks:write"]"#.to_owned(),
        allowed_apis: None,
        hint: "tg_live_…a1b2".to_owned(),
        created_at: T0,
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
        .create_key(&key, &hash_of(&key))
        .await
        .expect("create key");
    key
}

pub fn event(status: &str, at: i64) -> String {
    format!(r#"{{"status":"{status}","at":{at}}}"#)
}

/// A queued task as the API inserts it.
pub fn task(account_id: &str, mode: &str, api: &str) -> TaskRecord {
    TaskRecord {
        id: new_id(IdKind::Task),
        account_id: account_id.to_owned(),
        mode: mode.to_owned(),
        api: api.to_owned(),
        status: "queued".to_owned(),
        input: r#"{"text":"Bonjour tout le monde"}"#.to_owned(),
        output: None,
        error: None,
        units: 0,
        input_tokens: None,
        output_tokens: None,
        cost_micros: 0,
        metadata: r#"{"order":"A-17"}"#.to_owned(),
        key_id: "key_test".to_owned(),
        idempotency_key: None,
        timeout_ms: 30_000,
        sandbox: None,
        events: format!("[{}]", event("queued", T0)),
        attempts: "[]".to_owned(),
        created_at: T0,
        started_at: None,
        completed_at: None,
        runner: None,
        lease_until: None,
    }
}

/// A task that already ended with `status` (inserted as such).
pub fn ended_task(account_id: &str, mode: &str, api: &str, status: &str) -> TaskRecord {
    let mut t = task(account_id, mode, api);
    t.status = status.to_owned();
    t.output = (status == "succeeded").then(|| r#"{"language":"fr"}"#.to_owned());
    t.error = (status == "failed").then(|| r#"{"code":"provider_error"}"#.to_owned());
    t.events = format!(
        "[{},{},{}]",
        event("queued", T0),
        event("running", T0 + 1),
        event(status, T0 + 2)
    );
    t.started_at = Some(T0 + 1);
    t.completed_at = Some(T0 + 2);
    t.runner = Some("runner-old".to_owned());
    t
}

pub async fn insert(store: &dyn Store, task: TaskRecord) -> TaskRecord {
    store.insert_task(&task).await.expect("insert task");
    task
}

pub async fn fetch(store: &dyn Store, id: &str) -> TaskRecord {
    store
        .get_task_by_id(id)
        .await
        .expect("get task")
        .unwrap_or_else(|| panic!("task {id} missing"))
}

/// A queued task, inserted and claimed by `runner` at `now`.
pub async fn running_task(
    store: &dyn Store,
    account_id: &str,
    runner: &str,
    now: i64,
    lease_until: i64,
) -> TaskRecord {
    let t = insert(store, task(account_id, "live", "language")).await;
    store
        .claim_task(&t.id, runner, now, lease_until)
        .await
        .expect("claim")
        .expect("queued task is claimable")
}

pub fn finish(
    status: &str,
    cost_micros: i64,
    completed_at: i64,
    charge: Option<&str>,
) -> TaskFinish {
    let succeeded = status == "succeeded";
    TaskFinish {
        status: status.to_owned(),
        output: succeeded.then(|| r#"{"language":"fr","confidence":0.98}"#.to_owned()),
        error: (!succeeded).then(|| r#"{"code":"provider_error","message":"boom"}"#.to_owned()),
        units: 3,
        input_tokens: Some(12),
        output_tokens: Some(4),
        cost_micros,
        attempts: r#"[{"provider":"local","ok":true}]"#.to_owned(),
        completed_at,
        event: event(status, completed_at),
        charge_account: charge.map(str::to_owned),
    }
}

/// The task's `events` array, which must be valid JSON.
pub fn events(t: &TaskRecord) -> Vec<Value> {
    match serde_json::from_str(&t.events) {
        Ok(Value::Array(items)) => items,
        other => panic!(
            "events of {} is not a JSON array: {other:?} ({})",
            t.id, t.events
        ),
    }
}

pub fn event_statuses(t: &TaskRecord) -> Vec<String> {
    events(t)
        .iter()
        .map(|e| e["status"].as_str().expect("event status").to_owned())
        .collect()
}

/// The `at` of the task's last event.
pub fn last_event_at(t: &TaskRecord) -> i64 {
    events(t).last().expect("an event")["at"]
        .as_i64()
        .expect("event at")
}

pub fn error_code(t: &TaskRecord) -> Option<String> {
    let error: Value = serde_json::from_str(t.error.as_deref()?).expect("error is JSON");
    error["code"].as_str().map(str::to_owned)
}

pub fn query(account_id: &str, mode: &str) -> TaskQuery {
    TaskQuery {
        account_id: account_id.to_owned(),
        mode: mode.to_owned(),
        limit: 100,
        ..TaskQuery::default()
    }
}

pub async fn list_ids(store: &dyn Store, q: &TaskQuery) -> Vec<String> {
    let tasks = store.list_tasks(q).await.expect("list tasks");
    tasks.into_iter().map(|t| t.id).collect()
}

pub fn ids(tasks: &[&TaskRecord]) -> Vec<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

/// An idempotency request at `now`: records expire after a day and go stale
/// after five minutes.
pub fn begin(account_id: &str, key: &str, request_hash: &str, now: i64) -> IdempotencyBegin {
    IdempotencyBegin {
        account_id: account_id.to_owned(),
        mode: "live".to_owned(),
        key: key.to_owned(),
        request_hash: request_hash.to_owned(),
        now,
        expired_before: now - DAY,
        stale_before: now - 5 * MINUTE,
    }
}
