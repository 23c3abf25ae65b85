//! CUDA backend of the max-tree: launch code for `kernels/maxtree.cu` (read its header for the
//! algorithm, the paper sections and the memory layout).
//!
//! Per frame, on one stream and without a host sync: `maxtree_local` (tiles of
//! [`TILE_WIDTH`] x [`TILE_HEIGHT`]: 1D column trees + concurrent CONNECT in shared memory),
//! `maxtree_merge` (tile borders), `maxtree_flatten` (canonical parent image, node numbering),
//! `maxtree_attributes` (per-node init, per-pixel contributions, one bottom-up pass) and
//! `maxtree_restitute` (rule flags, pointer jumping, per-pixel output). Each group is one
//! [`KernelTimer`] region. Buffers are sized for one frame on first use and reused; the tree,
//! the attribute and the outputs stay on the device until [`MaxtreeGpu::download`].
//! [`MaxtreeGpu::enqueue_filter`] re-filters with another threshold or rule without rebuilding.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};

use super::{Attribute, Connectivity, MaxtreeParams, Rule, TreeKind};
use crate::gpu::{GpuContext, GpuError, KernelTimer, launch};
use crate::image::{DynImage, Gray, Image, ImageView};
use crate::ops::OpError;

/// Tile width of the local kernel (threads per block). Keep in sync with `MT_TW` in maxtree.cu.
pub const TILE_WIDTH: usize = 64;
/// Tile height of the local kernel. Keep in sync with `MT_TH`.
pub const TILE_HEIGHT: usize = 32;
/// Row segment per thread of `maxtree_pixels`. Keep in sync with `MT_SEG`.
pub const SEGMENT: usize = 16;
const BLOCK: u32 = 256;

/// Every entry point of `kernels/maxtree.cu` (the list for `src/kernels.rs`).
pub const FUNCTIONS: &[&str] = &[
    "maxtree_local_u8",
    "maxtree_local_u16",
    "maxtree_merge",
    "maxtree_flatten",
    "maxtree_nodes",
    "maxtree_pixels",
    "maxtree_wave",
    "maxtree_keep",
    "maxtree_jump",
    "maxtree_restitute_u8",
    "maxtree_restitute_u16",
];

/// Grey types the CUDA max-tree accepts (u8 and u16).
pub trait GpuGray: Gray + DeviceRepr + ValidAsZeroBits + Unpin {
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
    wave: CudaFunction,
    keep: CudaFunction,
    jump: CudaFunction,
    restitute_u8: CudaFunction,
    restitute_u16: CudaFunction,
}

/// Per-node arrays (indexed by node id; sized for the worst case, one node per pixel).
/// Kernel argument order: `MT_NODE_PARAMS` in maxtree.cu.
struct NodeBufs {
    npar: CudaSlice<u32>,
    nlev: CudaSlice<u32>,
    area: CudaSlice<u32>,
    cnt: CudaSlice<u32>,
    arrive: CudaSlice<u32>,
    mx: CudaSlice<u32>,
    bb: CudaSlice<u32>,
    vol: CudaSlice<u64>,
    attr: CudaSlice<f64>,
    amax: CudaSlice<u64>,
}

/// Device buffers for one frame size.
struct Frame {
    width: usize,
    height: usize,
    grec: CudaSlice<u64>,
    parent: CudaSlice<u32>,
    node_id: CudaSlice<u32>,
    node_pix: CudaSlice<u32>,
    pix_node: CudaSlice<u32>,
    count: CudaSlice<u32>,
    words: CudaSlice<u64>,
    nodes: NodeBufs,
}

