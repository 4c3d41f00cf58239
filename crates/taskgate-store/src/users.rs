//! Dashboard users and their sessions: their rows, their traits, and the one
//! implementation both backends share (the SQL is the same on both).

use async_trait::async_trait;
use taskgate_core::{AccountId, AuditContext, Email, Role, Timestamp, UserId, UserStatus};

use crate::StoreResult;

/// A dashboard user. `password_hash` is an argon2id PHC string.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserRecord {
    pub id: UserId,
    pub account_id: AccountId,
    pub email: Email,
    pub role: Role,
    pub status: UserStatus,
    pub password_hash: String,
    pub created_at: Timestamp,
    pub last_sign_in_at: Option<Timestamp>,
}

/// A signed-in session, known by the SHA-256 of its cookie's token.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRecord {
    pub token_hash: String,
    pub user_id: UserId,
    /// The token every state-changing form of the session carries.
    pub csrf_token: String,
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
    /// The absolute end of the session, whatever its use.
    pub expires_at: Timestamp,
}

/// Users. An email belongs to one user (a second is [`crate::StoreError::Conflict`]).
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Writes `user.created`.
    async fn create_user(&self, user: &UserRecord, audit: &AuditContext) -> StoreResult<()>;
    async fn get_user(&self, id: UserId) -> StoreResult<Option<UserRecord>>;
    async fn find_user_by_email(&self, email: &Email) -> StoreResult<Option<UserRecord>>;
    /// The users of one account, or of every account; oldest first.
    async fn list_users(&self, account_id: Option<AccountId>) -> StoreResult<Vec<UserRecord>>;
    async fn count_users(&self) -> StoreResult<i64>;
    /// Disabling a user also ends their sessions, in one transaction.
    /// Writes `user.disabled` or `user.enabled` if the status changed.
    async fn set_user_status(
        &self,
        id: UserId,
        status: UserStatus,
        audit: &AuditContext,
    ) -> StoreResult<Option<UserRecord>>;
    /// A new password also ends the user's sessions, in one transaction.
    /// Writes `user.password_changed` when the actor is the user, else
    /// `user.password_reset` (never the hash).
    async fn set_password(
        &self,
        id: UserId,
        password_hash: &str,
        audit: &AuditContext,
    ) -> StoreResult<Option<UserRecord>>;
    /// Writes `user.signed_in`.
    async fn record_sign_in(
        &self,
        id: UserId,
        at: Timestamp,
        audit: &AuditContext,
    ) -> StoreResult<()>;
}

