//! [`Schedule::Random`]: the blocks of a launch interleaved with each other, and the warps of each
//! block interleaved, in an order drawn from a seed, over the weak global memory of `weak.rs`.
//! See the crate docs ("Execution model") for what this catches and what it does not.

use crate::error::{Fault, SimError};
use crate::exec::{finish_block, release_barrier, start_block, Yield};
use crate::state::{Block, LaunchCtx, Scratch, Warp};
use crate::stats::LaunchStats;
use crate::weak::StoreBuf;

/// How a launch's blocks and warps are ordered (see the crate docs, "Execution model").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Blocks run whole, in parallel on the host's cores; a block's warps run round robin, each
    /// until it waits at `bar.sync`, sleeps (`nanosleep`) or exits; global stores are visible at
    /// once. Deterministic for
    /// race-free kernels, and what the counters of `tests/counters.rs` are pinned under.
    #[default]
    InOrder,
    /// One host thread runs a window of resident blocks, interleaving their warps at scheduling
    /// points drawn from `seed`, with each block's global stores buffered until a fence, a random
    /// later point or the end of the launch. The same seed gives the same interleaving and the
    /// same results.
    Random { seed: u64 },
}

impl Schedule {
    /// The environment variable [`crate::Sim::new`] takes its schedule from: `in-order` (also
    /// when unset or empty) or `random:<seed>` (a decimal `u64`).
    pub const ENV: &'static str = "INGOT_SIM_SCHEDULE";

    /// Parses `in-order` or `random:<seed>`.
    pub fn parse(s: &str) -> Result<Schedule, SimError> {
        let s = s.trim();
        if s.is_empty() || s == "in-order" {
            return Ok(Schedule::InOrder);
        }
        s.strip_prefix("random:")
            .and_then(|seed| seed.parse().ok())
            .map(|seed| Schedule::Random { seed })
            .ok_or_else(|| SimError::BadSchedule(s.to_string()))
    }

    /// The schedule [`Schedule::ENV`] names ([`Schedule::InOrder`] when it is unset).
    pub fn from_env() -> Result<Schedule, SimError> {
        match std::env::var(Self::ENV) {
            Ok(v) => Schedule::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(Schedule::InOrder),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(SimError::BadSchedule(v.to_string_lossy().into_owned()))
            }
        }
    }
}

impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schedule::InOrder => write!(f, "in-order"),
            Schedule::Random { seed } => write!(f, "random:{seed}"),
        }
    }
}

/// Under [`Pick::Priority`], the priorities of warps whose last quantum ended in `nanosleep` are
/// below this; those of the others are drawn from the full range (below it at odds 2^-32).
const AWAKE: u64 = 1 << 32;

/// Most buffered words of exited blocks kept invisible at once (each costs a hash-map entry).
const MAX_RETIRED_WORDS: usize = 1 << 20;

/// SplitMix64: small, fast, and the same sequence on every host for a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// A resident block, its warps, and each warp's priority (used by [`Pick::Priority`]).
struct Resident<'a> {
    b: Block<'a>,
    warps: Vec<Warp>,
    warp_prio: Vec<u64>,
}

/// How a scheduling point picks the block, and the warp in it, to run next.
#[derive(Clone, Copy)]
enum Pick {
    /// Uniformly among the candidates.
    Uniform,
    /// The candidate of highest priority; after each quantum the priority of the warp that ran is
    /// drawn again with odds 1 in `change_odds`. Random priorities starve some warps
    /// and blocks for long stretches, which is what exposes most ordering bugs (the idea of PCT,
    /// probabilistic concurrency testing); uniform picks rarely hold one warp back for long.
    Priority { change_odds: usize },
}

impl Pick {
    /// The index of the candidate to run among `n`, `prio(i)` being candidate `i`'s priority.
    fn choose(self, rng: &mut Rng, n: usize, prio: impl Fn(usize) -> u64) -> usize {
        match self {
            Pick::Uniform => rng.below(n),
            Pick::Priority { .. } => (0..n).max_by_key(|&i| prio(i)).expect("n > 0"),
        }
    }

