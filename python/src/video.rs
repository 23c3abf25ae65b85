//! `morphoscope.open`: the analysed frames of a video source, one at a time (`morphoscope.video`
//! wraps [`Video`] in a Python iterator).
//!
//! The stream is the library's own: [`lifecycle::run`], the code `morphoscope run`, the service
//! and the viewer drive, on a thread of its own (`morphoscope-video`), with the same sources
//! ([`SourceSpec::parse`]), settings ([`Settings::load`]: `--config` and `--set`), opening,
//! reconnecting and finishing. Its output is a bounded channel
//! ([`StreamOutput::Channel`]) that [`Video::next`] reads with the GIL released, waking
//! every [`WAKE`] to let Python handle signals (Ctrl+C). A reader slower than the analyses holds
//! a file up and makes a live source drop frames at the source, as a slow disk does for `run`.
//! [`Video::close`] (and dropping the object) asks the stream to stop with
//! [`lifecycle::CLOSED`], lets go of the channel (the stream then ends at once) and joins the
//! thread.
//!
//! Errors are Python exceptions with the CLI's messages: settings and sources `ValueError` (a
//! missing file `FileNotFoundError`), a stream that fails (a source lost past its reconnects,
//! an analysis error) `RuntimeError` once the frames before the failure were read.

mod frame;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::{self, Backend};
use morphoscope::config::{BackendChoice, Settings};
use morphoscope::lifecycle::{
    self, LiveSettings, StopRequest, StreamJob, StreamObserver, StreamOutcome, StreamOutput,
};
use morphoscope::source::{SourceError, SourceSpec};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::device;

/// Adds [`open`] and [`Video`] to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<Video>()
}

/// How long [`Video::next`] waits for a frame, GIL released, before it lets Python handle
/// signals and waits again.
const WAKE: Duration = Duration::from_millis(100);

/// Frames analysed ahead of the reader, besides the pipeline's own queue and ring.
const AHEAD: usize = 2;

/// A running stream read frame by frame; created by [`open`].
#[pyclass(frozen, module = "morphoscope._core")]
pub struct Video {
    /// Asks the stream to stop.
    stop: StopRequest,
    /// The frames (`None` once closed or ended).
    frames: Mutex<Option<Receiver<AnalysedFrame>>>,
    /// The stream's thread, returning its outcome (`None` once joined).
    thread: Mutex<Option<JoinHandle<StreamOutcome>>>,
    /// Hand the layers over with each frame.
    layers: bool,
}

/// Starts a stream of `source` with the settings of `config` (a TOML file, as `--config`) and
/// `sets` (`section.key=value`, as `--set`) on `device` (`"auto"`: `pipeline.backend` of the
/// settings, `auto` by default; `"cpu"`, `"cuda"`: as `--backend`), for at most `max_frames`
/// frames; with `layers`, each frame comes with its layers (on CUDA read back from the device).
#[pyfunction]
#[pyo3(signature = (source, sets, config, device, layers, max_frames))]
pub fn open(
    py: Python<'_>,
    source: &str,
    sets: Vec<String>,
    config: Option<PathBuf>,
    device: &str,
    layers: bool,
    max_frames: Option<u64>,
) -> PyResult<Video> {
    let settings = Settings::load(config.as_deref(), &sets)
        .map_err(|e| PyValueError::new_err(one_line(&e)))?;
    let spec = SourceSpec::parse(source).map_err(|e| source_error(&e))?;
    if max_frames == Some(0) {
        return Err(PyValueError::new_err(
            "max_frames=0: at least 1 (or None for every frame)",
        ));
    }
    let backend = stream_backend(py, device, &settings)?;
    let (to_reader, frames) = crossbeam_channel::bounded(AHEAD);
    let stop = StopRequest::new();
    let asked = stop.clone();
    let thread = std::thread::Builder::new()
        .name("morphoscope-video".into())
        .spawn(move || {
            let job = StreamJob {
                index: 0,
                spec,
                output: StreamOutput::Channel {
                    frames: to_reader,
                    layers,
                },
                settings: &settings,
                backend: &backend,
                max_frames,
                live: LiveSettings::new(),
            };
            lifecycle::run(job, &asked, &mut Unobserved)
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the stream's thread: {e}")))?;
    Ok(Video {
        stop,
        frames: Mutex::new(Some(frames)),
        thread: Mutex::new(Some(thread)),
        layers,
    })
}

#[pymethods]
impl Video {
    /// The next frame's fields as a dict (see `morphoscope.video.Frame`), or `None` once the
    /// stream has ended or was closed. A stream that failed raises `RuntimeError` with its
    /// error, once, after its last frame.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        loop {
            // A clone: `close` from another thread lets go of the channel meanwhile.
            let Some(frames) = lock(&self.frames).clone() else {
                return Ok(None);
            };
            match py.detach(|| frames.recv_timeout(WAKE)) {
                Ok(f) => return frame::fields(py, f, self.layers).map(Some),
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => {
                    drop(frames);
                    return self.ended(py).map(|()| None);
                }
            }
        }
    }

    /// Stops the stream (the frames in flight are discarded) and waits for its thread. Later
    /// calls do nothing.
    fn close(&self, py: Python<'_>) {
        self.stop.ask(lifecycle::CLOSED);
        lock(&self.frames).take();
        // (Taken out first: no lock is held while the thread is joined without the GIL.)
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            // (An outcome after a close is not an error, whatever it says.)
            let _ = py.detach(|| thread.join());
        }
    }

    /// True once the stream was closed or has ended and its end was read.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.frames).is_none()
    }
}

