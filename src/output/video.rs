//! `overlay.mkv`: composed frames pushed into a GStreamer encoding pipeline,
//! `appsrc ! [videoconvert] ! I420 ! H.264 encoder ! h264parse ! matroskamux ! filesink`.
//!
//! - **Container.** Matroska writes each frame as a block the moment it is encoded, so a file cut
//!   anywhere (a hard kill, a full disk) still plays up to its last whole frame; `finish` only
//!   adds the seeking index. (A fragmented MP4 loses its last unfinished fragment, up to a
//!   second.) The file sink writes unbuffered for the same reason.
//! - **Encoder** ([`super::encoder`]): NVENC, x264 or OpenH264. The stream is I420 in the
//!   constrained-baseline (software) or main (NVENC) profile: any H.264 decoder reads it.
//! - **Input.** RGB frames ([`VideoWriter::push_rgb`], converted by `videoconvert`) or planar
//!   I420 straight into the encoder ([`VideoWriter::push_i420`], no conversion); the layout is
//!   fixed at creation.
//! - **Time.** Each frame keeps its source timestamp (relative to the first), so the video plays
//!   at the source's rate, variable-rate sources and dropped frames included; the nominal rate,
//!   when the source has one, goes into the caps.
//!
//! H.264 with 4:2:0 needs even sizes: an odd last column/row of an RGB frame is cropped.

use std::path::{Path, PathBuf};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::OutputError;
use super::encoder;
use crate::image::Image;
use crate::source::FrameRate;

/// The pixel layout a writer takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputLayout {
    /// Packed RGB, 3 bytes a pixel ([`VideoWriter::push_rgb`]).
    Rgb,
    /// Planar I420 ([`VideoWriter::push_i420`]).
    I420,
}

/// What a writer encodes.
#[derive(Clone, Debug)]
pub struct VideoSpec {
    /// Frame width (RGB: an odd last column is cropped; I420: even).
    pub width: usize,
    /// Frame height (RGB: an odd last row is cropped; I420: even).
    pub height: usize,
    /// Layout of the frames pushed.
    pub layout: InputLayout,
    /// The source's nominal rate (`None`: variable, timestamps only).
    pub frame_rate: Option<FrameRate>,
    /// Bitrate, kbit/s.
    pub kbps: u32,
    /// Encoder element (from [`encoder::choose_encoder`]).
    pub encoder: &'static str,
}

/// Frame duration assumed when a source gives neither a rate nor usable timestamps (25 fps).
const FALLBACK_FRAME_NANOS: u64 = 40_000_000;

/// Seconds between key frames: a cut file loses at most the frames after its last whole frame,
/// but seeking needs key frames.
const KEY_FRAME_SECONDS: u64 = 2;

/// An open encoder.
pub struct VideoWriter {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    path: PathBuf,
    spec: VideoSpec,
    encoded: (usize, usize),
    frames: u64,
    clock: Timestamps,
    failed: Option<String>,
}

