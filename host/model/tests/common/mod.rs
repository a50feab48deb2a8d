//! Shared helpers of the integration tests: locating the golden data and reading NumPy `.npy`
//! files.

#![allow(dead_code)]

use std::path::Path;

#[allow(unused_imports)]
pub use ingot_testdata::golden_dir;

/// A 2-D little-endian f32 array read from a NumPy v1 `.npy` file.
pub struct Npy {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Npy {
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// Reads a v1 `.npy` holding a C-order `<f4` matrix; panics with the reason on anything else.
pub fn read_npy(path: &Path) -> Npy {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() >= 10 && &bytes[..6] == b"\x93NUMPY",
        "{}: not a .npy file",
        path.display()
    );
    assert_eq!(
        bytes[6],
        1,
        "{}: only .npy version 1 is supported",
        path.display()
    );
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("header is ASCII");
    assert!(
        header.contains("'descr': '<f4'"),
        "{}: dtype must be <f4: {header}",
        path.display()
    );
    assert!(
        header.contains("'fortran_order': False"),
        "{}: must be C order",
        path.display()
    );
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("header has a shape");
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("shape entries are integers"))
        .collect();
    assert_eq!(
        dims.len(),
        2,
        "{}: expected a 2-D array, shape ({shape})",
        path.display()
    );
    let payload = &bytes[10 + header_len..];
    assert_eq!(
        payload.len(),
        dims[0] * dims[1] * 4,
        "{}: payload size",
        path.display()
    );
    let data = payload
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Npy {
        rows: dims[0],
        cols: dims[1],
        data,
    }
}

/// Reads a `greedy32.ids.txt`: line 1 the prompt, line 2 the generated ids.
pub fn read_ids(path: &Path) -> (Vec<u32>, Vec<u32>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().map(|l| {
        l.split(',')
            .map(|s| s.trim().parse::<u32>().expect("ids are integers"))
            .collect::<Vec<_>>()
    });
    let prompt = lines.next().expect("prompt line");
    let generated = lines.next().expect("generated line");
    (prompt, generated)
}

/// The 16 prompt ids of `prefill16.npy` / `stepwise16.npy` (golden README).
pub const PROMPT16: [u32; 16] = [
    510, 299, 32, 113, 117, 365, 107, 274, 357, 110, 474, 32, 106, 117, 315, 115,
];

/// Largest absolute difference between two equally long slices, infinite for a NaN
/// ([`ingot_testdata::max_abs_diff`]).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    ingot_testdata::max_abs_diff(a, b)
}

/// Index of the largest value, lowest index on ties.
pub fn argmax(v: &[f32]) -> usize {
    ingot_model::math::argmax(v)
}

/// What [`compare_logits`] saw over a run of positions.
pub struct LogitAgreement {
    /// Largest |want − got| over every position and logit.
    pub worst: f32,
    /// Positions whose top-1 had to agree (the oracle's margin exceeds twice the band).
    pub clear: usize,
    /// Positions whose top-1 agreed, clear margin or not.
    pub agree: usize,
}

/// Compares two runs' logits position by position. The top-1 must agree wherever the oracle's
/// margin between its two best logits exceeds twice `band` (a difference within the band cannot
/// flip it there); closer calls may legitimately flip and are only counted. `label(pos)` says
/// in a failure what was compared at that position. The caller asserts `worst` against its band.
pub fn compare_logits(
    want: &[Vec<f32>],
    got: &[Vec<f32>],
    band: f32,
    label: impl Fn(usize) -> String,
) -> LogitAgreement {
    let mut seen = LogitAgreement {
        worst: 0.0,
        clear: 0,
        agree: 0,
    };
    for (pos, (w, g)) in want.iter().zip(got).enumerate() {
        seen.worst = seen.worst.max(max_abs_diff(w, g));
        let top = argmax(w);
        let runner_up = w
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != top)
            .map(|(_, &v)| v)
            .fold(f32::NEG_INFINITY, f32::max);
        seen.agree += usize::from(argmax(g) == top);
        if w[top] - runner_up > 2.0 * band {
            seen.clear += 1;
            assert_eq!(argmax(g), top, "top-1 at position {pos} ({})", label(pos));
        }
    }
    seen
}

/// The oracle greedy from `prompt` for `steps` tokens, and the CPU backend teacher-forced on the
/// same tokens: the logits of every position, `(oracle, cpu)`.
pub fn oracle_and_cpu(
    file: &ingot_gguf::GgufFile,
    prompt: &[u32],
    steps: usize,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    use ingot_model::{CpuBackend, Oracle};
    let mut oracle = Oracle::load(file, 64).unwrap();
    let mut tokens = prompt.to_vec();
    let mut want = oracle.prefill(prompt, 0).unwrap();
    for _ in 0..steps {
        let next = argmax(want.last().unwrap()) as u32;
        let pos = tokens.len();
        tokens.push(next);
        want.push(oracle.decode(next, pos).unwrap().to_vec());
    }
    let got = CpuBackend::load(file, 64)
        .unwrap()
        .prefill(&tokens, 0)
        .unwrap();
    (want, got)
}

/// Standard deviation of `v` (the spread the quantized-model bands are relative to).
pub fn std_dev(v: &[f32]) -> f32 {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    (v.iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt() as f32
}
