//! The sim executor on a small model: per-node counters and the Decoder argument checks.

mod support;

use ingot_gguf::GgufFile;
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::{BufferKind, NodeArg, PlanOptions};
use ingot_model::{Decoder, ModelError};
use ingot_synth::{Layout, QuantMix};

fn model(dir: &std::path::Path) -> GgufFile {
    let path = dir.join("model.gguf");
    support::write_model(&path, &support::tiny64(), Layout::Mla, QuantMix::Q4KM, 3);
    GgufFile::open(&path).expect("open")
}

#[test]
fn counters_and_argument_checks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = model(dir.path());
    let mut exec = SimExecutor::load(&file, PlanOptions::for_ctx(8)).expect("load");
    exec.step(510, 0).expect("step 0");
    let plan = exec.plan().clone();
    let stats = exec.node_stats();
    assert_eq!(stats.len(), plan.nodes.len());
    let mut checked = 0;
    for (n, s) in plan.nodes.iter().zip(stats) {
        assert!(s.warp_instructions > 0, "{} ran no instruction", n.label);
        // A plain or grouped gemv reads its whole weight at least once.
        if n.kernel.starts_with("gemv_") && n.kernel != "gemv_f32" {
            let NodeArg::Buf(w) = n.args[0] else {
                panic!("{}: weight first", n.label)
            };
            let decl = plan.buffer(w.buf);
            assert!(matches!(decl.kind, BufferKind::Weight { .. }));
            assert!(
                s.global_bytes_read >= decl.bytes,
                "{}: read {} bytes of a {}-byte weight",
                n.label,
                s.global_bytes_read,
                decl.bytes
            );
            checked += 1;
        }
    }
    // attn_q, attn_kv_a_mqa, attn_k_b, attn_v_b per layer, and lm_head.
    assert!(checked >= 3 * 4, "{checked} gemv nodes checked");

    let vocab = exec.config().vocab as u32;
    assert!(matches!(
        exec.decode(vocab, 1),
        Err(ModelError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        exec.decode(1, 2),
        Err(ModelError::PositionGap { pos: 2, filled: 1 })
    ));
    assert!(matches!(
        exec.decode(1, 8),
        Err(ModelError::PositionOutOfRange { .. })
    ));
    // Rewinding is allowed: position 0 again gives the first step's logits bit for bit.
    let first = exec.logits().to_vec();
    exec.decode(84, 1).expect("step 1");
    let again = exec.decode(510, 0).expect("rewind").to_vec();
    assert_eq!(first, again);
}
