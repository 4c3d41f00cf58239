//! Dashboard users, for the CLI (`taskgate users …`) and the first start:
//! create, list, disable, reset a password. Passwords are hashed here
//! (argon2id) and never stored or printed again after creation.

use anyhow::{Context, anyhow, bail};
use rand::Rng;
use serde_json::{Value, json};
use taskgate_core::user::password_problem;
use taskgate_core::{AccountId, Email, Role, Timestamp, UserId, UserStatus};
use taskgate_store::{Store, UserRecord};

use crate::dashboard::password;

/// A password for a user who did not choose one: 20 characters from an
/// alphabet without look-alikes (about 115 bits).
pub fn generate_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn user_json(u: &UserRecord) -> Value {
    json!({
        "id": u.id,
        "object": "user",
        "account_id": u.account_id,
        "email": u.email.as_str(),
        "role": u.role.as_str(),
        "status": u.status.as_str(),
        "created_at": u.created_at.rfc3339(),
        "last_sign_in_at": u.last_sign_in_at.map(|t| t.rfc3339()),
    })
}

/// Creates a user; with no `password` one is generated. The user object,
/// with `password` when it was generated (shown this once).
pub async fn create_user(
    store: &dyn Store,
    account: &str,
    email: &str,
    role: &str,
    password: Option<String>,
) -> anyhow::Result<Value> {
    let account_id =
        AccountId::parse(account).map_err(|_| anyhow!("{account:?} is not an account id"))?;
    store
        .get_account(account_id)
        .await?
        .with_context(|| format!("no account with id {account:?}"))?;
    let email = Email::normalize(email).map_err(|e| anyhow!(e))?;
    let role: Role = role.parse().map_err(|e: String| anyhow!(e))?;
    let generated = password.is_none();
    let password = password.unwrap_or_else(generate_password);
    if let Some(problem) = password_problem(&password) {
        bail!("{problem}");
    }
    let user = UserRecord {
        id: UserId::new(),
        account_id,
        email,
        role,
        status: UserStatus::Active,
        password_hash: password::hash_off_thread(password.clone()).await,
        created_at: Timestamp::now(),
        last_sign_in_at: None,
    };
    store.create_user(&user).await.map_err(|e| match e {
        taskgate_store::StoreError::Conflict(m) => anyhow!(m),
        e => e.into(),
    })?;
    let mut v = user_json(&user);
    if generated {
        v["password"] = json!(password);
    }
    Ok(v)
}

pub async fn list_users(store: &dyn Store, account: Option<&str>) -> anyhow::Result<Value> {
    let account_id = account
        .map(|a| AccountId::parse(a).map_err(|_| anyhow!("{a:?} is not an account id")))
        .transpose()?;
    Ok(Value::Array(
        store
            .list_users(account_id)
            .await?
            .iter()
            .map(user_json)
            .collect(),
    ))
}

/// The user named by id or email.
async fn find(store: &dyn Store, who: &str) -> anyhow::Result<UserRecord> {
    let found = match UserId::parse(who) {
        Ok(id) => store.get_user(id).await?,
        Err(_) => match Email::normalize(who) {
            Ok(email) => store.find_user_by_email(&email).await?,
            Err(_) => None,
        },
    };
    found.with_context(|| format!("no user {who:?} (give a user id or an email)"))
}

/// Disables a user (their sessions end) or enables them again.
pub async fn set_status(store: &dyn Store, who: &str, status: UserStatus) -> anyhow::Result<Value> {
    let user = find(store, who).await?;
    let user = store
        .set_user_status(user.id, status)
        .await?
        .with_context(|| format!("no user {who:?}"))?;
    Ok(user_json(&user))
}

/// A new password (generated when none is given; then shown this once). The
/// user's sessions end.
pub async fn reset_password(
    store: &dyn Store,
    who: &str,
    password: Option<String>,
) -> anyhow::Result<Value> {
    let user = find(store, who).await?;
    let generated = password.is_none();
    let password = password.unwrap_or_else(generate_password);
    if let Some(problem) = password_problem(&password) {
        bail!("{problem}");
    }
    let hash = password::hash_off_thread(password.clone()).await;
    let user = store
        .set_password(user.id, &hash)
        .await?
        .with_context(|| format!("no user {who:?}"))?;
    let mut v = user_json(&user);
    if generated {
        v["password"] = json!(password);
    }
    Ok(v)
}

/// The email of the admin a first start creates.
pub const FIRST_ADMIN_EMAIL: &str = "admin@taskgate.local";

/// First start with no user yet: an admin named `email` (default
/// [`FIRST_ADMIN_EMAIL`]), owner of the `default` account (else of the
/// oldest account), with a generated password. The admin's object with
/// `password`, for `serve` to print once.
pub async fn bootstrap_admin(
    store: &dyn Store,
    email: Option<&Email>,
) -> anyhow::Result<Option<Value>> {
    if store.count_users().await? > 0 {
        return Ok(None);
    }
    let accounts = store.list_accounts().await?;
    let Some(account) = accounts
        .iter()
        .find(|a| a.name == "default")
        .or_else(|| accounts.first())
    else {
        return Ok(None);
    };
    create_user(
        store,
        &account.id.to_string(),
        email.map_or(FIRST_ADMIN_EMAIL, Email::as_str),
        Role::Admin.as_str(),
        None,
    )
    .await
    .map(Some)
}
