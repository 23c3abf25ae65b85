//! CUDA device arrays in and out of the extension, with no host copy.
//!
//! **In.** Any object with `__cuda_array_interface__` (CuPy arrays, PyTorch CUDA tensors,
//! Numba device arrays; the Python modules turn DLPack-only objects into CuPy arrays first and
//! make non-contiguous arrays contiguous on the device). [`CudaInput`] reads the interface
//! (pointer, shape, dtype, strides, the producer's stream); [`run`] checks that the pointer is
//! device memory of the extension's device (0) holding the whole array, makes a new stream wait
//! for the producer's stream (an event: no host wait), wraps the memory in place
//! ([`ForeignSlice`]: never copied, never freed), runs the op's `enqueue` on it as a
//! [`DeviceImage`], and synchronises the stream before returning, so the producer may reuse the
//! memory and the results are complete.
//!
//! **Out.** [`DeviceArray`] owns a result buffer on the device and exposes it through
//! `__cuda_array_interface__` version 3 with `stream: None` (the data is ready: [`run`]
//! synchronised). The Python modules hand it to `cupy.asarray` or `torch.as_tensor`, which keep
//! it alive as the owner of the memory. Its memory is freed in the order of the legacy default
//! stream ([`free_after_default_stream`]) when the last reference goes.

use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::{CudaSlice, DeviceRepr};
use morphoscope::gpu::{
    DeviceImage, ForeignSlice, GpuContext, MemoryKind, free_after_default_stream, pointer_info,
    wait_for_stream,
};
use morphoscope::ops::OpError;
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::device::op_error;

/// The sample types the ops read from a device array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `bool` (one byte, 0 or 1): read as `uint8`.
    Bool,
    /// `uint8`.
    U8,
    /// `uint16` (little-endian).
    U16,
    /// `float32` (little-endian).
    F32,
    /// Anything else (the interface's `typestr`).
    Other,
}

/// A CUDA array described by its `__cuda_array_interface__`.
#[derive(Clone, Debug)]
pub struct CudaInput {
    /// Device address of the first element.
    pub ptr: u64,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// The interface's `typestr` (e.g. `|u1`, `<u2`).
    pub typestr: String,
    /// The sample type.
    pub dtype: Dtype,
    /// Bytes per element.
    pub itemsize: usize,
    /// The stream the producer's pending work on the array is on (version 3's `stream`; 1 the
    /// legacy default stream, 2 the per-thread default stream), `None` when it is ready.
    pub stream: Option<usize>,
}

fn dtype_of(typestr: &str) -> (Dtype, usize) {
    let itemsize = typestr
        .get(2..)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    let dtype = match typestr {
        "|b1" | "<b1" | "=b1" => Dtype::Bool,
        "|u1" | "<u1" | "=u1" => Dtype::U8,
        "<u2" => Dtype::U16,
        "<f4" => Dtype::F32,
        _ => Dtype::Other,
    };
    (dtype, itemsize)
}

