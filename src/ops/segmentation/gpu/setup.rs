//! Building the op: the kernels resolved and the device's facts read once ([`Kernels`]), and the
//! launch shapes derived from them and the tuning ([`Launch`], again whenever the tuning
//! changes).

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as F};
use cudarc::driver::{CudaEvent, CudaFunction, CudaStream, LaunchConfig};

use super::layout::{
    BLOCK, CAT_MID_THREADS, CAT_THREADS, TILE_THREADS, WHOLE_TREE_BYTES_PER_MEMBER,
};
use super::tuning::{Finisher, SegmentationTuning};
use crate::gpu::launch::blocks_for;
use crate::gpu::{GpuContext, GpuError};

/// The resolved kernels of `kernels/segmentation.cu`, the streams their rounds fork onto and what
/// the device offers them; fixed for the op's life.
pub(super) struct Kernels {
    pub init: CudaFunction,
    pub edges: CudaFunction,
    pub blur_edges: CudaFunction,
    pub least: CudaFunction,
    pub targets_trees: CudaFunction,
    pub exits: CudaFunction,
    pub core: CudaFunction,
    pub alloc: CudaFunction,
    pub cat_small: CudaFunction,
    pub cat_small_mid: CudaFunction,
    pub cat_mid: CudaFunction,
    pub cat_block: CudaFunction,
    /// `segmentation_cat_block` leaving the giant trees to `segmentation_cat_giant`.
    pub cat_block_g: CudaFunction,
    pub cat_giant: CudaFunction,
    pub reset_done: CudaFunction,
    pub final_roots: CudaFunction,
    pub minpix: CudaFunction,
    pub scan_count: CudaFunction,
    pub scan_blocks: CudaFunction,
    pub scan_label: CudaFunction,
    pub labels: CudaFunction,
    pub level_threshold: CudaFunction,
    pub level_comp: CudaFunction,
    /// `segmentation_stamp`: the round profile's `%globaltimer` stamps.
    #[cfg(feature = "profiling")]
    pub stamp: CudaFunction,
    pub finish: CudaFunction,
    pub finish_grid: CudaFunction,
    pub tiles: CudaFunction,
    /// Streams that run the mid-size and large trees' caterpillars (and the trees' ranges)
    /// beside the caller's stream, forked from and joined back to it by events; inside a
    /// captured graph they become parallel branches.
    pub side: [Arc<CudaStream>; 3],
    pub fork: CudaEvent,
    pub joins: [CudaEvent; 3],
    /// Multiprocessors.
    pub sms: u32,
    /// The device has cooperative launch (the grid finisher, the giant trees' grid).
    pub cooperative: bool,
    /// The device has programmatic dependent launch (compute capability 9.0+).
    pub pdl: bool,
    /// Shared memory a block may opt into, bytes.
    pub shared_optin: u32,
}

impl Kernels {
    pub(super) fn new(gpu: &GpuContext) -> Result<Self, GpuError> {
        let f = |name: &str| gpu.function("segmentation", name);
        let stream = || gpu.cuda().new_stream().map_err(GpuError::from);
        let event = || gpu.cuda().new_event(None).map_err(GpuError::from);
        let info = gpu.info();
        Ok(Self {
            init: f("segmentation_init")?,
            edges: f("segmentation_edges")?,
            blur_edges: f("segmentation_blur_edges")?,
            least: f("segmentation_least")?,
            targets_trees: f("segmentation_targets_trees")?,
            exits: f("segmentation_exits")?,
            core: f("segmentation_core")?,
            alloc: f("segmentation_alloc")?,
            cat_small: f("segmentation_cat_small")?,
            cat_small_mid: f("segmentation_cat_small_mid")?,
            cat_mid: f("segmentation_cat_mid")?,
            cat_block: f("segmentation_cat_block")?,
            cat_block_g: f("segmentation_cat_block_g")?,
            cat_giant: f("segmentation_cat_giant")?,
            reset_done: f("segmentation_reset_done")?,
            final_roots: f("segmentation_final")?,
            minpix: f("segmentation_minpix")?,
            scan_count: f("segmentation_scan_count")?,
            scan_blocks: f("segmentation_scan_blocks")?,
            scan_label: f("segmentation_scan_label")?,
            labels: f("segmentation_labels")?,
            level_threshold: f("segmentation_level_threshold")?,
            level_comp: f("segmentation_level_comp")?,
            #[cfg(feature = "profiling")]
            stamp: f("segmentation_stamp")?,
            finish: f("segmentation_finish")?,
            finish_grid: f("segmentation_finish_grid")?,
            tiles: f("segmentation_tiles")?,
            side: [stream()?, stream()?, stream()?],
            fork: event()?,
            joins: [event()?, event()?, event()?],
            sms: u32::try_from(info.multiprocessors.max(1)).unwrap_or(1),
            cooperative: gpu
                .cuda()
                .attribute(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)?
                != 0,
            pdl: info.compute_capability.0 >= 9,
            shared_optin: u32::try_from(
                gpu.cuda()
                    .attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            )
            .unwrap_or(0),
        })
    }
}

