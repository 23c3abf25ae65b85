//! Video sources: a SOURCE string becomes a GStreamer pipeline ending in an appsink; frames come
//! out as [`Frame`]s (RGB, GRAY8 or GRAY16 images with their row stride honoured, frame number,
//! timestamp). Errors posted on the bus become [`SourceError`]s with GStreamer's message.
//!
//! How it avoids the classic hangs: `appsink.pull_sample()` blocks forever after a pipeline error
//! (no EOS arrives), so [`Source::next_frame`] polls `try_pull_sample` with a short timeout and
//! checks the bus between polls; end of stream is `Ok(None)`; an error is returned once, after
//! which the source is finished. Dropping a `Source` sets the pipeline to NULL.
//!
//! What the stream turned out to be is asked of GStreamer, not guessed from the SOURCE string
//! (`StreamInfo`): a source is *live* when its pipeline says so (no preroll in PAUSED, or a source
//! element with `is-live` set), which makes cameras and RTSP live and an HTTP file a file; the nominal frame
//! rate comes from the negotiated caps; the decoder is the element decodebin plugged
//! ([`decoder`] prefers NVDEC when GStreamer's nvcodec plugin registers).

pub mod convert;
pub mod cuda_memory;
pub mod decoder;
pub mod elements;
mod errors;
mod reader;
pub mod reconnect;
pub mod spec;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use reader::{Source, image_from_plane, init as init_gstreamer};
pub use spec::{SourceSpec, TestSourceOptions};

use crate::image::DynImage;

/// One decoded frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// 0-based index in the order the source produced frames.
    pub index: u64,
    /// Presentation timestamp in nanoseconds, when the stream has one.
    pub pts_nanos: Option<u64>,
    /// The pixels.
    pub image: Pixels,
    /// The first frame after a live source was lost and came back (tracks end before it).
    pub after_gap: bool,
}

/// Where a frame's pixels are.
#[derive(Clone, Debug)]
pub enum Pixels {
    /// In host memory (RGB8, Gray8 or Gray16; rows keep GStreamer's stride): every source.
    Host(DynImage),
    /// NV12 planes on the GPU (a GStreamer element fed CUDA memory by a hardware decoder):
    /// only the CUDA backend takes them.
    Device(DeviceNv12),
}

impl Pixels {
    /// Width and height in pixels.
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        match self {
            Self::Host(image) => image.size(),
            Self::Device(planes) => (planes.width, planes.height),
        }
    }

    /// The host image, unless the pixels are on the device.
    #[must_use]
    pub fn into_host(self) -> Option<DynImage> {
        match self {
            Self::Host(image) => Some(image),
            Self::Device(_) => None,
        }
    }
}

impl From<DynImage> for Pixels {
    fn from(image: DynImage) -> Self {
        Self::Host(image)
    }
}

/// An NV12 frame in device memory of the CUDA backend's context, converted to RGB on the ring's
/// stream exactly as GStreamer's `videoconvert` converts it on the host (`ops::nv12`).
#[derive(Clone)]
pub struct DeviceNv12 {
    /// The planes' device pointers and pitches.
    pub planes: crate::ops::nv12::gpu::Nv12Planes,
    /// The conversion to reproduce (colorimetry, chroma siting, the host converter's bands).
    pub conversion: crate::ops::nv12::Nv12Conversion,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Keeps the planes allocated until the frame's analyses have read them (the decoder's
    /// buffer).
    pub keep_alive: Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for DeviceNv12 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceNv12")
            .field("width", &self.width)
            .field("height", &self.height)
            .finish_non_exhaustive()
    }
}

/// Pixel format the appsink negotiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FrameFormat {
    /// 8-bit RGB (the default: overlays need colour).
    #[default]
    Rgb,
    /// 8-bit grey.
    Gray8,
    /// 16-bit grey (little endian).
    Gray16,
}

/// When frames leave the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// Real time in the viewer (a file plays at its own frame rate), as fast as the analyses
    /// go in headless runs.
    #[default]
    Auto,
    /// At the stream's own frame rate (buffer timestamps against the pipeline clock).
    Realtime,
    /// As fast as the analyses take them.
    Fast,
}

