//! An SM budget: a CUDA *green context* that runs every kernel of the process' analyses on a
//! fixed group of the device's SMs (`pipeline.sm_limit`), leaving the others to another
//! process or model (a detector beside the analyses, or a Jetson-sized slice of a big GPU to
//! size a deployment on). Driver API of CUDA 12.4 and later (`cuGreenCtxCreate`); an older
//! driver gets an error before any of these functions is called.
//!
//! The device's SM resource is split into one group of at least the asked count (the driver
//! rounds up to its partition granularity: `granted` says how many), a green context is made
//! on that group and converted into an ordinary context, which cudarc then uses as any other:
//! every stream, allocation and launch made in it runs on the group's SMs. Ops size their
//! persistent grids by [`super::DeviceInfo::multiprocessors`], which is the granted count.
//!
//! A green context lives as long as the process: it is made once per device and budget and
//! kept here, so later opens share it and cudarc never drops the converted context (cudarc
//! would call `cuCtxDestroy` on it, while the context belongs to the green context, whose own
//! destructor is `cuGreenCtxDestroy`).

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaContext;
use cudarc::driver::sys::{self, CUdevResourceType, CUresult};

use super::error::GpuError;

/// A context on a group of SMs, with how many the driver granted.
#[derive(Clone, Debug)]
pub struct SmBudget {
    /// The converted context.
    pub ctx: Arc<CudaContext>,
    /// SMs the group holds (the asked count rounded up to the driver's granularity).
    pub granted: u32,
    /// SMs the device has.
    pub total: u32,
}

/// Green contexts made by this process, by (device ordinal, SMs asked).
static MADE: Mutex<Vec<(usize, u32, SmBudget)>> = Mutex::new(Vec::new());

fn check(what: &str, r: CUresult) -> Result<(), GpuError> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Unsupported(format!(
            "SM budget: {what} failed ({r:?}); green contexts need a CUDA 12.4 or later driver"
        )))
    }
}

/// A context of device `ordinal` on at least `sms` of its SMs (made once per process, then
/// shared), or `None` when `sms` is 0 or covers every SM (an ordinary context then).
pub fn sm_budget(ordinal: usize, sms: u32) -> Result<Option<SmBudget>, GpuError> {
    if sms == 0 {
        return Ok(None);
    }
    let mut made = MADE
        .lock()
        .map_err(|_| GpuError::Unsupported("SM budget: a thread panicked holding it".into()))?;
    if let Some((_, _, b)) = made.iter().find(|(o, s, _)| *o == ordinal && *s == sms) {
        return Ok(Some(b.clone()));
    }
    let budget = make(ordinal, sms)?;
    if let Some(b) = &budget {
        made.push((ordinal, sms, b.clone()));
    }
    Ok(budget)
}

/// The first driver API version with green contexts.
const GREEN_CONTEXTS: (i32, i32) = (12, 4);

/// `Unsupported` for a driver API `version` without green contexts.
fn check_driver((major, minor): (i32, i32)) -> Result<(), GpuError> {
    if (major, minor) < GREEN_CONTEXTS {
        return Err(GpuError::Unsupported(format!(
            "SM budget: green contexts need a CUDA {}.{} or later driver; this one is \
             {major}.{minor}",
            GREEN_CONTEXTS.0, GREEN_CONTEXTS.1
        )));
    }
    Ok(())
}

fn make(ordinal: usize, sms: u32) -> Result<Option<SmBudget>, GpuError> {
    // Initialises the driver (and checks the ordinal) as an ordinary open does.
    let count = super::context::device_count()?;
    // An older driver lacks the symbols (cudarc's loader would panic on the first call).
    check_driver(super::context::driver_version()?)?;
    if ordinal >= count {
        return Err(GpuError::NoDevice { ordinal, count });
    }
    let dev_index = i32::try_from(ordinal).map_err(|_| GpuError::NoDevice { ordinal, count })?;
    let mut dev = 0;
    // SAFETY: the driver is loaded and initialised (device_count); `dev` is an out-pointer.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, dev_index)
    })?;
    // SAFETY: plain C structs of integers and byte arrays: all-zero is a valid value.
    let mut all: sys::CUdevResource = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: `all` is a valid out-pointer for one resource.
    check("cuDeviceGetDevResource", unsafe {
        sys::cuDeviceGetDevResource(dev, &mut all, CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM)
    })?;
    // SAFETY: the driver filled the SM member of the union (type SM asked above).
    let total = unsafe { all.__bindgen_anon_1.sm.smCount };
    if sms >= total {
        return Ok(None);
    }
    // SAFETY: as `all`.
    let mut group: sys::CUdevResource = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: as `all`.
    let mut rest: sys::CUdevResource = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut groups = 1u32;
    // SAFETY: one result slot (`groups` = 1), valid input and remainder pointers.
    check("cuDevSmResourceSplitByCount", unsafe {
        sys::cuDevSmResourceSplitByCount(&mut group, &mut groups, &all, &mut rest, 0, sms)
    })?;
    if groups != 1 {
        return Err(GpuError::Unsupported(format!(
            "SM budget of {sms}: the device of {total} SMs cannot give a group that size"
        )));
    }
    // SAFETY: the split filled the group's SM member.
    let granted = unsafe { group.__bindgen_anon_1.sm.smCount };
    let mut desc: sys::CUdevResourceDesc = std::ptr::null_mut();
    // SAFETY: one resource, a valid out-pointer for the descriptor.
    check("cuDevResourceGenerateDesc", unsafe {
        sys::cuDevResourceGenerateDesc(&mut desc, &mut group, 1)
    })?;
    let mut green: sys::CUgreenCtx = std::ptr::null_mut();
    // SAFETY: a descriptor the driver made, a valid device; `green` is an out-pointer.
    check("cuGreenCtxCreate", unsafe {
        sys::cuGreenCtxCreate(
            &mut green,
            desc,
            dev,
            sys::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32,
        )
    })?;
    let mut raw: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `green` was just created; `raw` is an out-pointer.
    check("cuCtxFromGreenCtx", unsafe {
        sys::cuCtxFromGreenCtx(&mut raw, green)
    })?;
    // SAFETY: `raw` is a valid context of `dev`; the budget kept in `MADE` holds it for the
    // process' life, so cudarc never drops (destroys) it (see the module docs).
    let ctx = unsafe { CudaContext::from_raw_context(ordinal, dev, raw) }?;
    log::info!("SM budget: {granted} of the device's {total} SMs (asked {sms})");
    Ok(Some(SmBudget {
        ctx,
        granted,
        total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_before_12_4_have_no_green_contexts() {
        for old in [(11, 8), (12, 2), (12, 3)] {
            let e = check_driver(old).expect_err("too old");
            assert!(matches!(e, GpuError::Unsupported(_)));
            assert!(e.to_string().contains("12.4"), "{e}");
        }
        for new in [(12, 4), (12, 6), (13, 0)] {
            assert!(check_driver(new).is_ok(), "{new:?}");
        }
    }

    #[test]
    fn no_budget_is_asked_with_zero_sms() {
        // 0 means every SM: no driver call at all (this runs without a GPU too).
        assert!(matches!(sm_budget(0, 0), Ok(None)));
    }
}
