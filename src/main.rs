//! `morphoscope` command line: parses arguments (clap), sets up logging, loads settings, and
//! dispatches to the subcommands in `cli/`. The only place `anyhow` is used.

mod cli;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Real-time mathematical morphology on video with NVIDIA GPUs.
#[derive(Parser, Debug)]
#[command(name = "morphoscope", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    common: cli::CommonArgs,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Headless analysis of a video source; writes frames.jsonl, timings.json, overlay.mkv,
    /// tracks.csv, components.jsonl.
    Run(cli::run::RunArgs),
    /// One image in, one result out.
    Image(cli::image::ImageArgs),
    /// Per-op and whole-pipeline timings on real frames, CPU and CUDA side by side.
    Bench(cli::bench::BenchArgs),
    /// Lists the backends available on this machine.
    Devices,
    /// Opens the viewer on a source (falls back to a headless run without a display).
    View(cli::run::ViewArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format(|buf, record| {
            // Every log line passes through the one redaction rule.
            let style = buf.default_level_style(record.level());
            let message = morphoscope::redact::text(&record.args().to_string());
            // Lines of a stream's threads say whose they are (unless they already do).
            let stream = match morphoscope::stream_label::current() {
                Some(label) if !message.starts_with(&*label) => format!("{label}: "),
                _ => String::new(),
            };
            writeln!(
                buf,
                "[{style}{:<5}{style:#}] {stream}{message}",
                record.level()
            )
        })
        .init();
    let args = Cli::parse();
    let result = match args.command {
        Some(Cmd::Run(a)) => cli::run::run(&args.common, &a),
        Some(Cmd::Image(a)) => cli::image::image(&args.common, &a),
        Some(Cmd::Bench(a)) => cli::bench::bench(&args.common, &a),
        Some(Cmd::Devices) => cli::devices::devices(),
        Some(Cmd::View(a)) => cli::run::view(&args.common, &a),
        None => cli::run::default_job(&args.common),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, secrets masked.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string().replace('\n', " ");
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    morphoscope::redact::text(&parts.join(": "))
}
