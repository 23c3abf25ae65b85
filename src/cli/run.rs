//! `morphoscope run` (headless), `view`, and the default job of a bare `morphoscope`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use morphoscope::config::Settings;
use morphoscope::output::RunSink;
use morphoscope::compose::PictureFormat;
use morphoscope::pipeline::{Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::SourceSpec;

use super::CommonArgs;

/// Arguments of `run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// File, URI, camera[:N], test[:PATTERN], or a pipeline ending in `appsink name=sink`.
    pub source: String,
    /// Output folder.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Stop after this many frames.
    #[arg(long)]
    pub max_frames: Option<u64>,
    /// Do not write overlay.mp4.
    #[arg(long)]
    pub no_video: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Arguments of `view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// Source (default: the sample clip, else `test`).
    pub source: Option<String>,
}

/// The sample clip shipped by `scripts/setup.sh`, if present.
pub fn sample_clip() -> Option<PathBuf> {
    let candidates = [
        PathBuf::from("assets/samples/vtest.avi"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/samples/vtest.avi"),
    ];
    candidates.into_iter().find(|p| p.is_file())
}

/// SOURCE when none is given: `source.default`, else the sample clip, else `test`.
pub fn default_source(settings: &Settings) -> String {
    if !settings.source.default.is_empty() {
        return settings.source.default.clone();
    }
    match sample_clip() {
        Some(p) => p.display().to_string(),
        None => {
            log::warn!("sample clip not found (run scripts/setup.sh); using the test pattern");
            "test:ball".to_owned()
        }
    }
}

/// `morphoscope run`.
pub fn run(common: &CommonArgs, a: &RunArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    headless(common, &settings, &a.source, &a.out, a.max_frames, None, !a.no_video && settings.output.video, a.quiet)
}

/// `morphoscope view`: the viewer on SOURCE; without a display (or when no window can be
/// created), a headless run into `out/` with a warning.
pub fn view(common: &CommonArgs, a: &ViewArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let source = a.source.clone().unwrap_or_else(|| default_source(&settings));
    if let Some(code) = try_viewer(common, &settings, &source)? {
        return Ok(code);
    }
    headless(common, &settings, &source, Path::new("out"), None, Some(DEFAULT_JOB_CPU_FRAMES), settings.output.video, false)
}

/// A bare `morphoscope`: the viewer when a display exists and a window opens, else a headless
/// run into `out/`.
pub fn default_job(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let source = default_source(&settings);
    if let Some(code) = try_viewer(common, &settings, &source)? {
        return Ok(code);
    }
    log::info!("headless run of {source} into out/ (see `morphoscope --help`)");
    headless(common, &settings, &source, Path::new("out"), None, Some(DEFAULT_JOB_CPU_FRAMES), settings.output.video, false)
}

/// Frames the default job (and a `view` without a display) analyses when it falls back to the CPU backend (the CPU references
/// run at 1–4 fps on the sample clip; `morphoscope run` has no cap).
const DEFAULT_JOB_CPU_FRAMES: u64 = 150;

/// Runs the viewer when a display exists; `None` when the caller should run headless instead.
#[cfg(feature = "viewer")]
fn try_viewer(common: &CommonArgs, settings: &Settings, source: &str) -> anyhow::Result<Option<ExitCode>> {
    use morphoscope::ui::{UiError, ViewerOptions, display_available, run_viewer};
    if !display_available() {
        log::warn!("no display (DISPLAY/WAYLAND_DISPLAY unset): running headless into out/ instead of the viewer");
        return Ok(None);
    }
    let explicit = common.config.is_some() || !common.sets.is_empty();
    let opts = ViewerOptions::new(settings.clone(), explicit, source.to_owned(), common.backend(settings)?);
    match run_viewer(opts) {
        Ok(()) => Ok(Some(ExitCode::SUCCESS)),
        Err(UiError::NoWindow(e)) => {
            log::warn!("cannot open the viewer window ({e}); running headless into out/ instead");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Built without the `viewer` feature: always headless.
#[cfg(not(feature = "viewer"))]
fn try_viewer(_common: &CommonArgs, _settings: &Settings, _source: &str) -> anyhow::Result<Option<ExitCode>> {
    log::warn!("built without the viewer (feature `viewer`): running headless into out/");
    Ok(None)
}

fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    let style = if total.is_some() {
        "{spinner} {pos}/{len} frames [{elapsed_precise}<{eta_precise}] {per_sec} {msg}"
    } else {
        "{spinner} {pos} frames [{elapsed_precise}] {per_sec} {msg}"
    };
    if let Ok(s) = ProgressStyle::with_template(style) {
        pb.set_style(s);
    }
    pb
}

fn headless(
    common: &CommonArgs,
    settings: &Settings,
    source: &str,
    out: &Path,
    max_frames: Option<u64>,
    cpu_cap: Option<u64>,
    video: bool,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let spec = SourceSpec::parse(source)?;
    let backend = common.backend(settings)?;
    let max_frames = match (max_frames, cpu_cap, &backend) {
        (None, Some(cap), morphoscope::backend::Backend::Cpu) => {
            log::warn!("no GPU: the CPU backend analyses the first {cap} frames (`morphoscope run SOURCE` for all)");
            Some(cap)
        }
        _ => max_frames,
    };
    let want = if video { PictureWant::Every(PictureFormat::Rgb) } else { PictureWant::None };
    let pipeline = Pipeline::start(FrameSource::Spec(spec.clone()), settings, &backend, Delivery::All, want)
        .with_context(|| format!("cannot open {spec}"))?;
    let fps = match &spec {
        SourceSpec::Test(_) => settings.source.test.fps,
        _ => 25,
    };
    let mut sink = RunSink::create(out, video, settings.output.video_kbps, fps)?;
    let pb = progress_bar(max_frames.or(pipeline.estimated_frames).map(|n| max_frames.map_or(n, |m| m.min(n))), quiet);
    let started = Instant::now();
    let mut error = None;
    let mut written = 0u64;
    loop {
        let Ok(ev) = pipeline.events.recv() else { break };
        match ev {
            PipelineEvent::Frame(f) => {
                sink.write(&f)?;
                written += 1;
                pb.inc(1);
                if max_frames.is_some_and(|m| written >= m) {
                    break;
                }
            }
            PipelineEvent::Error(e) => {
                error = Some(e);
                break;
            }
            PipelineEvent::End => break,
        }
    }
    pb.finish_and_clear();
    let counters = pipeline.counters.snapshot();
    let pipeline_estimate = pipeline.estimated_frames;
    let backend_name = pipeline.backend.clone();
    if max_frames.is_some_and(|m| written >= m) {
        pipeline.stop();
    } else {
        pipeline.join();
    }
    let wall = started.elapsed().as_secs_f64();
    let mut counters = counters;
    counters.frames_out = written;
    let timings = sink.finish(counters, wall, &backend_name, &spec.to_string())?;
    println!("morphoscope run: {spec}");
    println!("backend: {backend_name}");
    println!(
        "frames: in {} | out {} | dropped {} | {:.1} s wall | {:.1} fps",
        counters.frames_in,
        written,
        counters.dropped,
        wall,
        if wall > 0.0 { written as f64 / wall } else { 0.0 }
    );
    print!("{}", timings.table());
    println!("outputs: {}/frames.jsonl, timings.json{}", out.display(), if video { ", overlay.mp4" } else { "" });
    if let Some(e) = error {
        eprintln!("error: {e} (after {written} frames; outputs hold the frames analysed before it)");
        return Ok(ExitCode::from(1));
    }
    let expected = pipeline_estimate.filter(|_| max_frames.is_none() && matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_)));
    if let Some(n) = expected.filter(|&n| n > 0 && written * 100 < n * 95) {
        eprintln!("error: stream ended early: {written} of ~{n} frames (truncated or damaged file?); outputs hold the frames decoded");
        return Ok(ExitCode::from(1));
    }
    if written == 0 {
        eprintln!("error: the source produced no frames");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
