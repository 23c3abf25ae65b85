//! CUDA Felzenszwalb segmentation (`kernels/segment.cu`; the CPU model of every kernel is
//! [`super::boruvka`]): blur ([`BlurGpu`]), edge weights and each pixel's edges sorted by key,
//! then three phases of rounds enqueued as a device loop — zero-weight chains, exact merge
//! rounds, `min_size` chains — where every kernel returns at once after the round that changed
//! nothing, so nothing is read back until [`SegmentGpu::download`]; finally raster-order labels
//! by a block scan.
//!
//! Launches: ~22 kernels a round and 50–100 rounds a frame. Once the round caps come from the
//! previous frame (`adaptive_rounds`, rounded up to a multiple of 8), everything after the blur
//! is captured once as a CUDA graph ([`GraphCache`], keyed by buffers, frame size, parameters,
//! caps and stream) and replayed with one launch: the host spends ~0.1 ms instead of ~20 ms a
//! 1080p frame, and the GPU ~8 % less (`BENCHMARKS.md`). The first frame, fixed caps and
//! [`SegmentGpu::detailed_timing`] launch directly; [`SegmentGpu::use_graphs`] turns graphs off,
//! and a failed capture or graph launch (a driver without graph support) turns them off for good
//! after launching that frame directly.
//!
//! Timer regions: `segment_blur`, then with a graph one region, `segment_rounds` (edge graph,
//! rounds, relabelling). Direct launches: `segment_graph` (init, weights, edge order),
//! `segment_relabel`, and for the rounds either one region per phase, `segment_zero`,
//! `segment_merge`, `segment_minsize`, or with `detailed_timing` one region per launch, named
//! after its kernel: `segment_minedge` (least edges, every phase), `segment_targets`,
//! `segment_limits`, `segment_pairs`, `segment_push`, `segment_alloc`, `segment_scatter`,
//! `segment_plain`, `segment_groups` (the first absorption pass), `segment_sub_*` (the same for
//! the sub-round passes), `segment_zero_link` / `segment_zero_flatten` (zero-weight chains),
//! `segment_merge` (targets of the zero phase) and `segment_minsize` (every `min_size` kernel).
//! Per-launch regions add two events per launch, so time the whole op separately.
//!
//! Rounds: a phase stops by itself; `max_rounds` only bounds the launches. With
//! `adaptive_rounds` the next frame enqueues the rounds this frame used plus a margin (video
//! frames are alike), doubling after a capped frame.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::boruvka::eid_bits;
use super::cpu::threshold_f32;

/// Absorption passes per exact round of these kernels (the first plus sub-rounds).
const SUB_ROUNDS: usize = 4;
/// Rounds reserved for the kernels' zero-weight phase (global round numbers `1..=32`).
const ZERO_ROUNDS: u32 = 32;

/// True when zero-weight edges certainly merge (`k > 0` and `k / n` does not underflow).
fn zero_phase(params: &SegmentParams, n: usize) -> bool {
    threshold_f32(0.0, params.k(), n.max(1)) > 0.0
}
use super::{MAX_ROUNDS_LIMIT, SegmentHierarchy, SegmentOutput, SegmentParams};
use crate::gpu::launch::{alloc_zeroed, blocks_for, check_frame_size, grid2d, upload_packed};
use crate::gpu::{GpuContext, GpuError, GraphCache, KernelTimer, Readback};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::BlurGpu;
use crate::ops::blur::cpu::{pack_gray, pack_rgb};

/// Entries of the per-round counters (`ctl[0]` is the always-on gate).
const NCTL: usize = ZERO_ROUNDS as usize + 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Entries of each per-absorption-pass counter array (`[r * SUB_ROUNDS + s]`).
const NSMERGE: usize = NCTL * SUB_ROUNDS;
/// The five per-pass counter arrays side by side: merges, joiner cursors, listed groups,
/// groups with joiners (`hlist`), joiners (`xlist`).
const NCOUNTERS: usize = 5 * NSMERGE;
/// Pixels per block of the relabel scan.
const SCAN_BLOCK: u32 = 1024;
/// Warps per block of `segment_groups_warp` (keep in sync with SEG_WARPS_PER_BLOCK).
const WARPS_PER_BLOCK: u32 = 4;
/// Threads per block of the grid-stride kernels.
const BLOCK: u32 = 256;
/// Adaptive round caps are rounded up to a multiple of this, so that video frames whose round
/// counts differ a little replay the same captured graph.
const GRAPH_ROUND_STEP: u32 = 8;
/// Captured graphs kept per op (round-count buckets and parameter sets seen recently).
const GRAPH_CACHE: usize = 6;
/// Kernel modes (keep in sync with SEG_MODE_* in segment.cu).
const MODE_MERGE: u32 = 0;
const MODE_MIN_SIZE: u32 = 1;
const MODE_ZERO: u32 = 2;

