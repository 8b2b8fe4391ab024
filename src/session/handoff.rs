//! Handing a run to the session's own pool with the caller waiting by
//! spinning first. `ThreadPool::install` from a thread outside the pool
//! puts the caller to sleep at once and wakes it when the job ends; on the
//! 2-core VM that wake-up cost ~60 µs a call — more than a whole silero-vad
//! run (Python's `Session.run` at `threads=1`: 113 µs against 54 µs on the
//! caller's own pool). Here the caller spins for up to [`SPIN`] before it
//! parks, so a short run returns without a sleep, and a long one parks as
//! `install` would (a spinning caller would take a core from the pool).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the caller spins before it parks.
pub const SPIN: Duration = Duration::from_micros(200);

/// The job's closure and its result, shared with the pool's thread.
struct Slot<F, R> {
    job: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    done: AtomicBool,
}

/// A pointer to the caller's slot, sent to the pool's thread.
struct SlotPtr<F, R>(*const Slot<F, R>);

// SAFETY: the slot is only touched by the job until `done`, then only by the
// caller, which does not return before `done` (see `run_on`).
unsafe impl<F, R> Send for SlotPtr<F, R> {}

/// Runs `f` on a thread of `pool` (the caller is not one of them) and
/// returns its result, a panic in `f` resumed on the caller.
pub fn run_on<F, R>(pool: &rayon::ThreadPool, f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot { job: UnsafeCell::new(Some(f)), result: UnsafeCell::new(None), done: AtomicBool::new(false) };
    let ptr = SlotPtr(&slot as *const Slot<F, R>);
    let caller = std::thread::current();
    let job = move || {
        let ptr = ptr;
        // SAFETY: the caller keeps the slot alive until `done` is set, and
        // reads nothing of it but `done` before then.
        let slot = unsafe { &*ptr.0 };
        let f = unsafe { (*slot.job.get()).take() }.expect("a job runs once");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        unsafe { *slot.result.get() = Some(result) };
        slot.done.store(true, Ordering::Release);
        // the slot may be gone from here on: only the handle is used
        caller.unpark();
    };
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(job);
    // SAFETY: the job borrows `slot` and `f`'s captures, which outlive it:
    // this function does not return (nor unwind: nothing below panics
    // before `done`) until the job has set `done`, its last use of them.
    let job: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(job) };
    pool.spawn(job);
    let start = Instant::now();
    while !slot.done.load(Ordering::Acquire) {
        if start.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }
    match unsafe { (*slot.result.get()).take() }.expect("set before done") {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::run_on;

    #[test]
    fn a_job_runs_on_the_pool_borrowing_the_callers_data() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let data: Vec<u64> = (1..=100).collect();
        for _ in 0..200 {
            let (sum, index) = run_on(&pool, || (data.iter().sum::<u64>(), rayon::current_thread_index()));
            assert_eq!((sum, index), (5050, Some(0)));
        }
        // a job longer than the spin: the caller parks and is woken
        let slow = run_on(&pool, || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            data.len()
        });
        assert_eq!(slow, 100);
    }

    #[test]
    fn a_panic_in_the_job_reaches_the_caller_and_the_pool_goes_on() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_on(&pool, || panic!("boom"))));
        let message = caught.unwrap_err().downcast::<&str>().map(|m| *m).unwrap_or_default();
        assert_eq!(message, "boom");
        assert_eq!(run_on(&pool, || 7), 7);
    }

    #[test]
    fn callers_on_several_threads_each_get_their_own_result() {
        let pool = std::sync::Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = std::sync::Arc::clone(&pool);
                std::thread::spawn(move || (0..100u64).map(|i| run_on(&pool, || t * 1000 + i)).sum::<u64>())
            })
            .collect();
        let sums: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(sums, (0..4u64).map(|t| t * 100_000 + 4950).collect::<Vec<_>>());
    }
}
