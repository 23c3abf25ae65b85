//! `morphoscope._core`: the compiled half of the Python package `morphoscope`.
//!
//! Each function here takes 2D (or, for colour, H×W×3) C-contiguous NumPy arrays of the dtypes
//! the ops compute on, already checked and converted by the Python modules
//! (`python/morphoscope/*.py`, which carry scikit-image's signatures, defaults and argument
//! checks), runs one op of the library on the device asked for with the GIL released, and
//! returns new NumPy arrays that own the op's result buffers (no copy). Parameter errors come
//! back as `ValueError` with the library's messages, CUDA failures as `RuntimeError`.

use pyo3::prelude::*;

mod convert;
mod device;
mod device_array;
mod measure;
mod morphology;
mod orientation;
mod segmentation;
mod timing;
mod video;

/// The extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device::cuda_available, m)?)?;
    m.add_class::<device_array::DeviceArray>()?;
    m.add_function(wrap_pyfunction!(device_array::_last_device_input, m)?)?;
    m.add_function(wrap_pyfunction!(morphology::attribute_filter, m)?)?;
    m.add_function(wrap_pyfunction!(morphology::max_tree, m)?)?;
    m.add_function(wrap_pyfunction!(measure::label, m)?)?;
    m.add_function(wrap_pyfunction!(measure::region_sums, m)?)?;
    m.add_function(wrap_pyfunction!(segmentation::felzenszwalb, m)?)?;
    m.add_function(wrap_pyfunction!(orientation::linear_opening, m)?)?;
    m.add_function(wrap_pyfunction!(orientation::orientation_map, m)?)?;
    m.add_function(wrap_pyfunction!(timing::last_op_seconds, m)?)?;
    video::register(m)?;
    Ok(())
}
