//! The MoE kernels with experts beyond VRAM: their expert tables (`ingot_abi::launch::moe`) name
//! some experts' VRAM slots (in any order) and the rest's host-mapped slabs. Each kernel must give
//! the output it gives through the identity table over the stacked tensor bit for bit, on every
//! backend (`slot_tables_equal_identity_tables`: ptx-sim in CI, the GPU in the device check, where
//! the host-mapped slabs really cross the host link); in ptx-sim, the bytes a launch fetches over
//! the link must also be exactly the slabs of the selected experts that are not in a slot: what
//! `ingot replay` charges a miss.

#![cfg(feature = "sim")]

mod support;

use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{ExpertSelection, KernelDesc, GATE_UP_MERGED, GATE_UP_SEPARATE};
use ingot_kernels::backend::cuda::CudaAccelerator;
use ingot_kernels::backend::sim::SimAccelerator;
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::FfnShape;
use ingot_kernels::{Accelerator, KArg};
use ptx_sim::{Arg, DevicePtr, LaunchConfig, LaunchStats, Module, Sim};
use support::moe_args;

fn weight_bytes(ty: GemvType, rows: usize, cols: usize) -> usize {
    rows * cols / ty.block_elems() * ty.block_bytes()
}

/// Pseudo-random bytes (the kernels' control flow does not depend on values; outputs are compared
/// bit for bit, so any values serve).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| ((i ^ seed).wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

const SHAPE: FfnShape = FfnShape {
    n_embd: 512,
    n_expert: 8,
    n_used: 3,
    ff: 256,
    ff_sh: 256,
};
/// Slot `s` holds expert `RESIDENT[s]`; the others stay in host memory.
const RESIDENT: [u32; 4] = [6, 1, 4, 7];
/// Selected experts: one resident (4), two not (2, 5).
const SELECTED: [u32; 3] = [2, 4, 5];

struct Experts {
    /// The identity table over the stacked tensor in device memory.
    stacked: DevicePtr,
    /// The slot table.
    table: DevicePtr,
    /// Bytes of one expert's slab.
    slab: usize,
}

/// One routed tensor, stacked and as slots + host copy + table.
fn experts(sim: &mut Sim, slab: usize, seed: u64) -> Experts {
    let data = bytes(slab * SHAPE.n_expert, seed);
    let stacked = sim.alloc(data.len()).unwrap();
    sim.write(stacked, &data).unwrap();
    let identity: Vec<u64> = (0..SHAPE.n_expert)
        .map(|e| stacked.offset((e * slab) as u64).0)
        .collect();
    let stacked = buf(sim, bytemuck::cast_slice(&identity));
    let host = sim.alloc_host_mapped(data.len()).unwrap();
    sim.write(host, &data).unwrap();
    let pool = sim.alloc(slab * RESIDENT.len()).unwrap();
    let mut table: Vec<u64> = (0..SHAPE.n_expert)
        .map(|e| host.offset((e * slab) as u64).0)
        .collect();
    for (s, &e) in RESIDENT.iter().enumerate() {
        let e = e as usize;
        sim.write(pool.offset((s * slab) as u64), &data[e * slab..][..slab])
            .unwrap();
        table[e] = pool.offset((s * slab) as u64).0;
    }
    let t = sim.alloc(8 * SHAPE.n_expert).unwrap();
    sim.write(t, bytemuck::cast_slice(&table)).unwrap();
    Experts {
        stacked,
        table: t,
        slab,
    }
}

/// Bytes the missed (selected, not resident) experts' slabs hold.
fn missed(slab: usize) -> u64 {
    let n = SELECTED.iter().filter(|e| !RESIDENT.contains(e)).count();
    (n * slab) as u64
}

fn buf(sim: &mut Sim, data: &[u8]) -> DevicePtr {
    let p = sim.alloc(data.len().max(4)).unwrap();
    sim.write(p, data).unwrap();
    p
}

fn launch(sim: &mut Sim, m: &Module, d: &KernelDesc, items: u32, args: &[Arg]) -> LaunchStats {
    let cfg = LaunchConfig {
        grid: d.grid(items),
        block: d.block,
        shared_bytes: d.shared_bytes,
    };
    sim.launch(m, d.name, cfg, args)
        .unwrap_or_else(|e| panic!("{}: {e}", d.name))
}

fn selection(sim: &mut Sim) -> DevicePtr {
    let mut sel = ExpertSelection::default();
    for (k, &e) in SELECTED.iter().enumerate() {
        sel.ids[k] = e;
        sel.weights[k] = 0.25 + k as f32 * 0.125;
    }
    buf(sim, bytemuck::bytes_of(&sel))
}

fn read(sim: &Sim, p: DevicePtr, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    sim.read(p, &mut v).unwrap();
    v
}