/// Raw device addresses of the op's buffers. The kernels of one frame run on one stream in
/// order, so the launches pass these plain addresses instead of tracked `CudaSlice`s: cudarc's
/// per-argument event tracking costs ~1 µs per argument and a frame launches hundreds of
/// kernels with ~20 arguments each.
#[derive(Clone, Copy, Debug, Default)]
struct Ptrs {
    w4: u64,
    comp: u64,
    link: u64,
    size: u64,
    cint: u64,
    done: u64,
    best: u64,
    tkey: u64,
    target: u64,
    lim: u64,
    limj: u64,
    gok: u64,
    gsize: u64,
    gint: u64,
    pflag: u64,
    /// Joiner layout: count per group, slot and group per joiner, range offset, the ranges.
    jcnt: u64,
    jslot: u64,
    jtgt: u64,
    joff: u64,
    jarr: u64,
    /// Groups with joiners in this pass (for `segment_groups_warp`).
    glist: u64,
    /// Per pixel: its edges' directions sorted by key, a cursor past its dead edges, the count.
    order: u64,
    /// This pass's groups with joiners (each once, by its first joiner) and joiners.
    hlist: u64,
    xlist: u64,
    parent: u64,
    round: u64,
    minpix: u64,
    rootlabel: u64,
    labels: u64,
    blocksum: u64,
    ctl: u64,
    mctl: u64,
    fcnt: u64,
    rcnt: u64,
    flist: [u64; 2],
    rlist: [u64; 2],
    info: u64,
    slim: u64,
    smerge: u64,
}

/// The device buffers (owned; `p` holds their addresses).
struct Buffers {
    width: usize,
    height: usize,
    p: Ptrs,
    // Owners of the memory `p` points into (read only through `p`).
    _u32s: Vec<CudaSlice<u32>>,
    _u64s: Vec<CudaSlice<u64>>,
    _w4: CudaSlice<f64>,
    round: CudaSlice<u16>,
    parent: CudaSlice<u32>,
    labels: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    mctl: CudaSlice<u32>,
    info: CudaSlice<u32>,
}

/// Entry points of `kernels/segment.cu` (checked by the registry at start).
pub const FUNCTIONS: &[&str] = &[
    "segment_weights",
    "segment_init",
    "segment_least",
    "segment_targets",
    "segment_order",
    "segment_limits",
    "segment_pairs",
    "segment_push",
    "segment_push_sub",
    "segment_alloc",
    "segment_scatter",
    "segment_groups_plain",
    "segment_groups_warp",
    "segment_chain_link",
    "segment_chain_flatten",
    "segment_reset_done",
    "segment_final",
    "segment_minpix",
    "segment_scan_count",
    "segment_scan_blocks",
    "segment_scan_label",
    "segment_labels",
    "segment_level_threshold",
    "segment_level_comp",
];

/// What the last enqueue produced.
#[derive(Clone, Copy, Debug)]
struct Produced {
    width: usize,
    height: usize,
    /// Rounds enqueued per phase: zero, merge, min_size.
    caps: [u32; 3],
    /// `max_rounds` of the parameters (the `min_size` rounds are numbered after it).
    max_rounds: u32,
    /// `Some(level)` after [`SegmentGpu::enqueue_level`].
    level: Option<u32>,
}

/// What one frame's launch sequence depends on (the key of its captured graph).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Body {
    width: usize,
    height: usize,
    channels: usize,
    /// Device address of the `f64` smoothing (the blur's output buffer).
    smooth: u64,
    /// Device address of the first buffer (identifies this allocation of the buffers).
    comp: u64,
    caps: [u32; 3],
    /// `k = scale / 255` as bits (compared exactly).
    k_bits: u64,
    min_size: u32,
    max_rounds: u32,
}

/// A captured frame: its body and the stream it replays on.
#[derive(Clone, Copy, Debug, PartialEq)]
struct GraphKey {
    stream: usize,
    body: Body,
}

/// Rounds that changed something, per phase, read from the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RoundsUsed {
    used: [u32; 3],
    capped: [bool; 3],
}

/// GPU Felzenszwalb segmentation with buffers for one frame size. Use one per stream: the
/// internal buffers are ordered by the stream that enqueues, not by cudarc's event tracking.
pub struct SegmentGpu {
    blur: BlurGpu,
    f_weights: CudaFunction,
    f_init: CudaFunction,
    f_least: CudaFunction,
    f_targets: CudaFunction,
    f_order: CudaFunction,
    f_limits: CudaFunction,
    f_pairs: CudaFunction,
    f_push: CudaFunction,
    f_push_sub: CudaFunction,
    f_alloc: CudaFunction,
    f_scatter: CudaFunction,
    f_groups_plain: CudaFunction,
    f_groups_warp: CudaFunction,
    f_chain_link: CudaFunction,
    f_chain_flatten: CudaFunction,
    f_reset_done: CudaFunction,
    f_final: CudaFunction,
    f_minpix: CudaFunction,
    f_scan_count: CudaFunction,
    f_scan_blocks: CudaFunction,
    f_scan_label: CudaFunction,
    f_labels: CudaFunction,
    f_level_threshold: CudaFunction,
    f_level_comp: CudaFunction,
    max_blocks: u32,
    /// Launch of `segment_groups_warp`: 4 warps a block (its shared arrays), 8 blocks an SM.
    warp_cfg: LaunchConfig,
    bufs: Option<Buffers>,
    produced: Option<Produced>,
    /// Rounds used by the last downloaded frame (for `adaptive_rounds`).
    hint: Cell<Option<RoundsUsed>>,
    /// Pinned buffer for the labels' readback.
    labels_readback: RefCell<Readback<u32>>,
    /// Captured launch sequences of recent frames (see [`SegmentGpu::use_graphs`]).
    graphs: RefCell<GraphCache<GraphKey>>,
    /// Time every kernel of every round separately (many event pairs per frame; never graphs).
    pub detailed_timing: bool,
    /// Replay a captured CUDA graph of the whole frame (edge graph, rounds, relabelling) when
    /// the round caps come from the previous frame (`adaptive_rounds`): one launch instead of
    /// ~20 a round. The timer then has one region, `segment_rounds`, instead of one per phase.
    pub use_graphs: bool,
}

