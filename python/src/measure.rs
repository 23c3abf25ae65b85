//! Labels and region measurements (`morphoscope.measure`): the library's run-based labeler
//! (components numbered in raster order of their first pixel, scikit-image's and OpenCV's
//! numbering) and its exact per-component integer sums ([`ComponentSums`]), from which
//! [`Component::from_sums`] derives the features exactly as the pipeline's feature pass does.

use std::collections::BTreeMap;

use cudarc::driver::CudaSlice;
use morphoscope::backend::Backend;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::{Image, ImageView};
use morphoscope::ops::OpError;
use morphoscope::ops::cca::{
    self, CcaGpu, CcaParams, Component, ComponentSums, Polarity, Source, Threshold,
};
use morphoscope::ops::convert as convert_gpu;
use numpy::{Element, IntoPyArray, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert;
use crate::device::{backend, cuda_for_array, op_error};
use crate::device_array::{self, CudaInput, DeviceArray, Dtype};
use crate::timing;

/// Labels the non-zero pixels of a `uint8` (or `bool`) mask with 4- or 8-connectivity: the
/// label image (0 = background, components `1..=n` in raster order of their first pixel),
/// `int64`, or `int32` with `int32`, and `n`. A NumPy mask gives a NumPy array; a 2D
/// C-contiguous CUDA mask (`__cuda_array_interface__`) is labelled in place on the device into
/// a [`DeviceArray`] (only the count is read back).
#[pyfunction]
#[pyo3(signature = (mask, connectivity, device, int32=false))]
pub fn label<'py>(
    py: Python<'py>,
    mask: &Bound<'py, PyAny>,
    connectivity: u8,
    device: &str,
    int32: bool,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let params = CcaParams {
        threshold: Threshold::Fixed(0),
        polarity: Polarity::Bright,
        connectivity,
        source: Source::Frame,
        learning_rate: CcaParams::default().learning_rate,
    };
    params.validate().map_err(op_error)?;
    if let Some(input) = CudaInput::from_object(mask)? {
        let gpu = cuda_for_array(py, device)?;
        if !matches!(input.dtype, Dtype::U8 | Dtype::Bool) {
            return Err(input.dtype_error("label takes a uint8 or bool mask"));
        }
        let (labels, n) = label_device(py, &input, &params, int32, &gpu)?;
        return Ok((Bound::new(py, labels)?.into_any(), n));
    }
    let mask: PyReadonlyArray2<'py, u8> = mask.extract()?;
    let backend = backend(py, device)?;
    let img = convert::view(&mask)?;
    let (labels, n) = timing::detach_timed(py, || -> Result<(Image<u32>, usize), OpError> {
        let out = match &backend {
            Backend::Cpu => cca::cca_cpu(img, &params)?,
            Backend::Cuda(g) => cca::cca_gpu(g, img, &params)?,
        };
        let n = out.table.len();
        Ok((out.labels, n))
    })
    .map_err(op_error)?;
    let labels = if int32 {
        convert::labels_i32(py, labels)?.into_any()
    } else {
        convert::labels_i64(py, &labels)?.into_any()
    };
    Ok((labels, n))
}

/// The labels of a CUDA mask on the device (`int32` or `int64`) and their count (a 4-byte
/// readback).
fn label_device(
    py: Python<'_>,
    input: &CudaInput,
    params: &CcaParams,
    int32: bool,
    gpu: &GpuContext,
) -> PyResult<(DeviceArray, usize)> {
    let (h, w, _) = input.image_shape()?;
    let (labels, n) = timing::detach_timed(py, || {
        device_array::run::<u8, _>(gpu, input, 1, |g, image| {
            let stream = image.stream;
            let mut op = CcaGpu::new(g)?;
            let mut timer = KernelTimer::new();
            op.enqueue_binarize(&mut timer, image, params)?;
            op.enqueue_labeling(stream, &mut timer, params.connectivity, None)?;
            let (labels, lw, lh) = op
                .device_labels()
                .ok_or_else(|| OpError::Unsupported("labeling left no label image".into()))?;
            let out = if int32 {
                Labels::I32(convert_gpu::labels_to_i32_gpu(g, stream, labels, lw * lh)?)
            } else {
                Labels::I64(convert_gpu::labels_to_i64_gpu(g, stream, labels, lw * lh)?)
            };
            Ok((out, op.download_count(stream)?))
        })
    })?;
    let labels = match labels {
        Labels::I32(l) => DeviceArray::new(l, vec![h, w])?,
        Labels::I64(l) => DeviceArray::new(l, vec![h, w])?,
    };
    Ok((labels, n))
}

