//! Kernel signatures: each kernel's parameter list is declared once, by [`signature!`], as a
//! struct of named, typed fields generic over the pointer type. The same declaration yields the
//! descriptor's [`Param`] list ([`Signature::PARAMS`]) and the arguments in declaration order
//! ([`Signature::each`]), so the host launchers (`&Buf` pointers) and the planner (buffer
//! references) fill one struct and a misnamed, missing or mistyped argument is a compile error.
//! The descriptor side is a [`Kernel`]: a [`KernelDesc`] whose `params` are its signature's.
//! The PTX `.entry` signatures are checked against the descriptors by
//! `kernels/tests/launch_table.rs`.

use super::{KernelDesc, Param, ParamKind};
use core::marker::PhantomData;
use core::ops::Deref;

/// One kernel argument; `P` is the caller's pointer type (a device buffer handle, or a plan's
/// buffer reference).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<P> {
    /// A global-memory pointer ([`ParamKind::Ptr`]).
    Ptr(P),
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
}

impl<P> Arg<P> {
    /// The PTX parameter kind this argument fills.
    pub const fn kind(&self) -> ParamKind {
        match self {
            Arg::Ptr(_) => ParamKind::Ptr,
            Arg::U32(_) => ParamKind::U32,
            Arg::I32(_) => ParamKind::I32,
            Arg::F32(_) => ParamKind::F32,
            Arg::U64(_) => ParamKind::U64,
        }
    }
}

/// A kernel parameter list and the struct that fills it (declared by `signature!`; the
/// implementing type is the struct with the pointer type `()`).
pub trait Signature {
    /// The parameters in PTX declaration order.
    const PARAMS: &'static [Param];
    /// The argument struct with pointers of type `P`.
    type Args<P: Copy>: Copy;
    /// Calls `f` with each argument of `args`, in [`Self::PARAMS`] order.
    fn each<P: Copy>(args: &Self::Args<P>, f: &mut dyn FnMut(Arg<P>));
}

/// A kernel descriptor typed by its [`Signature`]: a launch of it takes exactly `S::Args`.
/// Dereferences to the untyped [`KernelDesc`] (the launch table, the device constants).
pub struct Kernel<S> {
    pub desc: KernelDesc,
    sig: PhantomData<fn() -> S>,
}

impl<S: Signature> Kernel<S> {
    /// The kernel exported as `name`, with `S`'s parameters and the given launch shape (see the
    /// fields of [`KernelDesc`]).
    pub const fn new(
        name: &'static str,
        block: [u32; 3],
        items_per_block: u32,
        shared_bytes: u32,
    ) -> Self {
        Kernel {
            desc: KernelDesc {
                name,
                params: S::PARAMS,
                block,
                items_per_block,
                shared_bytes,
            },
            sig: PhantomData,
        }
    }

    /// The same signature and launch shape under another exported name (a sibling
    /// instantiation: the Q8_0-cache variant of an attention kernel).
    pub const fn renamed(&self, name: &'static str) -> Self {
        let d = self.desc;
        Kernel::new(name, d.block, d.items_per_block, d.shared_bytes)
    }
}

impl<S> Kernel<S> {
    /// The untyped descriptor.
    pub const fn desc(&self) -> &KernelDesc {
        &self.desc
    }
}

impl<S> Deref for Kernel<S> {
    type Target = KernelDesc;
    fn deref(&self) -> &KernelDesc {
        &self.desc
    }
}

impl<S> Clone for Kernel<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Kernel<S> {}

impl<S> PartialEq for Kernel<S> {
    fn eq(&self, other: &Self) -> bool {
        self.desc == other.desc
    }
}

impl<S> core::fmt::Debug for Kernel<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.desc.fmt(f)
    }
}

/// Declares a kernel signature: `Name { field: kind, .. }` with `kind` one of `ptr`, `u32`,
/// `i32`, `f32`, `u64`, in the device function's parameter order and with its parameter names.
/// Generates `pub struct Name<P = ()>` (pointer fields of type `P`, scalars of their Rust type;
/// `Clone`, `Copy` and `Debug` written out, since `derive` rejects the fields' type macros) and
/// its [`Signature`] implementation.
macro_rules! signature {
    ($(#[$m:meta])* $name:ident { $($field:ident: $kind:ident),* $(,)? }) => {
        $(#[$m])*
        pub struct $name<P = ()> {
            $(pub $field: signature!(@ty $kind P),)*
        }

        impl<P: Copy> Clone for $name<P> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<P: Copy> Copy for $name<P> {}

        impl<P: core::fmt::Debug> core::fmt::Debug for $name<P> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    $(.field(stringify!($field), &self.$field))*
                    .finish()
            }
        }

        impl $crate::launch::Signature for $name {
            const PARAMS: &'static [$crate::launch::Param] = &[$($crate::launch::Param {
                name: stringify!($field),
                kind: signature!(@kind $kind),
            }),*];
            type Args<P: Copy> = $name<P>;
            fn each<P: Copy>(a: &$name<P>, f: &mut dyn FnMut($crate::launch::Arg<P>)) {
                $(f(signature!(@arg $kind a.$field));)*
            }
        }
    };
    (@ty ptr $p:ident) => { $p };
    (@ty u32 $p:ident) => { u32 };
    (@ty i32 $p:ident) => { i32 };
    (@ty f32 $p:ident) => { f32 };
    (@ty u64 $p:ident) => { u64 };
    (@kind ptr) => { $crate::launch::ParamKind::Ptr };
    (@kind u32) => { $crate::launch::ParamKind::U32 };
    (@kind i32) => { $crate::launch::ParamKind::I32 };
    (@kind f32) => { $crate::launch::ParamKind::F32 };
    (@kind u64) => { $crate::launch::ParamKind::U64 };
    (@arg ptr $v:expr) => { $crate::launch::Arg::Ptr($v) };
    (@arg u32 $v:expr) => { $crate::launch::Arg::U32($v) };
    (@arg i32 $v:expr) => { $crate::launch::Arg::I32($v) };
    (@arg f32 $v:expr) => { $crate::launch::Arg::F32($v) };
    (@arg u64 $v:expr) => { $crate::launch::Arg::U64($v) };
}
pub(crate) use signature;