/// The gate/up kernel of routed type `ty` and shared type `ty_sh`, separate or merged, through
/// slot tables against the identity tables.
fn gate_up(m: &Module, (ty, ty_sh): (GemvType, GemvType), merged: bool) {
    let s = SHAPE;
    let mut sim = Sim::new();
    let n = s.n_embd;
    let x = buf(&mut sim, &bytes(n / QK8_1 * 36, 1));
    let sel = selection(&mut sim);
    let rows = weight_bytes(ty, s.ff, n);
    let (gate, up) = if merged {
        let g = experts(&mut sim, 2 * rows, 2);
        (g, None)
    } else {
        (experts(&mut sim, rows, 2), Some(experts(&mut sim, rows, 3)))
    };
    let sh = weight_bytes(ty_sh, s.ff_sh, n);
    let (gate_sh, up_sh) = (buf(&mut sim, &bytes(sh, 4)), buf(&mut sim, &bytes(sh, 5)));
    let act_len = s.act_bytes().unwrap();
    let d = GemvType::gate_up_mixed(ty, ty_sh).expect("kernel");
    let layout = if merged {
        GATE_UP_MERGED
    } else {
        GATE_UP_SEPARATE
    };
    let items = (s.n_used * s.ff + s.ff_sh) as u32;
    let mut run = |slots: bool| {
        let act = buf(&mut sim, &vec![0xFF; act_len]);
        let pick = |e: &Experts| if slots { e.table } else { e.stacked };
        let g = pick(&gate);
        let w = moe_args::GateUpWeights {
            gate: g,
            up: up.as_ref().map_or(g, pick),
            gate_sh,
            up_sh,
        };
        let args = moe_args::gate_up(x, sel, &w, act, &s, layout);
        let stats = launch(&mut sim, m, d, items, &args);
        (read(&sim, act, act_len), stats)
    };
    let (want, plain) = run(false);
    let (got, stats) = run(true);
    let what = format!("{} (merged {merged})", d.name);
    assert!(got == want, "{what}: slot tables give another output");
    assert_eq!(plain.host_bytes_fetched, 0);
    let slabs = if merged { gate.slab } else { 2 * rows };
    assert_eq!(
        stats.host_bytes_fetched,
        missed(slabs),
        "{what}: bytes over the link"
    );
    assert!(stats.host_bytes_read >= stats.host_bytes_fetched);
    eprintln!(
        "{what}: {} B fetched over the link (2 missed experts), {} B requested",
        stats.host_bytes_fetched, stats.host_bytes_read
    );
}

fn down(m: &Module, routed: GemvType, shared: GemvType) {
    let s = SHAPE;
    let mut sim = Sim::new();
    let n = s.n_embd;
    let act = buf(&mut sim, &bytes(s.act_bytes().unwrap(), 6));
    let sel = selection(&mut sim);
    let down = experts(&mut sim, weight_bytes(routed, n, s.ff), 7);
    let dsh = buf(&mut sim, &bytes(weight_bytes(shared, n, s.ff_sh), 8));
    let resid = buf(&mut sim, &bytes(4 * n, 9));
    let d = GemvType::down(routed, shared).expect("kernel");
    let mut run = |slots: bool| {
        let y = buf(&mut sim, &vec![0xFF; 4 * n]);
        let routed = if slots { down.table } else { down.stacked };
        let args = moe_args::down(act, sel, (routed, dsh), (resid, y), &s);
        let stats = launch(&mut sim, m, d, n as u32, &args);
        (read(&sim, y, 4 * n), stats)
    };
    let (want, _) = run(false);
    let (got, stats) = run(true);
    assert!(got == want, "{}: slot tables give another output", d.name);
    assert_eq!(
        stats.host_bytes_fetched,
        missed(down.slab),
        "{}: bytes over the link",
        d.name
    );
}

#[test]
fn slot_tables_read_missed_experts_over_the_link() {
    if !support::sim_half_wanted() {
        return;
    }
    let m = ingot_kernels::backend::sim::module().expect("parse PTX");
    for ty in [GemvType::Q4K, GemvType::Q5_0, GemvType::Q8_0, GemvType::Q3K] {
        gate_up(m, (ty, ty), false);
        gate_up(m, (ty, ty), true);
    }
    for &pair in GemvType::MIXED_GATE_UP {
        gate_up(m, pair, false);
    }
    for (r, s) in [
        (GemvType::Q5_0, GemvType::Q4K),
        (GemvType::Q8_0, GemvType::Q6K),
        (GemvType::Q4K, GemvType::Q4K),
        (GemvType::Q3K, GemvType::Q3K),
        (GemvType::Iq2Xxs, GemvType::Q6K),
    ] {
        down(m, r, s);
    }
}

