//! The registry of weight types the GPU gemv and MoE kernels read (quantized, and F32/F16/BF16;
//! q8_1 activations): one row per type, read by the device crate (which kernels it instantiates,
//! under which names), the host launchers, the planner, the tests and the benches. Nothing else
//! lists the types.
//!
//! A row says: the [`GemvType`] variant (also the name of the type's `WeightType` impl in
//! `kernels/device/src/vecdot/`), its kernel-name tag, its block struct in [`crate::blocks`], its
//! ggml type id, the weights per block, the unit of the kernels' thread mapping (lanes per unit,
//! weights per unit, bytes its lanes read per unit; [`GemvUnit`]), and the byte offsets of the
//! block's f16 scale fields. Every type gets every per-type kernel (plain, grouped, grouped with
//! the q8_1 epilogue, two-matrix, two-matrix with the rope tail, `attn_merge_v_b`, MoE gate/up
//! with and without the router in its launch, and down, which read their routed experts through
//! expert tables); the `mixed_down` rows add MoE down kernels whose routed and shared weights
//! differ (the llama.cpp mixes, docs/deepseek2-model.md#quant-mixes), the `mixed_gate_up` rows
//! fused gate/up kernels (both kinds) whose routed and shared weights differ (the dynamic
//! low-bit files: routed experts in a grid type, shared experts at 6 bits), the `argmax` rows
//! the fused lm_head kernels, and the `chain_ffn`, `chain_rope_kb` and `chain_ffn_rope_kb` rows
//! the chained launches (`moe_ffn_*`; `gemv2_rope_kb_*`; both in one, `moe_ffn_rope_kb_*`) of a
//! llama.cpp mix's types.
//!
//! Adding a type: its block struct in `blocks.rs`, a row here, its `WeightType` impl in the
//! device crate's `vecdot/` (a file, and its `mod`/`use` lines), then `cargo xtask kernels` and
//! `cargo xtask audit check --ratchet --add-new` (the budget file gains the new kernels; a
//! guard allowance needs its reason written there). The kernel tests iterate the registry.

use crate::launch::{
    DownArgs, GateUpArgs, GateUpRouterArgs, Gemv2Args, Gemv2NormArgs, Gemv2NormRopeKbArgs,
    Gemv2RopeArgs, Gemv2RopeKbArgs, GemvArgmaxArgs, GemvArgs, GemvGroupedArgs, GemvUnit, Kernel,
    KernelDesc, MergeVbArgs, MergeVbOArgs, MmqArgs, MmqMoeArgs, MoeFfnArgs, MoeFfnRopeKbArgs,
};

