//! The running GStreamer pipeline behind a [`Source`]: build, start, pull frames, watch the bus.

use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use super::{Frame, FrameFormat, SourceError, SourceSpec, TestSourceOptions};
use crate::image::{DynImage, Image};

/// How long `next_frame` waits for one sample before checking the bus again.
const POLL: Duration = Duration::from_millis(50);

/// A started pipeline delivering frames.
pub struct Source {
    pipeline: gst::Pipeline,
    sink: gst_app::AppSink,
    bus: gst::Bus,
    next_index: u64,
    finished: bool,
    stall_timeout: Duration,
    spec: SourceSpec,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source").field("spec", &self.spec).field("next_index", &self.next_index).finish()
    }
}

/// Initialises GStreamer once (idempotent).
pub fn init() -> Result<(), SourceError> {
    gst::init().map_err(|e| SourceError::Init(e.to_string()))
}

impl Source {
    /// Builds and starts the pipeline for `spec`. Fails early for a bad description or an element
    /// that refuses to start (a missing camera fails here or on the first `next_frame`). With
    /// `realtime`, a file or test source delivers each frame at its timestamp (the appsink syncs
    /// on the pipeline clock), as a player would; otherwise as fast as frames are pulled. Live
    /// sources are real time by nature and never synced (that would only add latency).
    pub fn open(
        spec: &SourceSpec,
        format: FrameFormat,
        test: &TestSourceOptions,
        realtime: bool,
    ) -> Result<Self, SourceError> {
        init()?;
        let desc = spec.pipeline_description(test)?;
        let element = gst::parse::launch(&desc).map_err(|e| SourceError::Pipeline(e.to_string()))?;
        let pipeline = element
            .downcast::<gst::Pipeline>()
            .map_err(|_| SourceError::Pipeline("description did not produce a pipeline".into()))?;
        let sink = pipeline
            .by_name("sink")
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or_else(|| SourceError::Pipeline("no appsink named `sink` in the pipeline".into()))?;
        let caps_format = match format {
            FrameFormat::Rgb => gst_video::VideoFormat::Rgb,
            FrameFormat::Gray8 => gst_video::VideoFormat::Gray8,
            FrameFormat::Gray16 => gst_video::VideoFormat::Gray16Le,
        };
        let caps = gst_video::VideoCapsBuilder::new().format(caps_format).build();
        sink.set_caps(Some(&caps));
        sink.set_sync(realtime && !spec.is_live());
        sink.set_max_buffers(4);
        // Live sources must not stall upstream while we are busy: the worker counts drops.
        sink.set_drop(spec.is_live());
        let bus = pipeline.bus().ok_or_else(|| SourceError::Pipeline("pipeline has no bus".into()))?;
        let mut src = Self {
            pipeline,
            sink,
            bus,
            next_index: 0,
            finished: false,
            stall_timeout: Duration::from_secs(if spec.is_live() { 10 } else { 30 }),
            spec: spec.clone(),
        };
        if src.pipeline.set_state(gst::State::Playing).is_err() {
            // The bus usually says why (e.g. v4l2src: cannot open device).
            let err = src.take_bus_error().unwrap_or_else(|| SourceError::Stream {
                source_name: spec.to_string(),
                message: "pipeline refused to start".into(),
                debug: None,
            });
            src.finished = true;
            return Err(err);
        }
        // Wait for preroll (bounded) so duration and caps are known and early errors surface now.
        let (res, _, _) = src.pipeline.state(gst::ClockTime::from_seconds(10));
        if res.is_err()
            && let Some(err) = src.take_bus_error()
        {
            src.finished = true;
            return Err(err);
        }
        Ok(src)
    }

    /// The spec this source was opened with.
    #[must_use]
    pub fn spec(&self) -> &SourceSpec {
        &self.spec
    }

    /// Estimated number of frames (duration × frame rate) when the stream says, else `None`.
    #[must_use]
    pub fn estimated_frames(&self) -> Option<u64> {
        let dur = self.pipeline.query_duration::<gst::ClockTime>()?;
        let caps = self.sink.static_pad("sink")?.current_caps()?;
        let info = gst_video::VideoInfo::from_caps(&caps).ok()?;
        let fps = info.fps();
        if fps.numer() <= 0 || fps.denom() <= 0 {
            return None;
        }
        let n = dur.nseconds() as u128 * fps.numer() as u128 / (fps.denom() as u128 * 1_000_000_000);
        u64::try_from(n).ok()
    }

