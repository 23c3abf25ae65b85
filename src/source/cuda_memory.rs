//! CUDA memory from nvcodec's decoders (`video/x-raw(memory:CUDAMemory)`, NV12): the frame stays
//! on the GPU from the decoder to the analyses, in `run`'s file and network sources
//! ([`super::Source`] with a CUDA backend) and in the GStreamer element.
//!
//! Two things make that work. The decoder must write into memory the analyses' kernels can
//! read: it asks for a CUDA context (a `gst.cuda.context` context query or need-context
//! message), and gets the analyses' own context wrapped as a `GstCudaContext`
//! ([`SharedContext`]): the element answers the query ([`SharedContext::answer`]), a source
//! sets it on its whole pipeline before it starts ([`SharedContext::gst_context`]). The
//! decoder's buffer pool then allocates in it. A buffer maps to its planes' device pointers with
//! the `GST_MAP_CUDA` flag ([`device_frame`]); the ring converts them to RGB on its stream
//! (`ops::nv12`, equal to GStreamer's `videoconvert`). A buffer whose memory lives in another
//! context (a decoder that did not take ours, e.g. one bound to another GPU) maps to host memory
//! like any other, so results never depend on where a frame came from, only the copies do.
//!
//! GStreamer's CUDA library (`libgstcuda-1.0`, in gst-plugins-bad since 1.22) has no Rust
//! bindings and no development files on Debian 12; the few functions used are looked up at run
//! time. Without the library (or without CUDA) frames come in system memory only.

use std::ffi::c_void;
use std::sync::{Arc, LazyLock};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::glib::translate::ToGlibPtr;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;

use super::DeviceNv12;
use crate::gpu::GpuContext;
use crate::ops::nv12::Nv12Conversion;
use crate::ops::nv12::gpu::Nv12Planes;

/// `GST_MAP_CUDA`: map a CUDA memory to its device pointer (`GST_MAP_FLAG_LAST << 1`).
const GST_MAP_CUDA: u32 = gst::ffi::GST_MAP_FLAG_LAST << 1;

/// The caps feature of CUDA memory.
pub const CAPS_FEATURE: &str = "memory:CUDAMemory";

/// The context type a decoder queries for its CUDA context (`GST_CUDA_CONTEXT_TYPE`).
pub const CONTEXT_TYPE: &str = "gst.cuda.context";

/// The start of `GstCudaMemory` (public in `gstcudamemory.h`): the context it was allocated in.
#[repr(C)]
struct GstCudaMemoryHead {
    mem: gst::ffi::GstMemory,
    context: *mut c_void,
}

type LoadLibrary = unsafe extern "C" fn() -> i32;
type NewWrapped = unsafe extern "C" fn(*mut c_void, i32) -> *mut c_void;
type HandleContextQuery =
    unsafe extern "C" fn(*mut gst::ffi::GstElement, *mut gst::ffi::GstQuery, *mut c_void) -> i32;
type IsCudaMemory = unsafe extern "C" fn(*mut gst::ffi::GstMemory) -> i32;
type GetHandle = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type NewContext = unsafe extern "C" fn(*mut c_void) -> *mut gst::ffi::GstContext;

/// The functions of `libgstcuda-1.0` called here.
struct GstCuda {
    new_wrapped: NewWrapped,
    handle_context_query: HandleContextQuery,
    is_cuda_memory: IsCudaMemory,
    get_handle: GetHandle,
    new_context: NewContext,
    /// Kept loaded for the process' life (the function pointers point into it).
    _lib: libloading::Library,
}

