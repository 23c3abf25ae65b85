//! CUDA Felzenszwalb segmentation (`kernels/segmentation.cu`; the CPU model of every kernel is
//! [`super::boruvka`], bit for bit). It computes exactly what a sequential Kruskal computes
//! (scikit-image's labels), in rounds of Borůvka steps that the whole GPU takes at once.
//!
//! # Words
//!
//! - **Component**: a set of pixels merged so far, named by its **root** pixel (union-find
//!   links; a link is written once, when its component joins another, so the links are also the
//!   hierarchy's parents). A component **freezes** (merge rounds) when an edge fails its own
//!   threshold: Kruskal never merges it again.
//! - **Edge graph**: each pixel's 8-neighbour edges, weighted by colour distance after the blur,
//!   ordered by **key** (weight, then edge id: a total order). A pixel walks its edges from a
//!   cursor past the ones that are dead for good.
//! - **Round**: one Borůvka step. Every active component takes its least alive edge (the
//!   **frontier** is the pixels that still have one); following these edges from component to
//!   component leads to a **mutual pair** (two components whose least edges are the same edge)
//!   or, in `min_size` rounds, a **sink** (a component already at least `min_size`, which takes no
//!   edge and absorbs what leads into it). The components that lead to one pair or sink form a
//!   **tree**; its **exit** is its least edge to another tree, and its **core** the members
//!   whose least edge is below the exit: exactly the merges Kruskal makes there next.
//! - **Caterpillar**: a tree's core sorted by key and merged one member at a step, each step
//!   checked with Kruskal's own sizes and internal differences, up to the first failing step.
//!   Trees are walked by size: **tiny** (at most 8 core members: 8 lanes), **small** (at most 32:
//!   a warp), **mid-size** (at most 512: a block of 256), **large** (a block of 1024, chunks of
//!   2048 sorted in shared memory) and **giant** (above 8 192: a cooperative grid of blocks).
//! - **Phases**: merge rounds, then `min_size` rounds (edges merge while either side is smaller
//!   than `min_size`). Every kernel first reads its phase's **gate** (did the previous round
//!   change anything?) and returns at once after the round that changed nothing, so a phase
//!   stops by itself and nothing is read back until [`SegmentationGpu::download`].
//! - **Round caps**: the rounds launched per phase. With `adaptive_rounds` they come from the
//!   rounds recent frames needed; the **finisher** runs the rest of a phase without launches
//!   (`segmentation_finish_grid` over a cooperative grid, `segmentation_finish` in one block), and a frame
//!   that still needed more is **run again** with larger caps inside the download (counted by
//!   [`SegmentationGpu::reruns`]), so every frame is exact.
//!
//! # A frame
//!
//! The edge graph from the frame's bytes (`segmentation_blur_edges`: the f64 blur, the weights and
//! each pixel's sorted edges in one tiled pass; above blur radius 4 the blur's two passes and
//! `segmentation_edges`); the counters' reset (`segmentation_init`); merge round 1 in 32x16 tiles in
//! shared memory (`segmentation_tiles`, which also sets up every pixel's words); the launched rounds
//! from 2, each 7-8 launches in 5 dependent steps (least edges; targets and trees; exits, with
//! the trees' ranges beside them on a side stream; core; the caterpillars, the tiny and small
//! trees in one launch, the mid-size and large ones on side streams; see `rounds`); the
//! finisher; then the same for the `min_size` phase (`segmentation_reset_done` lists its starting
//! pixels); finally raster-order labels by a block scan. On compute capability 9.0+ the round
//! kernels are programmatic dependent launches. Once the round caps come from recent frames,
//! everything after the edge graph is captured once as a CUDA graph (keyed by buffers, frame
//! size, parameters, caps and stream) and replayed with one launch.
//!
//! Timer regions: `segment_graph` (`segment_blur` before it for large radii), then with a
//! graph one region, `segment_rounds`; with direct launches `segmentation_init`, `segmentation_tiles`,
//! `segment_merge`, `segment_minsize`, `segment_relabel`, or (the `profiling` feature's
//! `SegmentationProfiling::per_kernel_timing`) one region per launch, named after its kernel
//! (`segment_minedge` for the least edges).
//!
//! # Layout
//!
//! [`SegmentationGpu`] holds, by what changes when: the resolved kernels and the device's facts
//! (`setup::Kernels`, fixed), the tuning ([`SegmentationTuning`], set by the caller) and the launch
//! shapes derived from both (`setup::Launch`), the buffers of the current frame size
//! (`buffers`), and what carries over from frame to frame (`history`). `layout` mirrors the
//! kernels' structs and constants; `enqueue` a frame, `rounds` one phase, `readback` the
//! numbering, levels and downloads.

use std::cell::RefCell;

use super::boruvka::{TILE_H, TILE_W, eid_bits};
use super::cpu::threshold_f32;
use super::{SegmentationHierarchy, SegmentationOutput, SegmentationParams};
use crate::gpu::{GpuContext, Readback};
use crate::ops::OpError;
use crate::ops::blur::BlurGpu;