/// Errors of the video source. Each carries the message GStreamer gave, where there is one.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The SOURCE string is not understood.
    #[error("invalid source: {0}")]
    BadSpec(String),
    /// A file source does not exist.
    #[error("file not found: {}", .0.display())]
    NotFound(PathBuf),
    /// A file exists but cannot be read.
    #[error("cannot read {path}: {err}", path = .0.display(), err = .1)]
    Io(PathBuf, std::io::Error),
    /// GStreamer could not be initialised.
    #[error("GStreamer init failed: {0}")]
    Init(String),
    /// The pipeline description does not parse or names a missing element.
    #[error("invalid pipeline: {0}")]
    Pipeline(String),
    /// An element posted an error (not a video, decoder missing, camera gone, negotiation).
    #[error("{source_name}: {message}{}", .debug.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Stream {
        /// The element that failed.
        source_name: String,
        /// GStreamer's message.
        message: String,
        /// GStreamer's debug detail.
        debug: Option<String>,
    },
    /// A sample arrived whose caps we cannot map.
    #[error("unsupported frame format: {0}")]
    Format(String),
    /// No frame arrived for too long.
    #[error("{source_name}: no frame for {seconds} s (source stalled)")]
    Stalled {
        /// The source, as the user gave it.
        source_name: String,
        /// The timeout that ran out.
        seconds: u64,
    },
    /// A network source could not be reached or answered with an error.
    #[error("{url}: {reason}")]
    Network {
        /// The URL as given.
        url: String,
        /// What went wrong: connection refused, not found (HTTP 404), no answer within N s, …
        reason: String,
    },
    /// A file or stream holds no video (an audio-only file, say).
    #[error("{source_name}: no video stream{}", .found.as_deref().map(|f| format!(" (it holds {f})")).unwrap_or_default())]
    NoVideo {
        /// The source, as the user gave it.
        source_name: String,
        /// The kinds of streams it does hold (`audio`, `text`), when known.
        found: Option<String>,
    },
    /// A live source stayed lost past `source.reconnect.give_up_seconds`.
    #[error("{source_name}: lost for {seconds} s, gave up reconnecting (last: {cause})")]
    GaveUp {
        /// The source, as the user gave it.
        source_name: String,
        /// The limit that ran out.
        seconds: f64,
        /// Why the last attempt failed (or why it was lost).
        cause: String,
    },
    /// The interrupt flag was set while the source was still opening (a stop was asked for).
    #[error("{source_name}: stopped while opening")]
    Interrupted {
        /// The source, as the user gave it.
        source_name: String,
    },
}

impl SourceError {
    /// Whether the error may pass by itself for a live source (a camera or server that is down,
    /// a network that fails, a stall), so that trying again later makes sense; a bad SOURCE, a
    /// pipeline that does not parse, a missing decoder or format, or a stop do not pass.
    #[must_use]
    pub(crate) fn may_pass(&self) -> bool {
        matches!(
            self,
            Self::NotFound(_) | Self::Stream { .. } | Self::Stalled { .. } | Self::Network { .. }
        )
    }
}

/// A nominal frame rate, `numer / denom` frames a second (from the negotiated caps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRate {
    /// Frames …
    pub numer: u32,
    /// … per this many seconds.
    pub denom: u32,
}

impl FrameRate {
    /// A rate from caps' numerator and denominator; `None` for 0/1 (variable rate) or nonsense.
    #[must_use]
    pub fn new(numer: i32, denom: i32) -> Option<Self> {
        let (n, d) = (u32::try_from(numer).ok()?, u32::try_from(denom).ok()?);
        (n > 0 && d > 0).then_some(Self { numer: n, denom: d })
    }
    /// Frames a second.
    #[must_use]
    pub fn fps(&self) -> f64 {
        f64::from(self.numer) / f64::from(self.denom)
    }
    /// Duration of one frame in nanoseconds.
    #[must_use]
    pub fn frame_nanos(&self) -> u64 {
        u64::from(self.denom) * 1_000_000_000 / u64::from(self.numer)
    }
}

impl std::fmt::Display for FrameRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} fps", (self.fps() * 1000.0).round() / 1000.0)
    }
}

/// What the source's GStreamer pipeline said about its stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StreamInfo {
    /// Frames come in real time whether or not they are taken (cameras, RTSP, `is-live=true`
    /// test sources): the pipeline drops what it cannot analyse. Files, HTTP files and test
    /// patterns are not live and lose nothing.
    pub live: bool,
    /// Nominal frame rate from the caps; `None` for variable-rate streams (timestamps only).
    pub frame_rate: Option<FrameRate>,
    /// The video decoder element decodebin plugged (`avdec_h264`, `nvh264dec`, …); `None` for
    /// sources that need none (test patterns, raw cameras).
    pub decoder: Option<String>,
    /// Frames arrive in the analyses' CUDA memory (an NVDEC decoder's output, read in place)
    /// rather than in system memory.
    pub frames_on_device: bool,
}

/// How a [`Source`] is opened.
#[derive(Clone, Debug)]
pub(crate) struct SourceOptions {
    /// Pixel format the appsink negotiates.
    pub format: FrameFormat,
    /// Size and length of `test` sources.
    pub test: TestSourceOptions,
    /// Deliver a file or test source at its own frame rate (live sources always are).
    pub realtime: bool,
    /// How long to wait for the pipeline to start, for a frame, and for a network server to
    /// answer, before giving up with an error naming the source.
    pub timeout: Duration,
    /// When set (by another thread), [`Source::open_with`] stops waiting for the pipeline to
    /// start (with [`SourceError::Interrupted`]) and [`Source::next_frame`] ends the stream.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// The analyses' GPU (a CUDA backend): a file or network source then asks its decoder for
    /// NV12 frames in this context's CUDA memory, which the ring converts on the GPU
    /// ([`cuda_memory`]); `None`, or a decoder that cannot, gives frames in system memory.
    pub device: Option<Arc<crate::gpu::GpuContext>>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self {
            format: FrameFormat::Rgb,
            test: TestSourceOptions::default(),
            realtime: false,
            timeout: Duration::from_secs(20),
            interrupt: None,
            device: None,
        }
    }
}