    /// A new priority for what just ran, or `None` to keep it.
    fn redraw(self, rng: &mut Rng) -> Option<u64> {
        match self {
            Pick::Priority { change_odds } if rng.below(change_odds) == 0 => Some(rng.next()),
            _ => None,
        }
    }
}

/// Runs the blocks `indices` (linear block indices) of a launch under [`Schedule::Random`] with
/// `seed`, on the calling thread. A fault's detail names the schedule, to replay it.
pub(crate) fn run_random(
    ctx: &LaunchCtx,
    mut indices: Vec<u64>,
    seed: u64,
) -> Result<LaunchStats, Box<Fault>> {
    let mut rng = Rng(seed);
    // Fisher-Yates: the order blocks become resident in.
    for i in (1..indices.len()).rev() {
        indices.swap(i, rng.below(i + 1));
    }
    // Per launch, from the seed: how many blocks are resident at once, the longest run of warp
    // instructions between scheduling points, and the odds (1 in `drain_odds`) that a scheduling
    // point makes one block's buffered stores visible (`None`: only fences, and the end of the
    // launch, do; or the cap on buffered stores below).
    let window = rng.pick(&[2, 3, 4, 8]);
    let quantum = rng.pick(&[1, 4, 16, 64, 256]);
    let drain_odds = rng.pick(&[Some(16), Some(256), None]);
    let pick = match rng.below(4) {
        0 => Pick::Uniform,
        _ => Pick::Priority {
            change_odds: rng.pick(&[2, 8, 32, 128]),
        },
    };
    let [gx, gy, _] = ctx.grid;
    let ctaid = |i: u64| {
        [
            (i % u64::from(gx)) as u32,
            ((i / u64::from(gx)) % u64::from(gy)) as u32,
            (i / (u64::from(gx) * u64::from(gy))) as u32,
        ]
    };
    let mut scratch = Scratch::default();
    let mut resident: Vec<Resident> = Vec::new();
    // Store buffers of blocks that have exited, still to become visible.
    let mut retired: Vec<StoreBuf> = Vec::new();
    let mut retired_words = 0;
    let mut next = 0;
    let mut total = LaunchStats::default();
    // The priority the next warp to sleep gets (see below): lower than every earlier one.
    let mut sleep_prio = AWAKE;
    let result = loop {
        while resident.len() < window && next < indices.len() {
            let (b, warps) = start_block(
                ctx,
                ctaid(indices[next]),
                &mut scratch,
                Some(StoreBuf::default()),
            );
            let warp_prio = warps.iter().map(|_| rng.next()).collect();
            resident.push(Resident {
                b,
                warps,
                warp_prio,
            });
            next += 1;
        }
        if resident.is_empty() {
            break Ok(());
        }
        // Settle every resident block: retire it when all its warps have exited, release its
        // barrier when every live warp waits there. Afterwards each has a runnable warp.
        let mut settled = Ok(());
        let mut i = 0;
        while i < resident.len() {
            match settle(&mut resident[i]) {
                Err(f) => {
                    settled = Err(f);
                    break;
                }
                Ok(true) => i += 1,
                Ok(false) => {
                    let Resident { mut b, warps, .. } = resident.swap_remove(i);
                    total += b.stats;
                    let buf = b
                        .weak
                        .take()
                        .expect("random schedule blocks buffer their stores");
                    if !buf.is_empty() {
                        retired_words += buf.len();
                        retired.push(buf);
                    }
                    // Bounds the host memory the buffers of exited blocks take: past the cap the
                    // oldest becomes visible.
                    while retired_words > MAX_RETIRED_WORDS {
                        let mut oldest = retired.remove(0);
                        retired_words -= oldest.len();
                        oldest.drain(ctx.mem);
                    }
                    finish_block(&mut scratch, b, warps);
                }
            }
        }
        if settled.is_err() {
            break settled;
        }
        if resident.is_empty() {
            continue;
        }
        if drain_odds.is_some_and(|n| rng.below(n) == 0) {
            retired_words -= drain_one(ctx, &mut rng, &mut resident, &mut retired);
        }
        // Every runnable warp of every resident block is a candidate.
        let candidates: Vec<(usize, usize)> = resident
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                r.warps
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| runnable(w))
                    .map(move |(j, _)| (i, j))
            })
            .collect();
        let (i, j) = candidates[pick.choose(&mut rng, candidates.len(), |k| {
            let (i, j) = candidates[k];
            resident[i].warp_prio[j]
        })];
        let r = &mut resident[i];
        if let Some(p) = pick.redraw(&mut rng) {
            r.warp_prio[j] = p;
        }
        let (b, w) = (&mut r.b, &mut r.warps[j]);
        let run = 1 + rng.below(quantum) as u64;
        b.stop = b.steps.saturating_add(run).min(b.ctx.step_limit);
        let slept = match b.run_warp(w) {
            Err(f) => break Err(f),
            Ok(Yield::Barrier) => {
                w.at_barrier = true;
                false
            }
            Ok(Yield::Sleep) => true,
            Ok(Yield::Done | Yield::Preempt) => false,
        };
        // A warp that sleeps (a spin-wait) goes behind every other warp, earlier sleepers
        // included, so sleepers take turns in the order they slept; the first quantum it ends
        // without sleeping (it has left its spin) draws a full-range priority again. Spinners
        // that kept or redrew full-range priorities would starve the warp they wait for: the
        // one that wins redraws, and once the others' draws have drifted low, wins again.
        if let Pick::Priority { .. } = pick {
            if slept {
                sleep_prio = sleep_prio.saturating_sub(1);
                r.warp_prio[j] = sleep_prio;
            } else if r.warp_prio[j] < AWAKE {
                r.warp_prio[j] = rng.next() | AWAKE;
            }
        }
    };
    // The end of a launch makes every store visible (also after a fault, so that memory holds
    // every store the kernel executed, as after an in-order launch).
    for buf in resident.iter_mut().filter_map(|r| r.b.weak.as_mut()) {
        buf.drain(ctx.mem);
    }
    for mut buf in retired {
        buf.drain(ctx.mem);
    }
    result.map(|()| total).map_err(|mut f| {
        f.detail = format!(
            "{} [under schedule random:{seed}; {}=random:{seed} replays it]",
            f.detail,
            Schedule::ENV
        );
        f
    })
}