impl std::fmt::Debug for SegmentGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentGpu").field("produced", &self.produced).finish_non_exhaustive()
    }
}

fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Runs `f` inside a timer region when `timer` is given.
fn timed(
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

fn raw<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _record) = s.device_ptr(stream);
    p
}

impl SegmentGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("segment", name);
        let sms = u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1);
        Ok(Self {
            blur: BlurGpu::new(gpu)?,
            f_weights: f("segment_weights")?,
            f_init: f("segment_init")?,
            f_least: f("segment_least")?,
            f_targets: f("segment_targets")?,
            f_order: f("segment_order")?,
            f_limits: f("segment_limits")?,
            f_pairs: f("segment_pairs")?,
            f_push: f("segment_push")?,
            f_push_sub: f("segment_push_sub")?,
            f_alloc: f("segment_alloc")?,
            f_scatter: f("segment_scatter")?,
            f_groups_plain: f("segment_groups_plain")?,
            f_groups_warp: f("segment_groups_warp")?,
            f_chain_link: f("segment_chain_link")?,
            f_chain_flatten: f("segment_chain_flatten")?,
            f_reset_done: f("segment_reset_done")?,
            f_final: f("segment_final")?,
            f_minpix: f("segment_minpix")?,
            f_scan_count: f("segment_scan_count")?,
            f_scan_blocks: f("segment_scan_blocks")?,
            f_scan_label: f("segment_scan_label")?,
            f_labels: f("segment_labels")?,
            f_level_threshold: f("segment_level_threshold")?,
            f_level_comp: f("segment_level_comp")?,
            max_blocks: sms * 8,
            warp_cfg: LaunchConfig {
                grid_dim: (sms * 8, 1, 1),
                block_dim: (32 * WARPS_PER_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            },
            bufs: None,
            produced: None,
            hint: Cell::new(None),
            labels_readback: RefCell::new(Readback::new(gpu.cuda())),
            graphs: RefCell::new(GraphCache::new(GRAPH_CACHE)),
            detailed_timing: false,
            use_graphs: true,
        })
    }

    /// A grid-stride launch over at most `items` items.
    fn stride(&self, items: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks_for(items, BLOCK).min(self.max_blocks), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    fn ensure_buffers(&mut self, stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<(), GpuError> {
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
        let parent = a(n, "segment hierarchy parents")?;
        let labels = a(n, "segment labels")?;
        let ctl = a(NCTL, "segment round events")?;
        let mctl = a(NCTL, "segment round merges")?;
        let info = a(4, "segment info")?;
        let names32 = [
            "components",
            "links",
            "sizes",
            "(unused)",
            "done flags",
            "targets",
            "group flags",
            "group sizes",
            "(unused)",
            "pair flags",
            "joiner counts",
            "joiner slots",
            "first pixels",
            "root labels",
            "frontier counts",
            "root counts",
            "frontier list A",
            "frontier list B",
            "root list A",
            "root list B",
        ];
        let mut u32s = Vec::with_capacity(names32.len() + 1);
        for (i, what) in names32.iter().enumerate() {
            let len = if (14..16).contains(&i) {
                NCTL
            } else if i == 3 || i == 8 {
                1
            } else {
                n
            };
            u32s.push(a(len, what)?);
        }
        u32s.push(a(blocks_for(n, SCAN_BLOCK) as usize, "scan blocks")?);
        u32s.push(a(NCOUNTERS, "sub-round merges, joiner cursors, group counts, list counts")?);
        for what in [
            "joiner groups",
            "joiner offsets",
            "joiner ranges",
            "groups with joiners",
            "edge orders",
            "groups with joiners (registration)",
            "joiners (registration)",
        ] {
            u32s.push(a(n, what)?);
        }
        let mut u64s = Vec::with_capacity(7);
        for what in
            ["least edges", "target keys", "limits", "joiner limits", "internal differences", "group Int", "group limits"]
        {
            u64s.push(a64(n, what)?);
        }
        let r32 = |i: usize| raw(&u32s[i], stream);
        let r64 = |i: usize| raw(&u64s[i], stream);
        let p = Ptrs {
            w4: raw(&w4, stream),
            comp: r32(0),
            link: r32(1),
            size: r32(2),
            cint: r64(4),
            done: r32(4),
            target: r32(5),
            gok: r32(6),
            gsize: r32(7),
            gint: r64(5),
            pflag: r32(9),
            jcnt: r32(10),
            jslot: r32(11),
            jtgt: r32(22),
            joff: r32(23),
            jarr: r32(24),
            glist: r32(25),
            order: r32(26),
            hlist: r32(27),
            xlist: r32(28),
            minpix: r32(12),
            rootlabel: r32(13),
            fcnt: r32(14),
            rcnt: r32(15),
            flist: [r32(16), r32(17)],
            rlist: [r32(18), r32(19)],
            blocksum: r32(20),
            smerge: r32(21),
            slim: r64(6),
            best: r64(0),
            tkey: r64(1),
            lim: r64(2),
            limj: r64(3),
            parent: raw(&parent, stream),
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
            _w4: w4,
            round,
            parent,
            labels,
            ctl,
            mctl,
            info,
        });
        Ok(())
    }

    /// Enqueues the segmentation of a packed grey frame.
    pub fn enqueue(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 1, params)
    }

    /// Enqueues the segmentation of a packed interleaved RGB frame (`3 * width` bytes a row).
    pub fn enqueue_rgb(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 3, params)
    }

    /// Round caps for this frame: the parameters (`false`), or the last frame's use plus a
    /// margin, rounded up to [`GRAPH_ROUND_STEP`] (`true`).
    fn caps(&self, params: &SegmentParams, n: usize) -> ([u32; 3], bool) {
        let zero = if zero_phase(params, n) { ZERO_ROUNDS } else { 0 };
        let ms = if params.min_size > 1 { params.max_min_size_rounds } else { 0 };
        let full = [zero, params.max_rounds, ms];
        match self.hint.get().filter(|_| params.adaptive_rounds) {
            None => (full, false),
            Some(h) => {
                let mut c = [0; 3];
                for i in 0..3 {
                    let want = if h.capped[i] { h.used[i].saturating_mul(2) } else { h.used[i] + h.used[i] / 4 + 4 };
                    c[i] = want.div_ceil(GRAPH_ROUND_STEP).saturating_mul(GRAPH_ROUND_STEP).min(full[i]);
                }
                (c, true)
            }
        }
    }

    /// Enqueues the segmentation of `channels` (1 or 3) interleaved samples per pixel.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_channels(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        channels: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        check_frame_size(width * channels, height)?;
        let n = width * height;
        if n >= (1 << 30) {
            return Err(OpError::Unsupported(format!("{width}x{height}: edge ids need 4 * pixels < 2^32")));
        }
        self.blur.enqueue_f64_named(stream, timer, input, width, height, channels, &params.blur(), "segment_blur")?;
        self.ensure_buffers(stream, width, height)?;
        let (caps, adaptive) = self.caps(params, n);
        self.produced = Some(Produced { width, height, caps, max_rounds: params.max_rounds, level: None });
        let (Some(b), Some(smooth)) = (self.bufs.as_ref(), self.blur.output_f64()) else { return Ok(()) };
        if n == 0 {
            return Ok(());
        }
        let body = Body {
            width,
            height,
            channels,
            smooth: raw(smooth, stream),
            comp: b.p.comp,
            caps,
            k_bits: params.k().to_bits(),
            min_size: params.min_size as u32,
            max_rounds: params.max_rounds,
        };
        if adaptive && self.use_graphs && !self.detailed_timing {
            let key = GraphKey { stream: stream.cu_stream() as usize, body };
            let replayed = {
                let mut graphs = self.graphs.borrow_mut();
                timer.time(stream, "segment_rounds", || {
                    graphs.launch(stream, key, || self.enqueue_body(stream, &mut None, &body))
                })
            };
            match replayed {
                Ok(()) => return Ok(()),
                // Nothing of the frame ran (a failed capture is ended and dropped): launch it
                // directly, and from now on (a driver without graph support fails every time).
                Err(e) => {
                    log::warn!("segmentation: CUDA graph capture or launch failed ({e}); launching kernels directly");
                    self.use_graphs = false;
                    self.graphs.borrow_mut().clear();
                }
            }
        }
        self.enqueue_body(stream, &mut Some(timer), &body)?;
        Ok(())
    }

    /// Graphs captured so far (each a new round-count bucket, parameter set or stream).
    #[must_use]
    pub fn graph_captures(&self) -> u64 {
        self.graphs.borrow().captures()
    }

    /// Everything after the blur: edge graph, the three phases of rounds, relabelling. With
    /// `timer` `None` it only launches kernels (what a graph capture records).
    fn enqueue_body(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        body: &Body,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (width, height, n) = (body.width, body.height, body.width * body.height);
        let (w, h, c, nn) = (width as u32, height as u32, body.channels as u32, n as u32);
        let (nctl, ncounters) = (NCTL as u32, NCOUNTERS as u32);
        let smooth = body.smooth;
        timed(timer, stream, "segment_graph", || {
            let mut l = stream.launch_builder(&self.f_init);
            l.arg(&p.comp).arg(&p.link).arg(&p.size).arg(&p.cint).arg(&p.done).arg(&p.best).arg(&p.target);
            l.arg(&p.gok).arg(&p.pflag).arg(&p.jcnt).arg(&p.parent).arg(&p.round).arg(&p.ctl).arg(&p.mctl);
            l.arg(&p.fcnt).arg(&p.rcnt).arg(&p.smerge).arg(&nn).arg(&nctl).arg(&ncounters);
            // SAFETY: grid-stride over max(n, NCOUNTERS); each array is written only below its
            // own length (n, NCTL or NCOUNTERS), checked in the kernel; all buffers are this op's.
            unsafe { l.launch(self.stride(n.max(NCOUNTERS))) }?;
            let mut l = stream.launch_builder(&self.f_weights);
            l.arg(&smooth).arg(&p.w4).arg(&w).arg(&h).arg(&c);
            // SAFETY: one thread per pixel (bounded in the kernel); smooth holds n * channels
            // doubles (this frame's blur), w4 holds 4n.
            unsafe { l.launch(grid2d(width, height, 32, 8)) }?;
            let mut l = stream.launch_builder(&self.f_order);
            let eb = eid_bits(n);
            l.arg(&p.w4).arg(&p.order).arg(&w).arg(&h).arg(&eb);
            // SAFETY: grid-stride over pixels < n; only in-image neighbours' edges are read.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        let k = f64::from_bits(body.k_bits);
        let min_size = body.min_size;
        let z = ZERO_ROUNDS;
        let phases = [
            (MODE_ZERO, 1u32, body.caps[0], "segment_zero"),
            (MODE_MERGE, z + 1, body.caps[1], "segment_merge"),
            (MODE_MIN_SIZE, z + body.max_rounds + 1, body.caps[2], "segment_minsize"),
        ];
        for (mode, first, count, name) in phases {
            if count == 0 {
                continue;
            }
            match timer {
                Some(t) if self.detailed_timing => {
                    self.enqueue_phase(stream, &mut Some(&mut **t), mode, first, count, k, min_size)?;
                }
                _ => timed(timer, stream, name, || self.enqueue_phase(stream, &mut None, mode, first, count, k, min_size))?,
            }
        }
        timed(timer, stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_final);
            l.arg(&p.comp).arg(&p.link).arg(&p.minpix).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at roots < n.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer)
    }

    /// `count` rounds of `mode` with global numbers `first..`, each gated on the previous.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_phase(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        mode: u32,
        first: u32,
        count: u32,
        k: f64,
        min_size: u32,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (w, h) = (b.width as u32, b.height as u32);
        let n = b.width * b.height;
        let nn = n as u32;
        let eb = eid_bits(n);
        let cfg = self.stride(n);
        let ms = mode == MODE_MIN_SIZE;
        let exact = mode != MODE_ZERO;
        if ms {
            timed(timer, stream, "segment_minsize", || {
                let mut l = stream.launch_builder(&self.f_reset_done);
                l.arg(&p.done).arg(&p.order).arg(&nn);
                // SAFETY: grid-stride over pixels < n.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
        }
        let names = |merge: &'static str| if ms { "segment_minsize" } else { merge };
        for i in 0..count {
            let r = first + i;
            let gate = if i == 0 { 0 } else { r - 1 };
            // Exact rounds after the first of their phase run over the previous round's lists.
            let use_list = u32::from(exact && i > 0);
            let (cur, prev) = ((i & 1) as usize, ((i + 1) & 1) as usize);
            let (fin, fout) = (p.flist[prev], p.flist[cur]);
            let (rin, rout) = (p.rlist[prev], p.rlist[cur]);
            let (fcin, fcout) = (p.fcnt + 4 * u64::from(r - 1), p.fcnt + 4 * u64::from(r));
            let (rcin, rcout) = (p.rcnt + 4 * u64::from(r - 1), p.rcnt + 4 * u64::from(r));
            timed(timer, stream, names("segment_minedge"), || {
                let mut l = stream.launch_builder(&self.f_least);
                l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.best).arg(&p.size).arg(&p.done).arg(&p.order);
                l.arg(&w).arg(&h);
                l.arg(&eb).arg(&mode).arg(&min_size).arg(&p.ctl).arg(&gate).arg(&use_list).arg(&fin).arg(&fcin);
                l.arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over pixels < n (or list entries < the list's count, which
                // hold pixel ids); neighbours are bounds-checked; lists hold n entries.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            timed(timer, stream, names(if exact { "segment_targets" } else { "segment_merge" }), || {
                let mut l = stream.launch_builder(&self.f_targets);
                l.arg(&p.comp).arg(&p.link).arg(&p.best).arg(&p.tkey).arg(&p.target).arg(&p.gok).arg(&p.lim);
                l.arg(&p.limj).arg(&p.jcnt).arg(&p.done).arg(&w).arg(&nn).arg(&eb).arg(&mode).arg(&p.ctl);
                l.arg(&p.mctl).arg(&gate).arg(&r).arg(&use_list).arg(&rin).arg(&rcin).arg(&rout).arg(&rcout);
                // SAFETY: grid-stride over roots < n; edge ids decode to pixels < n; r < NCTL.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            if exact {
                // Per-pass counters: array 0 merges, 1 joiner cursors, 2 listed groups, 3 groups
                // with joiners, 4 joiners.
                let slot = |array: u64, s: u32| {
                    p.smerge + 4 * (array * NSMERGE as u64 + u64::from(r) * SUB_ROUNDS as u64 + u64::from(s))
                };
                let (hcount0, xcount0) = (slot(3, 0), slot(4, 0));
                timed(timer, stream, names("segment_limits"), || {
                    let mut l = stream.launch_builder(&self.f_limits);
                    l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.done).arg(&p.target).arg(&p.order).arg(&p.lim);
                    l.arg(&p.limj).arg(&p.size).arg(&w).arg(&eb).arg(&mode).arg(&min_size).arg(&p.ctl).arg(&gate);
                    l.arg(&fout).arg(&fcout);
                    // SAFETY: grid-stride over this round's frontier (pixel ids < n); the order
                    // words only name in-image neighbours.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                timed(timer, stream, names("segment_pairs"), || {
                    let mut l = stream.launch_builder(&self.f_pairs);
                    l.arg(&p.w4).arg(&p.target).arg(&p.tkey).arg(&p.link).arg(&p.gok).arg(&p.gsize).arg(&p.gint);
                    l.arg(&p.pflag).arg(&p.size).arg(&p.cint).arg(&p.parent).arg(&p.round).arg(&eb).arg(&mode);
                    l.arg(&k).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r).arg(&rout).arg(&rcout);
                    // SAFETY: grid-stride over this round's active roots (ids < n); a pair's
                    // smaller root writes the pair's entries.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                timed(timer, stream, names("segment_push"), || {
                    let mut l = stream.launch_builder(&self.f_push);
                    l.arg(&p.link).arg(&p.gok).arg(&p.target).arg(&p.tkey).arg(&p.lim).arg(&p.jcnt).arg(&p.jslot);
                    l.arg(&p.jtgt).arg(&p.hlist).arg(&hcount0).arg(&p.xlist).arg(&xcount0).arg(&p.ctl).arg(&gate);
                    l.arg(&rout).arg(&rcout);
                    // SAFETY: as above; joiner counts / slots / groups are indexed by root ids < n.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                for s in 0..SUB_ROUNDS as u32 {
                    let first = u32::from(s == 0);
                    // The first pass runs under the round's gate (ctl[gate], already non-zero).
                    let sgate = if s == 0 { p.ctl + 4 * u64::from(gate) } else { slot(0, s - 1) };
                    let (sout, cursor, gcount) = (slot(0, s), slot(1, s), slot(2, s));
                    let (hcount, xcount) = (slot(3, s), slot(4, s));
                    let sub = |first_pass: &'static str, later: &'static str| names(if s == 0 { first_pass } else { later });
                    if s > 0 {
                        timed(timer, stream, names("segment_sub_push"), || {
                            let mut l = stream.launch_builder(&self.f_push_sub);
                            l.arg(&p.link).arg(&p.gok).arg(&p.done).arg(&p.target).arg(&p.tkey).arg(&p.slim);
                            l.arg(&p.jcnt).arg(&p.jslot).arg(&p.jtgt).arg(&p.hlist).arg(&hcount).arg(&p.xlist);
                            l.arg(&xcount).arg(&p.ctl).arg(&gate).arg(&sgate).arg(&rout).arg(&rcout);
                            // SAFETY: grid-stride over the active roots (ids < n); targets and
                            // links are root ids < n; sgate < NCOUNTERS since r < NCTL.
                            unsafe { l.launch(cfg) }?;
                            Ok(())
                        })?;
                    }
                    timed(timer, stream, sub("segment_alloc", "segment_sub_alloc"), || {
                        let mut l = stream.launch_builder(&self.f_alloc);
                        l.arg(&p.jcnt).arg(&p.link).arg(&p.joff).arg(&cursor).arg(&p.glist).arg(&gcount);
                        l.arg(&p.ctl).arg(&gate).arg(&sgate).arg(&p.hlist).arg(&hcount);
                        // SAFETY: grid-stride over this pass's groups with joiners (root ids < n,
                        // each listed once); the ranges sum to the pass's joiners, at most n.
                        unsafe { l.launch(cfg) }?;
                        Ok(())
                    })?;
                    timed(timer, stream, sub("segment_scatter", "segment_sub_scatter"), || {
                        let mut l = stream.launch_builder(&self.f_scatter);
                        l.arg(&p.jslot).arg(&p.jtgt).arg(&p.joff).arg(&p.jarr).arg(&p.ctl).arg(&gate).arg(&sgate);
                        l.arg(&p.xlist).arg(&xcount);
                        // SAFETY: a joiner's slot is below its group's count, so it lands in the
                        // group's range inside jarr (n entries).
                        unsafe { l.launch(cfg) }?;
                        Ok(())
                    })?;
                    if s == 0 {
                        timed(timer, stream, names("segment_plain"), || {
                            let mut l = stream.launch_builder(&self.f_groups_plain);
                            l.arg(&p.done).arg(&p.pflag).arg(&p.gok).arg(&p.link).arg(&p.target).arg(&p.lim);
                            l.arg(&p.jcnt).arg(&p.gsize).arg(&p.gint).arg(&p.size).arg(&p.cint).arg(&p.slim);
                            l.arg(&p.ctl).arg(&gate).arg(&rout).arg(&rcout);
                            // SAFETY: grid-stride over the active roots (ids < n), each written by
                            // its own thread.
                            unsafe { l.launch(cfg) }?;
                            Ok(())
                        })?;
                    }
                    timed(timer, stream, sub("segment_groups", "segment_sub_groups"), || {
                        let mut l = stream.launch_builder(&self.f_groups_warp);
                        l.arg(&p.link).arg(&p.done).arg(&p.target).arg(&p.tkey).arg(&p.lim).arg(&p.limj);
                        l.arg(&p.jcnt).arg(&p.joff).arg(&p.jarr).arg(&p.gsize).arg(&p.gint).arg(&p.size);
                        l.arg(&p.cint).arg(&p.parent).arg(&p.round).arg(&p.w4).arg(&eb).arg(&mode).arg(&min_size);
                        l.arg(&k).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r).arg(&p.glist).arg(&gcount);
                        l.arg(&p.slim).arg(&first).arg(&sgate).arg(&sout);
                        // SAFETY: one warp per listed group (a group is listed once per pass);
                        // every joiner is in one group's range, so each root's link/done/size
                        // is written by one warp's lane 0; 4 warps a block match the kernel's
                        // shared arrays.
                        unsafe { l.launch(self.warp_cfg) }?;
                        Ok(())
                    })?;
                }
            } else {
                timed(timer, stream, "segment_zero_link", || {
                    let mut l = stream.launch_builder(&self.f_chain_link);
                    l.arg(&p.target).arg(&p.link).arg(&nn).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r);
                    // SAFETY: grid-stride over roots < n.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                timed(timer, stream, "segment_zero_flatten", || {
                    let mut l = stream.launch_builder(&self.f_chain_flatten);
                    l.arg(&p.target).arg(&p.link).arg(&p.size).arg(&p.parent).arg(&p.round).arg(&nn).arg(&p.ctl);
                    l.arg(&gate).arg(&r);
                    // SAFETY: grid-stride over roots < n; links form a forest over roots.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// Raster-order numbering of `comp` (minpix must hold `SEG_NONE`).
    fn enqueue_numbering(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        let cfg = self.stride(n);
        timed(timer, stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_minpix);
            l.arg(&p.comp).arg(&p.minpix).arg(&w).arg(&nn);
            // SAFETY: grid-stride over pixels < n; comp values are roots < n.
            unsafe { l.launch(cfg) }?;
            let mut l = stream.launch_builder(&self.f_scan_count);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(&self.f_scan_blocks);
            l.arg(&p.blocksum).arg(&nblocks).arg(&p.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe {
                l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 })
            }?;
            let mut l = stream.launch_builder(&self.f_scan_label);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&p.rootlabel).arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(&self.f_labels);
            l.arg(&p.comp).arg(&p.rootlabel).arg(&p.labels).arg(&nn);
            // SAFETY: grid-stride over pixels < n.
            unsafe { l.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the labels of hierarchy `level` (0: one segment per pixel; `levels() - 1` or
    /// more: the final segmentation) of the last segmented frame, without recomputing it.
    /// [`SegmentGpu::download`] then returns that level.
    pub fn enqueue_level(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        level: u32,
    ) -> Result<(), OpError> {
        let Some(prod) = self.produced.as_mut() else {
            return Err(OpError::InvalidParam("enqueue_level needs a segmented frame (call enqueue)".into()));
        };
        prod.level = Some(level);
        let n = prod.width * prod.height;
        let total = NCTL as u32 - 1;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else { return Ok(()) };
        let p = b.p;
        let nn = n as u32;
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_level_threshold);
            l.arg(&p.mctl).arg(&total).arg(&level).arg(&p.info);
            // SAFETY: one thread reads mctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(&self.f_level_comp);
            l.arg(&p.comp).arg(&p.parent).arg(&p.round).arg(&p.minpix).arg(&p.info).arg(&nn);
            // SAFETY: grid-stride over pixels < n; parent chains end at never-absorbed roots.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        Ok(self.enqueue_numbering(stream, &mut Some(timer))?)
    }

    /// Levels (rounds that merged) and per-phase use from the counters.
    fn read_rounds(ctl: &[u32], mctl: &[u32], prod: &Produced, max_rounds: u32) -> (Vec<u16>, RoundsUsed) {
        let z = ZERO_ROUNDS;
        let firsts = [1, z + 1, z + max_rounds + 1];
        let mut used = RoundsUsed::default();
        let mut levels = Vec::new();
        for (ph, &first) in firsts.iter().enumerate() {
            let cap = prod.caps[ph];
            for i in 0..cap {
                let r = (first + i) as usize;
                if ctl.get(r).is_some_and(|&c| c > 0) {
                    used.used[ph] = i + 1;
                }
                if mctl.get(r).is_some_and(|&c| c > 0) {
                    levels.push(r as u16);
                }
            }
            used.capped[ph] = cap > 0 && ctl.get((first + cap - 1) as usize).is_some_and(|&c| c > 0);
        }
        (levels, used)
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentOutput, OpError> {
        self.download_with(stream, None)
    }

    fn download_with(
        &self,
        stream: &Arc<CudaStream>,
        hier: Option<&mut Option<SegmentHierarchy>>,
    ) -> Result<SegmentOutput, OpError> {
        let Some(p) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else {
            return Ok(SegmentOutput {
                labels: Image::new(p.width, p.height, 0),
                segment_count: 0,
                rounds: 0,
                min_size_rounds: 0,
                capped: false,
                level: 0,
                has_rounds: true,
            });
        };
        let ctl = stream.clone_dtoh(&b.ctl)?;
        let mctl = stream.clone_dtoh(&b.mctl)?;
        let info = stream.clone_dtoh(&b.info)?;
        stream.synchronize()?;
        let labels = self.labels_readback.borrow_mut().fetch(stream, &b.labels, n)?;
        let max_rounds = p.max_rounds;
        let (levels, used) = Self::read_rounds(&ctl, &mctl, &p, max_rounds);
        self.hint.set(Some(used));
        let ms_first = ZERO_ROUNDS + max_rounds + 1;
        let ms = levels.iter().filter(|&&r| u32::from(r) >= ms_first).count() as u32;
        let top = levels.len() as u32;
        if let Some(hs) = hier {
            let parent = stream.clone_dtoh(&b.parent.slice(0..n))?;
            let round = stream.clone_dtoh(&b.round.slice(0..n))?;
            stream.synchronize()?;
            *hs = Some(SegmentHierarchy {
                width: p.width,
                height: p.height,
                parent,
                round,
                level_rounds: levels.clone(),
            });
        }
        Ok(SegmentOutput {
            labels: Image::from_vec(p.width, p.height, labels)?,
            segment_count: info[0] as usize,
            rounds: top - ms,
            min_size_rounds: ms,
            capped: used.capped[1] || used.capped[2],
            level: p.level.map_or(top, |l| l.min(top)),
            has_rounds: true,
        })
    }

    /// Blocking readback of the labels and the whole hierarchy of the last segmented frame.
    pub fn download_hierarchy(&self, stream: &Arc<CudaStream>) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
        let mut h = None;
        let out = self.download_with(stream, Some(&mut h))?;
        let p = self.produced.map_or((0, 0), |p| (p.width, p.height));
        let hier = h.unwrap_or(SegmentHierarchy {
            width: p.0,
            height: p.1,
            parent: Vec::new(),
            round: Vec::new(),
            level_rounds: Vec::new(),
        });
        Ok((out, hier))
    }

    /// The `f64` smoothing of the last enqueue (for parity tests of the smoothing step).
    pub fn download_blur(&self, stream: &Arc<CudaStream>, channels: usize) -> Result<Vec<f64>, OpError> {
        let n = self.produced.map_or(0, |p| p.width * p.height);
        self.blur.download_f64(stream, n * channels)
    }
}

/// Uploads `data` (packed, `channels` samples a pixel), segments it on the GPU and downloads
/// the labels.
fn run_packed(
    gpu: &GpuContext,
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    let mut op = SegmentGpu::new(gpu)?;
    let stream = gpu.new_stream()?;
    let mut timer = KernelTimer::new();
    let input = upload_packed(&stream, data, width, height)?;
    op.enqueue_channels(&stream, &mut timer, &input, width, height, channels, params)?;
    op.download(&stream)
}

/// Uploads a grey image, segments it on the GPU and downloads the labels (CLI and tests).
pub fn segment_gpu(gpu: &GpuContext, img: ImageView<'_, u8>, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_gray(img), img.width(), img.height(), 1, params)
}

/// Uploads an RGB image, segments it on the GPU and downloads the labels.
pub fn segment_gpu_rgb(
    gpu: &GpuContext,
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_rgb(img), img.width(), img.height(), 3, params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_from_counters() {
        let prod = Produced { width: 1, height: 1, caps: [32, 4, 3], max_rounds: 4, level: None };
        let mut ctl = vec![0u32; NCTL];
        let mut mctl = vec![0u32; NCTL];
        ctl[0] = 1;
        for (r, e, m) in [(1, 5, 5), (2, 1, 1), (33, 9, 3), (34, 2, 0), (37, 1, 1)] {
            ctl[r] = e;
            mctl[r] = m;
        }
        let (lv, used) = SegmentGpu::read_rounds(&ctl, &mctl, &prod, 4);
        assert_eq!(lv, vec![1, 2, 33, 37]);
        assert_eq!(used.used, [2, 2, 1]);
        assert_eq!(used.capped, [false, false, false]);
        ctl[36] = 1;
        assert!(SegmentGpu::read_rounds(&ctl, &mctl, &prod, 4).1.capped[1]);
    }
}
