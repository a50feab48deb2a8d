//! `flash_block`: the blocks of a flash launch cover every (segment, head) of the split at a
//! position exactly once, within their group, and a block's heads stay within 16. And the
//! spans it hands ahead (`flash_handoff_bytes`).

use ingot_abi::launch::{
    flash_block, flash_block_heads, flash_items, flash_segments, FLASH_GROUP_HEADS,
};

#[test]
fn every_segment_and_head_once() {
    for n_head in [1u32, 4, 16, 17, 20, 64, 128] {
        for max_segments in [1u32, 2, 3, 16, 41, 82, 132] {
            for len in [1u32, 2, 33, 64, 65, 200, 1000, 4096, 32_768] {
                let split = flash_segments(len, max_segments);
                let mut seen = vec![0u32; (split.count * n_head) as usize];
                for b in 0..flash_items(n_head, max_segments) {
                    let Some(w) = flash_block(b, n_head, max_segments, split) else {
                        continue;
                    };
                    let group = b / max_segments;
                    let case = format!("H={n_head} ms={max_segments} len={len} b={b}: {w:?}");
                    assert!(w.seg < split.count, "{case}");
                    assert!(w.heads >= 1 && w.heads <= FLASH_GROUP_HEADS, "{case}");
                    assert!(w.h0 >= group * FLASH_GROUP_HEADS, "{case}");
                    assert!(w.h0 + w.heads <= ((group + 1) * FLASH_GROUP_HEADS).min(n_head));
                    for h in w.h0..w.h0 + w.heads {
                        seen[(w.seg * n_head + h) as usize] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|&n| n == 1),
                    "H={n_head} ms={max_segments} len={len}: {seen:?}"
                );
            }
        }
    }
}

#[test]
fn spare_blocks_share_heads() {
    // One segment in 16 blocks or more: one head a block; in 8, two.
    assert_eq!(flash_block_heads(1, 16), 1);
    assert_eq!(flash_block_heads(1, 82), 1);
    assert_eq!(flash_block_heads(1, 8), 2);
    // As many segments as blocks, or more than half: 16 heads a block.
    assert_eq!(flash_block_heads(64, 82), 16);
    assert_eq!(flash_block_heads(41, 82), 8);
    assert_eq!(flash_block_heads(42, 82), 16);
    assert_eq!(flash_block_heads(1, 1), 16);
    // Zero blocks counts as one.
    assert_eq!(flash_block_heads(1, 0), 16);
}

/// The spans a flash launch hands ahead take each buffer's first bytes, the first buffer first,
/// never more than `FLASH_HANDOFF_MAX_BYTES` together, and all of both when they fit.
#[test]
fn handoff_spans_fill_the_cap_in_order() {
    use ingot_abi::launch::{flash_handoff_bytes, FLASH_HANDOFF_MAX_BYTES};
    let max = u64::from(FLASH_HANDOFF_MAX_BYTES);
    for (a, b) in [
        (0, 0),
        (1, 2),
        (1000, max),
        (max - 1, 5),
        (max, 7),
        (max + 9, max),
        (u64::MAX, 3),
    ] {
        let [x, y] = flash_handoff_bytes(a, b);
        let (x, y) = (u64::from(x), u64::from(y));
        assert_eq!(x, a.min(max), "({a}, {b})");
        assert_eq!(y, b.min(max - x), "({a}, {b})");
        assert!(x + y <= max);
        if a.saturating_add(b) <= max {
            assert_eq!((x, y), (a, b));
        }
    }
}
