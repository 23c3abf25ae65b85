//! `morphoscope bench`: per-region and whole-pipeline timings on real frames.
//!
//! Frames: the first `--frames` frames of a real clip (default: the sample clip) scaled to
//! `--size` by GStreamer, held in memory; without a clip, a real sample image mirrored-tiled to
//! the size. Never zeros or a constant image. Each backend runs `--warmup` frames first (module
//! load, allocations), then the measured frames; regions are CUDA-event times on the GPU and
//! wall-clock times on the CPU. Whole-pipeline throughput is wall time over the measured frames
//! with the ring full (CUDA), i.e. what a headless run sustains without decoding.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::{self, Backend};
use morphoscope::config::{BackendChoice, Settings};
use morphoscope::image::{DynImage, Image};
use morphoscope::pipeline::{Engine, Submitted, Summary};
use morphoscope::source::{Frame, FrameFormat, Source, SourceSpec};

use super::CommonArgs;

/// Which backends to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchBackends {
    /// CPU only.
    Cpu,
    /// CUDA only.
    Cuda,
    /// Both, side by side.
    All,
}

/// Arguments of `bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Frame size WIDTHxHEIGHT.
    #[arg(long, default_value = "1920x1080")]
    pub size: String,
    /// Source of real frames (default: the sample clip).
    #[arg(long)]
    pub source: Option<String>,
    /// Measured frames per backend.
    #[arg(long, default_value_t = 100)]
    pub frames: usize,
    /// Warm-up frames per backend (not measured).
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Backends to measure.
    #[arg(long = "backends", value_enum, default_value = "all")]
    pub backends: BenchBackends,
    /// Also write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

fn parse_size(s: &str) -> anyhow::Result<(u32, u32)> {
    let (w, h) = s.split_once(['x', 'X']).with_context(|| format!("--size `{s}`: expected WIDTHxHEIGHT"))?;
    let (w, h): (u32, u32) = (w.trim().parse()?, h.trim().parse()?);
    if w == 0 || h == 0 || u64::from(w) * u64::from(h) >= 1 << 31 {
        bail!("--size {w}x{h}: out of range");
    }
    Ok((w, h))
}

/// Decodes up to `n` real frames at `w`×`h` from `source`.
fn load_frames(source: &str, w: u32, h: u32, n: usize) -> anyhow::Result<Vec<Frame>> {
    let spec = SourceSpec::parse(source)?;
    let base = spec.pipeline_description(&Default::default())?;
    let scaled = base.replace(
        "videoconvert ! appsink name=sink",
        &format!("videoconvert ! videoscale ! video/x-raw,width={w},height={h} ! appsink name=sink"),
    );
    let mut src = Source::open(&SourceSpec::Pipeline(scaled), FrameFormat::Rgb, &Default::default(), false)?;
    let mut frames = Vec::new();
    while frames.len() < n {
        match src.next_frame()? {
            Some(f) => frames.push(f),
            None => break,
        }
    }
    if frames.is_empty() {
        bail!("{source} gave no frames");
    }
    Ok(frames)
}

/// A real sample image mirrored-tiled to `w`×`h` (fallback when no clip is available).
fn tiled_sample(w: u32, h: u32) -> anyhow::Result<Vec<Frame>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/samples");
    let path = ["fruits.jpg", "baboon.jpg", "building.jpg"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
        .context("no sample clip or image: run scripts/setup.sh")?;
    let DynImage::Rgb8(src) = morphoscope::io::read_image(&path)? else { bail!("sample image is not RGB") };
    let (sw, sh) = (src.width(), src.height());
    let img = Image::from_fn(w as usize, h as usize, |x, y| {
        let sx = if (x / sw) % 2 == 0 { x % sw } else { sw - 1 - x % sw };
        let sy = if (y / sh) % 2 == 0 { y % sh } else { sh - 1 - y % sh };
        src.get(sx, sy)
    });
    Ok(vec![Frame { index: 0, pts_nanos: None, image: DynImage::Rgb8(img) }])
}

struct BackendResult {
    backend: String,
    regions: Vec<(String, Summary)>,
    frame_wall: Summary,
    fps: f64,
}

