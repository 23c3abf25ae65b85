//! One analysed frame as the fields of a Python `morphoscope.video.Frame`: index, timestamp,
//! each analysis' summary (as `frames.jsonl` writes it), the component table (as
//! `regionprops_table` returns it, with track ids), the tracks, the picture and, on request,
//! the layers. Pixels are moved into NumPy arrays, not copied, where the frame alone holds
//! them.

use std::sync::Arc;

use morphoscope::analysis::{AnalysedFrame, OpData, TrackInfo};
use morphoscope::compose::HostRaster;
use morphoscope::image::Image;
use morphoscope::ops::cca::ComponentTable;
use morphoscope::output::frame_record;
use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyArray3};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert;

/// The file of `morphoscope run` whose lines hold each frame's component table with track ids.
const COMPONENTS_FILE: &str = "components.jsonl";

/// `f`'s fields: `index`, `timestamp`, `summary`, `components`, `tracks`, `image` and `layers`
/// (`None` unless `layers`).
pub fn fields<'py>(
    py: Python<'py>,
    f: AnalysedFrame,
    layers: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", f.index)?;
    d.set_item("timestamp", f.pts_nanos.map(|ns| ns as f64 / 1e9))?;
    let record = frame_record(&f);
    d.set_item("summary", json(py, &record["ops"])?)?;
    d.set_item("components", components(py, &f)?)?;
    d.set_item("tracks", tracks(py, &f)?)?;
    let layers = if layers {
        Some(layer_arrays(py, &f)?)
    } else {
        None
    };
    d.set_item("layers", layers)?;
    let image = match f.rgb {
        Some(rgb) => Some(rgb_array(py, owned(rgb))?),
        None => None,
    };
    d.set_item("image", image)?;
    Ok(d)
}

/// A JSON value as Python objects (objects are dicts, arrays lists).
fn json<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(json(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let dict = PyDict::new(py);
            for (k, x) in o {
                dict.set_item(k, json(py, x)?)?;
            }
            dict.into_any()
        }
    })
}

/// The frame's component table with track ids (the line `run` writes to `components.jsonl`),
/// empty when no analysis labelled the frame.
fn component_table(f: &AnalysedFrame) -> PyResult<ComponentTable> {
    let Some((_, line)) = f
        .outputs
        .iter()
        .flat_map(|o| &o.records)
        .find(|(file, _)| *file == COMPONENTS_FILE)
    else {
        return Ok(ComponentTable::default());
    };
    let unreadable = |e: serde_json::Error| {
        PyRuntimeError::new_err(format!("frame {}: {COMPONENTS_FILE} line: {e}", f.index))
    };
    let mut line: serde_json::Value = serde_json::from_str(line).map_err(unreadable)?;
    serde_json::from_value(line["table"].take()).map_err(unreadable)
}

/// The component table as `regionprops_table(labels, properties=("label", "area", "bbox",
/// "centroid"))` returns it (same keys, order and dtypes), and `track_id` (`int64`, -1 for a
/// component of no confirmed track, or of several).
fn components<'py>(py: Python<'py>, f: &AnalysedFrame) -> PyResult<Bound<'py, PyDict>> {
    let table = component_table(f)?;
    let c = &table.components;
    let int = |g: &dyn Fn(&morphoscope::ops::cca::Component) -> i64| -> Vec<i64> {
        c.iter().map(g).collect()
    };
    let float = |g: &dyn Fn(&morphoscope::ops::cca::Component) -> f64| -> Vec<f64> {
        c.iter().map(g).collect()
    };
    let d = PyDict::new(py);
    d.set_item("label", int(&|c| i64::from(c.label)).into_pyarray(py))?;
    d.set_item("area", float(&|c| c.area as f64).into_pyarray(py))?;
    d.set_item("bbox-0", int(&|c| i64::from(c.top)).into_pyarray(py))?;
    d.set_item("bbox-1", int(&|c| i64::from(c.left)).into_pyarray(py))?;
    d.set_item(
        "bbox-2",
        int(&|c| i64::from(c.top) + i64::from(c.height)).into_pyarray(py),
    )?;
    d.set_item(
        "bbox-3",
        int(&|c| i64::from(c.left) + i64::from(c.width)).into_pyarray(py),
    )?;
    d.set_item("centroid-0", float(&|c| c.centroid[1]).into_pyarray(py))?;
    d.set_item("centroid-1", float(&|c| c.centroid[0]).into_pyarray(py))?;
    d.set_item(
        "track_id",
        int(&|c| c.track_id.and_then(|t| i64::try_from(t).ok()).unwrap_or(-1)).into_pyarray(py),
    )?;
    Ok(d)
}

