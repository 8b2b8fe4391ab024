//! A session's own thread pool kept awake for a moment after each run.
//!
//! A run on a session with a pool of its own is handed to that pool's
//! threads (`ThreadPool::install`), which fall asleep soon after the run
//! ends; waking one for the next call cost ~90 µs on the 2-core VM — as
//! much as a whole silero-vad run (Python's `Session.run` at `threads=1`:
//! 183 µs, against 89 µs on the caller's own pool). After each run the
//! pool's threads therefore spin, taking any work given to the pool, until
//! [`LINGER`] has passed since the last run ended: a caller running the
//! session in a loop finds them awake, one that calls rarely pays at most
//! that much spinning per call (onnxruntime's pool spins the same way).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the threads stay awake after the last run.
pub const LINGER: Duration = Duration::from_millis(2);

/// The lingering state of one session's pool.
#[derive(Debug)]
pub struct Linger {
    /// Whether spinners are running on the pool now.
    active: AtomicBool,
    /// When the last run ended, in nanoseconds since `epoch`.
    last_end: AtomicU64,
    epoch: Instant,
}

impl Default for Linger {
    fn default() -> Linger {
        Linger { active: AtomicBool::new(false), last_end: AtomicU64::new(0), epoch: Instant::now() }
    }
}

impl Linger {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Called when a run on `pool` has ended: its threads spin until
    /// [`LINGER`] after the latest such call (one set of spinners at a time).
    pub fn after_run(self: &Arc<Linger>, pool: &rayon::ThreadPool) {
        self.last_end.store(self.now(), Ordering::Release);
        if self.active.swap(true, Ordering::AcqRel) {
            return;
        }
        let linger = Arc::clone(self);
        let left = Arc::new(std::sync::atomic::AtomicUsize::new(pool.current_num_threads()));
        pool.spawn_broadcast(move |_| {
            let limit = LINGER.as_nanos() as u64;
            while linger.now().saturating_sub(linger.last_end.load(Ordering::Acquire)) < limit {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::hint::spin_loop();
                }
            }
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                linger.active.store(false, Ordering::Release);
            }
        });
    }
}
