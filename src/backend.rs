//! Backend selection: `--backend auto|cpu|cuda`. `auto` takes CUDA when the driver, NVRTC and a
//! device are present and every kernel loads, else the CPU, and says which and why in one line.
//!
//! Several sources spread over several devices ([`select_devices`]) get one `Backend` per
//! device, each holding that device's one `GpuContext`: every stream on a device shares its
//! context and loaded kernels, and PTX is compiled once per architecture.

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

    /// Where it runs: `cpu` or `cuda:N`.
    #[must_use]
    pub fn device_label(&self) -> String {
        match self {
            Self::Cpu => "cpu".to_owned(),
            Self::Cuda(g) => format!("cuda:{}", g.info().ordinal),
        }
    }

    /// One line describing the backend, e.g. `cuda: NVIDIA H100 (sm_90, 79.1 GiB)`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Cpu => format!("cpu: {} threads", rayon::current_num_threads()),
            Self::Cuda(g) => {
                let i = g.info();
                let budget = if i.multiprocessors < i.device_multiprocessors {
                    format!(
                        ", {} of {} SMs",
                        i.multiprocessors, i.device_multiprocessors
                    )
                } else {
                    String::new()
                };
                format!(
                    "cuda: {} ({}, {:.1} GiB{budget})",
                    i.name,
                    i.arch(),
                    i.total_memory_bytes as f64 / (1u64 << 30) as f64
                )
            }
        }
    }
}

/// Picks the backend; returns it with the reason for the choice (logged by the caller).
/// `auto` takes CUDA where the driver, NVRTC, the device and every kernel load, else the CPU;
/// `cuda` fails instead. `sm_limit` (`pipeline.sm_limit`, 0: all) runs the analyses on that
/// many of the device's SMs ([`crate::gpu::green`]): where the driver cannot, `cuda` fails and
/// `auto` warns and takes every SM.
///
/// ```
/// use morphoscope::backend::{Backend, select};
/// use morphoscope::config::BackendChoice;
///
/// let (backend, why) = select(BackendChoice::Auto, 0, 0)?;
/// println!("{why}");
/// let (cpu, _) = select(BackendChoice::Cpu, 0, 0)?;
/// assert!(matches!(cpu, Backend::Cpu));
/// # let _ = backend;
/// # Ok::<(), morphoscope::gpu::GpuError>(())
/// ```
pub fn select(
    choice: BackendChoice,
    device: usize,
    sm_limit: u32,
) -> Result<(Backend, String), GpuError> {
    match choice {
        BackendChoice::Cpu => Ok((Backend::Cpu, "cpu backend (requested)".to_owned())),
        BackendChoice::Cuda => {
            let g = GpuContext::with_sm_limit(device, sm_limit)?;
            let b = Backend::Cuda(Arc::new(g));
            let why = format!("{} (requested)", b.describe());
            Ok((b, why))
        }
        BackendChoice::Auto => match auto_context(device, sm_limit) {
            Ok(g) => {
                let b = Backend::Cuda(Arc::new(g));
                let why = format!("{} (auto: CUDA available)", b.describe());
                Ok((b, why))
            }
            Err(e) => Ok((
                Backend::Cpu,
                format!("cpu backend (auto: CUDA unavailable: {e})"),
            )),
        },
    }
}

/// `auto`'s context: on the SM budget where the driver makes one, else (with a warning) on
/// every SM.
fn auto_context(device: usize, sm_limit: u32) -> Result<GpuContext, GpuError> {
    match GpuContext::with_sm_limit(device, sm_limit) {
        Err(GpuError::Unsupported(why)) if sm_limit > 0 => {
            log::warn!("pipeline.sm_limit = {sm_limit} ignored ({why}): every SM is used");
            GpuContext::new(device)
        }
        other => other,
    }
}

/// One backend per listed device (in the order given), with the reason for the choice. `auto`
/// takes CUDA only when every listed device opens, else the CPU for all; `cuda` fails naming
/// the device that did not open. On the CPU the list has one entry (devices do not apply).
pub fn select_devices(
    choice: BackendChoice,
    devices: &[usize],
    sm_limit: u32,
) -> Result<(Vec<Backend>, String), GpuError> {
    let first = devices.first().copied().unwrap_or(0);
    let (b, why) = select(choice, first, sm_limit)?;
    if matches!(b, Backend::Cpu) || devices.len() < 2 {
        return Ok((vec![b], why));
    }
    let mut all = vec![b];
    for &d in &devices[1..] {
        let opened = match choice {
            BackendChoice::Auto => auto_context(d, sm_limit),
            _ => GpuContext::with_sm_limit(d, sm_limit),
        };
        match opened {
            Ok(g) => all.push(Backend::Cuda(Arc::new(g))),
            Err(e) if choice == BackendChoice::Auto => {
                return Ok((
                    vec![Backend::Cpu],
                    format!("cpu backend (auto: CUDA device {d} unavailable: {e})"),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    let described: Vec<String> = all.iter().map(Backend::describe).collect();
    Ok((
        all,
        format!("{} devices: {}", devices.len(), described.join("; ")),
    ))
}
