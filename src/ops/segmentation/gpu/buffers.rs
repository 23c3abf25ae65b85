//! The device buffers of one frame size, allocated on the first frame of that size (per-pixel
//! arrays, the per-round counters and the scratch of the large and giant trees).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::layout::{GIANT_WORDS, INFO_WORDS, NCOUNTS, NCTL, SCAN_BLOCK, SegmentationPtrs};
use crate::gpu::GpuError;
use crate::gpu::launch::{alloc_zeroed, blocks_for};

/// The buffers (owned; `p` holds their addresses, which is how the kernels get them).
pub(super) struct FrameBuffers {
    pub width: usize,
    pub height: usize,
    pub p: SegmentationPtrs,
    // Owners of the memory `p` points into that the host reads only through `p`.
    _u32s: Vec<CudaSlice<u32>>,
    _u64s: Vec<CudaSlice<u64>>,
    _flags: CudaSlice<u8>,
    /// Edge weights, 4 a pixel (right, down, down-right, down-left).
    pub w4: CudaSlice<f64>,
    /// Round in which each root was absorbed (the hierarchy).
    pub round: CudaSlice<u16>,
    /// Union-find links; a link is only written when its component joins another, so the
    /// links are also the hierarchy's parents.
    pub link: CudaSlice<u32>,
    /// Raster-order labels of the last frame or level.
    pub labels: CudaSlice<u32>,
    /// Per round: events (anything changed), merges.
    pub ctl: CudaSlice<u32>,
    pub mctl: CudaSlice<u32>,
    /// See [`INFO_WORDS`].
    pub info: CudaSlice<u32>,
    /// Per-round list counts ([`NCOUNTS`] rows of [`NCTL`]).
    pub counts: CudaSlice<u32>,
    /// `%globaltimer` stamps of the round profile.
    #[cfg(feature = "profiling")]
    pub stamps: CudaSlice<u64>,
    /// Their device address (what `segmentation_stamp` is given).
    #[cfg(feature = "profiling")]
    pub stamps_ptr: u64,
}

/// The device address of `s` (the launches pass plain addresses, see [`SegmentationPtrs`]).
pub(super) fn raw<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _record) = s.device_ptr(stream);
    p
}

impl FrameBuffers {
    /// Allocates (zeroed) the buffers of a `width` x `height` frame on `stream`.
    pub(super) fn new(
        stream: &Arc<CudaStream>,
        width: usize,
        height: usize,
    ) -> Result<Self, GpuError> {
        let n = width * height;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        let a64 = |len: usize, what: &str| alloc_zeroed::<u64>(stream, len, what, width, height);
        let w4 = alloc_zeroed::<f64>(stream, 4 * n, "segment edge weights", width, height)?;
        let round = alloc_zeroed::<u16>(stream, n, "segment hierarchy rounds", width, height)?;
        let link = a(n, "segment links (hierarchy parents)")?;
        // A flag byte per component (frozen / at least min_size, joined, kept): see
        // segmentation/common.cuh.
        let flags = alloc_zeroed::<u8>(stream, n, "segment component flags", width, height)?;
        let labels = a(n, "segment labels")?;
        let ctl = a(NCTL, "segment round events")?;
        let mctl = a(NCTL, "segment round merges")?;
        // The grid finisher's barrier word must start at zero (and is back to zero after
        // every barrier).
        let info = a(INFO_WORDS, "segment info")?;
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
        #[cfg(feature = "profiling")]
        let stamps = a64(NCTL + 4, "round stamps")?;
        let mut u64s = Vec::with_capacity(6);
        for what in [
            "least edges",
            "target keys",
            "tree exits",
            "internal differences",
        ] {
            u64s.push(a64(n, what)?);
        }
        // Large trees radix-sorted: (key, id) twice over each tree's range.
        u64s.push(a64(2 * n, "large-tree sort keys")?);
        u32s.push(a(2 * n, "large-tree sort ids")?);
        // Per tree: core members and members not yet counted off (see segmentation/scan.cuh's tcnt).
        u64s.push(a64(n, "tree counts")?);
        u64s.push(a64(GIANT_WORDS, "giant-tree scratch")?);
        let r32 = |i: usize| raw(&u32s[i], stream);
        let r64 = |i: usize| raw(&u64s[i], stream);
        let p = SegmentationPtrs {
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
        Ok(Self {
            width,
            height,
            p,
            _u32s: u32s,
            _u64s: u64s,
            _flags: flags,
            w4,
            round,
            link,
            labels,
            ctl,
            mctl,
            info,
            counts,
            #[cfg(feature = "profiling")]
            stamps_ptr: raw(&stamps, stream),
            #[cfg(feature = "profiling")]
            stamps,
        })
    }
}
