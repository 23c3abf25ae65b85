//! CUDA backend of the max-tree: launch code for `kernels/maxtree.cu` (read its header for the
//! algorithm, the paper sections and the memory layout).
//!
//! Per frame, on one stream and without a host sync: `maxtree_local` (tiles of
//! `TILE_WIDTH` x [`MaxTreeTuning::tile_height`]: 1D column trees + concurrent CONNECT in shared
//! memory), `maxtree_merge` (tile borders), `maxtree_flatten` (canonical parent image, node
//! numbering), `maxtree_attributes` (per-node init, per-pixel contributions, subtree
//! accumulation by doubling, attribute) and `maxtree_restitute` (rule flags, pointer jumping,
//! per-pixel output), then `maxtree_residue_stats` (region `maxtree_stats`: the residue's
//! changed-pixel count and sum). Each group is one [`KernelTimer`] region. Buffers are sized
//! for one frame on first use and reused; the tree, the attribute and the outputs stay on the
//! device. [`MaxTreeGpu::download_summary`] reads back only the node count and the two residue
//! numbers, [`MaxTreeGpu::residue`] hands the residue buffer to the compose step in place, and
//! [`MaxTreeGpu::download`] reads both pictures back (the CLI, the tests): `gpu/readback.rs`.
//! [`MaxTreeGpu::enqueue_filter`] re-filters with another threshold or rule without rebuilding.
//! Launch shapes come from [`MaxTreeTuning`] (`gpu/tuning.rs`), chosen per device.

mod readback;
mod tuning;

pub use tuning::MaxTreeTuning;

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};

use super::{Attribute, Connectivity, MaxTreeOutput, MaxTreeParams, Rule, TreeKind};
use crate::gpu::{
    DeviceImage, GpuContext, GpuError, HostPixel, KernelTimer, Readback, launch, round_trip,
};
use crate::image::{Gray, Image, ImageView};
use crate::ops::OpError;

/// Tile width of the local kernel (threads per block). Keep in sync with `MT_TW` in maxtree.cu.
pub(crate) const TILE_WIDTH: usize = 64;
/// Row chunk (threads per block) of `maxtree_pixels`. Keep in sync with the 256 in maxtree.cu.
const PIXEL_CHUNK: u32 = 256;
/// Pixels per thread of `maxtree_flatten`. Keep in sync with `MT_FLAT`.
const FLATTEN_PIXELS: u32 = 8;

/// Grey types the CUDA max-tree accepts (u8 and u16).
pub trait GpuGray: Gray + HostPixel<Sample = Self> + DeviceRepr + ValidAsZeroBits + Unpin {
    /// `maxtree_local_*` entry point.
    const LOCAL: &'static str;
    /// `maxtree_restitute_*` entry point.
    const RESTITUTE: &'static str;
    /// Bytes of one shared-memory record in the local kernel.
    const RECORD_BYTES: usize;
    /// The output buffers of this type.
    fn outputs(o: &mut Outputs) -> &mut Option<(CudaSlice<Self>, CudaSlice<Self>)>;
}

impl GpuGray for u8 {
    const LOCAL: &'static str = "maxtree_local_u8";
    const RESTITUTE: &'static str = "maxtree_restitute_u8";
    const RECORD_BYTES: usize = 4;
    fn outputs(o: &mut Outputs) -> &mut Option<(CudaSlice<Self>, CudaSlice<Self>)> {
        &mut o.u8
    }
}

impl GpuGray for u16 {
    const LOCAL: &'static str = "maxtree_local_u16";
    const RESTITUTE: &'static str = "maxtree_restitute_u16";
    const RECORD_BYTES: usize = 8;
    fn outputs(o: &mut Outputs) -> &mut Option<(CudaSlice<Self>, CudaSlice<Self>)> {
        &mut o.u16
    }
}

/// Filtered image and residue buffers (one pair per pixel type, allocated on first use).
#[derive(Default)]
pub struct Outputs {
    u8: Option<(CudaSlice<u8>, CudaSlice<u8>)>,
    u16: Option<(CudaSlice<u16>, CudaSlice<u16>)>,
}