    /// The next frame; `Ok(None)` at end of stream. After an error the source is finished.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        if self.finished {
            return Ok(None);
        }
        let started = Instant::now();
        loop {
            if let Some(err) = self.take_bus_error() {
                self.finished = true;
                return Err(err);
            }
            if let Some(sample) = self.sink.try_pull_sample(gst::ClockTime::from_mseconds(POLL.as_millis() as u64)) {
                let frame = self.frame_from_sample(&sample)?;
                return Ok(Some(frame));
            }
            if self.sink.is_eos() {
                self.finished = true;
                return Ok(None);
            }
            if started.elapsed() > self.stall_timeout {
                self.finished = true;
                return Err(SourceError::Stalled(self.stall_timeout.as_secs()));
            }
        }
    }

    /// Pops bus messages; returns the first error (warnings are logged, EOS left to appsink).
    fn take_bus_error(&self) -> Option<SourceError> {
        while let Some(msg) = self.bus.pop_filtered(&[gst::MessageType::Error, gst::MessageType::Warning]) {
            match msg.view() {
                gst::MessageView::Error(e) => {
                    return Some(SourceError::Stream {
                        source_name: e.src().map(|s| s.name().to_string()).unwrap_or_else(|| "pipeline".into()),
                        message: e.error().to_string().replace('\n', " "),
                        debug: None,
                    });
                }
                gst::MessageView::Warning(w) => log::warn!("source: {}", w.error()),
                _ => {}
            }
        }
        None
    }

    fn frame_from_sample(&mut self, sample: &gst::Sample) -> Result<Frame, SourceError> {
        let caps = sample.caps().ok_or_else(|| SourceError::Format("sample without caps".into()))?;
        let info = gst_video::VideoInfo::from_caps(caps).map_err(|e| SourceError::Format(e.to_string()))?;
        let buffer = sample.buffer().ok_or_else(|| SourceError::Format("sample without buffer".into()))?;
        let pts_nanos = buffer.pts().map(|t| t.nseconds());
        // Copy: the GStreamer buffer goes back to its pool; the frame outlives it in the ring.
        let vframe = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info)
            .map_err(|e| SourceError::Format(e.to_string()))?;
        let (w, h) = (vframe.width() as usize, vframe.height() as usize);
        let stride = usize::try_from(vframe.plane_stride()[0]).map_err(|_| SourceError::Format("negative stride".into()))?;
        let data = vframe.plane_data(0).map_err(|e| SourceError::Format(e.to_string()))?;
        let bad = |e: crate::image::ImageError| SourceError::Format(e.to_string());
        let image = match info.format() {
            gst_video::VideoFormat::Rgb => {
                let row_px = stride / 3;
                if stride % 3 == 0 {
                    let px: Vec<[u8; 3]> = data.as_chunks::<3>().0.to_vec();
                    DynImage::Rgb8(Image::from_strided(w, h, row_px, px).map_err(bad)?)
                } else {
                    // Stride not a multiple of 3: repack row by row.
                    let mut px = Vec::with_capacity(w * h);
                    for y in 0..h {
                        let row = data.get(y * stride..y * stride + 3 * w).ok_or_else(|| SourceError::Format("short frame".into()))?;
                        px.extend_from_slice(row.as_chunks::<3>().0);
                    }
                    DynImage::Rgb8(Image::from_vec(w, h, px).map_err(bad)?)
                }
            }
            gst_video::VideoFormat::Gray8 => DynImage::Gray8(Image::from_strided(w, h, stride, data.to_vec()).map_err(bad)?),
            gst_video::VideoFormat::Gray16Le => {
                let px: Vec<u16> = data.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
                DynImage::Gray16(Image::from_strided(w, h, stride / 2, px).map_err(bad)?)
            }
            other => return Err(SourceError::Format(format!("{other:?}"))),
        };
        let index = self.next_index;
        self.next_index += 1;
        Ok(Frame { index, pts_nanos, image })
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pulls every frame of an 8-frame, 20 fps test source; returns (frames, seconds taken).
    fn pull_all(realtime: bool) -> (u64, f64) {
        let opts = TestSourceOptions { width: 64, height: 48, frames: 8, fps: 20 };
        let t = Instant::now();
        let mut src = Source::open(&SourceSpec::Test("ball".into()), FrameFormat::Gray8, &opts, realtime).unwrap();
        let mut n = 0;
        while let Some(f) = src.next_frame().unwrap() {
            assert_eq!(f.index, n);
            n += 1;
        }
        (n, t.elapsed().as_secs_f64())
    }

    #[test]
    fn realtime_sources_deliver_frames_at_their_timestamps() {
        // The last of 8 frames at 20 fps is due 0.35 s after the first.
        let (n, secs) = pull_all(true);
        assert_eq!(n, 8);
        assert!(secs >= 0.3, "8 frames at 20 fps arrived in {secs:.3} s");
        let (n, _) = pull_all(false);
        assert_eq!(n, 8);
    }
}
