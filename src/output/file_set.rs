//! One set of per-frame files: `frames.jsonl`, the analyses' record files (`tracks.csv`,
//! `components.jsonl`, …) and `overlay.mkv`. An unsegmented stream has one set in its output
//! folder; a segmented one a set per segment folder ([`super::segments`]), each complete and
//! playable alone (its video starts with a keyframe at time 0).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::encoder::{self, NoEncoder};
use super::files::LineFile;
use super::video::{InputLayout, VideoSpec, VideoWriter};
use super::{OutputError, TRACKS_CSV_HEADER};
use crate::analysis::AnalysedFrame;
use crate::compose::PictureFormat;
use crate::config::EncoderChoice;
use crate::source::StreamInfo;

/// The overlay video's state.
enum Video {
    /// Not asked for.
    Off,
    /// Opens on the first frame (its size and the source's rate are known then).
    Pending,
    /// Encoding.
    Open(VideoWriter),
    /// Not written (frames smaller than every encoder accepts); the reason.
    Skipped(String),
    /// Failed (the error was returned once); frames written before it stay.
    Failed,
}

/// How the overlay video is written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VideoOptions {
    /// Its bitrate, kbit/s.
    pub kbps: u32,
    /// Its encoder.
    pub encoder: EncoderChoice,
}

/// The per-frame files of one folder (see the module).
pub(crate) struct FileSet {
    dir: PathBuf,
    frames: LineFile,
    extra: BTreeMap<String, LineFile>,
    video: Video,
    /// The encoder of the video, once it started.
    pub encoder: Option<&'static str>,
    /// Frames whose line is in this set's `frames.jsonl`.
    pub frames_written: u64,
}

/// What [`FileSet::finish`] leaves.
pub(crate) struct SetEnd {
    /// Frames in the overlay video (`None`: no video).
    pub video_frames: Option<u64>,
    /// The first error finishing the files, if any.
    pub error: Option<OutputError>,
}

impl FileSet {
    /// Creates `frames.jsonl` and `tracks.csv` in `dir`; the video (when `video`) opens with the
    /// first frame.
    pub fn create(dir: &Path, video: bool) -> Result<Self, OutputError> {
        let frames = LineFile::create(&dir.join("frames.jsonl"))?;
        let mut extra = BTreeMap::new();
        extra.insert(
            "tracks.csv".to_owned(),
            LineFile::create(&dir.join("tracks.csv"))?,
        );
        Ok(Self {
            dir: dir.to_owned(),
            frames,
            extra,
            video: if video { Video::Pending } else { Video::Off },
            encoder: None,
            frames_written: 0,
        })
    }

    /// Appends a frame's `frames.jsonl` line (with its newline).
    pub(crate) fn write_line(&mut self, text: &str) -> Result<(), OutputError> {
        self.frames.append(text.as_bytes())?;
        self.frames_written += 1;
        Ok(())
    }

    /// Appends a frame's analysis records, each file's lines in one write.
    pub(crate) fn write_records(&mut self, f: &AnalysedFrame) -> Result<(), OutputError> {
        let mut records: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        for o in &f.outputs {
            for (file, line) in &o.records {
                let block = records.entry(file).or_default();
                block.extend_from_slice(line.as_bytes());
                block.push(b'\n');
            }
        }
        for (file, block) in records {
            if !self.extra.contains_key(file) {
                self.extra
                    .insert(file.to_owned(), LineFile::create(&self.dir.join(file))?);
            }
            if let Some(w) = self.extra.get_mut(file) {
                w.append(&block)?;
            }
        }
        Ok(())
    }

    /// Frames in the video so far (`None`: no video open).
    #[must_use]
    pub fn video_frames(&self) -> Option<u64> {
        match &self.video {
            Video::Open(v) => Some(v.frames()),
            _ => None,
        }
    }

