//! Building the op: kernels resolved, launch shapes asked of the driver, development switches
//! read, and the frame buffers allocated on the first frame of a size.

use super::*;

/// `segment_core`'s weight-0 key limit: `1 << eb` (a key below it is an edge of weight 0,
/// whose caterpillar step passes whatever the order) in merge rounds where every threshold
/// is above 0, i.e. `f32(k / n)` does not round to 0 (thresholds are `f32(Int + k/|C|)` with
/// `Int >= 0`, `|C| <= n`); 0 (no member is joined early) in `min_size` rounds, at scale 0 or
/// when `enabled` is off.
pub(super) fn zero_key_limit(enabled: bool, min_size_phase: bool, k: f64, n: u32, eb: u32) -> u64 {
    let pass = threshold_f32(0.0, k, n.max(1) as usize) > 0.0;
    if enabled && !min_size_phase && pass { 1u64 << eb } else { 0 }
}

/// A development switch's value.
pub(super) fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok())
}

/// `FINISH_FRONTIER` and `FINISH_LIMIT` of the grid or the one-block finisher (development
/// switches `MORPHOSCOPE_SEG_FINISH_FRONTIER`, `MORPHOSCOPE_SEG_FINISH_LIMIT`).
pub(super) fn hand_off(grid: bool) -> (u32, u32) {
    let (frontier, limit) = if grid { (GRID_FINISH_FRONTIER, u32::MAX) } else { (FINISH_FRONTIER, FINISH_LIMIT) };
    (
        env_u32("MORPHOSCOPE_SEG_FINISH_FRONTIER").unwrap_or(frontier),
        env_u32("MORPHOSCOPE_SEG_FINISH_LIMIT").unwrap_or(limit),
    )
}

/// Blocks of `threads` threads of `f` that every SM holds at once, times the SMs (at most
/// `per_sm` an SM; development switch `switch`=N: N an SM whatever fits, for A/B runs):
/// the grid of a kernel whose blocks stride over their work, so that no second, partial wave of
/// blocks runs after the first. H100, 2026-11-26: `segment_cat_thread` at 40 registers holds 6
/// blocks of 256 an SM; launched with 8 an SM (1.33 waves, ncu) it took 87-89 µs in round 2 of a
/// 1080p frame, 79 µs with 6. `segment_tiles` (40 registers, 512 threads) holds 3 blocks an SM
/// and was launched with 4.
pub(super) fn resident_grid(f: &CudaFunction, threads: u32, sms: u32, per_sm: u32, switch: &str) -> Result<u32, GpuError> {
    if let Some(n) = env_u32(switch) {
        return Ok(n.max(1) * sms);
    }
    let fits = f.occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)?;
    Ok(fits.clamp(1, per_sm.max(1)) * sms)
}

/// A one-dimensional launch of `blocks` blocks of `threads` without dynamic shared memory.
pub(super) fn strided(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Members a large tree may have for `segment_cat_block` to sort it whole in shared memory
/// (segment.cu `SEG_CAT_WHOLE`: 16 bytes a member beside the kernel's own static shared
/// memory), at most `WHOLE_MAX`; 0 where the device cannot give 1 024 members' worth or with
/// `MORPHOSCOPE_SEG_WHOLE=0`. Sets the two kernels' dynamic shared memory limit to it.
pub(super) fn whole_tree_members(gpu: &GpuContext, fs: [&CudaFunction; 2]) -> Result<u32, GpuError> {
    use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as F};
    let cap = env_u32("MORPHOSCOPE_SEG_WHOLE").unwrap_or(WHOLE_MAX).min(WHOLE_MAX);
    let optin = u32::try_from(gpu.cuda().attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?).unwrap_or(0);
    let mut members = cap;
    for f in fs {
        let fixed = u32::try_from(f.get_attribute(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?).unwrap_or(u32::MAX);
        let room = optin.saturating_sub(fixed) / 16;
        members = members.min(room & !7);
    }
    if members < 1024 {
        return Ok(0);
    }
    for f in fs {
        let bytes = i32::try_from(whole_tree_bytes(members)).unwrap_or(i32::MAX);
        f.set_attribute(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)?;
    }
    Ok(members)
}

/// Dynamic shared memory of `segment_cat_block` for trees of up to `members` (0: none).
pub(super) fn whole_tree_bytes(members: u32) -> u32 {
    16 * members
}

/// Blocks of `segment_finish_grid` on this device: every SM's share of resident blocks of
/// `CAT_THREADS` threads (0: no cooperative launch).
pub(super) fn grid_finish_blocks(gpu: &GpuContext, f: &CudaFunction, sms: u32) -> Result<u32, GpuError> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    if gpu.cuda().attribute(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Ok(0);
    }
    let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(CAT_THREADS, 0, None)?;
    let cap = env_u32("MORPHOSCOPE_SEG_FINISH_BLOCKS").unwrap_or(u32::MAX);
    Ok(per_sm.saturating_mul(sms).min(cap))
}

