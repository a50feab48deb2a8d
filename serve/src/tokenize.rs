//! The threads that template and tokenize prompts: a fixed set, started with the server, so this
//! work stays off the runtime's threads and at most as many prompts as threads are tokenized at
//! once.
//!
//! Fixed rather than tokio's blocking pool because of what the tokenizer keeps per thread: each
//! regex keeps a search cache (a lazy DFA that grows as it meets new input, up to the regex's size
//! limit) for every thread that has searched with it, kept for reuse. Threads that come and go (the
//! blocking pool retires idle ones and starts new ones under load) leave caches behind that each
//! learn from scratch, and the server's heap creeps up with every new peak; with a fixed set there
//! are as many caches as threads, and the heap levels off once they have seen the prompts.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads taking closures in the order they come; they end when this is dropped.
pub(crate) struct TokenizeThreads {
    jobs: mpsc::Sender<Job>,
}

impl TokenizeThreads {
    /// Starts `n` (at least one) threads.
    pub fn new(n: usize) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("ingot-tokenize-{i}"))
                .spawn(move || loop {
                    // One thread waits in `recv` holding the lock, the others for the lock.
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                })?;
        }
        Ok(Self { jobs })
    }

    /// `f`'s value, computed on one of the threads; `Err` with a reason if it panicked.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, &'static str> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        });
        self.jobs
            .send(job)
            .map_err(|_| "the tokenizer threads have stopped")?;
        match rx.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err("the tokenizer panicked"),
            Err(_) => Err("the tokenizer thread ended"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jobs run on the same few threads whatever their number, a panic is an error for its caller
    /// only, and the threads keep serving after it.
    #[tokio::test]
    async fn jobs_run_on_the_fixed_threads_and_survive_a_panic() {
        let threads = TokenizeThreads::new(2).unwrap();
        let mut names = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let name = threads
                .run(|| std::thread::current().name().unwrap_or("").to_string())
                .await
                .unwrap();
            names.insert(name);
        }
        assert!(names.len() <= 2, "{names:?}");
        assert!(
            names.iter().all(|n| n.starts_with("ingot-tokenize-")),
            "{names:?}"
        );
        let failed = threads.run(|| -> u32 { panic!("a tokenizer bug") }).await;
        assert_eq!(failed, Err("the tokenizer panicked"));
        assert_eq!(threads.run(|| 7).await, Ok(7));
    }
}
