//! The state machine, enforced by the store: every pair of states, every
//! operation that changes a state.

use std::sync::Arc;

use taskgate_core::{Mode, TaskId, TaskStatus, Transition};
use taskgate_store::{Store, StoreError, TaskRecord};

use crate::fixtures::{HOUR, T0, acct, at, ended_task, fetch, finish, insert, runner, task};

/// The contract's machine (api-v1.md §4), written out: the store must
/// perform exactly these changes, whatever the core's definition says.
const CONTRACT: [(TaskStatus, TaskStatus); 5] = [
    (TaskStatus::Queued, TaskStatus::Running),
    (TaskStatus::Queued, TaskStatus::Cancelled),
    (TaskStatus::Running, TaskStatus::Succeeded),
    (TaskStatus::Running, TaskStatus::Failed),
    (TaskStatus::Running, TaskStatus::Cancelled),
];

const NOW: i64 = T0 + HOUR;

/// A task stored in `status`; a running one's lease has run out, so that
/// interruption applies to it.
fn task_in(status: TaskStatus) -> TaskRecord {
    match status {
        TaskStatus::Queued => task("acct_a", "live", "language"),
        TaskStatus::Running => {
            let mut t = task("acct_a", "live", "language");
            t.status = TaskStatus::Running;
            t.runner = Some(runner("runner-x"));
            t.started_at = Some(at(T0 + 1));
            t.lease_until = Some(at(T0 + 2));
            t
        }
        ended => ended_task("acct_a", "live", "language", ended.as_str()),
    }
}

/// Applies `transition` to task `id` through the store operation that makes
/// it; whether the store says it changed the task.
async fn apply(store: &dyn Store, transition: Transition, id: TaskId) -> bool {
    let mine = |ids: Vec<TaskId>| ids.contains(&id);
    match transition {
        Transition::Claim => store
            .claim_task(id, &runner("runner-y"), at(NOW), at(NOW + HOUR))
            .await
            .unwrap()
            .is_some(),
        Transition::Succeed => store
            .finish_task(id, &finish("succeeded", 10, NOW, Some(acct("acct_a"))))
            .await
            .unwrap(),
        Transition::Fail => store
            .finish_task(id, &finish("failed", 0, NOW, None))
            .await
            .unwrap(),
        Transition::Cancel => {
            let before = fetch(store, id).await.status;
            let after = store
                .cancel_task(acct("acct_a"), Mode::Live, id, at(NOW))
                .await
                .unwrap()
                .expect("the task is found");
            after.status != before
        }
        Transition::Interrupt => mine(store.interrupt_expired(at(NOW), None).await.unwrap()),
    }
}

/// Every pair of states, every state-changing operation: the store performs
/// a change exactly when the contract allows that pair, and a refused change
/// leaves the row as it was, byte for byte.
pub async fn every_forbidden_transition_is_refused(store: Arc<dyn Store>) {
    let mut performed = Vec::new();
    for from in TaskStatus::ALL {
        for transition in Transition::ALL {
            let to = transition.to();
            let t = insert(&*store, task_in(from)).await;
            let before = fetch(&*store, t.id).await;
            let changed = apply(&*store, transition, t.id).await;
            let after = fetch(&*store, t.id).await;
            let allowed = CONTRACT.contains(&(from, to));
            if allowed {
                assert!(changed, "{transition:?}: {from} -> {to} must be performed");
                assert_eq!(after.status, to, "{transition:?} from {from}");
                assert_eq!(after.events.last().map(|e| e.status), Some(to));
                performed.push((from, to));
            } else {
                assert!(!changed, "{transition:?}: {from} -> {to} must be refused");
                assert_eq!(after, before, "{transition:?} from {from} changed the task");
            }
        }
    }
    // Every allowed change is made by some operation.
    for pair in CONTRACT {
        assert!(performed.contains(&pair), "{pair:?} is never performed");
    }
    // Nothing leads back to queued, and terminal states never change: no
    // other pair was performed.
    assert!(
        performed
            .iter()
            .all(|(from, to)| !from.is_terminal() && *to != TaskStatus::Queued)
    );
}

/// A finish names a state that ends an execution, or it is refused before
/// any write, whatever state the task is in.
pub async fn finish_to_a_non_ending_state_is_refused(store: Arc<dyn Store>) {
    for from in TaskStatus::ALL {
        for to in [
            TaskStatus::Queued,
            TaskStatus::Running,
            TaskStatus::Cancelled,
        ] {
            let t = insert(&*store, task_in(from)).await;
            let mut f = finish("succeeded", 10, NOW, Some(acct("acct_a")));
            f.status = to;
            let result = store.finish_task(t.id, &f).await;
            assert!(
                matches!(result, Err(StoreError::Forbidden(_))),
                "finish to {to} from {from}: {result:?}"
            );
            assert_eq!(fetch(&*store, t.id).await, t);
        }
    }
    assert_eq!(
        store
            .month_spend(acct("acct_a"), &at(NOW).month_key())
            .await
            .unwrap(),
        0
    );
}