/// Labels on the device, as the caller asked for them.
enum Labels {
    I32(CudaSlice<i32>),
    I64(CudaSlice<i64>),
}

/// Per-label sums, keyed by label value: dense when the labels are small, else a map.
enum Regions {
    Dense(Vec<Option<ComponentSums>>),
    Sparse(BTreeMap<i64, ComponentSums>),
}

impl Regions {
    fn entry(&mut self, label: i64) -> &mut ComponentSums {
        match self {
            Self::Dense(v) => v[label as usize].get_or_insert_with(ComponentSums::empty),
            Self::Sparse(m) => m.entry(label).or_insert_with(ComponentSums::empty),
        }
    }

    fn into_sorted(self) -> Vec<(i64, ComponentSums)> {
        match self {
            Self::Dense(v) => v
                .into_iter()
                .enumerate()
                .filter_map(|(l, s)| s.map(|s| (l as i64, s)))
                .collect(),
            Self::Sparse(m) => m.into_iter().collect(),
        }
    }
}

/// The integer dtypes a label image may have here (others are converted to int64 by the
/// Python side).
trait LabelValue: Element + Copy + PartialEq + Into<i64> {}
impl LabelValue for i64 {}
impl LabelValue for i32 {}
impl LabelValue for u32 {}
impl LabelValue for u16 {}
impl LabelValue for u8 {}

/// The sums of every positive label of `labels` (0 and negative values are background, as in
/// scikit-image), in label order; `grey(x, y)` adds the intensity (0 without an intensity
/// image).
fn sums_by_label<L: LabelValue>(
    labels: ImageView<'_, L>,
    grey: &dyn Fn(usize, usize) -> u64,
) -> Result<Vec<(i64, ComponentSums)>, String> {
    let (w, h) = (labels.width(), labels.height());
    cca::cpu::check_sum_range(w, h).map_err(|e| e.to_string())?;
    let max = labels
        .rows()
        .flat_map(|r| r.iter().map(|&v| v.into()))
        .max()
        .unwrap_or(0)
        .max(0);
    // Dense storage costs ~100 bytes a label value: used while that stays within ~12 bytes a pixel.
    let mut regions = if (max as u64) <= (w * h / 8) as u64 + 4096 {
        Regions::Dense(vec![None; max as usize + 1])
    } else {
        Regions::Sparse(BTreeMap::new())
    };
    for (y, row) in labels.rows().enumerate() {
        let mut x0 = 0;
        while x0 < w {
            let l = row[x0];
            let run = row[x0..].iter().take_while(|&&v| v == l).count();
            let x1 = x0 + run - 1;
            let label: i64 = l.into();
            if label > 0 {
                let s = regions.entry(label);
                s.add_run(x0 as u32, x1 as u32, y as u32);
                s.sum_grey += (x0..=x1).map(|x| grey(x, y)).sum::<u64>();
            }
            x0 = x1 + 1;
        }
    }
    Ok(regions.into_sorted())
}

/// The measurements of every positive label of `labels`, in label order (see
/// [`sums_by_label`]).
fn components<L: LabelValue>(
    labels: ImageView<'_, L>,
    grey: &dyn Fn(usize, usize) -> u64,
) -> Result<Vec<(i64, Component)>, String> {
    Ok(sums_by_label(labels, grey)?
        .iter()
        .map(|(l, s)| (*l, Component::from_sums(0, s)))
        .collect())
}

/// The measurements of `label_image`'s regions with the intensities of `intensity_image`
/// (uint8 or uint16, the same shape) when given, timed as the op.
fn measure_regions<'py, L: LabelValue>(
    py: Python<'py>,
    label_image: &PyReadonlyArray2<'py, L>,
    intensity_image: Option<&Bound<'py, PyAny>>,
) -> PyResult<Vec<(i64, Component)>> {
    let labels = convert::view(label_image)?;
    let (w, h) = (labels.width(), labels.height());
    match intensity_image {
        None => timing::detach_timed(py, || components(labels, &|_, _| 0)),
        Some(i) => {
            if let Ok(a) = i.extract::<PyReadonlyArray2<'py, u8>>() {
                let g = convert::view(&a)?;
                same_shape(w, h, g.width(), g.height())?;
                timing::detach_timed(py, || components(labels, &|x, y| u64::from(g.get(x, y))))
            } else if let Ok(a) = i.extract::<PyReadonlyArray2<'py, u16>>() {
                let g = convert::view(&a)?;
                same_shape(w, h, g.width(), g.height())?;
                timing::detach_timed(py, || components(labels, &|x, y| u64::from(g.get(x, y))))
            } else {
                return Err(PyTypeError::new_err(
                    "intensity_image: morphoscope measures uint8 or uint16 intensities",
                ));
            }
        }
    }
    .map_err(PyValueError::new_err)
}

