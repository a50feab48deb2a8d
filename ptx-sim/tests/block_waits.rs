//! Blocks of one launch that wait on each other, as a persistent or fused kernel does: each block
//! claims a dynamic ticket with `atom.global.add` at its start, so every lower ticket belongs to
//! a block that is already running, and only waits (an `ld.acquire.gpu` spin with `nanosleep`)
//! on work of lower tickets, published with release semantics. Thread 0 of a block spins; the
//! other threads (three warps in all) wait at `bar.sync` after it.
//!
//! The chain and the fan-in must give exact results in order on the host's threads, in order on
//! one thread, and under 50 random schedules. The unsafe variant (block `b` waits for block
//! `b + 1`, by `%ctaid`) may deadlock on a GPU when not every block is resident; the simulator
//! must end it with a step-limit fault, never hang.

mod common;
use common::{cfg, download_u32, one_thread};
use ptx_sim::{Arg, DevicePtr, FaultKind, Module, Schedule, Sim, SimError};

/// The chain: ticket `t` waits for `flag[t - 1]`, then thread `i` writes
/// `val[t][i] = val[t - 1][i] + t * 97 + i + 1`, and thread 0 sets `flag[t]` with a release store.
/// `order[t]` records the `%ctaid.x` that drew ticket `t`.
const CHAIN: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry chain(
    .param .u64 p_ticket,
    .param .u64 p_flag,
    .param .u64 p_val,
    .param .u64 p_order
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .shared .align 4 .b8 s_ticket[4];

    ld.param.u64 %rd1, [p_ticket];
    ld.param.u64 %rd2, [p_flag];
    ld.param.u64 %rd3, [p_val];
    ld.param.u64 %rd4, [p_order];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L__claimed;
    atom.global.add.u32 %r3, [%rd1], 1;
    st.shared.u32 [s_ticket], %r3;
    mul.wide.u32 %rd5, %r3, 4;
    add.u64 %rd6, %rd4, %rd5;
    mov.u32 %r4, %ctaid.x;
    st.global.u32 [%rd6], %r4;
    setp.eq.u32 %p2, %r3, 0;
    @%p2 bra $L__claimed;
    sub.u32 %r5, %r3, 1;
    mul.wide.u32 %rd7, %r5, 4;
    add.u64 %rd8, %rd2, %rd7;
$L__spin:
    ld.acquire.gpu.global.u32 %r6, [%rd8];
    setp.ne.u32 %p3, %r6, 0;
    @%p3 bra $L__claimed;
    nanosleep.u32 32;
    bra.uni $L__spin;
$L__claimed:
    bar.sync 0;
    ld.shared.u32 %r7, [s_ticket];
    mad.lo.u32 %r8, %r7, %r2, %r1;
    mul.wide.u32 %rd9, %r8, 4;
    add.u64 %rd10, %rd3, %rd9;
    mad.lo.u32 %r9, %r7, 97, %r1;
    add.u32 %r9, %r9, 1;
    mov.u32 %r10, 0;
    setp.eq.u32 %p2, %r7, 0;
    @%p2 bra $L__add;
    mul.wide.u32 %rd11, %r2, 4;
    sub.u64 %rd12, %rd10, %rd11;
    ld.global.u32 %r10, [%rd12];
$L__add:
    add.u32 %r11, %r10, %r9;
    st.global.u32 [%rd10], %r11;
    bar.sync 0;
    @%p1 bra $L__done;
    mul.wide.u32 %rd13, %r7, 4;
    add.u64 %rd14, %rd2, %rd13;
    st.release.gpu.global.u32 [%rd14], 1;
$L__done:
    ret;
}
"#;

