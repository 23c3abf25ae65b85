//! `morphoscope bench`: per-region and whole-pipeline timings on real frames.
//!
//! Frames: the first `--frames` frames of a real clip (default: the sample clip) scaled to
//! `--size` by GStreamer, held in memory; without a clip, a real sample image mirrored-tiled to
//! the size. Never zeros or a constant image. Each backend runs `--warmup` frames first (module
//! load, allocations), then the measured frames; regions are CUDA-event times on the GPU and
//! wall-clock times on the CPU. The frames go through the whole pipeline (source thread, worker,
//! ring, collector) from memory, so the sustained rate is what a headless run reaches without
//! decoding; `--sink` says what the consumer asks of each frame (tables only, the composed
//! picture, or the picture encoded). Beside it, the compute time a frame (the sum of its
//! regions) gives the rate the device (or the CPU) would sustain with no overlap between frames.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use std::sync::Arc;

use morphoscope::backend::{self, Backend};
use morphoscope::compose::PictureFormat;
use morphoscope::config::{BackendChoice, Settings};
use morphoscope::image::DynImage;
use morphoscope::output::encoder::{choose_encoder, installed_encoder};
use morphoscope::output::video::{InputLayout, VideoSpec, VideoWriter};
use morphoscope::pipeline::{Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::spec::{CONVERTER_THREADS, SINK_TAIL};
use morphoscope::source::{Frame, FrameFormat, FrameRate, Source, SourceSpec};
use morphoscope::stats::Summary;

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
    /// What happens to each analysed frame: tables only, the composed picture, or the picture
    /// encoded to H.264.
    #[arg(long, value_enum, default_value = "none")]
    pub sink: BenchSink,
    /// Also write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Live streams instead: this many pipelines side by side, each fed in real time from the
    /// frames in memory at --fps for --seconds (after --warmup frames), spread over --device.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub streams: Option<u64>,
    /// With --streams N: find the most streams (up to N) that hold --fps with no frame dropped.
    #[arg(long, requires = "streams")]
    pub streams_sweep: bool,
    /// Frames a second of each live stream (--streams).
    #[arg(long, default_value_t = 30.0)]
    pub fps: f64,
    /// Measured seconds of each live-stream trial (--streams).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Run the analyses on this many SMs (`pipeline.sm_limit`: a green context; the driver
    /// rounds up to its partition size), e.g. a Jetson's count on a large GPU.
    #[arg(long)]
    pub sms: Option<u32>,
}

fn parse_size(s: &str) -> anyhow::Result<(u32, u32)> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .with_context(|| format!("--size `{s}`: expected WIDTHxHEIGHT"))?;
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
        SINK_TAIL,
        &format!(
            "videoconvert n-threads={CONVERTER_THREADS} ! videoscale ! video/x-raw,width={w},height={h} ! appsink name=sink"
        ),
    );
    let mut src = Source::open(
        &SourceSpec::Pipeline(scaled),
        FrameFormat::Rgb,
        &Default::default(),
        false,
    )?;
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
    let path = ["fruits.jpg", "baboon.jpg", "building.jpg"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .context("no sample clip or image: run scripts/setup.sh")?;
    let DynImage::Rgb8(src) = morphoscope::io::read_image(&path)? else {
        bail!("sample image is not RGB")
    };
    let img = src.mirror_tiled(w as usize, h as usize);
    Ok(vec![Frame {
        index: 0,
        pts_nanos: None,
        image: DynImage::Rgb8(img).into(),
        after_gap: false,
    }])
}

/// What the benchmark's consumer does with each analysed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchSink {
    /// Tables only: no picture is composed or read back.
    None,
    /// The composed picture of every frame (as the viewer gets it), read back and dropped.
    Picture,
    /// The composed picture of every frame encoded to H.264 (a temporary file).
    Video,
}

struct BackendResult {
    backend: String,
    regions: Vec<(String, Summary)>,
    /// Wall time between consecutive deliveries, after warm-up.
    frame_wall: Summary,
    /// Sum of the device regions of a frame (CUDA events) or of the CPU regions.
    compute: Summary,
    fps: f64,
}

