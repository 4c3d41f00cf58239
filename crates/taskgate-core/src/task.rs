//! The task state machine, and what a task records of its life: events, its
//! error, the test-mode sandbox controls it was created with.
//!
//! ```text
//! queued ──► running ──► succeeded
//!   │           ├──────► failed
//!   │           └──────► cancelled
//!   └──────────────────► cancelled
//! ```
//!
//! The machine is the list of [`Transition`]s: each names its source states
//! and its target, [`TaskStatus::can_become`] is derived from that list, and
//! the store's conditional updates name their source states from it too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::newtype::string_newtype;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Queued,
        TaskStatus::Running,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// Whether the machine allows `self → next`: some [`Transition`] leads
    /// there from `self`. Terminal states never change.
    pub fn can_become(self, next: TaskStatus) -> bool {
        Transition::ALL
            .iter()
            .any(|t| t.to() == next && t.from().contains(&self))
    }

    /// `queued, running, succeeded, failed, cancelled`: for messages.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TaskStatus::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown status {s:?}"))
    }
}

/// A change of state the service makes. Nothing changes a task's state but
/// one of these, and each applies only from its [`Transition::from`] states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// A worker takes a queued task.
    Claim,
    /// The execution ended with an output.
    Succeed,
    /// The execution ended with an error.
    Fail,
    /// The client cancelled the task.
    Cancel,
    /// The instance running the task stopped: its lease ran out.
    Interrupt,
}

impl Transition {
    pub const ALL: [Transition; 5] = [
        Transition::Claim,
        Transition::Succeed,
        Transition::Fail,
        Transition::Cancel,
        Transition::Interrupt,
    ];

    /// The states this transition applies from.
    pub const fn from(self) -> &'static [TaskStatus] {
        use TaskStatus::*;
        match self {
            Transition::Claim => &[Queued],
            Transition::Succeed | Transition::Fail | Transition::Interrupt => &[Running],
            Transition::Cancel => &[Queued, Running],
        }
    }

    /// The state it leads to.
    pub const fn to(self) -> TaskStatus {
        match self {
            Transition::Claim => TaskStatus::Running,
            Transition::Succeed => TaskStatus::Succeeded,
            Transition::Fail | Transition::Interrupt => TaskStatus::Failed,
            Transition::Cancel => TaskStatus::Cancelled,
        }
    }

    /// The transition that ends an execution in `status`: `succeeded` or
    /// `failed`; any other status is not an execution's end.
    pub fn ending(status: TaskStatus) -> Result<Transition, ForbiddenTransition> {
        match status {
            TaskStatus::Succeeded => Ok(Transition::Succeed),
            TaskStatus::Failed => Ok(Transition::Fail),
            to => Err(ForbiddenTransition {
                from: TaskStatus::Running,
                to,
            }),
        }
    }

    /// `Ok` if the transition applies to a task in `from`.
    pub fn check(self, from: TaskStatus) -> Result<(), ForbiddenTransition> {
        if self.from().contains(&from) {
            Ok(())
        } else {
            Err(ForbiddenTransition {
                from,
                to: self.to(),
            })
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a task cannot go from {from} to {to}")]
pub struct ForbiddenTransition {
    pub from: TaskStatus,
    pub to: TaskStatus,
}

/// One transition in a task's history. Stored with `at` in Unix
/// milliseconds; clients see RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEvent {
    pub status: TaskStatus,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl TaskEvent {
    pub fn new(status: TaskStatus, at: Timestamp) -> Self {
        Self {
            status,
            at,
            message: None,
        }
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// A task's events, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskEvents(pub Vec<TaskEvent>);

impl TaskEvents {
    /// The history of a task created at `at`: one `queued` event.
    pub fn created(at: Timestamp) -> Self {
        Self(vec![TaskEvent::new(TaskStatus::Queued, at)])
    }

    pub fn push(&mut self, event: TaskEvent) {
        self.0.push(event);
    }

    pub fn iter(&self) -> std::slice::Iter<'_, TaskEvent> {
        self.0.iter()
    }

    pub fn last(&self) -> Option<&TaskEvent> {
        self.0.last()
    }
}

/// Why a task failed: `{code, message, upstream_status?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_status: Option<u16>,
}

impl TaskError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            upstream_status: None,
        }
    }

    /// The error of a task whose instance stopped while it ran.
    pub fn interrupted() -> Self {
        Self::new(
            error_code::INTERRUPTED,
            "the process running this task stopped before it finished",
        )
    }
}

/// The error codes a failed task may carry.
pub mod error_code {
    pub const UPSTREAM_ERROR: &str = "upstream_error";
    pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";
    pub const INVALID_UPSTREAM_RESPONSE: &str = "invalid_upstream_response";
    pub const TIMEOUT: &str = "timeout";
    pub const INTERRUPTED: &str = "interrupted";
    pub const INTERNAL_ERROR: &str = "internal_error";
    /// Codes a test-mode `sandbox.error_code` may ask for.
    pub const SIMULATABLE: [&str; 6] = [
        UPSTREAM_ERROR,
        UPSTREAM_TIMEOUT,
        INVALID_UPSTREAM_RESPONSE,
        TIMEOUT,
        INTERNAL_ERROR,
        "rate_limited_upstream",
    ];
}