/// Calls macro `$m` with the registry's rows (see the module docs for the columns). The device
/// crate instantiates its kernels through it; [`GemvType`] is defined through it.
#[macro_export]
macro_rules! weight_types {
    ($m:ident) => {
        $m! {
            types {
                // variant tag    block       ggml  qk   lanes unit read  f16 fields
                Q4_0    q4_0   BlockQ4_0    2    32   1     64   36    [0];
                Q4_1    q4_1   BlockQ4_1    3    32   1     64   40    [0, 2];
                Q5_0    q5_0   BlockQ5_0    6    32   1     64   44    [0];
                Q5_1    q5_1   BlockQ5_1    7    32   1     64   48    [0, 2];
                Q8_0    q8_0   BlockQ8_0    8    32   1     64   68    [0];
                Iq4Nl   iq4_nl BlockIq4Nl   20   32   1     64   36    [0];
                Q2K     q2k    BlockQ2K     10   256  4     256  84    [80, 82];
                Q3K     q3k    BlockQ3K     11   256  4     256  114   [108];
                Q4K     q4k    BlockQ4K     12   256  8     256  144   [0, 2];
                Q5K     q5k    BlockQ5K     13   256  8     256  176   [0, 2];
                Q6K     q6k    BlockQ6K     14   256  8     256  218   [208];
                Iq4Xs   iq4_xs BlockIq4Xs   23   256  8     256  136   [0];
                Iq2Xxs  iq2_xxs BlockIq2Xxs 16   256  8     256  66    [0];
                Iq2Xs   iq2_xs BlockIq2Xs   17   256  8     256  74    [0];
                Iq2S    iq2_s  BlockIq2S    22   256  8     256  82    [0];
                Iq3Xxs  iq3_xxs BlockIq3Xxs 18   256  8     256  98    [0];
                Iq3S    iq3_s  BlockIq3S    21   256  8     256  110   [0];
                Iq1S    iq1_s  BlockIq1S    19   256  8     256  50    [0];
                Iq1M    iq1_m  BlockIq1M    29   256  8     256  56    [];
                F32     f32    BlockF32     0    32   4     32   128   [];
                F16     f16    BlockF16     1    32   4     32   64    [];
                Bf16    bf16   BlockBf16    30   32   4     32   64    [];
            }
            mixed_down {
                // routed         shared
                Q5_0  q5_0    Q4K q4k;
                Q8_0  q8_0    Q6K q6k;
                Q5_1  q5_1    Q5K q5k;
                Q4_0  q4_0    Q3K q3k;
                Iq4Nl iq4_nl  Q3K q3k;
                Iq4Nl iq4_nl  Iq4Xs iq4_xs;
                Iq4Nl iq4_nl  Q6K q6k;
                Iq2Xxs iq2_xxs Q6K q6k;
                Iq2S  iq2_s   Q6K q6k;
                Iq1S  iq1_s   Q6K q6k;
                Iq3Xxs iq3_xxs Q6K q6k;
            }
            mixed_gate_up {
                // routed         shared
                Iq2Xxs iq2_xxs Q6K q6k;
                Iq1S  iq1_s   Q6K q6k;
                Iq3Xxs iq3_xxs Q6K q6k;
            }
            argmax {
                Q8_0 q8_0 BlockQ8_0;
                Q4K  q4k  BlockQ4K;
                Q5K  q5k  BlockQ5K;
                Q6K  q6k  BlockQ6K;
            }
            chain_ffn {
                // gate/up routed, shared     down routed, shared (the llama.cpp mixes')
                Q4K q4k Q4K q4k               Q5_0 q5_0 Q4K q4k;
                Q4K q4k Q4K q4k               Q8_0 q8_0 Q6K q6k;
                Q4K q4k Q4K q4k               Q4K q4k Q4K q4k;
                Q4K q4k Q4K q4k               Q6K q6k Q6K q6k;
                Q8_0 q8_0 Q8_0 q8_0           Q8_0 q8_0 Q8_0 q8_0;
                Q3K q3k Q3K q3k               Q5_0 q5_0 Q4K q4k;
                Q3K q3k Q3K q3k               Q4K q4k Q4K q4k;
                Q3K q3k Q3K q3k               Q5K q5k Q5K q5k;
                Q2K q2k Q2K q2k               Q4_0 q4_0 Q3K q3k;
                Q2K q2k Q2K q2k               Q3K q3k Q3K q3k;
                Iq4Xs iq4_xs Iq4Xs iq4_xs     Iq4Nl iq4_nl Iq4Xs iq4_xs;
                Iq4Xs iq4_xs Iq4Xs iq4_xs     Q5_1 q5_1 Q5K q5k;
                Iq4Xs iq4_xs Iq4Xs iq4_xs     Iq4Xs iq4_xs Iq4Xs iq4_xs;
                Iq4Xs iq4_xs Iq4Xs iq4_xs     Q5K q5k Q5K q5k;
                Iq2Xxs iq2_xxs Q6K q6k        Iq4Nl iq4_nl Q6K q6k;
                Iq2Xxs iq2_xxs Q6K q6k        Iq2S iq2_s Q6K q6k;
                Iq2Xxs iq2_xxs Q6K q6k        Iq2Xxs iq2_xxs Q6K q6k;
                Iq2Xxs iq2_xxs Q6K q6k        Q6K q6k Q6K q6k;
            }
            chain_rope_kb {
                // attn_q (or attn_q_b) and attn_kv_a_mqa   attn_k_b (the llama.cpp mixes'; Q8_0
                // as derived from a legacy file's attn_kv_b)
                Q4K q4k                                     Q5_0 q5_0;
                Q4K q4k                                     Q8_0 q8_0;
                Q8_0 q8_0                                   Q8_0 q8_0;
                Q3K q3k                                     Q4_0 q4_0;
            }
            chain_ffn_rope_kb {
                // a `chain_ffn` row, then a `chain_rope_kb` row: the mixes that plan both
                // (`ingot plan --synth v2-lite` at q4_k_m, q8_0, q3_k_m, either layout)
                Q4K q4k Q4K q4k Q5_0 q5_0 Q4K q4k             Q4K q4k Q5_0 q5_0;
                Q4K q4k Q4K q4k Q8_0 q8_0 Q6K q6k             Q4K q4k Q5_0 q5_0;
                // a legacy file's attn_k_b, derived from attn_kv_b as Q8_0
                Q4K q4k Q4K q4k Q5_0 q5_0 Q4K q4k             Q4K q4k Q8_0 q8_0;
                Q4K q4k Q4K q4k Q8_0 q8_0 Q6K q6k             Q4K q4k Q8_0 q8_0;
                Q8_0 q8_0 Q8_0 q8_0 Q8_0 q8_0 Q8_0 q8_0       Q8_0 q8_0 Q8_0 q8_0;
                Q3K q3k Q3K q3k Q5_0 q5_0 Q4K q4k             Q3K q3k Q4_0 q4_0;
            }
        }
    };
}