struct Functions {
    local_u8: CudaFunction,
    local_u16: CudaFunction,
    merge: CudaFunction,
    flatten: CudaFunction,
    nodes: CudaFunction,
    pixels: CudaFunction,
    double: CudaFunction,
    attr: CudaFunction,
    amax_init: CudaFunction,
    amax: CudaFunction,
    amax_fold: CudaFunction,
    keep: CudaFunction,
    jump: CudaFunction,
    restitute_u8: CudaFunction,
    restitute_u16: CudaFunction,
    stats_u8: CudaFunction,
    stats_u16: CudaFunction,
}

/// Device buffers for one frame size (node arrays are indexed by node id and sized for the worst
/// case, one node per pixel).
struct Frame {
    width: usize,
    height: usize,
    grec: CudaSlice<u64>,
    parent: CudaSlice<u32>,
    node_id: CudaSlice<u32>,
    node_pix: CudaSlice<u32>,
    pix_node: CudaSlice<u32>,
    count: CudaSlice<u32>,
    npar: CudaSlice<u32>,
    nlev: CudaSlice<u32>,
    /// Accumulators `[4][NQ][N]`, NQ = 4 for the bounding box, else 1 (grown on demand).
    q32: CudaSlice<u32>,
    /// `[4][N]` Σ levels (volume) / subtree maxima (max rule); allocated on first need.
    q64: Option<CudaSlice<u64>>,
    /// Jump pointers `[2][N]`.
    jb: CudaSlice<u32>,
    attr: CudaSlice<f64>,
    words: CudaSlice<u64>,
    /// Jump-round activity flags, 17 per pass (two passes for the min rule).
    active: CudaSlice<u32>,
    /// `[changed pixels, Σ residue, node count]` of the last filter (`maxtree_residue_stats`).
    stats: CudaSlice<u64>,
}

impl Frame {
    fn new(stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<Self, GpuError> {
        let n = width * height;
        let u32s = |len: usize, what| launch::alloc_zeroed::<u32>(stream, len, what, width, height);
        Ok(Self {
            width,
            height,
            grec: launch::alloc_zeroed(stream, n, "max-tree records", width, height)?,
            parent: u32s(n, "max-tree parent image")?,
            node_id: u32s(n, "max-tree node ids")?,
            node_pix: u32s(n, "max-tree node pixels")?,
            pix_node: u32s(n, "max-tree pixel nodes")?,
            count: u32s(1, "max-tree node count")?,
            npar: u32s(n, "max-tree node parents")?,
            nlev: u32s(n, "max-tree node levels")?,
            q32: u32s(4 * n, "max-tree accumulators")?,
            q64: None,
            jb: u32s(2 * n, "max-tree jump pointers")?,
            attr: launch::alloc_zeroed(stream, n, "max-tree attributes", width, height)?,
            words: launch::alloc_zeroed(stream, n, "max-tree restitution words", width, height)?,
            active: u32s(2 * 17, "max-tree round flags")?,
            stats: launch::alloc_zeroed(stream, 3, "max-tree residue statistics", width, height)?,
        })
    }

    fn ensure_q64(&mut self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        if self.q64.is_none() {
            let n = self.width * self.height;
            self.q64 = Some(launch::alloc_zeroed(
                stream,
                4 * n,
                "max-tree 64-bit accumulators",
                self.width,
                self.height,
            )?);
        }
        Ok(())
    }

    fn ensure_q32(&mut self, stream: &Arc<CudaStream>, quantities: usize) -> Result<(), GpuError> {
        let n = self.width * self.height;
        if self.q32.len() < 4 * quantities * n {
            self.q32 = launch::alloc_zeroed(
                stream,
                4 * quantities * n,
                "max-tree accumulators",
                self.width,
                self.height,
            )?;
        }
        Ok(())
    }
}

/// What the device holds from the last enqueue.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    width: usize,
    height: usize,
    bits: u32,
    inv: u32,
    attribute: Option<Attribute>,
    /// Subtree maxima of the attribute (max rule) are in q64.
    amax_ready: bool,
    filtered: bool,
}

