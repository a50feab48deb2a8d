//! Measured node times beside the prediction (`ingot plan --measure`): the one part of the
//! plan table that is a **measurement**, taken on a GPU by
//! [`ingot_graph::exec::cuda::CudaExecutor::measure_step`].
//!
//! Per node the median over the repetitions of its event-to-event time; per step the sum of
//! those medians, the median graph replay and the median eager step; per kernel family (nodes
//! grouped by kernel name) the node count, the predicted and measured sums and their ratio,
//! the figures a fit of the model's constants starts from.

use std::collections::BTreeMap;

use ingot_graph::exec::cuda::StepTiming;
use ingot_graph::Plan;

use super::measurement::{Family, Measurement};
use super::table::PlanTable;
use super::PredictError;
use crate::gpu::median;

/// Median of `v` in seconds from milliseconds; `None` when empty.
fn median_s(v: impl IntoIterator<Item = f32>) -> Option<f64> {
    let mut ms: Vec<f64> = v.into_iter().map(f64::from).collect();
    median(&mut ms).map(|m| m * 1e-3)
}

/// Puts the measured times of `timing` (taken on `device` running `plan`) beside the rows of
/// `table`. The table's plan and the device's must list the same kernels and labels in the
/// same order; returns one warning per node whose grid differs (the table's plan was sized for
/// another SM count: pass the card that matches the device to `--predict`).
pub fn attach(
    table: &mut PlanTable,
    device: &str,
    plan: &Plan,
    timing: &StepTiming,
) -> Result<Vec<String>, PredictError> {
    if plan.nodes.len() != table.rows.len() {
        return Err(PredictError::Measured(format!(
            "the plan on {device} has {} nodes, the table's {}",
            plan.nodes.len(),
            table.rows.len()
        )));
    }
    if let Some(bad) = timing.node_ms.iter().find(|r| r.len() != plan.nodes.len()) {
        return Err(PredictError::Measured(format!(
            "a repetition timed {} nodes of {}",
            bad.len(),
            plan.nodes.len()
        )));
    }
    let descs = plan.check_committed()?;
    let mut warnings = Vec::new();
    for (i, ((n, d), row)) in plan.nodes.iter().zip(&descs).zip(&table.rows).enumerate() {
        if n.kernel != row.kernel || n.label != row.label {
            return Err(PredictError::Measured(format!(
                "node {i} is {} `{}` on {device} but {} `{}` in the table",
                n.kernel, n.label, row.kernel, row.label
            )));
        }
        let grid = d.grid(n.items);
        if grid != row.grid {
            warnings.push(format!(
                "node {i} ({}): grid {:?} on {device}, {:?} in the table",
                n.label, grid, row.grid
            ));
        }
    }
    for (i, row) in table.rows.iter_mut().enumerate() {
        row.measured_s = median_s(timing.node_ms.iter().map(|r| r[i]));
    }
    let mut by_kernel: BTreeMap<&str, Family> = BTreeMap::new();
    for row in &table.rows {
        let f = by_kernel.entry(&row.kernel).or_insert_with(|| Family {
            kernel: row.kernel.clone(),
            count: 0,
            predicted_s: row.time.as_ref().map(|_| 0.0),
            measured_s: 0.0,
            ratio: None,
        });
        f.count += 1;
        f.measured_s += row.measured_s.unwrap_or(0.0);
        if let (Some(p), Some(t)) = (f.predicted_s.as_mut(), row.time.as_ref()) {
            *p += t.total_s;
        }
    }
    let mut families: Vec<Family> = by_kernel.into_values().collect();
    for f in &mut families {
        f.ratio = f.predicted_s.filter(|&p| p > 0.0).map(|p| f.measured_s / p);
    }
    families.sort_by(|a, b| b.measured_s.total_cmp(&a.measured_s));
    table.measurement = Some(Measurement {
        device: device.to_string(),
        reps: timing.node_ms.len(),
        host_bound_reps: timing.host_bound_reps,
        node_sum_s: table.rows.iter().filter_map(|r| r.measured_s).sum(),
        graph_step_s: median_s(timing.graph_ms.iter().copied()),
        graph_replays: timing.replays,
        eager_step_s: median_s(timing.eager_ms.iter().copied()),
        predicted_step_s: table.prediction.as_ref().map(|p| p.step_s),
        families,
    });
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::{card_named, plan_table, TableOptions, DEFAULT_CONSTANTS};
    use ingot_graph::planner::build_plan_for;
    use ingot_graph::PlanOptions;
    use ingot_model::ModelConfig;
    use ingot_synth::{header, Layout, Preset, QuantMix, SynthOptions};

    #[test]
    fn median_in_seconds() {
        assert_eq!(median_s([3.0, 1.0, 2.0]), Some(2e-3));
        assert_eq!(median_s([]), None);
    }

    /// The tiny model's table for an H200, and the plan a 132-SM device would run.
    fn tiny() -> (PlanTable, Plan) {
        let h = header(&SynthOptions {
            preset: Preset::Tiny,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 0,
        })
        .unwrap();
        let card = card_named("h200").unwrap();
        let opts = TableOptions {
            ctx: 32,
            depth: 3,
            card: Some(card),
            max_blocks: 2,
            constants: DEFAULT_CONSTANTS,
            expert_cache: None,
            cache_type: Default::default(),
            prefill: None,
        };
        let table = plan_table(&h, opts).unwrap();
        let config = ModelConfig::from_gguf(&h).unwrap();
        let plan = build_plan_for(&config, &h, PlanOptions::for_device(32, card.sms)).unwrap();
        (table, plan)
    }

    #[test]
    fn medians_sit_beside_the_rows_and_sum_per_kernel() {
        let (mut table, plan) = tiny();
        let n = plan.nodes.len();
        // Node i takes (i + 1) us times 1, 3 and 2 in the three reps: median 2 (i + 1) us.
        let timing = StepTiming {
            node_ms: [1.0f32, 3.0, 2.0]
                .iter()
                .map(|k| (0..n).map(|i| (i as f32 + 1.0) * 1e-3 * k).collect())
                .collect(),
            eager_ms: vec![5.0, 4.0, 6.0],
            graph_ms: vec![1.0, 3.0, 2.0],
            replays: 8,
            host_bound_reps: 0,
            filler_copies: 16,
        };
        let warnings = attach(&mut table, "Test GPU", &plan, &timing).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        for (i, r) in table.rows.iter().enumerate() {
            let m = r.measured_s.unwrap();
            assert!((m - 2e-6 * (i as f64 + 1.0)).abs() < 1e-9, "node {i}: {m}");
        }
        let m = table.measurement.as_ref().unwrap();
        let sum = 1e-6 * (n * (n + 1)) as f64;
        assert!(
            (m.node_sum_s - sum).abs() < 1e-7,
            "{} vs {sum}",
            m.node_sum_s
        );
        assert_eq!(m.graph_step_s, Some(2e-3));
        assert_eq!(m.eager_step_s, Some(5e-3));
        assert_eq!(m.reps, 3);
        assert_eq!(m.families.iter().map(|f| f.count).sum::<usize>(), n);
        let fam_sum: f64 = m.families.iter().map(|f| f.measured_s).sum();
        assert!((fam_sum - m.node_sum_s).abs() < 1e-9);
        let pred_sum: f64 = m.families.iter().map(|f| f.predicted_s.unwrap()).sum();
        let step = table.prediction.as_ref().unwrap().step_s;
        assert!((pred_sum - step).abs() < 1e-9 * step.max(1.0));
        for f in &m.families {
            let r = f.ratio.unwrap();
            assert!((r - f.measured_s / f.predicted_s.unwrap()).abs() < 1e-12);
        }
        assert!(m
            .families
            .windows(2)
            .all(|w| w[0].measured_s >= w[1].measured_s));
        let text = table.to_string();
        assert!(
            text.lines().next().unwrap().ends_with("measured us"),
            "{text}"
        );
        assert!(
            text.contains("MEASURED on Test GPU (median of 3 reps)"),
            "{text}"
        );
        assert!(text.contains("meas/pred"), "{text}");
        let v = serde_json::to_value(&table).unwrap();
        assert!(v["rows"][0]["measured_s"].is_number());
        assert_eq!(v["measurement"]["device"], "Test GPU");
        assert_eq!(v["measurement"]["graph_replays"], 8);
    }

    #[test]
    fn a_table_of_another_plan_is_refused() {
        let (mut table, mut plan) = tiny();
        let n = plan.nodes.len();
        let timing = StepTiming {
            node_ms: vec![vec![1e-3; n]],
            ..StepTiming::default()
        };
        plan.nodes[1].label = "not the table's".into();
        let e = attach(&mut table, "Test GPU", &plan, &timing).unwrap_err();
        assert!(e.to_string().contains("node 1 is"), "{e}");
        plan.nodes.pop();
        let e = attach(&mut table, "Test GPU", &plan, &timing).unwrap_err();
        assert!(e.to_string().contains("nodes"), "{e}");
        assert!(table.measurement.is_none() && table.rows.iter().all(|r| r.measured_s.is_none()));
    }

    #[test]
    fn without_a_prediction_the_ratios_are_absent() {
        let (mut table, plan) = tiny();
        for r in &mut table.rows {
            r.time = None;
        }
        table.prediction = None;
        let n = plan.nodes.len();
        let timing = StepTiming {
            node_ms: vec![vec![1e-3; n]],
            ..StepTiming::default()
        };
        attach(&mut table, "Test GPU", &plan, &timing).unwrap();
        let m = table.measurement.as_ref().unwrap();
        assert!(m
            .families
            .iter()
            .all(|f| f.ratio.is_none() && f.predicted_s.is_none()));
        assert_eq!(m.graph_step_s, None);
        assert!(table.to_string().contains("graph replay - us"));
    }
}
