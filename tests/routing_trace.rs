//! `ingot run --trace-routing`, `ingot replay` and `ingot slice` as a user runs them. The trace has
//! one record per token run (prompt tokens as prefill, generated tokens as decode, consecutive
//! positions), valid routing in every record, and numpy memory-maps it
//! (tests/read_routing_trace.py, the recipe of docs/routing-trace.md) to the same values ingot's
//! own reader gives. A trace from another model is refused by name; replay and slice print their
//! tables, refuse bad input in one line, and a sliced file decodes.

mod support;

use std::path::Path;
use std::process::Command;

use ingot_gguf::GgufFile;
use ingot_model::trace::{Phase, Trace};
use serde_json::Value;
use support::EXE;

fn ingot(args: &[&str]) -> std::process::Output {
    let out = Command::new(EXE).args(args).output().expect("run ingot");
    assert!(
        out.status.success(),
        "ingot {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_routing_trace_records_every_token_and_numpy_maps_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let m = model.to_str().unwrap();
    ingot(&[
        "synth", "--preset", "tiny", "--quant", "q4_k_m", "--seed", "3", "-o", m,
    ]);
    let trace_path = dir.path().join("run.rtr");
    let t = trace_path.to_str().unwrap();
    let (prompt_text, n_predict) = ("The quick brown fox", 7);
    ingot(&[
        "run",
        "-m",
        m,
        "-p",
        prompt_text,
        "-n",
        "7",
        "--temp",
        "0",
        "--backend",
        "cpu",
        "--ctx",
        "64",
        "--trace-routing",
        t,
    ]);

    let trace = Trace::open(&trace_path).unwrap();
    let file = GgufFile::open(&model).unwrap();
    trace.check_model(file.header()).unwrap();
    let h = &trace.header;
    assert_eq!(
        (h.n_expert, h.n_expert_used, h.moe_layers.clone()),
        (16, 6, vec![1, 2])
    );
    let records: Vec<_> = trace.records().map(Result::unwrap).collect();
    let prefill = records.iter().filter(|r| r.phase == Phase::Prefill).count();
    // The last generated token is sampled but never run through the model.
    assert_eq!(records.len() - prefill, n_predict - 1);
    assert!(prefill >= 2, "{prefill} prompt tokens");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.pos as usize, i);
        assert_eq!(r.phase == Phase::Prefill, i < prefill);
        for layer in r.routing.chunks(h.n_expert_used) {
            let mut ids: Vec<u32> = layer.iter().map(|&(e, _)| e).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(
                ids.len(),
                h.n_expert_used,
                "record {i}: an expert chosen twice: {layer:?}"
            );
            // tiny routes by softmax over 16 experts, weights as scored: each in (0, 1), in routing
            // order.
            assert!(
                layer.iter().all(|&(_, w)| w > 0.0 && w < 1.0),
                "record {i}: {layer:?}"
            );
            assert!(
                layer.windows(2).all(|p| p[0].1 >= p[1].1),
                "record {i}: not in order: {layer:?}"
            );
        }
    }

    let Some(mut python) = support::python("numpy") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/read_routing_trace.py");
    let out = python
        .arg(&script)
        .arg(&trace_path)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "read_routing_trace.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let np: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    assert_eq!(np["count"], records.len());
    for (i, r) in records.iter().enumerate() {
        assert_eq!(np["pos"][i], r.pos);
        assert_eq!(np["token"][i], r.token);
        assert_eq!(np["phase"][i], r.phase as u8);
        for (j, &(e, w)) in r.routing.iter().enumerate() {
            let (l, k) = (j / h.n_expert_used, j % h.n_expert_used);
            assert_eq!(np["experts"][i][l][k], e, "record {i} pair {j}");
            // f32 -> Python float -> JSON -> f64 may move the last f64 bit; as f32 it is exact.
            let np_w = np["weights"][i][l][k].as_f64().expect("a number") as f32;
            assert_eq!(np_w, w, "record {i} pair {j}");
        }
    }

    // Another model (another seed: same shapes, other name) is refused by name.
    let other = dir.path().join("other.gguf");
    ingot(&[
        "synth",
        "--preset",
        "tiny",
        "--quant",
        "q4_k_m",
        "--seed",
        "4",
        "-o",
        other.to_str().unwrap(),
    ]);
    let other = GgufFile::open(&other).unwrap();
    let err = trace.check_model(other.header()).unwrap_err().to_string();
    assert!(err.contains("recorded on model"), "{err}");
}

/// `ingot replay` and `ingot slice` as a user runs them on a recorded trace: a table per MoE layer
/// and a PREDICTED line; bad input ends in one line naming the problem, exit code 1, nothing
/// written.
#[test]
fn replay_and_slice_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let m = model.to_str().unwrap();
    ingot(&[
        "synth", "--preset", "tiny", "--quant", "q4_k_m", "--seed", "3", "-o", m,
    ]);
    let trace = dir.path().join("t.rtr");
    let t = trace.to_str().unwrap();
    ingot(&[
        "run",
        "-m",
        m,
        "-p",
        "Hello there",
        "-n",
        "12",
        "--temp",
        "0",
        "--backend",
        "cpu",
        "--trace-routing",
        t,
    ]);
    let out = ingot(&["replay", t, "--cache", "8", "--policy", "belady", "-m", m]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| 1 |") && text.contains("| 2 |"), "{text}");
    assert!(
        text.contains("PREDICTED (model, not a measurement)"),
        "{text}"
    );

    let refused = |args: &[&str], want: &str| {
        let out = Command::new(EXE).args(args).output().expect("run ingot");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(want),
            "{args:?}: {err:?} does not say {want:?}"
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: more than one line: {err}"
        );
    };
    refused(&["replay", t, "--cache", "2"], "below the 6 experts");
    refused(
        &["replay", t, "--cache", "8", "--warmup", "999"],
        "nothing would be measured",
    );
    refused(&["replay", m, "--cache", "8"], "not a routing trace");
    let keep = dir.path().join("keep.json");
    std::fs::write(&keep, r#"{"1": [0, 1, 2, 3, 4, 5, 6, 7]}"#).unwrap();
    let out_model = dir.path().join("half.gguf");
    let (k, o) = (keep.to_str().unwrap(), out_model.to_str().unwrap());
    refused(&["slice", m, o, "--keep", k], "MoE layer 2 is not named");
    assert!(!out_model.exists());
    std::fs::write(
        &keep,
        r#"{"1": [0, 1, 2, 3, 4, 5, 6, 7], "2": [8, 9, 10, 11, 12, 13, 14, 15]}"#,
    )
    .unwrap();
    ingot(&["slice", m, o, "--keep", k]);
    let out = ingot(&[
        "run",
        "-m",
        o,
        "-p",
        "Hello",
        "-n",
        "4",
        "--temp",
        "0",
        "--backend",
        "cpu",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("4 tokens generated"));
}
