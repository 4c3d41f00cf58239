//! The application's services: what Taskgate does, once, under every door.
//!
//! The doors (`/api/v1`, `/openai/v1`, the dashboard, the CLI) parse their
//! input into the domain types of `taskgate-core`, call a function here with
//! the [`Actor`] who asks, and render what it returns in their own shape.
//! Each module has one error enum: what went wrong, in the domain's terms,
//! with no HTTP status and no wording of a door; each door turns it into its
//! own words in one place.
//!
//! | module | what it owns |
//! |---|---|
//! | [`accounts`] | creating and changing accounts; the first start's account |
//! | [`keys`] | API keys: create, list, revoke, roll |
//! | [`users`] | dashboard users: create, list, disable, passwords |
//! | [`sessions`] | dashboard sessions: sign in (with its limits), the session of a token, sign out, a user's own new password |
//! | [`calls`] | a call: validation, idempotency, spend, storing and running its task, the sync wait |
//! | [`tasks`] | a caller's tasks: find, list, cancel |
//! | [`apis`] | the catalog as a caller sees it |
//! | [`usage`] | an account's requests, tasks, spend and limits over a span of time |
//! | [`audit`] | the audit log: list and verify it, and its retention |
//! | [`webhooks`] | webhook endpoints, their secrets and test events, the calls' signing secret, the delivery log and its replay |

pub mod accounts;
pub mod audit;
pub mod calls;

pub mod keys;
pub mod sessions;
pub mod stream;
pub mod tasks;
pub mod usage;
pub mod users;
pub mod webhooks;

#[cfg(test)]
mod testing;

use std::net::IpAddr;

use taskgate_core::{AccountId, AuditActor, AuditContext, Role};
use taskgate_store::UserRecord;

use crate::principal::Principal;

/// Who asks a service for something. The services decide what each may do.
#[derive(Clone, Copy)]
pub enum Actor<'a> {
    /// The operator: the command line, and the first start. May do anything.
    Operator,
    /// A user signed in to the dashboard.
    User(&'a UserRecord),
    /// An API key, as authentication found it.
    Key(&'a Principal),
}

impl Actor<'_> {
    /// Manages every account and user: the operator and admins.
    pub fn administers(&self) -> bool {
        match self {
            Actor::Operator => true,
            Actor::User(u) => u.role == Role::Admin,
            Actor::Key(_) => false,
        }
    }

    /// Creates, rolls and revokes `account`'s keys and sets its spend limit:
    /// those who administer, and the account's owners.
    pub fn manages(&self, account: AccountId) -> bool {
        match self {
            Actor::User(u) if u.account_id == account => u.role.manages_account(),
            other => other.administers(),
        }
    }

    /// Sees `account`: its keys, tasks and usage.
    pub fn sees(&self, account: AccountId) -> bool {
        match self {
            Actor::Operator => true,
            Actor::User(u) => u.account_id == account || u.role == Role::Admin,
            Actor::Key(p) => p.account_id == account,
        }
    }
}

impl Actor<'_> {
    /// Who the audit log names for a change this actor makes from `origin`:
    /// a user by id and email, a key by id, the operator by the name its
    /// door gives ([`Origin::operator`]).
    pub fn audit(&self, origin: &Origin) -> AuditContext {
        let actor = match self {
            Actor::Operator => AuditActor::operator(
                origin
                    .operator
                    .clone()
                    .unwrap_or_else(|| "operator".to_owned()),
            ),
            Actor::User(u) => AuditActor::user(u.id, &u.email),
            Actor::Key(p) => AuditActor::api_key(p.key_id),
        };
        AuditContext::new(
            actor,
            origin.ip.map(|ip| ip.to_string()),
            origin.user_agent.as_deref(),
        )
    }
}

/// Where a change comes from, for the audit log: the client's address
/// (behind the trusted proxies) and user agent at an HTTP door; the
/// operator's name at the command line and the first start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub ip: Option<IpAddr>,
    pub user_agent: Option<String>,
    /// The operator's name in the log: `cli:` and the system user who ran
    /// the command, or `first-start`.
    pub operator: Option<String>,
}

impl Origin {
    /// A request's: its client's address and `User-Agent`.
    pub fn http(ip: Option<IpAddr>, user_agent: Option<&str>) -> Self {
        Self {
            ip,
            user_agent: user_agent.map(str::to_owned),
            operator: None,
        }
    }

    /// The command line's: `cli:$USER` (or `$LOGNAME`; `cli` alone when
    /// neither is set), and `taskgate-cli/VERSION` as its user agent.
    pub fn cli() -> Self {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .filter(|u| !u.is_empty() && u.len() <= 64 && !u.chars().any(char::is_control));
        Self {
            ip: None,
            user_agent: Some(format!("taskgate-cli/{}", env!("CARGO_PKG_VERSION"))),
            operator: Some(match user {
                Some(u) => format!("cli:{u}"),
                None => "cli".to_owned(),
            }),
        }
    }

    /// The server's first start, making the default account, keys and admin.
    pub fn first_start() -> Self {
        Self {
            ip: None,
            user_agent: None,
            operator: Some("first-start".to_owned()),
        }
    }
}
