//! A backend that records launches instead of running them, for host-only launcher checks.

use ingot_kernels::{Accelerator, KArg};

/// Records `(kernel, grid, block)` of every launch, and its arguments (a buffer as `Some` of its
/// length, a `u32` as `None` of its value's bits: enough to see order and kind); a buffer is its
/// byte length, so the launchers' size checks see real lengths without any memory behind them.
#[derive(Default)]
pub struct Recorder {
    pub launches: Vec<(String, [u32; 3], [u32; 3])>,
    pub args: Vec<Vec<(ingot_kernels::ParamKind, u64)>>,
}

impl Accelerator for Recorder {
    type Buf = usize;
    fn name(&self) -> &str {
        "recorder"
    }
    fn alloc(&mut self, bytes: usize) -> ingot_kernels::Result<usize> {
        Ok(bytes)
    }
    fn buf_len(&self, buf: &usize) -> usize {
        *buf
    }
    /// No memory behind a buffer: every one is at address 0.
    fn address(&self, _: &usize) -> u64 {
        0
    }
    fn upload(&mut self, _: &usize, _: &[u8]) -> ingot_kernels::Result<()> {
        Ok(())
    }
    fn download(&mut self, _: &usize, _: &mut [u8]) -> ingot_kernels::Result<()> {
        Ok(())
    }
    fn launch(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        _: u32,
        args: &[KArg<'_, usize>],
    ) -> ingot_kernels::Result<()> {
        self.launches.push((kernel.to_owned(), grid, block));
        let arg = |a: &KArg<'_, usize>| {
            let bits = match *a {
                KArg::Buf(&len) => len as u64,
                KArg::U32(v) => u64::from(v),
                KArg::I32(v) => v as u32 as u64,
                KArg::F32(v) => u64::from(v.to_bits()),
                KArg::U64(v) => v,
            };
            (a.kind(), bits)
        };
        self.args.push(args.iter().map(arg).collect());
        Ok(())
    }
}
