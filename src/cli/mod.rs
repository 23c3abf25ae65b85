//! Subcommands of the `morphoscope` binary and the options they share.

pub mod bench;
pub mod devices;
pub mod image;
pub mod progress;
pub mod run;
pub mod signals;

use std::path::PathBuf;

use anyhow::Context;
use morphoscope::backend::{self, Backend};
use morphoscope::config::{BackendChoice, Settings};

/// Options every subcommand takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Settings file (TOML), applied over config/default.toml.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. `--set pipeline.ring_size=4` (repeatable).
    #[arg(long = "set", global = true, value_name = "SECTION.KEY=VALUE")]
    pub sets: Vec<String>,
    /// Compute backend (overrides pipeline.backend).
    #[arg(long, global = true, value_enum)]
    pub backend: Option<BackendChoice>,
    /// CUDA device ordinal (overrides pipeline.device).
    #[arg(long, global = true)]
    pub device: Option<usize>,
}

impl CommonArgs {
    /// Settings from defaults, `--config` and `--set`, with `--backend`/`--device` applied.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let mut s = Settings::load(self.config.as_deref(), &self.sets)?;
        if let Some(b) = self.backend {
            s.pipeline.backend = b;
        }
        if let Some(d) = self.device {
            s.pipeline.device = d;
        }
        Ok(s)
    }

    /// The backend the settings ask for; logs the choice and why in one line.
    pub fn backend(&self, settings: &Settings) -> anyhow::Result<Backend> {
        let (b, why) = backend::select(settings.pipeline.backend, settings.pipeline.device)
            .context("--backend cuda: CUDA backend unavailable")?;
        log::info!("backend: {why}");
        Ok(b)
    }
}
