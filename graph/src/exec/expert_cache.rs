//! The host side of a plan's expert cache (routed experts beyond VRAM): after each step, read every
//! MoE layer's selection, run the layer's policy ([`LayerCache`], the same code `ingot replay` runs
//! over a trace), copy each admitted expert's slabs into the VRAM slot it takes, and point the slot
//! tables at the new homes. The kernels of the next step then read hits from VRAM and misses from
//! host-mapped memory.
//!
//! The copies run off the decode stream ([`SlotMemory::copy_slabs`]: a GPU's copy engine, while the
//! next steps decode), so a table points an expert at its slot only once the copy into it has
//! landed; until then the kernels read the expert from host memory, which always holds every
//! expert. Invariants, per layer, at every point the decode stream can see:
//! * a table entry names a slot only if that expert's copy into that slot has landed
//!   (`Layer::visible`);
//! * a slot is overwritten only after the table writes that moved its previous expert back to host
//!   memory (the copies are ordered after everything enqueued on the decode stream before them),
//!   and is named again only after the last copy into it has landed.
//!
//! Where copies land at once (the simulator), an expert admitted after step `t` is read from VRAM
//! from step `t + 1` on, which is what `ingot replay` counts.
//!
//! Written against [`SlotMemory`] (addresses and copies), so every executor shares it.

use ingot_abi::launch::ExpertSelection;
use ingot_model::expert_cache::{LayerCache, Policy};

use crate::buffer::BufferKind;
use crate::error::ExecError;
use crate::plan::{ExpertCachePlan, Plan};

/// One slab to move: `bytes` from `src` (host-mapped) to `dst` (a VRAM slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabCopy {
    pub dst: u64,
    pub src: u64,
    pub bytes: u64,
}

/// The memory operations the cache needs from an executor, on device addresses.
pub trait SlotMemory {
    /// A point in the copies' order the host can poll.
    type Fence;
    /// Reads what the decode stream has written (waits for it).
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), ExecError>;
    /// Writes, ordered before the next step on the decode stream.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ExecError>;
    /// Starts `copies` off the decode stream, after everything enqueued on it so far, in order
    /// after earlier calls' copies; returns the fence they complete at.
    fn copy_slabs(&mut self, copies: &[SlabCopy]) -> Result<Self::Fence, ExecError>;
    /// Whether the copies before `fence` have landed (never waits).
    fn landed(&mut self, fence: &Self::Fence) -> Result<bool, ExecError>;
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
    fn write<M: SlotMemory>(
        &self,
        slot_of: &[Option<usize>],
        mem: &mut M,
    ) -> Result<(), ExecError> {
        let entries: Vec<u64> = (0..slot_of.len() as u32)
            .map(|e| self.home(e, slot_of[e as usize]))
            .collect();
        mem.write(self.table, bytemuck::cast_slice(&entries))
    }
}

struct Layer {
    cache: LayerCache,
    /// The slot each expert holds or is being copied into (the policy's view).
    slot_of: Vec<Option<usize>>,
    /// The slot each expert's table entry names: `slot_of` once its copy has landed, else none.
    visible: Vec<Option<usize>>,
    free: Vec<usize>,
    selection: u64,
    tables: Vec<Table>,
    /// Cache-aware routing: the selection bias's address and the model's own bias (or zeros).
    bias: Option<(u64, Vec<f32>)>,
}

/// The copies started by one update, `(layer, expert, slot)`, and where they complete.
struct Batch<F> {
    fence: F,
    moves: Vec<(usize, u32, usize)>,
}

/// The live expert cache of one executor, whose memory's fences are `F`.
pub struct ExpertCache<F> {
    slots: usize,
    policy: Policy,
    n_used: usize,
    step: u64,
    layers: Vec<Layer>,
    route_bonus: f32,
    /// The last step's selections, `n_used` (expert, weight) pairs per MoE layer in layer order.
    routing: Vec<(u32, f32)>,
    /// Expert uses read from a VRAM slot, and from host memory, over every step so far.
    hits: u64,
    misses: u64,
    /// Copies started and not yet seen landed, oldest first.
    in_flight: std::collections::VecDeque<Batch<F>>,
}