    /// Adds a frame to the overlay video (opened with the first frame).
    pub(crate) fn write_video(
        &mut self,
        f: &AnalysedFrame,
        stream: &StreamInfo,
        opts: VideoOptions,
    ) -> Result<(), OutputError> {
        // The pipeline composes the picture (on the device, or with the CPU twin) when the video
        // is wanted; a frame without one is composed here.
        let i420 = f
            .picture
            .as_deref()
            .filter(|p| p.format == PictureFormat::I420);
        if matches!(self.video, Video::Pending) {
            let (size, layout) = match i420 {
                Some(p) => ((p.width, p.height), InputLayout::I420),
                None => (f.size(), InputLayout::Rgb),
            };
            self.video = self.open_video(size, layout, stream, opts)?;
        }
        let pushed = match (&mut self.video, i420) {
            (Video::Open(v), Some(p)) => v.push_i420(&p.data, p.width, p.height, f.pts_nanos),
            (Video::Open(v), None) => {
                v.push_rgb(&crate::analysis::overlay::compose(f), f.pts_nanos)
            }
            _ => Ok(()),
        };
        if let Err(e) = pushed {
            if let Video::Open(v) = std::mem::replace(&mut self.video, Video::Failed) {
                let _ = v.finish();
            }
            return Err(e);
        }
        Ok(())
    }

    /// Opens the video with the fastest encoder that starts (an NVENC that registers but cannot
    /// open a session falls back to the next), or skips it for frames too small for any.
    fn open_video(
        &mut self,
        (width, height): (usize, usize),
        layout: InputLayout,
        stream: &StreamInfo,
        opts: VideoOptions,
    ) -> Result<Video, OutputError> {
        let encoders = match encoder::choose_encoders(
            opts.encoder,
            width & !1,
            height & !1,
            encoder::installed_encoder,
        ) {
            Ok(e) => e,
            Err(e @ NoEncoder::TooSmall { .. }) => {
                log::warn!("overlay video skipped: {e}; the other outputs are written");
                return Ok(Video::Skipped(e.to_string()));
            }
            Err(e) => return Err(OutputError::Encoder(e.to_string())),
        };
        let rate = stream.frame_rate.map_or_else(
            || "the source's timestamps (variable rate)".to_owned(),
            |r| r.to_string(),
        );
        let mut failure = None;
        for encoder in encoders {
            let spec = VideoSpec {
                width,
                height,
                layout,
                frame_rate: stream.frame_rate,
                kbps: opts.kbps,
                encoder,
            };
            match VideoWriter::create(&self.dir.join("overlay.mkv"), spec) {
                Ok(writer) => {
                    let kind = if encoder::NVENC_ENCODERS.contains(&encoder) {
                        "NVENC"
                    } else {
                        "software"
                    };
                    log::info!(
                        "overlay video: {encoder} ({kind}), {}x{} at {rate}",
                        width & !1,
                        height & !1
                    );
                    self.encoder = Some(encoder);
                    return Ok(Video::Open(writer));
                }
                Err(e) => {
                    log::warn!(
                        "overlay video: {encoder} does not start ({e}); trying the next encoder"
                    );
                    failure = Some(e);
                }
            }
        }
        Err(failure.unwrap_or_else(|| OutputError::Encoder("no encoder started".into())))
    }

    /// Ends the video (its index) and writes the header of an empty `tracks.csv`. Does what it
    /// can after an error and reports the first.
    pub fn finish(mut self) -> SetEnd {
        let mut error = None;
        if let Some(tracks) = self.extra.get_mut("tracks.csv")
            && tracks.is_empty()
            && let Err(e) = tracks.append(format!("{TRACKS_CSV_HEADER}\n").as_bytes())
        {
            error.get_or_insert(e);
        }
        let video_frames = match std::mem::replace(&mut self.video, Video::Off) {
            Video::Open(v) => match v.finish() {
                Ok(n) => Some(n),
                Err(e) => {
                    error.get_or_insert(e);
                    None
                }
            },
            Video::Skipped(reason) => {
                log::debug!("overlay video skipped: {reason}");
                None
            }
            Video::Off | Video::Pending | Video::Failed => None,
        };
        SetEnd {
            video_frames,
            error,
        }
    }
}
