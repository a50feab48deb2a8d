//! The grid-type dequantizers against gguf-py's numpy ones (`gguf.quants.dequantize`, the PyPI
//! package `gguf` pinned in xtask/src/tools.rs), bit for bit, on random valid blocks: random grid
//! indices, signs and scales, and f16 `d` of either sign across the whole finite range
//! (subnormals up to 65504), plus all-zero and all-one block bodies. gguf-py's dequantizers
//! are written independently of ggml's C (vectorised numpy) but compute the same f32
//! expressions in the same order, so bit equality is the expectation, not a tolerance.

mod support;

use std::path::PathBuf;

use ingot_gguf::GgmlType;
use ingot_quant::dequantize_row;
use rand::{rngs::StdRng, SeedableRng};
use support::{any_finite_f16, grid_blocks, python, set_d, GRID_TYPES};

/// Reads `<dir>/<NAME>.bin` (whole blocks of the named type) and writes the f32 values
/// `gguf.quants.dequantize` gives to `<dir>/<NAME>.f32`, for each name argument.
const SCRIPT: &str = r#"
import sys
import numpy as np
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

folder = sys.argv[1]
for name in sys.argv[2:]:
    raw = np.fromfile(f"{folder}/{name}.bin", dtype=np.uint8)
    out = dequantize(raw, GGMLQuantizationType[name])
    assert out.dtype == np.float32, out.dtype
    out.tofile(f"{folder}/{name}.f32")
"#;

/// Blocks per type: enough that every scale nibble, sign and high index bit occurs many times.
const BLOCKS: usize = 256;

/// A scratch folder removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn blocks(ty: GgmlType, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let extremes = [
        0x0001u16, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
    ];
    let mut data = grid_blocks(&mut rng, ty, BLOCKS, |_| 0);
    let ts = ty.type_size() as usize;
    for (i, b) in data.chunks_exact_mut(ts).enumerate() {
        match i {
            // Bodies of all zeros and all ones (the first and last grid points, every sign bit,
            // the largest scales).
            0 | 1 => b.fill(if i == 0 { 0x00 } else { 0xFF }),
            _ => {}
        }
        let d = match extremes.get(i) {
            Some(&d) => d,
            None => any_finite_f16(&mut rng),
        };
        set_d(ty, b, d);
    }
    data
}

#[test]
fn grid_dequantizers_equal_gguf_py_bit_for_bit() {
    let Some(mut py) = python("gguf.quants") else {
        return;
    };
    let dir = Scratch(std::env::temp_dir().join(format!("ingot-gguf-py-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("scratch folder");
    let inputs: Vec<(GgmlType, Vec<u8>)> = GRID_TYPES
        .iter()
        .enumerate()
        .map(|(k, &ty)| (ty, blocks(ty, 100 + k as u64)))
        .collect();
    for (ty, data) in &inputs {
        std::fs::write(dir.0.join(format!("{}.bin", ty.name())), data).expect("write blocks");
    }
    let out = py
        .arg("-c")
        .arg(SCRIPT)
        .arg(&dir.0)
        .args(GRID_TYPES.iter().map(|t| t.name()))
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "gguf-py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut failures = Vec::new();
    for (ty, data) in &inputs {
        let raw = std::fs::read(dir.0.join(format!("{}.f32", ty.name()))).expect("gguf-py output");
        let want: Vec<u32> = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut got = vec![0.0f32; BLOCKS * 256];
        dequantize_row(*ty, data, &mut got).unwrap();
        assert_eq!(
            want.len(),
            got.len(),
            "{ty}: gguf-py returned {} values",
            want.len()
        );
        let diff: Vec<usize> = (0..got.len())
            .filter(|&i| got[i].to_bits() != want[i])
            .collect();
        eprintln!(
            "{ty}: {} values, {} differ from gguf-py",
            got.len(),
            diff.len()
        );
        if let Some(&i) = diff.first() {
            failures.push(format!(
                "{ty}: {} of {} values differ; first at {i} (block {}): {:e} vs gguf-py {:e}",
                diff.len(),
                got.len(),
                i / 256,
                got[i],
                f32::from_bits(want[i])
            ));
        }
        // The comparison is not vacuous: the values span sign and magnitude.
        assert!(
            got.iter().any(|v| *v > 0.0) && got.iter().any(|v| *v < 0.0),
            "{ty}"
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
