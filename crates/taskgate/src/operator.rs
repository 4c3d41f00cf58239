//! The command line's door onto the services: flags parsed into domain
//! types, the services called as the operator, their results printed as
//! JSON objects (the CLI's interface for scripts), their errors worded as
//! the flags that caused them.

use anyhow::anyhow;
use serde_json::Value;
use taskgate_core::{
    AccountId, AccountStatus, ApiList, ApiSlug, Email, KeyId, KeyType, Micros, Role, Scope,
    Timestamp, UserStatus,
};
use taskgate_server::Config;
use taskgate_server::service::accounts::{self, AccountError, FirstStart, NewAccount};
use taskgate_server::service::keys::{self, KeyError, NewKey};
use taskgate_server::service::users::{self, NewUser, UserError, UserRef, WithPassword};
use taskgate_server::service::{Actor, Origin};
use taskgate_server::views::{AccountView, KeyView, UserView};
use taskgate_store::{Account, AccountUpdate, KeyRecord, Store, UserRecord};

const OPERATOR: Actor<'static> = Actor::Operator;

// Accounts.

pub async fn create_account(
    store: &dyn Store,
    config: &Config,
    name: &str,
    plan: &str,
    monthly_spend_limit_usd: Option<&str>,
) -> anyhow::Result<Value> {
    let limit = monthly_spend_limit_usd
        .map(Micros::parse_usd)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let new = NewAccount {
        name: name.to_owned(),
        plan: accounts::plan_of(config, plan).map_err(account_error)?,
        monthly_spend_limit: limit,
    };
    let account = accounts::create(store, config, OPERATOR, &Origin::cli(), new)
        .await
        .map_err(account_error)?;
    Ok(account_json(&account))
}

/// What `accounts update` changes; `None` leaves a field as it is. The USD
/// amounts take `none` to remove the limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccountChanges<'a> {
    pub plan: Option<&'a str>,
    pub status: Option<&'a str>,
    pub monthly_spend_limit_usd: Option<&'a str>,
    pub max_monthly_spend_limit_usd: Option<&'a str>,
}

pub async fn update_account(
    store: &dyn Store,
    config: &Config,
    id: &str,
    changes: AccountChanges<'_>,
) -> anyhow::Result<Value> {
    let plan = changes
        .plan
        .map(|p| accounts::plan_of(config, p))
        .transpose()
        .map_err(account_error)?;
    let status = changes
        .status
        .map(|s| {
            s.parse::<AccountStatus>().map_err(|_| {
                let [a, b] = AccountStatus::ALL.map(AccountStatus::as_str);
                anyhow!("--status must be {a} or {b}")
            })
        })
        .transpose()?;
    let update = AccountUpdate {
        plan,
        status,
        monthly_spend_limit_micros: usd_change(
            "--monthly-spend-limit",
            changes.monthly_spend_limit_usd,
        )?,
        max_monthly_spend_limit_micros: usd_change(
            "--max-monthly-spend-limit",
            changes.max_monthly_spend_limit_usd,
        )?,
    };
    let id = account_id(id)?;
    let account = accounts::update(store, config, OPERATOR, &Origin::cli(), id, update)
        .await
        .map_err(account_error)?;
    Ok(account_json(&account))
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

pub async fn list_accounts(store: &dyn Store) -> anyhow::Result<Value> {
    let all = accounts::list(store, OPERATOR)
        .await
        .map_err(account_error)?;
    Ok(Value::Array(all.iter().map(account_json).collect()))
}

fn account_id(id: &str) -> anyhow::Result<AccountId> {
    AccountId::parse(id).map_err(|_| anyhow!("no account with id {id:?}"))
}

fn account_error(e: AccountError) -> anyhow::Error {
    match e {
        AccountError::BadName => {
            anyhow!(
                "--name must be 1 to {} characters",
                accounts::NAME_MAX_CHARS
            )
        }
        AccountError::UnknownPlan { plan, known } => {
            let known: Vec<&str> = known.iter().map(|p| p.as_str()).collect();
            anyhow!("unknown plan {plan:?} (known: {})", known.join(", "))
        }
        AccountError::NothingToChange => anyhow!(
            "nothing to change: give --plan, --status, --monthly-spend-limit or --max-monthly-spend-limit"
        ),
        AccountError::NotFound(id) => anyhow!("no account with id {:?}", id.to_string()),
        AccountError::Key(e) => key_error(e),
        // The operator administers: an owner's limits never apply to it.
        e @ (AccountError::AboveCeiling { .. }
        | AccountError::CeilingHoldsALimit { .. }
        | AccountError::Forbidden
        | AccountError::Store(_)) => e.into(),
    }
}

// Keys.

pub struct NewKeyFlags<'a> {
    pub account_id: &'a str,
    pub key_type: KeyType,
    pub name: &'a str,
    pub scopes: Option<Vec<String>>,
    pub apis: Option<Vec<String>>,
    pub expires_in_ms: Option<i64>,
}

