//! How each domain type is stored in a database column, defined once per
//! type, and the database drivers' traits derived from that one definition:
//! sqlx `Type`/`Encode`/`Decode` (feature `sqlx`, for any sqlx database) and
//! rusqlite `ToSql`/`FromSql` (feature `rusqlite`).
//!
//! A value that does not decode (an unknown status, a malformed id, a JSON
//! document of the wrong shape) is an error naming what was expected; the
//! store reports it as a corrupt column, never as a default.

use std::borrow::Cow;

use crate::account::{AccountStatus, ApiList, ApiSlug, PlanName};
use crate::attempt::Attempts;
use crate::ids::WebhookEndpointId;
use crate::ids::{AccountId, KeyId, RequestId, RunnerId, TaskId, UserId};
use crate::key::{KeyType, Mode, Scopes};
use crate::task::{IdempotencyKey, SandboxControls, TaskError, TaskEvent, TaskEvents, TaskStatus};
use crate::user::{Email, Role, UserStatus};
use crate::webhook::{DeliveryAttempts, DeliveryStatus, WebhookEvent, WebhookSecret};

/// A type stored as one TEXT column.
pub trait TextColumn: Sized {
    fn to_text(&self) -> Cow<'_, str>;
    fn from_text(s: &str) -> Result<Self, String>;
}

macro_rules! text_by_str {
    ($($t:ty),* $(,)?) => {$(
        impl TextColumn for $t {
            fn to_text(&self) -> Cow<'_, str> {
                Cow::Borrowed(self.as_str())
            }
            fn from_text(s: &str) -> Result<Self, String> {
                s.parse::<$t>().map_err(|e| e.to_string())
            }
        }
    )*};
}

macro_rules! text_by_id {
    ($($t:ty),* $(,)?) => {$(
        impl TextColumn for $t {
            fn to_text(&self) -> Cow<'_, str> {
                Cow::Owned(self.text())
            }
            fn from_text(s: &str) -> Result<Self, String> {
                s.parse::<$t>().map_err(|e| e.to_string())
            }
        }
    )*};
}

macro_rules! text_by_json {
    ($($t:ty),* $(,)?) => {$(
        impl TextColumn for $t {
            fn to_text(&self) -> Cow<'_, str> {
                // These types serialize infallibly: plain structs of strings,
                // numbers and enums.
                Cow::Owned(serde_json::to_string(self).unwrap_or_default())
            }
            fn from_text(s: &str) -> Result<Self, String> {
                serde_json::from_str(s).map_err(|e| e.to_string())
            }
        }
    )*};
}

text_by_str!(
    TaskStatus,
    Mode,
    KeyType,
    AccountStatus,
    PlanName,
    ApiSlug,
    RunnerId,
    IdempotencyKey,
    Email,
    Role,
    UserStatus,
    DeliveryStatus,
    WebhookEvent,
);
text_by_id!(
    TaskId,
    KeyId,
    AccountId,
    RequestId,
    UserId,
    WebhookEndpointId,
);
text_by_json!(
    TaskEvents,
    TaskEvent,
    Attempts,
    Scopes,
    ApiList,
    SandboxControls,
    TaskError,
    DeliveryAttempts,
);

/// A signing secret is stored as its text: it must sign again, so it cannot
/// be a hash (the database is the secret's keeper, as for a provider's
/// credentials in the settings).
impl TextColumn for WebhookSecret {
    fn to_text(&self) -> Cow<'_, str> {
        Cow::Owned(self.expose())
    }
    fn from_text(s: &str) -> Result<Self, String> {
        WebhookSecret::parse(s).ok_or_else(|| "not a webhook secret".to_owned())
    }
}

/// The drivers' traits for every text column type, from its [`TextColumn`].
macro_rules! driver_traits {
    ($($t:ty),* $(,)?) => {
        #[cfg(feature = "sqlx")]
        sqlx_impls::sqlx_text!($($t),*);
        #[cfg(feature = "rusqlite")]
        rusqlite_impls::rusqlite_text!($($t),*);
    };
}

driver_traits!(
    Email,
    Role,
    UserStatus,
    TaskStatus,
    Mode,
    KeyType,
    AccountStatus,
    PlanName,
    ApiSlug,
    RunnerId,
    IdempotencyKey,
    TaskId,
    KeyId,
    AccountId,
    RequestId,
    UserId,
    WebhookEndpointId,
    DeliveryStatus,
    DeliveryAttempts,
    WebhookSecret,
    WebhookEvent,
    TaskEvents,
    TaskEvent,
    Attempts,
    Scopes,
    ApiList,
    SandboxControls,
    TaskError,
);

