//! `plans`: each plan's rate limits and caps of running tasks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use taskgate_core::{Mode, PlanName};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLimits {
    /// Requests in any rolling 60 s; absent means unlimited.
    pub per_minute: Option<u32>,
    /// Requests per UTC day; absent means unlimited.
    pub per_day: Option<u32>,
    /// Live tasks of one account running at once, over every instance
    /// sharing the store; more wait `queued`. Absent means no cap.
    #[serde(default)]
    pub max_running_tasks: Option<u32>,
    /// Test-mode tasks of one account running at once, counted and queued
    /// apart from its live ones, so that they never delay a live task.
    /// Absent: see [`PlanLimits::running_cap`].
    #[serde(default)]
    pub max_running_test_tasks: Option<u32>,
}

impl PlanLimits {
    /// What an account whose plan was removed from the configuration is held
    /// to: no request accepted, one task at a time (the strictest, not none).
    pub const REMOVED: PlanLimits = PlanLimits {
        per_minute: Some(0),
        per_day: Some(0),
        max_running_tasks: Some(1),
        max_running_test_tasks: Some(1),
    };

    /// The limits of `plan`, or [`PlanLimits::REMOVED`].
    pub fn of(plans: &BTreeMap<PlanName, PlanLimits>, plan: &PlanName) -> PlanLimits {
        plans.get(plan).copied().unwrap_or(Self::REMOVED)
    }

    /// The cap of an account's running tasks of `mode` (`None`: no cap).
    /// Test mode's, unless set, is a quarter of the live cap, at least 2;
    /// under no live cap, no test cap either (test tasks are then held only
    /// by `test_workers`, shared by turns with other accounts' test tasks).
    pub fn running_cap(&self, mode: Mode) -> Option<u32> {
        match mode {
            Mode::Live => self.max_running_tasks,
            Mode::Test => self
                .max_running_test_tasks
                .or(self.max_running_tasks.map(|live| (live / 4).max(2))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn test_caps_default_to_a_quarter_of_the_live_cap_at_least_two() {
        let c = Config::default();
        let cap = |plan: &str, mode| c.plans[&plan.parse::<PlanName>().unwrap()].running_cap(mode);
        assert_eq!(cap("free", Mode::Live), Some(8));
        assert_eq!(cap("free", Mode::Test), Some(2));
        assert_eq!(cap("pro", Mode::Test), Some(16));
        assert_eq!(
            cap("enterprise", Mode::Test),
            None,
            "no live cap, no test cap"
        );
        let set = PlanLimits {
            max_running_test_tasks: Some(5),
            ..PlanLimits::REMOVED
        };
        assert_eq!(set.running_cap(Mode::Test), Some(5));
        assert_eq!(set.running_cap(Mode::Live), Some(1));
        assert_eq!(PlanLimits::REMOVED.running_cap(Mode::Test), Some(1));
        assert_eq!(c.test_workers(), 64);
        let small = Config {
            workers: 3,
            ..Default::default()
        };
        assert_eq!(small.test_workers(), 2);
    }
}
