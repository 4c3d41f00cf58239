//! Attempts: each try at doing a task's work (an upstream request, or the
//! local computation of a built-in or the sandbox), as a task records them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{TaskStatus, Timestamp};

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptOutcome {
    Succeeded,
    Failed,
    /// The task's deadline passed while the attempt ran.
    Timeout,
    /// The task was cancelled while the attempt ran.
    Cancelled,
}

impl AttemptOutcome {
    pub const ALL: [AttemptOutcome; 4] = [
        AttemptOutcome::Succeeded,
        AttemptOutcome::Failed,
        AttemptOutcome::Timeout,
        AttemptOutcome::Cancelled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => TaskStatus::Succeeded.as_str(),
            AttemptOutcome::Failed => TaskStatus::Failed.as_str(),
            AttemptOutcome::Timeout => "timeout",
            AttemptOutcome::Cancelled => TaskStatus::Cancelled.as_str(),
        }
    }

    /// `Succeeded` or `Failed`.
    pub const fn of(succeeded: bool) -> Self {
        if succeeded {
            AttemptOutcome::Succeeded
        } else {
            AttemptOutcome::Failed
        }
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AttemptOutcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown attempt outcome {s:?}"))
    }
}

/// One attempt: `{provider, target, started_at, duration_ms, outcome,
/// http_status?}`, stored and shown in that form (`started_at` as RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub provider: String,
    /// The model or endpoint the attempt went to.
    pub target: String,
    #[serde(with = "crate::timestamp::rfc3339")]
    pub started_at: Timestamp,
    pub duration_ms: u64,
    pub outcome: AttemptOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
}

/// A task's attempts, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Attempts(pub Vec<Attempt>);

impl Attempts {
    pub fn iter(&self) -> std::slice::Iter<'_, Attempt> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<Attempt>> for Attempts {
    fn from(v: Vec<Attempt>) -> Self {
        Self(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_form() {
        let a = Attempt {
            provider: "openai".to_owned(),
            target: "gpt-4o-mini".to_owned(),
            started_at: Timestamp::from_unix_ms(1_767_225_600_123),
            duration_ms: 42,
            outcome: AttemptOutcome::Timeout,
            http_status: None,
        };
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"provider":"openai","target":"gpt-4o-mini","started_at":"2026-01-01T00:00:00.123Z","duration_ms":42,"outcome":"timeout"}"#
        );
        assert_eq!(serde_json::from_str::<Attempt>(&json).unwrap(), a);
        assert_eq!("cancelled".parse(), Ok(AttemptOutcome::Cancelled));
        assert!("ok".parse::<AttemptOutcome>().is_err());
    }
}
