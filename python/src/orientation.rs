//! Linear openings at any angle and orientation maps (`morphoscope.orientation`): no
//! scikit-image counterpart (at 0°, 45°, 90° and 135° the opening equals scikit-image's
//! `opening` by the line footprint with `mode="ignore"`).

use morphoscope::backend::Backend;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::{Image, ImageView};
use morphoscope::ops::OpError;
use morphoscope::ops::convert::lookup_f32_gpu;
use morphoscope::ops::orientation::{
    self as lo, GpuSample, LinearOpeningGpu, LinearOpeningParams, OrientationGpu,
    OrientationOutput, OrientationParams, Sample,
};
use numpy::{Element, IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, cuda_for_array, op_error};
use crate::device_array::{self, CudaInput, DeviceArray, DeviceElement, Dtype};
use crate::timing;

/// The sample types, with their CUDA path: `uint8` and `uint16` run on the GPU, `float32` on
/// the CPU whatever the device (as the CLI's `image --op linear-opening`).
trait LineSample: Sample + Element {
    fn open_cuda(
        g: &GpuContext,
        img: ImageView<'_, Self>,
        p: &LinearOpeningParams,
    ) -> Result<Image<Self>, OpError>;
    fn maps_cuda(
        g: &GpuContext,
        img: ImageView<'_, Self>,
        p: &OrientationParams,
    ) -> Result<OrientationOutput<Self>, OpError>;
}

macro_rules! on_gpu {
    ($t:ty) => {
        impl LineSample for $t {
            fn open_cuda(
                g: &GpuContext,
                img: ImageView<'_, Self>,
                p: &LinearOpeningParams,
            ) -> Result<Image<Self>, OpError> {
                lo::linear_opening_gpu(g, img, p)
            }
            fn maps_cuda(
                g: &GpuContext,
                img: ImageView<'_, Self>,
                p: &OrientationParams,
            ) -> Result<OrientationOutput<Self>, OpError> {
                lo::orientation_gpu(g, img, p)
            }
        }
    };
}
on_gpu!(u8);
on_gpu!(u16);

impl LineSample for f32 {
    fn open_cuda(
        _: &GpuContext,
        img: ImageView<'_, Self>,
        p: &LinearOpeningParams,
    ) -> Result<Image<Self>, OpError> {
        lo::linear_opening(img, p)
    }
    fn maps_cuda(
        _: &GpuContext,
        img: ImageView<'_, Self>,
        p: &OrientationParams,
    ) -> Result<OrientationOutput<Self>, OpError> {
        lo::orientation(img, p)
    }
}

fn open_typed<'py, T: LineSample>(
    py: Python<'py>,
    a: &PyReadonlyArray2<'py, T>,
    p: &LinearOpeningParams,
    backend: &Backend,
) -> PyResult<Bound<'py, PyAny>> {
    let img = convert::view(a)?;
    let out = timing::detach_timed(py, || -> Result<Image<T>, OpError> {
        match backend {
            Backend::Cpu => lo::linear_opening(img, p),
            Backend::Cuda(g) => T::open_cuda(g, img, p),
        }
    })
    .map_err(op_error)?;
    Ok(convert::array(py, out)?.into_any())
}

const DTYPES: &str = "the linear openings take 2D uint8, uint16 or float32 images";

/// What the device path takes: `float32` has no CUDA path in the library (the Python layer
/// reads such arrays to the host and back).
const DEVICE_DTYPES: &str = "on the device the linear openings take uint8 or uint16 CUDA \
                             arrays (morphoscope.orientation reads float32 ones to the host)";

/// The opening of a CUDA array on the device into a new [`DeviceArray`].
fn open_device<T: GpuSample + DeviceElement>(
    py: Python<'_>,
    input: &CudaInput,
    p: &LinearOpeningParams,
    gpu: &GpuContext,
) -> PyResult<DeviceArray> {
    device_array::run_image::<T, _>(py, gpu, input, 1, |g, image| {
        let mut op = LinearOpeningGpu::<T>::new(g)?;
        op.enqueue(&mut KernelTimer::new(), image, p)?;
        op.into_output()
            .ok_or_else(|| OpError::Unsupported("the opening left no result".into()))
    })
}