/// The fan-in: tickets below `r` write `part[t][i] = t * 1000 + i * 7 + 3` and count themselves
/// in `done` with a release add; ticket `t >= r` waits until `done == r`, then writes
/// `out[t - r][i] = t + sum over j < r of part[j][i]`.
const FAN_IN: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry fan_in(
    .param .u64 p_ticket,
    .param .u64 p_done,
    .param .u64 p_part,
    .param .u64 p_out,
    .param .u32 p_r
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .shared .align 4 .b8 s_ticket[4];

    ld.param.u64 %rd1, [p_ticket];
    ld.param.u64 %rd2, [p_done];
    ld.param.u64 %rd3, [p_part];
    ld.param.u64 %rd4, [p_out];
    ld.param.u32 %r1, [p_r];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $L__claimed;
    atom.global.add.u32 %r4, [%rd1], 1;
    st.shared.u32 [s_ticket], %r4;
$L__claimed:
    bar.sync 0;
    ld.shared.u32 %r5, [s_ticket];
    setp.ge.u32 %p2, %r5, %r1;
    @%p2 bra $L__consumer;
    mad.lo.u32 %r6, %r5, %r3, %r2;
    mul.wide.u32 %rd5, %r6, 4;
    add.u64 %rd6, %rd3, %rd5;
    mul.lo.u32 %r7, %r5, 1000;
    mad.lo.u32 %r7, %r2, 7, %r7;
    add.u32 %r7, %r7, 3;
    st.global.u32 [%rd6], %r7;
    bar.sync 0;
    @%p1 bra $L__done;
    atom.release.gpu.global.add.u32 %r8, [%rd2], 1;
    bra.uni $L__done;
$L__consumer:
    @%p1 bra $L__ready;
$L__spin:
    ld.acquire.gpu.global.u32 %r9, [%rd2];
    setp.eq.u32 %p3, %r9, %r1;
    @%p3 bra $L__ready;
    nanosleep.u32 32;
    bra.uni $L__spin;
$L__ready:
    bar.sync 0;
    mov.u32 %r10, %r5;
    mov.u32 %r11, 0;
    mul.wide.u32 %rd7, %r2, 4;
    add.u64 %rd8, %rd3, %rd7;
    mul.wide.u32 %rd9, %r3, 4;
$L__sum:
    ld.global.u32 %r12, [%rd8];
    add.u32 %r10, %r10, %r12;
    add.u64 %rd8, %rd8, %rd9;
    add.u32 %r11, %r11, 1;
    setp.lt.u32 %p3, %r11, %r1;
    @%p3 bra $L__sum;
    sub.u32 %r13, %r5, %r1;
    mad.lo.u32 %r14, %r13, %r3, %r2;
    mul.wide.u32 %rd10, %r14, 4;
    add.u64 %rd11, %rd4, %rd10;
    st.global.u32 [%rd11], %r10;
$L__done:
    ret;
}
"#;

/// The unsafe variant: block `b` (by `%ctaid.x`) waits for `flag[b + 1]`, the last block waits
/// for nothing; then it sets `flag[b]` with a release store. Progress needs block `b + 1` to run
/// while block `b` spins, which no schedule with fewer resident blocks than the grid gives when
/// low blocks start first.
const BY_CTAID: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry by_ctaid(
    .param .u64 p_flag
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_flag];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %nctaid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L__ready;
    sub.u32 %r4, %r3, 1;
    setp.eq.u32 %p2, %r2, %r4;
    @%p2 bra $L__ready;
$L__spin:
    ld.acquire.gpu.global.u32 %r5, [%rd3+4];
    setp.ne.u32 %p3, %r5, 0;
    @%p3 bra $L__ready;
    nanosleep.u32 32;
    bra.uni $L__spin;
$L__ready:
    bar.sync 0;
    @%p1 bra $L__done;
    st.release.gpu.global.u32 [%rd3], 1;
$L__done:
    ret;
}
"#;

