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
//! Each frame's line is serialised once; a hook (`RunSink::on_frame_line`) gets the same text
//! after it is in the file (the broker publisher of `run --publish` sends it as it is).

pub mod encoder;
pub mod events;
pub(crate) mod file_set;
pub mod files;
pub mod segments;
mod timing_log;
pub mod video;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::analysis::AnalysedFrame;
use crate::config::EncoderChoice;
use crate::publish::PublishReport;
use crate::source::StreamInfo;
use crate::source::reconnect::SourceChange;
use crate::stats::CounterSnapshot;
use events::StreamEvent;
use file_set::FileSet;
use files::LineFile;
use segments::{Deleted, SEGMENTS_DIR, SegmentPolicy, Segments};
pub use timing_log::TimingLog;

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

impl OutputError {
    /// Whether the error is a full disk (or a used-up quota): the one a segmented stream with
    /// retention recovers from by deleting its oldest segment.
    #[must_use]
    pub(crate) fn is_disk_full(&self) -> bool {
        match self {
            Self::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ),
            // GStreamer: "No space left on the resource"; the system: "… on device".
            Self::Video { message, .. } => message.to_ascii_lowercase().contains("no space left"),
            Self::Encoder(_) => false,
        }
    }
}

/// Header of `tracks.csv`, written when a run produced no track rows (MOT Challenge rows carry
/// no header; an empty run's file says what it would hold).
pub(crate) const TRACKS_CSV_HEADER: &str = "frame,id,bb_left,bb_top,bb_width,bb_height,conf,x,y,z";

/// Room kept free beside the next segment for the run's own files (`timings.json`,
/// `events.jsonl`), when retention is set.
const ROOM_FOR_RUN_FILES: u64 = 64 * 1024;

/// How often `timings.json` is rewritten during a run.
const TIMINGS_EVERY: Duration = Duration::from_secs(2);

/// What a run writes besides the per-frame lines.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// The stream's number in the run (for `events.jsonl`).
    pub stream: usize,
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
    /// Segments and retention (`seconds == 0`: one set of files in the folder).
    pub segments: SegmentPolicy,
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
    /// Frames in the overlay video, of every segment (`None`: no video).
    pub video_frames: Option<u64>,
    /// What the folder holds from this run: files in `files::RUN_FILES` order, then
    /// `segments/ (N)` when it was segmented.
    pub files: Vec<String>,
    /// The first error finishing the files (the video's index, `timings.json`), if any.
    pub error: Option<OutputError>,
    /// The final `timings.json`, kept to add the publisher's counts to it after the files.
    timings_json: (PathBuf, serde_json::Value),
}