/// Per-region measurements of a label image (`int64`, `int32`, `uint32`, `uint16` or `uint8`;
/// every positive value is one region, connected or not, as scikit-image's `regionprops`),
/// with the intensity sums of an optional `uint8`/`uint16` image of the same shape: a dict of
/// 1D arrays in label order — `label`, `area`, `min_row`, `min_col`, `max_row`, `max_col`
/// (exclusive, as scikit-image's `bbox`), `centroid_row`, `centroid_col`, `mu20`, `mu11`,
/// `mu02` (central moments with x = column), `intensity_mean` (when an intensity image is
/// given).
#[pyfunction]
#[pyo3(signature = (label_image, intensity_image=None))]
pub fn region_sums<'py>(
    py: Python<'py>,
    label_image: &Bound<'py, PyAny>,
    intensity_image: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let comps = if let Ok(a) = label_image.extract::<PyReadonlyArray2<'py, i64>>() {
        measure_regions(py, &a, intensity_image)?
    } else if let Ok(a) = label_image.extract::<PyReadonlyArray2<'py, i32>>() {
        measure_regions(py, &a, intensity_image)?
    } else if let Ok(a) = label_image.extract::<PyReadonlyArray2<'py, u32>>() {
        measure_regions(py, &a, intensity_image)?
    } else if let Ok(a) = label_image.extract::<PyReadonlyArray2<'py, u16>>() {
        measure_regions(py, &a, intensity_image)?
    } else if let Ok(a) = label_image.extract::<PyReadonlyArray2<'py, u8>>() {
        measure_regions(py, &a, intensity_image)?
    } else {
        return Err(PyTypeError::new_err(
            "label_image: int64, int32, uint32, uint16 or uint8 labels",
        ));
    };
    // One pass over the regions, into one vector a column.
    let n = comps.len();
    let ints = || -> [Vec<i64>; 5] { std::array::from_fn(|_| Vec::with_capacity(n)) };
    let floats = || -> [Vec<f64>; 7] { std::array::from_fn(|_| Vec::with_capacity(n)) };
    let (mut i, mut f) = (ints(), floats());
    for (label, c) in &comps {
        let (top, left) = (i64::from(c.top), i64::from(c.left));
        for (col, v) in i.iter_mut().zip([
            *label,
            top,
            left,
            top + i64::from(c.height),
            left + i64::from(c.width),
        ]) {
            col.push(v);
        }
        for (col, v) in f.iter_mut().zip([
            c.area as f64,
            c.centroid[1],
            c.centroid[0],
            c.moments.mu20,
            c.moments.mu11,
            c.moments.mu02,
            c.mean_grey(),
        ]) {
            col.push(v);
        }
    }
    let d = PyDict::new(py);
    let [label, min_row, min_col, max_row, max_col] = i;
    let [area, centroid_row, centroid_col, mu20, mu11, mu02, mean] = f;
    for (key, col) in [
        ("label", label),
        ("min_row", min_row),
        ("min_col", min_col),
        ("max_row", max_row),
        ("max_col", max_col),
    ] {
        d.set_item(key, col.into_pyarray(py))?;
    }
    for (key, col) in [
        ("area", area),
        ("centroid_row", centroid_row),
        ("centroid_col", centroid_col),
        ("mu20", mu20),
        ("mu11", mu11),
        ("mu02", mu02),
    ] {
        d.set_item(key, col.into_pyarray(py))?;
    }
    if intensity_image.is_some() {
        d.set_item("intensity_mean", mean.into_pyarray(py))?;
    }
    Ok(d)
}

fn same_shape(w: usize, h: usize, iw: usize, ih: usize) -> PyResult<()> {
    if (w, h) != (iw, ih) {
        return Err(PyValueError::new_err(format!(
            "intensity_image has shape ({ih}, {iw}), label_image ({h}, {w}): they must match"
        )));
    }
    Ok(())
}
