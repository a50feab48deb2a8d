//! Weights handed ahead: a launch that prefetches into L2 the weights of a later launch (the
//! decode flash launch hands the first rows of its layer's FFN gate and up matrices to the FFN's
//! launch, past the merge's, `ingot_abi::launch::FLASH_LATENT`), so part of that launch's DRAM
//! stream runs while the DRAM would otherwise idle: where the launches between leave the
//! bandwidth free, and in the gaps before each starts (its node cost). Unlike the prefetch before
//! a grid-dependency wait ([`super::model::prefetch_before_wait`]) it needs no early launch, so it
//! holds on `sm_86` too.
//!
//! What moves: the bytes the simulator saw the launch prefetch ([`NodeLoad::handoff_bytes`]), no
//! more than those idle windows carry at the card's efficient DRAM bandwidth and no more than the
//! L2 holds beside what the launches from the prefetching one on keep there (their reads less
//! those read evict-first, [`NodeLoad::streamed_bytes`]), times
//! [`Constants::weight_prefetch_overlap`] (the same hint, the same assumed share on time). The
//! receiving launch's DRAM bytes shrink by that much and its time is recomputed. Of a launch in
//! dependent parts, a chained one's parts read the handed rows (the merge's `attn_v_b` then
//! `attn_output`; a dense FFN's gate and up, then down): each part's bytes shrink in proportion
//! to its share (the handed rows are read first, so this understates the first part's gain); a
//! routed one's path reads none of them (the shared expert's rows run beside it) and keeps its
//! bytes. The step's DRAM bytes still take at least their time at the card's bandwidth (the
//! step's floor).

use super::card::Card;
use super::model::{node_time, Constants, NodeLoad, NodeTime, PathPart, PrefixLoad};

/// `t` (the time of `load`) with the DRAM bytes handed ahead to it taken out: `between` holds the
/// loads and times alone of the launches from the one that handed them (first) up to `load`'s
/// predecessor; `chained`: `load`'s parts read the handed rows (a chained launch, see the module
/// docs). `t` itself where nothing fits. `after_kernel` as in [`node_time`].
pub fn handed_ahead(
    card: &Card,
    k: &Constants,
    (load, t): (&NodeLoad, &NodeTime),
    between: &[(NodeLoad, NodeTime)],
    (after_kernel, chained): (bool, bool),
) -> NodeTime {
    let bytes = handoff_on_time(card, k, (load, t), between);
    if bytes <= 0.0 {
        return *t;
    }
    let keep = 1.0 - bytes / load.dram_bytes as f64;
    let shrink = |b: u64| (b as f64 * keep).round() as u64;
    let part = |p: PathPart| PathPart {
        dram_bytes: shrink(p.dram_bytes),
        prefetch_bytes: shrink(p.prefetch_bytes),
        ..p
    };
    let reduced = NodeLoad {
        dram_bytes: shrink(load.dram_bytes),
        prefix: load.prefix.map(|p| match chained {
            true => PrefixLoad {
                first: part(p.first),
                waiting: part(p.waiting),
                then: p.then.map(part),
            },
            false => p,
        }),
        ..*load
    };
    let mut out = node_time(card, k, &reduced, after_kernel);
    out.prefetched_s = (t.dram_s - out.dram_s).max(0.0);
    out
}