impl Frame {
    fn new(stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<Self, GpuError> {
        let n = width * height;
        let u32s = |what| launch::alloc_zeroed::<u32>(stream, n, what, width, height);
        Ok(Self {
            width,
            height,
            grec: launch::alloc_zeroed(stream, n, "max-tree records", width, height)?,
            parent: u32s("max-tree parent image")?,
            node_id: u32s("max-tree node ids")?,
            node_pix: u32s("max-tree node pixels")?,
            pix_node: u32s("max-tree pixel nodes")?,
            count: launch::alloc_zeroed(stream, 1, "max-tree node count", width, height)?,
            words: launch::alloc_zeroed(stream, n, "max-tree restitution words", width, height)?,
            nodes: NodeBufs {
                npar: u32s("max-tree node parents")?,
                nlev: u32s("max-tree node levels")?,
                area: u32s("max-tree areas")?,
                cnt: u32s("max-tree child counts")?,
                arrive: u32s("max-tree arrivals")?,
                mx: u32s("max-tree max levels")?,
                bb: launch::alloc_zeroed(stream, 4 * n, "max-tree bounding boxes", width, height)?,
                vol: launch::alloc_zeroed(stream, n, "max-tree volumes", width, height)?,
                attr: launch::alloc_zeroed(stream, n, "max-tree attributes", width, height)?,
                amax: launch::alloc_zeroed(stream, n, "max-tree subtree maxima", width, height)?,
            },
        })
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
    filtered: bool,
}

/// The CUDA max-tree: resolved kernels and device buffers for one frame size.
pub struct MaxtreeGpu {
    f: Functions,
    frame: Option<Frame>,
    outputs: Outputs,
    state: Option<State>,
    /// Grid simplification of §5.2 on column and tile borders (default on; off calls CONNECT on
    /// every edge — for benchmarks).
    pub grid_simplification: bool,
}

impl std::fmt::Debug for MaxtreeGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxtreeGpu").field("state", &self.state).finish_non_exhaustive()
    }
}

/// Results downloaded from the device.
#[derive(Clone, Debug, PartialEq)]
pub struct MaxtreeOutput {
    /// The filtered image (input type).
    pub filtered: DynImage,
    /// `|input − filtered|` (input type).
    pub residue: DynImage,
    /// Number of nodes of the tree.
    pub node_count: u32,
}

impl MaxtreeOutput {
    /// Per-frame numbers for frames.jsonl: nodes, pixels changed, mean residue.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        let (changed, sum, n) = match &self.residue {
            DynImage::Gray8(r) => residue_stats(r.data().iter().map(|&v| u64::from(v))),
            DynImage::Gray16(r) => residue_stats(r.data().iter().map(|&v| u64::from(v))),
            _ => (0, 0, 0),
        };
        serde_json::json!({
            "maxtree_nodes": self.node_count,
            "maxtree_changed_pixels": changed,
            "maxtree_residue_mean": if n == 0 { 0.0 } else { sum as f64 / n as f64 },
        })
    }
}

fn residue_stats(it: impl Iterator<Item = u64>) -> (u64, u64, u64) {
    it.fold((0, 0, 0), |(c, s, n), v| (c + u64::from(v > 0), s + v, n + 1))
}

fn cfg(grid: u32, block: u32, shared: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid.max(1), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: shared }
}