/// Per phase, bit i set where the phase's round i + 1 walked a giant tree (`counts`: the
/// per-round giant-tree counts, merge rounds from 1, `min_size` rounds from `max_rounds + 1`);
/// rounds past 64 are always launched with `segment_cat_giant` and need no bit.
pub(super) fn giant_masks(counts: &[u32], max_rounds: u32) -> [u64; 2] {
    let firsts = [1usize, max_rounds as usize + 1];
    std::array::from_fn(|ph| {
        (0..64).filter(|&i| counts.get(firsts[ph] + i).is_some_and(|&c| c > 0)).fold(0u64, |m, i| m | (1 << i))
    })
}

/// Round caps of the parameters: merge rounds, `min_size` rounds (none when `min_size` <= 1).
pub(super) fn full_caps(params: &SegmentParams) -> [u32; 2] {
    let ms = if params.min_size > 1 { params.max_min_size_rounds } else { 0 };
    [params.max_rounds, ms]
}

pub(super) fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Runs `f` inside a timer region when `timer` is given.
pub(super) fn timed(
    timer: &mut Option<&mut KernelTimer>,
    stream: &Arc<CudaStream>,
    name: &'static str,
    f: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    match timer {
        Some(t) => t.time(stream, name, f),
        None => f(),
    }
}

pub(super) fn raw<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _record) = s.device_ptr(stream);
    p
}

