//! The task state machine.
//!
//! ```text
//! queued ──► running ──► succeeded | failed | cancelled
//!   └──────────────────► cancelled
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// Whether the machine allows `self → next`. Terminal states never change.
    pub fn can_become(self, next: TaskStatus) -> bool {
        use TaskStatus::*;
        matches!(
            (self, next),
            (Queued, Running)
                | (Queued, Cancelled)
                | (Queued, Failed)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, Cancelled)
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_never_change() {
        for from in TaskStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in TaskStatus::ALL {
                assert!(!from.can_become(to), "{from} -> {to}");
            }
        }
        assert!(TaskStatus::Queued.can_become(TaskStatus::Running));
        assert!(!TaskStatus::Running.can_become(TaskStatus::Queued));
        assert_eq!("running".parse::<TaskStatus>(), Ok(TaskStatus::Running));
        assert!("done".parse::<TaskStatus>().is_err());
    }
}
