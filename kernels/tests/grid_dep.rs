//! The committed PTX rewritten for programmatic dependent launch (`ingot_kernels::grid_dep`):
//! every kernel gains exactly one `griddepcontrol.wait`, as its first instruction after its
//! declarations or, in a kernel that prefetches its weights first, at its marker, with nothing
//! but prefetches, arithmetic and parameter reads before it.

use ingot_kernels::grid_dep::{for_sm90, WAIT_MARKER};
use ingot_kernels::PTX;

/// `(name, body)` of every `.entry` of `ptx`.
fn entries(ptx: &str) -> Vec<(&str, &str)> {
    ptx.split(".entry ")
        .skip(1)
        .map(|b| (&b[..b.find('(').unwrap_or(0)], b))
        .collect()
}

/// Whether a PTX line (one instruction, or an inline-asm group `{ ...; ...; }`) may touch global
/// memory: a global or generic load, store, atomic or asynchronous copy (`ld.param`,
/// `ld.shared`, `st.shared` and `prefetch` do not).
fn may_touch_global(line: &str) -> bool {
    line.split([';', '{', '}']).any(|stmt| {
        let mut tokens = stmt.split_whitespace();
        let mut op = tokens.next().unwrap_or("");
        if op.starts_with('@') {
            op = tokens.next().unwrap_or("");
        }
        let memory = ["ld.", "ldu.", "st.", "atom.", "red.", "cp.async"]
            .iter()
            .any(|p| op.starts_with(p));
        memory
            && ![".param", ".shared", ".local", ".const"]
                .iter()
                .any(|s| op.contains(s))
    })
}

#[test]
fn the_committed_kernels_each_wait_once_first_or_after_their_prefetches() {
    let out = for_sm90(PTX).expect("the committed PTX rewrites");
    let entries86 = entries(PTX);
    assert!(entries86.len() > 100, "{} entries", entries86.len());
    assert_eq!(out.matches("griddepcontrol.wait;").count(), entries86.len());
    assert_eq!(
        out.matches("griddepcontrol.launch_dependents;").count(),
        entries86.len()
    );
    assert_eq!(out.matches(".target sm_90\n").count(), 1);
    assert!(!out.contains("sm_86"));
    let mut prefetching = Vec::new();
    for ((name, body), (_, body86)) in entries(&out).into_iter().zip(entries86) {
        let open = body.find("\n{\n").expect("a body") + 3;
        let instructions: Vec<&str> = body[open..]
            .lines()
            .map(str::trim)
            .filter(|l| {
                !(l.is_empty()
                    || l.starts_with("//")
                    || l.starts_with(".reg")
                    || l.starts_with(".shared")
                    || l.starts_with(".local"))
            })
            .collect();
        let wait = instructions
            .iter()
            .position(|&l| l == "griddepcontrol.wait;")
            .expect("a wait");
        if !body86.lines().any(|l| l.trim() == WAIT_MARKER) {
            assert_eq!(
                wait, 0,
                "{name}: the inserted wait is the first instruction"
            );
            continue;
        }
        // A prefetching kernel: its dependents may launch right after its wait, and nothing
        // before the wait touches global memory (in text order; ptx-sim checks the executed
        // order, `a_load_before_the_wait_faults_in_the_simulator`).
        assert_eq!(
            instructions[wait + 1],
            "griddepcontrol.launch_dependents;",
            "{name}"
        );
        let before = &instructions[..wait];
        assert!(
            before.iter().any(|l| l.contains("prefetch.global.L2 ")),
            "{name}: a marked kernel prefetches before its wait"
        );
        if let Some(l) = before.iter().find(|l| may_touch_global(l)) {
            panic!("{name}: `{l}` before the wait");
        }
        prefetching.push(name);
    }
    // The decode gemvs and the MoE FFN kernels (whose shared experts and dense FFNs prefetch)
    // are the ones that stream most of a step's weights: each family must be among them.
    for family in [
        "gemv_q4k_q8_1",
        "gemv_grouped_q5_0_q8_1",
        "gemv_grouped_q4k_q8_1_out",
        "gemv2_q6k_q8_1",
        "gemv2_rope_q4k_q8_1",
        "gemv2_norm_q4k_q8_1",
        "gemv_argmax_q6k_q8_1",
        "moe_gate_up_q4k",
        "moe_down_q8_0_q6k",
    ] {
        assert!(prefetching.contains(&family), "{family} does not prefetch");
    }
}