/// The exported name of a per-type kernel, by kind and type tag(s): the one spelling the device
/// crate's `export_name`s and this crate's descriptors share.
#[macro_export]
macro_rules! kernel_name {
    (plain, $t:ident) => {
        concat!("gemv_", stringify!($t), "_q8_1")
    };
    (grouped, $t:ident) => {
        concat!("gemv_grouped_", stringify!($t), "_q8_1")
    };
    (q8_1_out, $t:ident) => {
        concat!("gemv_grouped_", stringify!($t), "_q8_1_out")
    };
    (pair, $t:ident) => {
        concat!("gemv2_", stringify!($t), "_q8_1")
    };
    (pair_rope, $t:ident) => {
        concat!("gemv2_rope_", stringify!($t), "_q8_1")
    };
    (pair_norm, $t:ident) => {
        concat!("gemv2_norm_", stringify!($t), "_q8_1")
    };
    (merge_v_b, $t:ident) => {
        concat!("attn_merge_v_b_", stringify!($t))
    };
    (merge_v_b_o, $t:ident) => {
        concat!("attn_merge_v_b_o_", stringify!($t))
    };
    (gate_up, $t:ident) => {
        concat!("moe_gate_up_", stringify!($t))
    };
    (gate_up, $r:ident, $s:ident) => {
        concat!("moe_gate_up_", stringify!($r), "_", stringify!($s))
    };
    (gate_up_router, $t:ident) => {
        concat!("moe_gate_up_router_", stringify!($t))
    };
    (gate_up_router, $r:ident, $s:ident) => {
        concat!("moe_gate_up_router_", stringify!($r), "_", stringify!($s))
    };
    (down, $r:ident, $s:ident) => {
        concat!("moe_down_", stringify!($r), "_", stringify!($s))
    };
    (moe_ffn, $gr:ident, $gs:ident, $dr:ident, $ds:ident) => {
        concat!(
            "moe_ffn_",
            stringify!($gr),
            "_",
            stringify!($gs),
            "_",
            stringify!($dr),
            "_",
            stringify!($ds)
        )
    };
    (moe_ffn_rope_kb, $gr:ident, $gs:ident, $dr:ident, $ds:ident, $p:ident, $k:ident) => {
        concat!(
            "moe_ffn_rope_kb_",
            stringify!($gr),
            "_",
            stringify!($gs),
            "_",
            stringify!($dr),
            "_",
            stringify!($ds),
            "_",
            stringify!($p),
            "_",
            stringify!($k)
        )
    };
    (pair_rope_kb, $p:ident, $k:ident) => {
        concat!("gemv2_rope_kb_", stringify!($p), "_", stringify!($k))
    };
    (pair_norm_rope_kb, $p:ident, $k:ident) => {
        concat!("gemv2_norm_rope_kb_", stringify!($p), "_", stringify!($k))
    };
    (argmax, $t:ident) => {
        concat!("gemv_argmax_", stringify!($t), "_q8_1")
    };
    (mmq, $t:ident) => {
        concat!("mmq_", stringify!($t))
    };
    (mmq_moe, $t:ident) => {
        concat!("mmq_moe_", stringify!($t))
    };
}

/// The registry's `mmq` rows, appended to the [`weight_types!`] rows for [`GemvType`] alone: the
/// types with prefill matrix-matrix kernels (`crate::launch::mmq`), whose device instances are
/// declared one by one in the device crate's `mmq/` (each tile is its own code), not through
/// [`weight_types!`]. Order: the launch table's.
macro_rules! with_mmq_rows {
    ($($rows:tt)*) => {
        define_registry! {
            $($rows)*
            mmq { Q4K q4k; Q6K q6k; Q5_0 q5_0; Q8_0 q8_0; Q5K q5k; Q3K q3k; Q4_0 q4_0; Iq4Nl iq4_nl;
                  Q4_1 q4_1; Q5_1 q5_1; }
        }
    };
}

