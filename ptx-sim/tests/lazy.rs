//! `Module::parse_lazy`: the same kernels, lowered at first use, run exactly as the eagerly
//! parsed ones; a broken kernel fails at its first use, naming its line in the whole text;
//! text it cannot split is parsed whole.
mod common;
use common::*;
use ptx_sim::{Arg, LaunchConfig, Module, Sim, SimError};

const RUST_PTX: &str = include_str!("fixtures/rust_kernels.ptx");

/// `row_sum` of the rustc fixture (shuffles, shared memory, a barrier): its output and counters.
fn row_sum(m: &Module) -> (Vec<u32>, ptx_sim::LaunchStats) {
    let mut sim = Sim::new();
    let (rows, cols) = (3usize, 300usize);
    let x: Vec<u32> = (0..rows * cols)
        .map(|i| (((i * 7) % 13) as f32).to_bits())
        .collect();
    let px = upload_u32(&mut sim, &x);
    let lens = upload_u32(&mut sim, &[cols as u32; 4]);
    let out = sim.alloc(rows * 4).unwrap();
    let launch = LaunchConfig {
        grid: [rows as u32, 1, 1],
        block: [128, 1, 1],
        shared_bytes: 16,
    };
    let args = [
        Arg::Ptr(px),
        Arg::U32(cols as u32),
        Arg::Ptr(lens),
        Arg::Ptr(out),
    ];
    let stats = sim.launch(m, "row_sum", launch, &args).unwrap();
    (download_u32(&sim, out, rows), stats)
}

#[test]
fn lazy_kernels_run_as_the_parsed_ones() {
    let eager = Module::parse(RUST_PTX).unwrap();
    let lazy = Module::parse_lazy(RUST_PTX).unwrap();
    assert_eq!(lazy.kernels(), eager.kernels());
    assert_eq!(row_sum(&lazy), row_sum(&eager));
    assert_eq!(lazy.unsupported("saxpy"), eager.unsupported("saxpy"));
}

#[test]
fn a_broken_kernel_fails_at_first_use_on_its_own_line() {
    let good = ".visible .entry good(.param .u64 p)\n{\n\tret;\n}\n";
    let bad = ".visible .entry bad(.param .u64 p)\n{\n\tret;\n\tnot_an_op %r1;\n}\n";
    let src = ptx(&format!("{good}\n{bad}"));
    let bad_line = src.lines().position(|l| l.contains("not_an_op")).unwrap() + 1;
    assert!(
        Module::parse(&src).is_err(),
        "the eager parse rejects the text"
    );
    let m = Module::parse_lazy(&src).expect("the header loads");
    assert_eq!(m.kernels(), ["good", "bad"]);
    let mut sim = Sim::new();
    let p = sim.alloc(4).unwrap();
    sim.launch(&m, "good", cfg(1, 32), &[Arg::Ptr(p)])
        .expect("the good kernel runs");
    match sim.launch(&m, "bad", cfg(1, 32), &[Arg::Ptr(p)]) {
        Err(SimError::Parse { line, .. }) => assert_eq!(line, bad_line),
        other => panic!("expected a parse error at line {bad_line}, got {other:?}"),
    }
    assert!(matches!(
        sim.launch(&m, "none", cfg(1, 32), &[Arg::Ptr(p)]),
        Err(SimError::UnknownKernel(_))
    ));
}

#[test]
fn text_it_cannot_split_is_parsed_whole() {
    let src = ptx(".func f()\n{\n\tret;\n}\n.visible .entry k()\n{\n\tret;\n}\n");
    let m = Module::parse_lazy(&src).expect("parsed whole");
    assert_eq!(m.kernels(), ["k"]);
    assert!(Module::parse_lazy(&ptx(".visible .entry k(\n{\n")).is_err());
}
