//! A future polled again at once when it wakes itself while being polled,
//! instead of being handed back to tokio's scheduler.
//!
//! Why: hyper serves a request inside its connection's task, and the body
//! of a request reaches the handler through a channel whose two ends are in
//! that same task, so reading a body wakes the task while it is being
//! polled. tokio takes a task woken during its own poll for one that
//! yielded: it goes to the back of the run queue, and an idle worker is
//! woken to steal it (a `futex` wake-up and a context switch on each side).
//! At one connection that was one of the two cross-thread wake-ups of every
//! sync call (`perf` on the `futex` wakes, bench/RESULTS.md). Polled again
//! here, the task goes on on its own thread.
//!
//! A wake from anywhere else (the socket, a timer, another task) while the
//! future is not being polled goes to the task as it always did. A future
//! that keeps waking itself is given back to the scheduler after
//! [`REPOLLS`] rounds, as is one whose task has used its budget (tokio's
//! resources then wake the task and answer `Pending` until its next turn):
//! yielding still yields.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Rounds polled again within one poll of the task at most.
const REPOLLS: usize = 4;

/// The wrapped future is being polled.
const POLLING: u8 = 1;
/// A wake came while it was being polled.
const WOKEN: u8 = 2;

/// What the wrapped future's wakers point at.
struct Signal {
    /// The task's own waker, as of its last poll.
    task: AtomicWaker,
    state: AtomicU8,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // One total order over `state`: either the poll sees `WOKEN` and
        // polls again, or this sees the poll over and wakes the task.
        if self.state.fetch_or(WOKEN, Ordering::AcqRel) & POLLING == 0 {
            self.task.wake();
        }
    }
}

/// `inner`, polled again while it wakes itself during its own poll.
pub(crate) struct Repoll<F> {
    inner: Pin<Box<F>>,
    signal: Arc<Signal>,
    /// A waker of `signal`, made once.
    waker: Waker,
}

impl<F: Future> Repoll<F> {
    pub(crate) fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            task: AtomicWaker::new(),
            state: AtomicU8::new(0),
        });
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(signal.clone()),
            signal,
        }
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.signal.task.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..REPOLLS {
            this.signal.state.store(POLLING, Ordering::Release);
            let polled = this.inner.as_mut().poll(&mut inner_cx);
            let state = this.signal.state.swap(0, Ordering::AcqRel);
            if polled.is_ready() || state & WOKEN == 0 {
                return polled;
            }
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        // Woken during each round, or out of budget: its turn is over, and
        // it is polled again in its next.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// Counts the wakes of the task that polls it.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Ready after waking itself `n` times, each during its own poll.
    fn waking_itself(n: usize) -> impl Future<Output = usize> {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > n {
                return Poll::Ready(polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_future_waking_itself_is_polled_again_without_waking_the_task() {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin_box(Repoll::new(waking_itself(3)));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(4));
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn one_that_keeps_waking_itself_is_given_back_to_the_scheduler() {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin_box(Repoll::new(waking_itself(REPOLLS * 2)));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
        // It yielded: its task was woken so that it runs in its next turn.
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(REPOLLS * 2 + 1));
    }

    #[test]
    fn a_wake_between_polls_wakes_the_task() {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let stored: Arc<parking_lot::Mutex<Option<Waker>>> = Arc::default();
        let keep = stored.clone();
        let mut fut = pin_box(Repoll::new(std::future::poll_fn(move |cx| {
            *keep.lock() = Some(cx.waker().clone());
            Poll::<()>::Pending
        })));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
        stored.lock().take().expect("a waker").wake();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    }

    /// A channel fed from another thread: every value arrives, whether it
    /// was sent while the receiver was being polled or between its polls.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_wake_from_another_thread_is_lost() {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let sender = std::thread::spawn(move || {
            for i in 0..20_000 {
                tx.blocking_send(i).expect("the receiver is there");
            }
        });
        let received = tokio::time::timeout(
            Duration::from_secs(30),
            Repoll::new(async move {
                let mut n = 0;
                while let Some(i) = rx.recv().await {
                    assert_eq!(i, n);
                    n += 1;
                }
                n
            }),
        )
        .await
        .expect("every value arrives and nothing hangs");
        assert_eq!(received, 20_000);
        sender.join().unwrap();
    }

    fn pin_box<F: Future>(f: F) -> Pin<Box<F>> {
        Box::pin(f)
    }
}
