//! Device, module, buffer and launch.

use crate::error::{Call, CudaError};
use crate::module::Module;
use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{result, CudaContext, CudaSlice, CudaStream, DevicePtr};
use std::ffi::c_void;
use std::sync::Arc;

/// An open device with one stream.
///
/// The stream is a non-default one and cudarc's per-buffer event tracking is off, so all work
/// can be captured into a CUDA graph (the legacy NULL stream cannot be captured, and tracking
/// events recorded before a capture break it). Ordering therefore rests on the single stream:
/// every copy and launch goes to it, and the host waits with [`Gpu::synchronize`] or an
/// `Event` before touching results. The one exception is a [`crate::CopyStream`], whose copies
/// are ordered after this stream by an explicit event and polled by their own fences.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Largest L2 access policy window the device takes, in bytes; 0 where it takes none or
    /// [`NO_L2_STREAMING`] is set (then [`LaunchOptions::l2_streaming`] is ignored).
    l2_window_max: usize,
}

/// Set (to anything but `0`), [`Gpu::new`] gives no launch an L2 access policy window
/// ([`LaunchOptions::l2_streaming`] is ignored): the baseline the streaming hint is measured
/// against, and a way around a driver that refuses it.
pub const NO_L2_STREAMING: &str = "INGOT_NO_L2_STREAMING";

/// How [`Gpu::launch_node`] enqueues a kernel.
#[derive(Clone, Copy, Default)]
pub struct LaunchOptions<'a> {
    /// The operation enqueued just before on the stream is a kernel launch (the caller
    /// guarantees it): when the module launches early ([`Module::early_launch`]) the kernel is
    /// launched with programmatic stream serialization (Hopper's programmatic dependent launch),
    /// so its blocks may start while the previous kernel's last blocks run and its launch latency
    /// overlaps them; otherwise it is an ordinary launch. In a captured graph this makes a
    /// programmatic edge.
    pub after_kernel: bool,
    /// A buffer the kernel reads once, which nothing after it in the step reads again: the
    /// launch gets an L2 access policy window over it (its first
    /// `CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE` bytes) whose hits and misses both take
    /// the streaming property, so its lines are the first L2 gives up and lines an earlier
    /// launch prefetched for a later one stay. A hint to the cache only: the results do not
    /// depend on it. In a captured graph it becomes the kernel node's attribute.
    pub l2_streaming: Option<&'a DeviceBuffer>,
}

/// The access policy window [`LaunchOptions::l2_streaming`] gives a launch: `len` bytes from
/// device address `base`, at most `max` of them (the device's limit), every line streaming;
/// `None` where the device takes no window or there are no bytes.
pub(crate) fn streaming_window(
    base: u64,
    len: usize,
    max: usize,
) -> Option<sys::CUaccessPolicyWindow> {
    if max == 0 || len == 0 {
        return None;
    }
    Some(sys::CUaccessPolicyWindow {
        base_ptr: base as *mut c_void,
        num_bytes: len.min(max),
        hitRatio: 1.0,
        hitProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        missProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
    })
}

/// Device memory, `len` bytes, freed on drop. Allocations are at least 256-byte aligned.
pub struct DeviceBuffer {
    slice: CudaSlice<u8>,
}

impl DeviceBuffer {
    pub(crate) fn slice(&self) -> &CudaSlice<u8> {
        &self.slice
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether the buffer holds no bytes (never true: zero-byte allocations are refused).
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }
}

