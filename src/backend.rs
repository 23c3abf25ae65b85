//! Backend selection: `--backend auto|cpu|cuda`. `auto` takes CUDA when the driver, NVRTC and a
//! device are present and every kernel loads, else the CPU, and says which and why in one line.

use std::sync::Arc;

use crate::config::BackendChoice;
use crate::gpu::{GpuContext, GpuError};

/// The compute backend the analyses run on.
#[derive(Clone, Debug)]
pub enum Backend {
    /// Multi-threaded CPU reference implementations.
    Cpu,
    /// A CUDA device with every kernel loaded.
    Cuda(Arc<GpuContext>),
}

impl Backend {
    /// "cpu" or "cuda".
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda(_) => "cuda",
        }
    }

    /// One line describing the backend, e.g. `cuda: NVIDIA H100 (sm_90, 79.1 GiB)`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Cpu => format!("cpu: {} threads", rayon::current_num_threads()),
            Self::Cuda(g) => {
                let i = g.info();
                format!("cuda: {} ({}, {:.1} GiB)", i.name, i.arch(), i.total_memory_bytes as f64 / (1u64 << 30) as f64)
            }
        }
    }
}

/// Picks the backend; returns it with the reason for the choice (logged by the caller).
pub fn select(choice: BackendChoice, device: usize) -> Result<(Backend, String), GpuError> {
    match choice {
        BackendChoice::Cpu => Ok((Backend::Cpu, "cpu backend (requested)".to_owned())),
        BackendChoice::Cuda => {
            let g = GpuContext::new(device)?;
            let b = Backend::Cuda(Arc::new(g));
            let why = format!("{} (requested)", b.describe());
            Ok((b, why))
        }
        BackendChoice::Auto => match GpuContext::new(device) {
            Ok(g) => {
                let b = Backend::Cuda(Arc::new(g));
                let why = format!("{} (auto: CUDA available)", b.describe());
                Ok((b, why))
            }
            Err(e) => Ok((Backend::Cpu, format!("cpu backend (auto: CUDA unavailable: {e})"))),
        },
    }
}
