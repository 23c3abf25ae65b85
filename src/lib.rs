//! morphoscope: real-time mathematical morphology on video with NVIDIA GPUs.
//!
//! # The public API
//!
//! What the `morphoscope` binary, the GStreamer element and a Rust user build on:
//!
//! - **Operations on images** ([`ops`]), each a CPU reference with the same result as
//!   scikit-image or OpenCV, and a CUDA path with bit-identical output:
//!   [`ops::maxtree::area_opening`] and attribute filters, [`ops::cca::label_with_stats`],
//!   [`ops::orientation::orientation`], [`ops::segmentation::felzenszwalb`], on the strided
//!   pixel containers of [`image`], read and written by [`io`].
//! - **Streams**: settings ([`config::Settings::load`]), a backend ([`backend::select`]), one
//!   stream from its source to its finished files ([`lifecycle::run`]), or the frame engine
//!   alone ([`pipeline::Pipeline`]); the analyses ([`analysis::ANALYSES`]) and what each
//!   produces per frame ([`analysis::AnalysedFrame`]).
//! - **A service**: [`service::Service`], the HTTP endpoint of `run --listen`.
//!
//! The other modules are the parts those are made of; they are public for the binary, the
//! element and the tests, and follow the layers of ARCHITECTURE.md (no module uses one above
//! it).
//!
//! ```
//! use morphoscope::image::Image;
//! use morphoscope::ops::maxtree::{Connectivity, area_opening};
//!
//! // A dark image with a bright pixel and a bright 3x3 square.
//! let img = Image::from_fn(16, 16, |x, y| {
//!     let square = (8..11).contains(&x) && (8..11).contains(&y);
//!     if (x, y) == (2, 2) || square { 200u8 } else { 10 }
//! });
//! // scikit-image's area_opening(img, area_threshold=4, connectivity=1).
//! let opened = area_opening(img.view(), 4, Connectivity::Four)?;
//! assert_eq!(opened.get(2, 2), 10); // one pixel: removed
//! assert_eq!(opened.get(9, 9), 200); // nine pixels: kept
//! # Ok::<(), morphoscope::ops::OpError>(())
//! ```
//!
//! Module map: [`source`] (GStreamer → frames), [`pipeline`] (source thread, worker, CUDA ring),
//! [`stats`] (frame counters, timing series), [`analysis`] (the analyses as the pipeline sees
//! them, each described by its [`analysis::Descriptor`], per-frame outputs), [`ops`]
//! (algorithms: CPU reference + CUDA), [`compose`] (a frame and its overlays in one picture),
//! [`track`] (the tracker), [`gpu`] (context, NVRTC registry, timers), [`kernels`] (embedded
//! `.cu` sources), [`lifecycle`] (one stream from its source to its finished files),
//! [`output`] (headless sinks), [`publish`] (results on an MQTT broker), [`service`] (the HTTP
//! endpoint), [`io`] (image files), [`config`] (settings), [`backend`] (CPU or CUDA),
//! [`image`] (strided pixel containers), [`redact`] (secrets masked in every text that leaves),
//! [`stream_label`] (which stream a log line belongs to).

pub mod analysis;
pub mod backend;
pub mod compose;
pub mod config;
pub mod gpu;
pub mod image;
pub mod io;
pub mod kernels;
pub mod lifecycle;
pub mod ops;
pub mod output;
pub mod pipeline;
pub mod publish;
pub mod redact;
pub mod service;
pub mod source;
pub mod stats;
pub mod stream_label;
pub mod track;
#[cfg(feature = "viewer")]
pub mod ui;
