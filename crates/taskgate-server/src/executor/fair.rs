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
    #[cfg(test)]
    pub fn running(&self, lane: Lane) -> usize {
        self.state.lock().running.get(&lane).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
