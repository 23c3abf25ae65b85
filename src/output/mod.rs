//! Headless sinks of `morphoscope run`: `frames.jsonl` (one JSON object per frame: index, pts,
//! each analysis' summary, every timed region), `timings.json` (per region: count, median, p95,
//! max ms; frames in/out/dropped; wall time; source, decoder, encoder) and `overlay.mkv` (the
//! frame with every overlay). Analyses add their own files through their records (tracks CSV,
//! components), and `events.jsonl` (one object per change of the stream's life: [`events`]).
//!
//! Every file stays readable whatever ends the run ([`files`]): lines are written whole, one
//! write a frame, and cut back to the last whole line when a write fails; `timings.json` is
//! replaced atomically, at the start, every few seconds and at the end (`"complete"` says
//! which); the video is Matroska, playable when cut. A run owns its folder: the files an
//! earlier run wrote there are removed first ([`RunSink::create`] returns their names).
//!
//! Each frame's line is serialised once; a hook ([`RunSink::on_frame_line`]) gets the same text
//! after it is in the file (the broker publisher of `run --publish` sends it as it is).

pub mod compose;
pub mod encoder;
pub mod events;
pub mod files;
pub mod video;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::analysis::AnalysedFrame;
use crate::compose::PictureFormat;
use crate::image::Image;
use crate::pipeline::{CounterSnapshot, Series, Summary};
use crate::publish::PublishReport;
use crate::source::StreamInfo;
use crate::source::reconnect::SourceChange;
use encoder::{EncoderChoice, NoEncoder};
use files::LineFile;
use video::{InputLayout, VideoSpec, VideoWriter};

/// Errors writing outputs. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// File system.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The video pipeline failed (a write error, the encoder).
    #[error("cannot write {}: {message}", path.display())]
    Video {
        /// The video file.
        path: PathBuf,
        /// Cause.
        message: String,
    },
    /// No encoder can write the video.
    #[error("overlay video: {0}")]
    Encoder(String),
}

/// Per-region timing samples, in first-seen order, in bounded memory ([`Series`]: exact count,
/// mean and max; median and p95 from a reservoir on runs past 8192 frames).
#[derive(Debug, Default)]
pub struct TimingLog {
    order: Vec<String>,
    samples: BTreeMap<String, Series>,
}

impl TimingLog {
    /// Adds one frame's regions plus upload/download/latency/compute.
    pub fn add(&mut self, f: &AnalysedFrame) {
        let t = &f.timings;
        let extra = [
            ("upload", t.upload_ms),
            ("download", t.download_ms),
            ("queue_wait", t.queue_wait_ms),
            ("latency", t.latency_ms),
            ("compute_total", t.compute_ms),
        ];
        let cpu = t.backend == "cpu";
        let extra = extra
            .into_iter()
            .filter(|(n, _)| !(cpu && (*n == "upload" || *n == "download")));
        for (name, ms) in t
            .regions
            .iter()
            .map(|(n, ms)| (n.as_str(), *ms))
            .chain(extra)
        {
            match self.samples.get_mut(name) {
                Some(series) => series.push(ms),
                None => {
                    self.order.push(name.to_owned());
                    let mut series = Series::default();
                    series.push(ms);
                    self.samples.insert(name.to_owned(), series);
                }
            }
        }
    }
    /// (region, summary) in first-seen order.
    #[must_use]
    pub fn summaries(&self) -> Vec<(String, Summary)> {
        self.order
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    self.samples
                        .get(n)
                        .map_or_else(Summary::default, Series::summary),
                )
            })
            .collect()
    }
    /// A plain-text table of the summaries.
    #[must_use]
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<34} {:>7} {:>10} {:>10} {:>10}\n",
            "region", "frames", "median ms", "p95 ms", "max ms"
        );
        for (n, m) in self.summaries() {
            s.push_str(&format!(
                "{n:<34} {:>7} {:>10.3} {:>10.3} {:>10.3}\n",
                m.count, m.median_ms, m.p95_ms, m.max_ms
            ));
        }
        s
    }
}