impl VideoWriter {
    /// Starts an encoder writing `path`.
    pub fn create(path: &Path, spec: VideoSpec) -> Result<Self, OutputError> {
        crate::source::init_gstreamer().map_err(|e| OutputError::Encoder(e.to_string()))?;
        let fail = |m: String| OutputError::Video {
            path: path.to_owned(),
            message: m,
        };
        let (ew, eh) = match spec.layout {
            InputLayout::Rgb => (spec.width & !1, spec.height & !1),
            InputLayout::I420 if spec.width.is_multiple_of(2) && spec.height.is_multiple_of(2) => {
                (spec.width, spec.height)
            }
            InputLayout::I420 => {
                return Err(fail(format!(
                    "I420 frames must have even sizes, not {}x{}",
                    spec.width, spec.height
                )));
            }
        };
        if ew == 0 || eh == 0 {
            return Err(fail(format!(
                "frame {}x{} too small to encode",
                spec.width, spec.height
            )));
        }
        let convert = match spec.layout {
            InputLayout::Rgb => "videoconvert ! video/x-raw,format=I420 ! ",
            InputLayout::I420 => "",
        };
        let (to_encoder, profile) = match spec.encoder {
            // Jetson's encoder reads NVMM memory: nvvidconv copies the frame there.
            "nvv4l2h264enc" => (
                "nvvidconv ! video/x-raw(memory:NVMM),format=I420 ! ",
                String::new(),
            ),
            "nvh264enc" | "nvcudah264enc" => ("", "video/x-h264,profile=main ! ".to_owned()),
            _ => (
                "",
                "video/x-h264,profile=constrained-baseline ! ".to_owned(),
            ),
        };
        let desc = format!(
            "appsrc name=src format=time is-live=false block=true ! {convert}{to_encoder}{} name=enc ! {profile}h264parse ! matroskamux ! filesink name=file buffer-mode=unbuffered",
            spec.encoder
        );
        let pipeline = gst::parse::launch(&desc)
            .map_err(|e| fail(e.to_string()))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| fail("not a pipeline".into()))?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or_else(|| fail("appsrc missing".into()))?;
        let file = pipeline
            .by_name("file")
            .ok_or_else(|| fail("filesink missing".into()))?;
        file.set_property("location", path.to_string_lossy().as_ref());
        let key_frames = spec
            .frame_rate
            .map_or(60, |r| (r.fps().round() as u64 * KEY_FRAME_SECONDS).max(1));
        if let Some(enc) = pipeline.by_name("enc") {
            for (name, value) in encoder::properties(spec.encoder, spec.kbps, key_frames) {
                encoder::set_if_present(&enc, name, &value);
            }
        }
        let format = match spec.layout {
            InputLayout::Rgb => gst_video::VideoFormat::Rgb,
            InputLayout::I420 => gst_video::VideoFormat::I420,
        };
        let rate = spec.frame_rate.map_or(gst::Fraction::new(0, 1), |r| {
            gst::Fraction::new(
                i32::try_from(r.numer).unwrap_or(0),
                i32::try_from(r.denom).unwrap_or(1),
            )
        });
        let info = gst_video::VideoInfo::builder(format, ew as u32, eh as u32)
            .fps(rate)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        src.set_caps(Some(&info.to_caps().map_err(|e| fail(e.to_string()))?));
        src.set_max_bytes((info.size() * 4) as u64);
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| fail(e.to_string()))?;
        let clock = Timestamps::new(
            spec.frame_rate
                .map_or(FALLBACK_FRAME_NANOS, |r| r.frame_nanos()),
        );
        Ok(Self {
            pipeline,
            src,
            path: path.to_owned(),
            spec,
            encoded: (ew, eh),
            frames: 0,
            clock,
            failed: None,
        })
    }

    /// Frames encoded so far.
    #[must_use]
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Encodes one RGB frame of the size given at creation, shown at `pts_nanos` (the source's
    /// timestamp; `None`: one nominal frame after the previous).
    pub fn push_rgb(
        &mut self,
        img: &Image<[u8; 3]>,
        pts_nanos: Option<u64>,
    ) -> Result<(), OutputError> {
        self.check_input(InputLayout::Rgb, img.width(), img.height())?;
        // Copy: packs the (cropped) RGB rows into a GStreamer buffer (rows padded to 4 bytes).
        let (ew, eh) = self.encoded;
        let row_bytes = (3 * ew).div_ceil(4) * 4;
        let mut data = vec![0u8; row_bytes * eh];
        for y in 0..eh {
            data[y * row_bytes..y * row_bytes + 3 * ew]
                .copy_from_slice(img.row(y)[..ew].as_flattened());
        }
        self.push(data, pts_nanos)
    }

    /// Encodes one planar I420 frame, pushed straight into the encoder (no `videoconvert`).
    ///
    /// `data` holds, tightly packed and in this order: the Y plane, `width * height` bytes (row
    /// after row, `width` bytes each); the U plane, `(width/2) * (height/2)` bytes; the V plane,
    /// the same. `width` and `height` are even and those given at creation (layout
    /// [`InputLayout::I420`]); `data.len() == width * height * 3 / 2`. `pts_nanos` is the
    /// source's timestamp of the frame (`None`: one nominal frame after the previous).
    pub fn push_i420(
        &mut self,
        data: &[u8],
        width: usize,
        height: usize,
        pts_nanos: Option<u64>,
    ) -> Result<(), OutputError> {
        self.check_input(InputLayout::I420, width, height)?;
        let want = width * height * 3 / 2;
        if data.len() != want {
            return Err(self.error(format!(
                "an I420 frame of {width}x{height} has {want} bytes, not {}",
                data.len()
            )));
        }
        // Copy: into GStreamer's I420 layout (its rows are padded to 4 bytes; for widths that are
        // multiples of 8 the copy is one block).
        let info = gst_video::VideoInfo::builder(
            gst_video::VideoFormat::I420,
            width as u32,
            height as u32,
        )
        .build()
        .map_err(|e| self.error(e.to_string()))?;
        let (chroma_w, chroma_h) = (width / 2, height / 2);
        let planes = [
            (0, width, height),
            (width * height, chroma_w, chroma_h),
            (width * height + chroma_w * chroma_h, chroma_w, chroma_h),
        ];
        let mut out = vec![0u8; info.size()];
        for (plane, (start, w, h)) in planes.into_iter().enumerate() {
            let (offset, stride) = (
                info.offset()[plane],
                usize::try_from(info.stride()[plane]).unwrap_or(w),
            );
            for y in 0..h {
                out[offset + y * stride..offset + y * stride + w]
                    .copy_from_slice(&data[start + y * w..start + (y + 1) * w]);
            }
        }
        self.push(out, pts_nanos)
    }

    fn check_input(
        &mut self,
        layout: InputLayout,
        width: usize,
        height: usize,
    ) -> Result<(), OutputError> {
        if let Some(m) = &self.failed {
            return Err(self.error(m.clone()));
        }
        if layout != self.spec.layout {
            return Err(self.error(format!(
                "this writer takes {:?} frames, not {layout:?}",
                self.spec.layout
            )));
        }
        if (width, height) != (self.spec.width, self.spec.height) {
            return Err(self.error(format!(
                "frame size changed from {}x{} to {width}x{height} mid-stream",
                self.spec.width, self.spec.height
            )));
        }
        self.check_bus()
    }

    fn push(&mut self, data: Vec<u8>, pts_nanos: Option<u64>) -> Result<(), OutputError> {
        let (pts, duration) = self.clock.next(pts_nanos);
        let mut buf = gst::Buffer::from_mut_slice(data);
        if let Some(b) = buf.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(pts));
            b.set_duration(gst::ClockTime::from_nseconds(duration));
        }
        if let Err(flow) = self.src.push_buffer(buf) {
            // The pipeline stopped: its bus says why (a write error, usually).
            let bus_error = self.pipeline.bus().and_then(|b| {
                b.timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error])
            });
            let message = bus_error.as_ref().and_then(|m| match m.view() {
                gst::MessageView::Error(e) => Some(describe(e)),
                _ => None,
            });
            let message =
                message.unwrap_or_else(|| format!("the encoder refused a frame ({flow:?})"));
            self.failed = Some(message.clone());
            return Err(self.error(message));
        }
        self.frames += 1;
        Ok(())
    }

    fn error(&self, message: String) -> OutputError {
        OutputError::Video {
            path: self.path.clone(),
            message,
        }
    }

    fn check_bus(&mut self) -> Result<(), OutputError> {
        if let Some(bus) = self.pipeline.bus()
            && let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error])
            && let gst::MessageView::Error(e) = msg.view()
        {
            let message = describe(e);
            self.failed = Some(message.clone());
            return Err(self.error(message));
        }
        Ok(())
    }

    /// Ends the stream and waits (up to 30 s) for the muxer to write its index; returns the
    /// frames encoded. After a failure, only releases the pipeline (the file keeps the frames
    /// written before it).
    pub fn finish(self) -> Result<u64, OutputError> {
        if let Some(m) = self.failed.clone() {
            let _ = self.pipeline.set_state(gst::State::Null);
            return Err(self.error(m));
        }
        let _ = self.src.end_of_stream();
        let mut result = Ok(self.frames);
        match self.pipeline.bus() {
            Some(bus) => match bus.timed_pop_filtered(
                gst::ClockTime::from_seconds(30),
                &[gst::MessageType::Eos, gst::MessageType::Error],
            ) {
                Some(msg) => {
                    if let gst::MessageView::Error(e) = msg.view() {
                        result = Err(self.error(describe(e)));
                    }
                }
                None => result = Err(self.error("the encoder did not finish within 30 s".into())),
            },
            None => result = Err(self.error("encoding pipeline without a bus".into())),
        }
        let _ = self.pipeline.set_state(gst::State::Null);
        result
    }
}

