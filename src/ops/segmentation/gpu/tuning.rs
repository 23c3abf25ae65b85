//! The segmentation's tuning: the choices that change its speed, never its labels (launch
//! shapes, hand-off thresholds, round caps, which cooperative grids run), in one typed struct
//! with defaults per device, and (with the `profiling` feature) the measurement modes of the
//! segmentation benchmark. Tests and benchmarks set fields of [`SegmentationTuning`]; nothing is read
//! from the environment.

use crate::gpu::DeviceInfo;

/// How a phase's last rounds run after its launched ones (see the module header: the finisher).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finisher {
    /// Run the rounds over a cooperative grid of every SM (`segmentation_finish_grid`, a grid
    /// barrier between steps), handing the smallest ones on to `segmentation_finish` (one block);
    /// `false`, or a device without cooperative launch: `segmentation_finish` alone.
    pub grid: bool,
    /// The launched rounds end before the first round that, in recent frames, started with at
    /// most this many frontier pixels; the finisher runs the rest.
    pub handoff_frontier: u32,
    /// The most frontier pixels the finisher starts a round with; a frame left with more after
    /// its launched rounds is run again with larger caps.
    pub frontier_limit: u32,
    /// With `grid`: a round that starts with at most this many frontier pixels is left to
    /// `segmentation_finish` (0: the grid runs every round).
    pub solo_frontier: u32,
}

impl Finisher {
    /// The grid finisher's defaults.
    #[must_use]
    pub fn grid() -> Self {
        Self {
            // Where the device has cooperative launch, a grid barrier is cheaper than a launch.
            grid: true,
            // Launched rounds beat grid rounds down to a few thousand frontier pixels.
            handoff_frontier: 8_192,
            // The grid takes rounds of any size: a frame is never run again for its tail.
            frontier_limit: u32::MAX,
            // A round of a few pixels costs one block a few barriers, the grid 8 grid barriers.
            solo_frontier: 4_096,
        }
    }

    /// The one-block finisher's defaults (devices without cooperative launch).
    #[must_use]
    pub fn block() -> Self {
        Self {
            // The finisher of devices without cooperative launch.
            grid: false,
            // One block is slower than launched rounds on a real frontier: it takes only the tail.
            handoff_frontier: 32_768,
            // Past this, one block's rounds would cost about as much as running the frame again.
            frontier_limit: 65_536,
            // No grid to hand rounds on from: one block runs them all.
            solo_frontier: 0,
        }
    }
}

/// Launch shapes, hand-offs and caps of [`super::SegmentationGpu`]. Every field changes speed only:
/// the labels and the hierarchy are the same for every value (the GPU tests check that for the
/// fields that pick kernels). Grids "per SM" are capped by what the SMs hold at once (the
/// driver's occupancy), so that no second, partial wave of blocks runs after the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentationTuning {
    /// Launch the round kernels as programmatic dependent launches (each starts while the one
    /// before it drains and waits for it on the device); ignored below compute capability 9.0.
    pub pdl: bool,
    /// Replay a frame's launches (after the edge graph) as one captured CUDA graph once the
    /// round caps come from recent frames; `false`: launch them one by one.
    pub graphs: bool,
    /// Blocks per SM of the grid-stride kernels (256 threads; most round steps).
    pub stride_blocks_per_sm: u32,
    /// Blocks per SM of `segmentation_edges` (the edge graph after a two-pass blur).
    pub edges_blocks_per_sm: u32,
    /// Blocks per SM of `segmentation_tiles` (merge round 1; its 512-thread blocks hold 3 an SM).
    pub tiles_blocks_per_sm: u32,
    /// Blocks per SM of `segmentation_cat_small` (the tiny and small trees' lanes).
    pub small_blocks_per_sm: u32,
    /// Blocks per SM of `segmentation_cat_small_mid` and `segmentation_cat_mid` (a block per mid-size tree).
    pub mid_blocks_per_sm: u32,
    /// From this round on, the mid-size trees are walked in the launch of the tiny and small
    /// ones (`segmentation_cat_small_mid`) instead of by `segmentation_cat_mid` on a side stream of its
    /// own; `None`: never. The early rounds have few mid-size trees, and a branch of their own
    /// overlaps them with the other caterpillars.
    pub mid_trees_fused_from: Option<u32>,
    /// Most members of a large tree that `segmentation_cat_block` sorts whole in dynamic shared
    /// memory (16 bytes a member; the device's shared memory may allow fewer; below 1 024 none):
    /// one sort instead of reading the members three times a chunk.
    pub whole_tree_members: u32,
    /// Walk the trees above 8 192 core members (smooth video) over a cooperative grid
    /// (`segmentation_cat_giant`) where the device has cooperative launch, instead of one block each.
    pub giant_grid: bool,
    /// Blocks of that grid (at most what the device holds at once): a small grid starts sooner
    /// beside the other caterpillars, a large one sorts more buckets at once.
    pub giant_blocks: u32,
    /// How each phase's last rounds run.
    pub finisher: Finisher,
    /// Adaptive merge-round caps are rounded up to a multiple of this, so that frames whose
    /// round counts differ a little replay one captured graph (against the launches of the
    /// empty gated rounds it adds).
    pub round_step: u32,
    /// Rounds added to what the first frame of a history used (a frame that needs more is run
    /// again: margin against reruns).
    pub adaptive_margin: u32,
    /// Frames whose round counts set the adaptive caps (their maximum, per phase).
    pub adaptive_history: usize,
    /// Captured graphs kept (round-count buckets and parameter sets seen recently).
    pub graph_cache: usize,
}

