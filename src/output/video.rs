//! `overlay.mp4`: composed frames pushed into a GStreamer encoding pipeline
//! (`appsrc ! videoconvert ! x264enc ! mp4mux ! filesink`, I420 pinned upstream of the encoder
//! and the constrained-baseline profile, so any H.264 decoder reads it; `openh264enc` when x264
//! is not installed). H.264 needs even sizes: an odd last column/row is cropped. Frames are pushed in order with their
//! timestamps; `finish` sends EOS and waits for the muxer to write the index.

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::OutputError;
use crate::image::Image;

/// An open encoder.
pub struct VideoWriter {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    size: (usize, usize),
    encoded: (usize, usize),
    frames: u64,
    fps: u32,
}

impl VideoWriter {
    /// Starts an encoder writing `path` for frames of `width`×`height` at `fps`.
    pub fn create(path: &std::path::Path, width: usize, height: usize, fps: u32, kbps: u32) -> Result<Self, OutputError> {
        crate::source::init_gstreamer().map_err(|e| OutputError::Video(e.to_string()))?;
        let err = |e: &dyn std::fmt::Display| OutputError::Video(e.to_string());
        // x264 needs even sizes: crop one column/row when odd.
        let (ew, eh) = (width & !1, height & !1);
        if ew == 0 || eh == 0 {
            return Err(OutputError::Video(format!("frame {width}x{height} too small to encode")));
        }
        let encoder = if gst::ElementFactory::find("x264enc").is_some() {
            format!("x264enc bitrate={kbps} speed-preset=veryfast tune=zerolatency key-int-max=60")
        } else if gst::ElementFactory::find("openh264enc").is_some() {
            // openh264 prints "EncodeFrame(), cmInitParaError" once when drained at the end; the
            // file is complete (every frame decodes), so the message is harmless.
            format!("openh264enc bitrate={}", u64::from(kbps) * 1000)
        } else {
            return Err(OutputError::Video("no H.264 encoder (install gstreamer1.0-plugins-ugly) — or use --no-video".into()));
        };
        let desc = format!(
            "appsrc name=src format=time is-live=false block=true ! videoconvert ! video/x-raw,format=I420 ! {encoder} ! video/x-h264,profile=constrained-baseline ! h264parse ! mp4mux ! filesink location=\"{}\"",
            path.display()
        );
        let pipeline = gst::parse::launch(&desc)
            .map_err(|e| err(&e))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| OutputError::Video("not a pipeline".into()))?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or_else(|| OutputError::Video("appsrc missing".into()))?;
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Rgb, ew as u32, eh as u32)
            .fps(gst::Fraction::new(fps as i32, 1))
            .build()
            .map_err(|e| err(&e))?;
        src.set_caps(Some(&info.to_caps().map_err(|e| err(&e))?));
        src.set_max_bytes((width * height * 3 * 4) as u64);
        pipeline.set_state(gst::State::Playing).map_err(|e| err(&e))?;
        Ok(Self { pipeline, src, size: (width, height), encoded: (ew, eh), frames: 0, fps: fps.max(1) })
    }

    /// Encodes one frame (must have the size given at creation).
    pub fn push(&mut self, img: &Image<[u8; 3]>) -> Result<(), OutputError> {
        if (img.width(), img.height()) != self.size {
            return Err(OutputError::Video(format!(
                "frame size changed from {}x{} to {}x{} mid-stream",
                self.size.0, self.size.1, img.width(), img.height()
            )));
        }
        self.check_bus()?;
        // Copy: packs the (cropped) RGB rows into a GStreamer buffer (rows padded to 4 bytes).
        let (ew, eh) = self.encoded;
        let row_bytes = (3 * ew).div_ceil(4) * 4;
        let mut data = vec![0u8; row_bytes * eh];
        for y in 0..eh {
            data[y * row_bytes..y * row_bytes + 3 * ew].copy_from_slice(img.row(y)[..ew].as_flattened());
        }
        let mut buf = gst::Buffer::from_mut_slice(data);
        if let Some(b) = buf.get_mut() {
            let t = gst::ClockTime::from_nseconds(self.frames * 1_000_000_000 / u64::from(self.fps));
            b.set_pts(t);
            b.set_duration(gst::ClockTime::from_nseconds(1_000_000_000 / u64::from(self.fps)));
        }
        self.src.push_buffer(buf).map_err(|e| OutputError::Video(format!("encoder refused a frame: {e:?}")))?;
        self.frames += 1;
        Ok(())
    }

    fn check_bus(&self) -> Result<(), OutputError> {
        if let Some(bus) = self.pipeline.bus()
            && let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error])
            && let gst::MessageView::Error(e) = msg.view()
        {
            return Err(OutputError::Video(e.error().to_string()));
        }
        Ok(())
    }

    /// Ends the stream and waits (up to 30 s) for the file to be finalised.
    pub fn finish(self) -> Result<u64, OutputError> {
        let _ = self.src.end_of_stream();
        let bus = self.pipeline.bus().ok_or_else(|| OutputError::Video("no bus".into()))?;
        let mut result = Ok(self.frames);
        if let Some(msg) = bus.timed_pop_filtered(gst::ClockTime::from_seconds(30), &[gst::MessageType::Eos, gst::MessageType::Error]) {
            if let gst::MessageView::Error(e) = msg.view() {
                result = Err(OutputError::Video(e.error().to_string()));
            }
        } else {
            result = Err(OutputError::Video("encoder did not finish within 30 s".into()));
        }
        let _ = self.pipeline.set_state(gst::State::Null);
        result
    }
}
