//! Max-tree attribute filters (`morphoscope.morphology`): scikit-image's `area_opening`,
//! `area_closing` and the attribute openings and closings scikit-image lacks, 8- and 16-bit.

use morphoscope::backend::Backend;
use morphoscope::image::{DynImage, Gray, Image};
use morphoscope::ops::OpError;
use morphoscope::ops::maxtree::{self as mt, Attribute, GpuGray, MaxTreeParams, Rule, TreeKind};
use numpy::{Element, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, op_error};

/// The pixel types of the max-tree: the GPU returns its result as a [`DynImage`].
trait TreePixel: Gray + GpuGray + Element {
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

/// Attribute filter of a `uint8` or `uint16` image: `tree` "max" (opening) or "min"
/// (closing), `attribute` one of the library's names, nodes with `attribute >= threshold` kept
/// (direct rule), `connectivity` 4 or 8.
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
    let backend = backend(py, device)?;
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u8>>() {
        return filter(py, &a, &p, &backend);
    }
    if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u16>>() {
        return filter(py, &a, &p, &backend);
    }
    Err(PyTypeError::new_err(
        "the max-tree filters take 2D uint8 or uint16 images",
    ))
}
