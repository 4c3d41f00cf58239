//! Dashboard sessions: signing in with an email and a password, the session
//! a browser's token opens, signing out, and a user changing their own
//! password.
//!
//! Passwords are checked on the password pool, which refuses at once when it
//! is full ([`SessionError::Busy`]). Failed checks are limited per address
//! and per email (`dashboard.sign_in_failures_per_minute`, held in the
//! state's `sign_in_failures`); a wrong email and a wrong password get the
//! same answer in the same time.
//!
//! An attempt is counted against its address *before* the password is
//! checked (a slot reserved, given back when it succeeds), so attempts sent
//! at once cannot all pass the check before any is recorded.
//!
//! An email with a minute's worth of failures is closed only to the
//! addresses that failed for it themselves: a stranger who knows a user's
//! email (the fixed `admin@taskgate.local`, say) cannot lock that user out,
//! and each new address an attacker brings gets one guess a minute.
//!
//! A session's token is 256 random bits held by the browser; the store keeps
//! only its SHA-256, so a copy of the sessions table opens no session. A
//! session ends when it is signed out, after `dashboard.session_idle_minutes`
//! unused, or `dashboard.session_max_hours` after sign-in, as the state's
//! clock tells the time.

use std::fmt;
use std::net::IpAddr;

use rand::RngCore;
use taskgate_core::user::password_problem;
use taskgate_core::{
    ActorType, AuditAction, AuditActor, AuditContext, AuditTarget, Changes, Email, UserStatus,
};
use taskgate_store::{Account, SessionRecord, StoreError, UserRecord};

use super::{Actor, Origin};
use crate::password;
use crate::state::AppState;

/// A session's last-seen time is written at most this often.
const TOUCH_EVERY_MS: i64 = 60_000;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The email is nobody's, the password is wrong, or the user is
    /// disabled: one answer for all, so none can be told from another.
    #[error("the email or the password is wrong")]
    WrongCredentials,
    /// The current password given with a new one is wrong.
    #[error("the current password is wrong")]
    WrongCurrentPassword,
    /// The new password's problem, as `taskgate_core::user::password_problem`
    /// words it (the rule is the domain's).
    #[error("{0}")]
    WeakPassword(String),
    /// Too many failed password checks lately from the client's address, or
    /// for the email from that address.
    #[error("too many failed password checks; try again in {retry_after_secs} s")]
    TooManyFailures { retry_after_secs: u64 },
    /// The password pool has no room: try again in a moment.
    #[error("too many password checks at once")]
    Busy,
    /// Only a signed-in user has a password of their own to change.
    #[error("this actor has no password of its own")]
    Forbidden,
    /// The user is gone.
    #[error("there is no such user")]
    UserNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A session's token: 32 random bytes as 64 hex digits. Only the browser
/// holds it; it is never logged (its `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl SessionToken {
    fn generate() -> Self {
        SessionToken(random_hex())
    }

    /// A token as a browser sent it: 64 hex digits, else `None`.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| SessionToken(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn hash(&self) -> String {
        token_hash(&self.0)
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken(…)")
    }
}

/// What the store keeps of a session token (SHA-256, hex), as of an API key.
pub fn token_hash(token: &str) -> String {
    taskgate_core::key::hash_key(token)
}

/// 32 random bytes as 64 hex digits.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A signed-in, active user (of an account in any standing: a suspended
/// account's users may still look), with their session's CSRF token.
pub struct SignedIn {
    pub user: UserRecord,
    pub account: Account,
    /// The token every state-changing form of the session carries.
    pub csrf: String,
}

/// A sign-in as a browser sends it.
pub struct Credentials {
    /// `None` when what was typed is not an email: it signs nobody in, at
    /// the cost of a wrong password.
    pub email: Option<Email>,
    pub password: String,
    /// The client's address (behind the trusted proxies).
    pub from: IpAddr,
    /// Its `User-Agent`, for the audit log.
    pub user_agent: Option<String>,
}

/// A session just started: its token, for the browser alone.
pub struct Started {
    pub token: SessionToken,
    pub user: UserRecord,
}

/// Starts a session for `user`: a new token (never one a browser sent) and
/// a new CSRF token.
async fn start(app: &AppState, user: &UserRecord) -> Result<SessionToken, SessionError> {
    let token = SessionToken::generate();
    let now = app.clock.now();
    let session = SessionRecord {
        token_hash: token.hash(),
        user_id: user.id,
        csrf_token: random_hex(),
        created_at: now,
        last_seen_at: now,
        expires_at: now.plus_ms(app.config.dashboard.session_max_hours as i64 * 3_600_000),
    };
    app.store.create_session(&session).await?;
    Ok(token)
}