/// Header of `tracks.csv`, written when a run produced no track rows (MOT Challenge rows carry
/// no header; an empty run's file says what it would hold).
pub const TRACKS_CSV_HEADER: &str = "frame,id,bb_left,bb_top,bb_width,bb_height,conf,x,y,z";

/// How often `timings.json` is rewritten during a run.
const TIMINGS_EVERY: Duration = Duration::from_secs(2);

/// What a run writes besides the per-frame lines.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// Write `overlay.mkv`.
    pub video: bool,
    /// Its bitrate, kbit/s.
    pub video_kbps: u32,
    /// Its encoder.
    pub encoder: EncoderChoice,
    /// The source as it is shown (for `timings.json`; secrets are masked when written).
    pub source: String,
    /// The backend description (for `timings.json`).
    pub backend: String,
}

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
    /// Failed mid-run (the error was returned once); frames written before it stay.
    Failed,
}

/// How a run ended, for the final `timings.json`.
#[derive(Clone, Debug)]
pub struct RunEnd {
    /// Counters at the end (`frames_out`: frames written).
    pub counters: CounterSnapshot,
    /// Seconds from the first frame asked to the end.
    pub wall_seconds: f64,
    /// Why it ended: "end of stream", "--max-frames", "SIGINT", "error: …".
    pub ended: String,
}

/// What [`RunSink::finish`] leaves.
pub struct Finished {
    /// Timings of every frame written.
    pub timings: TimingLog,
    /// Frames in the overlay video (`None`: no video).
    pub video_frames: Option<u64>,
    /// Files of the folder written by this run, in [`files::RUN_FILES`] order.
    pub files: Vec<String>,
    /// The first error finishing the files (the video's index, `timings.json`), if any.
    pub error: Option<OutputError>,
    /// The final `timings.json`, kept to add the publisher's counts to it after the files.
    timings_json: (PathBuf, serde_json::Value),
}

impl Finished {
    /// Rewrites the final `timings.json` with the publisher's counts: called while the run
    /// waits for the broker (`flushing`: the counts may still change) and once after it.
    pub fn set_publish_report(
        &mut self,
        report: &PublishReport,
        flushing: bool,
    ) -> Result<(), OutputError> {
        let (path, doc) = &mut self.timings_json;
        let mut publish = serde_json::json!(report);
        if flushing {
            publish["flushing"] = serde_json::json!(true);
        }
        doc["publish"] = publish;
        files::write_json_atomic(path, doc)
    }
}

/// The `frames.jsonl` object of one frame: index, pts, size, backend, every analysis' summary
/// (`ops`) and the frame's timings. What a publisher sends per frame is this same object.
#[must_use]
pub fn frame_record(f: &AnalysedFrame) -> serde_json::Value {
    let mut ops = serde_json::Map::new();
    for o in &f.outputs {
        ops.insert(o.op.to_owned(), o.summary.clone());
    }
    let regions: serde_json::Map<String, serde_json::Value> = f
        .timings
        .regions
        .iter()
        .map(|(n, ms)| (n.clone(), serde_json::json!(round3(*ms))))
        .collect();
    serde_json::json!({
            "index": f.index,
            "pts_nanos": f.pts_nanos,
            "width": f.size().0,
            "height": f.size().1,
            "backend": f.timings.backend,
            "ops": ops,
            "ms": regions,
            "upload_ms": round3(f.timings.upload_ms),
            "download_ms": round3(f.timings.download_ms),
            "latency_ms": round3(f.timings.latency_ms),
    })
}

/// The writer of a run's output folder.
pub struct RunSink {
    dir: PathBuf,
    opts: SinkOptions,
    frames: LineFile,
    events: LineFile,
    extra: BTreeMap<String, LineFile>,
    video: Video,
    encoder: Option<&'static str>,
    stream: StreamInfo,
    /// Timings of every frame.
    pub timings: TimingLog,
    started: Instant,
    timings_written: Instant,
    frames_written: u64,
    frame_hook: Option<FrameHook>,
    /// The live source is lost and being reopened.
    reconnecting: bool,
    /// Times the live source was lost.
    losses: u64,
}

/// Called with each frame's `frames.jsonl` line (without its newline) once it is written.
type FrameHook = Box<dyn FnMut(&str) + Send>;

