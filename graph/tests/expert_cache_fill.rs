//! The expert cache's slot fills when copies land late (a GPU's copy stream), on a memory that
//! records every table write and copy: a table never names a slot before the copy of that expert
//! into it has landed (nor while a later copy is still writing it), and no copy starts into a slot
//! a table still names. With copies that land at once (the simulator) the tables name every
//! admitted expert from the next step on.

mod support;

use std::collections::HashMap;

use ingot_abi::launch::ExpertSelection;
use ingot_graph::exec::expert_cache::{ExpertCache, SlabCopy, SlotMemory};
use ingot_graph::{build_plan, BufId, BufferKind, ExpertCacheOptions, Plan, PlanOptions};
use ingot_model::expert_cache::Policy;
use ingot_synth::{Layout, Preset, QuantMix};

/// Where buffer `b` lives in the fake address space: far apart, so ranges never meet.
fn addr(b: BufId) -> u64 {
    (b.0 as u64 + 1) << 32
}

/// One copy into a slot: what it brings, and the update after which it lands.
#[derive(Clone, Copy)]
struct Fill {
    src: u64,
    lands_at: u64,
}

/// A memory whose copies land `lag` updates after they start.
struct LateMemory {
    lag: u64,
    /// Updates so far (the test advances it before each).
    now: u64,
    /// Everything written, by start address (tables, biases).
    written: HashMap<u64, Vec<u8>>,
    /// What the selection reads return, by address.
    selections: HashMap<u64, ExpertSelection>,
    /// Per slot address, every copy into it in order.
    fills: HashMap<u64, Vec<Fill>>,
    /// Table address -> (pool address, slab bytes, slots), to recognise slot entries.
    tables: Vec<(u64, u64, u64, u64)>,
    copies_started: usize,
}

impl LateMemory {
    /// Every table entry that names a slot: `(table, expert, slot address)`.
    fn slot_entries(&self) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        for &(table, pool, slab, slots) in &self.tables {
            let Some(bytes) = self.written.get(&table) else {
                continue;
            };
            for (e, entry) in bytemuck::cast_slice::<u8, u64>(bytes).iter().enumerate() {
                if (pool..pool + slots * slab).contains(entry) {
                    out.push((table, e as u64, *entry));
                }
            }
        }
        out
    }
}

impl SlotMemory for LateMemory {
    type Fence = u64;

    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), ingot_graph::ExecError> {
        let sel = self.selections.get(&addr).copied().unwrap_or_default();
        out.copy_from_slice(&bytemuck::bytes_of(&sel)[..out.len()]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ingot_graph::ExecError> {
        self.written.insert(addr, data.to_vec());
        Ok(())
    }

    fn copy_slabs(&mut self, copies: &[SlabCopy]) -> Result<u64, ingot_graph::ExecError> {
        let named: Vec<u64> = self.slot_entries().iter().map(|&(_, _, a)| a).collect();
        let lands_at = self.now + self.lag;
        for c in copies {
            assert!(
                !named.contains(&c.dst),
                "a copy starts into slot {:#x} while a table names it",
                c.dst
            );
            self.fills.entry(c.dst).or_default().push(Fill {
                src: c.src,
                lands_at,
            });
        }
        self.copies_started += copies.len();
        Ok(lands_at)
    }

    fn landed(&mut self, fence: &u64) -> Result<bool, ingot_graph::ExecError> {
        Ok(*fence <= self.now)
    }
}

fn cached_plan(policy: Policy) -> Plan {
    let h = support::header(Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
    let opts = PlanOptions {
        expert_cache: Some(ExpertCacheOptions {
            slots: 8,
            policy,
            route_bonus: 0.0,
        }),
        ..PlanOptions::for_ctx(64)
    };
    build_plan(&h, opts).expect("tiny plan with an expert cache")
}

/// Runs `steps` updates with copies landing `lag` updates late, checking the invariants after each;
/// returns the hit rate.
fn run(plan: &Plan, lag: u64, steps: u64) -> f64 {
    let cache_plan = plan.expert_cache.as_ref().unwrap();
    let mut mem = LateMemory {
        lag,
        now: 0,
        written: HashMap::new(),
        selections: HashMap::new(),
        fills: HashMap::new(),
        tables: Vec::new(),
        copies_started: 0,
    };
    let mut weights = HashMap::new();
    for l in &cache_plan.layers {
        for &t in &l.tables {
            let BufferKind::ExpertTable {
                weight,
                pool: Some(pool),
                slab,
                ..
            } = plan.buffer(t).kind
            else {
                panic!("not a slot table");
            };
            mem.tables
                .push((addr(t), addr(pool), slab, cache_plan.slots as u64));
            weights.insert(addr(t), (addr(weight), slab));
        }
    }
    let mut cache = ExpertCache::new(plan, addr, &mut mem).unwrap();
    let (n_expert, k) = (cache_plan.n_expert as u64, cache_plan.n_expert_used);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for step in 0..steps {
        mem.now = step;
        // Skewed routing (experts near 0 most often), so the cache both hits and evicts.
        for (il, l) in cache_plan.layers.iter().enumerate() {
            let mut sel = ExpertSelection::default();
            let mut chosen = Vec::new();
            while chosen.len() < k {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let r = (seed % 1000) as f64 / 1000.0;
                let e = ((r * r * n_expert as f64) as u64 + il as u64) % n_expert;
                if !chosen.contains(&(e as u32)) {
                    chosen.push(e as u32);
                }
            }
            sel.ids[..k].copy_from_slice(&chosen);
            mem.selections.insert(addr(l.selection), sel);
        }
        cache.update(&mut mem).unwrap();
        // Every slot a table names holds that expert: its last copy brought it and has landed.
        for (table, e, slot) in mem.slot_entries() {
            let (weight, slab) = weights[&table];
            let last = *mem.fills[&slot].last().expect("a named slot was filled");
            assert_eq!(
                last.src,
                weight + e * slab,
                "lag {lag}, step {step}: slot {slot:#x} named for expert {e} holds another"
            );
            assert!(
                last.lands_at <= step,
                "lag {lag}, step {step}: expert {e} named before its copy landed"
            );
        }
        if lag == 0 {
            assert_eq!(cache.copies_in_flight(), 0);
        }
    }
    assert!(
        mem.copies_started > 0,
        "lag {lag}: the cache never admitted"
    );
    cache.hit_rate()
}

#[test]
fn tables_name_a_slot_only_once_its_copy_has_landed() {
    for policy in [Policy::Lru, Policy::Lfu, Policy::Ema(0.9)] {
        let plan = cached_plan(policy);
        let at_once = run(&plan, 0, 200);
        let late = run(&plan, 2, 200);
        let later = run(&plan, 5, 200);
        println!(
            "{policy:?}: hit rate {at_once:.3} at once, {late:.3} two steps late, {later:.3} five"
        );
        assert!(at_once > 0.2, "{policy:?}: the skewed routing should hit");
        // Late copies can only delay hits.
        assert!(later <= late && late <= at_once, "{policy:?}");
    }
}
