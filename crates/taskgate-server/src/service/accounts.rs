//! Accounts: created and changed by the operator and admins; the first
//! start's `default` account with a live and a test key.

use taskgate_core::{AccountId, AccountStatus, KeyType, Micros, PlanName, Timestamp};
use taskgate_store::prelude::*;
use taskgate_store::{Account, AccountUpdate, StoreError};

use super::keys::{self, CreatedKey, NewKey};
use super::{Actor, Origin};
use crate::config::Config;

/// The longest account name, in characters.
pub const NAME_MAX_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("an account name is 1 to {NAME_MAX_CHARS} characters")]
    BadName,
    #[error("there is no plan {plan:?}")]
    UnknownPlan {
        plan: String,
        /// The plans there are, for the door to offer.
        known: Vec<PlanName>,
    },
    /// An owner's spend limit above the ceiling the operator set.
    #[error("the spend limit is above the account's ceiling of {ceiling_micros} micro-USD")]
    AboveCeiling { ceiling_micros: i64 },
    /// An owner removing the spend limit of an account with a ceiling.
    #[error("the spend limit cannot be removed under the account's ceiling")]
    CeilingHoldsALimit { ceiling_micros: i64 },
    #[error("the change names nothing to change")]
    NothingToChange,
    #[error("there is no account {0}")]
    NotFound(AccountId),
    #[error("this actor may not manage accounts")]
    Forbidden,
    /// The first start's keys could not be made.
    #[error(transparent)]
    Key(#[from] keys::KeyError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An account to create.
pub struct NewAccount {
    pub name: String,
    /// A plan of the configuration (checked here).
    pub plan: PlanName,
    pub monthly_spend_limit: Option<Micros>,
}

/// `plan`, if it names a plan of the configuration.
pub fn plan_of(config: &Config, plan: &str) -> Result<PlanName, AccountError> {
    match PlanName::parse(plan) {
        Ok(name) if config.plans.contains_key(&name) => Ok(name),
        _ => Err(AccountError::UnknownPlan {
            plan: plan.to_owned(),
            known: config.plans.keys().cloned().collect(),
        }),
    }
}

/// `plan`, if it is a plan of the configuration.
fn known_plan(config: &Config, plan: PlanName) -> Result<PlanName, AccountError> {
    if config.plans.contains_key(&plan) {
        return Ok(plan);
    }
    Err(AccountError::UnknownPlan {
        plan: plan.as_str().to_owned(),
        known: config.plans.keys().cloned().collect(),
    })
}

pub async fn create(
    store: &dyn Store,
    config: &Config,
    actor: Actor<'_>,
    origin: &Origin,
    new: NewAccount,
) -> Result<Account, AccountError> {
    if !actor.administers() {
        return Err(AccountError::Forbidden);
    }
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX_CHARS {
        return Err(AccountError::BadName);
    }
    let account = Account {
        id: AccountId::new(),
        name: name.to_owned(),
        plan: known_plan(config, new.plan)?,
        status: AccountStatus::Active,
        monthly_spend_limit_micros: new.monthly_spend_limit.map(|m| m.0),
        max_monthly_spend_limit_micros: None,
        created_at: Timestamp::now(),
    };
    store.create_account(&account, &actor.audit(origin)).await?;
    Ok(account)
}

/// Changes an account in one write: plan, status, the owners' monthly spend
/// limit and the operator's ceiling on it. Admins and the operator change
/// any of them; an account's owners only their own spend limit.
pub async fn update(
    store: &dyn Store,
    config: &Config,
    actor: Actor<'_>,
    origin: &Origin,
    id: AccountId,
    update: AccountUpdate,
) -> Result<Account, AccountError> {
    let owners_only = update.plan.is_none()
        && update.status.is_none()
        && update.max_monthly_spend_limit_micros.is_none();
    if !(actor.administers() || (owners_only && actor.manages(id))) {
        return Err(AccountError::Forbidden);
    }
    if let Some(plan) = &update.plan {
        known_plan(config, plan.clone())?;
    }
    if update.plan.is_none()
        && update.status.is_none()
        && update.monthly_spend_limit_micros.is_none()
        && update.max_monthly_spend_limit_micros.is_none()
    {
        return Err(AccountError::NothingToChange);
    }
    if !actor.administers()
        && let Some(limit) = update.monthly_spend_limit_micros
    {
        // Under an operator's ceiling an owner may lower the limit, never
        // raise it past the ceiling nor remove it.
        let account = get(store, actor, id).await?;
        match (account.max_monthly_spend_limit_micros, limit) {
            (Some(c), None) => return Err(AccountError::CeilingHoldsALimit { ceiling_micros: c }),
            (Some(c), Some(l)) if l > c => {
                return Err(AccountError::AboveCeiling { ceiling_micros: c });
            }
            _ => {}
        }
    }
    store
        .update_account(id, &update, &actor.audit(origin))
        .await?
        .ok_or(AccountError::NotFound(id))
}

pub async fn get(
    store: &dyn Store,
    actor: Actor<'_>,
    id: AccountId,
) -> Result<Account, AccountError> {
    if !actor.sees(id) {
        return Err(AccountError::NotFound(id));
    }
    store
        .get_account(id)
        .await?
        .ok_or(AccountError::NotFound(id))
}

pub async fn list(store: &dyn Store, actor: Actor<'_>) -> Result<Vec<Account>, AccountError> {
    if !actor.administers() {
        return Err(AccountError::Forbidden);
    }
    Ok(store.list_accounts().await?)
}

/// What the first start made, for `serve` to print once.
pub struct FirstStart {
    pub account: Account,
    pub live: CreatedKey,
    pub test: CreatedKey,
}

/// The name of the account the first start makes.
pub const DEFAULT_ACCOUNT_NAME: &str = "default";

/// First start: an empty store gets the `default` account and a live and a
/// test key, made at `now`. `None` when the store has an account already.
pub async fn bootstrap(
    store: &dyn Store,
    config: &Config,
    now: Timestamp,
) -> Result<Option<FirstStart>, AccountError> {
    if store.count_accounts().await? > 0 {
        return Ok(None);
    }
    let new = NewAccount {
        name: DEFAULT_ACCOUNT_NAME.to_owned(),
        plan: config.default_plan.clone(),
        monthly_spend_limit: None,
    };
    let origin = Origin::first_start();
    let account = create(store, config, Actor::Operator, &origin, new).await?;
    let key = |key_type, name: &str| NewKey {
        key_type,
        name: name.to_owned(),
        scopes: None,
        apis: None,
        expires_in_ms: None,
    };
    let live = keys::create(
        store,
        Actor::Operator,
        &origin,
        account.id,
        key(KeyType::Live, "default live key"),
        now,
    )
    .await?;
    let test = keys::create(
        store,
        Actor::Operator,
        &origin,
        account.id,
        key(KeyType::Test, "default test key"),
        now,
    )
    .await?;
    Ok(Some(FirstStart {
        account,
        live,
        test,
    }))
}