/// Sessions.
#[async_trait]
pub trait SessionStore: Send + Sync {
    async fn create_session(&self, session: &SessionRecord) -> StoreResult<()>;
    /// The session and its user, whatever their state (the caller checks
    /// lifetimes and the user's standing).
    async fn find_session(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<(SessionRecord, UserRecord)>>;
    async fn touch_session(&self, token_hash: &str, at: Timestamp) -> StoreResult<()>;
    async fn delete_session(&self, token_hash: &str) -> StoreResult<()>;
    /// Deletes the sessions past their absolute end or idle since before
    /// `idle_since`. How many.
    async fn purge_sessions(&self, now: Timestamp, idle_since: Timestamp) -> StoreResult<u64>;
}

/// Whether `e` is a unique-constraint violation (a second user of an email).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

macro_rules! user_columns {
    () => {
        "id, account_id, email, role, status, password_hash, created_at, last_sign_in_at"
    };
}
pub(crate) use user_columns;

/// [`UserStore`] and [`SessionStore`] for a backend (see `backend.rs`).
macro_rules! impl_users {
    ($store:ty) => {
        // The backend's interface (`backend.rs`): what these impls call
        // of the backend.
        const _: () = {
            use $crate::backend::SqlBackend as _;

            #[async_trait::async_trait]
            impl $crate::UserStore for $store {
                async fn create_user(
                    &self,
                    u: &$crate::UserRecord,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let r = sqlx::query(concat!(
                        "INSERT INTO users (",
                        $crate::users::user_columns!(),
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                    ))
                    .bind(u.id)
                    .bind(u.account_id)
                    .bind(&u.email)
                    .bind(u.role)
                    .bind(u.status)
                    .bind(&u.password_hash)
                    .bind(u.created_at)
                    .bind(u.last_sign_in_at)
                    .execute(&mut *tx)
                    .await;
                    match r {
                        Ok(_) => {
                            let mut changes = taskgate_core::Changes::new();
                            taskgate_core::audit::created(&mut changes, "email", &u.email);
                            taskgate_core::audit::created(&mut changes, "role", u.role.as_str());
                            taskgate_core::audit::created(&mut changes, "status", u.status.as_str());
                            let entry = audit.entry(
                                taskgate_core::AuditAction::UserCreated,
                                Some(u.account_id),
                                taskgate_core::AuditTarget::user(u.id),
                                changes,
                            );
                            $crate::audit::audit_append!(tx, head, &entry);
                            tx.commit().await?;
                            Ok(())
                        }
                        Err(e) if $crate::users::is_unique_violation(&e) => Err(
                            $crate::StoreError::Conflict(format!("a user with email {} exists", u.email.as_str())),
                        ),
                        Err(e) => Err(e.into()),
                    }
                }

                async fn get_user(
                    &self,
                    id: taskgate_core::UserId,
                ) -> $crate::StoreResult<Option<$crate::UserRecord>> {
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::users::user_columns!(),
                        " FROM users WHERE id = $1"
                    ))
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
                }

                async fn find_user_by_email(
                    &self,
                    email: &taskgate_core::Email,
                ) -> $crate::StoreResult<Option<$crate::UserRecord>> {
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::users::user_columns!(),
                        " FROM users WHERE email = $1"
                    ))
                    .bind(email)
                    .fetch_optional(self.reader())
                    .await?)
                }

                async fn list_users(
                    &self,
                    account_id: Option<taskgate_core::AccountId>,
                ) -> $crate::StoreResult<Vec<$crate::UserRecord>> {
                    Ok(sqlx::query_as(concat!(
                        "SELECT ",
                        $crate::users::user_columns!(),
                        " FROM users WHERE CAST($1 AS TEXT) IS NULL OR account_id = $1 ORDER BY id"
                    ))
                    .bind(account_id)
                    .fetch_all(self.reader())
                    .await?)
                }

                async fn count_users(&self) -> $crate::StoreResult<i64> {
                    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users")
                        .fetch_one(self.reader())
                        .await?;
                    Ok(n)
                }

                async fn set_user_status(
                    &self,
                    id: taskgate_core::UserId,
                    status: taskgate_core::UserStatus,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::UserRecord>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let before: Option<(taskgate_core::UserStatus,)> =
                        sqlx::query_as("SELECT status FROM users WHERE id = $1")
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await?;
                    let user: Option<$crate::UserRecord> = sqlx::query_as(concat!(
                        "UPDATE users SET status = $2 WHERE id = $1 RETURNING ",
                        $crate::users::user_columns!()
                    ))
                    .bind(id)
                    .bind(status)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if status != taskgate_core::UserStatus::Active {
                        sqlx::query("DELETE FROM sessions WHERE user_id = $1")
                            .bind(id)
                            .execute(&mut *tx)
                            .await?;
                    }
                    if let (Some((was,)), Some(u)) = (before, &user)
                        && was != u.status
                    {
                        let action = if u.status == taskgate_core::UserStatus::Active {
                            taskgate_core::AuditAction::UserEnabled
                        } else {
                            taskgate_core::AuditAction::UserDisabled
                        };
                        let mut changes = taskgate_core::Changes::new();
                        taskgate_core::audit::change(
                            &mut changes,
                            "status",
                            was.as_str(),
                            u.status.as_str(),
                        );
                        let entry = audit.entry(
                            action,
                            Some(u.account_id),
                            taskgate_core::AuditTarget::user(u.id),
                            changes,
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(user)
                }

                async fn set_password(
                    &self,
                    id: taskgate_core::UserId,
                    password_hash: &str,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<Option<$crate::UserRecord>> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let user: Option<$crate::UserRecord> = sqlx::query_as(concat!(
                        "UPDATE users SET password_hash = $2 WHERE id = $1 RETURNING ",
                        $crate::users::user_columns!()
                    ))
                    .bind(id)
                    .bind(password_hash)
                    .fetch_optional(&mut *tx)
                    .await?;
                    sqlx::query("DELETE FROM sessions WHERE user_id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    if let Some(u) = &user {
                        // The user's own change, or someone else's reset.
                        let own = audit.actor.kind == taskgate_core::ActorType::User
                            && audit.actor.id == u.id.to_string();
                        let action = if own {
                            taskgate_core::AuditAction::UserPasswordChanged
                        } else {
                            taskgate_core::AuditAction::UserPasswordReset
                        };
                        let entry = audit.entry(
                            action,
                            Some(u.account_id),
                            taskgate_core::AuditTarget::user(u.id),
                            taskgate_core::Changes::new(),
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(user)
                }

                async fn record_sign_in(
                    &self,
                    id: taskgate_core::UserId,
                    at: taskgate_core::Timestamp,
                    audit: &taskgate_core::AuditContext,
                ) -> $crate::StoreResult<()> {
                    let mut tx = self.writer().begin().await?;
                    let head = $crate::audit::audit_lock!(tx);
                    let user: Option<(taskgate_core::AccountId,)> = sqlx::query_as(
                        "UPDATE users SET last_sign_in_at = $2 WHERE id = $1 RETURNING account_id",
                    )
                    .bind(id)
                    .bind(at)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some((account_id,)) = user {
                        let entry = audit.entry(
                            taskgate_core::AuditAction::UserSignedIn,
                            Some(account_id),
                            taskgate_core::AuditTarget::user(id),
                            taskgate_core::Changes::new(),
                        );
                        $crate::audit::audit_append!(tx, head, &entry);
                    }
                    tx.commit().await?;
                    Ok(())
                }
            }

            #[async_trait::async_trait]
            impl $crate::SessionStore for $store {
                async fn create_session(&self, s: &$crate::SessionRecord) -> $crate::StoreResult<()> {
                    sqlx::query(
                        "INSERT INTO sessions (token_hash, user_id, csrf_token, created_at, last_seen_at, \
                         expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(&s.token_hash)
                    .bind(s.user_id)
                    .bind(&s.csrf_token)
                    .bind(s.created_at)
                    .bind(s.last_seen_at)
                    .bind(s.expires_at)
                    .execute(self.writer())
                    .await?;
                    Ok(())
                }

                async fn find_session(
                    &self,
                    token_hash: &str,
                ) -> $crate::StoreResult<Option<($crate::SessionRecord, $crate::UserRecord)>> {
                    let session: Option<$crate::SessionRecord> = sqlx::query_as(
                        "SELECT token_hash, user_id, csrf_token, created_at, last_seen_at, expires_at \
                         FROM sessions WHERE token_hash = $1",
                    )
                    .bind(token_hash)
                    .fetch_optional(self.reader())
                    .await?;
                    let Some(session) = session else {
                        return Ok(None);
                    };
                    let user = $crate::UserStore::get_user(self, session.user_id).await?;
                    Ok(user.map(|u| (session, u)))
                }

                async fn touch_session(
                    &self,
                    token_hash: &str,
                    at: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<()> {
                    sqlx::query("UPDATE sessions SET last_seen_at = $2 WHERE token_hash = $1")
                        .bind(token_hash)
                        .bind(at)
                        .execute(self.writer())
                        .await?;
                    Ok(())
                }

                async fn delete_session(&self, token_hash: &str) -> $crate::StoreResult<()> {
                    sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
                        .bind(token_hash)
                        .execute(self.writer())
                        .await?;
                    Ok(())
                }

                async fn purge_sessions(
                    &self,
                    now: taskgate_core::Timestamp,
                    idle_since: taskgate_core::Timestamp,
                ) -> $crate::StoreResult<u64> {
                    let r = sqlx::query("DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at < $2")
                        .bind(now)
                        .bind(idle_since)
                        .execute(self.writer())
                        .await?;
                    Ok(r.rows_affected())
                }
            }
        };
    };
}
pub(crate) use impl_users;
