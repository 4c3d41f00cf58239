//! The operator's actions the tests take (accounts, keys, users), through
//! the services as the operator, with the objects as the CLI prints them.
//! The tests give well-formed values, so the parsing here only unwraps.

use serde_json::Value;
use taskgate_core::{AccountId, ApiList, ApiSlug, KeyId, KeyType, Micros, Timestamp, UserStatus};
use taskgate_server::Config;
use taskgate_server::service::users::UserRef;
use taskgate_server::service::{Actor, Origin, accounts, keys, users as users_service};
use taskgate_server::views::{AccountView, KeyView, UserView};
use taskgate_store::{AccountUpdate, Store};

type Result<T> = std::result::Result<T, String>;

fn json(view: impl serde::Serialize) -> Value {
    serde_json::to_value(view).expect("a view serializes")
}

fn usd(v: &str) -> Option<i64> {
    (v != "none").then(|| Micros::parse_usd(v).expect("an amount").0)
}

pub mod admin {
    use super::*;

    pub async fn create_account(
        store: &dyn Store,
        config: &Config,
        name: &str,
        plan: &str,
        monthly_spend_limit_usd: Option<&str>,
    ) -> Result<Value> {
        let new = accounts::NewAccount {
            name: name.to_owned(),
            plan: accounts::plan_of(config, plan).map_err(|e| e.to_string())?,
            monthly_spend_limit: monthly_spend_limit_usd.and_then(usd).map(Micros),
        };
        let a = accounts::create(store, config, Actor::Operator, &Origin::cli(), new)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(AccountView::new(&a)))
    }

    /// Plan, status and the owners' spend limit (`none` removes it).
    pub async fn update_account(
        store: &dyn Store,
        config: &Config,
        id: &str,
        plan: Option<&str>,
        status: Option<&str>,
        monthly_spend_limit_usd: Option<&str>,
    ) -> Result<Value> {
        let update = AccountUpdate {
            plan: plan.map(|p| p.parse().expect("a plan")),
            status: status.map(|s| s.parse().expect("a status")),
            monthly_spend_limit_micros: monthly_spend_limit_usd.map(usd),
            max_monthly_spend_limit_micros: None,
        };
        let id = AccountId::parse(id).map_err(|e| e.to_string())?;
        let a = accounts::update(store, config, Actor::Operator, &Origin::cli(), id, update)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(AccountView::new(&a)))
    }

    pub struct NewKey<'a> {
        pub account_id: &'a str,
        pub key_type: KeyType,
        pub name: &'a str,
        pub scopes: Option<Vec<String>>,
        pub apis: Option<Vec<String>>,
        pub expires_in_ms: Option<i64>,
    }

    pub async fn create_key(store: &dyn Store, new: NewKey<'_>) -> Result<Value> {
        let account = AccountId::parse(new.account_id).map_err(|e| e.to_string())?;
        let new = keys::NewKey {
            key_type: new.key_type,
            name: new.name.to_owned(),
            scopes: new
                .scopes
                .map(|s| s.iter().map(|x| x.parse().expect("a scope")).collect()),
            apis: new.apis.map(|a| {
                ApiList(
                    a.iter()
                        .map(|x| ApiSlug::parse(x).expect("a slug"))
                        .collect(),
                )
            }),
            expires_in_ms: new.expires_in_ms,
        };
        let made = keys::create(
            store,
            Actor::Operator,
            &Origin::cli(),
            account,
            new,
            Timestamp::now(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(json(KeyView::created(&made)))
    }

    pub async fn list_keys(store: &dyn Store, account: &str) -> Result<Value> {
        let account = AccountId::parse(account).map_err(|e| e.to_string())?;
        let all = keys::list(store, Actor::Operator, account)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Value::Array(
            all.iter().map(|k| json(KeyView::new(k))).collect(),
        ))
    }

    pub async fn revoke_key(store: &dyn Store, id: &str) -> Result<Value> {
        let id = KeyId::parse(id).map_err(|e| e.to_string())?;
        let k = keys::revoke(store, Actor::Operator, &Origin::cli(), id, Timestamp::now())
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(KeyView::new(&k)))
    }

    pub async fn roll_key(store: &dyn Store, id: &str, grace_ms: i64) -> Result<Value> {
        let id = KeyId::parse(id).map_err(|e| e.to_string())?;
        let rolled = keys::roll(
            store,
            Actor::Operator,
            &Origin::cli(),
            id,
            grace_ms,
            Timestamp::now(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(json(KeyView::rolled(&rolled)))
    }
}

pub mod users {
    use super::*;

    pub async fn create_user(
        store: &dyn Store,
        account: &str,
        email: &str,
        role: &str,
        password: Option<String>,
    ) -> Result<Value> {
        let new = users_service::NewUser {
            account: AccountId::parse(account).map_err(|e| e.to_string())?,
            email: taskgate_core::Email::normalize(email)?,
            role: role.parse()?,
            password,
        };
        let made = users_service::create(store, Actor::Operator, &Origin::cli(), new)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(UserView::with_password(&made)))
    }

    pub async fn set_status(store: &dyn Store, who: &str, status: UserStatus) -> Result<Value> {
        let who = UserRef::parse(who).ok_or("not a user")?;
        let u = users_service::set_status(store, Actor::Operator, &Origin::cli(), &who, status)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(UserView::new(&u)))
    }
}
