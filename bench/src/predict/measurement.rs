//! What `ingot plan --measure` measured on a GPU, as data: the step's summary and the per-kernel
//! sums ([`Measurement`], [`Family`]), printed under the plan table and written to its JSON.
//! [`super::measured::attach`] fills them; the table holds them. A module of its own so that
//! the table and the measuring code each depend on it and not on each other.

use std::fmt;

use serde::Serialize;

/// What was measured, for the summary lines and the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub device: String,
    /// Repetitions the node medians are taken over.
    pub reps: usize,
    /// Repetitions whose host enqueueing outlasted the filler (node times may include
    /// launch gaps there; left out of the medians when any other repetition was clean).
    pub host_bound_reps: usize,
    /// Sum over the nodes of their median time, seconds.
    pub node_sum_s: f64,
    /// Median time of one graph replay (back-to-back replays, as greedy decoding runs them),
    /// seconds; `None` when no graph was captured (`INGOT_EAGER=1`).
    pub graph_step_s: Option<f64>,
    /// Graph replays per sample of `graph_step_s`.
    pub graph_replays: usize,
    /// Median time of one step launched node by node with a synchronisation after each
    /// (`INGOT_EAGER=1` mode), seconds.
    pub eager_step_s: Option<f64>,
    /// The prediction's step time, when a card was given.
    pub predicted_step_s: Option<f64>,
    /// Per kernel name, largest measured sum first.
    pub families: Vec<Family>,
}

/// The nodes of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct Family {
    pub kernel: String,
    pub count: usize,
    /// Sum of the predicted node times, seconds (`None` without a card).
    pub predicted_s: Option<f64>,
    /// Sum of the measured node medians, seconds.
    pub measured_s: f64,
    /// measured / predicted.
    pub ratio: Option<f64>,
}

fn us(s: Option<f64>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.1}", s * 1e6))
}

impl fmt::Display for Measurement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ratio = |m: Option<f64>| match (m, self.predicted_step_s) {
            (Some(m), Some(p)) if p > 0.0 => format!(" ({:.3}x predicted)", m / p),
            _ => String::new(),
        };
        writeln!(
            f,
            "MEASURED on {} (median of {} reps{}): node sum {} us{}; graph replay {} us per token{} \
             (median of {}-replay runs); eager (sync after each node) {} us per token{}",
            self.device,
            self.reps,
            if self.host_bound_reps > 0 {
                format!(
                    "; {} rep(s) host-bound, node times may include launch gaps",
                    self.host_bound_reps
                )
            } else {
                String::new()
            },
            us(Some(self.node_sum_s)),
            ratio(Some(self.node_sum_s)),
            us(self.graph_step_s),
            ratio(self.graph_step_s),
            self.graph_replays,
            us(self.eager_step_s),
            ratio(self.eager_step_s),
        )?;
        write!(
            f,
            "{:<28} {:>5} {:>13} {:>13} {:>9}",
            "kernel", "nodes", "predicted us", "measured us", "meas/pred"
        )?;
        for fam in &self.families {
            write!(
                f,
                "\n{:<28} {:>5} {:>13} {:>13} {:>9}",
                fam.kernel,
                fam.count,
                us(fam.predicted_s),
                us(Some(fam.measured_s)),
                fam.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}"))
            )?;
        }
        Ok(())
    }
}
