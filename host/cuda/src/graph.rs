//! CUDA graph capture and replay, pinned host memory, events and asynchronous copies.
//!
//! Capture rules (CUDA's and cudarc's): a non-default stream (the legacy default stream cannot be
//! captured; see [`Gpu`]), event tracking off (cudarc's per-buffer events would tie the capture to
//! work recorded before it), and no allocation, synchronisation or pageable copy between
//! [`Gpu::begin_capture`] and [`Gpu::end_capture`]; only [`Gpu::launch`] belongs there. The graph
//! fixes every pointer and launch argument, so per-token values live in device buffers.

use crate::error::{Call, CudaError};
use crate::gpu::{DeviceBuffer, Gpu};
use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{result, CudaEvent, CudaGraph, DevicePtr};

/// An instantiated CUDA graph, replayed on the stream it was captured on.
pub struct Graph {
    graph: CudaGraph,
}

impl Graph {
    /// Enqueues one replay (asynchronous).
    pub fn launch(&self) -> Result<(), CudaError> {
        self.graph.launch().call("cuGraphLaunch")
    }

    /// Stages the graph's resources on the device so the first replay is not slower.
    pub fn upload(&self) -> Result<(), CudaError> {
        self.graph.upload().call("cuGraphUpload")
    }
}

/// Page-locked host memory, so device-to-host copies into it are truly asynchronous. Allocated
/// without `WRITECOMBINED` (which would make host reads very slow). Freed on drop.
pub struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
}

impl PinnedBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes (never true: zero-byte allocations are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes. Only meaningful once the copy that wrote them has completed (wait on an
    /// [`Event`] recorded after it); reading earlier returns stale or partial data, never UB
    /// for `u8`.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` addresses `len` bytes owned by this value until drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Mutable bytes, for staging uploads; the caller must not write while a copy reads them.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once. An error here cannot be
        // reported from drop; the memory is then leaked, which is harmless.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

/// A point on the stream the host can wait for.
pub struct Event {
    event: CudaEvent,
}

impl Event {
    /// Blocks until the work enqueued before the last [`Gpu::record`] of this event is done.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.event.synchronize().call("cuEventSynchronize")
    }

    /// Milliseconds of GPU time between `self` and `end` (both timing events, both completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, CudaError> {
        self.event.elapsed_ms(&end.event).call("cuEventElapsedTime")
    }
}

impl Gpu {
    /// `(free, total)` device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize), CudaError> {
        self.context().mem_get_info().call("cuMemGetInfo")
    }

    /// Starts capturing this thread's work on the stream into a graph.
    pub fn begin_capture(&self) -> Result<(), CudaError> {
        self.cuda_stream()
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .call("cuStreamBeginCapture")
    }

    /// Ends the capture and instantiates the graph. An empty capture is
    /// [`CudaError::EmptyGraph`].
    pub fn end_capture(&self) -> Result<Graph, CudaError> {
        let graph = self
            .cuda_stream()
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .call("cuStreamEndCapture/cuGraphInstantiate")?
            .ok_or(CudaError::EmptyGraph)?;
        Ok(Graph { graph })
    }

    /// Allocates `bytes` of page-locked host memory (zeroed).
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer, CudaError> {
        if bytes == 0 {
            return Err(CudaError::EmptyAlloc);
        }
        self.context().bind_to_thread().call("cuCtxSetCurrent")?;
        // SAFETY: plain host allocation; flags 0 = cacheable, not write-combined.
        let ptr = unsafe { result::malloc_host(bytes, 0) }.call("cuMemHostAlloc")? as *mut u8;
        if ptr.is_null() {
            return Err(CudaError::EmptyAlloc);
        }
        // SAFETY: `ptr` addresses `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(PinnedBuffer { ptr, len: bytes })
    }

    /// Creates an event; `timing` events can measure elapsed time, the others are cheaper.
    pub fn event(&self, timing: bool) -> Result<Event, CudaError> {
        let flags = if timing {
            CUevent_flags::CU_EVENT_DEFAULT
        } else {
            CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let event = self
            .context()
            .new_event(Some(flags))
            .call("cuEventCreate")?;
        Ok(Event { event })
    }

    /// Records `event` at the current end of the stream.
    pub fn record(&self, event: &Event) -> Result<(), CudaError> {
        event.event.record(self.cuda_stream()).call("cuEventRecord")
    }

    /// Enqueues a copy of `len` bytes from `src` at `src_offset` into `dst` at `dst_offset`.
    /// The host must not read `dst` before an event recorded after this call completes.
    pub fn copy_to_pinned(
        &self,
        src: &DeviceBuffer,
        src_offset: usize,
        dst: &mut PinnedBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<(), CudaError> {
        check_range("copy_to_pinned", src.len(), src_offset, len)?;
        check_range("copy_to_pinned", dst.len(), dst_offset, len)?;
        let (ptr, _sync) = src.slice().device_ptr(self.cuda_stream());
        let out = &mut dst.bytes_mut()[dst_offset..dst_offset + len];
        // SAFETY: both ranges were checked; the pinned memory outlives the copy because the
        // caller waits on an event before dropping or reading it.
        unsafe { result::memcpy_dtoh_async(out, ptr + src_offset as u64, self.stream_handle()) }
            .call("cuMemcpyDtoHAsync")
    }

    /// Enqueues a copy of `len` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    /// The host must not modify `src` before the copy has completed.
    pub fn copy_from_pinned(
        &self,
        src: &PinnedBuffer,
        src_offset: usize,
        dst: &DeviceBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<(), CudaError> {
        check_range("copy_from_pinned", src.len(), src_offset, len)?;
        check_range("copy_from_pinned", dst.len(), dst_offset, len)?;
        let (ptr, _sync) = dst.slice().device_ptr(self.cuda_stream());
        let data = &src.bytes()[src_offset..src_offset + len];
        // SAFETY: as in `copy_to_pinned`, in the other direction.
        unsafe { result::memcpy_htod_async(ptr + dst_offset as u64, data, self.stream_handle()) }
            .call("cuMemcpyHtoDAsync")
    }
}

fn check_range(op: &'static str, len: usize, offset: usize, n: usize) -> Result<(), CudaError> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(()),
        _ => Err(CudaError::SizeMismatch {
            op,
            device: len,
            host: offset.saturating_add(n),
        }),
    }
}
