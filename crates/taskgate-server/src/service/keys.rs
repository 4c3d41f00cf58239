//! API keys: created, listed, revoked and rolled by the operator, admins
//! and an account's owners. A key's secret is returned once, at creation
//! (or roll), and never again.

use taskgate_core::{
    AccountId, ApiKeySecret, ApiList, AuditContext, KeyId, KeyType, Mode, Scope, Scopes, Timestamp,
};
use taskgate_store::prelude::*;
use taskgate_store::{KeyRecord, KeyState, StoreError};

use super::{Actor, Origin};

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

/// A new key of `account`, made at `now` (its lifetime counts from then).
pub async fn create(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    account: AccountId,
    new: NewKey,
    now: Timestamp,
) -> Result<CreatedKey, KeyError> {
    if !actor.sees(account) {
        return Err(KeyError::AccountNotFound(account));
    }
    if !actor.manages(account) {
        return Err(KeyError::Forbidden);
    }
    make(store, &actor.audit(origin), account, new, now).await
}

/// A new key of `account`, whoever may make it, recorded as `audit`'s.
async fn make(
    store: &dyn Store,
    audit: &AuditContext,
    account: AccountId,
    new: NewKey,
    now: Timestamp,
) -> Result<CreatedKey, KeyError> {
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
    store.create_key(&key, &secret.hash(), audit).await?;
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

/// A page of an account's keys of one mode, with how many it has.
pub struct KeyPage {
    /// At most the page's length, oldest first.
    pub keys: Vec<KeyRecord>,
    /// More keys follow the last of the page.
    pub more: bool,
    /// The account's keys of the mode, and how many of them work now.
    pub total: i64,
    pub active: i64,
    /// When the page was read: what "now" is for the keys' states.
    pub now: Timestamp,
}

/// The account's keys of `mode` after `after` (by id), at most `limit` of
/// them; the counts of all.
pub async fn page(
    store: &dyn Store,
    actor: Actor<'_>,
    account: AccountId,
    mode: Mode,
    after: Option<KeyId>,
    limit: usize,
    now: Timestamp,
) -> Result<KeyPage, KeyError> {
    if !actor.sees(account) {
        return Err(KeyError::AccountNotFound(account));
    }
    // One more than the page, to know whether another follows.
    let (found, mut keys, (total, active)) = tokio::try_join!(
        store.get_account(account),
        store.list_keys_page(account, mode, after, limit as i64 + 1),
        store.count_keys(account, mode, now),
    )?;
    found.ok_or(KeyError::AccountNotFound(account))?;
    let more = keys.len() > limit;
    keys.truncate(limit);
    Ok(KeyPage {
        keys,
        more,
        total,
        active,
        now,
    })
}

/// The key `id`, if the actor sees its account.
pub async fn get(store: &dyn Store, actor: Actor<'_>, id: KeyId) -> Result<KeyRecord, KeyError> {
    store
        .get_key(id)
        .await?
        .filter(|k| actor.sees(k.account_id))
        .ok_or(KeyError::NotFound(id))
}

/// Revokes the key `id` at `now`.
pub async fn revoke(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    id: KeyId,
    now: Timestamp,
) -> Result<KeyRecord, KeyError> {
    let key = get(store, actor, id).await?;
    if !actor.manages(key.account_id) {
        return Err(KeyError::Forbidden);
    }
    store
        .revoke_key(id, now, &actor.audit(origin))
        .await?
        .ok_or(KeyError::NotFound(id))
}

/// A new key like the old one, made at `now`; the old one lives on for
/// `grace_ms` from then.
pub async fn roll(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    id: KeyId,
    grace_ms: i64,
    now: Timestamp,
) -> Result<RolledKey, KeyError> {
    let old = get(store, actor, id).await?;
    if !actor.manages(old.account_id) {
        return Err(KeyError::Forbidden);
    }
    if old.revoked_at.is_some() {
        return Err(KeyError::Revoked(id));
    }
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
        .roll_key(
            old.id,
            &key,
            &secret.hash(),
            now.plus_ms(grace_ms.max(0)),
            &actor.audit(origin),
        )
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
    origin: &Origin,
    account: AccountId,
    now: Timestamp,
) -> Result<KeyRecord, KeyError> {
    let keys = list(store, actor, account).await?;
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
    // Made for the account by the dashboard itself, whether or not the
    // actor manages keys (a member may try APIs); the log names the actor
    // whose Try it made it.
    Ok(make(store, &actor.audit(origin), account, new, now)
        .await?
        .key)
}

#[cfg(test)]
mod tests {
    use taskgate_core::{Email, Role};
    use taskgate_store::UserRecord;

    use super::*;
    use crate::service::accounts::{self, NewAccount};
    use crate::service::testing::TestState;
    use crate::service::users::{self, NewUser};

    async fn user(t: &TestState, account: AccountId, email: &str, role: Role) -> UserRecord {
        let new = NewUser {
            account,
            email: Email::normalize(email).unwrap(),
            role,
            password: None,
        };
        users::create(t.store(), Actor::Operator, &Origin::default(), new)
            .await
            .unwrap()
            .user
    }

    fn live(name: &str) -> NewKey {
        NewKey {
            key_type: KeyType::Live,
            name: name.to_owned(),
            scopes: None,
            apis: None,
            expires_in_ms: None,
        }
    }

    /// A user lists their own account's keys and no other's (another
    /// account looks like none at all); an admin lists any.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_user_cannot_list_another_accounts_keys() {
        let t = TestState::start(|_| {}).await;
        let new = NewAccount {
            name: "other".to_owned(),
            plan: t.app.config.default_plan.clone(),
            monthly_spend_limit: None,
        };
        let other = accounts::create(
            t.store(),
            &t.app.config,
            Actor::Operator,
            &Origin::default(),
            new,
        )
        .await
        .unwrap();
        create(
            t.store(),
            Actor::Operator,
            &Origin::default(),
            other.id,
            live("theirs"),
            Timestamp::now(),
        )
        .await
        .unwrap();
        let owner = user(&t, t.account.id, "o@example.com", Role::Owner).await;
        let member = user(&t, t.account.id, "m@example.com", Role::Member).await;
        let admin = user(&t, t.account.id, "a@example.com", Role::Admin).await;
        for who in [&owner, &member] {
            let actor = Actor::User(who);
            let e = page(
                t.store(),
                actor,
                other.id,
                Mode::Live,
                None,
                50,
                Timestamp::now(),
            )
            .await;
            assert!(matches!(e, Err(KeyError::AccountNotFound(id)) if id == other.id));
            let e = list(t.store(), actor, other.id).await;
            assert!(matches!(e, Err(KeyError::AccountNotFound(_))));
            let mine = page(
                t.store(),
                actor,
                t.account.id,
                Mode::Live,
                None,
                50,
                Timestamp::now(),
            )
            .await
            .unwrap();
            assert!(mine.keys.is_empty() && !mine.more && mine.total == 0);
        }
        let theirs = page(
            t.store(),
            Actor::User(&admin),
            other.id,
            Mode::Live,
            None,
            50,
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(theirs.keys.len(), 1);
        assert_eq!(theirs.keys[0].name, "theirs");
        // An account that does not exist is not found, even by an admin.
        let e = page(
            t.store(),
            Actor::Operator,
            AccountId::new(),
            Mode::Live,
            None,
            50,
            Timestamp::now(),
        )
        .await;
        assert!(matches!(e, Err(KeyError::AccountNotFound(_))));
        t.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_come_in_pages_of_one_mode_with_their_counts() {
        let t = TestState::start(|_| {}).await;
        let a = t.account.id;
        let mut made = Vec::new();
        for name in ["one", "two", "three"] {
            made.push(
                create(
                    t.store(),
                    Actor::Operator,
                    &Origin::default(),
                    a,
                    live(name),
                    Timestamp::now(),
                )
                .await
                .unwrap()
                .key,
            );
        }
        let test_key = NewKey {
            key_type: KeyType::Test,
            ..live("test")
        };
        create(
            t.store(),
            Actor::Operator,
            &Origin::default(),
            a,
            test_key,
            Timestamp::now(),
        )
        .await
        .unwrap();
        revoke(
            t.store(),
            Actor::Operator,
            &Origin::default(),
            made[0].id,
            Timestamp::now(),
        )
        .await
        .unwrap();

        let first = page(
            t.store(),
            Actor::Operator,
            a,
            Mode::Live,
            None,
            2,
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(first.keys.len(), 2);
        assert!(first.more);
        assert_eq!((first.total, first.active), (3, 2));
        let after = first.keys.last().map(|k| k.id);
        let rest = page(
            t.store(),
            Actor::Operator,
            a,
            Mode::Live,
            after,
            2,
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(rest.keys.len(), 1);
        assert!(!rest.more);
        let mut seen: Vec<KeyId> = first.keys.iter().chain(&rest.keys).map(|k| k.id).collect();
        let mut all: Vec<KeyId> = made.iter().map(|k| k.id).collect();
        seen.sort();
        all.sort();
        assert_eq!(seen, all);
        let test = page(
            t.store(),
            Actor::Operator,
            a,
            Mode::Test,
            None,
            2,
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!((test.keys.len(), test.total), (1, 1));
        t.stop().await;
    }
}
