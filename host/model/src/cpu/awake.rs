//! A decode step on rayon's pool with every worker kept awake between its parallel passes.
//!
//! A step is a chain of short parallel passes (a few per layer) with serial work between them
//! (norms, quantizing an activation, routing). A rayon worker that finds no work yields a few dozen
//! times and then sleeps; waking it again is a futex and, on a virtual machine, an interrupt to a
//! halted vCPU: tens of microseconds per pass, several percent of a step (measured on a 2-core EPYC
//! VM: ~90 context switches per token, llama.cpp's spinning threads ~0). [`run`] runs the step on
//! worker 0 while every other worker polls the pool for the step's work ([`rayon::yield_now`])
//! until the step ends, as llama.cpp's threads poll between graph nodes.
//!
//! Invariants:
//! * The results are the plain pool's bit for bit: only which thread runs a work item changes, and
//!   every parallel pass of the backend writes disjoint outputs with a fixed per-item order.
//! * A poller gives its thread back after [`IDLE_LIMIT`] without finding work, even if the step has
//!   not ended: a poller may be running on top of another caller's work item (a poller executes
//!   whatever job it finds, including another step's poller), so it must never wait for one step
//!   alone to end. The limit only costs speed when the serial part between two passes is longer
//!   than it.
//! * With one thread there is nothing to keep awake: `f` runs on the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a poller looks for work without finding any before it returns its thread to rayon.
/// Longer than the serial stretches of a decode step (tens of microseconds), short enough that a
/// poller stacked on another step's work item delays it by at most this.
pub(super) const IDLE_LIMIT: Duration = Duration::from_millis(2);

/// Runs `f` on one of rayon's workers (the global pool, or the pool the caller is in) while the
/// others poll for its parallel work, and returns its result. A panic in `f` is resumed on the
/// caller.
pub(super) fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_num_threads() < 2 {
        return f();
    }
    let done = AtomicBool::new(false);
    let f = Mutex::new(Some(f));
    let out = Mutex::new(None);
    rayon::broadcast(|ctx| {
        if ctx.index() == 0 {
            // Set on every exit, a panic included, so the pollers stop at once.
            let _end = SetOnDrop(&done);
            let f = lock(&f).take().expect("worker 0 runs the step once");
            *lock(&out) = Some(f());
        } else {
            poll(&done);
        }
    });
    let out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.expect("worker 0 ran the step")
}

/// Executes the pool's pending work until `done`, or until no work turned up for [`IDLE_LIMIT`].
fn poll(done: &AtomicBool) {
    let mut idle_since = Instant::now();
    while !done.load(Ordering::Acquire) {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            idle_since = Instant::now();
        } else if idle_since.elapsed() > IDLE_LIMIT {
            return;
        } else {
            std::hint::spin_loop();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn returns_the_steps_result_and_runs_its_passes() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let sums = pool.install(|| {
            run(|| {
                (0..50)
                    .map(|pass| {
                        (0..10_000u64)
                            .into_par_iter()
                            .map(|i| i * pass)
                            .sum::<u64>()
                    })
                    .collect::<Vec<_>>()
            })
        });
        let want: Vec<u64> = (0..50).map(|p| p * (0..10_000u64).sum::<u64>()).collect();
        assert_eq!(sums, want);
    }

    #[test]
    fn a_panicking_step_panics_on_the_caller_and_releases_the_pollers() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| run(|| -> u32 { panic!("step failed") }))
        }));
        assert!(r.is_err());
        // The pool still runs work: no poller was left behind.
        assert_eq!(pool.install(|| run(|| 7)), 7);
    }

    #[test]
    fn steps_from_many_threads_at_once_all_finish() {
        // Pollers of one step execute other steps' work items and pollers; the idle limit keeps any
        // of them from waiting on a step that waits on it.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let pool = &pool;
                s.spawn(move || {
                    for pass in 0..20u64 {
                        let got = pool.install(|| {
                            run(|| {
                                (0..5_000u64)
                                    .into_par_iter()
                                    .map(|i| i ^ t ^ pass)
                                    .sum::<u64>()
                            })
                        });
                        let want: u64 = (0..5_000u64).map(|i| i ^ t ^ pass).sum();
                        assert_eq!(got, want);
                    }
                });
            }
        });
    }
}