/// Signs a user in: a new session, and `replacing` (the session the browser
/// had, if any) ended, since a sign-in always starts a new one.
pub async fn sign_in(
    app: &AppState,
    credentials: Credentials,
    replacing: Option<&SessionToken>,
) -> Result<Started, SessionError> {
    let Credentials {
        email,
        password,
        from: ip,
        user_agent,
    } = credentials;
    let origin = Origin::http(Some(ip), user_agent.as_deref());
    let limits = &app.sign_in_failures;
    if let Some(e) = &email
        && let Some(secs) = limits.failures_by_email.blocked(e)
        && limits.failures_by_pair.failed_lately(&(e.clone(), ip))
    {
        return Err(SessionError::TooManyFailures {
            retry_after_secs: secs,
        });
    }
    let reservation =
        limits
            .failures_by_addr
            .reserve(ip)
            .map_err(|secs| SessionError::TooManyFailures {
                retry_after_secs: secs,
            })?;
    let user = match &email {
        Some(e) => match app.store.find_user_by_email(e).await {
            Ok(u) => u,
            Err(e) => {
                limits.failures_by_addr.release(&ip, reservation);
                return Err(e.into());
            }
        },
        None => None,
    };
    // The same work whether or not the user exists.
    let hash = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| password::decoy().to_owned());
    let Ok(matches) = password::verify_bounded(password, hash).await else {
        limits.failures_by_addr.release(&ip, reservation);
        return Err(SessionError::Busy);
    };
    let user = match user {
        Some(u) if matches && u.status == UserStatus::Active => u,
        user => {
            sign_in_failed(app, &origin, email.as_ref(), user.as_ref(), matches).await;
            // The address's reserved slot stays: it is this failure.
            if let Some(e) = email {
                limits.failures_by_pair.record((e.clone(), ip));
                limits.failures_by_email.record(e);
            }
            return Err(SessionError::WrongCredentials);
        }
    };
    limits.failures_by_addr.release(&ip, reservation);
    if let Some(old) = replacing {
        let _ = app.store.delete_session(&old.hash()).await;
    }
    let token = start(app, &user).await?;
    let audit = Actor::User(&user).audit(&origin);
    if let Err(e) = app
        .store
        .record_sign_in(user.id, app.clock.now(), &audit)
        .await
    {
        tracing::warn!(error = %e, "dashboard: cannot record a sign-in");
    }
    Ok(Started { token, user })
}

/// Writes `user.sign_in_failed`: the user if the email is one's, else the
/// email typed (if it is one), and why (`unknown_email`, `wrong_password`,
/// `user_disabled`); never the password. A failure to write it is logged:
/// the answer stays the same.
async fn sign_in_failed(
    app: &AppState,
    origin: &Origin,
    email: Option<&Email>,
    user: Option<&UserRecord>,
    password_matched: bool,
) {
    let (actor, target, reason) = match (user, email) {
        (Some(u), _) => (
            AuditActor::user(u.id, &u.email),
            AuditTarget::user(u.id),
            if password_matched {
                "user_disabled"
            } else {
                "wrong_password"
            },
        ),
        (None, email) => {
            let actor = AuditActor {
                kind: ActorType::User,
                id: "unknown".to_owned(),
                email: email.cloned(),
            };
            let target = match email {
                Some(e) => AuditTarget::email(e),
                None => AuditTarget {
                    kind: "email".to_owned(),
                    id: String::new(),
                },
            };
            (actor, target, "unknown_email")
        }
    };
    let mut changes = Changes::new();
    taskgate_core::audit::created(&mut changes, "reason", reason);
    let context = AuditContext::new(
        actor,
        origin.ip.map(|ip| ip.to_string()),
        origin.user_agent.as_deref(),
    );
    let entry = context.entry(
        AuditAction::UserSignInFailed,
        user.map(|u| u.account_id),
        target,
        changes,
    );
    if let Err(e) = app.store.record_audit(&entry).await {
        tracing::warn!(error = %e, "dashboard: cannot record a failed sign-in");
    }
}

/// The session `token` opens: its user active, its lifetimes not passed
/// (one that has passed is deleted). Its last-seen time is moved on.
pub async fn find(app: &AppState, token: &SessionToken) -> Result<Option<SignedIn>, SessionError> {
    let hash = token.hash();
    let Some((session, user)) = app.store.find_session(&hash).await? else {
        return Ok(None);
    };
    let now = app.clock.now();
    let idle_ms = app.config.dashboard.session_idle_minutes as i64 * 60_000;
    if session.expires_at <= now
        || session.last_seen_at.plus_ms(idle_ms) <= now
        || user.status != UserStatus::Active
    {
        app.store.delete_session(&hash).await?;
        return Ok(None);
    }
    if session.last_seen_at.plus_ms(TOUCH_EVERY_MS) <= now {
        app.store.touch_session(&hash, now).await?;
    }
    let Some(account) = app.store.get_account(user.account_id).await? else {
        return Ok(None);
    };
    Ok(Some(SignedIn {
        user,
        account,
        csrf: session.csrf_token,
    }))
}

