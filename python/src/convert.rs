//! NumPy arrays ↔ the library's images: a C-contiguous 2D array is borrowed as an
//! [`ImageView`] (no copy); a result [`Image`] becomes a new array owning its buffer.

use morphoscope::image::{Image, ImageView};
use numpy::ndarray::Array2;
use numpy::{Element, IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The pixels of a C-contiguous 2D array as an image view (rows = first axis).
pub fn view<'a, T: Element + Copy>(a: &'a PyReadonlyArray2<'_, T>) -> PyResult<ImageView<'a, T>> {
    let (h, w) = (a.shape()[0], a.shape()[1]);
    if !a.is_c_contiguous() {
        return Err(PyValueError::new_err("the image must be C-contiguous"));
    }
    let data = a
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("the image must be C-contiguous: {e}")))?;
    ImageView::new(w, h, w, data).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A new `(height, width)` array holding `img`'s pixels (moved, not copied, when packed).
pub fn array<T: Element + Copy>(py: Python<'_>, img: Image<T>) -> PyResult<Bound<'_, PyArray2<T>>> {
    let (w, h) = (img.width(), img.height());
    let data = img.into_packed().into_vec();
    Array2::from_shape_vec((h, w), data)
        .map(|a| a.into_pyarray(py))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// `labels` as a signed 64-bit `(height, width)` array (NumPy's `intp`, scikit-image's label
/// dtype), widened on every core with the GIL released.
pub fn labels_i64<'py>(
    py: Python<'py>,
    labels: &Image<u32>,
) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let wide = py.detach(|| labels.par_map(i64::from));
    array(py, wide)
}

/// `labels` as a signed 32-bit `(height, width)` array (scikit-image's label dtype of a boolean
/// image): the buffer is handed over as it is, since a label never exceeds the pixel count
/// and keeps its bits as `i32` (images of 2³¹ pixels and more are refused).
pub fn labels_i32(py: Python<'_>, labels: Image<u32>) -> PyResult<Bound<'_, PyArray2<i32>>> {
    let (w, h) = (labels.width(), labels.height());
    if w.saturating_mul(h) > i32::MAX as usize {
        return Err(PyValueError::new_err(format!(
            "a {w}x{h} image has more pixels than int32 labels can number"
        )));
    }
    let packed: Vec<i32> = bytemuck::cast_vec(labels.into_packed().into_vec());
    Array2::from_shape_vec((h, w), packed)
        .map(|a| a.into_pyarray(py))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}