impl RunSink {
    /// Creates `dir` (or checks an existing one) and that files can be written there: call it
    /// before the work starts.
    pub fn prepare(dir: &Path) -> Result<(), OutputError> {
        files::prepare_folder(dir)
    }

    /// Takes over `dir`: removes the files an earlier run wrote there (their names are
    /// returned), creates `frames.jsonl` and `tracks.csv` and writes a first `timings.json`.
    pub fn create(dir: &Path, opts: SinkOptions) -> Result<(Self, Vec<&'static str>), OutputError> {
        files::prepare_folder(dir)?;
        let removed = files::remove_earlier_run(dir)?;
        let frames = LineFile::create(&dir.join("frames.jsonl"))?;
        let events = LineFile::create(&dir.join("events.jsonl"))?;
        let mut extra = BTreeMap::new();
        extra.insert(
            "tracks.csv".to_owned(),
            LineFile::create(&dir.join("tracks.csv"))?,
        );
        let video = if opts.video {
            Video::Pending
        } else {
            Video::Off
        };
        let now = Instant::now();
        let sink = Self {
            dir: dir.to_owned(),
            opts,
            frames,
            events,
            extra,
            video,
            encoder: None,
            stream: StreamInfo::default(),
            timings: TimingLog::default(),
            started: now,
            timings_written: now,
            frames_written: 0,
            frame_hook: None,
            reconnecting: false,
            losses: 0,
        };
        sink.write_timings(
            &RunEnd {
                counters: CounterSnapshot::default(),
                wall_seconds: 0.0,
                ended: String::new(),
            },
            false,
            None,
        )?;
        Ok((sink, removed))
    }

    /// Frames whose line is in `frames.jsonl`.
    #[must_use]
    pub fn frames_written(&self) -> u64 {
        self.frames_written
    }

    /// Hands every frame's `frames.jsonl` line (the JSON object, without the newline) to `hook`
    /// right after it is written: the one serialisation of a frame's record.
    pub fn on_frame_line(&mut self, hook: impl FnMut(&str) + Send + 'static) {
        self.frame_hook = Some(Box::new(hook));
    }

    /// What the source reported (liveness, frame rate, decoder): call before the first frame,
    /// whose video uses the rate.
    pub fn set_stream(&mut self, info: StreamInfo) {
        self.stream = info;
    }

    /// Writes one analysed frame: its line, its analyses' records, its video frame.
    pub fn write(&mut self, f: &AnalysedFrame) -> Result<(), OutputError> {
        let line = frame_record(f);
        let mut text = serde_json::to_string(&line).map_err(|e| OutputError::Io {
            path: self.dir.join("frames.jsonl"),
            source: e.into(),
        })?;
        text.push('\n');
        self.frames.append(text.as_bytes())?;
        self.frames_written += 1;
        if let Some(hook) = &mut self.frame_hook {
            hook(text.trim_end_matches('\n'));
        }
        self.timings.add(f);
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
        self.write_video(f)
    }

    /// The picture the overlay video shows for a frame: the one place it is composed.
    fn overlay_picture(f: &AnalysedFrame) -> Image<[u8; 3]> {
        compose::compose(f)
    }

