//! The running GStreamer pipeline behind a [`Source`]: build, start, ask GStreamer what the
//! stream is (live or not, frame rate, decoder), pull frames, watch the bus.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use super::convert::{ToRgb, converter_threads};
use super::cuda_memory::{self, SharedContext};
use super::errors::{self, BusError};
use super::{
    Frame, FrameFormat, FrameRate, Pixels, SourceError, SourceOptions, SourceSpec, StreamInfo,
    TestSourceOptions, decoder,
};
use crate::image::{DynImage, Image};
use crate::ops::nv12::Nv12Conversion;

/// How long `next_frame` waits for one sample before checking the bus again.
const POLL: Duration = Duration::from_millis(50);

/// What GStreamer's callbacks report while the pipeline builds itself (decodebin plugs
/// elements and exposes pads from its streaming threads).
#[derive(Debug, Default)]
struct Discovered {
    /// The video decoder plugged.
    decoder: Option<String>,
    /// Kinds of stream decodebin exposed (`video`, `audio`, `text`, …).
    streams: Vec<String>,
}

/// A started pipeline delivering frames.
pub struct Source {
    pipeline: gst::Pipeline,
    sink: gst_app::AppSink,
    bus: gst::Bus,
    next_index: u64,
    finished: bool,
    opened: Instant,
    timeout: Duration,
    interrupt: Option<Arc<AtomicBool>>,
    spec: SourceSpec,
    info: StreamInfo,
    discovered: Arc<Mutex<Discovered>>,
    /// The analyses' CUDA context, set on the pipeline for its decoders (see [`cuda_memory`]).
    cuda: Option<SharedContext>,
    /// GStreamer's converter for frames in CUDA memory that cannot be read in place, by the
    /// frames' format.
    to_rgb: Option<(gst_video::VideoInfo, ToRgb)>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("spec", &self.spec)
            .field("next_index", &self.next_index)
            .field("info", &self.info)
            .finish()
    }
}

/// Initialises GStreamer once (idempotent) and prefers NVDEC decoders where they register.
pub fn init() -> Result<(), SourceError> {
    gst::init().map_err(|e| SourceError::Init(e.to_string()))?;
    decoder::prefer_nvdec();
    Ok(())
}

impl Source {
    /// `Source::open_with` with the default timeout and no interrupt flag.
    pub fn open(
        spec: &SourceSpec,
        format: FrameFormat,
        test: &TestSourceOptions,
        realtime: bool,
    ) -> Result<Self, SourceError> {
        Self::open_with(
            spec,
            &SourceOptions {
                format,
                test: test.clone(),
                realtime,
                ..SourceOptions::default()
            },
        )
    }

