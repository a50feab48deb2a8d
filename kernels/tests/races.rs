//! The simulator's race check on a real last-block-done kernel: `attn_merge_v_b_q8_0`, whose two
//! blocks per row pair each store half of every row's sum in `scratch`, count themselves in the
//! pair's done counter (`last_of` in `kernels/device/src/last_block.rs`), and whose last block
//! adds the halves. Each test edits the committed PTX of that one kernel to drop an ordering
//! instruction, and checks that the in-order schedule (blocks one after another, as the simulator
//! ran every launch before it had a random schedule) still computes the right answer, while
//! random schedules give a wrong one; and that the unmodified kernel is right under every seed.
#![cfg(feature = "sim")]

mod quant_blocks;
mod support;

use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::merge_v_b_pairs;
use ingot_kernels::backend::sim::SimAccelerator;
use ingot_kernels::ops::attention::{attn_merge_v_b, AttnShape, CacheType, MergeVbBufs};
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::PTX;
use ptx_sim::{Module, Schedule};
use quant_blocks::random_blocks;
use rand::SeedableRng;
use support::attention::{rand_nonzero, step_state};
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

const TY: GemvType = GemvType::Q8_0;
/// Four heads of 64 value rows: 8 row pairs of 32 rows (`merge_v_b_rows`), 16 blocks.
const N_HEAD: usize = 4;
const D_V: usize = 64;
const KV_LORA: usize = 512;
const POS: usize = 17;
const MAX_SEGMENTS: usize = 3;

fn shape() -> AttnShape {
    AttnShape {
        n_head: N_HEAD,
        d_nope: 128,
        kv_lora: KV_LORA,
        n_rope: 64,
        ctx: POS + 2,
        cache: CacheType::F16,
    }
}

/// The launch's inputs, the same for every run (fixed seed: the tests compare runs, not an
/// oracle, and `merge_v_b.rs` checks this kernel against one).
struct Inputs {
    part_o: Vec<u8>,
    part_ml: Vec<u8>,
    w: Vec<u8>,
}

fn inputs() -> Inputs {
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let s = shape();
    // Every segment slot holds finite values: the kernel reads those below the step's count.
    // `part_o` holds f16 normalized outputs.
    let part_o: Vec<u8> = rand_nonzero(&mut rng, MAX_SEGMENTS * s.n_head * s.kv_lora, -1.0, 1.0)
        .into_iter()
        .flat_map(|v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let part_ml: Vec<f32> = (0..MAX_SEGMENTS * s.n_head)
        .flat_map(|i| [(i % 7) as f32 - 3.0, 0.5 + (i % 5) as f32])
        .collect();
    let rows = N_HEAD * D_V;
    let w = random_blocks(&mut rng, ggml(TY), rows * KV_LORA / TY.block_elems());
    Inputs {
        part_o,
        part_ml: f32_bytes(&part_ml),
        w,
    }
}

/// The committed PTX with `edit` applied to the text of `attn_merge_v_b_q8_0` alone, loaded for
/// the life of the test process.
fn edited_module(edit: impl Fn(&str) -> String) -> &'static Module {
    let name = TY.merge_v_b().name;
    let start = PTX
        .find(&format!(".visible .entry {name}("))
        .expect("the kernel is in the PTX");
    let len = PTX[start..]
        .find("\n}\n")
        .expect("the kernel's closing brace")
        + 3;
    let kernel = &PTX[start..start + len];
    let edited = edit(kernel);
    assert_ne!(edited, kernel, "the edit changed nothing");
    let text = format!("{}{edited}{}", &PTX[..start], &PTX[start + len..]);
    let m = Module::parse_lazy(&text).unwrap_or_else(|e| panic!("{e}"));
    Box::leak(Box::new(m))
}

/// Every `fence.acq_rel.gpu` of the kernel removed: the three of `last_of` (each thread's
/// release before the barrier, thread 0's before its atomic add, and its acquire after).
fn without_fences(k: &str) -> String {
    assert_eq!(k.matches("fence.acq_rel.gpu;").count(), 3);
    k.replace("fence.acq_rel.gpu;", "")
}

/// The barrier between the blocks' stores and thread 0's count removed (the first `bar.sync` of
/// `last_of`, right after the first fence).
fn without_count_barrier(k: &str) -> String {
    let fence_then_bar = "\tfence.acq_rel.gpu;\n\tbar.sync \t0;\n";
    assert_eq!(k.matches(fence_then_bar).count(), 1);
    k.replace(fence_then_bar, "\tfence.acq_rel.gpu;\n")
}

