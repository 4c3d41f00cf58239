//! The turns, caps and workers of `fair.rs`, without an executor.

use super::*;

const MANY: Workers = Workers {
    live: 1_000,
    test: 1_000,
};

fn live(account: AccountId) -> Lane {
    Lane::new(account, Mode::Live)
}

fn test(account: AccountId) -> Lane {
    Lane::new(account, Mode::Test)
}

#[test]
fn accounts_take_turns_within_their_caps() {
    let f = Fair::new(MANY);
    let (a, b) = (live(AccountId::new()), live(AccountId::new()));
    f.set_cap(a, Some(2));
    f.set_cap(b, None);
    let a_tasks: Vec<TaskId> = (0..5).map(|_| TaskId::new()).collect();
    for id in &a_tasks {
        assert!(f.push(a, *id));
    }
    assert!(!f.push(a, a_tasks[0]), "queued once");
    let b_task = TaskId::new();
    f.push(b, b_task);
    // A's oldest, then B's (its turn), then A's next; then A is at its cap.
    assert_eq!(f.next(), Some((a_tasks[0], a)));
    assert_eq!(f.next(), Some((b_task, b)));
    assert_eq!(f.next(), Some((a_tasks[1], a)));
    assert!(!f.has_runnable());
    assert_eq!(f.next(), None);
    assert_eq!(f.running(a), 2);
    // One of A's ends: its next one may start, oldest first.
    f.done(a);
    assert!(f.has_runnable());
    assert_eq!(f.next(), Some((a_tasks[2], a)));
}

#[test]
fn a_blocked_account_waits_in_order_until_unblocked() {
    let f = Fair::new(MANY);
    let (a, b) = (live(AccountId::new()), live(AccountId::new()));
    f.set_cap(a, Some(4));
    f.set_cap(b, None);
    let (first, second) = (TaskId::new(), TaskId::new());
    f.push(a, first);
    f.push(a, second);
    assert_eq!(f.next(), Some((first, a)));
    // The store says A is at its cap (other instances run its tasks).
    f.done(a);
    f.block(a, first);
    assert!(!f.has_runnable());
    assert!(!f.try_start(a));
    let other = TaskId::new();
    f.push(b, other);
    assert_eq!(f.next(), Some((other, b)), "others are not held");
    assert!(f.unblock(a.account));
    assert!(!f.unblock(a.account));
    assert_eq!(f.next(), Some((first, a)), "the blocked task goes first");
    assert_eq!(f.next(), Some((second, a)));
    f.block(a, TaskId::new());
    assert!(f.unblock_all());
    assert!(!f.unblock_all());
}

#[test]
fn a_new_task_starts_at_once_only_under_the_cap_and_behind_none() {
    let f = Fair::new(MANY);
    let a = live(AccountId::new());
    f.set_cap(a, Some(1));
    assert!(f.try_start(a));
    assert!(!f.try_start(a), "at the cap");
    f.done(a);
    let waiting = TaskId::new();
    f.push(a, waiting);
    assert!(!f.try_start(a), "its queued task goes first");
    assert_eq!(f.next(), Some((waiting, a)));
    // Unknown caps hold a lane to one task.
    let c = live(AccountId::new());
    assert!(f.try_start(c));
    assert!(!f.try_start(c));
}

/// An account's test tasks at their cap, with more queued, never hold
/// its live tasks: a live task starts at once, and queued live tasks
/// are not behind queued test tasks.
#[test]
fn an_accounts_test_tasks_never_hold_its_live_ones() {
    let f = Fair::new(MANY);
    let account = AccountId::new();
    let (l, t) = (live(account), test(account));
    f.set_cap(l, Some(1));
    f.set_cap(t, Some(2));
    assert!(f.try_start(t));
    assert!(f.try_start(t));
    assert!(!f.try_start(t), "at the test cap");
    let test_backlog: Vec<TaskId> = (0..3).map(|_| TaskId::new()).collect();
    for id in &test_backlog {
        f.push(t, *id);
    }
    assert_eq!(f.next(), None, "the test lane is at its cap");
    // The live cap is untouched by the two test tasks running.
    assert!(f.try_start(l), "a live task starts at once");
    assert_eq!(f.running(l), 1);
    assert_eq!(f.running(t), 2);
    f.done(l);
    let queued_live = TaskId::new();
    f.push(l, queued_live);
    assert_eq!(
        f.next(),
        Some((queued_live, l)),
        "not behind the test backlog"
    );
    // A test task's end lets the next test task start, oldest first.
    f.done(t);
    assert_eq!(f.next(), Some((test_backlog[0], t)));
    assert_eq!(f.next(), None);
    // The store finds the test lane at its cap: the live lane is not blocked.
    f.done(l);
    f.done(t);
    let next_test = f.next().unwrap();
    assert_eq!(next_test, (test_backlog[1], t));
    f.done(t);
    f.block(t, next_test.0);
    assert!(f.try_start(l), "a blocked test lane holds no live task");
    assert!(
        f.unblock(account),
        "an end of the account unblocks its lanes"
    );
    assert_eq!(f.next(), Some((test_backlog[1], t)));
}

/// Test tasks run on workers of their own: all of them busy, a live task
/// still finds a worker; live workers all busy, test tasks still run.
#[test]
fn test_tasks_have_workers_of_their_own() {
    let f = Fair::new(Workers { live: 2, test: 1 });
    let (a, b) = (AccountId::new(), AccountId::new());
    for lane in [live(a), test(a), live(b), test(b)] {
        f.set_cap(lane, None);
    }
    assert!(f.try_start(test(a)));
    assert!(!f.try_start(test(b)), "the test worker is busy");
    let waiting_test = TaskId::new();
    f.push(test(b), waiting_test);
    assert!(f.try_start(live(a)), "a live worker is free all the same");
    let queued_live = TaskId::new();
    f.push(live(b), queued_live);
    assert_eq!(f.next(), Some((queued_live, live(b))));
    // Both live workers busy: no live task starts, and test ones do not
    // take their place, nor do live tasks take the test worker.
    assert!(!f.try_start(live(a)));
    assert!(!f.has_runnable());
    f.done(test(a));
    assert!(f.has_runnable());
    assert_eq!(f.next(), Some((waiting_test, test(b))));
    let another_live = TaskId::new();
    f.push(live(a), another_live);
    assert_eq!(f.next(), None, "no live worker free");
    assert!(f.done(live(b)), "a task is queued");
    assert_eq!(f.next(), Some((another_live, live(a))));
}
