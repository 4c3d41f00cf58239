//! Fair dispatch of queued tasks.
//!
//! Each account's queued tasks wait in a queue of their own, oldest first,
//! and the accounts with queued tasks take turns: the next task to start is
//! the oldest of the next account in turn that is under its cap of running
//! tasks (its plan's `max_running_tasks`). One account's backlog of thousands
//! therefore delays another account's next task by at most one turn, and no
//! account holds more workers than its cap on this instance.
//!
//! The cap is also checked in the store, which counts every instance's
//! running tasks: an account found at its cap there is *blocked* here (its
//! tasks wait, in order) until one of its tasks ends anywhere, or the next
//! poll.
//!
//! Pure bookkeeping under one lock; the executor owns the workers.

use std::collections::{HashMap, HashSet, VecDeque};

use parking_lot::Mutex;
use taskgate_core::{AccountId, TaskId};

#[derive(Default)]
pub struct Fair {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queues: HashMap<AccountId, VecDeque<TaskId>>,
    /// Accounts with queued tasks, in turn order.
    turn: VecDeque<AccountId>,
    running: HashMap<AccountId, usize>,
    /// Running tasks at most per account; `None`: no cap. An account whose
    /// cap is not known yet is held to one.
    caps: HashMap<AccountId, Option<usize>>,
    queued: HashSet<TaskId>,
    /// Accounts at their cap in the store (other instances' tasks count).
    blocked: HashSet<AccountId>,
}

impl State {
    fn under_cap(&self, account: AccountId) -> bool {
        if self.blocked.contains(&account) {
            return false;
        }
        let running = self.running.get(&account).copied().unwrap_or(0);
        match self.caps.get(&account) {
            Some(None) => true,
            Some(Some(cap)) => running < *cap,
            None => running < 1,
        }
    }
}

impl Fair {
    /// Sets `account`'s cap of running tasks (`None`: unlimited).
    pub fn set_cap(&self, account: AccountId, cap: Option<usize>) {
        self.state.lock().caps.insert(account, cap);
    }

    pub fn knows_cap(&self, account: AccountId) -> bool {
        self.state.lock().caps.contains_key(&account)
    }

    /// `account`'s cap; `None`: none (or not known).
    pub fn cap(&self, account: AccountId) -> Option<usize> {
        self.state.lock().caps.get(&account).copied().flatten()
    }

    /// `account` is at its cap in the store: task `id` (given by
    /// [`Fair::next`], or never started) goes back to the head of its queue
    /// and the account's tasks wait until [`Fair::unblock`].
    pub fn block(&self, account: AccountId, id: TaskId) {
        let mut s = self.state.lock();
        s.blocked.insert(account);
        if !s.queued.insert(id) {
            return;
        }
        let queue = s.queues.entry(account).or_default();
        queue.push_front(id);
        if queue.len() == 1 {
            s.turn.push_back(account);
        }
    }

    /// One of `account`'s tasks ended somewhere: its next may start.
    /// Whether it was blocked.
    pub fn unblock(&self, account: AccountId) -> bool {
        self.state.lock().blocked.remove(&account)
    }

    /// Every account's next task may try again. Whether any was blocked.
    pub fn unblock_all(&self) -> bool {
        let mut s = self.state.lock();
        let any = !s.blocked.is_empty();
        s.blocked.clear();
        any
    }

    /// Counts a task of `account` as running if it may start now: under its
    /// cap, and with none of its tasks waiting before it.
    pub fn try_start(&self, account: AccountId) -> bool {
        let mut s = self.state.lock();
        let waiting = s.queues.get(&account).is_some_and(|q| !q.is_empty());
        if waiting || !s.under_cap(account) {
            return false;
        }
        *s.running.entry(account).or_default() += 1;
        true
    }

    /// Queues a task of `account`; `false` if it is queued already.
    pub fn push(&self, account: AccountId, id: TaskId) -> bool {
        let mut s = self.state.lock();
        if !s.queued.insert(id) {
            return false;
        }
        let queue = s.queues.entry(account).or_default();
        queue.push_back(id);
        if queue.len() == 1 {
            s.turn.push_back(account);
        }
        true
    }

    /// Whether no task waits here.
    pub fn is_empty(&self) -> bool {
        self.state.lock().queued.is_empty()
    }

    pub fn is_queued(&self, id: TaskId) -> bool {
        self.state.lock().queued.contains(&id)
    }

    /// Whether [`Fair::next`] would give a task now.
    pub fn has_runnable(&self) -> bool {
        let s = self.state.lock();
        s.turn.iter().any(|a| s.under_cap(*a))
    }

    /// The next task to start, counted as running: accounts in turn,
    /// skipping those at their cap.
    pub fn next(&self) -> Option<(TaskId, AccountId)> {
        let mut s = self.state.lock();
        for _ in 0..s.turn.len() {
            let account = s.turn.pop_front()?;
            if !s.under_cap(account) {
                s.turn.push_back(account);
                continue;
            }
            let queue = s.queues.get_mut(&account)?;
            let id = queue.pop_front()?;
            if queue.is_empty() {
                s.queues.remove(&account);
            } else {
                s.turn.push_back(account);
            }
            s.queued.remove(&id);
            *s.running.entry(account).or_default() += 1;
            return Some((id, account));
        }
        None
    }

    /// A task of `account` counted as running has ended (or never started).
    /// Whether any task is queued (one may start now).
    pub fn done(&self, account: AccountId) -> bool {
        let mut s = self.state.lock();
        if let Some(n) = s.running.get_mut(&account) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.running.remove(&account);
            }
        }
        !s.queued.is_empty()
    }

    /// Tasks of `account` counted as running.
    pub fn running(&self, account: AccountId) -> usize {
        self.state
            .lock()
            .running
            .get(&account)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_take_turns_within_their_caps() {
        let f = Fair::default();
        let (a, b) = (AccountId::new(), AccountId::new());
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
        let f = Fair::default();
        let (a, b) = (AccountId::new(), AccountId::new());
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
        assert!(f.unblock(a));
        assert!(!f.unblock(a));
        assert_eq!(f.next(), Some((first, a)), "the blocked task goes first");
        assert_eq!(f.next(), Some((second, a)));
        f.block(a, TaskId::new());
        assert!(f.unblock_all());
        assert!(!f.unblock_all());
    }

    #[test]
    fn a_new_task_starts_at_once_only_under_the_cap_and_behind_none() {
        let f = Fair::default();
        let a = AccountId::new();
        f.set_cap(a, Some(1));
        assert!(f.try_start(a));
        assert!(!f.try_start(a), "at the cap");
        f.done(a);
        let waiting = TaskId::new();
        f.push(a, waiting);
        assert!(!f.try_start(a), "its queued task goes first");
        assert_eq!(f.next(), Some((waiting, a)));
        // Unknown caps hold an account to one task.
        let c = AccountId::new();
        assert!(f.try_start(c));
        assert!(!f.try_start(c));
    }
}
