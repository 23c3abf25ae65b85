//! Felzenszwalb–Huttenlocher segmentation (`morphoscope.segmentation.felzenszwalb`):
//! scikit-image's definition on the CPU (Kruskal), the round-based exact version on CUDA.

use morphoscope::backend::Backend;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::ImageView;
use morphoscope::ops::OpError;
use morphoscope::ops::convert::labels_to_i64_gpu;
use morphoscope::ops::segmentation::{
    self as seg, SegmentationGpu, SegmentationOutput, SegmentationParams,
};
use numpy::{PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, cuda_for_array, op_error};
use crate::device_array::{self, CudaInput, DeviceArray, Dtype};
use crate::timing;

fn check_channels(c: usize) -> PyResult<()> {
    if c != 1 && c != 3 {
        return Err(PyValueError::new_err(format!(
            "felzenszwalb segments grey (1 channel) or RGB (3 channels) images, got {c} channels"
        )));
    }
    Ok(())
}

/// The segmentation of a CUDA array on the device: the counters are read back (a few kB, as
/// the pipeline does), the labels stay on the device, widened to `int64` there.
fn felzenszwalb_device(
    py: Python<'_>,
    input: &CudaInput,
    p: &SegmentationParams,
    gpu: &GpuContext,
) -> PyResult<DeviceArray> {
    let (_, _, c) = input.image_shape()?;
    check_channels(c)?;
    device_array::run_image::<u8, _>(py, gpu, input, c, |g, image| {
        let stream = image.stream;
        let mut op = SegmentationGpu::new(g)?;
        op.enqueue(&mut KernelTimer::new(), image, p)?;
        // Runs a frame that hit its round caps again, so the labels below are final.
        op.download_summary(stream)?;
        let (labels, lw, lh) = op
            .device_labels()
            .ok_or_else(|| OpError::Unsupported("the segmentation left no labels".into()))?;
        labels_to_i64_gpu(g, stream, labels, lw * lh)
    })
}

/// Segments a C-contiguous `uint8` image of shape `(height, width, channels)`, channels 1
/// (grey) or 3 (RGB): labels `0..n` (`int64`) numbered in raster order of each segment's first
/// pixel. A NumPy array gives a NumPy array; a CUDA array (`__cuda_array_interface__`) is
/// segmented in place on the device into a [`DeviceArray`].
#[pyfunction]
#[pyo3(signature = (image, scale, sigma, min_size, device))]
pub fn felzenszwalb<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    scale: f64,
    sigma: f64,
    min_size: usize,
    device: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let p = SegmentationParams {
        scale,
        sigma,
        min_size,
        ..SegmentationParams::default()
    };
    p.validate().map_err(op_error)?;
    if let Some(input) = CudaInput::from_object(image)? {
        let gpu = cuda_for_array(py, device)?;
        if input.dtype != Dtype::U8 {
            return Err(input.dtype_error("felzenszwalb takes uint8 images"));
        }
        let labels = felzenszwalb_device(py, &input, &p, &gpu)?;
        return Ok(Bound::new(py, labels)?.into_any());
    }
    let image: PyReadonlyArray3<'py, u8> = image.extract()?;
    let backend = backend(py, device)?;
    let (h, w, c) = (image.shape()[0], image.shape()[1], image.shape()[2]);
    check_channels(c)?;
    let data = image
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("the image must be C-contiguous: {e}")))?;
    let out = timing::detach_timed(py, || -> Result<SegmentationOutput, OpError> {
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
    Ok(convert::labels_i64(py, &out.labels)?.into_any())
}