    /// Builds and starts the pipeline for `spec`. Fails early for a bad description or an element
    /// that refuses to start (a missing camera fails here or on the first `next_frame`). With
    /// `realtime`, a file or test source delivers each frame at its timestamp (the appsink syncs
    /// on the pipeline clock), as a player would; otherwise as fast as frames are pulled. Live
    /// sources are real time by nature and never synced (that would only add latency); they are
    /// recognised by what their pipeline answers (no preroll in PAUSED, or a source element
    /// whose `is-live` is set).
    pub(crate) fn open_with(spec: &SourceSpec, opts: &SourceOptions) -> Result<Self, SourceError> {
        init()?;
        let desc = spec.pipeline_description(&opts.test)?;
        let element = gst::parse::launch(&desc)
            .map_err(|e| SourceError::Pipeline(crate::redact::text(&e.to_string())))?;
        let pipeline = element
            .downcast::<gst::Pipeline>()
            .map_err(|_| SourceError::Pipeline("description did not produce a pipeline".into()))?;
        let sink = pipeline
            .by_name("sink")
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or_else(|| {
                SourceError::Pipeline("no appsink named `sink` in the pipeline".into())
            })?;
        let caps_format = match opts.format {
            FrameFormat::Rgb => gst_video::VideoFormat::Rgb,
            FrameFormat::Gray8 => gst_video::VideoFormat::Gray8,
            FrameFormat::Gray16 => gst_video::VideoFormat::Gray16Le,
        };
        let mut caps = gst_video::VideoCapsBuilder::new()
            .format(caps_format)
            .build();
        let cuda = device_context(spec, opts, &pipeline);
        if cuda.is_some() {
            // NV12 in CUDA memory first: `videoconvert` passes it through untouched, and a
            // decoder that cannot give it falls back to the system-memory caps.
            let mut both = gst_video::VideoCapsBuilder::new()
                .features([cuda_memory::CAPS_FEATURE])
                .format(gst_video::VideoFormat::Nv12)
                .build();
            both.merge(caps);
            caps = both;
        }
        sink.set_caps(Some(&caps));
        sink.set_max_buffers(4);
        // Until liveness is known: never sync (a live source's first frames must not wait).
        sink.set_sync(false);
        let discovered = Arc::new(Mutex::new(Discovered::default()));
        watch_decodebins(&pipeline, &discovered, opts.timeout);
        let bus = pipeline
            .bus()
            .ok_or_else(|| SourceError::Pipeline("pipeline has no bus".into()))?;
        let mut src = Self {
            pipeline,
            sink,
            bus,
            next_index: 0,
            finished: false,
            opened: Instant::now(),
            timeout: opts.timeout,
            interrupt: opts.interrupt.clone(),
            spec: spec.clone(),
            info: StreamInfo::default(),
            discovered,
            cuda,
            to_rgb: None,
        };
        // A live pipeline does not preroll: PAUSED answers NO_PREROLL at once. Others preroll
        // (bounded), so duration and caps are known and early errors surface now.
        let paused = src.pipeline.set_state(gst::State::Paused);
        let mut no_preroll = matches!(paused, Ok(gst::StateChangeSuccess::NoPreroll));
        if paused.is_ok() && !no_preroll {
            let res = src.wait_for_preroll()?;
            if res.is_err()
                && let Some(err) = src.take_bus_error()
            {
                src.finished = true;
                return Err(err);
            }
            no_preroll = matches!(res, Ok(gst::StateChangeSuccess::NoPreroll));
        }
        src.info.live = no_preroll || sources_say_live(&src.pipeline);
        // Live sources must not stall upstream while we are busy: the pipeline counts drops.
        src.sink.set_drop(src.info.live);
        src.sink.set_sync(opts.realtime && !src.info.live);
        if paused.is_err() || src.pipeline.set_state(gst::State::Playing).is_err() {
            // The bus usually says why (e.g. v4l2src: cannot open device).
            let err = src.take_bus_error().unwrap_or_else(|| SourceError::Stream {
                source_name: spec.to_string(),
                message: "pipeline refused to start".into(),
                debug: None,
            });
            src.finished = true;
            return Err(err);
        }
        src.refresh_info(None);
        Ok(src)
    }

    /// Waits (up to the timeout) for the pipeline to preroll, in short slices so that the
    /// interrupt flag is seen at once: a server that accepts and never answers must not hold a
    /// stop for the whole timeout.
    fn wait_for_preroll(
        &mut self,
    ) -> Result<Result<gst::StateChangeSuccess, gst::StateChangeError>, SourceError> {
        loop {
            if self.interrupted() {
                self.finished = true;
                return Err(SourceError::Interrupted {
                    source_name: self.spec.to_string(),
                });
            }
            let left = self.timeout.saturating_sub(self.opened.elapsed());
            let slice = left.min(POLL);
            let (res, _, _) = self
                .pipeline
                .state(gst::ClockTime::from_nseconds(slice.as_nanos() as u64));
            if !matches!(res, Ok(gst::StateChangeSuccess::Async)) || left <= POLL {
                return Ok(res);
            }
        }
    }