impl Video {
    /// The channel disconnected: the stream has finished. Joins its thread and raises its
    /// error, if any.
    fn ended(&self, py: Python<'_>) -> PyResult<()> {
        lock(&self.frames).take();
        let Some(thread) = lock(&self.thread).take() else {
            return Ok(());
        };
        match py.detach(|| thread.join()) {
            Ok(outcome) => match outcome.error {
                Some(e) => Err(PyRuntimeError::new_err(morphoscope::redact::text(&e))),
                None => Ok(()),
            },
            Err(_) => Err(PyRuntimeError::new_err(
                "the stream's thread panicked (a bug: please report it)",
            )),
        }
    }
}

impl Drop for Video {
    /// Garbage collected: stops the stream and waits for its thread (which never needs the GIL).
    fn drop(&mut self) {
        self.stop.ask(lifecycle::CLOSED);
        lock(&self.frames).take();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// The stream shows its driver nothing: Python reads the frames themselves.
struct Unobserved;

impl StreamObserver for Unobserved {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The backend of `device`: `"auto"` is the settings' `pipeline.backend`, `"cpu"` and `"cuda"`
/// override it (as `--backend`); on `pipeline.device` 0 the package's shared CUDA context.
fn stream_backend(py: Python<'_>, device: &str, settings: &Settings) -> PyResult<Backend> {
    let choice = match device {
        "auto" => settings.pipeline.backend,
        "cpu" => BackendChoice::Cpu,
        "cuda" => BackendChoice::Cuda,
        other => {
            return Err(PyValueError::new_err(format!(
                "device={other:?}: one of \"auto\", \"cuda\", \"cpu\""
            )));
        }
    };
    if settings.pipeline.device == 0 && settings.pipeline.sm_limit == 0 {
        let name = match choice {
            BackendChoice::Auto => "auto",
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
        };
        return device::backend(py, name);
    }
    let p = &settings.pipeline;
    py.detach(|| backend::select(choice, p.device, p.sm_limit))
        .map(|(b, _)| b)
        .map_err(|e| {
            PyRuntimeError::new_err(format!("--backend cuda: CUDA backend unavailable: {e}"))
        })
}

/// A SOURCE the CLI refuses: `FileNotFoundError` for a missing file, else `ValueError`.
fn source_error(e: &SourceError) -> PyErr {
    match e {
        SourceError::NotFound(_) => PyFileNotFoundError::new_err(one_line(e)),
        _ => PyValueError::new_err(one_line(e)),
    }
}

/// The error and its causes on one line, secrets masked: what the CLI prints after `error: `.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        let s = c.to_string().replace('\n', " ");
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cause = c.source();
    }
    morphoscope::redact::text(&parts.join(": "))
}
