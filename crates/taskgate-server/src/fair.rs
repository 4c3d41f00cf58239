//! Fair dispatch of queued tasks.
//!
//! Each account's queued tasks wait in *lanes*: one for its live tasks and
//! one for its test tasks, each a queue of its own, oldest first, with a
//! cap of its own (the plan's `max_running_tasks` and
//! `max_running_test_tasks`). The lanes with queued tasks take turns: the
//! next task to start is the oldest of the next lane in turn that is under
//! its cap. One account's backlog of thousands therefore delays another
//! account's next task by at most one turn, and an account's test tasks
//! never hold its live ones: they neither count against the live cap nor
//! queue in front of live tasks.
//!
//! Workers are split by mode too: live tasks run on `workers`, test tasks
//! on `test_workers` of their own, so test tasks (free, and so handled
//! carelessly) can never take the worker a live task needs.
//!
//! The caps are also checked in the store, which counts every instance's
//! running tasks: a lane found at its cap there is *blocked* here (its tasks
//! wait, in order) until one of the account's tasks ends anywhere, or the
//! next poll.
//!
//! Pure bookkeeping under one lock; the executor owns the executions.

use std::collections::{HashMap, HashSet, VecDeque};

use parking_lot::Mutex;
use taskgate_core::{AccountId, Mode, TaskId};

/// An account's tasks of one mode: what a cap and a queue are kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lane {
    pub account: AccountId,
    pub mode: Mode,
}

impl Lane {
    pub fn new(account: AccountId, mode: Mode) -> Self {
        Self { account, mode }
    }
}

/// Tasks executed at once by one instance, by mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workers {
    pub live: usize,
    pub test: usize,
}

pub struct Fair {
    state: Mutex<State>,
}

struct State {
    queues: HashMap<Lane, VecDeque<TaskId>>,
    /// Lanes with queued tasks, in turn order.
    turn: VecDeque<Lane>,
    running: HashMap<Lane, usize>,
    /// Running tasks at most per lane; `None`: no cap. A lane whose cap is
    /// not known yet is held to one.
    caps: HashMap<Lane, Option<usize>>,
    queued: HashSet<TaskId>,
    /// Lanes at their cap in the store (other instances' tasks count).
    blocked: HashSet<Lane>,
    /// Workers of live tasks and of test tasks, and how many of each are busy.
    workers: Workers,
    busy: Workers,
}

impl State {
    fn may_start(&self, lane: Lane) -> bool {
        let (size, busy) = match lane.mode {
            Mode::Live => (self.workers.live, self.busy.live),
            Mode::Test => (self.workers.test, self.busy.test),
        };
        if busy >= size || self.blocked.contains(&lane) {
            return false;
        }
        let running = self.running.get(&lane).copied().unwrap_or(0);
        match self.caps.get(&lane) {
            Some(None) => true,
            Some(Some(cap)) => running < *cap,
            None => running < 1,
        }
    }

    fn start(&mut self, lane: Lane) {
        *self.running.entry(lane).or_default() += 1;
        match lane.mode {
            Mode::Live => self.busy.live += 1,
            Mode::Test => self.busy.test += 1,
        }
    }
}

impl Fair {
    pub fn new(workers: Workers) -> Self {
        Self {
            state: Mutex::new(State {
                queues: HashMap::new(),
                turn: VecDeque::new(),
                running: HashMap::new(),
                caps: HashMap::new(),
                queued: HashSet::new(),
                blocked: HashSet::new(),
                workers,
                busy: Workers { live: 0, test: 0 },
            }),
        }
    }

    /// Sets `lane`'s cap of running tasks (`None`: unlimited).
    pub fn set_cap(&self, lane: Lane, cap: Option<usize>) {
        self.state.lock().caps.insert(lane, cap);
    }

    pub fn knows_cap(&self, lane: Lane) -> bool {
        self.state.lock().caps.contains_key(&lane)
    }

    /// `lane`'s cap; `None`: none (or not known).
    pub fn cap(&self, lane: Lane) -> Option<usize> {
        self.state.lock().caps.get(&lane).copied().flatten()
    }

    /// `lane` is at its cap in the store: task `id` (given by
    /// [`Fair::next`], or never started) goes back to the head of its queue
    /// and the lane's tasks wait until [`Fair::unblock`].
    pub fn block(&self, lane: Lane, id: TaskId) {
        let mut s = self.state.lock();
        s.blocked.insert(lane);
        if !s.queued.insert(id) {
            return;
        }
        let queue = s.queues.entry(lane).or_default();
        queue.push_front(id);
        if queue.len() == 1 {
            s.turn.push_back(lane);
        }
    }

    /// One of `account`'s tasks ended somewhere (of either mode: the
    /// notice does not say): its next may start. Whether a lane of it was
    /// blocked.
    pub fn unblock(&self, account: AccountId) -> bool {
        let mut s = self.state.lock();
        let live = s.blocked.remove(&Lane::new(account, Mode::Live));
        let test = s.blocked.remove(&Lane::new(account, Mode::Test));
        live || test
    }

    /// Every lane's next task may try again. Whether any was blocked.
    pub fn unblock_all(&self) -> bool {
        let mut s = self.state.lock();
        let any = !s.blocked.is_empty();
        s.blocked.clear();
        any
    }

    /// Counts a task of `lane` as running, and a worker of its mode as
    /// busy, if it may start now: a worker of its mode free, the lane under
    /// its cap, and none of its tasks waiting before it.
    pub fn try_start(&self, lane: Lane) -> bool {
        let mut s = self.state.lock();
        let waiting = s.queues.get(&lane).is_some_and(|q| !q.is_empty());
        if waiting || !s.may_start(lane) {
            return false;
        }
        s.start(lane);
        true
    }

    /// Queues a task of `lane`; `false` if it is queued already.
    pub fn push(&self, lane: Lane, id: TaskId) -> bool {
        let mut s = self.state.lock();
        if !s.queued.insert(id) {
            return false;
        }
        let queue = s.queues.entry(lane).or_default();
        queue.push_back(id);
        if queue.len() == 1 {
            s.turn.push_back(lane);
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
        s.turn.iter().any(|lane| s.may_start(*lane))
    }

    /// The next task to start, counted as running (and its worker as
    /// busy): lanes in turn, skipping those at their cap or whose mode has
    /// no worker free.
    pub fn next(&self) -> Option<(TaskId, Lane)> {
        let mut s = self.state.lock();
        for _ in 0..s.turn.len() {
            let lane = s.turn.pop_front()?;
            if !s.may_start(lane) {
                s.turn.push_back(lane);
                continue;
            }
            let queue = s.queues.get_mut(&lane)?;
            let id = queue.pop_front()?;
            if queue.is_empty() {
                s.queues.remove(&lane);
            } else {
                s.turn.push_back(lane);
            }
            s.queued.remove(&id);
            s.start(lane);
            return Some((id, lane));
        }
        None
    }

    /// A task of `lane` counted as running has ended (or never started):
    /// its worker is free. Whether any task is queued (one may start now).
    pub fn done(&self, lane: Lane) -> bool {
        let mut s = self.state.lock();
        if let Some(n) = s.running.get_mut(&lane) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.running.remove(&lane);
            }
        }
        let busy = match lane.mode {
            Mode::Live => &mut s.busy.live,
            Mode::Test => &mut s.busy.test,
        };
        *busy = busy.saturating_sub(1);
        !s.queued.is_empty()
    }

    /// Tasks of `lane` counted as running.
    pub fn running(&self, lane: Lane) -> usize {
        self.state.lock().running.get(&lane).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
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
}
