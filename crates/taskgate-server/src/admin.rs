//! Operator actions on accounts and keys, shared by the CLI and first start.

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use taskgate_core::{
    AccountId, AccountStatus, ApiKeySecret, ApiList, ApiSlug, KeyId, KeyType, Micros, PlanName,
    Scope, Scopes, Timestamp,
};
use taskgate_store::prelude::*;
use taskgate_store::{Account, AccountUpdate, KeyRecord};

use crate::config::Config;
use crate::views::{account_json, key_json};

pub async fn create_account(
    store: &dyn Store,
    config: &Config,
    name: &str,
    plan: &str,
    monthly_spend_limit_usd: Option<&str>,
) -> anyhow::Result<Value> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        bail!("--name must be 1 to 200 characters");
    }
    let plan = check_plan(config, plan)?;
    let limit = monthly_spend_limit_usd
        .map(Micros::parse_usd)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let account = Account {
        id: AccountId::new(),
        name: name.to_owned(),
        plan,
        status: AccountStatus::Active,
        monthly_spend_limit_micros: limit.map(|m| m.0),
        max_monthly_spend_limit_micros: None,
        created_at: Timestamp::now(),
    };
    store.create_account(&account).await?;
    Ok(account_json(&account))
}

/// `plan`, if it names a plan of the configuration.
fn check_plan(config: &Config, plan: &str) -> anyhow::Result<PlanName> {
    match PlanName::parse(plan) {
        Ok(name) if config.plans.contains_key(&name) => Ok(name),
        _ => {
            let known: Vec<&str> = config.plans.keys().map(PlanName::as_str).collect();
            bail!("unknown plan {plan:?} (known: {})", known.join(", "));
        }
    }
}

fn account_id(id: &str) -> anyhow::Result<AccountId> {
    AccountId::parse(id).map_err(|_| anyhow!("no account with id {id:?}"))
}

fn key_id(id: &str) -> anyhow::Result<KeyId> {
    KeyId::parse(id).map_err(|_| anyhow!("no key with id {id:?}"))
}

pub async fn update_account(
    store: &dyn Store,
    config: &Config,
    id: &str,
    plan: Option<&str>,
    status: Option<&str>,
    monthly_spend_limit_usd: Option<&str>,
) -> anyhow::Result<Value> {
    let changes = AccountChanges {
        plan,
        status,
        monthly_spend_limit_usd,
        max_monthly_spend_limit_usd: None,
    };
    update_account_with(store, config, id, changes).await
}

/// What `accounts update` changes; `None` leaves a field as it is. The USD
/// amounts take `none` to remove the limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccountChanges<'a> {
    pub plan: Option<&'a str>,
    pub status: Option<&'a str>,
    /// The owners' own limit (which the operator may set too).
    pub monthly_spend_limit_usd: Option<&'a str>,
    /// The operator's ceiling on the owners' limit.
    pub max_monthly_spend_limit_usd: Option<&'a str>,
}

/// `None`: no change; `Some(None)`: removed (`none`); `Some(Some(micros))`.
fn usd_change(flag: &str, value: Option<&str>) -> anyhow::Result<Option<Option<i64>>> {
    Ok(match value.map(str::trim) {
        None => None,
        Some(v) if v.eq_ignore_ascii_case("none") => Some(None),
        Some(v) => Some(Some(
            Micros::parse_usd(v.trim_start_matches('$'))
                .map_err(|e| anyhow!("{flag}: {e} (or `none` to remove it)"))?
                .0,
        )),
    })
}

/// Changes an account in one write: plan, status, the owners' monthly spend
/// limit and the operator's ceiling on it.
pub async fn update_account_with(
    store: &dyn Store,
    config: &Config,
    id: &str,
    changes: AccountChanges<'_>,
) -> anyhow::Result<Value> {
    let plan = changes.plan.map(|p| check_plan(config, p)).transpose()?;
    let status = changes
        .status
        .map(|s| {
            s.parse::<AccountStatus>().map_err(|_| {
                let [a, b] = AccountStatus::ALL.map(AccountStatus::as_str);
                anyhow!("--status must be {a} or {b}")
            })
        })
        .transpose()?;
    let limit = usd_change("--monthly-spend-limit", changes.monthly_spend_limit_usd)?;
    let ceiling = usd_change(
        "--max-monthly-spend-limit",
        changes.max_monthly_spend_limit_usd,
    )?;
    if plan.is_none() && status.is_none() && limit.is_none() && ceiling.is_none() {
        bail!(
            "nothing to change: give --plan, --status, --monthly-spend-limit or --max-monthly-spend-limit"
        );
    }
    let update = AccountUpdate {
        plan,
        status,
        monthly_spend_limit_micros: limit,
        max_monthly_spend_limit_micros: ceiling,
    };
    let account = store
        .update_account(account_id(id)?, &update)
        .await?
        .with_context(|| format!("no account with id {id:?}"))?;
    Ok(account_json(&account))
}

pub async fn list_accounts(store: &dyn Store) -> anyhow::Result<Value> {
    Ok(Value::Array(
        store
            .list_accounts()
            .await?
            .iter()
            .map(account_json)
            .collect(),
    ))
}

pub struct NewKey<'a> {
    pub account_id: &'a str,
    pub key_type: KeyType,
    pub name: &'a str,
    pub scopes: Option<Vec<String>>,
    pub apis: Option<Vec<String>>,
    pub expires_in_ms: Option<i64>,
}