impl<F> ExpertCache<F> {
    /// The cache of `plan` (which must have one), with `addr(buffer)` the executor's address of
    /// each buffer; points every table entry at the host-mapped tensor (all slots free).
    pub fn new(
        plan: &Plan,
        addr: impl Fn(crate::BufId) -> u64,
        mem: &mut impl SlotMemory<Fence = F>,
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
                    weight,
                    pool: Some(pool),
                    slab,
                    ..
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
                visible: vec![None; p.n_expert],
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
            in_flight: Default::default(),
        })
    }

    /// After a step: reads every layer's selection, counts where its experts were read from, runs
    /// the policy, points evicted experts back at host memory, starts the admitted experts' copies,
    /// and points the tables at every copy that has landed.
    pub fn update(&mut self, mem: &mut impl SlotMemory<Fence = F>) -> Result<(), ExecError> {
        self.routing.clear();
        let mut moves = Vec::new();
        let mut dirty = vec![false; self.layers.len()];
        for (il, l) in self.layers.iter_mut().enumerate() {
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
            // What the step's kernels read: the tables as the last update left them.
            let in_vram = used
                .iter()
                .filter(|&&e| l.visible[e as usize].is_some())
                .count() as u64;
            self.hits += in_vram;
            self.misses += used.len() as u64 - in_vram;
            let out = l.cache.step(&used, self.step, self.policy, self.slots);
            for (e, replaced) in out.admitted {
                let slot = match replaced {
                    Some(v) => {
                        dirty[il] |= l.visible[v as usize].take().is_some();
                        l.slot_of[v as usize].take()
                    }
                    None => l.free.pop(),
                }
                .ok_or_else(|| ExecError::ExpertCache("no slot for an admitted expert".into()))?;
                l.slot_of[e as usize] = Some(slot);
                moves.push((il, e, slot));
            }
        }
        self.step += 1;
        // Evicted experts leave the tables before any copy can overwrite their slots.
        self.write_tables(&mut dirty, mem)?;
        if !moves.is_empty() {
            let copies: Vec<SlabCopy> = moves
                .iter()
                .flat_map(|&(il, e, slot)| {
                    self.layers[il].tables.iter().map(move |t| SlabCopy {
                        dst: t.home(e, Some(slot)),
                        src: t.home(e, None),
                        bytes: t.slab,
                    })
                })
                .collect();
            let fence = mem.copy_slabs(&copies)?;
            self.in_flight.push_back(Batch { fence, moves });
        }
        while let Some(b) = self.in_flight.front() {
            if !mem.landed(&b.fence)? {
                break;
            }
            let landed = self
                .in_flight
                .pop_front()
                .map_or_else(Vec::new, |b| b.moves);
            for (il, e, slot) in landed {
                // An expert evicted before its copy landed keeps its host home, and a slot that a
                // later copy is still writing is named only once that copy lands.
                let rewritten = self
                    .in_flight
                    .iter()
                    .flat_map(|b| &b.moves)
                    .any(|&(jl, _, s)| (jl, s) == (il, slot));
                let l = &mut self.layers[il];
                if l.slot_of[e as usize] == Some(slot) && !rewritten {
                    l.visible[e as usize] = Some(slot);
                    dirty[il] = true;
                }
            }
        }
        self.write_tables(&mut dirty, mem)?;
        for l in &self.layers {
            if let Some((at, base)) = &l.bias {
                let biased: Vec<f32> = base
                    .iter()
                    .zip(&l.visible)
                    .map(|(&b, s)| if s.is_some() { b + self.route_bonus } else { b })
                    .collect();
                mem.write(*at, bytemuck::cast_slice(&biased))?;
            }
        }
        Ok(())
    }

    /// Writes the tables of every `dirty` layer from its `visible` slots (one write per table: each
    /// is a synchronising copy on a GPU) and clears the marks.
    fn write_tables(
        &self,
        dirty: &mut [bool],
        mem: &mut impl SlotMemory<Fence = F>,
    ) -> Result<(), ExecError> {
        for (l, d) in self.layers.iter().zip(dirty.iter_mut()) {
            if std::mem::take(d) {
                for t in &l.tables {
                    t.write(&l.visible, mem)?;
                }
            }
        }
        Ok(())
    }

    /// Admitted experts whose copies have not been seen landed yet (0 where copies land at once).
    pub fn copies_in_flight(&self) -> usize {
        self.in_flight.iter().map(|b| b.moves.len()).sum()
    }

    /// Share of the expert uses so far that found their expert in a VRAM slot.
    pub fn hit_rate(&self) -> f64 {
        ingot_model::expert_cache::hit_rate(self.hits, self.misses)
    }

    /// The last step's routing: `n_expert_used` (expert, weight) pairs per MoE layer, in layer
    /// order.
    pub fn routing(&self) -> &[(u32, f32)] {
        &self.routing
    }
}