impl MaxtreeGpu {
    /// Resolves every kernel (the registry compiled the module at start).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("maxtree", name);
        Ok(Self {
            f: Functions {
                local_u8: f("maxtree_local_u8")?,
                local_u16: f("maxtree_local_u16")?,
                merge: f("maxtree_merge")?,
                flatten: f("maxtree_flatten")?,
                nodes: f("maxtree_nodes")?,
                pixels: f("maxtree_pixels")?,
                wave: f("maxtree_wave")?,
                keep: f("maxtree_keep")?,
                jump: f("maxtree_jump")?,
                restitute_u8: f("maxtree_restitute_u8")?,
                restitute_u16: f("maxtree_restitute_u16")?,
            },
            frame: None,
            outputs: Outputs::default(),
            state: None,
            grid_simplification: true,
        })
    }

    /// Enqueues the whole analysis: tree, the attribute of `params`, filtering. `input` is a
    /// packed `width * height` device image.
    pub fn enqueue<T: GpuGray>(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<T>,
        width: usize,
        height: usize,
        params: &MaxtreeParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        self.enqueue_tree(stream, timer, input, width, height, params.tree, params.connectivity()?)?;
        self.enqueue_attribute(stream, timer, params.attribute)?;
        self.enqueue_filter(stream, timer, input, params.threshold, params.rule)
    }

    /// Enqueues the tree construction only (regions `maxtree_local`, `maxtree_merge`,
    /// `maxtree_flatten`): the canonical parent image, see [`MaxtreeGpu::download_parent`].
    pub fn enqueue_tree<T: GpuGray>(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<T>,
        width: usize,
        height: usize,
        tree: TreeKind,
        connectivity: Connectivity,
    ) -> Result<(), OpError> {
        launch::check_frame_size(width, height)?;
        let n = width * height;
        if input.len() < n {
            return Err(OpError::Unsupported(format!("input holds {} pixels, {width}x{height} needs {n}", input.len())));
        }
        let inv = match tree {
            TreeKind::Max => 0,
            TreeKind::Min => T::MAX.to_u32(),
        };
        self.state = Some(State { width, height, bits: T::BITS, inv, attribute: None, filtered: false });
        if n == 0 {
            return Ok(());
        }
        if self.frame.as_ref().is_none_or(|f| (f.width, f.height) != (width, height)) {
            self.frame = None; // free the old buffers first
            self.frame = Some(Frame::new(stream, width, height)?);
        }
        let (f, fr) = (&self.f, self.frame.as_mut().ok_or_else(|| OpError::Unsupported("no frame".into()))?);
        let (w, h, n32) = (width as u32, height as u32, n as u32);
        let eight = i32::from(connectivity == Connectivity::Eight);
        let full = i32::from(!self.grid_simplification);
        let (ntx, nty) = (width.div_ceil(TILE_WIDTH) as u32, height.div_ceil(TILE_HEIGHT) as u32);
        let local = if T::BITS == 8 { &f.local_u8 } else { &f.local_u16 };
        timer.time(stream, "maxtree_local", || {
            let mut b = stream.launch_builder(local);
            b.arg(input).arg(&mut fr.grec).arg(&w).arg(&h).arg(&inv).arg(&eight).arg(&full);
            let c = LaunchConfig {
                grid_dim: (ntx, nty, 1),
                block_dim: (TILE_WIDTH as u32, 1, 1),
                shared_mem_bytes: (TILE_WIDTH * TILE_HEIGHT * T::RECORD_BYTES) as u32,
            };
            // SAFETY: `input` holds width*height pixels (checked above), `grec` width*height
            // records; one block per tile, threads past the tile width only synchronise.
            unsafe { b.launch(c) }?;
            Ok(())
        })?;
        let merges = (ntx - 1) * h + (nty - 1) * w + if eight == 1 { (ntx - 1) * (nty - 1) } else { 0 };
        timer.time(stream, "maxtree_merge", || {
            if merges > 0 {
                let mut b = stream.launch_builder(&f.merge);
                b.arg(&mut fr.grec).arg(&w).arg(&h).arg(&eight).arg(&full);
                // SAFETY: one thread per border position; the kernel derives every index from
                // w, h and the tile size and stays inside the width*height records.
                unsafe { b.launch(cfg(launch::blocks_for(merges as usize, BLOCK), BLOCK, 0)) }?;
            }
            Ok(())
        })?;
        timer.time(stream, "maxtree_flatten", || {
            stream.memset_zeros(&mut fr.count)?;
            let mut b = stream.launch_builder(&f.flatten);
            b.arg(&mut fr.grec).arg(&mut fr.parent).arg(&mut fr.node_id).arg(&mut fr.node_pix).arg(&mut fr.count).arg(&n32);
            // SAFETY: one thread per pixel (p < N checked in the kernel); node ids are < N, the
            // size of node_pix; 8 bytes of shared memory hold the block counter and base.
            unsafe { b.launch(cfg(launch::blocks_for(n, BLOCK), BLOCK, 8)) }?;
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
        let st = self.state.as_mut().ok_or_else(|| OpError::Unsupported("enqueue_attribute before enqueue_tree".into()))?;
        st.attribute = Some(attribute);
        st.filtered = false;
        let (width, height) = (st.width, st.height);
        let n = width * height;
        if n == 0 {
            return Ok(());
        }
        let (f, fr) = (&self.f, self.frame.as_mut().ok_or_else(|| OpError::Unsupported("no frame".into()))?);
        let (w, h) = (width as u32, height as u32);
        let code = attribute.index() as i32;
        let segs = width.div_ceil(SEGMENT) * height;
        timer.time(stream, "maxtree_attributes", || {
            let nd = &mut fr.nodes;
            let mut b = stream.launch_builder(&f.nodes);
            b.arg(&fr.grec).arg(&fr.parent).arg(&fr.node_id).arg(&fr.node_pix).arg(&fr.count);
            b.arg(&mut nd.npar).arg(&mut nd.nlev).arg(&mut nd.area).arg(&mut nd.cnt).arg(&mut nd.arrive);
            b.arg(&mut nd.mx).arg(&mut nd.bb).arg(&mut nd.vol).arg(&mut nd.attr).arg(&mut nd.amax);
            // SAFETY: one thread per node id < *count <= N; every node array holds N entries
            // (bb 4N).
            unsafe { b.launch(cfg(launch::blocks_for(n, BLOCK), BLOCK, 0)) }?;
            let mut b = stream.launch_builder(&f.pixels);
            b.arg(&fr.grec).arg(&fr.parent).arg(&fr.node_id).arg(&mut fr.pix_node).arg(&w).arg(&h).arg(&code);
            b.arg(&mut nd.npar).arg(&mut nd.nlev).arg(&mut nd.area).arg(&mut nd.cnt).arg(&mut nd.arrive);
            b.arg(&mut nd.mx).arg(&mut nd.bb).arg(&mut nd.vol).arg(&mut nd.attr).arg(&mut nd.amax);
            // SAFETY: one thread per MT_SEG-pixel row segment (t < segs*H checked); pixel
            // indices < N, node ids < N.
            unsafe { b.launch(cfg(launch::blocks_for(segs, BLOCK), BLOCK, 0)) }?;
            let mut b = stream.launch_builder(&f.wave);
            b.arg(&fr.count).arg(&code);
            b.arg(&mut nd.npar).arg(&mut nd.nlev).arg(&mut nd.area).arg(&mut nd.cnt).arg(&mut nd.arrive);
            b.arg(&mut nd.mx).arg(&mut nd.bb).arg(&mut nd.vol).arg(&mut nd.attr).arg(&mut nd.amax);
            // SAFETY: one thread per node id < *count; parents are node ids or MT_NONE (checked).
            unsafe { b.launch(cfg(launch::blocks_for(n, BLOCK), BLOCK, 0)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the filter (region `maxtree_restitute`) on the last tree and attribute: a new
    /// threshold or rule costs only this. `input` must be the image the tree was built from.
    pub fn enqueue_filter<T: GpuGray>(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<T>,
        threshold: f64,
        rule: Rule,
    ) -> Result<(), OpError> {
        let st = self.state.as_mut().ok_or_else(|| OpError::Unsupported("enqueue_filter before enqueue_tree".into()))?;
        if st.attribute.is_none() {
            return Err(OpError::Unsupported("enqueue_filter before enqueue_attribute".into()));
        }
        if st.bits != T::BITS {
            return Err(OpError::Unsupported(format!("tree built from {}-bit pixels, filter given {}-bit", st.bits, T::BITS)));
        }
        if !threshold.is_finite() || threshold < 0.0 {
            return Err(OpError::InvalidParam(format!("maxtree.threshold = {threshold}: must be a finite number >= 0")));
        }
        st.filtered = true;
        let (width, height, inv) = (st.width, st.height, st.inv);
        let n = width * height;
        if n == 0 {
            return Ok(());
        }
        if input.len() < n {
            return Err(OpError::Unsupported(format!("input holds {} pixels, {width}x{height} needs {n}", input.len())));
        }
        if T::outputs(&mut self.outputs).as_ref().is_none_or(|(o, _)| o.len() != n) {
            *T::outputs(&mut self.outputs) = None;
            let o = launch::alloc_zeroed::<T>(stream, n, "max-tree filtered image", width, height)?;
            let r = launch::alloc_zeroed::<T>(stream, n, "max-tree residue", width, height)?;
            *T::outputs(&mut self.outputs) = Some((o, r));
        }
        let f = &self.f;
        let fr = self.frame.as_mut().ok_or_else(|| OpError::Unsupported("no frame".into()))?;
        let (out, res) = T::outputs(&mut self.outputs).as_mut().ok_or_else(|| OpError::Unsupported("no outputs".into()))?;
        let (n32, rule_code) = (n as u32, rule.index() as i32);
        // Path lengths are at most the number of grey levels: 2^BITS nodes, BITS doublings.
        let rounds = T::BITS;
        let grid = launch::blocks_for(n, BLOCK);
        timer.time(stream, "maxtree_restitute", || {
            let mut keep = |mode: i32| -> Result<(), GpuError> {
                let nd = &mut fr.nodes;
                let mut b = stream.launch_builder(&f.keep);
                b.arg(&fr.count).arg(&mut fr.words).arg(&threshold).arg(&rule_code).arg(&mode);
                b.arg(&mut nd.npar).arg(&mut nd.nlev).arg(&mut nd.area).arg(&mut nd.cnt).arg(&mut nd.arrive);
                b.arg(&mut nd.mx).arg(&mut nd.bb).arg(&mut nd.vol).arg(&mut nd.attr).arg(&mut nd.amax);
                // SAFETY: one thread per node id < *count <= N; words holds N entries.
                unsafe { b.launch(cfg(grid, BLOCK, 0)) }?;
                for _ in 0..rounds {
                    let mut b = stream.launch_builder(&f.jump);
                    b.arg(&fr.count).arg(&mut fr.words);
                    // SAFETY: one thread per node id < *count; jump targets are node ids.
                    unsafe { b.launch(cfg(grid, BLOCK, 0)) }?;
                }
                Ok(())
            };
            match rule {
                Rule::Min => {
                    keep(2)?;
                    keep(0)?;
                }
                Rule::Subtractive => keep(1)?,
                Rule::Direct | Rule::Max => keep(0)?,
            }
            let restitute = if T::BITS == 8 { &f.restitute_u8 } else { &f.restitute_u16 };
            let mut b = stream.launch_builder(restitute);
            b.arg(input).arg(&fr.pix_node).arg(&fr.words).arg(out).arg(res).arg(&n32).arg(&inv);
            // SAFETY: one thread per pixel (p < N checked); all buffers hold N entries.
            unsafe { b.launch(cfg(grid, BLOCK, 0)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Number of tree nodes of the last frame (blocking copy).
    pub fn download_node_count(&self, stream: &Arc<CudaStream>) -> Result<u32, OpError> {
        match (&self.state, &self.frame) {
            (Some(s), Some(fr)) if s.width * s.height > 0 => {
                let c = stream.clone_dtoh(&fr.count)?;
                stream.synchronize()?;
                Ok(c.first().copied().unwrap_or(0))
            }
            _ => Ok(0),
        }
    }

    /// The canonical parent image of the last tree (blocking copy).
    pub fn download_parent(&self, stream: &Arc<CudaStream>) -> Result<Image<u32>, OpError> {
        let st = self.state.ok_or_else(|| OpError::Unsupported("download_parent before enqueue_tree".into()))?;
        let n = st.width * st.height;
        if n == 0 {
            return Ok(Image::new(st.width, st.height, 0));
        }
        let fr = self.frame.as_ref().ok_or_else(|| OpError::Unsupported("no frame".into()))?;
        let v = stream.clone_dtoh(&fr.parent)?;
        stream.synchronize()?;
        Ok(Image::from_vec(st.width, st.height, v)?)
    }

    /// Filtered image, residue and node count of the last frame (blocking copies).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<MaxtreeOutput, OpError> {
        let st = self.state.ok_or_else(|| OpError::Unsupported("download before enqueue".into()))?;
        if !st.filtered {
            return Err(OpError::Unsupported("download before enqueue_filter".into()));
        }
        let (w, h) = (st.width, st.height);
        let node_count = self.download_node_count(stream)?;
        let (filtered, residue) = if st.bits == 8 {
            let (o, r) = fetch(stream, &self.outputs.u8, w * h)?;
            (DynImage::Gray8(Image::from_vec(w, h, o)?), DynImage::Gray8(Image::from_vec(w, h, r)?))
        } else {
            let (o, r) = fetch(stream, &self.outputs.u16, w * h)?;
            (DynImage::Gray16(Image::from_vec(w, h, o)?), DynImage::Gray16(Image::from_vec(w, h, r)?))
        };
        Ok(MaxtreeOutput { filtered, residue, node_count })
    }
}

/// Blocking copy of an output pair (empty vectors for an empty frame).
fn fetch<T: GpuGray>(
    stream: &Arc<CudaStream>,
    pair: &Option<(CudaSlice<T>, CudaSlice<T>)>,
    n: usize,
) -> Result<(Vec<T>, Vec<T>), OpError> {
    match pair {
        Some((o, r)) if n > 0 => {
            let (mut o, mut r) = (stream.clone_dtoh(o)?, stream.clone_dtoh(r)?);
            stream.synchronize()?;
            o.truncate(n);
            r.truncate(n);
            Ok((o, r))
        }
        _ => Ok((Vec::new(), Vec::new())),
    }
}

fn upload<T: GpuGray>(stream: &Arc<CudaStream>, img: ImageView<'_, T>) -> Result<CudaSlice<T>, OpError> {
    let (w, h) = (img.width(), img.height());
    launch::check_frame_size(w, h)?;
    let px: Vec<T> = img.rows().flat_map(|r| r.iter().copied()).collect();
    if px.is_empty() {
        return Ok(launch::alloc_zeroed::<T>(stream, 1, "input", w, h)?);
    }
    Ok(stream.clone_htod(&px)?)
}

/// The whole analysis on the GPU for one image (upload, enqueue, download): the CLI and tests.
pub fn maxtree_gpu<T: GpuGray>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    params: &MaxtreeParams,
) -> Result<MaxtreeOutput, OpError> {
    let stream = gpu.new_stream()?;
    let input = upload(&stream, img)?;
    let mut mt = MaxtreeGpu::new(gpu)?;
    let mut timer = KernelTimer::new();
    mt.enqueue(&stream, &mut timer, &input, img.width(), img.height(), params)?;
    mt.download(&stream)
}

/// The canonical parent image computed on the GPU (for parity tests and the CLI).
pub fn maxtree_parent_gpu<T: GpuGray>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    tree: TreeKind,
    connectivity: Connectivity,
) -> Result<Image<u32>, OpError> {
    let stream = gpu.new_stream()?;
    let input = upload(&stream, img)?;
    let mut mt = MaxtreeGpu::new(gpu)?;
    let mut timer = KernelTimer::new();
    mt.enqueue_tree(&stream, &mut timer, &input, img.width(), img.height(), tree, connectivity)?;
    mt.download_parent(&stream)
}