/// Creates a key and returns its object with `secret`, the whole key, shown
/// this once.
pub async fn create_key(store: &dyn Store, new: NewKey<'_>) -> anyhow::Result<Value> {
    let account_id = account_id(new.account_id)?;
    store
        .get_account(account_id)
        .await?
        .with_context(|| format!("no account with id {:?}", new.account_id))?;
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        bail!("--name must be 1 to 200 characters");
    }
    let scopes: Vec<Scope> = match (new.key_type, &new.scopes) {
        (KeyType::Restricted, Some(s)) => {
            let mut parsed = Vec::new();
            for x in s {
                let scope: Scope = x.trim().parse().map_err(|e: String| anyhow!(e))?;
                if !parsed.contains(&scope) {
                    parsed.push(scope);
                }
            }
            if parsed.is_empty() {
                bail!("--scopes needs at least one scope");
            }
            parsed.sort();
            parsed
        }
        (KeyType::Restricted, None) => {
            bail!("a restricted key needs --scopes (apis:read, tasks:read, tasks:write)")
        }
        (_, Some(_)) => {
            bail!("--scopes applies to restricted keys only; live and test keys have full access")
        }
        (_, None) => Scope::ALL.to_vec(),
    };
    let apis = match (new.key_type, &new.apis) {
        (KeyType::Restricted, Some(a)) => {
            let list = a
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| ApiSlug::parse(s).map_err(|e| anyhow!("--apis: {e}")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            if list.is_empty() {
                bail!("--apis needs at least one API slug");
            }
            Some(ApiList(list))
        }
        (_, Some(_)) => bail!("--apis applies to restricted keys only"),
        (_, None) => None,
    };
    if new.expires_in_ms.is_some_and(|ms| ms <= 0) {
        bail!("--expires-in must be positive");
    }
    let now = Timestamp::now();
    let secret = ApiKeySecret::generate(new.key_type);
    let record = KeyRecord {
        id: KeyId::new(),
        account_id,
        name: name.to_owned(),
        key_type: new.key_type,
        mode: new.key_type.mode(),
        scopes: Scopes(scopes),
        allowed_apis: apis,
        hint: secret.hint(),
        created_at: now,
        expires_at: new.expires_in_ms.map(|ms| now.plus_ms(ms)),
        last_used_at: None,
        revoked_at: None,
    };
    store.create_key(&record, &secret.hash()).await?;
    Ok(with_secret(&record, &secret))
}

fn with_secret(record: &KeyRecord, secret: &ApiKeySecret) -> Value {
    let mut v = key_json(record);
    v["secret"] = json!(secret.expose());
    v
}

pub async fn list_keys(store: &dyn Store, account: &str) -> anyhow::Result<Value> {
    let id = account_id(account)?;
    store
        .get_account(id)
        .await?
        .with_context(|| format!("no account with id {account:?}"))?;
    Ok(Value::Array(
        store.list_keys(id).await?.iter().map(key_json).collect(),
    ))
}

pub async fn revoke_key(store: &dyn Store, id: &str) -> anyhow::Result<Value> {
    let key = store
        .revoke_key(key_id(id)?, Timestamp::now())
        .await?
        .with_context(|| format!("no key with id {id:?}"))?;
    Ok(key_json(&key))
}

/// A new key like the old one; the old one lives on for `grace_ms`.
pub async fn roll_key(store: &dyn Store, id: &str, grace_ms: i64) -> anyhow::Result<Value> {
    let old = store
        .get_key(key_id(id)?)
        .await?
        .with_context(|| format!("no key with id {id:?}"))?;
    if old.revoked_at.is_some() {
        bail!("key {id} is revoked; create a new key instead");
    }
    let now = Timestamp::now();
    if old.expires_at.is_some_and(|t| t <= now) {
        bail!("key {id} has expired; create a new key instead");
    }
    let secret = ApiKeySecret::generate(old.key_type);
    let new = KeyRecord {
        id: KeyId::new(),
        hint: secret.hint(),
        created_at: now,
        // The new key keeps the old one's remaining lifetime, if it had one.
        expires_at: old.expires_at,
        last_used_at: None,
        revoked_at: None,
        ..old.clone()
    };
    store
        .roll_key(old.id, &new, &secret.hash(), now.plus_ms(grace_ms.max(0)))
        .await?;
    let mut v = with_secret(&new, &secret);
    v["rolled_from"] = json!(old.id);
    Ok(v)
}

/// First start: an empty store gets the `default` account and a live and a
/// test key, returned so that `serve` can print them once.
pub async fn bootstrap(
    store: &dyn Store,
    config: &Config,
) -> anyhow::Result<Option<(Value, Value, Value)>> {
    if store.count_accounts().await? > 0 {
        return Ok(None);
    }
    let account =
        create_account(store, config, "default", config.default_plan.as_str(), None).await?;
    let id = account["id"].as_str().unwrap_or_default().to_owned();
    let key = |t, name| NewKey {
        account_id: &id,
        key_type: t,
        name,
        scopes: None,
        apis: None,
        expires_in_ms: None,
    };
    let live = create_key(store, key(KeyType::Live, "default live key")).await?;
    let test = create_key(store, key(KeyType::Test, "default test key")).await?;
    Ok(Some((account, live, test)))
}

pub fn is_account_id(s: &str) -> bool {
    AccountId::parse(s).is_ok()
}
