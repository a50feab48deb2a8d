//! Judging one step: top-1 agreement, logit distance, near-ties, per-layer drift.

use std::fmt;

use crate::band::Band;

/// Outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same top-1 and logits within the band.
    Match,
    /// Different top-1, but the oracle's top-2 margin is inside the band: either choice is
    /// within the backend's precision. Not a failure.
    NearTie,
    /// Different top-1 with a clear oracle margin, logits outside the band, or (where hidden
    /// states are compared) a layer's residual outside the hidden band.
    Mismatch,
    /// Out of the band, but the first layer out of the hidden-state band is a MoE layer whose
    /// oracle routing margin is below [`Band::route_margin`]: the backend may have chosen
    /// another expert within its precision (see `band.rs`). Not a failure.
    RouteTie,
}

/// The first layer whose residual stream left the band.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerDrift {
    /// `None` for the embedding (before layer 0).
    pub layer: Option<usize>,
    /// `‖x_backend − x_oracle‖ / ‖x_oracle‖`.
    pub rel_err: f32,
}

/// One decode step of a gate run.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    pub pos: usize,
    /// Token fed at `pos` (the same to both decoders).
    pub token: u32,
    pub oracle_top1: u32,
    pub backend_top1: u32,
    /// Oracle logit of its top-1 minus its top-2.
    pub oracle_margin: f32,
    pub max_abs_diff: f32,
    /// The band the step was judged with (absolute logits).
    pub logit_band: f32,
    pub verdict: Verdict,
    /// Relative error of every layer's residual (when the backend exposes them).
    pub layer_rel_err: Vec<f32>,
    /// First layer out of the hidden-state band, if any.
    pub first_drift: Option<LayerDrift>,
    /// The oracle's routing margin at that layer, when it made the step a
    /// [`Verdict::RouteTie`].
    pub route_margin: Option<f32>,
}

/// Index of the largest value (lowest index on ties) and its margin over the runner-up.
pub fn top2(logits: &[f32]) -> (u32, f32) {
    let mut best = (0usize, f32::NEG_INFINITY);
    let mut second = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best.1 {
            second = best.1;
            best = (i, v);
        } else if v > second {
            second = v;
        }
    }
    (best.0 as u32, best.1 - second)
}

/// `‖a − b‖ / ‖b‖` (0 when both are zero; infinite for a non-finite value or a length mismatch).
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    let (mut d, mut n) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        d += (x as f64 - y as f64).powi(2);
        n += (y as f64).powi(2);
    }
    if !d.is_finite() {
        return f32::INFINITY;
    }
    if n == 0.0 {
        return if d == 0.0 { 0.0 } else { f32::INFINITY };
    }
    (d / n).sqrt() as f32
}

/// Residual streams of one step, `[0]` the embedding and `[1 + il]` after layer `il`.
pub type Hidden<'a> = &'a [Vec<f32>];

/// Judges one step from both decoders' logits and, when available, their per-layer residual
/// streams `(backend, oracle)`.
pub fn judge_step(
    band: &Band,
    pos: usize,
    token: u32,
    oracle: &[f32],
    backend: &[f32],
    hidden: Option<(Hidden<'_>, Hidden<'_>)>,
) -> StepReport {
    let (oracle_top1, oracle_margin) = top2(oracle);
    let (backend_top1, _) = top2(backend);
    let max_abs_diff = if oracle.len() == backend.len() {
        oracle
            .iter()
            .zip(backend)
            .map(|(a, b)| (a - b).abs())
            .fold(
                0f32,
                |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
            )
    } else {
        f32::INFINITY
    };
    let logit_band = band.logit_band(oracle);
    let mut verdict = if max_abs_diff > logit_band {
        Verdict::Mismatch
    } else if oracle_top1 == backend_top1 {
        Verdict::Match
    } else if oracle_margin < logit_band {
        Verdict::NearTie
    } else {
        Verdict::Mismatch
    };
    let (layer_rel_err, first_drift) = match hidden {
        Some((b, o)) => {
            let errs: Vec<f32> = b.iter().zip(o).map(|(b, o)| rel_err(b, o)).collect();
            let first = errs
                .iter()
                // NaN (a non-finite hidden state) is out of band too.
                .position(|&e| e.is_nan() || e > band.hidden_rel)
                .map(|i| LayerDrift {
                    layer: i.checked_sub(1),
                    rel_err: errs[i],
                });
            (errs, first)
        }
        None => (Vec::new(), None),
    };
    // A residual out of its band is a defect even when the logits happen to land inside
    // theirs: only a measured routing near-tie excuses it ([`excuse_route_tie`]).
    if first_drift.is_some() {
        verdict = Verdict::Mismatch;
    }
    StepReport {
        pos,
        token,
        oracle_top1,
        backend_top1,
        oracle_margin,
        max_abs_diff,
        logit_band,
        verdict,
        layer_rel_err,
        first_drift,
        route_margin: None,
    }
}