/// Creates a key and returns its object with `secret`, the whole key, shown
/// this once.
pub async fn create_key(store: &dyn Store, flags: NewKeyFlags<'_>) -> anyhow::Result<Value> {
    let account = account_id(flags.account_id)?;
    let scopes = flags
        .scopes
        .map(|given| {
            given
                .iter()
                .map(|s| s.trim().parse::<Scope>().map_err(|e| anyhow!(e)))
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .transpose()?;
    let apis = flags
        .apis
        .map(|given| {
            given
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| ApiSlug::parse(s).map_err(|e| anyhow!("--apis: {e}")))
                .collect::<anyhow::Result<Vec<_>>>()
                .map(ApiList)
        })
        .transpose()?;
    let new = NewKey {
        key_type: flags.key_type,
        name: flags.name.to_owned(),
        scopes,
        apis,
        expires_in_ms: flags.expires_in_ms,
    };
    let made = keys::create(
        store,
        OPERATOR,
        &Origin::cli(),
        account,
        new,
        Timestamp::now(),
    )
    .await
    .map_err(key_error)?;
    Ok(json_of(KeyView::created(&made)))
}

pub async fn list_keys(store: &dyn Store, account: &str) -> anyhow::Result<Value> {
    let all = keys::list(store, OPERATOR, account_id(account)?)
        .await
        .map_err(key_error)?;
    Ok(Value::Array(all.iter().map(key_json).collect()))
}

pub async fn revoke_key(store: &dyn Store, id: &str) -> anyhow::Result<Value> {
    let key = keys::revoke(
        store,
        OPERATOR,
        &Origin::cli(),
        key_id(id)?,
        Timestamp::now(),
    )
    .await
    .map_err(key_error)?;
    Ok(key_json(&key))
}

/// A new key like the old one; the old one lives on for `grace_ms`.
pub async fn roll_key(store: &dyn Store, id: &str, grace_ms: i64) -> anyhow::Result<Value> {
    let rolled = keys::roll(
        store,
        OPERATOR,
        &Origin::cli(),
        key_id(id)?,
        grace_ms,
        Timestamp::now(),
    )
    .await
    .map_err(key_error)?;
    Ok(json_of(KeyView::rolled(&rolled)))
}

fn key_id(id: &str) -> anyhow::Result<KeyId> {
    KeyId::parse(id).map_err(|_| anyhow!("no key with id {id:?}"))
}

fn key_error(e: KeyError) -> anyhow::Error {
    match e {
        KeyError::AccountNotFound(id) => anyhow!("no account with id {:?}", id.to_string()),
        KeyError::NotFound(id) => anyhow!("no key with id {:?}", id.to_string()),
        KeyError::BadName => anyhow!("--name must be 1 to {} characters", keys::NAME_MAX_CHARS),
        KeyError::ScopesNeeded => {
            anyhow!(
                "a restricted key needs --scopes (apis:read, tasks:read, tasks:write, webhooks:read, webhooks:write)"
            )
        }
        KeyError::ScopesNotRestricted => {
            anyhow!("--scopes applies to restricted keys only; live and test keys have full access")
        }
        KeyError::ApisEmpty => anyhow!("--apis needs at least one API slug"),
        KeyError::ApisNotRestricted => anyhow!("--apis applies to restricted keys only"),
        KeyError::BadLifetime => anyhow!("--expires-in must be positive"),
        KeyError::Revoked(id) => anyhow!("key {id} is revoked; create a new key instead"),
        KeyError::Expired(id) => anyhow!("key {id} has expired; create a new key instead"),
        e @ (KeyError::Forbidden | KeyError::Store(_)) => e.into(),
    }
}

// Users.

/// Creates a user; with no `password` one is generated. The user object,
/// with `password` when it was generated (shown this once).
pub async fn create_user(
    store: &dyn Store,
    account: &str,
    email: &str,
    role: &str,
    password: Option<String>,
) -> anyhow::Result<Value> {
    let account =
        AccountId::parse(account).map_err(|_| anyhow!("{account:?} is not an account id"))?;
    let new = NewUser {
        account,
        email: Email::normalize(email).map_err(|e| anyhow!(e))?,
        role: role.parse::<Role>().map_err(|e: String| anyhow!(e))?,
        password,
    };
    let made = users::create(store, OPERATOR, &Origin::cli(), new)
        .await
        .map_err(|e| user_error(e, ""))?;
    Ok(json_of(UserView::with_password(&made)))
}

pub async fn list_users(store: &dyn Store, account: Option<&str>) -> anyhow::Result<Value> {
    let account = account
        .map(|a| AccountId::parse(a).map_err(|_| anyhow!("{a:?} is not an account id")))
        .transpose()?;
    let all = users::list(store, OPERATOR, account)
        .await
        .map_err(|e| user_error(e, ""))?;
    Ok(Value::Array(all.iter().map(user_json).collect()))
}

/// Disables a user (their sessions end) or enables them again.
pub async fn set_status(store: &dyn Store, who: &str, status: UserStatus) -> anyhow::Result<Value> {
    let user = users::set_status(store, OPERATOR, &Origin::cli(), &user_ref(who)?, status)
        .await
        .map_err(|e| user_error(e, who))?;
    Ok(user_json(&user))
}

/// A new password (generated when none is given; then shown this once). The
/// user's sessions end.
pub async fn reset_password(
    store: &dyn Store,
    who: &str,
    password: Option<String>,
) -> anyhow::Result<Value> {
    let made = users::reset_password(store, OPERATOR, &Origin::cli(), &user_ref(who)?, password)
        .await
        .map_err(|e| user_error(e, who))?;
    Ok(json_of(UserView::with_password(&made)))
}

fn user_ref(who: &str) -> anyhow::Result<UserRef> {
    UserRef::parse(who).ok_or_else(|| not_a_user(who))
}

fn not_a_user(who: &str) -> anyhow::Error {
    anyhow!("no user {who:?} (give a user id or an email)")
}

fn user_error(e: UserError, who: &str) -> anyhow::Error {
    match e {
        UserError::AccountNotFound(id) => anyhow!("no account with id {:?}", id.to_string()),
        UserError::NotFound => not_a_user(who),
        e @ (UserError::EmailTaken(_)
        | UserError::WeakPassword(_)
        | UserError::BadEmail(_)
        | UserError::DisablingSelf
        | UserError::Forbidden
        | UserError::Store(_)) => e.into(),
    }
}

// First start.

/// The first start's account and keys, if the store was empty.
pub async fn bootstrap(store: &dyn Store, config: &Config) -> anyhow::Result<Option<FirstStart>> {
    accounts::bootstrap(store, config, Timestamp::now())
        .await
        .map_err(account_error)
}

/// The first start's admin, if the store had no user.
pub async fn bootstrap_admin(
    store: &dyn Store,
    email: Option<&Email>,
) -> anyhow::Result<Option<WithPassword>> {
    users::bootstrap_admin(store, email)
        .await
        .map_err(|e| user_error(e, ""))
}

/// An object as the CLI prints it: the server's view of it, as JSON.
fn json_of(view: impl serde::Serialize) -> Value {
    serde_json::to_value(view).unwrap_or(Value::Null)
}

fn account_json(a: &Account) -> Value {
    json_of(AccountView::new(a))
}

fn key_json(k: &KeyRecord) -> Value {
    json_of(KeyView::new(k))
}

fn user_json(u: &UserRecord) -> Value {
    json_of(UserView::new(u))
}