impl Finished {
    /// Rewrites the final `timings.json` with the publisher's counts: called while the run
    /// waits for the broker (`flushing`: the counts may still change) and once after it.
    pub(crate) fn set_publish_report(
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

/// The segment being written, when the stream is segmented.
struct OpenSegment {
    name: String,
    /// When the UTC clock passes this, the next frame goes to a new segment.
    ends: SystemTime,
}

/// How far a frame got into its file set (a retry after freeing space goes on from there).
#[derive(Clone, Copy, Debug, Default)]
struct FrameProgress {
    line: bool,
    records: bool,
}

/// The writer of a run's output folder.
pub struct RunSink {
    dir: PathBuf,
    opts: SinkOptions,
    events: LineFile,
    /// The per-frame files being written (`None`: segmented, between segments).
    set: Option<FileSet>,
    /// The segments (`None`: one set of files in the folder).
    segments: Option<Segments>,
    segment: Option<OpenSegment>,
    encoder: Option<&'static str>,
    stream: StreamInfo,
    /// Timings of every frame.
    pub timings: TimingLog,
    started: Instant,
    timings_written: Instant,
    frames_written: u64,
    /// Video frames of the segments already closed.
    video_frames_closed: Option<u64>,
    segments_opened: u64,
    segments_deleted: u64,
    /// Bytes of the last segment closed: the room retention keeps free for the next one.
    last_segment_bytes: u64,
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
    /// returned; an earlier run's segments stay, for retention to delete), creates
    /// `events.jsonl`, `frames.jsonl` and `tracks.csv` (the last two in the first segment,
    /// with the first frame, when segmented) and writes a first `timings.json`.
    pub fn create(dir: &Path, opts: SinkOptions) -> Result<(Self, Vec<&'static str>), OutputError> {
        files::prepare_folder(dir)?;
        let removed = files::remove_earlier_run(dir)?;
        let events = LineFile::create(&dir.join("events.jsonl"))?;
        let (set, segments) = if opts.segments.seconds == 0 {
            (Some(FileSet::create(dir, opts.video)?), None)
        } else {
            (None, Some(Segments::new(dir, opts.segments)))
        };
        let now = Instant::now();
        let sink = Self {
            dir: dir.to_owned(),
            opts,
            events,
            set,
            segments,
            segment: None,
            encoder: None,
            stream: StreamInfo::default(),
            timings: TimingLog::default(),
            started: now,
            timings_written: now,
            frames_written: 0,
            video_frames_closed: None,
            segments_opened: 0,
            segments_deleted: 0,
            last_segment_bytes: 0,
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

    /// Frames whose line is in `frames.jsonl` (of every segment).
    #[must_use]
    pub(crate) fn frames_written(&self) -> u64 {
        self.frames_written
    }

    /// Hands every frame's `frames.jsonl` line (the JSON object, without the newline) to `hook`
    /// right after it is written: the one serialisation of a frame's record.
    pub(crate) fn on_frame_line(&mut self, hook: impl FnMut(&str) + Send + 'static) {
        self.frame_hook = Some(Box::new(hook));
    }

    /// What the source reported (liveness, frame rate, decoder): call before the first frame,
    /// whose video uses the rate.
    pub(crate) fn set_stream(&mut self, info: StreamInfo) {
        self.stream = info;
    }

    /// Writes one analysed frame: its line, its analyses' records, its video frame, into the
    /// segment of this moment when segmented. With retention set, a write that fails for a
    /// full disk deletes the oldest segment and goes on in a new one.
    pub fn write(&mut self, f: &AnalysedFrame) -> Result<(), OutputError> {
        let mut text = serde_json::to_string(&frame_record(f)).map_err(|e| OutputError::Io {
            path: self.dir.join("frames.jsonl"),
            source: e.into(),
        })?;
        text.push('\n');
        self.roll(SystemTime::now())?;
        let mut progress = FrameProgress::default();
        loop {
            match self.write_to_set(f, &text, &mut progress) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if !self.free_space_after(&e) {
                        return Err(e);
                    }
                    // Go on in a new segment (the failed one keeps what it holds).
                    let _ = self.close_segment();
                    self.open_segment(SystemTime::now())?;
                }
            }
        }
    }

    /// The stages of writing a frame into the current set, each done once.
    fn write_to_set(
        &mut self,
        f: &AnalysedFrame,
        text: &str,
        progress: &mut FrameProgress,
    ) -> Result<(), OutputError> {
        let video = file_set::VideoOptions {
            kbps: self.opts.video_kbps,
            encoder: self.opts.encoder,
        };
        let Some(set) = self.set.as_mut() else {
            return Err(OutputError::Io {
                path: self.dir.clone(),
                source: std::io::Error::other("no segment open"),
            });
        };
        if !progress.line {
            set.write_line(text)?;
            progress.line = true;
            self.frames_written += 1;
            if let Some(hook) = &mut self.frame_hook {
                hook(text.trim_end_matches('\n'));
            }
            self.timings.add(f);
        }
        if !progress.records {
            set.write_records(f)?;
            progress.records = true;
        }
        let written = set.write_video(f, &self.stream, video);
        self.encoder = set.encoder.or(self.encoder);
        written
    }

    /// Segmented: closes the segment whose time is over and opens the one of `now`.
    fn roll(&mut self, now: SystemTime) -> Result<(), OutputError> {
        if self.segments.is_none() {
            return Ok(());
        }
        if self.segment.as_ref().is_some_and(|s| now >= s.ends) {
            // Its error is in events.jsonl; the frames go on in the next segment.
            let _ = self.close_segment();
        }
        if self.segment.is_none() {
            self.open_segment(now)?;
        }
        Ok(())
    }

    /// Opens a segment starting `now` (then applies retention); a failure for a full disk
    /// first deletes the oldest segment, when retention allows.
    fn open_segment(&mut self, now: SystemTime) -> Result<(), OutputError> {
        let Some(segments) = &self.segments else {
            return Ok(());
        };
        let ends = segments.policy().segment_end(now);
        // Room for a segment like the last one, and for the run's own files, before it starts.
        let room = self.last_segment_bytes + self.last_segment_bytes / 2 + ROOM_FOR_RUN_FILES;
        let freed = segments.ensure_room(None, room);
        let opened = segments
            .create(now)
            .and_then(|(name, path)| Ok((name, FileSet::create(&path, self.opts.video)?)));
        let (name, set) = match opened {
            Ok(o) => o,
            Err(e) if self.free_space_after(&e) => return self.open_segment(now),
            Err(e) => return Err(e),
        };
        for d in freed {
            self.deleted(d);
        }
        self.segment = Some(OpenSegment {
            name: name.clone(),
            ends,
        });
        self.set = Some(set);
        self.segments_opened += 1;
        self.log_event(&StreamEvent::SegmentOpened {
            segment: name.clone(),
        });
        let deleted = self
            .segments
            .as_ref()
            .map(|s| s.apply_retention(Some(&name), now))
            .unwrap_or_default();
        for d in deleted {
            self.deleted(d);
        }
        Ok(())
    }

    /// Segmented: finishes the current segment's files (its video's index) and says so; the
    /// error finishing them, if any (also logged and in `events.jsonl`).
    fn close_segment(&mut self) -> Option<OutputError> {
        let (Some(segment), Some(set)) = (self.segment.take(), self.set.take()) else {
            return None;
        };
        let frames = set.frames_written;
        let end = set.finish();
        if let Some(segments) = &self.segments {
            self.last_segment_bytes = segments.bytes_of(&segment.name);
        }
        if let Some(n) = end.video_frames {
            *self.video_frames_closed.get_or_insert(0) += n;
        }
        if let Some(e) = &end.error {
            log::warn!("segment {}: {e}", segment.name);
            self.log_event(&StreamEvent::WriteError {
                error: e.to_string(),
            });
        }
        self.log_event(&StreamEvent::SegmentClosed {
            segment: segment.name,
            frames,
        });
        end.error
    }

    /// After a write error: when it is a full disk and retention is set, deletes the oldest
    /// segment (not the current one) and says whether one was deleted.
    fn free_space_after(&mut self, e: &OutputError) -> bool {
        if !e.is_disk_full() {
            return false;
        }
        let current = self.segment.as_ref().map(|s| s.name.clone());
        let Some(d) = self
            .segments
            .as_ref()
            .and_then(|s| s.free_space(current.as_deref()))
        else {
            return false;
        };
        log::warn!("{e}: deleted the oldest segment {} to go on", d.segment);
        self.log_event(&StreamEvent::WriteError {
            error: e.to_string(),
        });
        self.deleted(d);
        true
    }

    /// Counts and records a segment deleted by retention.
    fn deleted(&mut self, d: Deleted) {
        self.segments_deleted += 1;
        log::info!(
            "retention ({}): deleted segment {} ({} bytes)",
            d.reason,
            d.segment,
            d.bytes
        );
        self.log_event(&StreamEvent::RetentionDeleted {
            segment: d.segment,
            bytes: d.bytes,
            reason: d.reason,
        });
    }

    /// Appends an event of the sink's own; a failure is logged (the event is about the files,
    /// which report their own errors).
    fn log_event(&mut self, event: &StreamEvent) {
        if let Err(e) = self.event(event) {
            log::warn!("{e}");
        }
    }

    /// Rewrites `timings.json` when the last write is `TIMINGS_EVERY` old (cheap otherwise),
    /// and, segmented, finishes a segment whose time is over while no frame comes.
    pub(crate) fn checkpoint(&mut self, counters: CounterSnapshot) -> Result<(), OutputError> {
        if self.timings_written.elapsed() < TIMINGS_EVERY {
            return Ok(());
        }
        self.timings_written = Instant::now();
        if self
            .segment
            .as_ref()
            .is_some_and(|s| SystemTime::now() >= s.ends)
        {
            let _ = self.close_segment();
        }
        let end = RunEnd {
            counters,
            wall_seconds: self.started.elapsed().as_secs_f64(),
            ended: String::new(),
        };
        let video_frames = self.video_frames();
        match self.write_timings(&end, false, video_frames) {
            Err(e) if self.free_space_after(&e) => self.write_timings(&end, false, video_frames),
            written => written,
        }
    }

    /// Frames in the overlay videos so far (`None`: none open or closed).
    fn video_frames(&self) -> Option<u64> {
        match (
            self.video_frames_closed,
            self.set.as_ref().and_then(FileSet::video_frames),
        ) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        }
    }

    /// Makes the next [`RunSink::checkpoint`] rewrite `timings.json`.
    fn checkpoint_due(&mut self) {
        self.timings_written = Instant::now()
            .checked_sub(TIMINGS_EVERY)
            .unwrap_or(self.started);
    }

    /// Appends `event` to `events.jsonl`; a lost or returning source also shows in
    /// `timings.json` (`"reconnecting"`, `"losses"`) at the next checkpoint.
    pub fn event(&mut self, event: &StreamEvent) -> Result<(), OutputError> {
        match event {
            StreamEvent::Source(SourceChange::Lost { .. }) => {
                self.reconnecting = true;
                self.losses += 1;
                self.checkpoint_due();
            }
            StreamEvent::Source(SourceChange::Back { .. }) => {
                self.reconnecting = false;
                self.checkpoint_due();
            }
            _ => {}
        }
        let record = events::event_record(self.opts.stream, &self.opts.source, event);
        let mut line = record.to_string();
        line.push('\n');
        self.events.append(line.as_bytes())
    }

    /// Ends the video (its index; segmented: the last segment), writes the header of an empty
    /// `tracks.csv`, the `finished` event (the last of `events.jsonl`) and the final
    /// `timings.json`. Does what it can after an error and reports the first.
    pub fn finish(mut self, end: &RunEnd) -> Finished {
        let mut error = None;
        if self.segments.is_some() {
            error = self.close_segment();
        } else if let Some(set) = self.set.take() {
            let set_end = set.finish();
            self.video_frames_closed = set_end.video_frames;
            error = set_end.error;
        }
        // The last event, after the last segment's.
        if let Err(e) = self.event(&StreamEvent::Finished {
            ended: end.ended.clone(),
        }) {
            error.get_or_insert(e);
        }
        let video_frames = self.video_frames_closed;
        let doc = self.timings_doc(end, true, video_frames);
        let path = self.dir.join("timings.json");
        let written = match files::write_json_atomic(&path, &doc) {
            Err(e) if self.free_space_after(&e) => files::write_json_atomic(&path, &doc),
            written => written,
        };
        if let Err(e) = written {
            error.get_or_insert(e);
        }
        let mut files: Vec<String> = files::RUN_FILES
            .iter()
            .filter(|n| self.dir.join(n).is_file())
            .map(|n| (*n).to_owned())
            .collect();
        if self.segments_opened > 0 {
            files.push(format!(
                "{SEGMENTS_DIR}/ ({} this run)",
                self.segments_opened
            ));
        }
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
        let segments = self.segments.as_ref().map(|s| {
            serde_json::json!({
                "seconds": s.policy().seconds,
                "current": self.segment.as_ref().map(|s| s.name.as_str()),
                "opened": self.segments_opened,
                "deleted": self.segments_deleted,
            })
        });
        serde_json::json!({
            "complete": complete,
            "ended": (!end.ended.is_empty()).then(|| crate::redact::text(&end.ended)),
            "source": crate::redact::text(&self.opts.source),
            "backend": self.opts.backend,
            "live": self.stream.live,
            "frame_rate": self.stream.frame_rate.map(|r| round3(r.fps())),
            "decoder": self.stream.decoder,
            "frame_memory": if self.stream.frames_on_device { "cuda" } else { "system" },
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
            "segments": segments,
            "regions": regions,
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
