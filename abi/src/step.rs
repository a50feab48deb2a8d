//! The per-token state of a decode step, kept in device memory.
//!
//! Nothing that changes from one token to the next is a kernel argument: kernels read the token
//! id and position from this struct, so a captured CUDA graph replays unchanged token after token.
//! The final argmax kernel writes the next token and advances the position for the next replay.

/// Device-resident decode step state (16 bytes, one per sequence).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct StepState {
    /// Token id fed to this step (read by the embedding fetch).
    pub token: u32,
    /// Position of `token` in the sequence, 0-based; this step attends to cache rows `0..=pos`
    /// and writes its latent row at `pos`.
    pub pos: u32,
    /// Token chosen by this step's argmax (written by the argmax kernel, lowest index on ties).
    pub next_token: u32,
    /// Number of steps the argmax kernel has completed; lets the host tell a fresh result from a
    /// stale one.
    pub steps_done: u32,
}

const _: () = assert!(core::mem::size_of::<StepState>() == 16);