/// One launch on a fresh simulator of `m` under `schedule`, the race check off: the output
/// blocks, or the launch's error.
fn run(m: &'static Module, schedule: Schedule, x: &Inputs) -> Result<Vec<u8>, String> {
    let mut b = SimAccelerator::with_module(m).map_err(|e| e.to_string())?;
    b.sim_mut().set_schedule(schedule);
    b.sim_mut().set_race_check(0);
    launch(&mut b, x)
}

fn launch(b: &mut SimAccelerator, x: &Inputs) -> Result<Vec<u8>, String> {
    let s = shape();
    let rows = N_HEAD * D_V;
    let part_o = upload(b, &x.part_o);
    let part_ml = upload(b, &x.part_ml);
    let state = upload(b, &step_state(POS as u32));
    let w = upload(b, &x.w);
    let y = poisoned(b, rows / QK8_1 * 36);
    let scratch = poisoned(b, rows * 2 * 4);
    let pairs = merge_v_b_pairs(N_HEAD as u32, D_V as u32) as usize;
    let pair_count = upload(b, &vec![0u8; pairs * 4]);
    let bufs = MergeVbBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state: &state,
        w: &w,
        y: &y,
        scratch: &scratch,
        pair_count: &pair_count,
    };
    attn_merge_v_b(b, TY, &s, D_V, &bufs, MAX_SEGMENTS).map_err(|e| e.to_string())?;
    Ok(download(b, &y))
}

/// Runs `f` on one host thread, so that the in-order schedule runs the blocks one after another
/// in index order. (On several threads its blocks run concurrently, and a real host race may
/// or may not expose a missing barrier: not a check to rely on either way.)
fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool")
        .install(f)
}

/// The seeds of `1..=n` under which `m` gives an output other than `want`, or an error.
fn caught_by(m: &'static Module, x: &Inputs, want: &[u8], n: u64) -> Vec<u64> {
    (1..=n)
        .filter(|&seed| run(m, Schedule::Random { seed }, x).map_or(true, |y| y != want))
        .collect()
}

/// The unmodified kernel's output, in order.
fn reference(x: &Inputs) -> Vec<u8> {
    let m = support_module();
    let y = run(m, Schedule::InOrder, x).expect("the unmodified kernel");
    assert!(y.iter().any(|&v| v != 0xFF), "the kernel wrote no output");
    y
}

fn support_module() -> &'static Module {
    ingot_kernels::backend::sim::module().expect("the committed PTX")
}

#[test]
fn the_unmodified_kernel_agrees_under_every_seed() {
    let x = inputs();
    let want = reference(&x);
    assert_eq!(
        caught_by(support_module(), &x, &want, 16),
        Vec::<u64>::new()
    );
    // And through the race check as kernel tests run it.
    let mut b = SimAccelerator::new().expect("ptx-sim backend");
    b.sim_mut().set_race_check(8);
    assert_eq!(launch(&mut b, &x).expect("race check"), want);
}

/// Asserts that the kernel edited by `edit` is right in order and wrong under some seed of
/// `1..=16`; prints which seeds catch it and what the race check reports.
fn mutation_is_caught(what: &str, edit: impl Fn(&str) -> String) {
    let x = inputs();
    let want = reference(&x);
    let m = edited_module(edit);
    let in_order = one_thread(|| run(m, Schedule::InOrder, &x));
    assert_eq!(
        in_order.as_deref(),
        Ok(&want[..]),
        "{what}: the in-order schedule was expected to miss it"
    );
    let caught = caught_by(m, &x, &want, 16);
    eprintln!("{what}: caught by seeds {caught:?} of 1..=16");
    assert!(!caught.is_empty(), "{what}: no seed of 1..=16 catches it");
    let mut b = SimAccelerator::with_module(m).expect("ptx-sim backend");
    b.sim_mut().set_race_check(4);
    match launch(&mut b, &x) {
        Err(e) => eprintln!("{what}: the race check with 4 seeds: {e}"),
        Ok(y) => eprintln!(
            "{what}: the race check with 4 seeds passed (output right: {})",
            y == want
        ),
    }
}

#[test]
fn a_missing_fence_is_caught() {
    mutation_is_caught("no fence.acq_rel.gpu", without_fences);
}

#[test]
fn a_missing_barrier_is_caught() {
    mutation_is_caught("no barrier before the count", without_count_barrier);
}