/// The tracks of the frame (confirmed, merged and lost ones, as the viewer's panel lists them)
/// as a dict of 1D arrays, one entry per track: `id`, `age` (frames), `area` (of the last
/// matched component), `centroid-0`/`-1` (row, column), `velocity-0`/`-1` (rows and columns a
/// second), `bbox-0..3` (min row, min column, max row, max column: regionprops' order, floats:
/// a merged track's box is predicted).
fn tracks<'py>(py: Python<'py>, f: &AnalysedFrame) -> PyResult<Bound<'py, PyDict>> {
    let tracks: &[TrackInfo] = f
        .outputs
        .iter()
        .find_map(|o| match &o.data {
            OpData::Tracks(t) => Some(t.as_slice()),
            _ => None,
        })
        .unwrap_or(&[]);
    let int = |g: &dyn Fn(&TrackInfo) -> i64| -> Vec<i64> { tracks.iter().map(g).collect() };
    let float = |g: &dyn Fn(&TrackInfo) -> f32| -> Vec<f64> {
        tracks.iter().map(|t| f64::from(g(t))).collect()
    };
    let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let d = PyDict::new(py);
    d.set_item("id", int(&|t| big(t.id)).into_pyarray(py))?;
    d.set_item("age", int(&|t| big(t.age)).into_pyarray(py))?;
    d.set_item("area", int(&|t| big(t.area)).into_pyarray(py))?;
    d.set_item("centroid-0", float(&|t| t.position[1]).into_pyarray(py))?;
    d.set_item("centroid-1", float(&|t| t.position[0]).into_pyarray(py))?;
    d.set_item("velocity-0", float(&|t| t.velocity[1]).into_pyarray(py))?;
    d.set_item("velocity-1", float(&|t| t.velocity[0]).into_pyarray(py))?;
    d.set_item("bbox-0", float(&|t| t.bbox[1]).into_pyarray(py))?;
    d.set_item("bbox-1", float(&|t| t.bbox[0]).into_pyarray(py))?;
    d.set_item("bbox-2", float(&|t| t.bbox[1] + t.bbox[3]).into_pyarray(py))?;
    d.set_item("bbox-3", float(&|t| t.bbox[0] + t.bbox[2]).into_pyarray(py))?;
    Ok(d)
}

/// The layers on the host, by name: `gray` (the grey frame the analyses ran on, `uint8`) and
/// each analysis' raster under the analysis' name — a residue (`uint8`, H×W), a colour picture
/// (`uint8`, H×W×3) or a segmentation's labels (`int64`, the label image's size).
fn layer_arrays<'py>(py: Python<'py>, f: &AnalysedFrame) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(gray) = &f.gray {
        d.set_item("gray", convert::array(py, owned(Arc::clone(gray)))?)?;
    }
    for o in &f.outputs {
        let Some(raster) = &o.layer.raster else {
            continue;
        };
        match raster {
            HostRaster::Residue(r) => {
                d.set_item(o.op, convert::array(py, owned(Arc::clone(r)))?)?
            }
            HostRaster::Colour(c) => d.set_item(o.op, rgb_array(py, owned(Arc::clone(c)))?)?,
            HostRaster::Segments { segments, .. } => {
                d.set_item(o.op, convert::labels_i64(py, &segments.labels)?)?;
            }
        }
    }
    Ok(d)
}

/// The image behind `a`: moved out when nothing else holds it, else copied.
fn owned<T: Copy>(a: Arc<Image<T>>) -> Image<T> {
    Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())
}

/// A new `(height, width, 3)` array holding `img`'s pixels.
fn rgb_array(py: Python<'_>, img: Image<[u8; 3]>) -> PyResult<Bound<'_, PyArray3<u8>>> {
    let (w, h) = (img.width(), img.height());
    let data = img.into_packed().into_vec().into_flattened();
    Array3::from_shape_vec((h, w, 3), data)
        .map(|a| a.into_pyarray(py))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}