    /// Whether the interrupt flag is set.
    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// The spec this source was opened with.
    #[must_use]
    pub fn spec(&self) -> &SourceSpec {
        &self.spec
    }

    /// What GStreamer said about the stream so far (complete once the first frame arrived).
    #[must_use]
    pub(crate) fn stream_info(&self) -> StreamInfo {
        self.info.clone()
    }

    /// Estimated number of frames (duration × frame rate) when the stream says, else `None`.
    #[must_use]
    pub(crate) fn estimated_frames(&self) -> Option<u64> {
        let dur = self.pipeline.query_duration::<gst::ClockTime>()?;
        let caps = self.sink.static_pad("sink")?.current_caps()?;
        let info = gst_video::VideoInfo::from_caps(&caps).ok()?;
        let fps = info.fps();
        if fps.numer() <= 0 || fps.denom() <= 0 {
            return None;
        }
        let n =
            dur.nseconds() as u128 * fps.numer() as u128 / (fps.denom() as u128 * 1_000_000_000);
        u64::try_from(n).ok()
    }

    /// The next frame; `Ok(None)` at end of stream or once the interrupt flag is set. After an
    /// error the source is finished.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        if self.finished {
            return Ok(None);
        }
        let started = Instant::now();
        loop {
            if self.interrupted() {
                self.finished = true;
                return Ok(None);
            }
            if let Some(err) = self.take_bus_error() {
                self.finished = true;
                return Err(err);
            }
            if let Some(sample) = self
                .sink
                .try_pull_sample(gst::ClockTime::from_mseconds(POLL.as_millis() as u64))
            {
                let frame = self.frame_from_sample(&sample)?;
                return Ok(Some(frame));
            }
            if self.sink.is_eos() {
                self.finished = true;
                return Ok(None);
            }
            if started.elapsed() > self.timeout {
                self.finished = true;
                return Err(SourceError::Stalled {
                    source_name: self.spec.to_string(),
                    seconds: self.timeout.as_secs(),
                });
            }
        }
    }

    /// Updates the stream info from the caps of `sample` (or the appsink's pad) and what the
    /// decodebins reported; logs it in one line with the first frame.
    fn refresh_info(&mut self, caps: Option<&gst::CapsRef>) {
        let pad_caps = self.sink.static_pad("sink").and_then(|p| p.current_caps());
        let caps = caps.or(pad_caps.as_deref());
        if let Some(info) = caps.and_then(|c| gst_video::VideoInfo::from_caps(c).ok()) {
            self.info.frame_rate = FrameRate::new(info.fps().numer(), info.fps().denom());
        }
        if let Ok(d) = self.discovered.lock() {
            self.info.decoder = d.decoder.clone();
        }
    }

    /// Drains the bus: logs warnings, returns the most specific error (explained) if any.
    fn take_bus_error(&self) -> Option<SourceError> {
        let mut errors = Vec::new();
        while let Some(msg) = self
            .bus
            .pop_filtered(&[gst::MessageType::Error, gst::MessageType::Warning])
        {
            match msg.view() {
                gst::MessageView::Error(e) => errors.push(BusError::from_message(e)),
                // decodebin warns before the error that says it better (no video stream).
                gst::MessageView::Warning(w)
                    if w.error().to_string().contains("Delayed linking") =>
                {
                    log::debug!("source: {}", w.error());
                }
                gst::MessageView::Warning(w) => log::warn!("source: {}", w.error()),
                _ => {}
            }
        }
        let best = errors::pick(errors)?;
        let streams = self
            .discovered
            .lock()
            .map(|d| d.streams.clone())
            .unwrap_or_default();
        Some(errors::describe(
            &self.spec,
            best,
            &streams,
            self.opened.elapsed(),
            self.timeout,
        ))
    }

    fn frame_from_sample(&mut self, sample: &gst::Sample) -> Result<Frame, SourceError> {
        let caps = sample
            .caps()
            .ok_or_else(|| SourceError::Format("sample without caps".into()))?;
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|e| SourceError::Format(e.to_string()))?;
        let buffer = sample
            .buffer()
            .ok_or_else(|| SourceError::Format("sample without buffer".into()))?;
        let pts_nanos = buffer.pts().map(|t| t.nseconds());
        let (w, h) = (info.width() as usize, info.height() as usize);
        let image = if cuda_memory::is_cuda_caps(caps) {
            self.cuda_frame(sample, &info)?
        } else {
            // Copy: the GStreamer buffer goes back to its pool; the frame outlives it in the ring.
            let vframe = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info)
                .map_err(|e| SourceError::Format(e.to_string()))?;
            let stride = usize::try_from(vframe.plane_stride()[0])
                .map_err(|_| SourceError::Format("negative stride".into()))?;
            let data = vframe
                .plane_data(0)
                .map_err(|e| SourceError::Format(e.to_string()))?;
            Pixels::Host(image_from_plane(info.format(), w, h, stride, data)?)
        };
        let index = self.next_index;
        self.next_index += 1;
        if index == 0 {
            self.info.frames_on_device = matches!(image, Pixels::Device(_));
            self.refresh_info(Some(caps));
            let rate = self
                .info
                .frame_rate
                .map_or_else(|| "variable frame rate".to_owned(), |r| r.to_string());
            let decoder = self.info.decoder.as_deref().map_or_else(String::new, |d| {
                format!(", decoder {d} ({})", decoder::kind(d))
            });
            let pacing = if self.info.live {
                "live: frames it cannot analyse in time are dropped and counted"
            } else {
                "not live: every frame is analysed"
            };
            let memory = if self.info.frames_on_device {
                ", frames read in place in CUDA memory"
            } else {
                ""
            };
            log::info!(
                "source: {} — {w}x{h}, {rate}{decoder}{memory}; {pacing}",
                self.spec
            );
        }
        Ok(Frame {
            index,
            pts_nanos,
            image,
            after_gap: false,
        })
    }

    /// The pixels of a `sample` of NV12 in CUDA memory: read in place when the memory is the
    /// analyses' (the ring converts it on the GPU), else mapped to the host and converted by
    /// GStreamer's converter, as `videoconvert` would have.
    fn cuda_frame(
        &mut self,
        sample: &gst::Sample,
        info: &gst_video::VideoInfo,
    ) -> Result<Pixels, SourceError> {
        let format = |e: String| SourceError::Format(e);
        let buffer = sample
            .buffer_owned()
            .ok_or_else(|| format("sample without buffer".into()))?;
        if let Some(shared) = &self.cuda
            && buffer.n_memory() == 1
            && shared.owns(buffer.peek_memory(0))
            && let Ok(conversion) = Nv12Conversion::from_video_info(info, converter_threads())
        {
            return cuda_memory::device_frame(buffer, info, conversion)
                .map(Pixels::Device)
                .map_err(|e| format(e.to_string()));
        }
        if self.to_rgb.as_ref().is_none_or(|(i, _)| i != info) {
            let to_rgb = ToRgb::new(info).map_err(|e| format(e.to_string()))?;
            self.to_rgb = Some((info.clone(), to_rgb));
        }
        let Some((_, to_rgb)) = &self.to_rgb else {
            return Err(format("no converter".into()));
        };
        let vframe = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer.as_ref(), info)
            .map_err(|e| format(e.to_string()))?;
        Ok(Pixels::Host(to_rgb.convert(&vframe).map_err(format)?))
    }
}