/// The CUDA max-tree: resolved kernels and device buffers for one frame size.
pub struct MaxTreeGpu {
    f: Functions,
    frame: Option<Frame>,
    outputs: Outputs,
    state: Option<State>,
    /// Multiprocessors of the device (the node kernels' grid is per SM).
    multiprocessors: u32,
    tuning: MaxTreeTuning,
    /// Pinned buffers for the per-frame readback of the filtered image and the residue.
    readbacks: RefCell<Readbacks>,
}

/// Pinned readbacks (filtered image, residue) per sample type.
struct Readbacks {
    u8: (Readback<u8>, Readback<u8>),
    u16: (Readback<u16>, Readback<u16>),
}

impl std::fmt::Debug for MaxTreeGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxTreeGpu")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn cfg(grid: u32, block: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.max(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: shared,
    }
}

impl MaxTreeGpu {
    /// Resolves every kernel (the registry compiled the module at start), with the tuning's
    /// defaults for this device.
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Self::with_tuning(gpu, MaxTreeTuning::for_device(gpu.info()))
    }

    /// Resolves every kernel, with `tuning` (checked: [`MaxTreeTuning::validate`]).
    pub fn with_tuning(gpu: &GpuContext, tuning: MaxTreeTuning) -> Result<Self, OpError> {
        tuning.validate()?;
        let f = |name: &str| gpu.function("maxtree", name);
        Ok(Self {
            f: Functions {
                local_u8: f("maxtree_local_u8")?,
                local_u16: f("maxtree_local_u16")?,
                merge: f("maxtree_merge")?,
                flatten: f("maxtree_flatten")?,
                nodes: f("maxtree_nodes")?,
                pixels: f("maxtree_pixels")?,
                double: f("maxtree_double")?,
                attr: f("maxtree_attr")?,
                amax_init: f("maxtree_amax_init")?,
                amax: f("maxtree_amax")?,
                amax_fold: f("maxtree_amax_fold")?,
                keep: f("maxtree_keep")?,
                jump: f("maxtree_jump")?,
                restitute_u8: f("maxtree_restitute_u8")?,
                restitute_u16: f("maxtree_restitute_u16")?,
                stats_u8: f("maxtree_residue_stats_u8")?,
                stats_u16: f("maxtree_residue_stats_u16")?,
            },
            frame: None,
            outputs: Outputs::default(),
            state: None,
            multiprocessors: u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1),
            tuning,
            readbacks: RefCell::new(Readbacks {
                u8: (Readback::new(gpu.cuda()), Readback::new(gpu.cuda())),
                u16: (Readback::new(gpu.cuda()), Readback::new(gpu.cuda())),
            }),
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &MaxTreeTuning {
        &self.tuning
    }

    /// Changes the tuning from the next enqueue on (checked: [`MaxTreeTuning::validate`]).
    pub fn set_tuning(&mut self, tuning: MaxTreeTuning) -> Result<(), OpError> {
        tuning.validate()?;
        self.tuning = tuning;
        Ok(())
    }

    /// The launch of the node kernels over at most `n` nodes: grid-stride loops over the node
    /// count (known only on the device), [`MaxTreeTuning::node_blocks_per_sm`] blocks per SM.
    fn node_launch(&self, n: usize) -> LaunchConfig {
        let block = self.tuning.block_threads;
        let blocks = self
            .multiprocessors
            .saturating_mul(self.tuning.node_blocks_per_sm);
        cfg(blocks.min(launch::blocks_for(n, block)), block, 0)
    }

    /// Enqueues the whole analysis of a packed grey image: tree, the attribute of `params`,
    /// filtering.
    pub fn enqueue<T: GpuGray>(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        params: &MaxTreeParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        self.enqueue_tree(timer, input, params.tree, params.connectivity()?)?;
        self.enqueue_attribute(input.stream, timer, params.attribute)?;
        self.enqueue_filter(timer, input, params.threshold, params.rule)
    }

    /// Enqueues the tree construction only (regions `maxtree_local`, `maxtree_merge`,
    /// `maxtree_flatten`): the canonical parent image, see [`MaxTreeGpu::download_parent`].
    pub fn enqueue_tree<T: GpuGray>(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        tree: TreeKind,
        connectivity: Connectivity,
    ) -> Result<(), OpError> {
        input.check(1, "the max-tree")?;
        let DeviceImage {
            stream,
            data: input,
            width,
            height,
            ..
        } = input;
        let th = self.tuning.tile_height;
        if th == 128 && T::BITS != 8 {
            return Err(OpError::InvalidParam(format!(
                "maxtree tile_height = {th}: allowed values are 16, 32, 64 (and 128 for 8-bit images)"
            )));
        }
        let n = width * height;
        let inv = match tree {
            TreeKind::Max => 0,
            TreeKind::Min => T::MAX.to_u32(),
        };
        self.state = Some(State {
            width,
            height,
            bits: T::BITS,
            inv,
            attribute: None,
            amax_ready: false,
            filtered: false,
        });
        if n == 0 {
            return Ok(());
        }
        if self
            .frame
            .as_ref()
            .is_none_or(|f| (f.width, f.height) != (width, height))
        {
            self.frame = None; // free the old buffers first
            self.frame = Some(Frame::new(stream, width, height)?);
        }
        let block = self.tuning.block_threads;
        let (f, fr) = (
            &self.f,
            self.frame
                .as_mut()
                .ok_or_else(|| OpError::Unsupported("no frame".into()))?,
        );
        let (w, h, n32, th32) = (width as u32, height as u32, n as u32, th as u32);
        let eight = i32::from(connectivity == Connectivity::Eight);
        let (ntx, nty) = (
            width.div_ceil(TILE_WIDTH) as u32,
            height.div_ceil(th) as u32,
        );
        let local = if T::BITS == 8 {
            &f.local_u8
        } else {
            &f.local_u16
        };
        timer.time(stream, "maxtree_local", || {
            let mut b = stream.launch_builder(local);
            b.arg(input)
                .arg(&mut fr.grec)
                .arg(&w)
                .arg(&h)
                .arg(&th32)
                .arg(&inv)
                .arg(&eight);
            let c = LaunchConfig {
                grid_dim: (ntx, nty, 1),
                block_dim: (TILE_WIDTH as u32, 1, 1),
                shared_mem_bytes: (TILE_WIDTH * th * T::RECORD_BYTES) as u32,
            };
            // SAFETY: `input` holds width*height pixels (checked above), `grec` width*height
            // records; one block per tile with TILE_WIDTH*th records of shared memory (at most
            // 32 KiB); threads past the tile width only synchronise.
            unsafe { b.launch(c) }?;
            Ok(())
        })?;
        let merges =
            (ntx - 1) * h + (nty - 1) * w + if eight == 1 { (ntx - 1) * (nty - 1) } else { 0 };
        timer.time(stream, "maxtree_merge", || {
            if merges > 0 {
                let mut b = stream.launch_builder(&f.merge);
                b.arg(&mut fr.grec).arg(&w).arg(&h).arg(&th32).arg(&eight);
                // SAFETY: one thread per border position; the kernel derives every index from
                // w, h and the tile size and stays inside the width*height records.
                unsafe { b.launch(cfg(launch::blocks_for(merges as usize, block), block, 0)) }?;
            }
            Ok(())
        })?;
        timer.time(stream, "maxtree_flatten", || {
            stream.memset_zeros(&mut fr.count)?;
            let mut b = stream.launch_builder(&f.flatten);
            b.arg(&mut fr.grec)
                .arg(&mut fr.parent)
                .arg(&mut fr.node_id)
                .arg(&mut fr.node_pix)
                .arg(&mut fr.count)
                .arg(&n32);
            // SAFETY: FLATTEN_PIXELS pixels per thread (p < N checked in the kernel); node ids are
            // < N, the size of node_pix; 8 bytes of shared memory hold the block counter and base.
            unsafe { b.launch(cfg(launch::blocks_for(n, block * FLATTEN_PIXELS), block, 8)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the attribute computation on the last tree (region `maxtree_attributes`).
    pub fn enqueue_attribute(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        attribute: Attribute,
    ) -> Result<(), OpError> {
        let st = self
            .state
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("enqueue_attribute before enqueue_tree".into()))?;
        st.attribute = Some(attribute);
        st.amax_ready = false;
        st.filtered = false;
        let (width, height, bits) = (st.width, st.height, st.bits);
        let n = width * height;
        if n == 0 {
            return Ok(());
        }
        let nodes = self.node_launch(n);
        let (f, fr) = (
            &self.f,
            self.frame
                .as_mut()
                .ok_or_else(|| OpError::Unsupported("no frame".into()))?,
        );
        let code = attribute.index() as i32;
        fr.ensure_q32(stream, if code >= 3 { 4 } else { 1 })?;
        fr.ensure_q64(stream)?;
        let q64 = fr
            .q64
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("no q64".into()))?;
        let (w, h, n32) = (width as u32, height as u32, n as u32);
        let fin = ((bits - 1) % 3) as i32;
        timer.time(stream, "maxtree_attributes", || {
            let mut b = stream.launch_builder(&f.nodes);
            b.arg(&fr.grec)
                .arg(&fr.parent)
                .arg(&fr.node_id)
                .arg(&fr.node_pix)
                .arg(&fr.count);
            b.arg(&mut fr.npar)
                .arg(&mut fr.nlev)
                .arg(&mut fr.q32)
                .arg(&mut *q64)
                .arg(&n32)
                .arg(&code);
            // SAFETY: grid-stride over node ids < *count <= N; npar/nlev hold N entries, q32
            // 4*NQ*N (ensure_q32), q64 4*N.
            unsafe { b.launch(nodes) }?;
            let mut b = stream.launch_builder(&f.pixels);
            b.arg(&fr.grec)
                .arg(&fr.parent)
                .arg(&fr.node_id)
                .arg(&mut fr.pix_node)
                .arg(&mut fr.q32);
            b.arg(&w).arg(&h).arg(&code);
            let c = LaunchConfig {
                grid_dim: (launch::blocks_for(width, PIXEL_CHUNK), h, 1),
                block_dim: (PIXEL_CHUNK, 1, 1),
                shared_mem_bytes: PIXEL_CHUNK * 4,
            };
            // SAFETY: one thread per pixel of a PIXEL_CHUNK-pixel row chunk (x < W checked), one
            // u32 of shared memory per thread; pixel indices < N, node ids < N.
            unsafe { b.launch(c) }?;
            for round in 0..bits as i32 {
                let mut b = stream.launch_builder(&f.double);
                b.arg(&fr.count)
                    .arg(&fr.npar)
                    .arg(&fr.nlev)
                    .arg(&mut fr.jb)
                    .arg(&mut fr.q32)
                    .arg(&mut *q64);
                b.arg(&n32).arg(&round).arg(&code);
                // SAFETY: grid-stride over node ids < *count; jump targets are node ids or
                // MT_NONE (checked); jb holds 2N, q32 4*NQ*N, q64 4N entries.
                unsafe { b.launch(nodes) }?;
            }
            let mut b = stream.launch_builder(&f.attr);
            b.arg(&fr.count)
                .arg(&fr.npar)
                .arg(&fr.nlev)
                .arg(&fr.q32)
                .arg(&*q64)
                .arg(&mut fr.attr);
            b.arg(&n32).arg(&fin).arg(&code);
            // SAFETY: grid-stride over node ids < *count; reads slots 0 and 1 + fin < 4.
            unsafe { b.launch(nodes) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the filter (region `maxtree_restitute`) and the residue's statistics (region
    /// `maxtree_stats`) on the last tree and attribute: a new threshold or rule costs only
    /// this. `input` must be the image the tree was built from.
    pub fn enqueue_filter<T: GpuGray>(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        threshold: f64,
        rule: Rule,
    ) -> Result<(), OpError> {
        input.check(1, "the max-tree")?;
        let stream = input.stream;
        let st = self
            .state
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("enqueue_filter before enqueue_tree".into()))?;
        check_filter::<T>(st, (input.width, input.height), threshold)?;
        let (width, height, inv) = (st.width, st.height, st.inv);
        st.filtered = true;
        let need_amax = rule == Rule::Max && !st.amax_ready;
        if rule == Rule::Max {
            st.amax_ready = true;
        }
        let input = input.data;
        let n = width * height;
        if n == 0 {
            return Ok(());
        }
        if T::outputs(&mut self.outputs)
            .as_ref()
            .is_none_or(|(o, _)| o.len() != n)
        {
            *T::outputs(&mut self.outputs) = None;
            let o = launch::alloc_zeroed::<T>(stream, n, "max-tree filtered image", width, height)?;
            let r = launch::alloc_zeroed::<T>(stream, n, "max-tree residue", width, height)?;
            *T::outputs(&mut self.outputs) = Some((o, r));
        }
        let nodes = self.node_launch(n);
        let block = self.tuning.block_threads;
        let f = &self.f;
        let fr = self
            .frame
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("no frame".into()))?;
        let q64 = fr
            .q64
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("no q64".into()))?;
        let (out, res) = T::outputs(&mut self.outputs)
            .as_mut()
            .ok_or_else(|| OpError::Unsupported("no outputs".into()))?;
        let (n32, rule_code) = (n as u32, rule.index() as i32);
        // Path lengths are at most the number of grey levels: 2^BITS nodes, BITS doublings.
        let rounds = T::BITS as i32;
        let fin = ((T::BITS - 1) % 3) as i32;
        timer.time(stream, "maxtree_restitute", || {
            if need_amax {
                enqueue_ancestor_max(
                    stream,
                    f,
                    (&fr.count, &fr.npar, &fr.attr, &mut fr.jb),
                    q64,
                    nodes,
                    (n32, rounds, fin),
                )?;
            }
            stream.memset_zeros(&mut fr.active)?;
            let amax = q64.slice(0..n);
            let mut pass = |mode: i32, flags: usize| -> Result<(), GpuError> {
                let mut active = fr.active.slice_mut(flags..flags + 17);
                let mut b = stream.launch_builder(&f.keep);
                b.arg(&fr.count)
                    .arg(&fr.npar)
                    .arg(&fr.nlev)
                    .arg(&fr.attr)
                    .arg(&amax)
                    .arg(&mut fr.words);
                b.arg(&mut active)
                    .arg(&threshold)
                    .arg(&rule_code)
                    .arg(&mode);
                // SAFETY: grid-stride over node ids < *count <= N; words and amax hold N entries,
                // active 17.
                unsafe { b.launch(nodes) }?;
                for round in 0..rounds {
                    let mut b = stream.launch_builder(&f.jump);
                    b.arg(&fr.count)
                        .arg(&mut fr.words)
                        .arg(&mut active)
                        .arg(&round);
                    // SAFETY: grid-stride over node ids < *count; jump targets are node ids; the
                    // kernel touches active[round] and active[round + 1] (round < 16).
                    unsafe { b.launch(nodes) }?;
                }
                Ok(())
            };
            if rule == Rule::Min {
                pass(2, 17)?;
            }
            pass(if rule == Rule::Subtractive { 1 } else { 0 }, 0)?;
            let restitute = if T::BITS == 8 {
                &f.restitute_u8
            } else {
                &f.restitute_u16
            };
            let mut b = stream.launch_builder(restitute);
            b.arg(input)
                .arg(&fr.pix_node)
                .arg(&fr.words)
                .arg(&mut *out)
                .arg(&mut *res)
                .arg(&n32)
                .arg(&inv);
            // SAFETY: one thread per pixel (p < N checked); all buffers hold N entries.
            unsafe { b.launch(cfg(launch::blocks_for(n, block), block, 0)) }?;
            Ok(())
        })?;
        timer.time(stream, "maxtree_stats", || {
            stream.memset_zeros(&mut fr.stats)?;
            let stats = if T::BITS == 8 {
                &f.stats_u8
            } else {
                &f.stats_u16
            };
            let mut b = stream.launch_builder(stats);
            b.arg(&*res).arg(&fr.count).arg(&mut fr.stats).arg(&n32);
            // SAFETY: grid-stride over pixels < N (residue holds N entries); stats holds 3 words,
            // count 1; the block reduction's shared memory is static.
            unsafe { b.launch(nodes) }?;
            Ok(())
        })?;
        Ok(())
    }
}

/// The whole analysis on the GPU for one image (upload, enqueue, download): the CLI and tests.
pub fn maxtree_gpu<T: GpuGray>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    params: &MaxTreeParams,
) -> Result<MaxTreeOutput, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut MaxTreeGpu::new(gpu)?,
        |mt, timer, input| mt.enqueue(timer, input, params),
        |mt, stream| mt.download(stream),
    )
}

/// The canonical parent image computed on the GPU (for parity tests and the CLI).
pub fn maxtree_parent_gpu<T: GpuGray>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    tree: TreeKind,
    connectivity: Connectivity,
) -> Result<Image<u32>, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut MaxTreeGpu::new(gpu)?,
        |mt, timer, input| mt.enqueue_tree(timer, input, tree, connectivity),
        |mt, stream| mt.download_parent(stream),
    )
}
/// Checks a filter request against the tree it runs on: attributes computed, the pixel depth
/// and size the tree was built from, a finite threshold >= 0.
fn check_filter<T: GpuGray>(
    st: &State,
    (width, height): (usize, usize),
    threshold: f64,
) -> Result<(), OpError> {
    if st.attribute.is_none() {
        return Err(OpError::Unsupported(
            "enqueue_filter before enqueue_attribute".into(),
        ));
    }
    if st.bits != T::BITS {
        return Err(OpError::Unsupported(format!(
            "tree built from {}-bit pixels, filter given {}-bit",
            st.bits,
            T::BITS
        )));
    }
    if !threshold.is_finite() || threshold < 0.0 {
        return Err(OpError::InvalidParam(format!(
            "maxtree.threshold = {threshold}: must be a finite number >= 0"
        )));
    }
    if (width, height) != (st.width, st.height) {
        return Err(OpError::Unsupported(format!(
            "tree built from a {}x{} image, filter given {width}x{height}",
            st.width, st.height
        )));
    }
    Ok(())
}