impl GstCuda {
    fn load() -> Result<Self, String> {
        // SAFETY: loading GStreamer's own CUDA library runs its (GObject) constructors only;
        // the symbols are looked up with the signatures of gstcudacontext.h, gstcudautils.h and
        // gstcudamemory.h (GStreamer 1.22).
        unsafe {
            let lib = libloading::Library::new("libgstcuda-1.0.so.0")
                .map_err(|e| format!("libgstcuda-1.0: {e}"))?;
            // The library reaches the CUDA driver through a table it fills here (nvcodec's
            // plugin does the same when it loads): without it the first call into the driver
            // aborts the process.
            let load_library: LoadLibrary = symbol(&lib, b"gst_cuda_load_library\0")?;
            if load_library() == 0 {
                return Err("libgstcuda-1.0 cannot load the CUDA driver".into());
            }
            let new_wrapped = symbol(&lib, b"gst_cuda_context_new_wrapped\0")?;
            let handle_context_query = symbol(&lib, b"gst_cuda_handle_context_query\0")?;
            let is_cuda_memory = symbol(&lib, b"gst_is_cuda_memory\0")?;
            let get_handle = symbol(&lib, b"gst_cuda_context_get_handle\0")?;
            let new_context = symbol(&lib, b"gst_context_new_cuda_context\0")?;
            Ok(Self {
                new_wrapped,
                handle_context_query,
                is_cuda_memory,
                get_handle,
                new_context,
                _lib: lib,
            })
        }
    }
}

/// The function `name` (NUL-terminated) of `lib`, as a `T`.
///
/// # Safety
/// `T` must be the function's type as the library declares it.
unsafe fn symbol<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<T, String> {
    // SAFETY: the caller vouches for the type; the pointer lives as long as `lib` is loaded.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| e.to_string())
}

static GST_CUDA: LazyLock<Result<GstCuda, String>> = LazyLock::new(GstCuda::load);

/// The analyses' CUDA context as a `GstCudaContext`, handed to the decoder.
pub struct SharedContext {
    /// The `GstCudaContext` (one reference, released on drop).
    wrapped: *mut c_void,
    /// The CUDA context it wraps (the analyses').
    handle: *mut c_void,
    /// Keeps the wrapped context alive as long as GStreamer may use it.
    _gpu: Arc<GpuContext>,
}

// SAFETY: a GstCudaContext is a GstObject (thread-safe reference counting); the CUcontext
// handle is only compared, never made current here.
unsafe impl Send for SharedContext {}
// SAFETY: as above; no method mutates through the pointers.
unsafe impl Sync for SharedContext {}

impl SharedContext {
    /// Wraps `gpu`'s context (`Err`: GStreamer's CUDA library is missing or refused it).
    pub fn new(gpu: &Arc<GpuContext>) -> Result<Self, String> {
        let lib = GST_CUDA.as_ref().map_err(Clone::clone)?;
        let handle = gpu.cuda().cu_ctx().cast::<c_void>();
        let device = gpu.cuda().cu_device();
        // SAFETY: `handle` and `device` are the live context and device of `gpu`, which this
        // value keeps alive for as long as the wrapper exists.
        let wrapped = unsafe { (lib.new_wrapped)(handle, device) };
        if wrapped.is_null() {
            return Err("gst_cuda_context_new_wrapped refused the context".into());
        }
        Ok(Self {
            wrapped,
            handle,
            _gpu: gpu.clone(),
        })
    }

    /// A `gst.cuda.context` context holding this context, to set on a pipeline before it
    /// starts: its decoders then allocate their frames in the analyses' context.
    pub fn gst_context(&self) -> Result<gst::Context, String> {
        let lib = GST_CUDA.as_ref().map_err(Clone::clone)?;
        // SAFETY: `wrapped` is a live GstCudaContext; the function returns a new context (full
        // transfer) holding its own reference to it, or null.
        unsafe {
            let context = (lib.new_context)(self.wrapped);
            if context.is_null() {
                return Err("gst_context_new_cuda_context failed".into());
            }
            Ok(glib::translate::from_glib_full(context))
        }
    }