/// Ends the session `token` opens (on the server: the token opens nothing
/// after).
pub async fn sign_out(app: &AppState, token: &SessionToken) -> Result<(), SessionError> {
    Ok(app.store.delete_session(&token.hash()).await?)
}

/// A new password for the signed-in user who asks, given with their
/// current one.
pub struct PasswordChange {
    pub current: String,
    pub new: String,
    /// The client's address (behind the trusted proxies).
    pub from: IpAddr,
    /// Its `User-Agent`, for the audit log.
    pub user_agent: Option<String>,
}

/// Changes the actor's own password. The current one is guessed at like a
/// sign-in, so it is checked like one: counted against the address before
/// it is checked, on the password pool. Every session of the user ends; the
/// token of a new one is returned, for the browser that changed it.
pub async fn change_password(
    app: &AppState,
    actor: Actor<'_>,
    change: PasswordChange,
) -> Result<SessionToken, SessionError> {
    let Actor::User(user) = actor else {
        return Err(SessionError::Forbidden);
    };
    if let Some(problem) = password_problem(&change.new) {
        return Err(SessionError::WeakPassword(problem));
    }
    let failures = &app.sign_in_failures.failures_by_addr;
    let ip = change.from;
    let reservation = failures
        .reserve(ip)
        .map_err(|secs| SessionError::TooManyFailures {
            retry_after_secs: secs,
        })?;
    match password::verify_bounded(change.current, user.password_hash.clone()).await {
        Ok(true) => failures.release(&ip, reservation),
        // The address's reserved slot stays: it is this failure.
        Ok(false) => return Err(SessionError::WrongCurrentPassword),
        Err(password::Busy) => {
            failures.release(&ip, reservation);
            return Err(SessionError::Busy);
        }
    }
    let hash = password::hash_off_thread(change.new).await;
    // Ends every session of the user, this one too, in one transaction.
    let audit = actor.audit(&Origin::http(Some(ip), change.user_agent.as_deref()));
    app.store
        .set_password(user.id, &hash, &audit)
        .await?
        .ok_or(SessionError::UserNotFound)?;
    start(app, user).await
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use taskgate_core::{Role, UserId};

    use super::*;
    use crate::service::testing::TestState;
    use crate::service::users::{self, NewUser};

    const PASSWORD: &str = "correct horse battery staple";
    const ADDR: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    async fn user(t: &TestState, email: &str) -> UserRecord {
        let new = NewUser {
            account: t.account.id,
            email: Email::normalize(email).unwrap(),
            role: Role::Member,
            password: Some(PASSWORD.to_owned()),
        };
        users::create(t.store(), Actor::Operator, &Origin::default(), new)
            .await
            .unwrap()
            .user
    }

    fn credentials(email: &str, password: &str) -> Credentials {
        Credentials {
            email: Email::normalize(email).ok(),
            password: password.to_owned(),
            from: ADDR,
            user_agent: None,
        }
    }

    fn change(current: &str, new: &str) -> PasswordChange {
        PasswordChange {
            current: current.to_owned(),
            new: new.to_owned(),
            from: ADDR,
            user_agent: None,
        }
    }

    #[test]
    fn tokens_are_64_hex_digits_and_never_shown() {
        let t = SessionToken::generate();
        assert_eq!(SessionToken::parse(t.as_str()), Some(t.clone()));
        assert_ne!(SessionToken::generate(), t);
        for bad in ["", "abc", &"g".repeat(64), &"a".repeat(65)] {
            assert!(SessionToken::parse(bad).is_none(), "{bad}");
        }
        assert!(!format!("{t:?}").contains(t.as_str()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sign_in_opens_a_session_and_sign_out_ends_it() {
        let t = TestState::start(|_| {}).await;
        let ada = user(&t, "ada@example.com").await;
        for (email, password) in [
            ("ada@example.com", "not the password"),
            ("nobody@example.com", PASSWORD),
            ("not an email", PASSWORD),
        ] {
            let e = sign_in(&t.app, credentials(email, password), None).await;
            assert!(matches!(e, Err(SessionError::WrongCredentials)), "{email}");
        }
        let first = sign_in(&t.app, credentials("ada@example.com", PASSWORD), None)
            .await
            .unwrap();
        assert_eq!(first.user.id, ada.id);
        let found = find(&t.app, &first.token).await.unwrap().unwrap();
        assert_eq!((found.user.id, found.account.id), (ada.id, t.account.id));
        // Signing in again ends the session the browser had.
        let second = sign_in(
            &t.app,
            credentials("ada@example.com", PASSWORD),
            Some(&first.token),
        )
        .await
        .unwrap();
        assert!(find(&t.app, &first.token).await.unwrap().is_none());
        assert!(find(&t.app, &second.token).await.unwrap().is_some());
        let recorded = t.store().get_user(ada.id).await.unwrap().unwrap();
        assert!(recorded.last_sign_in_at.is_some());
        sign_out(&t.app, &second.token).await.unwrap();
        assert!(find(&t.app, &second.token).await.unwrap().is_none());
        t.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_end_when_idle_and_for_disabled_users() {
        let t = TestState::start(|_| {}).await;
        let ada = user(&t, "ada@example.com").await;
        let signed_in = || sign_in(&t.app, credentials("ada@example.com", PASSWORD), None);
        let s = signed_in().await.unwrap();
        let idle = t.app.config.dashboard.session_idle_minutes;
        t.clock.advance(Duration::from_secs(idle * 60 - 1));
        assert!(find(&t.app, &s.token).await.unwrap().is_some());
        // Used just now: idle again from here.
        t.clock.advance(Duration::from_secs(2));
        assert!(find(&t.app, &s.token).await.unwrap().is_some());
        t.clock.advance(Duration::from_secs(idle * 60));
        assert!(find(&t.app, &s.token).await.unwrap().is_none());
        let gone = t.store().find_session(&s.token.hash()).await.unwrap();
        assert!(gone.is_none(), "an ended session is deleted");

        let s = signed_in().await.unwrap();
        users::set_status(
            t.store(),
            Actor::Operator,
            &Origin::default(),
            &users::UserRef::Id(ada.id),
            UserStatus::Disabled,
        )
        .await
        .unwrap();
        assert!(find(&t.app, &s.token).await.unwrap().is_none());
        let e = signed_in().await;
        assert!(matches!(e, Err(SessionError::WrongCredentials)));
        t.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_are_limited_per_address_and_email() {
        let t = TestState::start(|c| c.dashboard.sign_in_failures_per_minute = 2).await;
        user(&t, "ada@example.com").await;
        for _ in 0..2 {
            let e = sign_in(&t.app, credentials("ada@example.com", "wrong"), None).await;
            assert!(matches!(e, Err(SessionError::WrongCredentials)));
        }
        // Past the limit even the right password waits.
        let e = sign_in(&t.app, credentials("ada@example.com", PASSWORD), None).await;
        assert!(
            matches!(e, Err(SessionError::TooManyFailures { retry_after_secs }) if retry_after_secs >= 1),
            "{e:?}",
            e = e.err()
        );
        // Another address, which never failed for the email, may still try.
        let elsewhere = Credentials {
            from: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            ..credentials("ada@example.com", PASSWORD)
        };
        assert!(sign_in(&t.app, elsewhere, None).await.is_ok());
        t.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_password_needs_the_current_one_and_ends_other_sessions() {
        let t = TestState::start(|_| {}).await;
        let ada = user(&t, "ada@example.com").await;
        let here = sign_in(&t.app, credentials("ada@example.com", PASSWORD), None)
            .await
            .unwrap();
        let elsewhere = sign_in(&t.app, credentials("ada@example.com", PASSWORD), None)
            .await
            .unwrap();
        const NEW: &str = "quiet orange harbour lamps";
        let actor = Actor::User(&ada);

        let e = change_password(&t.app, actor, change("not my password", NEW)).await;
        assert!(matches!(e, Err(SessionError::WrongCurrentPassword)));
        let e = change_password(&t.app, actor, change(PASSWORD, "short")).await;
        assert!(matches!(e, Err(SessionError::WeakPassword(_))));
        let e = change_password(&t.app, Actor::Operator, change(PASSWORD, NEW)).await;
        assert!(matches!(e, Err(SessionError::Forbidden)));
        // Nothing changed yet.
        assert!(find(&t.app, &here.token).await.unwrap().is_some());

        let fresh = change_password(&t.app, actor, change(PASSWORD, NEW))
            .await
            .unwrap();
        for ended in [&here.token, &elsewhere.token] {
            assert!(find(&t.app, ended).await.unwrap().is_none());
        }
        assert_eq!(find(&t.app, &fresh).await.unwrap().unwrap().user.id, ada.id);
        let old = sign_in(&t.app, credentials("ada@example.com", PASSWORD), None).await;
        assert!(matches!(old, Err(SessionError::WrongCredentials)));
        assert!(
            sign_in(&t.app, credentials("ada@example.com", NEW), None)
                .await
                .is_ok()
        );

        // A user who is gone changes nothing.
        let ghost = UserRecord {
            id: UserId::new(),
            ..ada.clone()
        };
        let e = change_password(&t.app, Actor::User(&ghost), change(PASSWORD, NEW)).await;
        assert!(matches!(e, Err(SessionError::UserNotFound)));
        t.stop().await;
    }
}
