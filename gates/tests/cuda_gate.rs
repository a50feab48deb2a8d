//! `ingot gate --backend cuda` on a tiny model: the captured CUDA graph must pick the oracle's
//! tokens (near-ties excepted). Without a GPU the executor must fail with the typed "no GPU"
//! error instead of panicking; `scripts/device-check.sh` runs this binary on a GPU machine.

#[path = "../../graph/tests/support/mod.rs"]
mod support;

use ingot_gates::{run_gate, Band, GateBackend, GateError, GateOptions};
use ingot_gguf::GgufFile;
use ingot_graph::ExecError;
use ingot_synth::{Layout, QuantMix};

fn gate(layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &support::tiny64(), layout, mix, 7);
    let file = GgufFile::open(&path).expect("open");
    let opts = GateOptions {
        backend: GateBackend::Cuda,
        prompt: vec![510, 84, 104, 101, 32, 113],
        steps: 16,
        band: Band::default(),
    };
    match run_gate(&file, &opts) {
        Ok(report) => {
            println!("tiny64 {layout:?} {mix} on the GPU\n{report}");
            assert!(report.passed(), "cuda gate failed");
        }
        Err(GateError::Backend {
            source:
                ExecError::Cuda(
                    e @ (ingot_cuda::CudaError::NoDriver | ingot_cuda::CudaError::NoDevice { .. }),
                ),
            ..
        }) => eprintln!("no GPU here, the typed error is: {e}"),
        Err(e) => panic!("cuda gate could not run: {e}"),
    }
}

#[test]
fn tiny64_mla_q4_k_m_cuda() {
    gate(Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny64_legacy_q4_k_m_cuda() {
    gate(Layout::Legacy, QuantMix::Q4KM);
}

#[test]
fn tiny64_mla_q3_k_m_cuda() {
    gate(Layout::Mla, QuantMix::Q3KM);
}
