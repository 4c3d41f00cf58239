//! Dashboard users: created, listed, disabled and given new passwords by
//! the operator and admins; the first start's admin. Passwords are hashed
//! here (argon2id, on the password pool) and never stored or shown again;
//! one generated here is returned once.

use rand::Rng;
use taskgate_core::user::password_problem;
use taskgate_core::{AccountId, Email, Role, Timestamp, UserId, UserStatus};
use taskgate_store::{Store, StoreError, UserRecord};

use super::accounts::DEFAULT_ACCOUNT_NAME;
use super::{Actor, Origin};
use crate::password;

/// The email of the admin a first start creates, unless told another.
pub const FIRST_ADMIN_EMAIL: &str = "admin@taskgate.local";

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("there is no account {0}")]
    AccountNotFound(AccountId),
    #[error("there is no such user")]
    NotFound,
    #[error("a user with email {0} exists")]
    EmailTaken(String),
    /// The password's problem, as `taskgate_core::user::password_problem`
    /// words it (the rule is the domain's).
    #[error("{0}")]
    WeakPassword(String),
    #[error("not an email address: {0}")]
    BadEmail(String),
    #[error("a user cannot disable themself")]
    DisablingSelf,
    #[error("this actor may not manage users")]
    Forbidden,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for UserError {
    fn from(e: StoreError) -> Self {
        UserError::Store(e)
    }
}

/// A user as named at a door: by id or by email.
#[derive(Debug, Clone)]
pub enum UserRef {
    Id(UserId),
    Email(Email),
}

impl UserRef {
    /// An id if `s` is one, else an email; `None` if it is neither.
    pub fn parse(s: &str) -> Option<Self> {
        match UserId::parse(s) {
            Ok(id) => Some(UserRef::Id(id)),
            Err(_) => Email::normalize(s).ok().map(UserRef::Email),
        }
    }
}

/// A user to create. Without a password one is generated.
pub struct NewUser {
    pub account: AccountId,
    pub email: Email,
    pub role: Role,
    pub password: Option<String>,
}

/// A user with the password generated for them, shown this once (`None`
/// when the password was given).
pub struct WithPassword {
    pub user: UserRecord,
    pub generated_password: Option<String>,
}

/// A password for a user who did not choose one: 20 characters from an
/// alphabet without look-alikes (about 115 bits).
pub fn generate_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The password to set (given, or generated) and whether it was generated,
/// once it passes the rules.
fn chosen(password: Option<String>) -> Result<(String, bool), UserError> {
    let generated = password.is_none();
    let password = password.unwrap_or_else(generate_password);
    match password_problem(&password) {
        Some(problem) => Err(UserError::WeakPassword(problem)),
        None => Ok((password, generated)),
    }
}

pub async fn create(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    new: NewUser,
) -> Result<WithPassword, UserError> {
    if !actor.administers() {
        return Err(UserError::Forbidden);
    }
    store
        .get_account(new.account)
        .await?
        .ok_or(UserError::AccountNotFound(new.account))?;
    let (password, generated) = chosen(new.password)?;
    let user = UserRecord {
        id: UserId::new(),
        account_id: new.account,
        email: new.email,
        role: new.role,
        status: UserStatus::Active,
        password_hash: password::hash_off_thread(password.clone()).await,
        created_at: Timestamp::now(),
        last_sign_in_at: None,
    };
    let audit = actor.audit(origin);
    store
        .create_user(&user, &audit)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => UserError::EmailTaken(user.email.as_str().to_owned()),
            e => e.into(),
        })?;
    Ok(WithPassword {
        user,
        generated_password: generated.then_some(password),
    })
}

/// The users of `account`, or of every account.
pub async fn list(
    store: &dyn Store,
    actor: Actor<'_>,
    account: Option<AccountId>,
) -> Result<Vec<UserRecord>, UserError> {
    if !actor.administers() {
        return Err(UserError::Forbidden);
    }
    Ok(store.list_users(account).await?)
}

pub async fn find(store: &dyn Store, who: &UserRef) -> Result<UserRecord, UserError> {
    let found = match who {
        UserRef::Id(id) => store.get_user(*id).await?,
        UserRef::Email(email) => store.find_user_by_email(email).await?,
    };
    found.ok_or(UserError::NotFound)
}

/// Disables a user (their sessions end) or enables them again. Nobody
/// disables themself (an admin would lock themself out).
pub async fn set_status(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    who: &UserRef,
    status: UserStatus,
) -> Result<UserRecord, UserError> {
    if !actor.administers() {
        return Err(UserError::Forbidden);
    }
    let user = find(store, who).await?;
    if let (Actor::User(me), UserStatus::Disabled) = (actor, status)
        && me.id == user.id
    {
        return Err(UserError::DisablingSelf);
    }
    store
        .set_user_status(user.id, status, &actor.audit(origin))
        .await?
        .ok_or(UserError::NotFound)
}

/// A new password (generated when none is given; then returned this once).
/// The user's sessions end.
pub async fn reset_password(
    store: &dyn Store,
    actor: Actor<'_>,
    origin: &Origin,
    who: &UserRef,
    password: Option<String>,
) -> Result<WithPassword, UserError> {
    if !actor.administers() {
        return Err(UserError::Forbidden);
    }
    let user = find(store, who).await?;
    let (password, generated) = chosen(password)?;
    let hash = password::hash_off_thread(password.clone()).await;
    let user = store
        .set_password(user.id, &hash, &actor.audit(origin))
        .await?
        .ok_or(UserError::NotFound)?;
    Ok(WithPassword {
        user,
        generated_password: generated.then_some(password),
    })
}

/// First start with no user yet: an admin named `email` (default
/// [`FIRST_ADMIN_EMAIL`]), of the `default` account (else of the oldest
/// account), with a generated password, returned once for `serve` to print.
pub async fn bootstrap_admin(
    store: &dyn Store,
    email: Option<&Email>,
) -> Result<Option<WithPassword>, UserError> {
    if store.count_users().await? > 0 {
        return Ok(None);
    }
    let accounts = store.list_accounts().await?;
    let Some(account) = accounts
        .iter()
        .find(|a| a.name == DEFAULT_ACCOUNT_NAME)
        .or_else(|| accounts.first())
    else {
        return Ok(None);
    };
    let email = match email {
        Some(e) => e.clone(),
        None => Email::normalize(FIRST_ADMIN_EMAIL).map_err(UserError::BadEmail)?,
    };
    let new = NewUser {
        account: account.id,
        email,
        role: Role::Admin,
        password: None,
    };
    create(store, Actor::Operator, &Origin::first_start(), new)
        .await
        .map(Some)
}