/// What a slot-table launch needs beyond plain buffers and their addresses: host-mapped memory,
/// kept alive by the returned handle.
trait SlotMemory: Accelerator {
    type Mapped;
    fn mapped(&mut self, data: &[u8]) -> (Self::Mapped, u64);
}

impl SlotMemory for SimAccelerator {
    type Mapped = ();
    fn mapped(&mut self, data: &[u8]) -> ((), u64) {
        let p = self.sim_mut().alloc_host_mapped(data.len()).unwrap();
        self.sim_mut().write(p, data).unwrap();
        ((), p.0)
    }
}

impl SlotMemory for CudaAccelerator {
    type Mapped = ingot_cuda::MappedBuffer;
    fn mapped(&mut self, data: &[u8]) -> (ingot_cuda::MappedBuffer, u64) {
        let mut m = self
            .gpu()
            .alloc_mapped(data.len())
            .expect("host-mapped memory");
        m.bytes_mut().copy_from_slice(data);
        let at = m.device_address();
        (m, at)
    }
}

/// One routed tensor on backend `B`: stacked with its identity table, and as VRAM slots +
/// host-mapped copy + slot table.
struct Routed<B: SlotMemory> {
    identity: B::Buf,
    table: B::Buf,
    _stacked: B::Buf,
    _pool: B::Buf,
    _host: B::Mapped,
}

fn upload_bytes<B: Accelerator>(b: &mut B, data: &[u8]) -> B::Buf {
    let buf = b.alloc(data.len().max(4)).expect("alloc");
    b.upload(&buf, data).expect("upload");
    buf
}

fn routed<B: SlotMemory>(b: &mut B, slab: usize, seed: u64) -> Routed<B> {
    let data = bytes(slab * SHAPE.n_expert, seed);
    let stacked = upload_bytes(b, &data);
    let stacked_at = b.address(&stacked);
    let identity: Vec<u64> = (0..SHAPE.n_expert)
        .map(|e| stacked_at + (e * slab) as u64)
        .collect();
    let identity = upload_bytes(b, bytemuck::cast_slice(&identity));
    let (host, host_at) = b.mapped(&data);
    let pool_bytes: Vec<u8> = RESIDENT
        .iter()
        .flat_map(|&e| data[e as usize * slab..][..slab].iter().copied())
        .collect();
    let pool = upload_bytes(b, &pool_bytes);
    let pool_at = b.address(&pool);
    let mut table: Vec<u64> = (0..SHAPE.n_expert)
        .map(|e| host_at + (e * slab) as u64)
        .collect();
    for (s, &e) in RESIDENT.iter().enumerate() {
        table[e as usize] = pool_at + (s * slab) as u64;
    }
    let table = upload_bytes(b, bytemuck::cast_slice(&table));
    Routed {
        identity,
        table,
        _stacked: stacked,
        _pool: pool,
        _host: host,
    }
}

fn selection_bytes() -> Vec<u8> {
    let mut sel = ExpertSelection::default();
    for (k, &e) in SELECTED.iter().enumerate() {
        sel.ids[k] = e;
        sel.weights[k] = 0.25 + k as f32 * 0.125;
    }
    bytemuck::bytes_of(&sel).to_vec()
}

