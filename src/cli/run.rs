//! `morphoscope run` (headless), `view`, and the default job of a bare `morphoscope`.
//!
//! A headless run checks its output folder first, installs the stop signals, starts the
//! pipeline, takes over the folder (an earlier run's files are removed, and it says so), then
//! writes every frame as it arrives ([`morphoscope::lifecycle`]; several sources:
//! [`super::streams`]). However it ends — end of stream, `--max-frames`, Ctrl+C or
//! SIGTERM, a source error, a write error — it finishes every file it can, prints the summary
//! (frames in = out + dropped + in flight) and exits: 0, 1 on an error (one line naming the
//! cause), 128 + the signal after a stop.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use morphoscope::backend::Backend;
use morphoscope::config::Settings;
use morphoscope::lifecycle::{self, StopRequest, StreamJob, StreamOutput, StreamPublishing};
use morphoscope::output::RunSink;
use morphoscope::publish::Publisher;
use morphoscope::source::SourceSpec;

use super::CommonArgs;
use super::signals::{self, StopSignals};
use super::stream::{self, ProgressObserver};

/// Arguments of `run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// File, URI, camera[:N], test[:PATTERN], or a pipeline ending in `appsink name=sink`.
    /// Several sources run side by side, stream i writing into OUT/<i>/. None with --listen:
    /// a service whose streams are added over HTTP.
    #[arg(num_args = 0..)]
    pub sources: Vec<String>,
    /// Output folder. Files an earlier run wrote there are replaced; other files are kept.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Stop after analysing this many frames (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_frames: Option<u64>,
    /// Do not write overlay.mkv.
    #[arg(long)]
    pub no_video: bool,
    /// No progress (bar in a terminal, status lines otherwise).
    #[arg(long)]
    pub quiet: bool,
    /// mqtt://HOST[:PORT][/PREFIX] or mqtts://… (overrides publish.url; the login comes from
    /// the config file or the environment, never from the command line).
    #[arg(long, value_name = "URL")]
    pub publish: Option<std::ffi::OsString>,
    /// Serve the HTTP endpoint on ADDR:PORT (overrides service.listen; port 0: any free port):
    /// metrics, health, streams added and removed, settings changed live (docs/service.md).
    /// Runs until Ctrl+C or SIGTERM; every stream writes into OUT/<id>/.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
}

/// Arguments of `view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// Source (default: the sample clip, else `test`). Several sources: a grid of the streams
    /// (click one to focus it).
    pub sources: Vec<String>,
    /// Close the window by itself after this many seconds (smoke tests, demos).
    #[arg(long, value_name = "SECONDS")]
    pub quit_after: Option<f64>,
    /// How the window is drawn: glow (OpenGL, the default: faster to start and under Mesa) or
    /// wgpu (for drivers without usable OpenGL).
    #[arg(long, value_enum, default_value = "glow")]
    pub renderer: Renderer,
}

/// The viewer's renderer (`view --renderer`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renderer {
    /// OpenGL through glow.
    Glow,
    /// wgpu (Vulkan, GL or Metal as the platform offers).
    Wgpu,
}

/// How the window of `view` behaves (its options; defaults for a bare `morphoscope`).
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(not(feature = "viewer"), allow(dead_code))]
struct WindowOptions {
    quit_after: Option<f64>,
    wgpu: bool,
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
    let mut settings = common.settings()?;
    if let Some(url) = &a.publish {
        settings.publish.url = url.to_str().map(str::to_owned).ok_or_else(|| {
            anyhow::anyhow!(
                "invalid broker URL {}: not UTF-8 (MQTT topics are UTF-8 text)",
                url.to_string_lossy().escape_debug()
            )
        })?;
    }
    if let Some(listen) = &a.listen {
        settings.service.listen.clone_from(listen);
        settings.validate()?;
    }
    let video = !a.no_video && settings.output.video;
    if !settings.service.listen.is_empty() {
        return super::service::run_service(
            common,
            &settings,
            &a.sources,
            &a.out,
            a.max_frames,
            video,
        );
    }
    match a.sources.as_slice() {
        [] => anyhow::bail!(
            "no SOURCE given (a file, URI, camera, test pattern or pipeline; or --listen ADDR:PORT \
             to serve streams added over HTTP)"
        ),
        [one] => headless(
            common,
            &settings,
            one,
            &a.out,
            a.max_frames,
            None,
            video,
            a.quiet,
        ),
        many => {
            super::streams::run_streams(common, &settings, many, &a.out, a.max_frames, None, video)
        }
    }
}

/// `morphoscope view`: the viewer on SOURCE; without a display (or when no window can be
/// created), a headless run into `out/` with a warning.
pub fn view(common: &CommonArgs, a: &ViewArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let sources = match a.sources.as_slice() {
        [] => vec![default_source(&settings)],
        some => some.to_vec(),
    };
    let window = WindowOptions {
        quit_after: a.quit_after,
        wgpu: a.renderer == Renderer::Wgpu,
    };
    if let Some(code) = try_viewer(common, &settings, &sources, window)? {
        return Ok(code);
    }
    if sources.len() > 1 {
        return super::streams::run_streams(
            common,
            &settings,
            &sources,
            Path::new("out"),
            None,
            Some(DEFAULT_JOB_CPU_FRAMES),
            settings.output.video,
        );
    }
    let source = sources.first().cloned().unwrap_or_default();
    headless(
        common,
        &settings,
        &source,
        Path::new("out"),
        None,
        Some(DEFAULT_JOB_CPU_FRAMES),
        settings.output.video,
        false,
    )
}