/// Enqueues the largest attribute on each node's path to the root (the `max` rule's
/// criterion): initialise, `rounds` pointer-jumping doublings, fold the last round's slot.
fn enqueue_ancestor_max(
    stream: &CudaStream,
    f: &Functions,
    (count, npar, attr, jb): (
        &CudaSlice<u32>,
        &CudaSlice<u32>,
        &CudaSlice<f64>,
        &mut CudaSlice<u32>,
    ),
    q64: &mut CudaSlice<u64>,
    nodes: LaunchConfig,
    (n32, rounds, fin): (u32, i32, i32),
) -> Result<(), GpuError> {
    let mut b = stream.launch_builder(&f.amax_init);
    b.arg(count).arg(&mut *q64).arg(&n32);
    // SAFETY: grid-stride over node ids < *count; q64 holds 4N entries.
    unsafe { b.launch(nodes) }?;
    for round in 0..rounds {
        let mut b = stream.launch_builder(&f.amax);
        b.arg(count)
            .arg(npar)
            .arg(attr)
            .arg(&mut *jb)
            .arg(&mut *q64)
            .arg(&n32)
            .arg(&round);
        // SAFETY: as maxtree_double.
        unsafe { b.launch(nodes) }?;
    }
    let mut b = stream.launch_builder(&f.amax_fold);
    b.arg(count).arg(&mut *q64).arg(&n32).arg(&fin);
    // SAFETY: grid-stride over node ids < *count; slots 0 and 1 + fin < 4.
    unsafe { b.launch(nodes) }?;
    Ok(())
}
