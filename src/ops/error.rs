//! The error every analysis returns: bad parameters, unsupported input, or a GPU failure.

use thiserror::Error;

use crate::gpu::GpuError;
use crate::image::ImageError;

/// Errors of the analyses (CPU and CUDA).
#[derive(Debug, Error)]
pub enum OpError {
    /// A parameter is out of range; the message names it and the allowed values.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// The input cannot be processed by this op (format, size).
    #[error("unsupported input: {0}")]
    Unsupported(String),
    /// Image layout problem.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// CUDA failure.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

impl From<cudarc::driver::DriverError> for OpError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Self::Gpu(GpuError::Driver(e))
    }
}
