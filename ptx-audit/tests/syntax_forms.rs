//! PTX as compilers write it parses even where `ptx-syntax` expects another modifier order.

use ptx_front::PtxModule;

/// A kernel with `red` in the ISA/compiler modifier order (state space before the operation).
const COMPILER_RED: &str = "\
.version 7.8
.target sm_86
.address_size 64

.visible .entry k(.param .u64 k_param_0)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd3, 7;
    red.global.max.u64 [%rd2], %rd3;
    mov.u32 %r1, 1;
    red.relaxed.gpu.global.add.u32 [%rd2+8], %r1;
    mov.f32 %f1, 0f3F800000;
    red.global.add.f32 [%rd2+12], %f1;
    ret;
}
";

#[test]
fn compiler_ordered_red_parses_and_keeps_its_spelling() {
    // The parser alone rejects this order: the rewrite is what makes it parse.
    assert!(ptx_syntax::parse_ptx(COMPILER_RED).is_err());
    let m = PtxModule::parse(COMPILER_RED).unwrap_or_else(|e| panic!("{e}"));
    let k = &m.functions[0];
    let reds: Vec<(&str, usize)> = k
        .instrs
        .iter()
        .filter(|i| i.opcode.starts_with("red."))
        .map(|i| (i.opcode.as_str(), i.line))
        .collect();
    // Mnemonics and lines are those of the original text, not of the parser's reordering.
    assert_eq!(
        reds,
        [
            ("red.global.max.u64", 13),
            ("red.relaxed.gpu.global.add.u32", 15),
            ("red.global.add.f32", 17)
        ]
    );
}