/// One kernel argument, in PTX parameter order.
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    Buf(&'a DeviceBuffer),
    /// The address `offset` bytes into the buffer; the caller keeps `offset < len`.
    BufAt(&'a DeviceBuffer, u64),
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
}

/// Grid and block dimensions plus dynamic shared memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl Gpu {
    /// Opens device `ordinal`. Fails with [`CudaError::NoDriver`] when libcuda is missing and
    /// [`CudaError::NoDevice`] when the driver has no such device; never panics.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        // SAFETY: only tries to dlopen the driver library; cudarc panics on the first driver
        // call when this is false, so it must come first.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver);
        }
        result::init().call("cuInit")?;
        let count = CudaContext::device_count().call("cuDeviceGetCount")?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")?;
        // SAFETY: called before any buffer exists; all work is ordered on the one stream below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().call("cuStreamCreate")?;
        // A driver that cannot say takes no window: the hint is dropped, nothing else.
        let l2_window_max = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|_| !env_set(NO_L2_STREAMING))
            .unwrap_or(0);
        let mut gpu = Self {
            ctx,
            stream,
            l2_window_max,
        };
        if !gpu.window_taken() {
            gpu.l2_window_max = 0;
        }
        Ok(gpu)
    }

    /// Whether the driver takes a streaming window ([`streaming_window`]) at all: set on the
    /// stream over a scratch buffer, then cleared (a window of no bytes), before any capture. A
    /// launch whose window the driver refused would fail its graph's capture; a refusal here only
    /// drops the hint.
    fn window_taken(&self) -> bool {
        let Ok(scratch) = self.alloc(4096) else {
            return false;
        };
        let base = scratch.slice.device_ptr(&self.stream).0;
        let Some(w) = streaming_window(base, scratch.len(), self.l2_window_max) else {
            return false;
        };
        let set = |w: sys::CUaccessPolicyWindow| {
            // SAFETY: an all-zero value is a valid value of the plain C union.
            let mut v: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
            v.accessPolicyWindow = w;
            let id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
            // SAFETY: the stream is this device's and not capturing; `v` outlives the call.
            unsafe { sys::cuStreamSetAttribute(self.stream.cu_stream(), id, &v) }.result()
        };
        let taken = set(w).is_ok();
        // Cleared whatever happened: a window left on the stream would apply to every launch.
        let cleared = set(sys::CUaccessPolicyWindow { num_bytes: 0, ..w }).is_ok();
        taken && cleared
    }

    /// Largest L2 access policy window a launch gets, in bytes (0: none, see
    /// [`LaunchOptions::l2_streaming`]).
    pub fn l2_window_max(&self) -> usize {
        self.l2_window_max
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn stream_handle(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Device name as the driver reports it.
    pub fn name(&self) -> Result<String, CudaError> {
        self.ctx.name().call("cuDeviceGetName")
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> Result<(i32, i32), CudaError> {
        self.ctx.compute_capability().call("cuDeviceGetAttribute")
    }

    /// Streaming multiprocessors of the device (82 on an RTX 3090, 132 on an H200).
    pub fn sm_count(&self) -> Result<u32, CudaError> {
        let n = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .call("cuDeviceGetAttribute")?;
        Ok(n.max(1) as u32)
    }

    /// L2 cache size in bytes as the driver reports it (0 when it reports none).
    pub fn l2_bytes(&self) -> Result<usize, CudaError> {
        let n = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .call("cuDeviceGetAttribute")?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// JIT-compiles PTX text for this device (`cuModuleLoadDataEx`). A module the JIT rejects
    /// is [`CudaError::Jit`] with the JIT's error log; a loaded one carries its
    /// [`crate::JitReport`] (wall time, verbose info log).
    pub fn load_ptx(&self, ptx: &str) -> Result<Module, CudaError> {
        Module::load(&self.ctx, ptx)
    }

    /// Loads `cubin`, built offline by ptxas for `arch` (which must be this device's: see
    /// `ingot_kernels::cubin`); a cubin for another architecture is [`CudaError::Jit`] with the
    /// driver's `CUDA_ERROR_NO_BINARY_FOR_GPU`.
    pub fn load_cubin(&self, cubin: &[u8], arch: &str) -> Result<Module, CudaError> {
        Module::load_cubin(&self.ctx, cubin, arch)
    }

    /// Allocates `bytes` bytes of zeroed device memory.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        if bytes == 0 {
            return Err(CudaError::EmptyAlloc);
        }
        let slice = self.stream.alloc_zeros::<u8>(bytes).call("cuMemAlloc")?;
        Ok(DeviceBuffer { slice })
    }

    /// Copies `data` to the start of `buf` and waits for the copy.
    pub fn upload(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<(), CudaError> {
        check_len("upload", buf, data.len())?;
        let (ptr, _sync) = buf.slice.device_ptr(&self.stream);
        // SAFETY: `ptr` addresses `buf.len()` ≥ `data.len()` bytes; the copy is waited for
        // before `data` can be released.
        unsafe { result::memcpy_htod_async(ptr, data, self.stream.cu_stream()) }
            .call("cuMemcpyHtoDAsync")?;
        self.synchronize()
    }

    /// Copies the first `out.len()` bytes of `buf` into `out` and waits for the copy.
    pub fn download(&self, buf: &DeviceBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        check_len("download", buf, out.len())?;
        let (ptr, _sync) = buf.slice.device_ptr(&self.stream);
        // SAFETY: as in `upload`, with the host side written.
        unsafe { result::memcpy_dtoh_async(out, ptr, self.stream.cu_stream()) }
            .call("cuMemcpyDtoHAsync")?;
        self.synchronize()
    }

    /// Enqueues kernel `name` of `module`. The caller guarantees that `args` match the kernel's
    /// PTX parameter list and that the buffers are large enough for `shape`; the launch is
    /// asynchronous, errors of the kernel itself surface at the next synchronisation.
    pub fn launch(
        &self,
        module: &mut Module,
        name: &str,
        shape: LaunchShape,
        args: &[Arg<'_>],
    ) -> Result<(), CudaError> {
        self.launch_node(module, name, shape, args, LaunchOptions::default())
    }

    /// As [`Gpu::launch`], with the options `opts` ([`LaunchOptions`]).
    pub fn launch_node(
        &self,
        module: &mut Module,
        name: &str,
        shape: LaunchShape,
        args: &[Arg<'_>],
        opts: LaunchOptions<'_>,
    ) -> Result<(), CudaError> {
        let programmatic = opts.after_kernel && module.early_launch();
        let window = opts.l2_streaming.and_then(|b| {
            let base = b.slice.device_ptr(&self.stream).0;
            streaming_window(base, b.len(), self.l2_window_max)
        });
        self.launch_with(module, name, shape, args, programmatic, window)
    }

    fn launch_with(
        &self,
        module: &mut Module,
        name: &str,
        shape: LaunchShape,
        args: &[Arg<'_>],
        programmatic: bool,
        window: Option<sys::CUaccessPolicyWindow>,
    ) -> Result<(), CudaError> {
        let func = module.function(name)?;
        // One 8-byte slot per argument; the driver reads as many bytes as the parameter has.
        let mut slots: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                Arg::Buf(b) => b.slice.device_ptr(&self.stream).0,
                Arg::BufAt(b, offset) => b.slice.device_ptr(&self.stream).0 + offset,
                Arg::U32(v) => u64::from(v),
                Arg::I32(v) => u64::from(v as u32),
                Arg::F32(v) => u64::from(v.to_bits()),
                Arg::U64(v) => v,
            })
            .collect();
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s as *mut u64 as *mut c_void)
            .collect();
        let [gx, gy, gz] = shape.grid;
        let [bx, by, bz] = shape.block;
        if !programmatic && window.is_none() {
            // SAFETY: every parameter pointer addresses a live slot holding the value in its
            // low bytes (little-endian), which is what cuLaunchKernel reads for 4- and 8-byte
            // params.
            return unsafe {
                result::launch_kernel(
                    func,
                    (gx, gy, gz),
                    (bx, by, bz),
                    shape.shared_bytes,
                    self.stream.cu_stream(),
                    &mut params,
                )
            }
            .call("cuLaunchKernel");
        }
        let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::with_capacity(2);
        if programmatic {
            // SAFETY: an all-zero attribute is a valid value of the plain C union.
            let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(attr);
        }
        if let Some(w) = window {
            // SAFETY: as above.
            let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
            attr.value.accessPolicyWindow = w;
            attrs.push(attr);
        }
        let config = sys::CUlaunchConfig {
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: shape.shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        // A driver error names the window, the one attribute a user can drop.
        let call = match window {
            Some(_) => {
                "cuLaunchKernelEx with an L2 access policy window (INGOT_NO_L2_STREAMING=1 \
                        launches without it)"
            }
            None => "cuLaunchKernelEx",
        };
        // SAFETY: `config` and `attrs` outlive the call; the parameter slots as in the plain
        // launch; `extra` is null.
        unsafe {
            sys::cuLaunchKernelEx(&config, func, params.as_mut_ptr(), std::ptr::null_mut()).result()
        }
        .call(call)
    }

    /// Enqueues a device-to-device copy of `min(src.len(), dst.len())` bytes on the stream.
    pub fn copy_device(&self, src: &DeviceBuffer, dst: &DeviceBuffer) -> Result<(), CudaError> {
        let n = src.len().min(dst.len());
        let (s, _s) = src.slice.device_ptr(&self.stream);
        let (d, _d) = dst.slice.device_ptr(&self.stream);
        // SAFETY: both buffers hold at least `n` bytes and stay alive (borrowed) while the
        // caller orders later use after the copy on the same stream.
        unsafe { result::memcpy_dtod_async(d, s, n, self.stream.cu_stream()) }
            .call("cuMemcpyDtoDAsync")
    }

    /// Waits for all work on the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().call("cuStreamSynchronize")
    }

    /// Runs `work` between two timing events and returns the GPU time in milliseconds.
    pub fn time_ms(
        &self,
        work: impl FnOnce(&Self) -> Result<(), CudaError>,
    ) -> Result<f32, CudaError> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(flags).call("cuEventCreate")?;
        let end = self.ctx.new_event(flags).call("cuEventCreate")?;
        start.record(&self.stream).call("cuEventRecord")?;
        work(self)?;
        end.record(&self.stream).call("cuEventRecord")?;
        end.synchronize().call("cuEventSynchronize")?;
        start.elapsed_ms(&end).call("cuEventElapsedTime")
    }
}

/// Whether environment variable `var` is set to anything but empty or `0`.
fn env_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

fn check_len(op: &'static str, buf: &DeviceBuffer, host: usize) -> Result<(), CudaError> {
    if host <= buf.len() {
        Ok(())
    } else {
        Err(CudaError::SizeMismatch {
            op,
            device: buf.len(),
            host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a GPU this must be a typed error, never a panic; with one, a usable device.
    #[test]
    fn open_reports_missing_driver_or_works() {
        match Gpu::new(0) {
            Ok(gpu) => {
                let buf = gpu.alloc(64).expect("alloc");
                let data: Vec<u8> = (0..64).collect();
                gpu.upload(&buf, &data).expect("upload");
                let mut back = vec![0u8; 64];
                gpu.download(&buf, &mut back).expect("download");
                assert_eq!(back, data);
                let too_long = vec![0u8; 65];
                assert!(matches!(
                    gpu.upload(&buf, &too_long),
                    Err(CudaError::SizeMismatch { .. })
                ));
            }
            Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
                let msg = crate::no_gpu_message("ingot-cuda open", &e);
                assert!(!crate::gpu_required(), "{msg}");
                eprintln!("{msg}");
                assert!(e.to_string().contains("libcuda") || e.to_string().contains("device"));
            }
            Err(e) => panic!("unexpected error opening the GPU: {e}"),
        }
    }

    /// The window covers the buffer from its start, cut at the device's limit, every line
    /// streaming (hit and miss alike); a device without windows, or no bytes, gets none.
    #[test]
    fn a_streaming_window_covers_the_buffer_up_to_the_limit() {
        let w = streaming_window(0x7f00_0000_0000, 2_359_296, 134_213_632).expect("a window");
        assert_eq!(w.base_ptr as u64, 0x7f00_0000_0000);
        assert_eq!(w.num_bytes, 2_359_296);
        assert_eq!(w.hitRatio, 1.0);
        let streaming = sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING;
        assert_eq!((w.hitProp, w.missProp), (streaming, streaming));
        let cut = streaming_window(4096, 1 << 30, 1 << 20).expect("a window");
        assert_eq!(cut.num_bytes, 1 << 20);
        assert!(streaming_window(4096, 1 << 20, 0).is_none());
        assert!(streaming_window(4096, 0, 1 << 20).is_none());
    }
}
