//! Errors of the CUDA backend: missing libraries, driver calls, kernel compilation, memory.

use thiserror::Error;

/// Everything that can go wrong on the CUDA side.
#[derive(Debug, Error)]
pub enum GpuError {
    /// libcuda (the driver) could not be loaded: no NVIDIA driver on this machine.
    #[error("CUDA driver library (libcuda) not found: no NVIDIA driver installed")]
    NoDriver,
    /// libnvrtc could not be loaded, so kernels cannot be compiled.
    #[error(
        "NVRTC library (libnvrtc) not found: install the CUDA toolkit or the nvidia-cuda-nvrtc wheel and put it on LD_LIBRARY_PATH"
    )]
    NoNvrtc,
    /// The driver is present but reports no device (or not the one asked for).
    #[error("CUDA device {ordinal} not found ({count} device(s) present)")]
    NoDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Devices the driver reports.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// A kernel failed to compile; `log` is NVRTC's log.
    #[error("kernel {module} failed to compile for {arch}:\n{log}")]
    Compile {
        /// Kernel module (file stem in kernels/).
        module: String,
        /// Target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's program log.
        log: String,
    },
    /// A kernel module or entry point was asked for that the registry does not have.
    #[error("kernel function {module}::{function} not found")]
    MissingFunction {
        /// Module name.
        module: String,
        /// Function name.
        function: String,
    },
    /// Device memory ran out while allocating buffers for a frame size.
    #[error("out of GPU memory allocating {what} for a {width}x{height} frame ({bytes} bytes)")]
    OutOfMemory {
        /// What was being allocated.
        what: String,
        /// Frame width.
        width: usize,
        /// Frame height.
        height: usize,
        /// Bytes requested.
        bytes: usize,
    },
    /// The frame is larger than the kernels index (2^31 pixels) or otherwise unsupported.
    #[error("unsupported frame for the CUDA backend: {0}")]
    Unsupported(String),
}

impl GpuError {
    /// Maps a driver error from an allocation to [`GpuError::OutOfMemory`] when it is one.
    #[must_use]
    pub(crate) fn from_alloc(
        err: cudarc::driver::DriverError,
        what: &str,
        width: usize,
        height: usize,
        bytes: usize,
    ) -> Self {
        if err.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Self::OutOfMemory {
                what: what.to_owned(),
                width,
                height,
                bytes,
            }
        } else {
            Self::Driver(err)
        }
    }
}
