//! The readbacks of the CUDA max-tree: the small summary of a frame (what the pipeline reads),
//! the residue left on the device for the compose step, and the full pictures and the parent
//! image (the CLI's `image` command, the parity tests). Every download blocks until the
//! stream's work is done.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::{GpuGray, MaxTreeGpu};
use crate::gpu::Readback;
use crate::image::{DynImage, Image};
use crate::ops::OpError;
use crate::ops::maxtree::{MaxTreeOutput, MaxTreeSummary};

impl MaxTreeGpu {
    /// Node count, changed pixels and residue sum of the last filtered frame: a 24-byte
    /// readback (blocks until the stream's work is done).
    pub fn download_summary(&self, stream: &Arc<CudaStream>) -> Result<MaxTreeSummary, OpError> {
        let st = self
            .state
            .ok_or_else(|| OpError::Unsupported("download_summary before enqueue".into()))?;
        if !st.filtered {
            return Err(OpError::Unsupported(
                "download_summary before enqueue_filter".into(),
            ));
        }
        let pixels = (st.width * st.height) as u64;
        let Some(fr) = self.frame.as_ref().filter(|_| pixels > 0) else {
            return Ok(MaxTreeSummary::default());
        };
        let v = stream.clone_dtoh(&fr.stats)?;
        stream.synchronize()?;
        let word = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(MaxTreeSummary {
            node_count: u32::try_from(word(2)).unwrap_or(u32::MAX),
            changed_pixels: word(0),
            residue_sum: word(1),
            pixels,
        })
    }

    /// The residue `|input − filtered|` of the last filtered 8-bit frame, on the device (packed,
    /// `width * height` bytes, written on the enqueue's stream): for the compose step. `None`
    /// before a filter, for an empty frame and when the last frame was 16-bit.
    #[must_use]
    pub fn residue(&self) -> Option<&CudaSlice<u8>> {
        let st = self.state?;
        if !st.filtered || st.bits != 8 || st.width * st.height == 0 {
            return None;
        }
        self.outputs.u8.as_ref().map(|(_, residue)| residue)
    }

    /// The filtered image of the last filter, taking the device buffer out of the op (packed,
    /// `width * height` samples of `T`, written on the enqueue's stream: work that reads it must
    /// be ordered after that stream's work). For a caller that keeps the result on the device
    /// (the Python package hands it to CuPy or PyTorch). `None` before a filter, for an empty
    /// frame and when the last frame's pixels were not `T`.
    #[must_use]
    pub fn into_filtered<T: GpuGray>(mut self) -> Option<CudaSlice<T>> {
        let st = self.state?;
        if !st.filtered || st.bits != T::BITS || st.width * st.height == 0 {
            return None;
        }
        T::outputs(&mut self.outputs)
            .take()
            .map(|(filtered, _)| filtered)
    }

    /// Number of tree nodes of the last frame (blocking copy).
    pub fn download_node_count(&self, stream: &Arc<CudaStream>) -> Result<u32, OpError> {
        match (&self.state, &self.frame) {
            (Some(s), Some(fr)) if s.width * s.height > 0 => {
                let c = stream.clone_dtoh(&fr.count)?;
                stream.synchronize()?;
                Ok(c.first().copied().unwrap_or(0))
            }
            _ => Ok(0),
        }
    }

    /// The canonical parent image of the last tree (blocking copy).
    pub fn download_parent(&self, stream: &Arc<CudaStream>) -> Result<Image<u32>, OpError> {
        let st = self
            .state
            .ok_or_else(|| OpError::Unsupported("download_parent before enqueue_tree".into()))?;
        let n = st.width * st.height;
        if n == 0 {
            return Ok(Image::new(st.width, st.height, 0));
        }
        let fr = self
            .frame
            .as_ref()
            .ok_or_else(|| OpError::Unsupported("no frame".into()))?;
        let v = stream.clone_dtoh(&fr.parent)?;
        stream.synchronize()?;
        Ok(Image::from_vec(st.width, st.height, v)?)
    }

    /// Filtered image, residue and node count of the last frame (blocking copies).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<MaxTreeOutput, OpError> {
        let st = self
            .state
            .ok_or_else(|| OpError::Unsupported("download before enqueue".into()))?;
        if !st.filtered {
            return Err(OpError::Unsupported(
                "download before enqueue_filter".into(),
            ));
        }
        let (w, h) = (st.width, st.height);
        let node_count = self.download_node_count(stream)?;
        let mut rb = self.readbacks.borrow_mut();
        let (filtered, residue) = if st.bits == 8 {
            let (o, r) = fetch(stream, &self.outputs.u8, w * h, &mut rb.u8)?;
            (
                DynImage::Gray8(Image::from_vec(w, h, o)?),
                DynImage::Gray8(Image::from_vec(w, h, r)?),
            )
        } else {
            let (o, r) = fetch(stream, &self.outputs.u16, w * h, &mut rb.u16)?;
            (
                DynImage::Gray16(Image::from_vec(w, h, o)?),
                DynImage::Gray16(Image::from_vec(w, h, r)?),
            )
        };
        Ok(MaxTreeOutput {
            filtered,
            residue,
            node_count,
        })
    }
}

/// Blocking copy of the first `n` elements of an output pair through pinned buffers (empty
/// vectors for an empty frame).
fn fetch<T: GpuGray>(
    stream: &Arc<CudaStream>,
    pair: &Option<(CudaSlice<T>, CudaSlice<T>)>,
    n: usize,
    rb: &mut (Readback<T>, Readback<T>),
) -> Result<(Vec<T>, Vec<T>), OpError> {
    match pair {
        Some((o, r)) if n > 0 => Ok((rb.0.fetch(stream, o, n)?, rb.1.fetch(stream, r, n)?)),
        _ => Ok((Vec::new(), Vec::new())),
    }
}