fn measure(backend: &Backend, settings: &Settings, frames: &[Frame], warmup: usize, n: usize) -> anyhow::Result<BackendResult> {
    let mut engine = Engine::new(backend, &settings.ops, settings.pipeline.ring_size)?;
    let mut done: Vec<AnalysedFrame> = Vec::new();
    let submit = |engine: &mut Engine, k: usize| -> anyhow::Result<Vec<AnalysedFrame>> {
        let mut f = frames[k % frames.len()].clone();
        f.index = k as u64;
        Ok(engine.submit(Submitted { frame: f, received: Instant::now(), queue_wait_ms: 0.0 })?)
    };
    for k in 0..warmup {
        submit(&mut engine, k)?;
    }
    engine.flush()?;
    let start = Instant::now();
    let mut last = start;
    let mut walls = Vec::new();
    for k in warmup..warmup + n {
        let out = submit(&mut engine, k)?;
        if !out.is_empty() {
            walls.push(last.elapsed().as_secs_f64() * 1e3);
            last = Instant::now();
        }
        done.extend(out);
    }
    done.extend(engine.flush()?);
    let wall = start.elapsed().as_secs_f64();
    let mut log = morphoscope::output::TimingLog::default();
    for f in &done {
        log.add(f);
    }
    Ok(BackendResult { backend: backend.describe(), regions: log.summaries(), frame_wall: Summary::of(&walls), fps: done.len() as f64 / wall })
}

/// `morphoscope bench`.
pub fn bench(common: &CommonArgs, a: &BenchArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let (w, h) = parse_size(&a.size)?;
    let frames = match a.source.clone().or_else(|| super::run::sample_clip().map(|p| p.display().to_string())) {
        Some(s) => load_frames(&s, w, h, a.frames.clamp(1, 120))?,
        None => tiled_sample(w, h)?,
    };
    let mpix = f64::from(w) * f64::from(h) / 1e6;
    let mut results = Vec::new();
    let want_cpu = a.backends != BenchBackends::Cuda;
    let want_cuda = a.backends != BenchBackends::Cpu;
    if want_cpu {
        results.push(measure(&Backend::Cpu, &settings, &frames, a.warmup.min(3), a.frames.clamp(1, 30))?);
    }
    if want_cuda {
        let choice = if a.backends == BenchBackends::Cuda { BackendChoice::Cuda } else { BackendChoice::Auto };
        match backend::select(choice, settings.pipeline.device)? {
            (b @ Backend::Cuda(_), _) => results.push(measure(&b, &settings, &frames, a.warmup, a.frames)?),
            (Backend::Cpu, why) => println!("cuda: skipped ({why})"),
        }
    }
    println!("bench: {w}x{h} ({mpix:.2} MPix), {} distinct real frames, ring {} slots", frames.len(), settings.pipeline.ring_size);
    println!("{:<8} {:<34} {:>7} {:>10} {:>10} {:>10}", "backend", "region", "frames", "median ms", "p95 ms", "MPix/s");
    let mut json = Vec::new();
    for r in &results {
        let short = r.backend.split(':').next().unwrap_or("?").to_owned();
        for (name, s) in &r.regions {
            let rate = if s.median_ms > 0.0 { mpix / (s.median_ms / 1e3) } else { 0.0 };
            println!("{short:<8} {name:<34} {:>7} {:>10.3} {:>10.3} {:>10.0}", s.count, s.median_ms, s.p95_ms, rate);
            json.push(serde_json::json!({"backend": short, "region": name, "count": s.count, "median_ms": s.median_ms, "p95_ms": s.p95_ms, "mpix_per_s": rate}));
        }
        println!(
            "{short:<8} {:<34} {:>7} {:>10.3} {:>10.3} {:>10.0}   ({:.1} fps sustained)",
            "pipeline (wall per frame)", r.frame_wall.count, r.frame_wall.median_ms, r.frame_wall.p95_ms,
            if r.frame_wall.median_ms > 0.0 { mpix / (r.frame_wall.median_ms / 1e3) } else { 0.0 }, r.fps
        );
        json.push(serde_json::json!({"backend": short, "device": r.backend, "region": "pipeline", "count": r.frame_wall.count, "median_ms": r.frame_wall.median_ms, "p95_ms": r.frame_wall.p95_ms, "fps": r.fps}));
    }
    if let Some(p) = &a.json {
        let doc = serde_json::json!({"width": w, "height": h, "frames": frames.len(), "rows": json});
        morphoscope::io::write_json(p, &doc)?;
    }
    Ok(ExitCode::SUCCESS)
}
