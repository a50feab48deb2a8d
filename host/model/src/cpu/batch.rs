//! Batches of matrix-vector products run as one parallel pass over their concatenated rows.
//!
//! A decode step is a chain of small products (per MoE layer: the gate and up projections of every
//! chosen expert, then their down projections). Each fork/join on rayon's pool costs microseconds
//! and, on a pool shared with other processes, waits for its slowest thread; so products that share
//! a stage run as one batch, split into chunks of [`CHUNK_ROWS`] rows that rayon's work stealing
//! balances across threads.

use rayon::prelude::*;

use super::matmul::{Activation, QMatrix};
use crate::error::{ModelError, Result};

/// Multiply-accumulates below which a batch runs on the calling thread: a fork/join costs a few
/// microseconds, about what a product this small takes with SIMD kernels.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// Rows per parallel work item. Small enough to balance two or more threads over a 576-row product,
/// large enough (16 rows of 2048 q4_K weights are 18 KiB) that per-item dispatch is noise.
const CHUNK_ROWS: usize = 16;

/// One product of a batch: `m · inputs[input]`.
#[derive(Clone, Copy)]
pub(super) struct Product<'f> {
    pub m: QMatrix<'f>,
    pub input: usize,
}

/// Runs `products` into consecutive ranges of `out` (product `i`'s rows follow product `i − 1`'s),
/// each against its input in `inputs`, which are quantized here as needed. `out` must hold all
/// rows.
pub(super) fn run(
    products: &[Product<'_>],
    inputs: &mut [Activation],
    out: &mut [f32],
) -> Result<()> {
    let mut rows = 0;
    let mut work = 0;
    for p in products {
        let input = inputs.get_mut(p.input).ok_or_else(|| ModelError::Quant {
            name: p.m.name().to_owned(),
            reason: format!("input {} of a batch of {}", p.input, products.len()),
        })?;
        input.prepare(&p.m)?;
        rows += p.m.rows();
        work += p.m.rows() * p.m.cols();
    }
    let available = out.len();
    let out = out.get_mut(..rows).ok_or_else(|| ModelError::Quant {
        name: products.first().map_or("", |p| p.m.name()).to_owned(),
        reason: format!("a batch of {rows} rows into {available} outputs"),
    })?;
    let inputs = &*inputs;
    if work < PARALLEL_MIN_WORK || rayon::current_num_threads() == 1 {
        return run_rows(products, inputs, 0, out);
    }
    out.par_chunks_mut(CHUNK_ROWS)
        .enumerate()
        .try_for_each(|(ci, o)| run_rows(products, inputs, ci * CHUNK_ROWS, o))
}

/// `out = m · x` as a batch of one.
pub(super) fn matvec(m: &QMatrix<'_>, x: &mut Activation, out: &mut [f32]) -> Result<()> {
    run(&[Product { m: *m, input: 0 }], std::slice::from_mut(x), out)
}

/// Rows `first..first + out.len()` of the concatenated products (prepared inputs, rows in range).
fn run_rows(
    products: &[Product<'_>],
    inputs: &[Activation],
    first: usize,
    out: &mut [f32],
) -> Result<()> {
    // Invariant: rows before `first + done` are written or not ours, and product `p` starts at
    // `start`.
    let mut start = 0;
    let mut done = 0;
    for p in products {
        if done == out.len() {
            break;
        }
        let end = start + p.m.rows();
        if end > first + done {
            let local = first + done - start;
            let n = (end - first - done).min(out.len() - done);
            p.m.dot_rows(local, &inputs[p.input], &mut out[done..done + n])?;
            done += n;
        }
        start = end;
    }
    Ok(())
}

/// `out[i·rows + r] = m[r]·xs[tokens[i]]`: one matrix against several inputs (the tokens of a
/// prefill chunk), token-major. Each work item takes a few groups of [`CHUNK_ROWS`] rows
/// ([`multi_chunk_rows`]) and runs them against every input while those rows are in cache, so the
/// matrix is read from memory once per call instead of once per token. Each value is the same dot
/// product [`run`] computes for one input, bit for bit.
pub(super) fn matmul(
    m: &QMatrix<'_>,
    xs: &mut [Activation],
    tokens: &[usize],
    out: &mut [f32],
) -> Result<()> {
    prepare(m, xs, tokens)?;
    let inputs: Vec<&Activation> = tokens.iter().map(|&t| &xs[t]).collect();
    matmul_prepared(m, &inputs, out, true)
}

/// Makes the activations `xs[tokens]` ready for `m` (quantized to the form it consumes), in
/// parallel when `tokens` is every input and there are enough of them to share.
pub(super) fn prepare(m: &QMatrix<'_>, xs: &mut [Activation], tokens: &[usize]) -> Result<()> {
    let n = xs.len();
    let every = tokens.len() == n && tokens.iter().enumerate().all(|(i, &t)| i == t);
    if every && n >= 8 && rayon::current_num_threads() > 1 {
        return xs.par_iter_mut().try_for_each(|x| x.prepare(m));
    }
    for &t in tokens {
        let x = xs.get_mut(t).ok_or_else(|| ModelError::Quant {
            name: m.name().to_owned(),
            reason: format!("input {t} of {n}"),
        })?;
        x.prepare(m)?;
    }
    Ok(())
}

/// [`matmul`] on inputs already [`prepare`]d for `m`, split over rayon's pool when `may_split` and
/// the product is large enough to pay for it ([`PARALLEL_MIN_WORK`]), on the calling thread
/// otherwise (and always for a caller that is itself one of many parallel work items).
pub(super) fn matmul_prepared(
    m: &QMatrix<'_>,
    inputs: &[&Activation],
    out: &mut [f32],
    may_split: bool,
) -> Result<()> {
    let (rows, n) = (m.rows(), inputs.len());
    if n == 0 {
        return Ok(());
    }
    let available = out.len();
    let out = out.get_mut(..rows * n).ok_or_else(|| ModelError::Quant {
        name: m.name().to_owned(),
        reason: format!("{n} inputs x {rows} rows into {available} outputs"),
    })?;
    let parallel =
        may_split && rows * m.cols() * n >= PARALLEL_MIN_WORK && rayon::current_num_threads() > 1;
    if !parallel {
        // All rows at once: `dot_rows_multi` writes them token-major, `out`'s own layout.
        return m.dot_rows_multi(0, inputs, out);
    }
    let chunk = multi_chunk_rows(rows, rayon::current_num_threads());
    let part = |ci: usize| -> Result<Vec<f32>> {
        let first = ci * chunk;
        let nr = chunk.min(rows - first);
        let mut buf = vec![0.0; nr * n];
        m.dot_rows_multi(first, inputs, &mut buf)?;
        Ok(buf)
    };
    let parts: Vec<Vec<f32>> = (0..rows.div_ceil(chunk))
        .into_par_iter()
        .map(part)
        .collect::<Result<_>>()?;
    for (ci, buf) in parts.iter().enumerate() {
        scatter(buf, out, rows, ci * chunk);
    }
    Ok(())
}

/// Rows per work item of a multi-input product on `threads` threads: about eight items per thread
/// for work stealing to balance, in whole groups of [`CHUNK_ROWS`], at most 128. Larger items than
/// a matrix-vector product's because each call prepares every input's blocks for its kernels once
/// (and the kernels run all inputs against each row group while it is in cache whatever the item).
fn multi_chunk_rows(rows: usize, threads: usize) -> usize {
    (rows / (8 * threads.max(1)) / CHUNK_ROWS * CHUNK_ROWS).clamp(CHUNK_ROWS, 8 * CHUNK_ROWS)
}

/// Rows `first..` of every input from `buf` (input-major, `buf.len() / n` rows each) into `out`
/// (input-major, `rows` rows each), `n` being `out.len() / rows`.
fn scatter(buf: &[f32], out: &mut [f32], rows: usize, first: usize) {
    let n = out.len() / rows;
    let nr = buf.len() / n;
    for (i, src) in buf.chunks_exact(nr).enumerate() {
        out[i * rows + first..i * rows + first + nr].copy_from_slice(src);
    }
}
