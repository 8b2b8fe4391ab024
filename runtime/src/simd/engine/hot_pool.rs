//! Keeping the rayon pool's other threads awake for the length of a
//! session's run. A step's parallel loop hands work to threads that, after
//! rayon's short spin, sleep between steps; waking one costs more than a
//! small step's whole work on this machine (a SiLU over 64K floats: 20 µs
//! on one thread, 26 µs on two), so a model of many small steps ran no
//! faster, or slower, on two threads than on one. onnxruntime's pool
//! spins between its parallel sections for the same reason.
//!
//! While the run lasts, each other thread of the pool runs a helper that
//! takes any pending work of the pool (`rayon::yield_now`) and otherwise
//! spins, so a step's parallel loop finds them ready. The helpers stop
//! when the run ends (or unwinds). A caller that runs a session many times
//! in a row (`diamond bench`) wraps the whole loop, so that the first steps
//! of each run do not wait for the helpers to wake either; the sessions'
//! own calls inside it then run plainly.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    /// Whether this thread is inside [`while_hot`] (its helpers already spin).
    static HOT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the current pool's other threads kept busy-waiting for its
/// parallel work; plainly when the caller is not on a pool's thread or the
/// pool has one thread.
pub fn while_hot<R>(f: impl FnOnce() -> R) -> R {
    let threads = rayon::current_num_threads();
    let Some(me) = rayon::current_thread_index() else { return f() };
    if threads < 2 || HOT.with(Cell::get) {
        return f();
    }
    HOT.with(|h| h.set(true));
    let done = AtomicBool::new(false);
    rayon::in_place_scope(|s| {
        for _ in 1..threads {
            s.spawn(|_| {
                // A helper that this thread picked up itself (while waiting
                // in a parallel loop of `f`) must not spin: `f` could not go
                // on beneath it.
                if rayon::current_thread_index() == Some(me) {
                    return;
                }
                // the work it runs while spinning flushes subnormals, as the caller's does
                super::denormals::flushing(|| {
                    while !done.load(Ordering::Acquire) {
                        if rayon::yield_now() != Some(rayon::Yield::Executed) {
                            std::hint::spin_loop();
                        }
                    }
                })
            });
        }
        /// Ends the helpers however `f` returns.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
                HOT.with(|h| h.set(false));
            }
        }
        let _stop = Stop(&done);
        f()
    })
}
