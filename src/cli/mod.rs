//! Subcommands of the `morphoscope` binary and the options they share.

pub mod bench;
pub mod bench_streams;
pub mod devices;
pub mod image;
pub mod progress;
pub mod run;
pub mod service;
pub mod signals;
pub mod stream;
pub mod streams;

use std::path::PathBuf;

use anyhow::Context;
use morphoscope::backend::{self, Backend};
use morphoscope::config::{BackendChoice, DeviceList, Settings};

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
    /// CUDA device ordinal, or a list (`0,1`) that several sources are spread over
    /// round-robin (overrides pipeline.devices and pipeline.device).
    #[arg(long, global = true, value_name = "N[,N...]")]
    pub device: Option<DeviceList>,
}

impl CommonArgs {
    /// Settings from defaults, `--config` and `--set`, with `--backend`/`--device` applied.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let mut s = Settings::load(self.config.as_deref(), &self.sets)?;
        if let Some(b) = self.backend {
            s.pipeline.backend = b;
        }
        if let Some(DeviceList(list)) = &self.device
            && let Some(&first) = list.first()
        {
            s.pipeline.device = first;
            s.pipeline.devices = list.clone();
        }
        Ok(s)
    }

    /// The backend the settings ask for; logs the choice and why in one line.
    pub fn backend(&self, settings: &Settings) -> anyhow::Result<Backend> {
        let p = &settings.pipeline;
        let (b, why) = backend::select(p.backend, p.device, p.sm_limit)
            .context("--backend cuda: CUDA backend unavailable")?;
        log::info!("backend: {why}");
        Ok(b)
    }

    /// One backend per device of `pipeline.devices` (or `pipeline.device`), for several
    /// streams; logs the choice in one line.
    pub fn backends(&self, settings: &Settings) -> anyhow::Result<Vec<Backend>> {
        let p = &settings.pipeline;
        let (b, why) = backend::select_devices(p.backend, &p.device_list(), p.sm_limit)
            .context("--backend cuda: CUDA backend unavailable")?;
        log::info!("backend: {why}");
        Ok(b)
    }
}