/// The analyses' CUDA context, set on `pipeline` so that its decoders allocate their frames in
/// it: for file and network sources when `opts` names a GPU and RGB frames. `None` (frames in
/// system memory) otherwise, or where GStreamer's CUDA library is missing.
fn device_context(
    spec: &SourceSpec,
    opts: &SourceOptions,
    pipeline: &gst::Pipeline,
) -> Option<SharedContext> {
    let gpu = opts.device.as_ref()?;
    if opts.format != FrameFormat::Rgb || !matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_))
    {
        return None;
    }
    SharedContext::new(gpu)
        .and_then(|shared| {
            // A bin hands its contexts to the elements added later (decodebin's decoder).
            pipeline.set_context(&shared.gst_context()?);
            Ok(shared)
        })
        .inspect_err(|e| log::debug!("source: frames in system memory ({e})"))
        .ok()
}

/// True when a source element of the pipeline has `is-live` set (a user pipeline's
/// `videotestsrc is-live=true`; most live elements also answer NO_PREROLL).
fn sources_say_live(pipeline: &gst::Pipeline) -> bool {
    pipeline.iterate_recurse().into_iter().flatten().any(|e| {
        e.sink_pads().is_empty()
            && e.find_property("is-live")
                .is_some_and(|p| p.value_type() == bool::static_type())
            && e.property::<bool>("is-live")
    })
}