/// The opening (closing, with `closing`) of a `uint8`, `uint16` or `float32` image by the
/// segment of `length` pixels (odd) at `angle` degrees counter-clockwise from +x. A NumPy array
/// gives a NumPy array; a `uint8` or `uint16` CUDA array (`__cuda_array_interface__`) is opened
/// in place on the device into a [`DeviceArray`].
#[pyfunction]
#[pyo3(signature = (image, length, angle, closing, device))]
pub fn linear_opening<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    length: u32,
    angle: f64,
    closing: bool,
    device: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let p = LinearOpeningParams {
        length,
        angle,
        closing,
    };
    p.validate().map_err(op_error)?;
    if let Some(input) = CudaInput::from_object(image)? {
        let gpu = cuda_for_array(py, device)?;
        let out = match input.dtype {
            Dtype::U8 => open_device::<u8>(py, &input, &p, &gpu)?,
            Dtype::U16 => open_device::<u16>(py, &input, &p, &gpu)?,
            _ => return Err(input.dtype_error(DEVICE_DTYPES)),
        };
        return Ok(Bound::new(py, out)?.into_any());
    }
    let backend = backend(py, device)?;
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u8>>() {
        return open_typed(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u16>>() {
        return open_typed(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, f32>>() {
        return open_typed(py, &a, &p, &backend);
    }
    Err(PyTypeError::new_err(DTYPES))
}

/// The maps of one image: strength (input dtype), angle map (degrees, `float32`), angular
/// spectrum and the angles (`float64`); the two maps are [`DeviceArray`]s for a CUDA array.
type Maps<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// The maps of a CUDA array on the device: strength and angle map (looked up in degrees
/// there) stay on the device; the spectrum (one word an angle) is read back.
fn maps_device<'py, T: GpuSample + DeviceElement>(
    py: Python<'py>,
    input: &CudaInput,
    p: &OrientationParams,
    gpu: &GpuContext,
) -> PyResult<Maps<'py>> {
    let (h, w, _) = input.image_shape()?;
    let (strength, angle, spectrum, angles) = timing::detach_timed(py, || {
        device_array::run::<T, _>(gpu, input, 1, |g, image| {
            let stream = image.stream;
            let mut op = OrientationGpu::<T>::new(g)?;
            op.enqueue(&mut KernelTimer::new(), image, p)?;
            let spectrum = op.download_spectrum(stream)?;
            let angles = op.angles_deg().to_vec();
            let table: Vec<f32> = angles.iter().map(|&a| a as f32).collect();
            let (strength, index) = op
                .into_maps()
                .ok_or_else(|| OpError::Unsupported("the orientation left no maps".into()))?;
            let angle = lookup_f32_gpu(g, stream, &index, w * h, &table)?;
            Ok((strength, angle, spectrum, angles))
        })
    })?;
    Ok((
        Bound::new(py, DeviceArray::new(strength, vec![h, w])?)?.into_any(),
        Bound::new(py, DeviceArray::new(angle, vec![h, w])?)?.into_any(),
        spectrum.into_pyarray(py),
        angles.into_pyarray(py),
    ))
}

fn maps_typed<'py, T: LineSample>(
    py: Python<'py>,
    a: &PyReadonlyArray2<'py, T>,
    p: &OrientationParams,
    backend: &Backend,
) -> PyResult<Maps<'py>> {
    let img = convert::view(a)?;
    // The op: the maps, with the angle map in degrees as the library gives it.
    let (out, angle) = timing::detach_timed(py, || -> Result<_, OpError> {
        let out = match backend {
            Backend::Cpu => lo::orientation(img, p),
            Backend::Cuda(g) => T::maps_cuda(g, img, p),
        }?;
        let angle = out.angle_map_deg();
        Ok((out, angle))
    })
    .map_err(op_error)?;
    let angle = convert::array(py, angle)?.into_any();
    Ok((
        convert::array(py, out.strength)?.into_any(),
        angle,
        out.spectrum.into_pyarray(py),
        out.angles_deg.into_pyarray(py),
    ))
}

/// Orientation maps over `angles` (explicit, in degrees) or `count` evenly spaced angles over
/// [0°, 180°) when `angles` is empty, with openings (closings with `closing`) of `length`. For a
/// `uint8` or `uint16` CUDA array the strength and angle maps are [`DeviceArray`]s.
#[pyfunction]
#[pyo3(signature = (image, length, count, angles, closing, device))]
pub fn orientation_map<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    length: u32,
    count: u32,
    angles: Vec<f64>,
    closing: bool,
    device: &str,
) -> PyResult<Maps<'py>> {
    let p = OrientationParams {
        enabled: true,
        length,
        angles: count,
        angle_list: angles,
        closing,
    };
    p.validate().map_err(op_error)?;
    if let Some(input) = CudaInput::from_object(image)? {
        let gpu = cuda_for_array(py, device)?;
        return match input.dtype {
            Dtype::U8 => maps_device::<u8>(py, &input, &p, &gpu),
            Dtype::U16 => maps_device::<u16>(py, &input, &p, &gpu),
            _ => Err(input.dtype_error(DEVICE_DTYPES)),
        };
    }
    let backend = backend(py, device)?;
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u8>>() {
        return maps_typed(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u16>>() {
        return maps_typed(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, f32>>() {
        return maps_typed(py, &a, &p, &backend);
    }
    Err(PyTypeError::new_err(DTYPES))
}