    /// Answers a `gst.cuda.context` context query with this context; `false` for other queries.
    pub fn answer(&self, element: &gst::Element, query: &mut gst::QueryRef) -> bool {
        let Ok(lib) = GST_CUDA.as_ref() else {
            return false;
        };
        // SAFETY: the element and query are live for the call; the function only reads the
        // query's context type and, when it is `gst.cuda.context`, sets a context holding a
        // new reference to `wrapped`.
        unsafe {
            (lib.handle_context_query)(element.as_ptr(), query.as_mut_ptr(), self.wrapped) != 0
        }
    }

    /// Whether `mem` is CUDA memory allocated in this context (its device pointer is valid in
    /// the analyses' kernels).
    pub fn owns(&self, mem: &gst::MemoryRef) -> bool {
        let Ok(lib) = GST_CUDA.as_ref() else {
            return false;
        };
        let ptr = mem.as_ptr() as *mut gst::ffi::GstMemory;
        // SAFETY: `gst_is_cuda_memory` only reads the memory's allocator; when it says yes the
        // memory is a `GstCudaMemory`, whose public head holds its (live, referenced) context.
        unsafe {
            if (lib.is_cuda_memory)(ptr) == 0 {
                return false;
            }
            let context = (*ptr.cast::<GstCudaMemoryHead>()).context;
            !context.is_null() && (lib.get_handle)(context) == self.handle
        }
    }
}

impl Drop for SharedContext {
    fn drop(&mut self) {
        // SAFETY: `wrapped` holds the one reference `gst_cuda_context_new_wrapped` returned.
        unsafe { gst::ffi::gst_object_unref(self.wrapped.cast()) }
    }
}

/// Whether `caps` (fixed) are CUDA memory.
pub fn is_cuda_caps(caps: &gst::CapsRef) -> bool {
    caps.features(0).is_some_and(|f| f.contains(CAPS_FEATURE))
}

/// The NV12 `buffer` of `info` in CUDA memory as a frame the ring reads in place, converted to
/// RGB by `conversion`; the frame holds the buffer until its analyses have read it.
pub fn device_frame(
    buffer: gst::Buffer,
    info: &gst_video::VideoInfo,
    conversion: Nv12Conversion,
) -> Result<DeviceNv12, glib::BoolError> {
    Ok(DeviceNv12 {
        planes: device_planes(&buffer, info)?,
        conversion,
        width: info.width() as usize,
        height: info.height() as usize,
        keep_alive: Arc::new(buffer),
    })
}

/// The device pointers and pitches of an NV12 `buffer` of `info` in CUDA memory. The pointers
/// stay valid while the buffer lives.
fn device_planes(
    buffer: &gst::Buffer,
    info: &gst_video::VideoInfo,
) -> Result<Nv12Planes, glib::BoolError> {
    if info.format() != gst_video::VideoFormat::Nv12 {
        return Err(glib::bool_error!("not NV12"));
    }
    let mut frame = std::mem::MaybeUninit::<gst_video::ffi::GstVideoFrame>::zeroed();
    // SAFETY: the buffer and info are live; a successful map fills `frame`, whose plane data
    // are then device pointers (GST_MAP_CUDA); it is unmapped before returning. Unmapping a
    // read-only CUDA map changes nothing: the pointers stay valid with the memory.
    unsafe {
        let mapped = gst_video::ffi::gst_video_frame_map(
            frame.as_mut_ptr(),
            info.to_glib_none().0 as *mut _,
            buffer.as_mut_ptr(),
            gst::ffi::GST_MAP_READ | GST_MAP_CUDA,
        );
        if mapped == glib::ffi::GFALSE {
            return Err(glib::bool_error!(
                "the buffer does not map to device memory"
            ));
        }
        let f = frame.assume_init_mut();
        let planes = Nv12Planes {
            y: f.data[0] as u64,
            y_pitch: f.info.stride[0] as usize,
            uv: f.data[1] as u64,
            uv_pitch: f.info.stride[1] as usize,
        };
        gst_video::ffi::gst_video_frame_unmap(f);
        Ok(planes)
    }
}
