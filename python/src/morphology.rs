//! Max-tree attribute filters (`morphoscope.morphology`): scikit-image's `area_opening`,
//! `area_closing` and the attribute openings and closings scikit-image lacks, 8- and 16-bit.

use morphoscope::backend::Backend;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::{DynImage, Gray, Image};
use morphoscope::ops::OpError;
use morphoscope::ops::maxtree::{
    self as mt, Attribute, GpuGray, MaxTreeGpu, MaxTreeParams, Rule, TreeKind,
};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert;
use crate::device::{backend, cuda_for_array, op_error};
use crate::device_array::{self, CudaInput, DeviceArray, DeviceElement, Dtype};
use crate::timing;

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
    let out = timing::detach_timed(py, || -> Result<Option<Image<T>>, OpError> {
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
    device_array::run_image::<T, _>(py, gpu, input, 1, |g, image| {
        let mut op = MaxTreeGpu::new(g)?;
        op.enqueue(&mut KernelTimer::new(), image, p)?;
        op.into_filtered::<T>()
            .ok_or_else(|| OpError::Unsupported("the max-tree left no filtered image".into()))
    })
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

/// scikit-image's parent image from the library's canonical one: the same tree, but each flat
/// zone (node) is represented by its smallest raster index where the library takes its largest.
/// `parent` is canonical (a flat zone's pixels point to its representative, a representative to
/// its parent node's representative, the root to itself); `value` the pixels in tree space.
fn skimage_parent(parent: &[u32], value: impl Fn(usize) -> u32) -> Vec<i64> {
    let n = parent.len();
    // The library's representative of each pixel's node.
    let node = |p: usize| {
        let q = parent[p] as usize;
        if q == p || value(q) != value(p) { p } else { q }
    };
    let mut smallest = vec![u32::MAX; n];
    for p in 0..n {
        let r = node(p);
        smallest[r] = smallest[r].min(p as u32);
    }
    (0..n)
        .map(|p| {
            let r = node(p);
            let own = smallest[r] as usize;
            let target = if p == own {
                // The node's representative points to its parent node's (the root to itself).
                let q = parent[r] as usize;
                if q == r {
                    own
                } else {
                    smallest[node(q)] as usize
                }
            } else {
                own
            };
            target as i64
        })
        .collect()
}

/// The raster indices in the order of their values, equal values in raster order (NumPy's
/// `argsort(image.ravel(), kind="stable")`): a counting sort over the image's levels.
fn stable_order(values: impl ExactSizeIterator<Item = u32> + Clone) -> Vec<i64> {
    let levels = values.clone().max().map_or(0, |m| m as usize + 1);
    let mut start = vec![0usize; levels + 1];
    for v in values.clone() {
        start[v as usize + 1] += 1;
    }
    for l in 1..start.len() {
        start[l] += start[l - 1];
    }
    let mut order = vec![0i64; values.len()];
    for (p, v) in values.enumerate() {
        let slot = &mut start[v as usize];
        order[*slot] = p as i64;
        *slot += 1;
    }
    order
}

/// The parent image (scikit-image's representatives) and the traverser of `a`'s max-tree.
fn tree_of<T: TreePixel>(
    py: Python<'_>,
    a: &PyReadonlyArray2<'_, T>,
    connectivity: mt::Connectivity,
    backend: &Backend,
) -> PyResult<(Vec<i64>, Vec<i64>)> {
    let img = convert::view(a)?;
    timing::detach_timed(py, || -> Result<(Vec<i64>, Vec<i64>), OpError> {
        let parent = match backend {
            Backend::Cpu => mt::MaxTree::build(img, TreeKind::Max, connectivity)?
                .parent()
                .to_vec(),
            Backend::Cuda(g) => mt::maxtree_parent_gpu(g, img, TreeKind::Max, connectivity)?
                .into_packed()
                .into_vec(),
        };
        let data = img.data();
        let values = data.iter().map(|v| v.to_u32());
        Ok((
            skimage_parent(&parent, |p| data[p].to_u32()),
            stable_order(values),
        ))
    })
    .map_err(op_error)
}

/// scikit-image's `(parent, tree_traverser)`.
type Tree<'py> = (Bound<'py, PyArray2<i64>>, Bound<'py, PyArray1<i64>>);

/// The max-tree of a `uint8` or `uint16` image as scikit-image's `max_tree` returns it:
/// `parent`, `(height, width)` int64 raster indices, each flat zone represented by its first
/// pixel in raster order, the root pointing to itself; and `tree_traverser`, the int64 raster
/// indices sorted by value (stable), so that a parent comes before its children.
/// `connectivity` 4 or 8.
#[pyfunction]
#[pyo3(signature = (image, connectivity, device))]
pub fn max_tree<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    connectivity: u32,
    device: &str,
) -> PyResult<Tree<'py>> {
    let conn = mt::Connectivity::from_neighbors(connectivity).map_err(op_error)?;
    let backend = backend(py, device)?;
    let (shape, (parent, traverser)) = if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u8>>() {
        (
            (a.shape()[0], a.shape()[1]),
            tree_of(py, &a, conn, &backend)?,
        )
    } else if let Ok(a) = image.extract::<PyReadonlyArray2<'py, u16>>() {
        (
            (a.shape()[0], a.shape()[1]),
            tree_of(py, &a, conn, &backend)?,
        )
    } else {
        return Err(PyTypeError::new_err(
            "max_tree takes 2D uint8 or uint16 images",
        ));
    };
    let parent = numpy::ndarray::Array2::from_shape_vec(shape, parent)
        .map(|a| a.into_pyarray(py))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((parent, traverser.into_pyarray(py)))
}