/// Makes the buffered stores of one block (resident or exited, chosen at random among those with
/// any) visible; returns how many words left `retired`.
fn drain_one(
    ctx: &LaunchCtx,
    rng: &mut Rng,
    resident: &mut [Resident],
    retired: &mut Vec<StoreBuf>,
) -> usize {
    let live = resident
        .iter()
        .filter(|r| r.b.weak.as_ref().is_some_and(|w| !w.is_empty()))
        .count();
    let n = live + retired.len();
    if n == 0 {
        return 0;
    }
    let k = rng.below(n);
    if k < live {
        let buf = resident
            .iter_mut()
            .filter_map(|r| r.b.weak.as_mut().filter(|w| !w.is_empty()))
            .nth(k)
            .expect("k counts the resident blocks with buffered stores");
        buf.drain(ctx.mem);
        0
    } else {
        let mut buf = retired.swap_remove(k - live);
        let words = buf.len();
        buf.drain(ctx.mem);
        words
    }
}

/// Whether the warp has lanes left and is not waiting at a barrier.
fn runnable(w: &Warp) -> bool {
    !w.stack.is_empty() && !w.at_barrier
}

/// Makes a resident block runnable if it can be: `false` when every warp has exited (the block is
/// done); when every live warp waits at the barrier, releases it (a fault if a warp has exited
/// instead of arriving).
fn settle(r: &mut Resident) -> Result<bool, Box<Fault>> {
    if r.warps.iter().any(runnable) {
        return Ok(true);
    }
    let waiting = r.warps.iter().filter(|w| !w.stack.is_empty()).count();
    if waiting == 0 {
        return Ok(false);
    }
    release_barrier(&mut r.b, &mut r.warps, waiting)?;
    Ok(true)
}
