//! Host-mapped memory and copies by device address, for routed experts kept outside VRAM
//! (experts beyond VRAM): kernels read a [`MappedBuffer`] through its device address, over the
//! host link.

use crate::error::{Call, CudaError};
use crate::gpu::{DeviceBuffer, Gpu};
use cudarc::driver::{result, sys, DevicePtr};

/// Page-locked host memory mapped into the device's address space (`cuMemHostAlloc` with
/// `DEVICEMAP | PORTABLE`). Freed on drop.
pub struct MappedBuffer {
    ptr: *mut u8,
    len: usize,
    device: u64,
}

impl MappedBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes (never true: zero-byte allocations are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address kernels use.
    pub fn device_address(&self) -> u64 {
        self.device
    }

    /// The bytes, for filling before any kernel reads them.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` addresses `len` bytes owned by this value until drop.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for MappedBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once; an error leaks it.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

impl Gpu {
    /// Allocates `bytes` of zeroed host-mapped memory.
    pub fn alloc_mapped(&self, bytes: usize) -> Result<MappedBuffer, CudaError> {
        if bytes == 0 {
            return Err(CudaError::EmptyAlloc);
        }
        self.context().bind_to_thread().call("cuCtxSetCurrent")?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: plain host allocation with documented flags.
        let ptr = unsafe { result::malloc_host(bytes, flags) }.call("cuMemHostAlloc")? as *mut u8;
        if ptr.is_null() {
            return Err(CudaError::EmptyAlloc);
        }
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` was allocated with DEVICEMAP above; flags must be 0.
        let got = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, ptr.cast(), 0) }.result();
        let buf = MappedBuffer {
            ptr,
            len: bytes,
            device,
        };
        got.call("cuMemHostGetDevicePointer")?;
        // SAFETY: `ptr` addresses `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(buf)
    }

    /// The device address of `buf`'s first byte.
    pub fn device_address(&self, buf: &DeviceBuffer) -> u64 {
        let (ptr, _sync) = buf.slice().device_ptr(self.cuda_stream());
        ptr
    }

    /// Copies `out.len()` bytes from device address `src` (VRAM or host-mapped) and waits.
    pub fn read_at(&self, src: u64, out: &mut [u8]) -> Result<(), CudaError> {
        // SAFETY: the caller passes an address of at least `out.len()` readable bytes; the
        // stream is synchronised before `out` is used.
        unsafe { result::memcpy_dtoh_async(out, src, self.stream_handle()) }
            .call("cuMemcpyDtoHAsync")?;
        self.synchronize()
    }

    /// Copies `data` to device address `dst` and waits (the host may reuse `data` after).
    pub fn write_at(&self, dst: u64, data: &[u8]) -> Result<(), CudaError> {
        // SAFETY: the caller passes an address of at least `data.len()` writable bytes; the
        // stream is synchronised before `data` can go away.
        unsafe { result::memcpy_htod_async(dst, data, self.stream_handle()) }
            .call("cuMemcpyHtoDAsync")?;
        self.synchronize()
    }

    /// Enqueues a copy of `bytes` from device address `src` to `dst` (unified addressing: either
    /// may be host-mapped) on the stream, ordered before the next launch.
    pub fn copy_at(&self, dst: u64, src: u64, bytes: usize) -> Result<(), CudaError> {
        // SAFETY: the caller passes two ranges of `bytes` valid bytes that do not overlap.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, self.stream_handle()) }
            .call("cuMemcpyDtoDAsync")
    }
}

/// A second stream for copies that must neither wait behind the decode stream's graphs nor hold
/// them up (the expert cache's slot fills: a copy engine works while the SMs decode).
pub struct CopyStream {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
}

/// A point on a [`CopyStream`] the host can poll without waiting.
pub struct Fence {
    event: cudarc::driver::CudaEvent,
}

impl Gpu {
    /// Opens a copy stream on this device's context.
    pub fn copy_stream(&self) -> Result<CopyStream, CudaError> {
        let stream = self.context().new_stream().call("cuStreamCreate")?;
        Ok(CopyStream { stream })
    }
}

impl CopyStream {
    /// Orders the copies enqueued from now on after every operation enqueued on `gpu`'s stream
    /// so far (an event recorded there, waited for here; the host does not wait).
    pub fn after(&self, gpu: &Gpu) -> Result<(), CudaError> {
        self.stream
            .join(gpu.cuda_stream())
            .call("cuEventRecord/cuStreamWaitEvent")
    }

    /// Enqueues a copy of `bytes` from device address `src` to `dst` (either may be host-mapped).
    pub fn copy_at(&self, dst: u64, src: u64, bytes: usize) -> Result<(), CudaError> {
        // SAFETY: the caller passes two ranges of `bytes` valid bytes that do not overlap and that
        // no other stream writes, or reads through a table entry, until the copy's fence.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }
            .call("cuMemcpyDtoDAsync")
    }

    /// A fence after every copy enqueued so far.
    pub fn fence(&self) -> Result<Fence, CudaError> {
        let event = self
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .call("cuEventCreate/cuEventRecord")?;
        Ok(Fence { event })
    }
}

impl Fence {
    /// Whether the copies before the fence have completed; never waits. A failed copy is an error
    /// here.
    pub fn is_done(&self) -> Result<bool, CudaError> {
        self.event.try_is_complete().call("cuEventQuery")
    }
}