#[cfg(feature = "sqlx")]
mod sqlx_impls {
    use sqlx::encode::IsNull;
    use sqlx::error::BoxDynError;
    use sqlx::{Database, Decode, Encode, Type};

    use crate::Timestamp;

    macro_rules! sqlx_text {
        ($($t:ty),* $(,)?) => {$(
            impl<DB: sqlx::Database> sqlx::Type<DB> for $t
            where
                String: sqlx::Type<DB>,
            {
                fn type_info() -> DB::TypeInfo {
                    <String as sqlx::Type<DB>>::type_info()
                }
                fn compatible(ty: &DB::TypeInfo) -> bool {
                    <String as sqlx::Type<DB>>::compatible(ty)
                }
            }

            impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $t
            where
                String: sqlx::Encode<'q, DB>,
            {
                fn encode_by_ref(
                    &self,
                    buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
                ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                    <String as sqlx::Encode<'q, DB>>::encode(
                        $crate::column::TextColumn::to_text(self).into_owned(),
                        buf,
                    )
                }
            }

            impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $t
            where
                &'r str: sqlx::Decode<'r, DB>,
            {
                fn decode(
                    value: <DB as sqlx::Database>::ValueRef<'r>,
                ) -> Result<Self, sqlx::error::BoxDynError> {
                    let text = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
                    Ok(<$t as $crate::column::TextColumn>::from_text(text)?)
                }
            }
        )*};
    }

    pub(crate) use sqlx_text;

    impl<DB: Database> Type<DB> for Timestamp
    where
        i64: Type<DB>,
    {
        fn type_info() -> DB::TypeInfo {
            <i64 as Type<DB>>::type_info()
        }
        fn compatible(ty: &DB::TypeInfo) -> bool {
            <i64 as Type<DB>>::compatible(ty)
        }
    }

    impl<'q, DB: Database> Encode<'q, DB> for Timestamp
    where
        i64: Encode<'q, DB>,
    {
        fn encode_by_ref(
            &self,
            buf: &mut <DB as Database>::ArgumentBuffer,
        ) -> Result<IsNull, BoxDynError> {
            <i64 as Encode<'q, DB>>::encode(self.unix_ms(), buf)
        }
    }

    impl<'r, DB: Database> Decode<'r, DB> for Timestamp
    where
        i64: Decode<'r, DB>,
    {
        fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            Ok(Timestamp::from_unix_ms(<i64 as Decode<'r, DB>>::decode(
                value,
            )?))
        }
    }
}

#[cfg(feature = "rusqlite")]
mod rusqlite_impls {
    use rusqlite::types::{FromSql, FromSqlResult, ToSql, ToSqlOutput, Value, ValueRef};

    use crate::Timestamp;

    macro_rules! rusqlite_text {
        ($($t:ty),* $(,)?) => {$(
            impl rusqlite::types::ToSql for $t {
                fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                    use rusqlite::types::{ToSqlOutput, Value, ValueRef};
                    Ok(match $crate::column::TextColumn::to_text(self) {
                        std::borrow::Cow::Borrowed(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
                        std::borrow::Cow::Owned(s) => ToSqlOutput::Owned(Value::Text(s)),
                    })
                }
            }

            impl rusqlite::types::FromSql for $t {
                fn column_result(
                    value: rusqlite::types::ValueRef<'_>,
                ) -> rusqlite::types::FromSqlResult<Self> {
                    <$t as $crate::column::TextColumn>::from_text(value.as_str()?)
                        .map_err(|e| rusqlite::types::FromSqlError::Other(e.into()))
                }
            }
        )*};
    }

    pub(crate) use rusqlite_text;

    impl ToSql for Timestamp {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::Owned(Value::Integer(self.unix_ms())))
        }
    }

    impl FromSql for Timestamp {
        fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
            value.as_i64().map(Timestamp::from_unix_ms)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip_and_refuse_strangers() {
        assert_eq!(TaskStatus::Cancelled.to_text(), "cancelled");
        assert_eq!(TaskStatus::from_text("queued"), Ok(TaskStatus::Queued));
        assert!(TaskStatus::from_text("Queued").is_err());
        let id = TaskId::new();
        assert_eq!(TaskId::from_text(&id.to_text()), Ok(id));
        assert!(KeyId::from_text(&id.to_text()).is_err());
        assert!(Scopes::from_text(r#"["tasks:read","nope"]"#).is_err());
        assert!(TaskEvents::from_text("{").is_err());
        let scopes = Scopes::all();
        assert_eq!(
            scopes.to_text(),
            r#"["apis:read","tasks:read","tasks:write","webhooks:read","webhooks:write"]"#
        );
    }
}
