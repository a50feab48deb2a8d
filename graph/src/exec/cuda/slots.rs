//! The expert cache's view of GPU memory (`SlotMemory`): the decode stream for table writes and
//! selection reads, a copy stream for slab fills.

use ingot_cuda::{CopyStream, Fence, Gpu};

use crate::error::ExecError;
use crate::exec::expert_cache::{SlabCopy, SlotMemory};

/// The GPU's memory as the expert cache sees it: table writes and selection reads go through the
/// decode stream and wait for it; slab copies run on the copy stream, after the decode stream's
/// work so far (the table writes that moved evicted experts out of their slots), while the next
/// replays run.
pub(super) struct CudaSlots<'a> {
    pub gpu: &'a Gpu,
    pub copies: &'a CopyStream,
}

impl SlotMemory for CudaSlots<'_> {
    type Fence = Fence;

    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), ExecError> {
        Ok(self.gpu.read_at(addr, out)?)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ExecError> {
        Ok(self.gpu.write_at(addr, data)?)
    }

    fn copy_slabs(&mut self, copies: &[SlabCopy]) -> Result<Fence, ExecError> {
        self.copies.after(self.gpu)?;
        for c in copies {
            self.copies.copy_at(c.dst, c.src, c.bytes as usize)?;
        }
        Ok(self.copies.fence()?)
    }

    fn landed(&mut self, fence: &Fence) -> Result<bool, ExecError> {
        Ok(fence.is_done()?)
    }
}
