//! Counters for `GET /metrics` (Prometheus text format 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Metrics {
    /// Jobs waiting in the queue (not the one running).
    pub queue_depth: AtomicUsize,
    /// 1 while the decoder runs a job.
    pub busy: AtomicUsize,
    /// Jobs stopped because their client went away.
    pub cancelled: AtomicU64,
    generated: AtomicU64,
    prompt: AtomicU64,
    prompt_reused: AtomicU64,
    decoded: AtomicU64,
    /// Microseconds spent decoding after the prefill.
    decode_us: AtomicU64,
    /// The last finished job's decode rate, as f64 bits.
    last_rate: AtomicU64,
    /// NextN/MTP drafts verified, and those accepted (`--draft mtp`).
    drafted: AtomicU64,
    accepted: AtomicU64,
    by_status: Mutex<BTreeMap<u16, u64>>,
}

impl Metrics {
    pub fn add_generated(&self, n: usize) {
        self.generated.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn add_prompt(&self, n: usize, reused: usize) {
        self.prompt.fetch_add(n as u64, Ordering::Relaxed);
        self.prompt_reused
            .fetch_add(reused as u64, Ordering::Relaxed);
    }

    pub fn add_decode(&self, tokens: usize, secs: f64) {
        self.decoded.fetch_add(tokens as u64, Ordering::Relaxed);
        self.decode_us
            .fetch_add((secs * 1e6) as u64, Ordering::Relaxed);
        if tokens > 0 && secs > 0.0 {
            self.last_rate
                .store((tokens as f64 / secs).to_bits(), Ordering::Relaxed);
        }
    }

    pub fn add_drafts(&self, drafted: usize, accepted: usize) {
        self.drafted.fetch_add(drafted as u64, Ordering::Relaxed);
        self.accepted.fetch_add(accepted as u64, Ordering::Relaxed);
    }

    pub fn count_status(&self, status: u16) {
        let mut m = self.by_status.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(status).or_default() += 1;
    }

    /// Everything, as Prometheus text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        metric(
            "ingot_tokens_generated_total",
            "counter",
            "Tokens sampled for completions.",
            load(&self.generated),
        );
        metric(
            "ingot_prompt_tokens_total",
            "counter",
            "Prompt tokens of the jobs run.",
            load(&self.prompt),
        );
        metric(
            "ingot_prompt_tokens_reused_total",
            "counter",
            "Prompt tokens taken from the KV cache (common prefix with the previous job).",
            load(&self.prompt_reused),
        );
        metric(
            "ingot_decode_seconds_total",
            "counter",
            "Time spent decoding after the prefill.",
            format!("{}", self.decode_us.load(Ordering::Relaxed) as f64 / 1e6),
        );
        let decoded = self.decoded.load(Ordering::Relaxed) as f64;
        let secs = self.decode_us.load(Ordering::Relaxed) as f64 / 1e6;
        metric(
            "ingot_tokens_per_second",
            "gauge",
            "Decode rate over all jobs so far.",
            format!("{}", if secs > 0.0 { decoded / secs } else { 0.0 }),
        );
        metric(
            "ingot_last_tokens_per_second",
            "gauge",
            "Decode rate of the last finished job.",
            format!("{}", f64::from_bits(self.last_rate.load(Ordering::Relaxed))),
        );
        metric(
            "ingot_drafts_total",
            "counter",
            "NextN/MTP draft tokens verified (--draft mtp).",
            load(&self.drafted),
        );
        metric(
            "ingot_drafts_accepted_total",
            "counter",
            "NextN/MTP draft tokens the verify step accepted.",
            load(&self.accepted),
        );
        metric(
            "ingot_queue_depth",
            "gauge",
            "Requests waiting for the decoder.",
            self.queue_depth.load(Ordering::Relaxed).to_string(),
        );
        metric(
            "ingot_busy",
            "gauge",
            "1 while the decoder runs a request.",
            self.busy.load(Ordering::Relaxed).to_string(),
        );
        metric(
            "ingot_requests_cancelled_total",
            "counter",
            "Generations stopped because the client went away.",
            load(&self.cancelled),
        );
        let _ = writeln!(
            out,
            "# HELP ingot_requests_total HTTP responses by status.\n# TYPE ingot_requests_total counter"
        );
        let m = self.by_status.lock().unwrap_or_else(|e| e.into_inner());
        for (status, n) in m.iter() {
            let _ = writeln!(out, "ingot_requests_total{{status=\"{status}\"}} {n}");
        }
        out
    }
}