    fn write_video(&mut self, f: &AnalysedFrame) -> Result<(), OutputError> {
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
            self.video = self.open_video(size, layout)?;
        }
        let pushed = match (&mut self.video, i420) {
            (Video::Open(v), Some(p)) => v.push_i420(&p.data, p.width, p.height, f.pts_nanos),
            (Video::Open(v), None) => v.push_rgb(&Self::overlay_picture(f), f.pts_nanos),
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
    ) -> Result<Video, OutputError> {
        let encoders = match encoder::choose_encoders(
            self.opts.encoder,
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
        let rate = self.stream.frame_rate.map_or_else(
            || "the source's timestamps (variable rate)".to_owned(),
            |r| r.to_string(),
        );
        let mut failure = None;
        for encoder in encoders {
            let spec = VideoSpec {
                width,
                height,
                layout,
                frame_rate: self.stream.frame_rate,
                kbps: self.opts.video_kbps,
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

    /// Rewrites `timings.json` when the last write is [`TIMINGS_EVERY`] old (cheap otherwise).
    pub fn checkpoint(&mut self, counters: CounterSnapshot) -> Result<(), OutputError> {
        if self.timings_written.elapsed() < TIMINGS_EVERY {
            return Ok(());
        }
        self.timings_written = Instant::now();
        let end = RunEnd {
            counters,
            wall_seconds: self.started.elapsed().as_secs_f64(),
            ended: String::new(),
        };
        let video_frames = match &self.video {
            Video::Open(v) => Some(v.frames()),
            _ => None,
        };
        self.write_timings(&end, false, video_frames)
    }

    /// Makes the next [`RunSink::checkpoint`] rewrite `timings.json`.
    fn checkpoint_due(&mut self) {
        self.timings_written = Instant::now()
            .checked_sub(TIMINGS_EVERY)
            .unwrap_or(self.started);
    }

    /// Appends `event` of stream `stream` to `events.jsonl`; a lost or returning source also
    /// shows in `timings.json` (`"reconnecting"`, `"losses"`) at the next checkpoint.
    pub fn event(&mut self, stream: usize, event: &events::StreamEvent) -> Result<(), OutputError> {
        match event {
            events::StreamEvent::Source(SourceChange::Lost { .. }) => {
                self.reconnecting = true;
                self.losses += 1;
                self.checkpoint_due();
            }
            events::StreamEvent::Source(SourceChange::Back { .. }) => {
                self.reconnecting = false;
                self.checkpoint_due();
            }
            _ => {}
        }
        let record = events::event_record(stream, &self.opts.source, event);
        let mut line = record.to_string();
        line.push('\n');
        self.events.append(line.as_bytes())
    }

    /// Ends the video (its index), writes the header of an empty `tracks.csv` and the final
    /// `timings.json`. Does what it can after an error and reports the first.
    pub fn finish(mut self, end: &RunEnd) -> Finished {
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
        let doc = self.timings_doc(end, true, video_frames);
        let path = self.dir.join("timings.json");
        if let Err(e) = files::write_json_atomic(&path, &doc) {
            error.get_or_insert(e);
        }
        let files = files::RUN_FILES
            .iter()
            .filter(|n| self.dir.join(n).is_file())
            .map(|n| (*n).to_owned())
            .collect();
        Finished {
            timings: self.timings,
            video_frames,
            files,
            error,
            timings_json: (path, doc),
        }
    }

    fn write_timings(
        &self,
        end: &RunEnd,
        complete: bool,
        video_frames: Option<u64>,
    ) -> Result<(), OutputError> {
        let doc = self.timings_doc(end, complete, video_frames);
        files::write_json_atomic(&self.dir.join("timings.json"), &doc)
    }

    /// The `timings.json` document.
    fn timings_doc(
        &self,
        end: &RunEnd,
        complete: bool,
        video_frames: Option<u64>,
    ) -> serde_json::Value {
        let regions: serde_json::Map<String, serde_json::Value> = self
            .timings
            .summaries()
            .into_iter()
            .map(|(n, s)| (n, serde_json::json!({"count": s.count, "median_ms": round3(s.median_ms), "p95_ms": round3(s.p95_ms), "max_ms": round3(s.max_ms), "mean_ms": round3(s.mean_ms)})))
            .collect();
        let c = end.counters;
        let fps = if end.wall_seconds > 0.0 {
            c.frames_out as f64 / end.wall_seconds
        } else {
            0.0
        };
        serde_json::json!({
            "complete": complete,
            "ended": (!end.ended.is_empty()).then(|| crate::redact::text(&end.ended)),
            "source": crate::redact::text(&self.opts.source),
            "backend": self.opts.backend,
            "live": self.stream.live,
            "frame_rate": self.stream.frame_rate.map(|r| round3(r.fps())),
            "decoder": self.stream.decoder,
            "encoder": self.encoder,
            "frames_in": c.frames_in,
            "frames_out": c.frames_out,
            "dropped": c.dropped,
            "in_flight": c.in_flight(),
            "video_frames": video_frames,
            "wall_seconds": round3(end.wall_seconds),
            "fps": round3(fps),
            "reconnecting": self.reconnecting,
            "losses": self.losses,
            "regions": regions,
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
