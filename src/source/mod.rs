//! Video sources: a SOURCE string becomes a GStreamer pipeline ending in an appsink; frames come
//! out as [`Frame`]s (RGB, GRAY8 or GRAY16 images with their row stride honoured, frame number,
//! timestamp). Errors posted on the bus become [`SourceError`]s with GStreamer's message.
//!
//! How it avoids the classic hangs: `appsink.pull_sample()` blocks forever after a pipeline error
//! (no EOS arrives), so [`Source::next_frame`] polls `try_pull_sample` with a short timeout and
//! checks the bus between polls; end of stream is `Ok(None)`; an error is returned once, after
//! which the source is finished. Dropping a `Source` sets the pipeline to NULL.

mod reader;
pub mod spec;

use std::path::PathBuf;

pub use reader::{Source, init as init_gstreamer};
pub use spec::{SourceSpec, TestSourceOptions};

use crate::image::DynImage;

/// One decoded frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// 0-based index in the order the source produced frames.
    pub index: u64,
    /// Presentation timestamp in nanoseconds, when the stream has one.
    pub pts_nanos: Option<u64>,
    /// The pixels (RGB8, Gray8 or Gray16; rows keep GStreamer's stride).
    pub image: DynImage,
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
    #[error("no frame for {0} s (source stalled)")]
    Stalled(u64),
}