impl SegmentGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("segment", name);
        let sms = u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1);
        let stream = || gpu.cuda().new_stream().map_err(GpuError::from);
        let event = || gpu.cuda().new_event(None).map_err(GpuError::from);
        let f_finish_grid = f("segment_finish_grid")?;
        let f_cat_giant = f("segment_cat_giant")?;
        let giant_blocks = if std::env::var_os("MORPHOSCOPE_SEG_NO_GIANT").is_some() {
            0
        } else {
            grid_finish_blocks(gpu, &f_cat_giant, sms)?.min(env_u32("MORPHOSCOPE_SEG_GIANT_BLOCKS").unwrap_or(GIANT_BLOCKS))
        };
        let grid_finish_blocks = grid_finish_blocks(gpu, &f_finish_grid, sms)?;
        let f_cat_block = f("segment_cat_block")?;
        let f_cat_block_g = f("segment_cat_block_g")?;
        let whole_members = whole_tree_members(gpu, [&f_cat_block, &f_cat_block_g])?;
        let f_cat_thread = f("segment_cat_thread")?;
        let f_cat_warp = f("segment_cat_warp")?;
        let f_cat_mid = f("segment_cat_mid")?;
        let f_cat_small = f("segment_cat_small")?;
        let f_cat_small_mid = f("segment_cat_small_mid")?;
        let small_grid = resident_grid(&f_cat_small, CAT_MID_THREADS, sms, 8, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let small_mid_grid = resident_grid(&f_cat_small_mid, CAT_MID_THREADS, sms, 5, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let tiny_grid = resident_grid(&f_cat_thread, BLOCK, sms, 8, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let warp_grid = resident_grid(&f_cat_warp, 128, sms, 8, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let mid_grid = resident_grid(&f_cat_mid, CAT_MID_THREADS, sms, 5, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let f_tiles = f("segment_tiles")?;
        let f_edges = f("segment_edges")?;
        let tiles_grid = resident_grid(&f_tiles, TILE_THREADS, sms, 4, "MORPHOSCOPE_SEG_TILE_GRID_PER_SM")?;
        let edges_grid = resident_grid(&f_edges, BLOCK, sms, 8, "MORPHOSCOPE_SEG_EDGES_GRID_PER_SM")?;
        let grid_finisher = grid_finish_blocks > 0 && std::env::var_os("MORPHOSCOPE_SEG_BLOCK_FINISH").is_none();
        let (finish_frontier, finish_limit) = hand_off(grid_finisher);
        Ok(Self {
            blur: BlurGpu::new(gpu)?,
            f_init: f("segment_init")?,
            f_edges,
            f_blur_edges: f("segment_blur_edges")?,
            f_least: f("segment_least")?,
            f_targets: f("segment_targets")?,
            f_trees: f("segment_trees")?,
            f_targets_trees: f("segment_targets_trees")?,
            f_exits: f("segment_exits")?,
            f_core: f("segment_core")?,
            f_alloc: f("segment_alloc")?,
            f_cat_thread,
            f_cat_small,
            f_cat_small_mid,
            small_cfg: strided(small_grid, CAT_MID_THREADS),
            small_mid_cfg: strided(small_mid_grid, CAT_MID_THREADS),
            f_cat_warp,
            f_cat_block,
            f_cat_block_g,
            giant_blocks,
            f_cat_giant,
            f_cat_mid,
            f_reset_done: f("segment_reset_done")?,
            f_final: f("segment_final")?,
            f_minpix: f("segment_minpix")?,
            f_scan_count: f("segment_scan_count")?,
            f_scan_blocks: f("segment_scan_blocks")?,
            f_scan_label: f("segment_scan_label")?,
            f_labels: f("segment_labels")?,
            f_level_threshold: f("segment_level_threshold")?,
            f_level_comp: f("segment_level_comp")?,
            f_stamp: f("segment_stamp")?,
            f_finish: f("segment_finish")?,
            f_finish_grid,
            grid_finish_blocks,
            f_tiles,
            tiles_grid,
            edges_grid,
            max_blocks: sms * 8,
            round_step: env_u32("MORPHOSCOPE_SEG_ROUND_STEP").filter(|&s| s > 0).unwrap_or(GRAPH_ROUND_STEP),
            finish_frontier,
            finish_limit,
            tiny_cfg: strided(tiny_grid, BLOCK),
            warp_cfg: strided(warp_grid, 128),
            // With a whole tree's shared memory one block fits an SM.
            block_cfg: LaunchConfig {
                grid_dim: (if whole_members > 0 { sms } else { sms * 2 }, 1, 1),
                block_dim: (CAT_THREADS, 1, 1),
                shared_mem_bytes: whole_tree_bytes(whole_members),
            },
            mid_cfg: strided(mid_grid, CAT_MID_THREADS),
            side: [stream()?, stream()?, stream()?],
            fork: event()?,
            joins: [event()?, event()?, event()?],
            bufs: None,
            produced: Cell::new(None),
            last_body: Cell::new(None),
            reruns: Cell::new(0),
            hint: Cell::new(None),
            recent: RefCell::new(std::collections::VecDeque::with_capacity(ADAPTIVE_HISTORY)),
            labels_readback: RefCell::new(Readback::new(gpu.cuda())),
            graphs: RefCell::new(GraphCache::new(GRAPH_CACHE)),
            stamp_labels: RefCell::new(Vec::new()),
            round_stamps: false,
            finisher: std::env::var_os("MORPHOSCOPE_SEG_NO_FINISH").is_none(),
            grid_finisher,
            finish_solo: env_u32("MORPHOSCOPE_SEG_FINISH_SOLO").unwrap_or(FINISH_SOLO),
            detailed_timing: false,
            // Development switch: MORPHOSCOPE_NO_PDL set turns programmatic launches off.
            programmatic_launch: std::env::var_os("MORPHOSCOPE_NO_PDL").is_none(),
            has_pdl: gpu.info().compute_capability.0 >= 9,
            use_graphs: true,
            tile_pass: std::env::var_os("MORPHOSCOPE_SEG_NO_TILES").is_none(),
            separate_blur: std::env::var_os("MORPHOSCOPE_SEG_SEPARATE_BLUR").is_some(),
            init_in_tiles: std::env::var_os("MORPHOSCOPE_SEG_INIT_SEPARATE").is_none(),
            min_size_lists: std::env::var_os("MORPHOSCOPE_SEG_MS_ALL").is_none(),
            tile_roots: std::env::var_os("MORPHOSCOPE_SEG_TILE_ROOTS_SCAN").is_none(),
            zero_joins: std::env::var_os("MORPHOSCOPE_SEG_ZERO_SORT").is_none(),
            fuse_from: env_u32("MORPHOSCOPE_SEG_FUSE_FROM").unwrap_or(FUSE_FROM),
            cat_fuse_from: env_u32("MORPHOSCOPE_SEG_CAT_FUSE_FROM").unwrap_or(CAT_FUSE_FROM),
            cat_fuse_mid_from: env_u32("MORPHOSCOPE_SEG_CAT_FUSE_MID_FROM").unwrap_or(CAT_FUSE_MID_FROM),
        })
    }

    /// Ends each phase with `segment_finish_grid` (`on`, where the device has cooperative
    /// launch: the default there, unless `MORPHOSCOPE_SEG_BLOCK_FINISH` is set), the finisher's
    /// rounds over a cooperative grid of every SM, a grid barrier between steps, or with
    /// `segment_finish` (one block). Resets [`SegmentGpu::finish_frontier`] and
    /// [`SegmentGpu::finish_limit`] to that finisher's defaults. Returns whether the grid
    /// finisher is on.
    pub fn set_grid_finisher(&mut self, on: bool) -> bool {
        self.grid_finisher = on && self.grid_finish_blocks > 0;
        (self.finish_frontier, self.finish_limit) = hand_off(self.grid_finisher);
        self.grid_finisher
    }

    /// Blocks `segment_cat_giant` launches with (0: trees above 8 192 core members stay with
    /// `segment_cat_block`: no cooperative launch, or `MORPHOSCOPE_SEG_NO_GIANT` set).
    #[must_use]
    pub fn giant_blocks(&self) -> u32 {
        self.giant_blocks
    }

    /// Blocks `segment_finish_grid` launches with (0: the device has no cooperative launch).
    #[must_use]
    pub fn grid_finish_blocks(&self) -> u32 {
        self.grid_finish_blocks
    }

    /// A grid-stride launch over at most `items` items.
    pub(super) fn stride(&self, items: usize) -> LaunchConfig {
        Self::stride_within(items, self.max_blocks)
    }

    /// A grid-stride launch over at most `items` items with at most `blocks` blocks of [`BLOCK`].
    pub(super) fn stride_within(items: usize, blocks: u32) -> LaunchConfig {
        LaunchConfig { grid_dim: (blocks_for(items, BLOCK).min(blocks), 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
    }

    pub(super) fn ensure_buffers(&mut self, stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<(), GpuError> {
        if self.bufs.as_ref().is_some_and(|b| b.width == width && b.height == height) {
            return Ok(());
        }
        self.bufs = None;
        self.graphs.borrow_mut().clear();
        let n = width * height;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        let a64 = |len: usize, what: &str| alloc_zeroed::<u64>(stream, len, what, width, height);
        let w4 = alloc_zeroed::<f64>(stream, 4 * n, "segment edge weights", width, height)?;
        let round = alloc_zeroed::<u16>(stream, n, "segment hierarchy rounds", width, height)?;
        // Union-find links; a link is only written when its component joins another, so the
        // links are also the hierarchy's parents.
        let link = a(n, "segment links (hierarchy parents)")?;
        // A flag byte per component (frozen / at least min_size, joined): see segment.cu.
        let flags = alloc_zeroed::<u8>(stream, n, "segment component flags", width, height)?;
        let labels = a(n, "segment labels")?;
        let ctl = a(NCTL, "segment round events")?;
        let mctl = a(NCTL, "segment round merges")?;
        // Words 0-3: segment count, level threshold, phases left undone; 4-5: the barrier of
        // segment_finish_grid (zero here, back to zero after every barrier).
        let info = a(8, "segment info")?;
        let names32 = [
            "components",
            "sizes",
            "targets",
            "trees",
            "tree ranges",
            "members by tree",
            "trees of the round",
            "small trees",
            "large trees",
            "edge orders",
            "first pixels",
            "root labels",
            "frontier list A",
            "frontier list B",
            "root list A",
            "root list B",
            "tiny trees",
            "mid-size trees",
        ];
        let mut u32s = Vec::with_capacity(names32.len() + 2);
        for what in names32 {
            u32s.push(a(n, what)?);
        }
        u32s.push(a(blocks_for(n, SCAN_BLOCK) as usize, "scan blocks")?);
        let counts = a(NCOUNTS * NCTL, "per-round list counts")?;
        let stamps = a64(NCTL + 4, "round stamps")?;
        let mut u64s = Vec::with_capacity(6);
        for what in ["least edges", "target keys", "tree exits", "internal differences"] {
            u64s.push(a64(n, what)?);
        }
        // Large trees sorted by segment_cat_block: (key, id) twice over each tree's range.
        u64s.push(a64(2 * n, "large-tree sort keys")?);
        u32s.push(a(2 * n, "large-tree sort ids")?);
        // Per tree: core members and members not yet counted off (see segment.cu's tcnt).
        u64s.push(a64(n, "tree counts")?);
        u64s.push(a64(GIANT_WORDS, "giant-tree scratch")?);
        let r32 = |i: usize| raw(&u32s[i], stream);
        let r64 = |i: usize| raw(&u64s[i], stream);
        let p = Ptrs {
            w4: raw(&w4, stream),
            comp: r32(0),
            link: raw(&link, stream),
            size: r32(1),
            done: raw(&flags, stream),
            target: r32(2),
            tree: r32(3),
            tcnt: r64(5),
            joff: r32(4),
            jarr: r32(5),
            hlist: r32(6),
            slist: r32(7),
            blist: r32(8),
            order: r32(9),
            minpix: r32(10),
            rootlabel: r32(11),
            flist: [r32(12), r32(13)],
            rlist: [r32(14), r32(15)],
            tlist: r32(16),
            mlist: r32(17),
            blocksum: r32(18),
            counts: raw(&counts, stream),
            stamps: raw(&stamps, stream),
            scr_i: r32(19),
            scr_k: r64(4),
            giant: r64(6),
            best: r64(0),
            tkey: r64(1),
            exitk: r64(2),
            cint: r64(3),
            round: raw(&round, stream),
            labels: raw(&labels, stream),
            ctl: raw(&ctl, stream),
            mctl: raw(&mctl, stream),
            info: raw(&info, stream),
        };
        self.bufs = Some(Buffers {
            width,
            height,
            p,
            _u32s: u32s,
            _u64s: u64s,
            w4,
            _flags: flags,
            round,
            link,
            labels,
            ctl,
            mctl,
            info,
            counts,
            stamps,
        });
        Ok(())
    }
}