mod buffers;
mod enqueue;
mod history;
mod layout;
mod readback;
mod rounds;
mod setup;
#[cfg(test)]
mod tests;
mod tuning;

pub use readback::{segment_gpu, segment_gpu_rgb};
#[cfg(feature = "profiling")]
pub use tuning::SegmentationProfiling;
pub use tuning::{Finisher, SegmentationTuning};

use buffers::FrameBuffers;
use history::History;
use setup::{Kernels, Launch};

/// GPU Felzenszwalb segmentation. Use one per stream: its buffers are ordered by the stream
/// that enqueues, not by cudarc's event tracking. Buffers are allocated on the first frame of a
/// size.
pub struct SegmentationGpu {
    /// The kernels, side streams and device facts (fixed).
    kernels: Kernels,
    /// The caller's tuning and the launch shapes derived from it (see [`SegmentationGpu::set_tuning`]).
    tuning: SegmentationTuning,
    launch: Launch,
    /// Measurement modes.
    #[cfg(feature = "profiling")]
    profiling: SegmentationProfiling,
    /// Buffers of the current frame size.
    buffers: Option<FrameBuffers>,
    /// Pinned host buffer of the labels' readback (grown as frames need).
    labels_readback: RefCell<Readback<u32>>,
    /// What carries over from frame to frame.
    history: History,
    /// The blur's two passes (blur radii above what `segmentation_blur_edges` handles).
    blur: BlurGpu,
}

impl std::fmt::Debug for SegmentationGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentationGpu")
            .field("tuning", &self.tuning)
            .field("produced", &self.history.produced.get())
            .finish_non_exhaustive()
    }
}

impl SegmentationGpu {
    /// Resolves the kernels, with the tuning's defaults for this device.
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Self::with_tuning(gpu, SegmentationTuning::for_device(gpu.info()))
    }

    /// Resolves the kernels, with `tuning`.
    pub fn with_tuning(gpu: &GpuContext, tuning: SegmentationTuning) -> Result<Self, OpError> {
        let kernels = Kernels::new(gpu)?;
        let launch = Launch::new(&kernels, &tuning)?;
        Ok(Self {
            launch,
            kernels,
            history: History::new(&tuning),
            tuning,
            #[cfg(feature = "profiling")]
            profiling: SegmentationProfiling::default(),
            buffers: None,
            labels_readback: RefCell::new(Readback::new(gpu.cuda())),
            blur: BlurGpu::new(gpu)?,
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &SegmentationTuning {
        &self.tuning
    }

    /// Changes the tuning from the next frame on (the launch shapes are derived again; the
    /// captured graphs are dropped, the round history kept).
    pub fn set_tuning(&mut self, tuning: SegmentationTuning) -> Result<(), OpError> {
        self.launch = Launch::new(&self.kernels, &tuning)?;
        self.tuning = tuning;
        self.history
            .graphs
            .replace(crate::gpu::GraphCache::new(tuning.graph_cache));
        Ok(())
    }

    /// The measurement modes in use.
    #[cfg(feature = "profiling")]
    #[must_use]
    pub fn profiling(&self) -> SegmentationProfiling {
        self.profiling
    }

    /// Sets the measurement modes from the next frame on.
    #[cfg(feature = "profiling")]
    pub fn set_profiling(&mut self, profiling: SegmentationProfiling) {
        self.profiling = profiling;
    }

    /// The finisher as it runs on this device (the one-block finisher where the device has no
    /// cooperative launch, whatever the tuning asks).
    #[must_use]
    pub fn finisher(&self) -> Finisher {
        self.launch.finisher
    }

    /// Blocks `segmentation_cat_giant` launches with (0: the trees above 8 192 core members stay
    /// with `segmentation_cat_block`: no cooperative launch, or [`SegmentationTuning::giant_grid`] off).
    #[must_use]
    pub fn giant_blocks(&self) -> u32 {
        self.launch.giant_blocks
    }

    /// Blocks `segmentation_finish_grid` launches with (0: the device has no cooperative launch).
    #[must_use]
    pub fn grid_finish_blocks(&self) -> u32 {
        self.launch.grid_finish_blocks
    }

    /// Frames that needed more rounds than their adaptive caps and were run again before their
    /// download (see [`SegmentationParams::adaptive_rounds`]).
    #[must_use]
    pub fn reruns(&self) -> u64 {
        self.history.reruns.get()
    }

    /// Graphs captured so far (each a new round-count bucket, parameter set or stream).
    #[must_use]
    pub fn graph_captures(&self) -> u64 {
        self.history.graphs.borrow().captures()
    }

    /// The buffers of a `width` x `height` frame (allocated when the size changes; the graphs,
    /// which point into the old buffers, are dropped then).
    fn ensure_buffers(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        width: usize,
        height: usize,
    ) -> Result<(), OpError> {
        if self
            .buffers
            .as_ref()
            .is_some_and(|b| b.width == width && b.height == height)
        {
            return Ok(());
        }
        self.buffers = None;
        self.history.graphs.borrow_mut().clear();
        self.buffers = Some(FrameBuffers::new(stream, width, height)?);
        Ok(())
    }
}