/// Runs `warmup + n` frames through the whole pipeline (worker, ring, collector, consumer) with
/// frames held in memory, and times the `n` after the warm-up.
fn measure(
    backend: &Backend,
    settings: &Settings,
    frames: &Arc<Vec<Frame>>,
    warmup: usize,
    n: usize,
    sink: BenchSink,
) -> anyhow::Result<BackendResult> {
    let want = match sink {
        BenchSink::None => PictureWant::None,
        BenchSink::Picture => PictureWant::Every(PictureFormat::Rgba),
        BenchSink::Video => PictureWant::Every(PictureFormat::I420),
    };
    let source = FrameSource::Memory {
        frames: frames.clone(),
        count: (warmup + n) as u64,
    };
    let pipeline = Pipeline::start(source, settings, backend, Delivery::All, want)?;
    let tmp = std::env::temp_dir().join(format!("morphoscope-bench-{}", std::process::id()));
    let mut video = None;
    let mut log = morphoscope::output::TimingLog::default();
    let mut walls = Vec::new();
    let mut computes = Vec::new();
    let (mut seen, mut start, mut last) = (0usize, None, Instant::now());
    loop {
        match pipeline.events.recv() {
            Ok(PipelineEvent::Frame(f)) => {
                seen += 1;
                if sink == BenchSink::Video
                    && let Some(p) = f.picture.as_deref()
                {
                    if video.is_none() {
                        std::fs::create_dir_all(&tmp)?;
                        let encoder = choose_encoder(
                            settings.output.encoder,
                            p.width,
                            p.height,
                            installed_encoder,
                        )?;
                        println!("bench: video sink encodes with {encoder}");
                        let spec = VideoSpec {
                            width: p.width,
                            height: p.height,
                            layout: InputLayout::I420,
                            frame_rate: FrameRate::new(30, 1),
                            kbps: settings.output.video_kbps,
                            encoder,
                        };
                        video = Some(VideoWriter::create(&tmp.join("bench.mkv"), spec)?);
                    }
                    if let Some(v) = video.as_mut() {
                        v.push_i420(&p.data, p.width, p.height, f.pts_nanos)?;
                    }
                }
                if seen > warmup {
                    if start.is_none() {
                        start = Some(Instant::now());
                    } else {
                        walls.push(last.elapsed().as_secs_f64() * 1e3);
                    }
                    log.add(&f);
                    computes.push(f.timings.compute_ms);
                }
                last = Instant::now();
            }
            Ok(PipelineEvent::Error(e)) => bail!("{e}"),
            Ok(PipelineEvent::End) | Err(_) => break,
        }
    }
    if let Some(v) = video {
        v.finish()?;
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let measured = walls.len();
    let wall = start.map_or(0.0, |s| s.elapsed().as_secs_f64());
    let backend_name = pipeline.backend.clone();
    pipeline.join();
    Ok(BackendResult {
        backend: backend_name,
        regions: log.summaries(),
        frame_wall: Summary::of(&walls),
        compute: Summary::of(&computes),
        fps: if wall > 0.0 {
            measured as f64 / wall
        } else {
            0.0
        },
    })
}

/// `morphoscope bench`.
pub fn bench(common: &CommonArgs, a: &BenchArgs) -> anyhow::Result<ExitCode> {
    let mut settings = common.settings()?;
    if let Some(sms) = a.sms {
        settings.pipeline.sm_limit = sms;
    }
    let (w, h) = parse_size(&a.size)?;
    if a.frames == 0 {
        bail!("--frames 0: at least 1 frame is measured");
    }
    let frames = Arc::new(
        match a
            .source
            .clone()
            .or_else(|| super::run::sample_clip().map(|p| p.display().to_string()))
        {
            Some(s) => load_frames(&s, w, h, a.frames.clamp(1, 120))?,
            None => tiled_sample(w, h)?,
        },
    );
    if let Some(n) = a.streams {
        return bench_streams(common, &settings, a, frames, (w, h), n);
    }
    let mpix = f64::from(w) * f64::from(h) / 1e6;
    let mut results = Vec::new();
    let want_cpu = a.backends != BenchBackends::Cuda;
    let want_cuda = a.backends != BenchBackends::Cpu;
    if want_cpu {
        results.push(measure(
            &Backend::Cpu,
            &settings,
            &frames,
            a.warmup.min(3),
            a.frames.clamp(1, 30),
            a.sink,
        )?);
    }
    if want_cuda {
        let choice = if a.backends == BenchBackends::Cuda {
            BackendChoice::Cuda
        } else {
            BackendChoice::Auto
        };
        match backend::select(choice, settings.pipeline.device, settings.pipeline.sm_limit)? {
            (b @ Backend::Cuda(_), _) => {
                results.push(measure(&b, &settings, &frames, a.warmup, a.frames, a.sink)?)
            }
            (Backend::Cpu, why) => println!("cuda: skipped ({why})"),
        }
    }
    println!(
        "bench: {w}x{h} ({mpix:.2} MPix), {} distinct real frames, ring {} slots, sink {:?}",
        frames.len(),
        settings.pipeline.ring_size,
        a.sink
    );
    println!(
        "{:<8} {:<34} {:>7} {:>10} {:>10} {:>10}",
        "backend", "region", "frames", "median ms", "p95 ms", "MPix/s"
    );
    let mut json = Vec::new();
    for r in &results {
        let short = r.backend.split(':').next().unwrap_or("?").to_owned();
        for (name, s) in &r.regions {
            let rate = if s.median_ms > 0.0 {
                mpix / (s.median_ms / 1e3)
            } else {
                0.0
            };
            println!(
                "{short:<8} {name:<34} {:>7} {:>10.3} {:>10.3} {:>10.0}",
                s.count, s.median_ms, s.p95_ms, rate
            );
            json.push(serde_json::json!({"backend": short, "region": name, "count": s.count, "median_ms": s.median_ms, "p95_ms": s.p95_ms, "mpix_per_s": rate}));
        }
        let rate = |ms: f64| if ms > 0.0 { 1e3 / ms } else { 0.0 };
        println!(
            "{short:<8} {:<34} {:>7} {:>10.3} {:>10.3} {:>10.0}   ({:.1} fps: compute-bound, no overlap between frames)",
            "compute (sum of regions a frame)",
            r.compute.count,
            r.compute.median_ms,
            r.compute.p95_ms,
            if r.compute.median_ms > 0.0 {
                mpix / (r.compute.median_ms / 1e3)
            } else {
                0.0
            },
            rate(r.compute.median_ms)
        );
        println!(
            "{short:<8} {:<34} {:>7} {:>10.3} {:>10.3} {:>10.0}   ({:.1} fps sustained; {:.2}x the compute time)",
            "pipeline (wall per frame)",
            r.frame_wall.count,
            r.frame_wall.median_ms,
            r.frame_wall.p95_ms,
            if r.frame_wall.median_ms > 0.0 {
                mpix / (r.frame_wall.median_ms / 1e3)
            } else {
                0.0
            },
            r.fps,
            if r.compute.median_ms > 0.0 && r.fps > 0.0 {
                1e3 / r.fps / r.compute.median_ms
            } else {
                0.0
            }
        );
        json.push(serde_json::json!({"backend": short, "device": r.backend, "region": "compute", "count": r.compute.count, "median_ms": r.compute.median_ms, "p95_ms": r.compute.p95_ms, "fps": rate(r.compute.median_ms)}));
        json.push(serde_json::json!({"backend": short, "device": r.backend, "region": "pipeline", "count": r.frame_wall.count, "median_ms": r.frame_wall.median_ms, "p95_ms": r.frame_wall.p95_ms, "fps": r.fps}));
    }
    if let Some(p) = &a.json {
        let doc = serde_json::json!({"width": w, "height": h, "frames": frames.len(), "sink": format!("{:?}", a.sink).to_lowercase(), "rows": json});
        morphoscope::io::write_json(p, &doc)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `bench --streams N [--streams-sweep]`: live streams paced in real time ([`super::bench_streams`]).
fn bench_streams(
    common: &CommonArgs,
    settings: &Settings,
    a: &BenchArgs,
    frames: Arc<Vec<Frame>>,
    (w, h): (u32, u32),
    n: u64,
) -> anyhow::Result<ExitCode> {
    use super::bench_streams::{StreamsPlan, print_trial, sweep, trial};
    let want = match a.sink {
        BenchSink::None => PictureWant::None,
        BenchSink::Picture => PictureWant::Every(PictureFormat::Rgba),
        BenchSink::Video => {
            bail!("--sink video is not measured with --streams (use none or picture)")
        }
    };
    let backends = common.backends(settings)?;
    let plan = StreamsPlan {
        settings,
        backends: &backends,
        frames,
        fps: a.fps,
        seconds: a.seconds,
        warmup_frames: a.warmup as u64,
        want,
    };
    plan.frame_count()?;
    let devices: Vec<String> = backends.iter().map(Backend::describe).collect();
    println!(
        "bench --streams: {w}x{h}, {} distinct real frames, {} fps a stream, {} s measured after {} frames of warm-up, sink {:?}, ring {} slots, on {}",
        plan.frames.len(),
        a.fps,
        a.seconds,
        a.warmup,
        a.sink,
        settings.pipeline.ring_size,
        devices.join("; ")
    );
    let n = usize::try_from(n)?;
    let trials = if a.streams_sweep {
        sweep(&plan, n)?
    } else {
        vec![trial(&plan, n)?]
    };
    let best = trials.iter().filter(|t| t.held).max_by_key(|t| t.streams);
    if a.streams_sweep {
        match best {
            Some(t) => {
                println!(
                    "most streams that hold {} fps: {} (per stream below)",
                    a.fps, t.streams
                );
                print_trial(t, a.fps);
            }
            None => println!("not even 1 stream holds {} fps", a.fps),
        }
        if let Some(t) = trials.iter().filter(|t| !t.held).min_by_key(|t| t.streams) {
            println!("fewest streams that did not hold: {}", t.streams);
            print_trial(t, a.fps);
        }
    } else if let Some(t) = trials.first() {
        print_trial(t, a.fps);
    }
    if let Some(p) = &a.json {
        let doc = serde_json::json!({
            "width": w, "height": h, "fps": a.fps, "seconds": a.seconds, "warmup_frames": a.warmup,
            "sink": format!("{:?}", a.sink).to_lowercase(), "devices": devices,
            "most_streams_held": best.map(|t| t.streams), "trials": trials,
        });
        morphoscope::io::write_json(p, &doc)?;
    }
    Ok(ExitCode::SUCCESS)
}