/// A GStreamer error as a cause: for a write error the system's reason ("No space left on
/// device", the last line of the debug detail), else the message and that detail.
fn describe(e: &gst::message::Error) -> String {
    let err = e.error();
    let cause = e
        .debug()
        .and_then(|d| d.lines().last().map(|l| l.trim().to_owned()))
        .filter(|l| !l.is_empty() && !l.contains("gst_"));
    let write = err.matches(gst::ResourceError::Write)
        || err.matches(gst::ResourceError::NoSpaceLeft)
        || err.matches(gst::ResourceError::OpenWrite);
    match cause {
        Some(c) if write => c,
        Some(c) => format!("{} ({c})", err.to_string().trim_end_matches('.')),
        None => err.to_string(),
    }
}

/// Buffer timestamps from source timestamps: relative to the first frame, strictly increasing;
/// a frame without a usable timestamp comes one nominal frame after the previous.
#[derive(Debug)]
struct Timestamps {
    frame_nanos: u64,
    origin: Option<u64>,
    last: Option<u64>,
}

impl Timestamps {
    fn new(frame_nanos: u64) -> Self {
        Self {
            frame_nanos: frame_nanos.max(1),
            origin: None,
            last: None,
        }
    }

    /// (pts, duration) of the next frame, nanoseconds.
    fn next(&mut self, source_pts: Option<u64>) -> (u64, u64) {
        let origin = *self.origin.get_or_insert(source_pts.unwrap_or(0));
        let relative = source_pts.and_then(|p| p.checked_sub(origin));
        let pts = match (relative, self.last) {
            (Some(r), Some(last)) if r > last => r,
            (Some(r), None) => r,
            (_, Some(last)) => last + self.frame_nanos,
            (None, None) => 0,
        };
        self.last = Some(pts);
        (pts, self.frame_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EncoderChoice;
    use crate::output::encoder::{NVENC_ENCODERS, choose_encoder, installed_encoder};
    use crate::source::{FrameFormat, Source, SourceSpec, TestSourceOptions};

    #[test]
    fn timestamps_follow_the_source_and_never_go_back() {
        let mut t = Timestamps::new(100);
        assert_eq!(t.next(Some(5_000)), (0, 100));
        assert_eq!(
            t.next(Some(5_250)),
            (250, 100),
            "a variable-rate gap is kept"
        );
        assert_eq!(
            t.next(None),
            (350, 100),
            "no timestamp: one nominal frame later"
        );
        assert_eq!(
            t.next(Some(5_100)),
            (450, 100),
            "a timestamp going back is replaced"
        );
        assert_eq!(t.next(Some(6_000)), (1_000, 100));
    }

    /// Decodes `path` back through a [`Source`]: (frames, width, height, pts of each frame).
    fn decode(path: &Path) -> (Vec<crate::image::DynImage>, Vec<u64>) {
        let mut src = Source::open(
            &SourceSpec::File(path.to_owned()),
            FrameFormat::Rgb,
            &TestSourceOptions::default(),
            false,
        )
        .unwrap();
        let (mut frames, mut pts) = (Vec::new(), Vec::new());
        while let Some(f) = src.next_frame().unwrap() {
            pts.push(f.pts_nanos.unwrap());
            frames.push(f.image.into_host().unwrap());
        }
        (frames, pts)
    }

    fn software_encoder(w: usize, h: usize) -> Option<&'static str> {
        crate::source::init_gstreamer().unwrap();
        match choose_encoder(EncoderChoice::Auto, w, h, |n| {
            installed_encoder(n).filter(|_| !NVENC_ENCODERS.contains(&n))
        }) {
            Ok(e) => Some(e),
            Err(e) => {
                assert!(
                    std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"),
                    "{e}"
                );
                eprintln!("{e}; skipped");
                None
            }
        }
    }

    #[test]
    fn i420_frames_go_straight_in_and_decode_back_at_their_rate() {
        // 36 is even but not a multiple of 8: GStreamer pads its chroma rows, the writer repacks.
        let (w, h) = (36, 20);
        let Some(encoder) = software_encoder(w, h) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i420.mkv");
        let rate = FrameRate::new(10, 1);
        let spec = VideoSpec {
            width: w,
            height: h,
            layout: InputLayout::I420,
            frame_rate: rate,
            kbps: 2000,
            encoder,
        };
        let mut v = VideoWriter::create(&path, spec).unwrap();
        // Mid grey with neutral chroma: decodes to grey.
        let frame = [vec![128u8; w * h], vec![128u8; w * h / 2]].concat();
        for i in 0..12u64 {
            v.push_i420(&frame, w, h, Some(1_000_000_000 + i * 100_000_000))
                .unwrap();
        }
        assert!(
            v.push_i420(&frame[1..], w, h, None).is_err(),
            "a short buffer is refused"
        );
        assert_eq!(v.finish().unwrap(), 12);
        let (frames, pts) = decode(&path);
        assert_eq!(frames.len(), 12);
        assert_eq!(frames[0].size(), (w, h));
        assert!(
            pts.windows(2).all(|p| p[1] - p[0] == 100_000_000),
            "10 fps: {pts:?}"
        );
        let crate::image::DynImage::Rgb8(img) = &frames[5] else {
            panic!("RGB")
        };
        let [r, g, b] = img.row(10)[18];
        assert!(
            (110..=146).contains(&r) && r.abs_diff(g) < 8 && g.abs_diff(b) < 8,
            "grey expected, got {r},{g},{b}"
        );
    }

    #[test]
    fn a_cut_video_still_plays_to_its_last_whole_frame() {
        let (w, h) = (64, 48);
        let Some(encoder) = software_encoder(w, h) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rgb.mkv");
        let spec = VideoSpec {
            width: w + 1,
            height: h + 1,
            layout: InputLayout::Rgb,
            frame_rate: FrameRate::new(30, 1),
            kbps: 2000,
            encoder,
        };
        let mut v = VideoWriter::create(&path, spec).unwrap();
        for i in 0..40u64 {
            let img = Image::from_fn(w + 1, h + 1, |x, y| {
                [(x * 4) as u8, (y * 5) as u8, (i * 6) as u8]
            });
            v.push_rgb(&img, None).unwrap();
        }
        assert_eq!(v.finish().unwrap(), 40);
        let (frames, _) = decode(&path);
        assert_eq!(frames.len(), 40);
        assert_eq!(
            frames[0].size(),
            (w, h),
            "the odd column and row are cropped"
        );
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.mkv");
        std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
        let n = decode(&cut).0.len();
        assert!((15..40).contains(&n), "{n} frames of a file cut at 2/3");
    }
}