impl CudaInput {
    /// `obj.__cuda_array_interface__`, read and checked (C-contiguous, no mask), or `None` when
    /// `obj` has no such attribute (a NumPy array).
    pub fn from_object(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let py = obj.py();
        let cai = match obj.getattr(pyo3::intern!(py, "__cuda_array_interface__")) {
            Ok(c) => c,
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Ok(None),
            Err(e) => return Err(e),
        };
        let cai = cai
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err("__cuda_array_interface__ must be a dict"))?;
        let field = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            cai.get_item(key)?.ok_or_else(|| {
                PyTypeError::new_err(format!("__cuda_array_interface__ has no {key:?}"))
            })
        };
        let shape: Vec<usize> = field("shape")?.extract()?;
        let typestr: String = field("typestr")?.extract()?;
        let data = field("data")?;
        let data = data.cast::<PyTuple>().map_err(|_| {
            PyTypeError::new_err("__cuda_array_interface__[\"data\"]: (ptr, readonly)")
        })?;
        let ptr: u64 = data.get_item(0)?.extract()?;
        let version: i64 = match cai.get_item("version")? {
            Some(v) => v.extract()?,
            None => 0,
        };
        if let Some(mask) = cai.get_item("mask")?
            && !mask.is_none()
        {
            return Err(PyTypeError::new_err(
                "masked CUDA arrays (__cuda_array_interface__ with a mask) are not taken",
            ));
        }
        let (dtype, itemsize) = dtype_of(&typestr);
        if let Some(strides) = cai.get_item("strides")?
            && !strides.is_none()
        {
            let strides: Vec<isize> = strides.extract()?;
            if !c_contiguous(&shape, &strides, itemsize) {
                return Err(PyValueError::new_err(format!(
                    "the CUDA array must be C-contiguous (shape {shape:?}, strides {strides:?})"
                )));
            }
        }
        let stream = match cai.get_item("stream")? {
            Some(s) if version >= 3 && !s.is_none() => {
                let s: usize = s.extract()?;
                if s == 0 {
                    return Err(PyValueError::new_err(
                        "__cuda_array_interface__[\"stream\"] = 0 is not allowed (1: the legacy \
                         default stream, 2: the per-thread default stream)",
                    ));
                }
                Some(s)
            }
            _ => None,
        };
        Ok(Some(Self {
            ptr,
            shape,
            typestr,
            dtype,
            itemsize,
            stream,
        }))
    }

    /// Elements (the product of the shape); `ValueError` when it overflows.
    pub fn len(&self) -> PyResult<usize> {
        elements(&self.shape)
    }

    /// `(height, width, channels)` of a `(height, width)` or `(height, width, channels)` array.
    pub fn image_shape(&self) -> PyResult<(usize, usize, usize)> {
        match self.shape[..] {
            [h, w] => Ok((h, w, 1)),
            [h, w, c] => Ok((h, w, c)),
            _ => Err(PyValueError::new_err(format!(
                "the CUDA array has shape {:?}: 2D (or height x width x channels) images only",
                self.shape
            ))),
        }
    }

    /// `TypeError` naming the dtype, for an op that does not take it.
    #[must_use]
    pub fn dtype_error(&self, what: &str) -> PyErr {
        PyTypeError::new_err(format!("{what}; the CUDA array is {}", self.typestr))
    }
}

/// The product of `shape`; `ValueError` when it overflows.
fn elements(shape: &[usize]) -> PyResult<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(|| PyValueError::new_err(format!("a CUDA array of shape {shape:?} overflows")))
}

/// True when `strides` (bytes) are those of a C-contiguous array of `shape` (dimensions of
/// extent 1 may have any stride, as NumPy's flags say).
fn c_contiguous(shape: &[usize], strides: &[isize], itemsize: usize) -> bool {
    if shape.len() != strides.len() {
        return false;
    }
    if shape.contains(&0) {
        return true;
    }
    let mut expected = Some(itemsize);
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && usize::try_from(s).ok() != expected {
            return false;
        }
        expected = expected.and_then(|e| e.checked_mul(n));
    }
    true
}

/// The device pointer the last [`run`] read in place (for the tests' pointer checks).
static LAST_INPUT: AtomicU64 = AtomicU64::new(0);

/// The device address the last op on a CUDA array read its input from: the array's own
/// pointer, as the tests check (no copy of the input was made).
#[pyfunction]
pub fn _last_device_input() -> u64 {
    LAST_INPUT.load(Ordering::Relaxed)
}

