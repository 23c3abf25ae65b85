//! Felzenszwalb–Huttenlocher segmentation (`morphoscope.segmentation.felzenszwalb`):
//! scikit-image's definition on the CPU (Kruskal), the round-based exact version on CUDA.

use morphoscope::backend::Backend;
use morphoscope::image::ImageView;
use morphoscope::ops::OpError;
use morphoscope::ops::segmentation::{self as seg, SegmentationOutput, SegmentationParams};
use numpy::{PyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, op_error};

/// Segments a C-contiguous `uint8` image of shape `(height, width, channels)`, channels 1
/// (grey) or 3 (RGB): labels `0..n` (`int64`) numbered in raster order of each segment's first
/// pixel.
#[pyfunction]
#[pyo3(signature = (image, scale, sigma, min_size, device))]
pub fn felzenszwalb<'py>(
    py: Python<'py>,
    image: PyReadonlyArray3<'py, u8>,
    scale: f64,
    sigma: f64,
    min_size: usize,
    device: &str,
) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let p = SegmentationParams {
        scale,
        sigma,
        min_size,
        ..SegmentationParams::default()
    };
    p.validate().map_err(op_error)?;
    let backend = backend(py, device)?;
    let (h, w, c) = (image.shape()[0], image.shape()[1], image.shape()[2]);
    if c != 1 && c != 3 {
        return Err(PyValueError::new_err(format!(
            "felzenszwalb segments grey (1 channel) or RGB (3 channels) images, got {c} channels"
        )));
    }
    let data = image
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("the image must be C-contiguous: {e}")))?;
    let out = py
        .detach(|| -> Result<SegmentationOutput, OpError> {
            match (&backend, c) {
                (Backend::Cpu, _) => seg::cpu::felzenszwalb_interleaved(data, w, h, c, &p),
                (Backend::Cuda(g), 1) => seg::segment_gpu(g, ImageView::new(w, h, w, data)?, &p),
                (Backend::Cuda(g), _) => {
                    let (rgb, _) = data.as_chunks::<3>();
                    seg::segment_gpu_rgb(g, ImageView::new(w, h, w, rgb)?, &p)
                }
            }
        })
        .map_err(op_error)?;
    convert::labels_i64(py, &out.labels)
}