/// How a test-mode task should end (`sandbox.outcome`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxOutcome {
    #[default]
    Succeeded,
    Failed,
    /// A hang: the task's own deadline ends it with `timeout`.
    Timeout,
}

impl SandboxOutcome {
    pub const ALL: [SandboxOutcome; 3] = [
        SandboxOutcome::Succeeded,
        SandboxOutcome::Failed,
        SandboxOutcome::Timeout,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            SandboxOutcome::Succeeded => TaskStatus::Succeeded.as_str(),
            SandboxOutcome::Failed => TaskStatus::Failed.as_str(),
            SandboxOutcome::Timeout => "timeout",
        }
    }
}

impl FromStr for SandboxOutcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown sandbox outcome {s:?}"))
    }
}

/// A task's `metadata`: at most this many keys,
pub const METADATA_MAX_KEYS: usize = 16;
/// each of 1 to this many characters,
pub const METADATA_MAX_KEY_CHARS: usize = 64;
/// with a string value of at most this many.
pub const METADATA_MAX_VALUE_CHARS: usize = 512;
/// The longest delay a test task's `sandbox.delay_ms` may ask for.
pub const SANDBOX_MAX_DELAY_MS: u64 = 600_000;

/// The `sandbox` controls of a test-mode task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxControls {
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub outcome: SandboxOutcome,
    #[serde(default)]
    pub error_code: Option<String>,
}

string_newtype!(
    /// The `Idempotency-Key` of a request: 1 to 255 visible ASCII characters
    /// (spaces allowed inside), scoped to an account and mode.
    IdempotencyKey,
    |s| {
        if s.is_empty()
            || s.len() > IdempotencyKey::MAX_LEN
            || !s.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        {
            Err(format!(
                "Idempotency-Key must be 1 to {} visible ASCII characters.",
                IdempotencyKey::MAX_LEN
            ))
        } else {
            Ok(())
        }
    }
);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 255;
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    #[test]
    fn the_machine_is_the_contracts() {
        let allowed: Vec<(TaskStatus, TaskStatus)> = TaskStatus::ALL
            .into_iter()
            .flat_map(|a| TaskStatus::ALL.into_iter().map(move |b| (a, b)))
            .filter(|(a, b)| a.can_become(*b))
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Queued, Running),
                (Queued, Cancelled),
                (Running, Succeeded),
                (Running, Failed),
                (Running, Cancelled),
            ]
        );
    }

    #[test]
    fn terminal_states_never_change() {
        for from in TaskStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in TaskStatus::ALL {
                assert!(!from.can_become(to), "{from} -> {to}");
            }
            for t in Transition::ALL {
                assert!(t.check(from).is_err(), "{t:?} from {from}");
            }
        }
        assert_eq!("running".parse::<TaskStatus>(), Ok(Running));
        assert!("done".parse::<TaskStatus>().is_err());
    }

    #[test]
    fn transitions_check_their_sources() {
        assert_eq!(Transition::Claim.check(Queued), Ok(()));
        assert_eq!(
            Transition::Claim.check(Running),
            Err(ForbiddenTransition {
                from: Running,
                to: Running
            })
        );
        assert_eq!(Transition::ending(Succeeded), Ok(Transition::Succeed));
        assert_eq!(Transition::ending(Failed), Ok(Transition::Fail));
        assert!(Transition::ending(Cancelled).is_err());
        assert!(Transition::ending(Queued).is_err());
    }

    #[test]
    fn events_keep_their_stored_form() {
        let e = TaskEvent::new(Failed, Timestamp::from_unix_ms(7)).with_message("boom");
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"status":"failed","at":7,"message":"boom"}"#);
        let list = TaskEvents::created(Timestamp::from_unix_ms(3));
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"[{"status":"queued","at":3}]"#
        );
        assert!(serde_json::from_str::<TaskEvent>(r#"{"status":"done","at":1}"#).is_err());
    }

    #[test]
    fn sandbox_controls_default_to_success() {
        let c: SandboxControls = serde_json::from_str("{}").unwrap();
        assert_eq!(c.outcome, SandboxOutcome::Succeeded);
        assert_eq!("timeout".parse(), Ok(SandboxOutcome::Timeout));
        assert!("cancelled".parse::<SandboxOutcome>().is_err());
        assert_eq!(
            serde_json::to_string(&SandboxControls::default()).unwrap(),
            r#"{"delay_ms":0,"outcome":"succeeded","error_code":null}"#
        );
    }

    #[test]
    fn idempotency_keys_are_visible_ascii() {
        assert!(IdempotencyKey::parse("order 17").is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("é").is_err());
        assert!(IdempotencyKey::parse("a\tb").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
    }
}
