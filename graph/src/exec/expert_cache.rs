//! The host side of a plan's expert cache (issue 18): after each step, read every MoE layer's selection,
//! run the layer's policy ([`LayerCache`], the same code `ingot replay` runs over a trace), copy each
//! admitted expert's slabs into the VRAM slot it takes, and point the slot tables at the new homes. The
//! kernels of the next step then read hits from VRAM and misses from host-mapped memory.
//!
//! Written against [`SlotMemory`] (addresses and copies), so every executor shares it.

use ingot_abi::launch::ExpertSelection;
use ingot_model::expert_cache::{LayerCache, Policy};

use crate::buffer::BufferKind;
use crate::error::ExecError;
use crate::plan::{ExpertCachePlan, Plan};

/// The memory operations the cache needs from an executor, on device addresses.
pub trait SlotMemory {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), ExecError>;
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ExecError>;
    /// Copies `bytes` from `src` (host-mapped) to `dst` (a VRAM slot).
    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<(), ExecError>;
}

/// One routed tensor's table, with the addresses of the tensor and of its slots.
struct Table {
    table: u64,
    weight: u64,
    pool: u64,
    slab: u64,
}

impl Table {
    /// Where expert `e`'s slab lives: slot `slot` of the pool, or the host-mapped tensor.
    fn home(&self, e: u32, slot: Option<usize>) -> u64 {
        match slot {
            Some(s) => self.pool + s as u64 * self.slab,
            None => self.weight + e as u64 * self.slab,
        }
    }

    /// Writes every entry of the table from `slot_of` (expert -> slot).
    fn write(&self, slot_of: &[Option<usize>], mem: &mut impl SlotMemory) -> Result<(), ExecError> {
        let entries: Vec<u64> = (0..slot_of.len() as u32)
            .map(|e| self.home(e, slot_of[e as usize]))
            .collect();
        mem.write(self.table, bytemuck::cast_slice(&entries))
    }
}

struct Layer {
    cache: LayerCache,
    /// The slot each expert holds.
    slot_of: Vec<Option<usize>>,
    free: Vec<usize>,
    selection: u64,
    tables: Vec<Table>,
    /// Cache-aware routing: the selection bias's address and the model's own bias (or zeros).
    bias: Option<(u64, Vec<f32>)>,
}

/// The live expert cache of one executor.
pub struct ExpertCache {
    slots: usize,
    policy: Policy,
    n_used: usize,
    step: u64,
    layers: Vec<Layer>,
    route_bonus: f32,
    /// The last step's selections, `n_used` (expert, weight) pairs per MoE layer in layer order.
    routing: Vec<(u32, f32)>,
    /// Expert uses found in a slot, and not, over every step so far.
    hits: u64,
    misses: u64,
}

impl ExpertCache {
    /// The cache of `plan` (which must have one), with `addr(buffer)` the executor's address of each
    /// buffer; points every table entry at the host-mapped tensor (all slots free).
    pub fn new(
        plan: &Plan,
        addr: impl Fn(crate::BufId) -> u64,
        mem: &mut impl SlotMemory,
    ) -> Result<Self, ExecError> {
        let p: &ExpertCachePlan = plan
            .expert_cache
            .as_ref()
            .ok_or_else(|| ExecError::ExpertCache("the plan has none".into()))?;
        if p.policy == Policy::Belady {
            return Err(ExecError::ExpertCache(
                "the belady policy needs the future of the routing: it is for `ingot replay`; \
                 use lru, lfu or ema"
                    .into(),
            ));
        }
        let mut layers = Vec::with_capacity(p.layers.len());
        for l in &p.layers {
            let mut tables = Vec::with_capacity(l.tables.len());
            for &t in &l.tables {
                let BufferKind::ExpertTable {
                    weight, pool, slab, ..
                } = plan.buffer(t).kind
                else {
                    return Err(ExecError::ExpertCache(format!(
                        "buffer {} is not a slot table",
                        plan.buffer(t).name
                    )));
                };
                let t = Table {
                    table: addr(t),
                    weight: addr(weight),
                    pool: addr(pool),
                    slab,
                };
                t.write(&vec![None; p.n_expert], mem)?;
                tables.push(t);
            }
            let bias = match l.route_bias {
                None => None,
                Some(b) => {
                    let mut base = vec![0f32; p.n_expert];
                    if let Some(src) = b.base {
                        mem.read(addr(src), bytemuck::cast_slice_mut(&mut base))?;
                    }
                    mem.write(addr(b.buf), bytemuck::cast_slice(&base))?;
                    Some((addr(b.buf), base))
                }
            };
            layers.push(Layer {
                cache: LayerCache::new(p.n_expert),
                slot_of: vec![None; p.n_expert],
                free: (0..p.slots).rev().collect(),
                selection: addr(l.selection),
                tables,
                bias,
            });
        }
        Ok(ExpertCache {
            slots: p.slots,
            policy: p.policy,
            n_used: p.n_expert_used,
            step: 0,
            layers,
            route_bonus: p.route_bonus,
            routing: Vec::new(),
            hits: 0,
            misses: 0,
        })
    }

    /// After a step: reads every layer's selection, runs the policy and moves the admitted experts
    /// into their slots.
    pub fn update(&mut self, mem: &mut impl SlotMemory) -> Result<(), ExecError> {
        self.routing.clear();
        for l in &mut self.layers {
            let mut sel = ExpertSelection::default();
            mem.read(l.selection, bytemuck::bytes_of_mut(&mut sel))?;
            let mut used: Vec<u32> = Vec::with_capacity(self.n_used);
            for k in 0..self.n_used {
                let e = sel.ids[k];
                if e as usize >= l.slot_of.len() {
                    return Err(ExecError::ExpertCache(format!(
                        "the router chose expert {e} of {}",
                        l.slot_of.len()
                    )));
                }
                self.routing.push((e, sel.weights[k]));
                if !used.contains(&e) {
                    used.push(e);
                }
            }
            let out = l.cache.step(&used, self.step, self.policy, self.slots);
            self.hits += out.hits;
            self.misses += out.misses;
            let admitted_any = !out.admitted.is_empty();
            for (e, replaced) in out.admitted {
                let slot = match replaced {
                    Some(v) => l.slot_of[v as usize].take(),
                    None => l.free.pop(),
                }
                .ok_or_else(|| ExecError::ExpertCache("no slot for an admitted expert".into()))?;
                for t in &l.tables {
                    mem.copy(t.home(e, Some(slot)), t.home(e, None), t.slab)?;
                }
                l.slot_of[e as usize] = Some(slot);
            }
            // One write per table and step (each is a synchronising copy on a GPU).
            if admitted_any {
                for t in &l.tables {
                    t.write(&l.slot_of, mem)?;
                }
            }
            if let Some((at, base)) = &l.bias {
                let biased: Vec<f32> = base
                    .iter()
                    .zip(&l.slot_of)
                    .map(|(&b, s)| if s.is_some() { b + self.route_bonus } else { b })
                    .collect();
                mem.write(*at, bytemuck::cast_slice(&biased))?;
            }
        }
        self.step += 1;
        Ok(())
    }

    /// Share of the expert uses so far that found their expert in a VRAM slot.
    pub fn hit_rate(&self) -> f64 {
        ingot_model::expert_cache::hit_rate(self.hits, self.misses)
    }

    /// The last step's routing: `n_expert_used` (expert, weight) pairs per MoE layer, in layer order.
    pub fn routing(&self) -> &[(u32, f32)] {
        &self.routing
    }
}
