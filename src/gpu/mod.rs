//! The CUDA backend: device discovery, NVRTC kernel registry with a disk cache, per-kernel
//! event timers, launch helpers, captured CUDA graphs, and the ring of streams frames flow through.
//!
//! Nothing here panics when CUDA is absent: every entry point checks that the driver and NVRTC
//! libraries can be loaded and returns [`GpuError`] otherwise.

pub(crate) mod capture_lock;
pub mod compile;
pub mod context;
pub mod error;
pub mod foreign;
pub mod frame;
pub mod graph;
pub mod green;
pub mod launch;
pub mod readback;
pub mod timer;

pub use capture_lock::{CaptureExclusion, capture_exclusion};
pub use context::{DeviceInfo, GpuContext};
pub use error::GpuError;
pub use foreign::{
    ForeignSlice, MemoryKind, PointerInfo, free_after_default_stream, pointer_info, wait_for_stream,
};
pub use frame::{DeviceImage, HostPixel, Uploaded, round_trip, upload_view};
pub use graph::GraphCache;
pub use readback::Readback;
pub use timer::KernelTimer;
