//! morphoscope: real-time mathematical morphology on video with NVIDIA GPUs.
//!
//! Module map: [`source`] (GStreamer → frames), [`pipeline`] (source thread, worker, CUDA ring,
//! counters), [`analysis`] (the analyses as the pipeline sees them, per-frame outputs),
//! [`ops`] (algorithms: CPU reference + CUDA), [`gpu`] (context, NVRTC registry, timers),
//! [`kernels`] (embedded `.cu` sources), [`lifecycle`] (one stream from its source to its
//! finished files), [`output`] (headless sinks), [`publish`] (results on an
//! MQTT broker), [`io`] (image files), [`config`] (settings), [`backend`] (CPU or CUDA),
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