/// A bare `morphoscope`: the viewer when a display exists and a window opens, else a headless
/// run into `out/`.
pub fn default_job(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let source = default_source(&settings);
    if let Some(code) = try_viewer(
        common,
        &settings,
        std::slice::from_ref(&source),
        WindowOptions::default(),
    )? {
        return Ok(code);
    }
    log::info!("headless run of {source} into out/ (see `morphoscope --help`)");
    headless(
        common,
        &settings,
        &source,
        Path::new("out"),
        None,
        Some(DEFAULT_JOB_CPU_FRAMES),
        settings.output.video,
        false,
    )
}

/// Frames the default job (and a `view` without a display) analyses when it falls back to the CPU backend (the CPU references
/// run at 1–4 fps on the sample clip; `morphoscope run` has no cap).
const DEFAULT_JOB_CPU_FRAMES: u64 = 150;

/// Runs the viewer when a display exists; `None` when the caller should run headless instead.
#[cfg(feature = "viewer")]
fn try_viewer(
    common: &CommonArgs,
    settings: &Settings,
    sources: &[String],
    window: WindowOptions,
) -> anyhow::Result<Option<ExitCode>> {
    use morphoscope::ui::{UiError, ViewerOptions, display_available, run_viewer, run_viewer_grid};
    if !display_available() {
        log::warn!(
            "no display (DISPLAY/WAYLAND_DISPLAY unset): running headless into out/ instead of the viewer"
        );
        return Ok(None);
    }
    let explicit = common.config.is_some() || !common.sets.is_empty();
    let with_window = |mut opts: ViewerOptions| {
        opts.quit_after_secs = window.quit_after;
        opts.wgpu = window.wgpu;
        opts
    };
    let ran = match sources {
        [one] => run_viewer(with_window(ViewerOptions::new(
            settings.clone(),
            explicit,
            one.clone(),
            common.backend(settings)?,
        ))),
        many => {
            let backends = common.backends(settings)?;
            let first = backends.first().cloned().unwrap_or(Backend::Cpu);
            let opts = ViewerOptions::new(settings.clone(), explicit, many[0].clone(), first);
            run_viewer_grid(with_window(opts), many.to_vec(), backends)
        }
    };
    match ran {
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
fn try_viewer(
    _common: &CommonArgs,
    _settings: &Settings,
    _sources: &[String],
    _window: WindowOptions,
) -> anyhow::Result<Option<ExitCode>> {
    log::warn!("built without the viewer (feature `viewer`): running headless into out/");
    Ok(None)
}

/// A single-stream headless run: checks the folder, installs the stop signals, picks the
/// backend, then runs one stream ([`morphoscope::lifecycle`]) and prints its summary.
#[allow(clippy::too_many_arguments)]
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
    RunSink::prepare(out)?;
    let publish = match settings.publish.url.as_str() {
        "" => None,
        _ => {
            let publisher = Publisher::start(&settings.publish)?;
            let flush = Duration::from_secs(u64::from(settings.publish.flush_seconds));
            Some(StreamPublishing {
                stream: publisher.stream(0, "0"),
                finish: Some((publisher, flush)),
            })
        }
    };
    let stop_signals = StopSignals::install()?;
    let stop = StopRequest::new();
    stop_signals.watch(&stop)?;
    let backend = common.backend(settings)?;
    let max_frames = cpu_capped(max_frames, cpu_cap, &backend);
    let job = StreamJob {
        index: 0,
        spec,
        output: StreamOutput::Folder {
            out: out.to_owned(),
            video,
            publish,
        },
        settings,
        backend: &backend,
        max_frames,
        live: lifecycle::LiveSettings::new(),
    };
    let outcome = lifecycle::run(job, &stop, &mut ProgressObserver::new(quiet));
    match (&outcome.finished, &outcome.error) {
        // It never started: the one-line error of a run that could not begin.
        (None, Some(e)) => return Err(anyhow::anyhow!("{e}")),
        (None, None) => {}
        (Some(_), _) => stream::print_single_summary(&outcome),
    }
    if let Some(e) = &outcome.error {
        eprintln!("error: {}", morphoscope::redact::text(e));
        return Ok(ExitCode::from(1));
    }
    Ok(outcome
        .stopped_by
        .map_or(ExitCode::SUCCESS, signals::exit_code))
}

/// `max_frames`, or the cap of a default job that fell back to the CPU backend (with a warning).
pub fn cpu_capped(max_frames: Option<u64>, cpu_cap: Option<u64>, backend: &Backend) -> Option<u64> {
    match (max_frames, cpu_cap, backend) {
        (None, Some(cap), Backend::Cpu) => {
            log::warn!(
                "no GPU: the CPU backend analyses the first {cap} frames (`morphoscope run SOURCE` for all)"
            );
            Some(cap)
        }
        _ => max_frames,
    }
}
