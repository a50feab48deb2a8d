//! The expert cache of one MoE layer (routed experts beyond VRAM): a fixed number of VRAM slots per
//! layer, filled by demand. One implementation serves `ingot replay` (over a recorded trace) and
//! the graph executors' slot tables (live), so what the replay predicts is what the executors do.
//!
//! A step uses a set of distinct experts. Hits are the ones resident before it, misses the rest
//! (read through from host memory during the step). Then every missed expert is admitted, evicting
//! the policy's victim among the residents the step did not use; an expert the step used is never
//! evicted for another of the same step, so a step whose set exceeds the capacity leaves the excess
//! uncached.

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    Lru,
    Lfu,
    /// Exponential moving average of use with this decay per step (0 < decay < 1).
    Ema(f64),
    Belady,
}

impl Policy {
    pub fn name(&self) -> String {
        match self {
            Policy::Lru => "lru".into(),
            Policy::Lfu => "lfu".into(),
            Policy::Ema(d) => format!("ema (decay {d})"),
            Policy::Belady => "belady".into(),
        }
    }
}

/// `hits / (hits + misses)`, 0 before any use.
pub fn hit_rate(hits: u64, misses: u64) -> f64 {
    match hits + misses {
        0 => 0.0,
        n => hits as f64 / n as f64,
    }
}

/// What one step did: counts, and the experts admitted in order with the expert each one replaced
/// (`None`: it took a free slot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepOutcome {
    pub hits: u64,
    pub misses: u64,
    pub admitted: Vec<(u32, Option<u32>)>,
}

/// One MoE layer's expert cache: which experts hold a slot, and what the policy ranks them by.
pub struct LayerCache {
    resident: Vec<bool>,
    count: usize,
    last_used: Vec<u64>,
    uses: Vec<u64>,
    ema: Vec<f64>,
    /// For Belady: the steps at which each expert is used, and a cursor into each list.
    future: Vec<Vec<u64>>,
    cursor: Vec<usize>,
}

impl LayerCache {
    pub fn new(n_expert: usize) -> Self {
        LayerCache {
            resident: vec![false; n_expert],
            count: 0,
            last_used: vec![0; n_expert],
            uses: vec![0; n_expert],
            ema: vec![0.0; n_expert],
            future: vec![Vec::new(); n_expert],
            cursor: vec![0; n_expert],
        }
    }

    /// The step after `now` at which `e` is next used (`u64::MAX`: never).
    fn next_use(&mut self, e: usize, now: u64) -> u64 {
        let list = &self.future[e];
        let c = &mut self.cursor[e];
        while *c < list.len() && list[*c] <= now {
            *c += 1;
        }
        list.get(*c).copied().unwrap_or(u64::MAX)
    }

    /// Records that step `step` uses expert `e` (Belady's MIN needs the future); call in step
    /// order.
    pub fn will_use(&mut self, e: u32, step: u64) {
        self.future[e as usize].push(step);
    }

    /// Whether `e` holds a slot.
    pub fn is_resident(&self, e: u32) -> bool {
        self.resident[e as usize]
    }

    /// Runs step `now`, which uses the distinct experts `used`: counts its hits and misses, then
    /// admits each missed expert (evicting the policy's victim among the residents the step did not
    /// use, while the `capacity` slots are full).
    pub fn step(&mut self, used: &[u32], now: u64, policy: Policy, capacity: usize) -> StepOutcome {
        let hits = used.iter().filter(|&&e| self.resident[e as usize]).count() as u64;
        let misses = used.len() as u64 - hits;
        if let Policy::Ema(decay) = policy {
            // Every expert decays every step, resident or not.
            self.ema.iter_mut().for_each(|v| *v *= decay);
            for &e in used {
                self.ema[e as usize] += 1.0 - decay;
            }
        }
        for &e in used {
            self.last_used[e as usize] = now + 1;
            self.uses[e as usize] += 1;
        }
        let mut admitted = Vec::new();
        for &e in used {
            if self.resident[e as usize] {
                continue;
            }
            let mut replaced = None;
            if self.count == capacity {
                match self.victim(used, now, policy) {
                    Some(v) => {
                        self.resident[v] = false;
                        self.count -= 1;
                        replaced = Some(v as u32);
                    }
                    // Every resident expert is used by this step: the rest stay uncached.
                    None => break,
                }
            }
            self.resident[e as usize] = true;
            self.count += 1;
            admitted.push((e, replaced));
        }
        StepOutcome {
            hits,
            misses,
            admitted,
        }
    }

    /// The resident expert not in `used` that `policy` evicts first.
    fn victim(&mut self, used: &[u32], now: u64, policy: Policy) -> Option<usize> {
        let mut best: Option<(usize, (f64, f64))> = None;
        for e in 0..self.resident.len() {
            if !self.resident[e] || used.contains(&(e as u32)) {
                continue;
            }
            // Smaller key = evicted first.
            let key = match policy {
                Policy::Lru => (self.last_used[e] as f64, 0.0),
                Policy::Lfu => (self.uses[e] as f64, self.last_used[e] as f64),
                Policy::Ema(_) => (self.ema[e], self.last_used[e] as f64),
                Policy::Belady => (-(self.next_use(e, now) as f64), 0.0),
            };
            if best.is_none_or(|(_, b)| key < b) {
                best = Some((e, key));
            }
        }
        best.map(|(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The EMA decays every expert every step, resident or not: expert 0, used 5 times and then
    /// evicted by 10 uses of expert 1 (one slot), holds `(1 − d⁵)·d¹⁰`, not the `1 − d⁵` it had
    /// when it left the cache.
    #[test]
    fn ema_decays_experts_outside_the_cache() {
        let d = 0.9;
        let mut cache = LayerCache::new(2);
        for s in 0..5 {
            cache.step(&[0], s, Policy::Ema(d), 1);
        }
        for s in 5..15 {
            cache.step(&[1], s, Policy::Ema(d), 1);
        }
        assert!(!cache.resident[0] && cache.resident[1]);
        let want = (1.0 - d.powi(5)) * d.powi(10);
        assert!(
            (cache.ema[0] - want).abs() < 1e-12,
            "{} vs {want}",
            cache.ema[0]
        );
        assert!((cache.ema[1] - (1.0 - d.powi(10))).abs() < 1e-12);
    }
}
