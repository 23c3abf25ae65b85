//! Headless sinks of `morphoscope run`: `frames.jsonl` (one JSON object per frame: index, pts,
//! each analysis' summary, every timed region), `timings.json` (per region: count, median, p95,
//! max ms; frames in/out/dropped; wall time) and `overlay.mp4` (the frame with every overlay).
//! Analyses may add their own files through [`RunSink::extra_writer`] (tracks CSV, components).

pub mod compose;
pub mod video;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::analysis::AnalysedFrame;
use crate::pipeline::{CounterSnapshot, Summary};

/// Errors writing outputs.
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
    /// The encoder failed.
    #[error("overlay video: {0}")]
    Video(String),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io { path: path.to_owned(), source }
}

/// Per-region timing samples, in first-seen order.
#[derive(Debug, Default)]
pub struct TimingLog {
    order: Vec<String>,
    samples: BTreeMap<String, Vec<f64>>,
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
        let extra = extra.into_iter().filter(|(n, _)| !(cpu && (*n == "upload" || *n == "download")));
        for (name, ms) in t.regions.iter().map(|(n, ms)| (n.as_str(), *ms)).chain(extra) {
            if !self.samples.contains_key(name) {
                self.order.push(name.to_owned());
            }
            self.samples.entry(name.to_owned()).or_default().push(ms);
        }
    }
    /// (region, summary) in first-seen order.
    #[must_use]
    pub fn summaries(&self) -> Vec<(String, Summary)> {
        self.order.iter().map(|n| (n.clone(), Summary::of(self.samples.get(n).map_or(&[][..], Vec::as_slice)))).collect()
    }
    /// A plain-text table of the summaries.
    #[must_use]
    pub fn table(&self) -> String {
        let mut s = format!("{:<34} {:>7} {:>10} {:>10} {:>10}\n", "region", "frames", "median ms", "p95 ms", "max ms");
        for (n, m) in self.summaries() {
            s.push_str(&format!("{n:<34} {:>7} {:>10.3} {:>10.3} {:>10.3}\n", m.count, m.median_ms, m.p95_ms, m.max_ms));
        }
        s
    }
}

/// The writer of a run's output folder.
pub struct RunSink {
    dir: PathBuf,
    frames: std::io::BufWriter<std::fs::File>,
    video: Option<video::VideoWriter>,
    want_video: bool,
    video_kbps: u32,
    fps: u32,
    /// Timings of every frame.
    pub timings: TimingLog,
    extra: BTreeMap<&'static str, std::io::BufWriter<std::fs::File>>,
}

impl RunSink {
    /// Creates `dir` and opens `frames.jsonl`.
    pub fn create(dir: &Path, want_video: bool, video_kbps: u32, fps: u32) -> Result<Self, OutputError> {
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
        let p = dir.join("frames.jsonl");
        let frames = std::io::BufWriter::new(std::fs::File::create(&p).map_err(io_at(&p))?);
        Ok(Self { dir: dir.to_owned(), frames, video: None, want_video, video_kbps, fps, timings: TimingLog::default(), extra: BTreeMap::new() })
    }

    /// A writer for an extra file in the output folder (created on first use).
    pub fn extra_writer(&mut self, name: &'static str) -> Result<&mut std::io::BufWriter<std::fs::File>, OutputError> {
        if !self.extra.contains_key(name) {
            let p = self.dir.join(name);
            let f = std::fs::File::create(&p).map_err(io_at(&p))?;
            self.extra.insert(name, std::io::BufWriter::new(f));
        }
        let p = self.dir.join(name);
        self.extra.get_mut(name).ok_or_else(|| OutputError::Io { path: p, source: std::io::Error::other("writer missing") })
    }

    /// Writes one analysed frame.
    pub fn write(&mut self, f: &AnalysedFrame) -> Result<(), OutputError> {
        let mut ops = serde_json::Map::new();
        for o in &f.outputs {
            ops.insert(o.op.to_owned(), o.summary.clone());
        }
        let regions: serde_json::Map<String, serde_json::Value> =
            f.timings.regions.iter().map(|(n, ms)| (n.clone(), serde_json::json!(round3(*ms)))).collect();
        let line = serde_json::json!({
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
        });
        let p = self.dir.join("frames.jsonl");
        serde_json::to_writer(&mut self.frames, &line).map_err(|e| OutputError::Io { path: p.clone(), source: e.into() })?;
        self.frames.write_all(b"\n").map_err(io_at(&p))?;
        self.timings.add(f);
        for o in &f.outputs {
            for (file, line) in &o.records {
                let w = self.extra_writer(file)?;
                let p = PathBuf::from(file);
                w.write_all(line.as_bytes()).and_then(|()| w.write_all(b"\n")).map_err(io_at(&p))?;
            }
        }
        if self.want_video {
            let (w, h) = f.size();
            if self.video.is_none() {
                self.video = Some(video::VideoWriter::create(&self.dir.join("overlay.mp4"), w, h, self.fps, self.video_kbps)?);
            }
            if let Some(v) = self.video.as_mut() {
                v.push(&picture_rgb(f))?;
            }
        }
        Ok(())
    }

    /// Flushes everything, finalises the video and writes `timings.json`.
    pub fn finish(mut self, counters: CounterSnapshot, wall_seconds: f64, backend: &str, source: &str) -> Result<TimingLog, OutputError> {
        let p = self.dir.join("frames.jsonl");
        self.frames.flush().map_err(io_at(&p))?;
        for (name, w) in &mut self.extra {
            let p = self.dir.join(name);
            w.flush().map_err(io_at(&p))?;
        }
        let video_frames = match self.video.take() {
            Some(v) => Some(v.finish()?),
            None => None,
        };
        let regions: serde_json::Map<String, serde_json::Value> = self
            .timings
            .summaries()
            .into_iter()
            .map(|(n, s)| (n, serde_json::json!({"count": s.count, "median_ms": round3(s.median_ms), "p95_ms": round3(s.p95_ms), "max_ms": round3(s.max_ms), "mean_ms": round3(s.mean_ms)})))
            .collect();
        let fps = if wall_seconds > 0.0 { counters.frames_out as f64 / wall_seconds } else { 0.0 };
        let doc = serde_json::json!({
            "source": source,
            "backend": backend,
            "frames_in": counters.frames_in,
            "frames_out": counters.frames_out,
            "dropped": counters.dropped,
            "video_frames": video_frames,
            "wall_seconds": round3(wall_seconds),
            "fps": round3(fps),
            "regions": regions,
        });
        let p = self.dir.join("timings.json");
        let f = std::fs::File::create(&p).map_err(io_at(&p))?;
        serde_json::to_writer_pretty(f, &doc).map_err(|e| OutputError::Io { path: p.clone(), source: e.into() })?;
        Ok(self.timings)
    }
}

/// The frame's composed picture as RGB: the one the pipeline composed (off this thread), else
/// composed here.
fn picture_rgb(f: &AnalysedFrame) -> crate::image::Image<[u8; 3]> {
    if let Some(p) = f.picture.as_deref()
        && p.format == crate::compose::PictureFormat::Rgb
        && let Ok(img) = crate::image::Image::from_vec(p.width, p.height, p.data.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    {
        return img;
    }
    compose::compose(f)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