/// [`run`] timed as the last op with the GIL released, for an op whose result has one value
/// per pixel: that result as a new `(height, width)` [`DeviceArray`].
pub fn run_image<T: DeviceRepr, R: DeviceElement>(
    py: Python<'_>,
    gpu: &GpuContext,
    input: &CudaInput,
    channels: usize,
    f: impl FnOnce(&GpuContext, DeviceImage<'_, T>) -> Result<CudaSlice<R>, OpError> + Send,
) -> PyResult<DeviceArray> {
    let (h, w, _) = input.image_shape()?;
    let out = crate::timing::detach_timed(py, || run::<T, _>(gpu, input, channels, f))?;
    DeviceArray::new(out, vec![h, w])
}

/// Runs `f` on `input` as a packed image of `channels` samples a pixel (`T` each) on a new
/// stream of `gpu`, read in place (see the module docs), then waits for the stream. Input
/// problems are `ValueError`, the op's errors [`op_error`]'s.
pub fn run<T: DeviceRepr, R>(
    gpu: &GpuContext,
    input: &CudaInput,
    channels: usize,
    f: impl FnOnce(&GpuContext, DeviceImage<'_, T>) -> Result<R, OpError>,
) -> PyResult<R> {
    let (h, w, c) = input.image_shape()?;
    if c != channels {
        return Err(PyValueError::new_err(format!(
            "the op takes {channels} channel(s) a pixel, the CUDA array has shape {:?}",
            input.shape
        )));
    }
    let len = input.len()?;
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| PyValueError::new_err("the CUDA array's size overflows"))?;
    if input.itemsize != std::mem::size_of::<T>() {
        return Err(input.dtype_error("the CUDA array's element size does not match the op's"));
    }
    if len == 0 {
        return Err(PyValueError::new_err(
            "empty CUDA arrays are handled by the Python layer",
        ));
    }
    let ordinal = gpu.info().ordinal;
    let info = pointer_info(gpu, input.ptr).map_err(|e| {
        PyValueError::new_err(format!(
            "the CUDA array's pointer {:#x} is not memory CUDA knows ({e})",
            input.ptr
        ))
    })?;
    if info.memory != MemoryKind::Device {
        return Err(PyValueError::new_err(format!(
            "the CUDA array's pointer {:#x} is not device memory ({:?})",
            input.ptr, info.memory
        )));
    }
    if info.ordinal != ordinal {
        return Err(PyValueError::new_err(format!(
            "the CUDA array is on device {}; morphoscope runs on device {ordinal} only",
            info.ordinal
        )));
    }
    if let Some(avail) = info.bytes_from(input.ptr)
        && avail < bytes
    {
        return Err(PyValueError::new_err(format!(
            "the CUDA array claims {bytes} bytes at {:#x}, its allocation holds {avail} from there",
            input.ptr
        )));
    }
    let stream = gpu.new_stream().map_err(|e| op_error(e.into()))?;
    if let Some(producer) = input.stream {
        // SAFETY: the interface names a live stream of the device's primary context, ours
        // (or 1 / 2, the default streams); its owner keeps it alive during the call.
        unsafe { wait_for_stream(&stream, producer) }.map_err(|e| op_error(e.into()))?;
    }
    // SAFETY: the pointer is device memory of this device holding `len` elements (checked
    // above where the driver knows the allocation; the interface's word otherwise), of the
    // dtype the caller matched to `T`; the caller holds the array for the whole call, and the
    // stream is synchronised below before the call returns.
    let foreign = unsafe { ForeignSlice::<T>::new(&stream, input.ptr, len) };
    LAST_INPUT.store(input.ptr, Ordering::Relaxed);
    let result = DeviceImage::new(&stream, foreign.slice(), w, h, c)
        .map_err(OpError::from)
        .and_then(|image| f(gpu, image));
    let synced = stream.synchronize();
    drop(foreign);
    let out = result.map_err(op_error)?;
    synced.map_err(|e| op_error(e.into()))?;
    Ok(out)
}

/// A result buffer of one of the dtypes the ops return.
#[allow(missing_docs)]
pub enum Buffer {
    U8(CudaSlice<u8>),
    U16(CudaSlice<u16>),
    F32(CudaSlice<f32>),
    I32(CudaSlice<i32>),
    I64(CudaSlice<i64>),
}

/// The element types of [`DeviceArray`]s.
pub trait DeviceElement: DeviceRepr + Sized {
    /// `__cuda_array_interface__`'s `typestr`.
    const TYPESTR: &'static str;
    /// The buffer, typed.
    fn buffer(slice: CudaSlice<Self>) -> Buffer;
}

macro_rules! element {
    ($t:ty, $v:ident, $s:literal) => {
        impl DeviceElement for $t {
            const TYPESTR: &'static str = $s;
            fn buffer(slice: CudaSlice<Self>) -> Buffer {
                Buffer::$v(slice)
            }
        }
    };
}
element!(u8, U8, "|u1");
element!(u16, U16, "<u2");
element!(f32, F32, "<f4");
element!(i32, I32, "<i4");
element!(i64, I64, "<i8");

impl Buffer {
    fn ptr_len(&self) -> (u64, usize) {
        use cudarc::driver::DevicePtr;
        macro_rules! of {
            ($s:expr) => {{
                let (p, _sync) = $s.device_ptr($s.stream());
                (p, $s.len())
            }};
        }
        match self {
            Self::U8(s) => of!(s),
            Self::U16(s) => of!(s),
            Self::F32(s) => of!(s),
            Self::I32(s) => of!(s),
            Self::I64(s) => of!(s),
        }
    }

    /// Frees the buffer after the default stream's work ([`free_after_default_stream`]). A
    /// failure is dropped, as cudarc drops its own in destructors (at interpreter exit the
    /// driver may already be gone).
    fn free(self) {
        let _ = match self {
            Self::U8(s) => free_after_default_stream(s),
            Self::U16(s) => free_after_default_stream(s),
            Self::F32(s) => free_after_default_stream(s),
            Self::I32(s) => free_after_default_stream(s),
            Self::I64(s) => free_after_default_stream(s),
        };
    }
}

/// A result on the device: a packed C-contiguous array the extension allocated, exposed through
/// `__cuda_array_interface__` (version 3, ready: `stream` is `None`). Hand it to
/// `cupy.asarray` or `torch.as_tensor(..., device="cuda")`, which use the memory in place and
/// keep this object alive while they do. The memory is freed when the last reference goes, in
/// the order of the legacy default stream (after work queued there and on blocking streams).
#[pyclass(module = "morphoscope._core", frozen)]
pub struct DeviceArray {
    buffer: Option<Buffer>,
    shape: Vec<usize>,
    typestr: &'static str,
    ptr: u64,
}

impl DeviceArray {
    /// Wraps `slice` (at least as many elements as `shape` holds; the array is its first
    /// `shape.product()` elements), complete (the caller synchronised its stream).
    pub fn new<T: DeviceElement>(slice: CudaSlice<T>, shape: Vec<usize>) -> PyResult<Self> {
        let buffer = T::buffer(slice);
        let (ptr, len) = buffer.ptr_len();
        let n = match elements(&shape) {
            Ok(n) => n,
            Err(e) => {
                buffer.free();
                return Err(e);
            }
        };
        if len < n {
            buffer.free();
            return Err(PyValueError::new_err(format!(
                "a device result of {len} elements for shape {shape:?}"
            )));
        }
        Ok(Self {
            buffer: Some(buffer),
            shape,
            typestr: T::TYPESTR,
            ptr,
        })
    }
}

#[pymethods]
impl DeviceArray {
    /// The CUDA Array Interface, version 3.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.typestr)?;
        d.set_item("data", (self.ptr, false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// The shape (outermost first).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type as `__cuda_array_interface__` spells it (`|u1`, `<u2`, `<f4`, `<i4`,
    /// `<i8`).
    #[getter]
    fn typestr(&self) -> &'static str {
        self.typestr
    }

    /// The device address of the first element.
    #[getter]
    fn ptr(&self) -> u64 {
        self.ptr
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceArray(shape={:?}, typestr={:?}, ptr={:#x})",
            self.shape, self.typestr, self.ptr
        )
    }
}

impl Drop for DeviceArray {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            b.free();
        }
    }
}