/// Warps of one block waiting on each other: thread 0 (warp 0) spins, with `nanosleep`, until
/// thread 32 (warp 1) has set a shared flag to 7 (shared memory starts undefined, so it waits for
/// that value, not for a non-zero one), then writes `out[0] = flag`. Warp 0 runs first in
/// order, so the wait ends only if `nanosleep` lets warp 1 run.
const WARPS: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry warps(
    .param .u64 p_out
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 s_flag[4];

    ld.param.u64 %rd1, [p_out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 32;
    @%p1 bra $L__set;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $L__done;
$L__spin:
    ld.volatile.shared.u32 %r2, [s_flag];
    setp.eq.u32 %p3, %r2, 7;
    @%p3 bra $L__seen;
    nanosleep.u32 32;
    bra.uni $L__spin;
$L__seen:
    st.global.u32 [%rd1], %r2;
    bra.uni $L__done;
$L__set:
    st.volatile.shared.u32 [s_flag], 7;
$L__done:
    ret;
}
"#;

/// Step limit of a launch under a random schedule (warp instructions per block; one host
/// thread, so the counts do not depend on the host): a block of the safe kernels executes at
/// most a few thousand (spins included, in every schedule tried), and a block that spins for
/// ever hits this in milliseconds instead of the default limit's minutes.
const STEP_LIMIT: u64 = 50_000;

/// Step limit in order: there a waiter spins for as long as its producer takes on another host
/// thread, which a loaded host may not run for a time slice (CI's 2 cores with the test
/// binary's other tests: 50,000 was hit once, 2026-12-06). Still a fault within a second or so
/// for a block that spins for ever.
const IN_ORDER_STEP_LIMIT: u64 = 5_000_000;

/// Blocks per launch: more than the largest random window (8 resident blocks).
const BLOCKS: u32 = 32;
/// Threads per block: three warps.
const THREADS: u32 = 96;
/// Producer tickets of the fan-in.
const PRODUCERS: u32 = 8;
/// Random schedules each kernel runs under.
const SEEDS: u64 = 50;

fn sim(schedule: Schedule) -> Sim {
    let mut s = Sim::new();
    s.set_schedule(schedule);
    s.set_race_check(0);
    s.set_step_limit(match schedule {
        Schedule::InOrder => IN_ORDER_STEP_LIMIT,
        _ => STEP_LIMIT,
    });
    s
}

fn zeros(sim: &mut Sim, words: u32) -> DevicePtr {
    sim.alloc(words as usize * 4).unwrap()
}

/// The random schedules each kernel runs under (each draws its own window of 2 to 8 blocks).
fn random_seeds() -> impl Iterator<Item = Schedule> {
    (1..=SEEDS).map(|seed| Schedule::Random { seed })
}

/// Checks that `order` (ticket -> `%ctaid.x`) is a permutation of the grid's blocks.
fn assert_tickets(order: &[u32], what: &str) {
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..BLOCKS).collect::<Vec<_>>(), "{what}: tickets");
}

/// Runs the chain kernel `src` once; its `val` rows, or the launch's error.
fn run_chain(src: &str, schedule: Schedule) -> Result<Vec<u32>, SimError> {
    let m = Module::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let mut s = sim(schedule);
    let (ticket, flag) = (zeros(&mut s, 1), zeros(&mut s, BLOCKS));
    let (val, order) = (zeros(&mut s, BLOCKS * THREADS), zeros(&mut s, BLOCKS));
    let args = [ticket, flag, val, order].map(Arg::Ptr);
    s.launch(&m, "chain", cfg(BLOCKS, THREADS), &args)?;
    assert_tickets(
        &download_u32(&s, order, BLOCKS as usize),
        &format!("chain, {schedule}"),
    );
    assert_eq!(
        download_u32(&s, flag, BLOCKS as usize),
        vec![1; BLOCKS as usize]
    );
    Ok(download_u32(&s, val, (BLOCKS * THREADS) as usize))
}

/// `val[t][i] = sum over s <= t of (s * 97 + i + 1)`, wrapping.
fn chain_expected() -> Vec<u32> {
    let mut out = Vec::new();
    let mut row = vec![0u32; THREADS as usize];
    for t in 0..BLOCKS {
        for (i, v) in row.iter_mut().enumerate() {
            *v = v.wrapping_add(t * 97 + i as u32 + 1);
        }
        out.extend_from_slice(&row);
    }
    out
}

/// Runs the fan-in kernel `src` once; its `out` rows (one per consumer ticket), or the error.
fn run_fan_in(src: &str, schedule: Schedule) -> Result<Vec<u32>, SimError> {
    let m = Module::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let mut s = sim(schedule);
    let (ticket, done) = (zeros(&mut s, 1), zeros(&mut s, 1));
    let consumers = BLOCKS - PRODUCERS;
    let part = zeros(&mut s, PRODUCERS * THREADS);
    let out = zeros(&mut s, consumers * THREADS);
    let args = [
        Arg::Ptr(ticket),
        Arg::Ptr(done),
        Arg::Ptr(part),
        Arg::Ptr(out),
        Arg::U32(PRODUCERS),
    ];
    s.launch(&m, "fan_in", cfg(BLOCKS, THREADS), &args)?;
    assert_eq!(download_u32(&s, ticket, 1), [BLOCKS]);
    assert_eq!(download_u32(&s, done, 1), [PRODUCERS]);
    Ok(download_u32(&s, out, (consumers * THREADS) as usize))
}

