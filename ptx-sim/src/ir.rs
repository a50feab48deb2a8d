//! The pre-resolved instruction form the interpreter executes.
//!
//! Lowering resolves every name once: registers become dense indices into a warp's register file,
//! labels become instruction indices, symbols become addresses in their state space, and immediates
//! become raw bits of the instruction's operand type. Registers are untyped 64-bit containers (LLVM
//! 22 keeps floats in `%r` `.b32` registers); each instruction reads the low bits its type names
//! and writes its result zero-extended.

/// Index of a register in a warp's register file.
pub(crate) type Reg = u32;

/// Operand and instruction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    B8,
    B16,
    B32,
    B64,
    B128,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    BF16,
    BF16x2,
    F32,
    F64,
    Pred,
}

impl Ty {
    pub(crate) fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "b128" => Ty::B128,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f16" => Ty::F16,
            "f16x2" => Ty::F16x2,
            "bf16" => Ty::BF16,
            "bf16x2" => Ty::BF16x2,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }

    /// Width in bits (predicates count as 1).
    pub(crate) fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::B8 | Ty::U8 | Ty::S8 => 8,
            Ty::B16 | Ty::U16 | Ty::S16 | Ty::F16 | Ty::BF16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16x2 | Ty::BF16x2 => 32,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 64,
            Ty::B128 => 128,
        }
    }

    /// Size in bytes as stored in memory.
    pub(crate) fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    pub(crate) fn is_signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(
            self,
            Ty::F16 | Ty::F16x2 | Ty::BF16 | Ty::BF16x2 | Ty::F32 | Ty::F64
        )
    }

    /// Mask of the low `bits()` bits (all ones for 64 and 128).
    pub(crate) fn mask(self) -> u64 {
        match self.bits() {
            b if b >= 64 => u64::MAX,
            b => (1u64 << b) - 1,
        }
    }
}

/// Special registers (`%tid.x`, `%laneid`, ...). Axis is 0/1/2 for x/y/z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SReg {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    Clock,
    Clock64,
    LanemaskEq,
    LanemaskLt,
    LanemaskLe,
    LanemaskGt,
    LanemaskGe,
    DynamicSmemSize,
}

/// A source operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Reg(Reg),
    /// Raw bits, already converted to the operand type (e.g. `1.0` in an `.f32` op is
    /// `0x3f800000`).
    Imm(u64),
    Special(SReg),
}

/// State spaces of loads, stores and address conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Generic,
    Global,
    Shared,
    Local,
    Param,
    Const,
}

/// `[base + offset]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Addr {
    pub base: Src,
    pub offset: i64,
}

