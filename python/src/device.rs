//! `device="auto"|"cuda"|"cpu"` → the library's [`Backend`], as the CLI's `--backend`: `auto`
//! takes CUDA when a device, the driver and NVRTC are present and every kernel loads, else the
//! CPU. The CUDA context (device 0, kernels compiled once) is opened on first use and shared by
//! every later call.

use std::sync::{Arc, OnceLock};

use morphoscope::backend::Backend;
use morphoscope::gpu::GpuContext;
use morphoscope::ops::OpError;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The CUDA context of device 0, or why it could not be opened (tried once per process).
static CUDA: OnceLock<Result<Arc<GpuContext>, String>> = OnceLock::new();

fn cuda(py: Python<'_>) -> &'static Result<Arc<GpuContext>, String> {
    py.detach(|| CUDA.get_or_init(|| GpuContext::new(0).map(Arc::new).map_err(|e| e.to_string())))
}

/// The backend of `device` (`"auto"`, `"cuda"` or `"cpu"`).
pub fn backend(py: Python<'_>, device: &str) -> PyResult<Backend> {
    match device {
        "cpu" => Ok(Backend::Cpu),
        "cuda" => match cuda(py) {
            Ok(g) => Ok(Backend::Cuda(Arc::clone(g))),
            Err(e) => Err(PyRuntimeError::new_err(format!(
                "device=\"cuda\": CUDA is unavailable ({e}); use device=\"cpu\" or \"auto\""
            ))),
        },
        "auto" => Ok(match cuda(py) {
            Ok(g) => Backend::Cuda(Arc::clone(g)),
            Err(_) => Backend::Cpu,
        }),
        other => Err(PyValueError::new_err(format!(
            "device={other:?}: one of \"auto\", \"cuda\", \"cpu\""
        ))),
    }
}

/// The CUDA context for an op on a CUDA array: `device` `"auto"` or `"cuda"` (`"cpu"` cannot
/// read device memory: `ValueError`), CUDA available (else `RuntimeError`).
pub fn cuda_for_array(py: Python<'_>, device: &str) -> PyResult<Arc<GpuContext>> {
    match device {
        "auto" | "cuda" => match cuda(py) {
            Ok(g) => Ok(Arc::clone(g)),
            Err(e) => Err(PyRuntimeError::new_err(format!(
                "the input is a CUDA array but CUDA is unavailable ({e})"
            ))),
        },
        "cpu" => Err(PyValueError::new_err(
            "device=\"cpu\" with a CUDA array: pass device=\"auto\" or \"cuda\", or a NumPy \
             array (e.g. cupy.asnumpy(a)) for the CPU",
        )),
        other => Err(PyValueError::new_err(format!(
            "device={other:?}: one of \"auto\", \"cuda\", \"cpu\""
        ))),
    }
}

/// True when `device="auto"` runs on CUDA.
#[pyfunction]
pub fn cuda_available(py: Python<'_>) -> bool {
    cuda(py).is_ok()
}

/// The Python exception of an op's error: CUDA failures are `RuntimeError`, everything else
/// (parameters, input) `ValueError`; the message is the library's, as the CLI prints it.
pub fn op_error(e: OpError) -> PyErr {
    match e {
        OpError::Gpu(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}