macro_rules! define_registry {
    (
        types { $($v:ident $tag:ident $block:ident $ggml:literal $qk:literal $lanes:literal
                  $unit:literal $read:literal [$($f16:literal),*];)* }
        mixed_down { $($rv:ident $rt:ident $sv:ident $st:ident;)* }
        mixed_gate_up { $($gv:ident $gt:ident $gsv:ident $gst:ident;)* }
        argmax { $($av:ident $at:ident $ab:ident;)* }
        chain_ffn { $($fgv:ident $fgt:ident $fgsv:ident $fgst:ident
                      $fdv:ident $fdt:ident $fdsv:ident $fdst:ident;)* }
        chain_rope_kb { $($kpv:ident $kpt:ident $kkv:ident $kkt:ident;)* }
        chain_ffn_rope_kb { $($cgv:ident $cgt:ident $cgsv:ident $cgst:ident
                              $cdv:ident $cdt:ident $cdsv:ident $cdst:ident
                              $cpv:ident $cpt:ident $ckv:ident $ckt:ident;)* }
        mmq { $($mv:ident $mt:ident;)* }
    ) => {
        /// A weight type the quantized gemv and MoE kernels take (the registry's rows).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GemvType {
            $(
                #[doc = concat!("Blocks of [`crate::blocks::", stringify!($block), "`].")]
                $v,
            )*
        }

        impl GemvType {
            /// Every type, in registry order.
            pub const ALL: [GemvType; [$(stringify!($v)),*].len()] = [$(GemvType::$v),*];

            /// The kernel-name spelling: `q4k`, `q5_0`, `iq4_nl`.
            pub const fn tag(self) -> &'static str {
                match self { $(GemvType::$v => stringify!($tag),)* }
            }

            /// The ggml type id (GGUF's `ggml_type`).
            pub const fn ggml_id(self) -> u32 {
                match self { $(GemvType::$v => $ggml,)* }
            }

            /// The type with ggml id `id`, if the kernels take it.
            pub const fn from_ggml_id(id: u32) -> Option<GemvType> {
                match id { $($ggml => Some(GemvType::$v),)* _ => None }
            }

            /// Weights per quant block (32, or 256 for k-quants).
            pub const fn block_elems(self) -> usize {
                match self { $(GemvType::$v => $qk,)* }
            }

            /// Bytes per quant block.
            pub const fn block_bytes(self) -> usize {
                match self { $(GemvType::$v => core::mem::size_of::<crate::blocks::$block>(),)* }
            }

            /// Row lengths of the gemv kernels must be multiples of this: one quant block (32, or
            /// 256 for k-quants); a 32-element row of an odd number of blocks ends in an unpaired
            /// block.
            pub const fn gemv_row_multiple(self) -> usize {
                self.block_elems()
            }

            /// Weights per unit of the kernels' thread mapping: 64 for the 32-element types (a
            /// lane takes a pair of blocks), 256 for k-quants. The fused MoE kernels and
            /// `attn_merge_v_b` take rows of whole units only.
            pub const fn row_multiple(self) -> usize {
                self.unit().elems as usize
            }

            /// Byte offsets of the block's f16 fields: the scale `d`, then the min (`m`, `dmin`)
            /// where the type has one (what tests fill with finite random scales); none for the
            /// float types, whose every element is a weight, and for IQ1_M, whose `d` is spread
            /// over the top nibbles of its scales (`crate::blocks::iq1m_d`).
            pub const fn f16_fields(self) -> &'static [usize] {
                match self { $(GemvType::$v => &[$($f16),*],)* }
            }

            /// Whether the type is a float type (F32, F16, BF16: no scales, no quants).
            pub const fn is_float(self) -> bool {
                matches!(self, GemvType::F32 | GemvType::F16 | GemvType::Bf16)
            }

            /// The type's unit in the kernels' thread mapping (`ingot_abi::launch::gemv`).
            pub const fn unit(self) -> GemvUnit {
                match self {
                    $(GemvType::$v => GemvUnit {
                        lanes: $lanes,
                        elems: $unit,
                        bytes: ($unit / $qk) * core::mem::size_of::<crate::blocks::$block>() as u32,
                        read_bytes: $read,
                    },)*
                }
            }

            #[doc = concat!("`", kernel_name!(plain, q4k), "(w, x, y, ncols, nrows)` and its ",
                "siblings: `y[r] = Σ_c W[r][c]·x[c]` with q8_1 activations; an item is a warp ",
                "(`ingot_abi::launch::gemv`).")]
            pub const fn plain(self) -> &'static Kernel<GemvArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<GemvArgs> =
                            crate::launch::gemv::gemv_kernel(kernel_name!(plain, $tag));
                        &D
                    })*
                }
            }

            /// `(w, x, y, ncols, nrows, rows_per_group, x_group_stride)`: as [`Self::plain`],
            /// row `r` reading `x` from block `(r / rows_per_group)·x_group_stride`.
            pub const fn grouped(self) -> &'static Kernel<GemvGroupedArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<GemvGroupedArgs> =
                            crate::launch::gemv::gemv_kernel(kernel_name!(grouped, $tag));
                        &D
                    })*
                }
            }

            /// The grouped gemv with `y` as q8_1 blocks (CUDA variant, `s = Σ`, the bits of
            /// `quantize_q8_1` of the f32 result). An item is one output block: 32 consecutive
            /// rows, so `nrows` is a multiple of 32 (`attn_v_b` feeding `attn_output`).
            pub const fn grouped_q8_1_out(self) -> &'static Kernel<GemvGroupedArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<GemvGroupedArgs> =
                            crate::launch::gemv::q8_1_out_kernel(kernel_name!(q8_1_out, $tag));
                        &D
                    })*
                }
            }

            /// `(w0, w1, x, y0, y1, ncols, nrows0, nrows1)`: `y0 = W0·x` and `y1 = W1·x` of one
            /// width in one launch over `nrows0 + nrows1` rows (`attn_q` with `attn_kv_a_mqa`).
            pub const fn pair(self) -> &'static Kernel<Gemv2Args> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<Gemv2Args> =
                            crate::launch::gemv::gemv_kernel(kernel_name!(pair, $tag));
                        &D
                    })*
                }
            }

            /// The two-matrix gemv with the `rope_kv_q8_1` tail
            /// (`ingot_abi::launch::projections`'s `gemv2_rope` contract).
            pub const fn pair_rope(self) -> &'static Kernel<Gemv2RopeArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<Gemv2RopeArgs> = crate::launch::projections::gemv2_rope_kernel(
                            kernel_name!(pair_rope, $tag),
                        );
                        &D
                    })*
                }
            }

            /// The two-matrix gemv with the `rmsnorm_q8_1` tail on its first output
            /// (`ingot_abi::launch::projections`'s `gemv2_norm` contract).
            pub const fn pair_norm(self) -> &'static Kernel<Gemv2NormArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<Gemv2NormArgs> = crate::launch::projections::gemv2_norm_kernel(
                            kernel_name!(pair_norm, $tag),
                        );
                        &D
                    })*
                }
            }

            /// `attn_merge_q8_1` and the grouped `attn_v_b` gemv with q8_1 output in one launch
            /// (`ingot_abi::launch::attention`'s `attn_merge_v_b` contract).
            pub const fn merge_v_b(self) -> &'static Kernel<MergeVbArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<MergeVbArgs> = crate::launch::attention::merge_v_b_kernel(
                            kernel_name!(merge_v_b, $tag),
                        );
                        &D
                    })*
                }
            }

            /// `attn_merge_v_b_*` and `attn_output` (the down kernel of the type with no routed
            /// slots) in one launch (`ingot_abi::launch::attn_out`).
            pub const fn merge_v_b_o(self) -> &'static Kernel<MergeVbOArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<MergeVbOArgs> = crate::launch::attn_out::merge_v_b_o_kernel(
                            kernel_name!(merge_v_b_o, $tag),
                        );
                        &D
                    })*
                }
            }

            /// The fused MoE gate/up/SwiGLU kernel (`ingot_abi::launch::moe`).
            pub const fn gate_up(self) -> &'static Kernel<GateUpArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<GateUpArgs> =
                            crate::launch::moe::gate_up_kernel(kernel_name!(gate_up, $tag));
                        &D
                    })*
                }
            }

            /// The fused MoE gate/up/SwiGLU kernel with the router in its launch
            /// (`ingot_abi::launch::moe`).
            pub const fn gate_up_router(self) -> &'static Kernel<GateUpRouterArgs> {
                match self {
                    $(GemvType::$v => {
                        const D: Kernel<GateUpRouterArgs> = crate::launch::moe::gate_up_router_kernel(
                            kernel_name!(gate_up_router, $tag),
                        );
                        &D
                    })*
                }
            }

            /// The `mixed_down` rows: (routed, shared) down types of the MoE down kernels beyond
            /// every type with itself.
            pub const MIXED_DOWN: &'static [(GemvType, GemvType)] =
                &[$((GemvType::$rv, GemvType::$sv)),*];

            /// The `mixed_gate_up` rows: (routed, shared) gate/up types of the fused gate/up
            /// kernels beyond every type with itself.
            pub const MIXED_GATE_UP: &'static [(GemvType, GemvType)] =
                &[$((GemvType::$gv, GemvType::$gsv)),*];

            /// The fused gate/up kernel with `routed` and `shared` gate/up weights, if the
            /// registry has the pair: every type with itself ([`Self::gate_up`]), and the
            /// `mixed_gate_up` rows (routed experts in a grid type, shared experts at 6 bits).
            pub const fn gate_up_mixed(
                routed: GemvType,
                shared: GemvType,
            ) -> Option<&'static Kernel<GateUpArgs>> {
                match (routed, shared) {
                    $((GemvType::$gv, GemvType::$gsv) => {
                        const D: Kernel<GateUpArgs> =
                            crate::launch::moe::gate_up_kernel(kernel_name!(gate_up, $gt, $gst));
                        Some(&D)
                    })*
                    (r, s) if r as u32 == s as u32 => Some(r.gate_up()),
                    _ => None,
                }
            }

            /// [`Self::gate_up_mixed`] with the router in its launch: the registry has one for
            /// every pair it has a gate/up kernel for.
            pub const fn gate_up_router_mixed(
                routed: GemvType,
                shared: GemvType,
            ) -> Option<&'static Kernel<GateUpRouterArgs>> {
                match (routed, shared) {
                    $((GemvType::$gv, GemvType::$gsv) => {
                        const D: Kernel<GateUpRouterArgs> = crate::launch::moe::gate_up_router_kernel(
                            kernel_name!(gate_up_router, $gt, $gst),
                        );
                        Some(&D)
                    })*
                    (r, s) if r as u32 == s as u32 => Some(r.gate_up_router()),
                    _ => None,
                }
            }

            /// The MoE down kernel with `routed` and `shared` down weights
            /// (`ingot_abi::launch::moe`), if the registry has the pair: every type with itself,
            /// and the `mixed_down` rows.
            pub const fn down(routed: GemvType, shared: GemvType) -> Option<&'static Kernel<DownArgs>> {
                match (routed, shared) {
                    $((GemvType::$v, GemvType::$v) => {
                        const D: Kernel<DownArgs> =
                            crate::launch::moe::down_kernel(kernel_name!(down, $tag, $tag));
                        Some(&D)
                    })*
                    $((GemvType::$rv, GemvType::$sv) => {
                        const D: Kernel<DownArgs> =
                            crate::launch::moe::down_kernel(kernel_name!(down, $rt, $st));
                        Some(&D)
                    })*
                    _ => None,
                }
            }

            /// The types with prefill matrix-matrix kernels ([`Self::mmq`], [`Self::mmq_moe`]).
            pub const MMQ: &'static [GemvType] = &[$(GemvType::$mv),*];

            /// The dense prefill product of the type (`ingot_abi::launch::mmq`), if it has one.
            pub const fn mmq(self) -> Option<&'static Kernel<MmqArgs>> {
                match self {
                    $(GemvType::$mv => {
                        const D: Kernel<MmqArgs> =
                            crate::launch::mmq::mmq_kernel(kernel_name!(mmq, $mt));
                        Some(&D)
                    })*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// The expert-grouped prefill product of the type (`ingot_abi::launch::mmq`), if it
            /// has one: exactly the types with [`Self::mmq`].
            pub const fn mmq_moe(self) -> Option<&'static Kernel<MmqMoeArgs>> {
                match self {
                    $(GemvType::$mv => {
                        const D: Kernel<MmqMoeArgs> =
                            crate::launch::mmq::mmq_moe_kernel(kernel_name!(mmq_moe, $mt));
                        Some(&D)
                    })*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// The MoE FFN in one chained launch (`ingot_abi::launch::moe_ffn`) for gate/up
            /// weights `gate_up` (routed, shared) and down weights `down` (routed, shared), if
            /// the registry has that row (`chain_ffn`).
            pub const fn moe_ffn(
                gate_up: (GemvType, GemvType),
                down: (GemvType, GemvType),
            ) -> Option<&'static Kernel<MoeFfnArgs>> {
                $(
                    if gate_up.0 as u32 == GemvType::$fgv as u32
                        && gate_up.1 as u32 == GemvType::$fgsv as u32
                        && down.0 as u32 == GemvType::$fdv as u32
                        && down.1 as u32 == GemvType::$fdsv as u32
                    {
                        const D: Kernel<MoeFfnArgs> = crate::launch::moe_ffn::moe_ffn_kernel(
                            kernel_name!(moe_ffn, $fgt, $fgst, $fdt, $fdst),
                        );
                        return Some(&D);
                    }
                )*
                None
            }

            /// `gemv2_rope_*` of this type and `attn_k_b`'s grouped gemv of type `kb` in one
            /// chained launch (`ingot_abi::launch::projections`), if the registry has that row
            /// (`chain_rope_kb`).
            pub const fn pair_rope_kb(self, kb: GemvType) -> Option<&'static Kernel<Gemv2RopeKbArgs>> {
                $(
                    if self as u32 == GemvType::$kpv as u32 && kb as u32 == GemvType::$kkv as u32 {
                        const D: Kernel<Gemv2RopeKbArgs> =
                            crate::launch::projections::gemv2_rope_kb_kernel(
                                kernel_name!(pair_rope_kb, $kpt, $kkt),
                            );
                        return Some(&D);
                    }
                )*
                None
            }

            /// A MoE FFN (`gate_up`, `down` as in [`Self::moe_ffn`]) and the next layer's
            /// projections (`pair`, `kb` as in [`Self::pair_rope_kb`]) in one chained launch
            /// (`ingot_abi::launch::ffn_rope_kb`), if the registry has that row
            /// (`chain_ffn_rope_kb`).
            pub const fn moe_ffn_rope_kb(
                gate_up: (GemvType, GemvType),
                down: (GemvType, GemvType),
                (pair, kb): (GemvType, GemvType),
            ) -> Option<&'static Kernel<MoeFfnRopeKbArgs>> {
                $(
                    if gate_up.0 as u32 == GemvType::$cgv as u32
                        && gate_up.1 as u32 == GemvType::$cgsv as u32
                        && down.0 as u32 == GemvType::$cdv as u32
                        && down.1 as u32 == GemvType::$cdsv as u32
                        && pair as u32 == GemvType::$cpv as u32
                        && kb as u32 == GemvType::$ckv as u32
                    {
                        const D: Kernel<MoeFfnRopeKbArgs> =
                            crate::launch::ffn_rope_kb::moe_ffn_rope_kb_kernel(kernel_name!(
                                moe_ffn_rope_kb, $cgt, $cgst, $cdt, $cdst, $cpt, $ckt
                            ));
                        return Some(&D);
                    }
                )*
                None
            }

            /// `gemv2_norm_*` and `gemv2_rope_kb_*` (`attn_k_b` of type `kb`), every product
            /// before `attn_k_b` of this type, in one chained launch
            /// (`ingot_abi::launch::projections`), if the registry has that row (`chain_rope_kb`).
            pub const fn pair_norm_rope_kb(
                self,
                kb: GemvType,
            ) -> Option<&'static Kernel<Gemv2NormRopeKbArgs>> {
                $(
                    if self as u32 == GemvType::$kpv as u32 && kb as u32 == GemvType::$kkv as u32 {
                        const D: Kernel<Gemv2NormRopeKbArgs> =
                            crate::launch::projections::gemv2_norm_rope_kb_kernel(
                                kernel_name!(pair_norm_rope_kb, $kpt, $kkt),
                            );
                        return Some(&D);
                    }
                )*
                None
            }

            /// The lm_head gemv fused with the argmax (`ingot_abi::launch::head`), if the type
            /// has one.
            pub const fn argmax(self) -> Option<&'static Kernel<GemvArgmaxArgs>> {
                match self {
                    $(GemvType::$av => {
                        const D: Kernel<GemvArgmaxArgs> =
                            crate::launch::head::gemv_argmax_kernel(kernel_name!(argmax, $at));
                        Some(&D)
                    })*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }

        // Each read-bytes column covers at least the unit's own bytes.
        $(const _: () = assert!(
            $read >= ($unit / $qk) * core::mem::size_of::<crate::blocks::$block>() as u32
                && $unit % $qk == 0
        );)*

        /// The registry's `chain_ffn` rows: the gate/up (routed, shared) and down (routed,
        /// shared) weight types that have a `moe_ffn_*` kernel ([`GemvType::moe_ffn`]).
        pub const CHAIN_FFN: &[((GemvType, GemvType), (GemvType, GemvType))] = &[$(
            ((GemvType::$fgv, GemvType::$fgsv), (GemvType::$fdv, GemvType::$fdsv)),
        )*];

        /// The registry's `chain_rope_kb` rows: the two-matrix gemv's type and `attn_k_b`'s that
        /// have a `gemv2_rope_kb_*` kernel ([`GemvType::pair_rope_kb`]).
        pub const CHAIN_ROPE_KB: &[(GemvType, GemvType)] = &[$((GemvType::$kpv, GemvType::$kkv),)*];

        /// The registry's `chain_ffn_rope_kb` rows: a `chain_ffn` row's types and a
        /// `chain_rope_kb` row's that have a `moe_ffn_rope_kb_*` kernel
        /// ([`GemvType::moe_ffn_rope_kb`]).
        pub const CHAIN_FFN_ROPE_KB: &[FfnRopeKbRow] = &[$((
            (GemvType::$cgv, GemvType::$cgsv),
            (GemvType::$cdv, GemvType::$cdsv),
            (GemvType::$cpv, GemvType::$ckv),
        ),)*];

        /// Every kernel the registry names, for the launch table (`crate::kernel_table::KERNELS`).
        pub const KERNELS: &[KernelDesc] = &[
            $(
                GemvType::$v.plain().desc,
                GemvType::$v.grouped().desc,
                GemvType::$v.grouped_q8_1_out().desc,
                GemvType::$v.pair().desc,
                GemvType::$v.pair_rope().desc,
                GemvType::$v.pair_norm().desc,
                GemvType::$v.merge_v_b().desc,
                GemvType::$v.merge_v_b_o().desc,
                GemvType::$v.gate_up().desc,
                GemvType::$v.gate_up_router().desc,
            )*
            $(
                match GemvType::down(GemvType::$v, GemvType::$v) { Some(d) => d.desc, None => panic!() },
            )*
            $(
                match GemvType::down(GemvType::$rv, GemvType::$sv) { Some(d) => d.desc, None => panic!() },
            )*
            $(
                match GemvType::gate_up_mixed(GemvType::$gv, GemvType::$gsv) {
                    Some(d) => d.desc,
                    None => panic!(),
                },
                match GemvType::gate_up_router_mixed(GemvType::$gv, GemvType::$gsv) {
                    Some(d) => d.desc,
                    None => panic!(),
                },
            )*
            $(match GemvType::$av.argmax() { Some(d) => d.desc, None => panic!() },)*
            $(
                match GemvType::moe_ffn(
                    (GemvType::$fgv, GemvType::$fgsv),
                    (GemvType::$fdv, GemvType::$fdsv),
                ) {
                    Some(d) => d.desc,
                    None => panic!(),
                },
            )*
            $(match GemvType::$kpv.pair_rope_kb(GemvType::$kkv) { Some(d) => d.desc, None => panic!() },)*
            $(
                match GemvType::$kpv.pair_norm_rope_kb(GemvType::$kkv) {
                    Some(d) => d.desc,
                    None => panic!(),
                },
            )*
            $(
                match GemvType::moe_ffn_rope_kb(
                    (GemvType::$cgv, GemvType::$cgsv),
                    (GemvType::$cdv, GemvType::$cdsv),
                    (GemvType::$cpv, GemvType::$ckv),
                ) {
                    Some(d) => d.desc,
                    None => panic!(),
                },
            )*
            $(match GemvType::$mv.mmq() { Some(d) => d.desc, None => panic!() },)*
            $(match GemvType::$mv.mmq_moe() { Some(d) => d.desc, None => panic!() },)*
        ];
    };
}

