//! Linear openings at any angle and orientation maps (`morphoscope.orientation`): no
//! scikit-image counterpart (at 0°, 45°, 90° and 135° the opening equals scikit-image's
//! `opening` by the line footprint with `mode="ignore"`).

use morphoscope::backend::Backend;
use morphoscope::gpu::GpuContext;
use morphoscope::image::{Image, ImageView};
use morphoscope::ops::OpError;
use morphoscope::ops::orientation::{
    self as lo, LinearOpeningParams, OrientationOutput, OrientationParams, Sample,
};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, op_error};

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
    let out = py
        .detach(|| -> Result<Image<T>, OpError> {
            match backend {
                Backend::Cpu => lo::linear_opening(img, p),
                Backend::Cuda(g) => T::open_cuda(g, img, p),
            }
        })
        .map_err(op_error)?;
    Ok(convert::array(py, out)?.into_any())
}

const DTYPES: &str = "the linear openings take 2D uint8, uint16 or float32 images";

/// The opening (closing, with `closing`) of a `uint8`, `uint16` or `float32` image by the
/// segment of `length` pixels (odd) at `angle` degrees counter-clockwise from +x.
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
/// spectrum and the angles (`float64`).
type Maps<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

fn maps_typed<'py, T: LineSample>(
    py: Python<'py>,
    a: &PyReadonlyArray2<'py, T>,
    p: &OrientationParams,
    backend: &Backend,
) -> PyResult<Maps<'py>> {
    let img = convert::view(a)?;
    let out = py
        .detach(|| -> Result<OrientationOutput<T>, OpError> {
            match backend {
                Backend::Cpu => lo::orientation(img, p),
                Backend::Cuda(g) => T::maps_cuda(g, img, p),
            }
        })
        .map_err(op_error)?;
    let angle = convert::array(py, out.angle_map_deg())?;
    Ok((
        convert::array(py, out.strength)?.into_any(),
        angle,
        out.spectrum.into_pyarray(py),
        out.angles_deg.into_pyarray(py),
    ))
}

/// Orientation maps over `angles` (explicit, in degrees) or `count` evenly spaced angles over
/// [0°, 180°) when `angles` is empty, with openings (closings with `closing`) of `length`.
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