/// Launches `d` over `items` work items and returns the first `n` bytes of `out` (which the
/// caller poisoned).
fn run_into<B: Accelerator>(
    b: &mut B,
    d: &KernelDesc,
    items: u32,
    args: &[KArg<'_, B::Buf>],
    out: &B::Buf,
    n: usize,
) -> Vec<u8> {
    b.launch(d.name, d.grid(items), d.block, d.shared_bytes, args)
        .unwrap_or_else(|e| panic!("{}: {e}", d.name));
    let mut v = vec![0u8; n];
    b.download(out, &mut v).expect("download");
    v
}

fn gate_up_on<B: SlotMemory>(b: &mut B, (ty, ty_sh): (GemvType, GemvType), merged: bool) {
    let s = SHAPE;
    let n = s.n_embd;
    let x = upload_bytes(b, &bytes(n / QK8_1 * 36, 1));
    let sel = upload_bytes(b, &selection_bytes());
    let rows = weight_bytes(ty, s.ff, n);
    let (gate, up) = if merged {
        (routed(b, 2 * rows, 2), None)
    } else {
        (routed(b, rows, 2), Some(routed(b, rows, 3)))
    };
    let sh = weight_bytes(ty_sh, s.ff_sh, n);
    let (gate_sh, up_sh) = (
        upload_bytes(b, &bytes(sh, 4)),
        upload_bytes(b, &bytes(sh, 5)),
    );
    let act_len = s.act_bytes().unwrap();
    let d = GemvType::gate_up_mixed(ty, ty_sh).expect("kernel");
    let layout = if merged {
        GATE_UP_MERGED
    } else {
        GATE_UP_SEPARATE
    };
    let items = (s.n_used * s.ff + s.ff_sh) as u32;
    let mut outputs = Vec::new();
    for slots in [false, true] {
        let act = upload_bytes(b, &vec![0xFF; act_len]);
        fn pick<B: SlotMemory>(r: &Routed<B>, slots: bool) -> &B::Buf {
            if slots {
                &r.table
            } else {
                &r.identity
            }
        }
        let g = pick(&gate, slots);
        let u = up.as_ref().map_or(g, |r| pick(r, slots));
        let args = [
            KArg::Buf(&x),
            KArg::Buf(&sel),
            KArg::Buf(g),
            KArg::Buf(u),
            KArg::Buf(&gate_sh),
            KArg::Buf(&up_sh),
            KArg::Buf(&act),
            KArg::U32(n as u32),
            KArg::U32(s.ff as u32),
            KArg::U32(s.n_used as u32),
            KArg::U32(s.ff_sh as u32),
            KArg::U32(s.n_expert as u32),
            KArg::U32(layout),
        ];
        outputs.push(run_into(b, d, items, &args, &act, act_len));
    }
    assert!(
        outputs[1] == outputs[0],
        "{}: {} (merged {merged}): slot tables give another output",
        b.name(),
        d.name
    );
    eprintln!(
        "{}: {} (merged {merged}): slots = identity",
        b.name(),
        d.name
    );
}

fn down_on<B: SlotMemory>(b: &mut B, ty: GemvType, ty_sh: GemvType) {
    let s = SHAPE;
    let n = s.n_embd;
    let act = upload_bytes(b, &bytes(s.act_bytes().unwrap(), 6));
    let sel = upload_bytes(b, &selection_bytes());
    let down = routed(b, weight_bytes(ty, n, s.ff), 7);
    let dsh = upload_bytes(b, &bytes(weight_bytes(ty_sh, n, s.ff_sh), 8));
    let resid = upload_bytes(b, &bytes(4 * n, 9));
    let d = GemvType::down(ty, ty_sh).expect("kernel");
    let mut outputs = Vec::new();
    for slots in [false, true] {
        let y = upload_bytes(b, &vec![0xFF; 4 * n]);
        let routed = if slots { &down.table } else { &down.identity };
        // The norm tail's buffers are never read (DOWN_NORM_NONE); `act` stands in for them.
        let args = [
            KArg::Buf(&act),
            KArg::Buf(&sel),
            KArg::Buf(routed),
            KArg::Buf(&dsh),
            KArg::Buf(&resid),
            KArg::Buf(&y),
            KArg::U32(n as u32),
            KArg::U32(s.ff as u32),
            KArg::U32(s.n_used as u32),
            KArg::U32(s.ff_sh as u32),
            KArg::U32(s.n_expert as u32),
            KArg::Buf(&act),
            KArg::Buf(&act),
            KArg::Buf(&act),
            KArg::Buf(&act),
            KArg::U32(ingot_abi::launch::DOWN_NORM_NONE),
            KArg::F32(0.0),
        ];
        outputs.push(run_into(b, d, n as u32, &args, &y, 4 * n));
    }
    assert!(
        outputs[1] == outputs[0],
        "{}: {}: slot tables give another output",
        b.name(),
        d.name
    );
    eprintln!("{}: {}: slots = identity", b.name(), d.name);
}

/// Every kernel of `slot_tables_read_missed_experts_over_the_link` on the GPU, where the missed
/// experts' slabs are read over the host link from `cuMemHostAlloc` memory, the others from VRAM
/// slots, through a table of real device addresses. In ptx-sim (which that test already runs over
/// those kernels) one gate/up type and one down pair, to prove this code before a card runs it.
fn slot_tables<B: SlotMemory>(b: &mut B) {
    if b.name() == "ptx-sim" {
        gate_up_on(b, (GemvType::Q4K, GemvType::Q4K), false);
        gate_up_on(b, (GemvType::Q4K, GemvType::Q4K), true);
        down_on(b, GemvType::Q5_0, GemvType::Q4K);
        return;
    }
    for ty in [GemvType::Q4K, GemvType::Q5_0, GemvType::Q8_0, GemvType::Q3K] {
        gate_up_on(b, (ty, ty), false);
        gate_up_on(b, (ty, ty), true);
    }
    for &pair in GemvType::MIXED_GATE_UP {
        gate_up_on(b, pair, false);
    }
    for (r, s) in [
        (GemvType::Q5_0, GemvType::Q4K),
        (GemvType::Q8_0, GemvType::Q6K),
        (GemvType::Q4K, GemvType::Q4K),
        (GemvType::Q3K, GemvType::Q3K),
        (GemvType::Iq2Xxs, GemvType::Q6K),
    ] {
        down_on(b, r, s);
    }
}

#[test]
fn slot_tables_equal_identity_tables() {
    on_every_backend!(slot_tables);
}