/// The bytes of `load`'s DRAM stream that arrive in L2 before it starts (see the module docs).
fn handoff_on_time(
    card: &Card,
    k: &Constants,
    (load, t): (&NodeLoad, &NodeTime),
    between: &[(NodeLoad, NodeTime)],
) -> f64 {
    let Some((first, _)) = between.first() else {
        return 0.0;
    };
    if first.handoff_bytes == 0 || load.dram_bytes == 0 {
        return 0.0;
    }
    let rate = card.dram_gbps * 1e9 * k.dram_efficiency.value;
    let mut window_s = t.launch_s;
    let mut kept = 0u64;
    for (i, (l, lt)) in between.iter().enumerate() {
        let body = lt.dram_s.max(lt.l2_s).max(lt.issue_s).max(lt.pcie_s) + lt.tail_s;
        // Its own stream at the card's whole bandwidth; the rest of its body the DRAM could
        // carry the prefetch. A later launch's node gap too (the first's started the prefetch).
        let busy = l.dram_bytes as f64 / rate;
        window_s += (body - busy).max(0.0) + if i > 0 { lt.launch_s } else { 0.0 };
        kept += l.dram_bytes - l.streamed_bytes.min(l.dram_bytes);
    }
    let l2_room = card.l2_bytes.saturating_sub(kept) as f64;
    (first.handoff_bytes as f64)
        .min(window_s * rate)
        .min(l2_room)
        .min(load.dram_bytes as f64)
        * k.weight_prefetch_overlap.value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::card::card_named;
    use crate::predict::model::DEFAULT_CONSTANTS;

    fn load(dram_bytes: u64, warp_instructions: u64) -> NodeLoad {
        NodeLoad {
            blocks: 82,
            registers: 64,
            warp_instructions,
            dram_bytes,
            ..crate::predict::model::tests::load()
        }
    }

    /// An issue-bound launch reading nothing hands 3 MB ahead to a 3 MB streaming launch: the
    /// saving is the overlap's share of what its body plus the node gap carry, and breaking a
    /// premise (nothing handed, no idle DRAM, no L2 room) takes it away.
    #[test]
    fn the_saving_is_the_idle_window_at_the_assumed_share_and_needs_each_premise() {
        let c = card_named("3090").unwrap();
        let k = DEFAULT_CONSTANTS;
        let rate = c.dram_gbps * 1e9 * k.dram_efficiency.value;
        let next = load(3_000_000, 1000);
        let t = node_time(c, &k, &next, true);
        let flash = NodeLoad {
            handoff_bytes: 3_000_000,
            ..load(0, 400_000)
        };
        let ft = node_time(c, &k, &flash, true);
        assert_eq!(ft.bound, "issue");
        let body = ft.issue_s;
        let got = handed_ahead(c, &k, (&next, &t), &[(flash, ft)], (true, false));
        let moved = ((body + t.launch_s) * rate).min(3e6) * k.weight_prefetch_overlap.value;
        let want = t.dram_s * (1.0 - moved / 3e6);
        assert!(
            (got.dram_s - want).abs() < 1e-12,
            "{} vs {want}",
            got.dram_s
        );
        assert!(got.total_s < t.total_s);
        assert!((got.prefetched_s - (t.dram_s - got.dram_s)).abs() < 1e-15);
        // Nothing handed ahead: unchanged.
        let none = NodeLoad {
            handoff_bytes: 0,
            ..flash
        };
        assert_eq!(
            handed_ahead(c, &k, (&next, &t), &[(none, ft)], (true, false)),
            t
        );
        // A predecessor whose own stream fills its body leaves only the node gap.
        let busy = NodeLoad {
            handoff_bytes: 3_000_000,
            ..load(5_000_000, 1000)
        };
        let bt = node_time(c, &k, &busy, true);
        let gap = handed_ahead(c, &k, (&next, &t), &[(busy, bt)], (true, false));
        let moved = (t.launch_s * rate).min(3e6) * k.weight_prefetch_overlap.value;
        assert!((gap.dram_s - t.dram_s * (1.0 - moved / 3e6)).abs() < 1e-12);
        // ... unless its stream fills the L2 (not read evict-first): nothing survives.
        let full = NodeLoad {
            dram_bytes: c.l2_bytes,
            ..busy
        };
        let full_t = node_time(c, &k, &full, true);
        assert_eq!(
            handed_ahead(c, &k, (&next, &t), &[(full, full_t)], (true, false)),
            t
        );
        // A launch between them adds its idle DRAM time and its node gap to the window, and its
        // bytes to what the L2 must keep.
        let merge = load(2_000_000, 1_500_000);
        let mt = node_time(c, &k, &merge, true);
        // The premise: its DRAM leaves part of its body idle.
        assert!(mt.issue_s > 2e6 / rate);
        let big = NodeLoad {
            handoff_bytes: 5_000_000,
            ..load(0, 2_000_000)
        };
        let big_t = node_time(c, &k, &big, true);
        let next6 = load(6_000_000, 1000);
        let t6 = node_time(c, &k, &next6, true);
        let past = handed_ahead(
            c,
            &k,
            (&next6, &t6),
            &[(big, big_t), (merge, mt)],
            (true, false),
        );
        let window = big_t.issue_s + (mt.issue_s - 2e6 / rate) + mt.launch_s + t6.launch_s;
        let room = (c.l2_bytes - 2_000_000) as f64;
        assert!(room < 5e6 && room < window * rate, "the L2 binds here");
        let moved = room * k.weight_prefetch_overlap.value;
        assert!((past.dram_s - t6.dram_s * (1.0 - moved / 6e6)).abs() < 1e-12);
        // Read evict-first, the same stream leaves the L2 to the handed lines.
        let streamed = NodeLoad {
            streamed_bytes: c.l2_bytes,
            ..full
        };
        assert!(
            handed_ahead(c, &k, (&next, &t), &[(streamed, full_t)], (true, false)).dram_s
                < t.dram_s
        );
    }
}