/// Turns a [`Verdict::Mismatch`] into [`Verdict::RouteTie`] when its first out-of-band layer
/// is a MoE layer whose oracle routing margin (`route_margins[il]`, as
/// `ingot_model::DecodeTrace::route_margins`) is below [`Band::route_margin`].
pub fn excuse_route_tie(band: &Band, step: &mut StepReport, route_margins: &[Option<f32>]) {
    let Some(LayerDrift {
        layer: Some(il), ..
    }) = step.first_drift
    else {
        return;
    };
    let near = matches!(route_margins.get(il), Some(Some(m)) if *m < band.route_margin);
    if step.verdict == Verdict::Mismatch && near {
        step.verdict = Verdict::RouteTie;
        step.route_margin = route_margins[il];
    }
}

impl fmt::Display for StepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = match self.verdict {
            Verdict::Match => "ok",
            Verdict::NearTie => "near-tie",
            Verdict::Mismatch => "MISMATCH",
            Verdict::RouteTie => "route-tie",
        };
        write!(
            f,
            "pos {:4} token {:6}: oracle {:6} backend {:6} margin {:7.4} max|dlogit| {:7.4} (band {:.3}) {verdict}",
            self.pos,
            self.token,
            self.oracle_top1,
            self.backend_top1,
            self.oracle_margin,
            self.max_abs_diff,
            self.logit_band
        )?;
        if let Some(worst) = self.layer_rel_err.iter().copied().reduce(f32::max) {
            write!(f, " max layer rel err {worst:.4}")?;
        }
        if let Some(d) = &self.first_drift {
            match d.layer {
                None => write!(f, "; embedding out of band (rel err {:.4})", d.rel_err)?,
                Some(l) => write!(
                    f,
                    "; first layer out of band: blk.{l} (rel err {:.4})",
                    d.rel_err
                )?,
            }
        }
        if let Some(m) = self.route_margin {
            write!(f, ", oracle routing margin there {m:.4}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits(top: usize, margin: f32) -> Vec<f32> {
        // σ of these logits is about 1, so the default band is its 0.5 floor.
        let mut v: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 64) as f32 / 32.0) - 1.0)
            .collect();
        v[top] = 3.0;
        v[(top + 1) % 64] = 3.0 - margin;
        v
    }

    #[test]
    fn verdicts() {
        let band = Band::default();
        let o = logits(5, 1.0);
        let same = judge_step(&band, 0, 1, &o, &o, None);
        assert_eq!((same.verdict, same.max_abs_diff), (Verdict::Match, 0.0));

        // Backend prefers the runner-up by a small move; the oracle margin (0.1) is under the band.
        let o = logits(5, 0.1);
        let mut b = o.clone();
        b[6] += 0.2;
        let tie = judge_step(&band, 0, 1, &o, &b, None);
        assert_eq!(
            (tie.oracle_top1, tie.backend_top1, tie.verdict),
            (5, 6, Verdict::NearTie)
        );

        // A clear oracle margin (0.6, above the 0.5 band) overturned by moves (0.35) that are
        // each inside the band: still a mismatch.
        let o = logits(5, 0.6);
        let mut b = o.clone();
        b[5] -= 0.35;
        b[6] += 0.35;
        let flipped = judge_step(&band, 0, 1, &o, &b, None);
        assert_eq!(
            (flipped.backend_top1, flipped.verdict),
            (6, Verdict::Mismatch)
        );

        let o = logits(5, 1.0);

        // Same top-1 but logits far outside the band.
        let mut b = o.clone();
        b[40] += 2.0;
        assert_eq!(
            judge_step(&band, 0, 1, &o, &b, None).verdict,
            Verdict::Mismatch
        );

        // NaN is never inside a band.
        let mut b = o.clone();
        b[3] = f32::NAN;
        assert_eq!(
            judge_step(&band, 0, 1, &o, &b, None).verdict,
            Verdict::Mismatch
        );
    }

    #[test]
    fn first_layer_out_of_band() {
        let band = Band::default();
        let o = logits(5, 1.0);
        let oracle = vec![vec![1.0f32; 8]; 4];
        let mut backend = oracle.clone();
        backend[1][0] = 1.1; // 3.5 % off: inside the 15 % band
        backend[2][0] = 3.0; // 71 % off: out
        backend[3][0] = 3.0;
        let r = judge_step(&band, 0, 1, &o, &o, Some((&backend, &oracle)));
        assert_eq!(r.first_drift.as_ref().map(|d| d.layer), Some(Some(1)));
        assert_eq!(r.verdict, Verdict::Mismatch);
        assert!(
            r.to_string().contains("first layer out of band: blk.1"),
            "{r}"
        );
        // The embedding itself differing is reported as such.
        backend[0][0] = f32::NAN;
        let r = judge_step(&band, 0, 1, &o, &o, Some((&backend, &oracle)));
        assert_eq!(r.first_drift.map(|d| d.layer), Some(None));
    }

    #[test]
    fn routing_near_tie_is_excused_only_at_its_layer() {
        let band = Band::default();
        let o = logits(5, 1.0);
        let mut b = o.clone();
        b[40] += 2.0;
        let oracle = vec![vec![1.0f32; 8]; 4];
        let mut backend = oracle.clone();
        backend[2][0] = 3.0; // layer 1 out of band
        let judged = || judge_step(&band, 0, 1, &o, &b, Some((&backend, &oracle)));
        for (margins, want) in [
            (vec![None, Some(0.005), Some(0.3)], Verdict::RouteTie),
            (vec![None, Some(0.3), Some(0.005)], Verdict::Mismatch),
            (vec![Some(0.005), None, Some(0.005)], Verdict::Mismatch),
            (vec![], Verdict::Mismatch),
        ] {
            let mut r = judged();
            assert_eq!(r.verdict, Verdict::Mismatch);
            excuse_route_tie(&band, &mut r, &margins);
            assert_eq!(r.verdict, want, "{margins:?}");
        }
        // A step that matched stays a match whatever the margins.
        let mut r = judge_step(&band, 0, 1, &o, &o, Some((&oracle, &oracle)));
        excuse_route_tie(&band, &mut r, &[None, Some(0.0)]);
        assert_eq!(r.verdict, Verdict::Match);
        // Logits inside the band do not hide a layer out of it: a mismatch, excused only by a
        // near-tie at that layer.
        let mut r = judge_step(&band, 0, 1, &o, &o, Some((&backend, &oracle)));
        assert_eq!(r.verdict, Verdict::Mismatch);
        excuse_route_tie(&band, &mut r, &[None, Some(0.3)]);
        assert_eq!(r.verdict, Verdict::Mismatch);
        excuse_route_tie(&band, &mut r, &[None, Some(0.0)]);
        assert_eq!(r.verdict, Verdict::RouteTie);
    }
}