/// Hooks every `uridecodebin` of the pipeline: network sources get `timeout` (souphttpsrc and
/// the like), and the decoder plugged and the kinds of stream exposed are recorded.
fn watch_decodebins(
    pipeline: &gst::Pipeline,
    discovered: &Arc<Mutex<Discovered>>,
    timeout: Duration,
) {
    let d = discovered.clone();
    pipeline.connect_deep_element_added(move |_, _, element| {
        if decoder::is_video_decoder(element)
            && let Ok(mut g) = d.lock()
            && g.decoder.is_none()
        {
            g.decoder = element.factory().map(|f| f.name().to_string());
        }
    });
    let decodebins = pipeline
        .iterate_recurse()
        .into_iter()
        .flatten()
        .filter(|e| {
            e.factory()
                .is_some_and(|f| matches!(f.name().as_str(), "uridecodebin" | "uridecodebin3"))
        });
    for bin in decodebins {
        let seconds = u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX);
        bin.connect("source-setup", false, move |args| {
            if let Some(src) = args.get(1).and_then(|v| v.get::<gst::Element>().ok())
                && src
                    .find_property("timeout")
                    .is_some_and(|p| p.value_type() == u32::static_type())
            {
                src.set_property("timeout", seconds);
            }
            None
        });
        let d = discovered.clone();
        bin.connect_pad_added(move |_, pad| {
            let caps = pad.current_caps().unwrap_or_else(|| pad.query_caps(None));
            let kind = caps
                .structure(0)
                .map(|s| s.name().split('/').next().unwrap_or("").to_owned());
            if let (Some(kind), Ok(mut g)) = (kind, d.lock())
                && !kind.is_empty()
                && !g.streams.contains(&kind)
            {
                g.streams.push(kind);
            }
        });
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// The pixels of one mapped video plane (RGB, GRAY8 or GRAY16_LE; `stride` in bytes) as an
/// image. Copy: the GStreamer buffer goes back to its pool; the image outlives it.
pub fn image_from_plane(
    format: gst_video::VideoFormat,
    w: usize,
    h: usize,
    stride: usize,
    data: &[u8],
) -> Result<DynImage, SourceError> {
    let bad = |e: crate::image::ImageError| SourceError::Format(e.to_string());
    let image = match format {
        gst_video::VideoFormat::Rgb => {
            let row_px = stride / 3;
            if stride.is_multiple_of(3) {
                let px: Vec<[u8; 3]> = data.as_chunks::<3>().0.to_vec();
                DynImage::Rgb8(Image::from_strided(w, h, row_px, px).map_err(bad)?)
            } else {
                // Stride not a multiple of 3: repack row by row.
                let mut px = Vec::with_capacity(w * h);
                for y in 0..h {
                    let row = data
                        .get(y * stride..y * stride + 3 * w)
                        .ok_or_else(|| SourceError::Format("short frame".into()))?;
                    px.extend_from_slice(row.as_chunks::<3>().0);
                }
                DynImage::Rgb8(Image::from_vec(w, h, px).map_err(bad)?)
            }
        }
        gst_video::VideoFormat::Gray8 => {
            DynImage::Gray8(Image::from_strided(w, h, stride, data.to_vec()).map_err(bad)?)
        }
        gst_video::VideoFormat::Gray16Le => {
            let px: Vec<u16> = data
                .as_chunks::<2>()
                .0
                .iter()
                .map(|c| u16::from_le_bytes(*c))
                .collect();
            DynImage::Gray16(Image::from_strided(w, h, stride / 2, px).map_err(bad)?)
        }
        other => return Err(SourceError::Format(format!("{other:?}"))),
    };
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pulls every frame of an 8-frame, 20 fps test source; returns (frames, seconds taken).
    fn pull_all(realtime: bool) -> (u64, f64) {
        let opts = TestSourceOptions {
            width: 64,
            height: 48,
            frames: 8,
            fps: 20,
        };
        let t = Instant::now();
        let mut src = Source::open(
            &SourceSpec::Test("ball".into()),
            FrameFormat::Gray8,
            &opts,
            realtime,
        )
        .unwrap();
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

    #[test]
    fn liveness_and_frame_rate_come_from_the_pipeline() {
        let opts = SourceOptions {
            format: FrameFormat::Gray8,
            ..SourceOptions::default()
        };
        let live = "videotestsrc is-live=true num-buffers=3 ! video/x-raw,width=32,height=24,framerate=15/1 ! videoconvert ! appsink name=sink";
        let file_like = "videotestsrc num-buffers=3 ! video/x-raw,width=32,height=24,framerate=25/2 ! videoconvert ! appsink name=sink";
        for (desc, want_live, want_rate) in [(live, true, (15, 1)), (file_like, false, (25, 2))] {
            let mut src = Source::open_with(&SourceSpec::Pipeline(desc.into()), &opts).unwrap();
            assert!(src.next_frame().unwrap().is_some());
            let info = src.stream_info();
            assert_eq!(info.live, want_live, "{desc}");
            assert_eq!(
                info.frame_rate,
                FrameRate::new(want_rate.0, want_rate.1),
                "{desc}"
            );
            assert_eq!(info.decoder, None, "a test pattern needs no decoder");
        }
    }

    #[test]
    fn an_interrupt_ends_a_source_that_never_ends() {
        let flag = Arc::new(AtomicBool::new(false));
        let opts = SourceOptions {
            format: FrameFormat::Gray8,
            interrupt: Some(flag.clone()),
            ..SourceOptions::default()
        };
        let endless = TestSourceOptions {
            width: 16,
            height: 16,
            frames: 0,
            fps: 30,
        };
        let mut src = Source::open_with(
            &SourceSpec::Test("ball".into()),
            &SourceOptions {
                test: endless,
                ..opts
            },
        )
        .unwrap();
        assert!(src.next_frame().unwrap().is_some());
        flag.store(true, Ordering::Relaxed);
        assert!(src.next_frame().unwrap().is_none());
    }

    #[test]
    fn a_stalled_source_names_itself() {
        let opts = SourceOptions {
            format: FrameFormat::Gray8,
            timeout: Duration::from_millis(300),
            ..SourceOptions::default()
        };
        // A live source that produces nothing: its appsink never gets a sample.
        let desc = "videotestsrc is-live=true ! valve drop=true ! video/x-raw,width=16,height=16 ! videoconvert ! appsink name=sink";
        let mut src = Source::open_with(&SourceSpec::Pipeline(desc.into()), &opts).unwrap();
        let e = src.next_frame().unwrap_err().to_string();
        assert!(
            e.contains("valve drop=true") && e.contains("stalled"),
            "{e}"
        );
    }
}
