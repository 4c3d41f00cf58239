//! The deliveries the writer holds for this process's webhook sender as it
//! writes them, handed over once their commit succeeds
//! ([`crate::DeliverySink`]).
//!
//! Why: one process owns a SQLite database, so its sender is the only one;
//! claiming a delivery just written cost a transaction of its own (the
//! claim's reads, the lease written, the endpoint and the task read back)
//! and a wait for the sender's next round, more than the delivery's
//! request itself (`bench/RESULTS.md`, issue 30). Held in the commit that
//! writes it, with the task at hand and its endpoint read there, the
//! delivery goes out as soon as that commit is done.
//!
//! A transaction of the writer's connection opens a handoff on the thread
//! that runs it ([`begin`]); the statement that writes a change's
//! deliveries adds to it ([`with_open`]); a job undone within a batch takes
//! its own back ([`mark`], [`undo_to`]); the commit hands them over
//! ([`Open::committed`]), and anything else gives their turns back. Only
//! the writer's transactions open one: a delivery written elsewhere (the
//! sqlx pool's writes) is left for the claim, as before.

use std::cell::RefCell;
use std::sync::Arc;

use crate::{ClaimedDelivery, DeliverySink};

thread_local! {
    /// The handoff of the transaction open on this thread, if any.
    static OPEN: RefCell<Option<Handoff>> = const { RefCell::new(None) };
}

/// A transaction's deliveries held for `sink`.
pub(super) struct Handoff {
    pub sink: Arc<dyn DeliverySink>,
    pub held: Vec<ClaimedDelivery>,
    /// Deliveries were written unheld: the claim is to look.
    pub waiting: bool,
}

/// The handoff of the transaction about to begin on this thread, while the
/// returned guard lives (none without a sink). Dropped without
/// [`Open::committed`], its deliveries' turns are given back.
pub(super) fn begin(sink: Option<&Arc<dyn DeliverySink>>) -> Open {
    let Some(sink) = sink else {
        return Open { open: false };
    };
    OPEN.with(|o| {
        *o.borrow_mut() = Some(Handoff {
            sink: sink.clone(),
            held: Vec::new(),
            waiting: false,
        });
    });
    Open { open: true }
}

/// `f` on the open handoff of this thread, if there is one.
pub(super) fn with_open<R>(f: impl FnOnce(&mut Handoff) -> R) -> Option<R> {
    OPEN.with(|o| o.borrow_mut().as_mut().map(f))
}

/// Where a job begins: what it adds comes after this.
pub(super) fn mark() -> usize {
    with_open(|h| h.held.len()).unwrap_or(0)
}

/// A job undone (its savepoint rolled back): what it added since `mark`
/// given back.
pub(super) fn undo_to(mark: usize) {
    let undone = with_open(|h| (h.sink.clone(), h.held.split_off(mark.min(h.held.len()))));
    if let Some((sink, undone)) = undone
        && !undone.is_empty()
    {
        sink.give_back(undone);
    }
}

/// The guard of an open handoff.
#[must_use]
pub(super) struct Open {
    open: bool,
}

impl Open {
    /// The transaction committed: its deliveries handed over.
    pub fn committed(mut self) {
        if let Some(h) = self.take() {
            if h.waiting {
                h.sink.waiting();
            }
            if !h.held.is_empty() {
                h.sink.committed(h.held);
            }
        }
    }

    fn take(&mut self) -> Option<Handoff> {
        if !std::mem::take(&mut self.open) {
            return None;
        }
        OPEN.with(|o| o.borrow_mut().take())
    }
}

impl Drop for Open {
    /// Not committed: nothing it held exists; the turns come back.
    fn drop(&mut self) {
        if let Some(h) = self.take()
            && !h.held.is_empty()
        {
            h.sink.give_back(h.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use taskgate_core::{
        AccountId, DeliveryAttempts, DeliveryStatus, Mode, RunnerId, Timestamp, WebhookEvent,
    };

    use super::*;
    use crate::{Destination, WebhookDelivery};

    #[derive(Default)]
    struct Seen {
        committed: Mutex<Vec<i64>>,
        given_back: Mutex<Vec<i64>>,
        waiting: Mutex<usize>,
    }

    impl DeliverySink for Seen {
        fn runner(&self) -> &RunnerId {
            unreachable!("not asked here")
        }
        fn lease_end(&self, now: Timestamp) -> Timestamp {
            now
        }
        fn has_room(&self) -> bool {
            true
        }
        fn take_turn(&self, _to: &Destination) -> bool {
            true
        }
        fn committed(&self, d: Vec<ClaimedDelivery>) {
            self.committed
                .lock()
                .unwrap()
                .extend(d.iter().map(|d| d.delivery.seq));
        }
        fn give_back(&self, d: Vec<ClaimedDelivery>) {
            self.given_back
                .lock()
                .unwrap()
                .extend(d.iter().map(|d| d.delivery.seq));
        }
        fn waiting(&self) {
            *self.waiting.lock().unwrap() += 1;
        }
    }

    fn held(seq: i64) -> ClaimedDelivery {
        ClaimedDelivery {
            delivery: WebhookDelivery {
                seq,
                account_id: AccountId::new(),
                mode: Mode::Live,
                event_type: WebhookEvent::TaskSucceeded,
                task_id: None,
                endpoint_id: None,
                url: Some("https://example.com/hook".to_owned()),
                status: DeliveryStatus::Pending,
                attempts: DeliveryAttempts(Vec::new()),
                payload: None,
                next_attempt_at: None,
                created_at: Timestamp::from_unix_ms(0),
            },
            endpoint: None,
            task: None,
        }
    }

    fn add(seq: i64) {
        with_open(|h| h.held.push(held(seq))).expect("a handoff is open");
    }

    #[test]
    fn a_commit_hands_over_what_its_jobs_kept() {
        let seen = Arc::new(Seen::default());
        let sink: Arc<dyn DeliverySink> = seen.clone();
        let open = begin(Some(&sink));
        add(1);
        // A job undone gives back only what it added.
        let job = mark();
        add(2);
        add(3);
        undo_to(job);
        add(4);
        with_open(|h| h.waiting = true);
        open.committed();
        assert_eq!(*seen.committed.lock().unwrap(), vec![1, 4]);
        assert_eq!(*seen.given_back.lock().unwrap(), vec![2, 3]);
        assert_eq!(*seen.waiting.lock().unwrap(), 1);
        assert!(with_open(|_| ()).is_none(), "closed with its transaction");
    }

    #[test]
    fn a_transaction_not_committed_gives_everything_back() {
        let seen = Arc::new(Seen::default());
        let sink: Arc<dyn DeliverySink> = seen.clone();
        let open = begin(Some(&sink));
        add(7);
        drop(open);
        assert!(seen.committed.lock().unwrap().is_empty());
        assert_eq!(*seen.given_back.lock().unwrap(), vec![7]);
        assert!(with_open(|_| ()).is_none());
    }

    #[test]
    fn without_a_sink_nothing_is_open() {
        let open = begin(None);
        assert!(with_open(|_| ()).is_none());
        assert_eq!(mark(), 0);
        open.committed();
    }
}