/// `out[c][i] = (PRODUCERS + c) + sum over j < PRODUCERS of (j * 1000 + i * 7 + 3)`.
fn fan_in_expected() -> Vec<u32> {
    (PRODUCERS..BLOCKS)
        .flat_map(|t| {
            (0..THREADS).map(move |i| t + (0..PRODUCERS).map(|j| j * 1000 + i * 7 + 3).sum::<u32>())
        })
        .collect()
}

/// The seeds among [`random_seeds`] under which `run` does not return `expected`.
fn wrong_under(
    run: impl Fn(Schedule) -> Result<Vec<u32>, SimError>,
    expected: &[u32],
) -> Vec<String> {
    random_seeds()
        .filter_map(|s| match run(s) {
            Ok(v) if v == expected => None,
            Ok(_) => Some(format!("{s}: wrong values")),
            Err(e) => Some(format!("{s}: {e}")),
        })
        .collect()
}

#[test]
fn a_ticket_chain_is_exact_under_every_schedule() {
    let want = chain_expected();
    let run = |s| run_chain(CHAIN, s);
    assert_eq!(
        run(Schedule::InOrder).unwrap(),
        want,
        "in order, host threads"
    );
    let one = one_thread(|| run(Schedule::InOrder));
    assert_eq!(one.unwrap(), want, "in order, one host thread");
    assert_eq!(wrong_under(run, &want), Vec::<String>::new());
}

#[test]
fn a_ticket_fan_in_is_exact_under_every_schedule() {
    let want = fan_in_expected();
    let run = |s| run_fan_in(FAN_IN, s);
    assert_eq!(
        run(Schedule::InOrder).unwrap(),
        want,
        "in order, host threads"
    );
    let one = one_thread(|| run(Schedule::InOrder));
    assert_eq!(one.unwrap(), want, "in order, one host thread");
    assert_eq!(wrong_under(run, &want), Vec::<String>::new());
}

/// Runs the unsafe variant once under `schedule`: `Ok` with every flag set, or the launch's
/// error.
fn run_by_ctaid(schedule: Schedule) -> Result<(), SimError> {
    let m = Module::parse(BY_CTAID).unwrap_or_else(|e| panic!("{e}"));
    let mut s = sim(schedule);
    let flag = zeros(&mut s, BLOCKS);
    s.launch(&m, "by_ctaid", cfg(BLOCKS, THREADS), &[Arg::Ptr(flag)])?;
    assert_eq!(
        download_u32(&s, flag, BLOCKS as usize),
        vec![1; BLOCKS as usize]
    );
    Ok(())
}

/// Whether `r` is the step-limit fault of a spinning block (thread 0 of some block).
fn is_step_limit(r: &Result<(), SimError>) -> bool {
    matches!(r, Err(SimError::Fault(f)) if f.kind == FaultKind::StepLimit && f.thread == [0, 0, 0])
}

#[test]
fn waiting_on_blocks_that_may_not_have_started_is_a_step_limit_fault() {
    // Random windows hold 2 to 8 of the 32 blocks: some resident block always waits on one that
    // has not started, and the window never frees a slot for it.
    for schedule in random_seeds().take(10) {
        let r = run_by_ctaid(schedule);
        assert!(is_step_limit(&r), "{schedule}: {r:?}");
    }
    // One host thread runs block 0 first, which waits on block 1, queued behind it.
    let r = one_thread(|| run_by_ctaid(Schedule::InOrder));
    assert!(is_step_limit(&r), "in order, one host thread: {r:?}");
    // On the host's threads it depends on how many blocks run at once: with a thread per block
    // the chain completes; otherwise a block waits on one queued behind it on its own thread.
    let r = run_by_ctaid(Schedule::InOrder);
    assert!(r.is_ok() || is_step_limit(&r), "in order: {r:?}");
}

#[test]
fn a_warp_waits_for_another_warp_of_its_block() {
    let m = Module::parse(WARPS).unwrap_or_else(|e| panic!("{e}"));
    for schedule in [Schedule::InOrder]
        .into_iter()
        .chain(random_seeds().take(10))
    {
        let mut s = sim(schedule);
        let out = zeros(&mut s, 1);
        s.launch(&m, "warps", cfg(1, 64), &[Arg::Ptr(out)])
            .unwrap_or_else(|e| panic!("{schedule}: {e}"));
        assert_eq!(download_u32(&s, out, 1), [7], "{schedule}");
    }
}
