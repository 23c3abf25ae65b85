//! The CUDA device: context creation without panics, device facts, and every kernel module
//! compiled (or read from cache), loaded and resolved at start.
//!
//! `GpuContext::new` checks that libcuda and libnvrtc can be loaded before touching cudarc's
//! context constructor (which panics when libcuda is missing), then compiles every module listed
//! in `crate::kernels::SOURCES` for the device's own architecture (`sm_<major><minor>`) and
//! resolves every entry point each module declares. A missing or broken kernel is an error here,
//! at start, not on frame 1000.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use super::compile::{self, PtxOrigin};
use super::error::GpuError;

/// Facts about one CUDA device, for `morphoscope devices` and logs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory_bytes: usize,
    /// Multiprocessors the context runs on: the device's, or an SM budget's
    /// (`pipeline.sm_limit`, [`super::green`]). Ops size their grids by it.
    pub multiprocessors: i32,
    /// Multiprocessors of the device.
    pub device_multiprocessors: i32,
    /// Driver API version as (major, minor), e.g. (13, 0).
    pub driver_version: (i32, i32),
    /// NVRTC version, when loadable.
    pub nvrtc_version: Option<(i32, i32)>,
    /// The GPU shares memory with the host (Jetson): uploads read mapped pinned host memory
    /// instead of copying into device memory.
    pub integrated: bool,
}

impl DeviceInfo {
    /// NVRTC architecture name for this device, e.g. `sm_90`.
    #[must_use]
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// True when the CUDA driver library can be loaded.
#[must_use]
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda by its candidate names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Driver API version (major, minor).
pub fn driver_version() -> Result<(i32, i32), GpuError> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    let mut v = 0;
    // SAFETY: libcuda is loadable (checked above); `v` is a valid out-pointer.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok((v / 1000, (v % 1000) / 10))
    } else {
        Err(GpuError::Driver(cudarc::driver::DriverError(r)))
    }
}

/// Number of CUDA devices (errors when the driver is missing or fails to initialise).
pub fn device_count() -> Result<usize, GpuError> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    let n = CudaContext::device_count()?;
    Ok(usize::try_from(n).unwrap_or(0))
}

fn device_info(ctx: &Arc<CudaContext>) -> Result<DeviceInfo, GpuError> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name()?,
        compute_capability: ctx.compute_capability()?,
        total_memory_bytes: ctx.total_mem()?,
        multiprocessors: ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        device_multiprocessors: ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        driver_version: driver_version()?,
        nvrtc_version: compile::nvrtc_version().ok(),
        integrated: ctx.attribute(A::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0,
    })
}

/// Opens device `ordinal` without compiling anything (for `devices`).
pub fn open_context(ordinal: usize) -> Result<(Arc<CudaContext>, DeviceInfo), GpuError> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(GpuError::NoDevice { ordinal, count });
    }
    let ctx = CudaContext::new(ordinal)?;
    let info = device_info(&ctx)?;
    Ok((ctx, info))
}