/// The launch shapes of one tuning on this device.
#[derive(Clone, Copy, Debug)]
pub(super) struct Launch {
    /// Blocks of the grid-stride kernels at most.
    pub stride_blocks: u32,
    /// Blocks of `segmentation_edges` (pixels) and `segmentation_tiles` (tiles are strided over).
    pub edges_grid: u32,
    pub tiles_grid: u32,
    /// `segmentation_cat_small`, `segmentation_cat_small_mid`, `segmentation_cat_mid`: blocks striding over
    /// their trees.
    pub small: LaunchConfig,
    pub small_mid: LaunchConfig,
    pub mid: LaunchConfig,
    /// `segmentation_cat_block` (and `_g`): 2 blocks of 1024 an SM, or 1 with a whole tree's shared
    /// memory.
    pub block: LaunchConfig,
    /// Blocks of `segmentation_cat_giant` (0: the giant trees stay with `segmentation_cat_block`).
    pub giant_blocks: u32,
    /// Blocks of `segmentation_finish_grid` (every one resident at once; 0: no cooperative launch).
    pub grid_finish_blocks: u32,
    /// The finisher as it runs here (the one-block finisher where the device has no
    /// cooperative launch).
    pub finisher: Finisher,
    /// Programmatic dependent launches (asked for and available).
    pub pdl: bool,
}

impl Launch {
    pub(super) fn new(k: &Kernels, t: &SegmentationTuning) -> Result<Self, GpuError> {
        let sms = k.sms;
        let whole_members = whole_tree_members(k, t.whole_tree_members)?;
        let grid_finish_blocks = cooperative_blocks(k, &k.finish_grid)?;
        let giant_blocks = if t.giant_grid {
            cooperative_blocks(k, &k.cat_giant)?.min(t.giant_blocks)
        } else {
            0
        };
        let finisher = if t.finisher.grid && grid_finish_blocks == 0 {
            Finisher::block()
        } else {
            t.finisher
        };
        Ok(Self {
            stride_blocks: sms * t.stride_blocks_per_sm.max(1),
            edges_grid: resident_grid(&k.edges, BLOCK, sms, t.edges_blocks_per_sm)?,
            tiles_grid: resident_grid(&k.tiles, TILE_THREADS, sms, t.tiles_blocks_per_sm)?,
            small: strided(
                resident_grid(&k.cat_small, CAT_MID_THREADS, sms, t.small_blocks_per_sm)?,
                CAT_MID_THREADS,
            ),
            small_mid: strided(
                resident_grid(&k.cat_small_mid, CAT_MID_THREADS, sms, t.mid_blocks_per_sm)?,
                CAT_MID_THREADS,
            ),
            mid: strided(
                resident_grid(&k.cat_mid, CAT_MID_THREADS, sms, t.mid_blocks_per_sm)?,
                CAT_MID_THREADS,
            ),
            // With a whole tree's shared memory one block fits an SM.
            block: LaunchConfig {
                grid_dim: (if whole_members > 0 { sms } else { sms * 2 }, 1, 1),
                block_dim: (CAT_THREADS, 1, 1),
                shared_mem_bytes: WHOLE_TREE_BYTES_PER_MEMBER * whole_members,
            },
            giant_blocks,
            grid_finish_blocks,
            finisher,
            pdl: t.pdl && k.pdl,
        })
    }

    /// A grid-stride launch of [`BLOCK`] threads a block over at most `items` items.
    pub(super) fn stride(&self, items: usize) -> LaunchConfig {
        stride_within(items, self.stride_blocks)
    }
}

/// A grid-stride launch over at most `items` items with at most `blocks` blocks of [`BLOCK`].
pub(super) fn stride_within(items: usize, blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(items, BLOCK).min(blocks), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A one-dimensional launch of `blocks` blocks of `threads` without dynamic shared memory.
fn strided(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Blocks of `threads` threads of `f` that every SM holds at once (at most `per_sm`), times the
/// SMs: the grid of a kernel whose blocks stride over their work, so that no second, partial
/// wave of blocks runs after the first.
fn resident_grid(f: &CudaFunction, threads: u32, sms: u32, per_sm: u32) -> Result<u32, GpuError> {
    let fits = f.occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)?;
    Ok(fits.clamp(1, per_sm.max(1)) * sms)
}

/// Blocks of [`CAT_THREADS`] threads of the cooperative kernel `f` resident at once on the
/// whole device (0: no cooperative launch).
fn cooperative_blocks(k: &Kernels, f: &CudaFunction) -> Result<u32, GpuError> {
    if !k.cooperative {
        return Ok(0);
    }
    let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(CAT_THREADS, 0, None)?;
    Ok(per_sm.saturating_mul(k.sms))
}

/// Members a large tree may have for `segmentation_cat_block` (and `_g`) to sort it whole in shared
/// memory: at most `cap`, and what the device's opt-in shared memory holds beside the kernels'
/// own static shared memory, in multiples of 8; 0 below 1 024. Sets the two kernels' dynamic
/// shared memory limit to it.
fn whole_tree_members(k: &Kernels, cap: u32) -> Result<u32, GpuError> {
    let mut members = cap;
    for f in [&k.cat_block, &k.cat_block_g] {
        let fixed = u32::try_from(f.get_attribute(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?)
            .unwrap_or(u32::MAX);
        let room = k.shared_optin.saturating_sub(fixed) / WHOLE_TREE_BYTES_PER_MEMBER;
        members = members.min(room & !7);
    }
    if members < 1024 {
        return Ok(0);
    }
    for f in [&k.cat_block, &k.cat_block_g] {
        let bytes = i32::try_from(WHOLE_TREE_BYTES_PER_MEMBER * members).unwrap_or(i32::MAX);
        f.set_attribute(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)?;
    }
    Ok(members)
}
