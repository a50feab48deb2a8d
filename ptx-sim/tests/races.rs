//! The random schedule (`Schedule::Random`) and the race check (`Sim::set_race_check`) on a
//! hand-written kernel in the last-block-done pattern (`kernels/device/src/last_block.rs`): every
//! block stores its slice of `data`, fences, meets at a barrier, and thread 0 counts the block in
//! a global counter with an atomic; the block that counts last sums every block's slice. With the
//! fences or the first barrier removed the kernel is wrong on a GPU, yet the in-order schedule
//! computes the right sums; the random schedule must not.

mod common;
use common::one_thread;
use ptx_sim::{Arg, LaunchConfig, Module, Schedule, Sim, SimError};

const KERNEL: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry last_block_sum(
    .param .u64 p_data,
    .param .u64 p_count,
    .param .u64 p_out
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 4 .b8 flag[4];

    ld.param.u64 %rd1, [p_data];
    ld.param.u64 %rd2, [p_count];
    ld.param.u64 %rd3, [p_out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %nctaid.x;
    mad.lo.u32 %r5, %r2, %r3, %r1;
    add.u32 %r6, %r5, 1;
    mul.wide.u32 %rd4, %r5, 4;
    add.u64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r6;
    fence.acq_rel.gpu;
    bar.sync 0;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L__wait;
    atom.relaxed.gpu.global.add.u32 %r7, [%rd2], 1;
    fence.acq_rel.gpu;
    sub.u32 %r8, %r4, 1;
    setp.eq.u32 %p2, %r7, %r8;
    selp.u32 %r9, 1, 0, %p2;
    st.shared.u32 [flag], %r9;
$L__wait:
    bar.sync 0;
    ld.shared.u32 %r10, [flag];
    setp.eq.u32 %p3, %r10, 0;
    @%p3 bra $L__done;
    mov.u32 %r11, 0;
    mov.u32 %r12, 0;
$L__loop:
    mad.lo.u32 %r13, %r11, %r3, %r1;
    mul.wide.u32 %rd6, %r13, 4;
    add.u64 %rd7, %rd1, %rd6;
    ld.relaxed.gpu.global.u32 %r14, [%rd7];
    add.u32 %r12, %r12, %r14;
    add.u32 %r11, %r11, 1;
    setp.lt.u32 %p3, %r11, %r4;
    @%p3 bra $L__loop;
    mul.wide.u32 %rd8, %r1, 4;
    add.u64 %rd9, %rd3, %rd8;
    st.global.u32 [%rd9], %r12;
$L__done:
    ret;
}
"#;

const BLOCKS: u32 = 8;
const THREADS: u32 = 64;

/// The kernel with every `fence.acq_rel.gpu` removed.
fn without_fences() -> String {
    let k = KERNEL.replace("    fence.acq_rel.gpu;\n", "");
    assert_eq!(k.matches("fence").count(), 0);
    k
}

/// The kernel without its first `bar.sync` (the one between the stores and the count).
fn without_first_barrier() -> String {
    let k = KERNEL.replacen("    bar.sync 0;\n", "", 1);
    assert_eq!(k.matches("bar.sync").count(), 1);
    k
}

/// What the last block must write: `out[t]` = sum over blocks `j` of `j * THREADS + t + 1`.
fn expected() -> Vec<u32> {
    (0..THREADS)
        .map(|t| (0..BLOCKS).map(|j| j * THREADS + t + 1).sum())
        .collect()
}

/// Runs the kernel of `ptx` once on fresh memory; its output, or the launch's error.
fn run(sim: &mut Sim, ptx: &str) -> Result<Vec<u32>, SimError> {
    let m = Module::parse(ptx).unwrap_or_else(|e| panic!("{e}"));
    let n = (BLOCKS * THREADS) as usize;
    let data = sim.alloc(n * 4)?;
    let count = sim.alloc(4)?;
    let out = sim.alloc(THREADS as usize * 4)?;
    let cfg = LaunchConfig {
        grid: [BLOCKS, 1, 1],
        block: [THREADS, 1, 1],
        shared_bytes: 0,
    };
    let args = [Arg::Ptr(data), Arg::Ptr(count), Arg::Ptr(out)];
    sim.launch(&m, "last_block_sum", cfg, &args)?;
    let mut bytes = vec![0u8; THREADS as usize * 4];
    sim.read(out, &mut bytes)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

fn sim(schedule: Schedule) -> Sim {
    let mut s = Sim::new();
    s.set_schedule(schedule);
    s.set_race_check(0);
    s
}

/// The seeds among `1..=n` under which `ptx` computes a wrong result or faults.
fn caught_by(ptx: &str, n: u64) -> Vec<u64> {
    (1..=n)
        .filter(|&seed| {
            run(&mut sim(Schedule::Random { seed }), ptx).map_or(true, |out| out != expected())
        })
        .collect()
}

#[test]
fn the_unmodified_kernel_is_right_under_every_schedule() {
    assert_eq!(
        run(&mut sim(Schedule::InOrder), KERNEL).unwrap(),
        expected()
    );
    assert_eq!(caught_by(KERNEL, 64), Vec::<u64>::new());
    let mut s = sim(Schedule::InOrder);
    s.set_race_check(8);
    assert_eq!(run(&mut s, KERNEL).unwrap(), expected());
}

#[test]
fn a_missing_fence_passes_in_order_and_fails_at_random() {
    let k = without_fences();
    let in_order = one_thread(|| run(&mut sim(Schedule::InOrder), &k));
    assert_eq!(in_order.unwrap(), expected(), "the in-order schedule");
    let caught = caught_by(&k, 16);
    eprintln!("missing fence caught by seeds {caught:?} of 1..=16");
    assert!(
        !caught.is_empty(),
        "no seed of 1..=16 catches the missing fence"
    );
}

#[test]
fn a_missing_barrier_passes_in_order_and_fails_at_random() {
    let k = without_first_barrier();
    let in_order = one_thread(|| run(&mut sim(Schedule::InOrder), &k));
    assert_eq!(in_order.unwrap(), expected(), "the in-order schedule");
    let caught = caught_by(&k, 16);
    eprintln!("missing barrier caught by seeds {caught:?} of 1..=16");
    assert!(
        !caught.is_empty(),
        "no seed of 1..=16 catches the missing barrier"
    );
}

#[test]
fn the_race_check_reports_a_missing_fence() {
    let mut s = sim(Schedule::InOrder);
    s.set_race_check(8);
    match run(&mut s, &without_fences()) {
        Err(SimError::ScheduleDependent { seed, detail, .. }) => {
            eprintln!("race check: seed {seed}: {detail}");
        }
        other => panic!("expected a schedule-dependent result, got {other:?}"),
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let k = without_fences();
    for seed in 1..=8 {
        let a = run(&mut sim(Schedule::Random { seed }), &k).ok();
        let b = run(&mut sim(Schedule::Random { seed }), &k).ok();
        assert_eq!(a, b, "seed {seed}");
    }
}

#[test]
fn schedules_parse() {
    assert_eq!(Schedule::parse("in-order").unwrap(), Schedule::InOrder);
    assert_eq!(Schedule::parse("").unwrap(), Schedule::InOrder);
    assert_eq!(
        Schedule::parse("random:42").unwrap(),
        Schedule::Random { seed: 42 }
    );
    assert!(Schedule::parse("random:").is_err());
    assert!(Schedule::parse("random").is_err());
    assert_eq!(Schedule::Random { seed: 7 }.to_string(), "random:7");
}
