//! Max-tree attribute filters (`morphoscope.morphology`): scikit-image's `area_opening`,
//! `area_closing` and the attribute openings and closings scikit-image lacks, 8- and 16-bit.

use morphoscope::backend::Backend;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::{DynImage, Gray, Image};
use morphoscope::ops::OpError;
use morphoscope::ops::maxtree::{
    self as mt, Attribute, GpuGray, MaxTreeGpu, MaxTreeParams, Rule, TreeKind,
};
use numpy::{Element, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, cuda_for_array, op_error};
use crate::device_array::{self, CudaInput, DeviceArray, DeviceElement, Dtype};

/// The pixel types of the max-tree: the GPU returns its result as a [`DynImage`].
trait TreePixel: Gray + GpuGray + Element + DeviceElement {
    fn typed(d: DynImage) -> Option<Image<Self>>;
}

impl TreePixel for u8 {
    fn typed(d: DynImage) -> Option<Image<Self>> {
        match d {
            DynImage::Gray8(i) => Some(i),
            _ => None,
        }
    }
}

impl TreePixel for u16 {
    fn typed(d: DynImage) -> Option<Image<Self>> {
        match d {
            DynImage::Gray16(i) => Some(i),
            _ => None,
        }
    }
}

fn filter<'py, T: TreePixel>(
    py: Python<'py>,
    a: &PyReadonlyArray2<'py, T>,
    p: &MaxTreeParams,
    backend: &Backend,
) -> PyResult<Bound<'py, PyAny>> {
    let img = convert::view(a)?;
    let out = py
        .detach(|| -> Result<Option<Image<T>>, OpError> {
            match backend {
                Backend::Cpu => Ok(Some(mt::attribute_filter(img, p)?.filtered)),
                Backend::Cuda(g) => Ok(T::typed(mt::maxtree_gpu(g, img, p)?.filtered)),
            }
        })
        .map_err(op_error)?
        .ok_or_else(|| PyValueError::new_err("the GPU max-tree returned another pixel type"))?;
    Ok(convert::array(py, out)?.into_any())
}

/// The filter of a CUDA array, on the device: the result is a new [`DeviceArray`].
fn filter_device<T: TreePixel>(
    py: Python<'_>,
    input: &CudaInput,
    p: &MaxTreeParams,
    gpu: &GpuContext,
) -> PyResult<DeviceArray> {
    let (h, w, _) = input.image_shape()?;
    let filtered = py.detach(|| {
        device_array::run::<T, _>(gpu, input, 1, |g, image| {
            let mut op = MaxTreeGpu::new(g)?;
            op.enqueue(&mut KernelTimer::new(), image, p)?;
            op.into_filtered::<T>()
                .ok_or_else(|| OpError::Unsupported("the max-tree left no filtered image".into()))
        })
    })?;
    DeviceArray::new(filtered, vec![h, w])
}

/// Attribute filter of a `uint8` or `uint16` image: `tree` "max" (opening) or "min"
/// (closing), `attribute` one of the library's names, nodes with `attribute >= threshold` kept
/// (direct rule), `connectivity` 4 or 8. A NumPy array gives a NumPy array; a 2D C-contiguous
/// CUDA array (`__cuda_array_interface__`) is filtered in place on the device into a
/// [`DeviceArray`].
#[pyfunction]
#[pyo3(signature = (image, tree, attribute, threshold, connectivity, device))]
pub fn attribute_filter<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    tree: &str,
    attribute: &str,
    threshold: f64,
    connectivity: u32,
    device: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let tree = match tree {
        "max" => TreeKind::Max,
        "min" => TreeKind::Min,
        other => return Err(PyValueError::new_err(format!("tree={other:?}: max or min"))),
    };
    let names: Vec<&str> = Attribute::ALL.iter().map(|a| a.name()).collect();
    let attribute = Attribute::ALL
        .into_iter()
        .find(|a| a.name() == attribute)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "attribute={attribute:?}: one of {}",
                names.join(", ")
            ))
        })?;
    let p = MaxTreeParams {
        enabled: true,
        tree,
        attribute,
        threshold,
        rule: Rule::Direct,
        connectivity,
    };
    p.validate().map_err(op_error)?;
    if let Some(input) = CudaInput::from_object(image)? {
        let gpu = cuda_for_array(py, device)?;
        let out = match input.dtype {
            Dtype::U8 => filter_device::<u8>(py, &input, &p, &gpu)?,
            Dtype::U16 => filter_device::<u16>(py, &input, &p, &gpu)?,
            _ => return Err(input.dtype_error(DTYPES)),
        };
        return Ok(Bound::new(py, out)?.into_any());
    }
    let backend = backend(py, device)?;
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u8>>() {
        return filter(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u16>>() {
        return filter(py, &a, &p, &backend);
    }
    Err(PyTypeError::new_err(DTYPES))
}

const DTYPES: &str = "the max-tree filters take 2D uint8 or uint16 images";
