//! A backend that records launches instead of running them, for host-only launcher checks.

use ingot_kernels::{Accelerator, KArg};

/// Records `(kernel, grid, block)` of every launch; a buffer is its byte length, so the
/// launchers' size checks see real lengths without any memory behind them.
#[derive(Default)]
pub struct Recorder {
    pub launches: Vec<(String, [u32; 3], [u32; 3])>,
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
        _: &[KArg<'_, usize>],
    ) -> ingot_kernels::Result<()> {
        self.launches.push((kernel.to_owned(), grid, block));
        Ok(())
    }
}