/// PTX this process already compiled or read, by (module, architecture): a second device of the
/// same architecture (`--device 0,1`) loads it without compiling or reading the disk cache again.
static PROCESS_PTX: Mutex<Vec<(&'static str, String, String)>> = Mutex::new(Vec::new());

/// PTX of `src` for `arch`: from this process' memory, else the disk cache, else compiled.
fn module_ptx(
    src: &crate::kernels::KernelSource,
    arch: &str,
) -> Result<(String, PtxOrigin), GpuError> {
    let known = PROCESS_PTX.lock().ok().and_then(|m| {
        m.iter()
            .find(|(n, a, _)| *n == src.name && a == arch)
            .map(|e| e.2.clone())
    });
    if let Some(ptx) = known {
        return Ok((ptx, PtxOrigin::Cache));
    }
    let (ptx, origin) = compile::cached_ptx(src, crate::kernels::HEADERS, arch)?;
    if let Ok(mut m) = PROCESS_PTX.lock() {
        m.push((src.name, arch.to_owned(), ptx.clone()));
    }
    Ok((ptx, origin))
}

/// Forgets `src`'s PTX for `arch` in this process (the driver rejected it).
fn forget_ptx(src: &crate::kernels::KernelSource, arch: &str) {
    if let Ok(mut m) = PROCESS_PTX.lock() {
        m.retain(|(n, a, _)| !(*n == src.name && a == arch));
    }
}

/// An open device with every kernel module loaded. Build one per device and share it (an
/// `Arc` inside [`crate::backend::Backend::Cuda`]) between every stream on that device: the
/// modules are loaded once per context.
pub struct GpuContext {
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    modules: HashMap<&'static str, Arc<CudaModule>>,
    /// Milliseconds spent compiling (0 when everything came from the cache).
    pub compile_millis: f64,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl GpuContext {
    /// Opens device `ordinal`, compiles/loads every kernel module and resolves every function.
    pub fn new(ordinal: usize) -> Result<Self, GpuError> {
        Self::with_sm_limit(ordinal, 0)
    }

    /// [`GpuContext::new`] on at least `sm_limit` of the device's SMs (0 or at least the
    /// device's count: all), through a green context ([`super::green`]); an error where the
    /// driver has no green contexts.
    pub fn with_sm_limit(ordinal: usize, sm_limit: u32) -> Result<Self, GpuError> {
        if !driver_present() {
            return Err(GpuError::NoDriver);
        }
        if !compile::nvrtc_present() {
            return Err(GpuError::NoNvrtc);
        }
        let (ctx, info) = match super::green::sm_budget(ordinal, sm_limit)? {
            None => open_context(ordinal)?,
            Some(b) => {
                let mut info = device_info(&b.ctx)?;
                info.multiprocessors = i32::try_from(b.granted).unwrap_or(i32::MAX);
                (b.ctx, info)
            }
        };
        let arch = info.arch();
        let start = std::time::Instant::now();
        let mut compiled_any = false;
        let mut modules = HashMap::new();
        for src in crate::kernels::SOURCES {
            let (ptx, origin) = module_ptx(src, &arch)?;
            compiled_any |= origin == PtxOrigin::Compiled;
            let module = match ctx.load_module(Ptx::from_src(ptx)) {
                Ok(m) => m,
                Err(e) if origin == PtxOrigin::Cache => {
                    // A cached entry the driver rejects is not trusted: recompile once.
                    log::warn!("cached PTX for {} rejected ({e}); recompiling", src.name);
                    compile::evict(src, crate::kernels::HEADERS, &arch);
                    forget_ptx(src, &arch);
                    let ptx = compile::compile_ptx(src, crate::kernels::HEADERS, &arch)?;
                    ctx.load_module(Ptx::from_src(ptx))?
                }
                Err(e) => return Err(e.into()),
            };
            for f in src.functions {
                module
                    .load_function(f)
                    .map_err(|_| GpuError::MissingFunction {
                        module: src.name.to_owned(),
                        function: (*f).to_owned(),
                    })?;
            }
            modules.insert(src.name, module);
        }
        let compile_millis = if compiled_any {
            start.elapsed().as_secs_f64() * 1e3
        } else {
            0.0
        };
        Ok(Self {
            ctx,
            info,
            modules,
            compile_millis,
        })
    }

    /// A kernel entry point; modules and names are checked at start, so this fails only for a
    /// name no module declares.
    pub fn function(&self, module: &str, name: &str) -> Result<CudaFunction, GpuError> {
        self.modules
            .get(module)
            .and_then(|m| m.load_function(name).ok())
            .ok_or_else(|| GpuError::MissingFunction {
                module: module.to_owned(),
                function: name.to_owned(),
            })
    }

    /// The cudarc context.
    #[must_use]
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Device facts.
    #[must_use]
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// A new non-default stream.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, GpuError> {
        Ok(self.ctx.new_stream()?)
    }
}