/// Floating-point rounding modifiers, including the round-to-integer forms of `cvt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rnd {
    Rn,
    Rz,
    Rm,
    Rp,
    Rna,
    Rni,
    Rzi,
    Rmi,
    Rpi,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntBinOp {
    Add,
    AddSat,
    Sub,
    SubSat,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntUnOp {
    Neg,
    Abs,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
    Bfind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MadMode {
    Lo,
    Hi,
    Wide,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FBinOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FUnOp {
    Neg,
    Abs,
    Sqrt,
    Rsqrt,
    Rcp,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
}

/// Comparison operators of `setp`/`set`; the `*u` forms are also true when either operand is NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoolOp {
    And,
    Or,
    Xor,
}

/// The memory-ordering semantics of `ld`, `st`, `atom` and `red` (the PTX memory consistency
/// model's qualifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sem {
    /// `ld`/`st` without a qualifier, or `.weak`.
    Weak,
    /// Strong but unordered: `.relaxed`, `.volatile`, `.mmio`, and `atom`/`red` without a
    /// qualifier.
    Relaxed,
    Acquire,
    Release,
    AcqRel,
}

impl Sem {
    /// Whether the access orders the thread's earlier accesses before it (`.release`,
    /// `.acq_rel`): like a fence before it.
    pub(crate) fn releases(self) -> bool {
        matches!(self, Sem::Release | Sem::AcqRel)
    }

    /// Whether the access orders the thread's later accesses after it (`.acquire`, `.acq_rel`).
    pub(crate) fn acquires(self) -> bool {
        matches!(self, Sem::Acquire | Sem::AcqRel)
    }

    /// Whether the access is strong (not [`Sem::Weak`]): a store of it must become visible to
    /// other blocks without a later fence, so the random schedule does not buffer it.
    pub(crate) fn strong(self) -> bool {
        self != Sem::Weak
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Add,
    Min,
    Max,
    Exch,
    Cas,
    And,
    Or,
    Xor,
    Inc,
    Dec,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduxOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// `prmt` modes; `Generic` uses the four selector nibbles of `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrmtMode {
    Generic,
    F4e,
    B4e,
    Rc8,
    Ecl,
    Ecr,
    Rc16,
}

/// Element type pair of a supported `mma.sync` shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmaKind {
    /// m16n8k16, f16 inputs, f32 accumulators.
    F16F32,
    /// m16n8k16, bf16 inputs, f32 accumulators.
    Bf16F32,
    /// m16n8k32, 8-bit integer inputs (signedness of A and B), s32 accumulators.
    I8 {
        a_signed: bool,
        b_signed: bool,
        satfinite: bool,
    },
}

/// Cost class of an instruction, for [`crate::ClassCounts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Int,
    Fp32,
    Fp16,
    Fp64,
    Global,
    Shared,
    Local,
    Control,
    Tensor,
    Other,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Mov {
        ty: Ty,
        d: Reg,
        a: Src,
    },
    /// `mov.b32 d, {a, b}`: parts from least to most significant, `part_bits` each.
    Pack {
        d: Reg,
        parts: Box<[Src]>,
        part_bits: u32,
    },
    /// `mov.b64 {a, b}, s`: `None` is the `_` sink.
    Unpack {
        ds: Box<[Option<Reg>]>,
        a: Src,
        part_bits: u32,
    },
    IntBin {
        op: IntBinOp,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
    },
    IntUn {
        op: IntUnOp,
        ty: Ty,
        d: Reg,
        a: Src,
    },
    /// `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`: 32/64-bit add or subtract with the per-thread
    /// carry flag CC.CF, which `sub` uses as a borrow (`subc`: `d = a - (b + CF)`).
    Carry {
        sub: bool,
        carry_in: bool,
        carry_out: bool,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
    },
    Mad {
        mode: MadMode,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfe {
        ty: Ty,
        d: Reg,
        a: Src,
        pos: Src,
        len: Src,
    },
    Bfi {
        ty: Ty,
        d: Reg,
        f: Src,
        b: Src,
        pos: Src,
        len: Src,
    },
    Prmt {
        mode: PrmtMode,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `dp4a` (`hi == None`) or `dp2a.lo/.hi` (`hi == Some(..)`).
    Dp {
        a_signed: bool,
        b_signed: bool,
        dp2_hi: Option<bool>,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Lop3 {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        lut: u8,
    },
    Shf {
        left: bool,
        clamp: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    FBin {
        op: FBinOp,
        ty: Ty,
        rnd: Rnd,
        ftz: bool,
        sat: bool,
        d: Reg,
        a: Src,
        b: Src,
    },
    FUn {
        op: FUnOp,
        ty: Ty,
        ftz: bool,
        d: Reg,
        a: Src,
    },
    Fma {
        ty: Ty,
        rnd: Rnd,
        ftz: bool,
        sat: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        p: Reg,
        q: Option<Reg>,
        a: Src,
        b: Src,
        /// Optional `.and/.or/.xor {!}c` combination.
        comb: Option<(BoolOp, Src, bool)>,
    },
    Set {
        cmp: Cmp,
        dty: Ty,
        sty: Ty,
        d: Reg,
        a: Src,
        b: Src,
    },
    Selp {
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `cvt`; for the packing forms (`cvt.rn.f16x2.f32 d, a, b`) `b` is the low half source.
    Cvt {
        dty: Ty,
        sty: Ty,
        rnd: Option<Rnd>,
        sat: bool,
        ftz: bool,
        /// Width in bits of `d`'s register when `dty` is a signed integer type narrower than it
        /// (the ISA sign-extends such results to the register size, e.g. `cvt.s8.s64` into a `.b32`
        /// register); 0 otherwise.
        sext_to: u32,
        d: Reg,
        a: Src,
        b: Option<Src>,
    },
    Cvta {
        to_generic: bool,
        space: Space,
        d: Reg,
        a: Src,
        bits: u32,
    },
    Ld {
        space: Space,
        ty: Ty,
        sem: Sem,
        /// `.nc` (or `ldu`): may read through the non-coherent cache, so the memory must not be
        /// written during the kernel (a store of the same launch to a word it reads faults:
        /// [`crate::FaultKind::NonCoherentRead`]).
        nc: bool,
        ds: Box<[Option<Reg>]>,
        addr: Addr,
    },
    St {
        space: Space,
        ty: Ty,
        sem: Sem,
        srcs: Box<[Src]>,
        addr: Addr,
    },
    /// `atom` (`d == Some`) or `red` (`d == None`).
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        sem: Sem,
        d: Option<Reg>,
        addr: Addr,
        b: Src,
        c: Option<Src>,
    },
    Bra {
        target: u32,
        /// Immediate post-dominator of this branch: where diverged lanes rejoin (`u32::MAX` =
        /// kernel exit).
        reconv: u32,
    },
    Exit,
    Trap,
    /// `bar.sync id{, count}`: only a count covering the whole block is modelled (checked at run
    /// time).
    Bar {
        id: Src,
        count: Option<Src>,
    },
    Nop,
    /// `prefetch` / `prefetchu`: moves nothing and is not counted as traffic, but its address
    /// must lie in memory the kernel may read (a fault otherwise: stricter than a hint needs, so
    /// a prefetch computed from the wrong rows is found). Not a global access for the
    /// grid-dependency rule: it reads no data a predecessor writes into a register.
    Prefetch {
        space: Space,
        addr: Addr,
    },
    /// `griddepcontrol.wait`: the prerequisite grids are complete. In the simulator they always
    /// are; it marks the warp as past its wait, before which a kernel that has one may not touch
    /// global memory.
    GridDepWait,
    /// `fence.*` / `membar.*`: a sequentially consistent host fence in the in-order schedule
    /// (blocks on other host threads see this block's earlier stores first); under
    /// [`crate::Schedule::Random`] it makes the block's buffered global stores visible.
    Fence,
    /// `nanosleep`: ends the warp's turn (a spin-wait's way of letting other warps run); the
    /// warp resumes after it. No time passes in the simulator.
    Sleep,
    Shfl {
        mode: ShflMode,
        d: Reg,
        p: Option<Reg>,
        a: Src,
        b: Src,
        c: Src,
        mask: Src,
    },
    Vote {
        mode: VoteMode,
        d: Reg,
        a: Src,
        negate: bool,
        mask: Src,
    },
    Redux {
        op: ReduxOp,
        ty: Ty,
        d: Reg,
        a: Src,
        mask: Src,
    },
    Activemask {
        d: Reg,
    },
    Mma {
        kind: MmaKind,
        d: [Reg; 4],
        a: [Src; 4],
        b: [Src; 2],
        c: [Src; 4],
    },
    Ldmatrix {
        count: u8,
        trans: bool,
        space: Space,
        ds: Box<[Reg]>,
        addr: Addr,
    },
    /// `cp.async` modelled as an immediate copy; bytes past `src_size` are zero-filled.
    CpAsync {
        dst: Addr,
        src: Addr,
        size: u32,
        src_size: Option<Src>,
    },
    /// An instruction the simulator does not implement; a launch of a kernel containing one is
    /// refused.
    Unsupported,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Guard {
    pub reg: Reg,
    pub negate: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Inst {
    pub op: Op,
    pub guard: Option<Guard>,
    pub class: Class,
    /// 1-based PTX source line.
    pub line: u32,
}

/// A kernel parameter: its byte offset in the parameter buffer and its declared size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Param {
    pub name: String,
    pub offset: u32,
    pub size: u32,
}

/// A lowered `.entry`.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    pub name: String,
    pub insts: Vec<Inst>,
    pub nregs: u32,
    /// Registers some thread may read before writing them: the only ones cleared when a register
    /// file is reused for a new block (see `uninit.rs`).
    pub zero_regs: Vec<Reg>,
    pub params: Vec<Param>,
    pub param_bytes: u32,
    /// Bytes of static `.shared` (module and function scope); dynamic shared memory starts after
    /// it.
    pub static_shared: u32,
    /// Bytes of `.local` per thread.
    pub local_bytes: u32,
    /// Source text of each unsupported instruction, with its line.
    pub unsupported: Vec<(u32, String)>,
    /// The kernel executes `griddepcontrol.wait`: it may be launched before its predecessor has
    /// finished, so each warp's global memory accesses must come after its wait (checked at run
    /// time).
    pub grid_dep_wait: bool,
}
