//! API keys: created, listed, revoked and rolled by the operator, admins
//! and an account's owners. A key's secret is returned once, at creation
//! (or roll), and never again.

use taskgate_core::{AccountId, ApiKeySecret, ApiList, KeyId, KeyType, Scope, Scopes, Timestamp};
use taskgate_store::prelude::*;
use taskgate_store::{KeyRecord, KeyState, StoreError};

use super::Actor;

/// The longest key name, in characters.
pub const NAME_MAX_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("there is no account {0}")]
    AccountNotFound(AccountId),
    #[error("there is no key {0}")]
    NotFound(KeyId),
    #[error("a key name is 1 to {NAME_MAX_CHARS} characters")]
    BadName,
    #[error("a restricted key needs at least one scope")]
    ScopesNeeded,
    #[error("scopes are for restricted keys; live and test keys have full access")]
    ScopesNotRestricted,
    #[error("a list of APIs needs at least one API")]
    ApisEmpty,
    #[error("a list of APIs is for restricted keys only")]
    ApisNotRestricted,
    #[error("a key's lifetime must be positive")]
    BadLifetime,
    #[error("key {0} is revoked")]
    Revoked(KeyId),
    #[error("key {0} has expired")]
    Expired(KeyId),
    #[error("this actor may not manage the account's keys")]
    Forbidden,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A key to create.
pub struct NewKey {
    pub key_type: KeyType,
    pub name: String,
    /// A restricted key's scopes (required for it, refused for the others,
    /// which have them all).
    pub scopes: Option<Vec<Scope>>,
    /// A restricted key's APIs, if it is held to some.
    pub apis: Option<ApiList>,
    pub expires_in_ms: Option<i64>,
}

/// A key just made, with its whole secret: shown this once.
pub struct CreatedKey {
    pub key: KeyRecord,
    pub secret: ApiKeySecret,
}

/// A key made to replace another, which lives on for the grace given.
pub struct RolledKey {
    pub key: KeyRecord,
    pub secret: ApiKeySecret,
    pub rolled_from: KeyId,
}

pub async fn create(
    store: &dyn Store,
    actor: Actor<'_>,
    account: AccountId,
    new: NewKey,
) -> Result<CreatedKey, KeyError> {
    if !actor.sees(account) {
        return Err(KeyError::AccountNotFound(account));
    }
    if !actor.manages(account) {
        return Err(KeyError::Forbidden);
    }
    store
        .get_account(account)
        .await?
        .ok_or(KeyError::AccountNotFound(account))?;
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX_CHARS {
        return Err(KeyError::BadName);
    }
    let restricted = new.key_type == KeyType::Restricted;
    let scopes = match new.scopes {
        Some(mut scopes) if restricted => {
            scopes.sort();
            scopes.dedup();
            if scopes.is_empty() {
                return Err(KeyError::ScopesNeeded);
            }
            scopes
        }
        None if restricted => return Err(KeyError::ScopesNeeded),
        Some(_) => return Err(KeyError::ScopesNotRestricted),
        None => Scope::ALL.to_vec(),
    };
    let apis = match new.apis {
        Some(_) if !restricted => return Err(KeyError::ApisNotRestricted),
        Some(list) if list.0.is_empty() => return Err(KeyError::ApisEmpty),
        apis => apis,
    };
    if new.expires_in_ms.is_some_and(|ms| ms <= 0) {
        return Err(KeyError::BadLifetime);
    }
    let now = Timestamp::now();
    let secret = ApiKeySecret::generate(new.key_type);
    let key = KeyRecord {
        id: KeyId::new(),
        account_id: account,
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
    store.create_key(&key, &secret.hash()).await?;
    Ok(CreatedKey { key, secret })
}

/// The account's keys, newest first as the store keeps them.
pub async fn list(
    store: &dyn Store,
    actor: Actor<'_>,
    account: AccountId,
) -> Result<Vec<KeyRecord>, KeyError> {
    if !actor.sees(account) {
        return Err(KeyError::AccountNotFound(account));
    }
    store
        .get_account(account)
        .await?
        .ok_or(KeyError::AccountNotFound(account))?;
    Ok(store.list_keys(account).await?)
}

/// The key `id`, if the actor sees its account.
pub async fn get(store: &dyn Store, actor: Actor<'_>, id: KeyId) -> Result<KeyRecord, KeyError> {
    store
        .get_key(id)
        .await?
        .filter(|k| actor.sees(k.account_id))
        .ok_or(KeyError::NotFound(id))
}

pub async fn revoke(store: &dyn Store, actor: Actor<'_>, id: KeyId) -> Result<KeyRecord, KeyError> {
    let key = get(store, actor, id).await?;
    if !actor.manages(key.account_id) {
        return Err(KeyError::Forbidden);
    }
    store
        .revoke_key(id, Timestamp::now())
        .await?
        .ok_or(KeyError::NotFound(id))
}

/// A new key like the old one, which lives on for `grace_ms`.
pub async fn roll(
    store: &dyn Store,
    actor: Actor<'_>,
    id: KeyId,
    grace_ms: i64,
) -> Result<RolledKey, KeyError> {
    let old = get(store, actor, id).await?;
    if !actor.manages(old.account_id) {
        return Err(KeyError::Forbidden);
    }
    if old.revoked_at.is_some() {
        return Err(KeyError::Revoked(id));
    }
    let now = Timestamp::now();
    if old.expires_at.is_some_and(|t| t <= now) {
        return Err(KeyError::Expired(id));
    }
    let secret = ApiKeySecret::generate(old.key_type);
    let key = KeyRecord {
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
        .roll_key(old.id, &key, &secret.hash(), now.plus_ms(grace_ms.max(0)))
        .await?;
    Ok(RolledKey {
        key,
        secret,
        rolled_from: old.id,
    })
}

/// The name of the test key a new Try it key gets.
pub const TRY_IT_KEY_NAME: &str = "Dashboard: Try it";

/// The account's test key the dashboard's Try it makes its tasks with: an
/// active test key of the account, or a new one named [`TRY_IT_KEY_NAME`]
/// (its secret is not kept: only its id is needed). Whoever sees the
/// account may try its APIs in test mode, members too.
pub async fn try_it_key(
    store: &dyn Store,
    actor: Actor<'_>,
    account: AccountId,
) -> Result<KeyRecord, KeyError> {
    let keys = list(store, actor, account).await?;
    let now = Timestamp::now();
    if let Some(k) = keys
        .into_iter()
        .find(|k| k.key_type == KeyType::Test && k.state_at(now) == KeyState::Active)
    {
        return Ok(k);
    }
    let new = NewKey {
        key_type: KeyType::Test,
        name: TRY_IT_KEY_NAME.to_owned(),
        scopes: None,
        apis: None,
        expires_in_ms: None,
    };
    // Made for the account by the dashboard itself, not by the actor (a
    // member may try APIs without managing keys).
    Ok(create(store, Actor::Operator, account, new).await?.key)
}