/// A `chain_ffn_rope_kb` row: the FFN's gate/up and down (routed, shared) types, then the
/// projections' pair and `attn_k_b` types.
pub type FfnRopeKbRow = (
    (GemvType, GemvType),
    (GemvType, GemvType),
    (GemvType, GemvType),
);

weight_types!(with_mmq_rows);

impl GemvType {
    /// The fused head on `m` columns of a speculative verify
    /// (`crate::launch::head::GEMV_ARGMAX_COLS_Q6K`), if the type has it: Q6_K and Q8_0 heads,
    /// 2 to 4 columns.
    pub const fn argmax_cols(
        self,
        m: usize,
    ) -> Option<&'static Kernel<crate::launch::GemvArgmaxColsArgs>> {
        use crate::launch::{GEMV_ARGMAX_COLS_MIN, GEMV_ARGMAX_COLS_Q6K, GEMV_ARGMAX_COLS_Q8_0};
        let kernels = match self {
            GemvType::Q6K => &GEMV_ARGMAX_COLS_Q6K,
            GemvType::Q8_0 => &GEMV_ARGMAX_COLS_Q8_0,
            _ => return None,
        };
        match m.checked_sub(GEMV_ARGMAX_COLS_MIN) {
            Some(i) if i < kernels.len() => Some(&kernels[i]),
            _ => None,
        }
    }

    /// The chained merge and `attn_output` on `m` columns of a speculative verify
    /// (`crate::launch::attn_out::MERGE_V_B_O_COLS_Q4K`), if the type has it: Q4_K, 2 to 4
    /// columns.
    pub const fn merge_v_b_o_cols(
        self,
        m: usize,
    ) -> Option<&'static Kernel<crate::launch::MergeVbOColsArgs>> {
        use crate::launch::{MERGE_V_B_O_COLS_MIN, MERGE_V_B_O_COLS_Q4K};
        let kernels = match self {
            GemvType::Q4K => &MERGE_V_B_O_COLS_Q4K,
            _ => return None,
        };
        match m.checked_sub(MERGE_V_B_O_COLS_MIN) {
            Some(i) if i < kernels.len() => Some(&kernels[i]),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
