//! stub
use crate::gpu::GpuContext;
use crate::image::{Gray, ImageView};
use crate::ops::OpError;
use super::{CclOutput, CclParams};
/// stub
pub struct CclGpu;
/// stub
pub fn ccl_gpu<T: Gray>(_g: &GpuContext, _img: ImageView<'_, T>, _p: &CclParams) -> Result<CclOutput, OpError> { Err(OpError::Unsupported("x".into())) }