impl SegmentationTuning {
    /// The defaults for `device` (programmatic launches from compute capability 9.0 on).
    #[must_use]
    pub fn for_device(device: &DeviceInfo) -> Self {
        Self {
            pdl: device.compute_capability.0 >= 9,
            ..Self::default()
        }
    }
}

impl Default for SegmentationTuning {
    /// The defaults of a compute capability 9.0 device (the H100).
    fn default() -> Self {
        Self {
            // Each round kernel starts while the one before it drains (compute capability 9.0).
            pdl: true,
            // One graph launch instead of a frame's launches: host enqueue 19.10 -> 0.07 ms.
            graphs: true,
            // 8 blocks of 256 threads fill an SM's 2 048 threads.
            stride_blocks_per_sm: 8,
            // 8 blocks of 256 threads fill an SM (the occupancy cap trims what does not fit).
            edges_blocks_per_sm: 8,
            // At least the 3 blocks of 512 an SM holds; the occupancy cap keeps one wave.
            tiles_blocks_per_sm: 4,
            // 8 blocks of 256 threads fill an SM (the occupancy cap trims what does not fit).
            small_blocks_per_sm: 8,
            // The H100's setting for the mid-size kernels' 256-thread blocks (capped by occupancy).
            mid_blocks_per_sm: 5,
            // Early rounds' mid-size trees overlap the others on a branch of their own.
            mid_trees_fused_from: Some(4),
            // Larger trees are the giant grid's; 8 192 members take 128 KiB of shared memory.
            whole_tree_members: 8_192,
            // A tree of ~45 000 members: 0.80 ms on one block, 0.16 ms over the grid (H100).
            giant_grid: true,
            // 48-132 blocks measured alike on the clip frame; 32 were slower (H100).
            giant_blocks: 64,
            // The grid finisher where the device has cooperative launch (block() otherwise).
            finisher: Finisher::grid(),
            // Frames whose round counts differ a little replay one graph.
            round_step: 4,
            // Fewer reruns than +2 over the last frame alone (137 of the clip's 795 frames).
            adaptive_margin: 2,
            // The most of the last 8 frames with + 2 left few reruns on the sample clip.
            adaptive_history: 8,
            // Round-count buckets and parameter sets seen recently fit 16 graphs.
            graph_cache: 16,
        }
    }
}

/// Measurement modes for the segmentation benchmark and the GPU tests that look inside a frame
/// (the `profiling` feature; both off by default).
#[cfg(feature = "profiling")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentationProfiling {
    /// Time every launch of every round in a timer region of its own (an event pair each), all
    /// on the caller's stream and never from a captured graph.
    pub per_kernel_timing: bool,
    /// A one-thread kernel writes `%globaltimer` after the setup, every round and the
    /// relabelling (inside a captured graph too): [`super::SegmentationGpu::round_profile`].
    pub round_stamps: bool,
}