#[test]
fn the_global_access_rule_reads_instruction_lines() {
    for l in [
        "ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd5];",
        "@%p1 ld.global.nc.u32 %r2, [%rd3];",
        "ld.u32 %r2, [%rd3];",
        "st.global.f32 [%rd1], %f2;",
        "atom.global.add.u32 %r1, [%rd2], 1;",
        "{ .reg .pred p; setp.ne.u32 p, %r1, 0; @p ld.global.nc.u32 %r2, [%rd3]; }",
    ] {
        assert!(may_touch_global(l), "{l}");
    }
    for l in [
        "ld.param.b64 %rd10, [k_param_0];",
        "ld.shared.f32 %f1, [%r2];",
        "{ .reg .pred p; setp.ne.u32 p, %r50, 0; @p prefetch.global.L2 [%rd16]; }",
        "mad.lo.s64 %rd19, %rd1, %rd18, %rd9;",
        "cvta.to.global.u64 %rd9, %rd10;",
    ] {
        assert!(!may_touch_global(l), "{l}");
    }
}

/// The rule holds in the executed order too, and breaking it on purpose is caught: the rewritten
/// `gemv_q4k_q8_1` (prefetches, then the wait) runs in ptx-sim, and the same kernel with a load
/// of its activation (what the predecessor writes) put before the wait faults there.
#[cfg(feature = "sim")]
#[test]
fn a_load_before_the_wait_faults_in_the_simulator() {
    use ingot_abi::blocks::{BlockQ4K, BlockQ8_1};
    use ingot_kernels::ops::gemv::GemvType;
    use ptx_sim::{Arg, FaultKind, LaunchConfig, Module, Sim, SimError};

    const KERNEL: &str = "gemv_q4k_q8_1";
    let desc = GemvType::Q4K.plain().desc();
    assert_eq!(desc.name, KERNEL);
    let out = for_sm90(PTX).expect("the committed PTX rewrites");
    // One block of 8 rows of 256 columns (one Q4_K super-block per row); zeros suffice: the
    // kernel's control flow does not depend on the values.
    let (rows, cols) = (8usize, 256usize);
    let run = |text: &str| {
        let module = Module::parse_lazy(text).expect("parses");
        let mut sim = Sim::new();
        let w = sim.alloc(rows * std::mem::size_of::<BlockQ4K>()).unwrap();
        let x = sim
            .alloc(cols / 32 * std::mem::size_of::<BlockQ8_1>())
            .unwrap();
        let y = sim.alloc(rows * 4).unwrap();
        let cfg = LaunchConfig {
            grid: [1, 1, 1],
            block: desc.block,
            shared_bytes: desc.shared_bytes,
        };
        let args = [
            Arg::Ptr(w),
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::U32(cols as u32),
            Arg::U32(rows as u32),
        ];
        let stats = sim.launch(&module, KERNEL, cfg, &args)?;
        // Every row's weights were asked for: 8 rows of 144 B in 128-byte lines.
        assert_eq!(stats.prefetch_lanes, (rows as u64 * 144).div_ceil(128));
        Ok::<_, SimError>(())
    };
    run(&out).expect("the rewritten kernel runs");
    // The same kernel, with a load of `x` (parameter 1) before its wait.
    let wait = out
        .find(&format!(".entry {KERNEL}("))
        .and_then(|e| out[e..].find("\tgriddepcontrol.wait;").map(|w| e + w))
        .expect("the kernel's wait");
    let early = format!(
        "\t{{ .reg .b64 a; .reg .b32 v; ld.param.u64 a, [{KERNEL}_param_1]; \
         cvta.to.global.u64 a, a; ld.global.nc.u32 v, [a]; }}\n"
    );
    let broken = format!("{}{early}{}", &out[..wait], &out[wait..]);
    match run(&broken) {
        Err(SimError::Fault(f)) => {
            assert_eq!(f.kind, FaultKind::BeforeGridDependencyWait);
            assert_eq!(f.kernel, KERNEL);
        }
        other => panic!("a load before the wait must fault, got {other:?}"),
    }
}
