mod common;
use common::*;

#[test]
fn vector_add_one() {
    let src =
        kernel("ld.global.u32 %r2, [%rd3];\n add.s32 %r3, %r2, 1;\n st.global.u32 [%rd4], %r3;");
    let input: Vec<u32> = (0..64).map(|i| i * 3).collect();
    let (out, stats) = run_io(&src, "k", 64, &input, 64).unwrap();
    let want: Vec<u32> = input.iter().map(|x| x + 1).collect();
    assert_eq!(out, want);
    assert_eq!(stats.global_requests, 4);
}
