//! CUDA backend of `cca`: launch code for `kernels/cca.cu` (HA4 labeling + analysis).
//!
//! Per frame, on one stream and without a host sync: `cca_binarize` (with `cca_hist` +
//! `cca_otsu` for Otsu's level, all on the device), then `cca_strip`, `cca_merge`,
//! `cca_count_roots` + `cca_scan_rows` + `cca_label_roots` (raster-order renumbering),
//! `cca_relabel` and `cca_features`. The component table stays on the device until
//! [`CcaGpu::download_table`] reads the count, the threshold and the `n` feature records (72
//! bytes each) — nothing frame-sized — or [`CcaGpu::download`] reads the label image too (the
//! CLI, the tests). The feature records are exact integer sums, decoded here into the
//! same [`ComponentSums`] the CPU produces, so tables are bit-identical across backends.
//!
//! The input is a packed 8-bit frame (convert 16-bit frames with `preprocess_gray16_to_gray8`
//! first). The motion background is a [`GpuBackground`] owned by the `CcaGpu`; a ring that
//! processes consecutive frames on different slots must hand it from slot to slot
//! (`std::mem::swap` of `CcaGpu::background`) so frames update it in order — cudarc's
//! per-buffer events then order the streams. Launch shapes come from [`CcaTuning`]
//! (`tuning.rs`), chosen per device.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use crate::gpu::launch::{alloc_zeroed, blocks_for, one_block};
use crate::gpu::{DeviceImage, GpuContext, GpuError, KernelTimer, round_trip};
use crate::image::{Image, ImageView};
use crate::ops::OpError;

use super::cpu::check_sum_range;
use super::features::{ComponentSums, ComponentTable};
use super::tuning::CcaTuning;
use super::{CcaOutput, CcaParams, Polarity, Source, Threshold};

/// Rows per strip of `cca_strip` (keep in sync with `STRIP_H` in cca.cu).
const STRIP_H: u32 = 4;
/// u64 words per feature record (keep in sync with `FEAT_WORDS`).
const FEAT_WORDS: usize = 9;
/// Words per warp of `cca_features` (keep in sync with `FEAT_PIECE`).
const FEAT_PIECE: usize = 8;
/// Words per block piece of `cca_strip` (keep in sync with `STRIP_PIECE`).
const STRIP_PIECE: usize = 8;

/// The running motion background on the device (16.16 fixed point per pixel).
#[derive(Debug, Default)]
pub struct GpuBackground {
    buf: Option<CudaSlice<u32>>,
    width: usize,
    height: usize,
    seeded: bool,
}

impl GpuBackground {
    /// Forgets the background: the next motion frame seeds it.
    pub fn reset(&mut self) {
        self.seeded = false;
    }

    /// The background rounded to whole levels (blocking; for display and tests).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Option<Image<u8>>, OpError> {
        let Some(buf) = self.buf.as_ref().filter(|_| self.seeded) else {
            return Ok(None);
        };
        let v = stream.clone_dtoh(buf)?;
        stream.synchronize()?;
        let px = v
            .iter()
            .take(self.width * self.height)
            .map(|&b| ((b + 32768) >> 16).min(255) as u8)
            .collect();
        Ok(Some(Image::from_vec(self.width, self.height, px)?))
    }
}

struct Buffers {
    width: usize,
    height: usize,
    wpr: usize,
    bits: CudaSlice<u64>,
    eq: CudaSlice<u32>,
    labels: CudaSlice<u32>,
    roots: CudaSlice<u64>,
    rowcount: CudaSlice<u32>,
    rowoff: CudaSlice<u32>,
    info: CudaSlice<u32>,
    hist: CudaSlice<u32>,
    feats: CudaSlice<u64>,
    /// Stand-in background argument when the source is not motion (never read then).
    dummy: CudaSlice<u32>,
}

/// What the last enqueue produced (for `download`).
#[derive(Clone, Copy, Debug)]
struct Produced {
    width: usize,
    height: usize,
    connectivity: u8,
    features: bool,
}

/// GPU connected-component labeling and analysis with buffers for one frame size.
pub struct CcaGpu {
    f_hist: CudaFunction,
    f_otsu: CudaFunction,
    f_binarize: CudaFunction,
    f_strip: CudaFunction,
    f_merge: CudaFunction,
    f_count: CudaFunction,
    f_scan: CudaFunction,
    f_label_roots: CudaFunction,
    f_relabel: CudaFunction,
    f_features: CudaFunction,
    bufs: Option<Buffers>,
    produced: Option<Produced>,
    /// The motion background (see the module docs about rings of streams).
    pub background: GpuBackground,
    tuning: CcaTuning,
}

impl std::fmt::Debug for CcaGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcaGpu")
            .field("produced", &self.produced)
            .finish_non_exhaustive()
    }
}

/// Warps covering `items` items, in blocks of `warps_per_block` warps.
fn warp_cfg(items: usize, warps_per_block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(items, warps_per_block), 1, 1),
        block_dim: (32 * warps_per_block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn i32_of(v: usize, what: &str) -> Result<i32, OpError> {
    i32::try_from(v).map_err(|_| {
        OpError::Unsupported(format!("{what} {v} exceeds the kernels' 32-bit indexing"))
    })
}

impl CcaGpu {
    /// Resolves the kernels (buffers are allocated on the first frame), with the tuning's
    /// defaults for this device.
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Self::with_tuning(gpu, CcaTuning::for_device(gpu.info()))
    }

    /// Resolves the kernels, with `tuning` (checked: [`CcaTuning::validate`]).
    pub fn with_tuning(gpu: &GpuContext, tuning: CcaTuning) -> Result<Self, OpError> {
        tuning.validate()?;
        let f = |name: &str| gpu.function("cca", name);
        Ok(Self {
            f_hist: f("cca_hist")?,
            f_otsu: f("cca_otsu")?,
            f_binarize: f("cca_binarize")?,
            f_strip: f("cca_strip")?,
            f_merge: f("cca_merge")?,
            f_count: f("cca_count_roots")?,
            f_scan: f("cca_scan_rows")?,
            f_label_roots: f("cca_label_roots")?,
            f_relabel: f("cca_relabel")?,
            f_features: f("cca_features")?,
            bufs: None,
            produced: None,
            background: GpuBackground::default(),
            tuning,
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &CcaTuning {
        &self.tuning
    }

    /// Changes the tuning from the next enqueue on (checked: [`CcaTuning::validate`]).
    pub fn set_tuning(&mut self, tuning: CcaTuning) -> Result<(), OpError> {
        tuning.validate()?;
        self.tuning = tuning;
        Ok(())
    }

    fn ensure_buffers(
        &mut self,
        stream: &Arc<CudaStream>,
        width: usize,
        height: usize,
    ) -> Result<(), GpuError> {
        if self
            .bufs
            .as_ref()
            .is_some_and(|b| b.width == width && b.height == height)
        {
            return Ok(());
        }
        self.bufs = None;
        let n = width * height;
        let wpr = width.div_ceil(64);
        let words = wpr * height;
        // Worst case: 4-connected checkerboard, ceil(n / 2) components.
        let cap = n.div_ceil(2) + 1;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        let a64 = |len: usize, what: &str| alloc_zeroed::<u64>(stream, len, what, width, height);
        self.bufs = Some(Buffers {
            width,
            height,
            wpr,
            bits: a64(words, "cca bitmask")?,
            eq: a(n, "cca equivalence table")?,
            labels: a(n, "cca label image")?,
            roots: a64(words, "cca root masks")?,
            rowcount: a(height, "cca row counts")?,
            rowoff: a(height, "cca row offsets")?,
            info: a(4, "cca info")?,
            hist: a(256, "cca histogram")?,
            feats: a64(cap * FEAT_WORDS, "cca feature table")?,
            dummy: a(1, "cca dummy background")?,
        });
        Ok(())
    }

    /// Enqueues binarization, labeling and features of one packed 8-bit frame.
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &CcaParams,
    ) -> Result<(), OpError> {
        self.enqueue_binarize(timer, input, params)?;
        self.enqueue_labeling(input.stream, timer, params.connectivity, Some(input.data))
    }

    /// Enqueues only the binarization (source value, threshold, bitmask; motion update) of one
    /// packed 8-bit frame.
    pub fn enqueue_binarize(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &CcaParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        input.check(1, "labeling")?;
        let tuning = self.tuning;
        let DeviceImage {
            stream,
            data: input,
            width,
            height,
            ..
        } = input;
        check_sum_range(width, height)?;
        let n = width * height;
        self.produced = Some(Produced {
            width,
            height,
            connectivity: params.connectivity,
            features: false,
        });
        if n == 0 {
            return Ok(());
        }
        self.ensure_buffers(stream, width, height)?;
        let motion = params.source == Source::Motion;
        let seed = motion
            && !(self.background.seeded
                && self.background.width == width
                && self.background.height == height);
        if motion && (self.background.buf.as_ref().is_none_or(|b| b.len() < n)) {
            self.background.buf = Some(alloc_zeroed::<u32>(
                stream,
                n,
                "cca motion background",
                width,
                height,
            )?);
        }
        if motion {
            self.background.width = width;
            self.background.height = height;
            self.background.seeded = true;
        }
        let Some(b) = self.bufs.as_mut() else {
            return Ok(());
        };
        let bg: &mut CudaSlice<u32> = match self.background.buf.as_mut() {
            Some(bg) if motion => bg,
            _ => &mut b.dummy,
        };
        let (w, h, wpr) = (
            i32_of(width, "width")?,
            i32_of(height, "height")?,
            i32_of(b.wpr, "words per row")?,
        );
        let n_i = i32_of(n, "pixels")?;
        let (motion_i, seed_i) = (i32::from(motion), i32::from(seed));
        let use_otsu = i32::from(params.threshold == Threshold::Otsu);
        let t_fixed = match params.threshold {
            Threshold::Fixed(t) => t,
            Threshold::Otsu => 0,
        };
        let dark = i32::from(params.polarity == Polarity::Dark);
        let alpha = params.learning_rate_fixed();
        let (f_hist, f_otsu, f_bin) = (&self.f_hist, &self.f_otsu, &self.f_binarize);
        timer.time(stream, "cca_binarize", || {
            if use_otsu != 0 {
                let per_block = tuning.hist_threads * tuning.hist_pixels_per_thread;
                let cfg = LaunchConfig {
                    grid_dim: (blocks_for(n, per_block).min(tuning.hist_max_blocks), 1, 1),
                    block_dim: (tuning.hist_threads, 1, 1),
                    shared_mem_bytes: 0,
                };
                let mut l = stream.launch_builder(f_hist);
                l.arg(input)
                    .arg(&*bg)
                    .arg(&mut b.hist)
                    .arg(&n_i)
                    .arg(&motion_i)
                    .arg(&seed_i);
                // SAFETY: input holds n bytes (checked), bg holds n words when motion is set
                // (else it is never read), hist holds 256 words; the kernel reads k < n only.
                unsafe { l.launch(cfg) }?;
                let mut l = stream.launch_builder(f_otsu);
                l.arg(&mut b.hist).arg(&mut b.info);
                // SAFETY: one block of 256 threads over the 256-bin histogram and info[1].
                unsafe { l.launch(one_block(256)) }?;
            }
            let mut l = stream.launch_builder(f_bin);
            l.arg(input)
                .arg(&mut *bg)
                .arg(&mut b.bits)
                .arg(&mut b.info)
                .arg(&w)
                .arg(&h)
                .arg(&wpr)
                .arg(&t_fixed)
                .arg(&use_otsu)
                .arg(&dark)
                .arg(&motion_i)
                .arg(&seed_i)
                .arg(&alpha);
            // SAFETY: one warp per bitmask word (height * wpr words allocated); pixel reads and
            // background writes are guarded by x < width.
            unsafe { l.launch(warp_cfg(b.wpr * b.height, tuning.warps_per_block)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues labeling of the current bitmask, without binarizing again, and the features
    /// when given `frame`: the packed 8-bit frame that was binarized, whose grey levels the
    /// components' `Σg` sums. Used by `enqueue` and by the benchmark (labeling alone).
    pub fn enqueue_labeling(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        connectivity: u8,
        frame: Option<&CudaSlice<u8>>,
    ) -> Result<(), OpError> {
        let tuning = self.tuning;
        let Some(prod) = self.produced.as_mut() else {
            return Err(OpError::InvalidParam(
                "enqueue_labeling needs a binarized frame (call enqueue_binarize)".into(),
            ));
        };
        let (width, height) = (prod.width, prod.height);
        check_labeling(connectivity, frame.map(CudaSlice::len), (width, height))?;
        let features = frame.is_some();
        prod.connectivity = connectivity;
        prod.features = features;
        if width * height == 0 {
            return Ok(());
        }
        let Some(b) = self.bufs.as_mut() else {
            return Ok(());
        };
        let (w, h, wpr) = (
            i32_of(width, "width")?,
            i32_of(height, "height")?,
            i32_of(b.wpr, "words per row")?,
        );
        let conn8 = i32::from(connectivity == 8);
        let init_feats = i32::from(features);
        let words = b.wpr * height;
        timer.time(stream, "cca_strip", || {
            let cfg = LaunchConfig {
                grid_dim: (
                    blocks_for(height, STRIP_H),
                    blocks_for(b.wpr, STRIP_PIECE as u32),
                    1,
                ),
                block_dim: (32, STRIP_H, 1),
                shared_mem_bytes: 0,
            };
            let mut l = stream.launch_builder(&self.f_strip);
            l.arg(&b.bits)
                .arg(&mut b.eq)
                .arg(&w)
                .arg(&h)
                .arg(&wpr)
                .arg(&conn8);
            // SAFETY: one warp per row (y < height checked in the kernel); eq holds w*h entries
            // and only addresses of set pixels are touched.
            unsafe { l.launch(cfg) }?;
            Ok(())
        })?;
        let borders = (height - 1) / STRIP_H as usize;
        let piece_borders = height * (b.wpr.div_ceil(STRIP_PIECE) - 1);
        if borders > 0 || piece_borders > 0 {
            timer.time(stream, "cca_merge", || {
                let mut l = stream.launch_builder(&self.f_merge);
                l.arg(&b.bits)
                    .arg(&mut b.eq)
                    .arg(&w)
                    .arg(&h)
                    .arg(&wpr)
                    .arg(&conn8);
                // SAFETY: grid-stride loops over (border row, word) warps and (row, piece
                // border) threads, bounded in the kernel.
                unsafe {
                    l.launch(warp_cfg(
                        (borders * b.wpr).max(piece_borders.div_ceil(32)),
                        tuning.warps_per_block,
                    ))
                }?;
                Ok(())
            })?;
        }
        timer.time(stream, "cca_renumber", || {
            let mut l = stream.launch_builder(&self.f_count);
            l.arg(&b.bits)
                .arg(&b.eq)
                .arg(&mut b.roots)
                .arg(&mut b.rowcount)
                .arg(&w)
                .arg(&h)
                .arg(&wpr);
            // SAFETY: one warp per row; roots holds height * wpr words.
            unsafe { l.launch(warp_cfg(height, tuning.warps_per_block)) }?;
            let mut l = stream.launch_builder(&self.f_scan);
            l.arg(&b.rowcount)
                .arg(&mut b.rowoff)
                .arg(&mut b.info)
                .arg(&h);
            // SAFETY: one block scanning `height` row counts.
            unsafe { l.launch(one_block(1024)) }?;
            let mut l = stream.launch_builder(&self.f_label_roots);
            l.arg(&b.roots)
                .arg(&b.rowoff)
                .arg(&mut b.eq)
                .arg(&mut b.feats)
                .arg(&w)
                .arg(&h)
                .arg(&wpr)
                .arg(&init_feats);
            // SAFETY: labels are at most ceil(n/2) <= capacity - 1, so records stay in bounds.
            unsafe { l.launch(warp_cfg(height, tuning.warps_per_block)) }?;
            Ok(())
        })?;
        timer.time(stream, "cca_relabel", || {
            let mut l = stream.launch_builder(&self.f_relabel);
            l.arg(&b.bits)
                .arg(&b.eq)
                .arg(&mut b.labels)
                .arg(&w)
                .arg(&h)
                .arg(&wpr);
            // SAFETY: one warp per word; writes guarded by x < width.
            unsafe { l.launch(warp_cfg(words, tuning.warps_per_block)) }?;
            Ok(())
        })?;
        if let Some(frame) = frame {
            let rows = tuning.feature_rows;
            let warps = b.wpr.div_ceil(FEAT_PIECE) * height.div_ceil(rows as usize);
            let rows_i = rows as i32;
            timer.time(stream, "cca_features", || {
                let mut l = stream.launch_builder(&self.f_features);
                l.arg(&b.bits)
                    .arg(&b.labels)
                    .arg(frame)
                    .arg(&mut b.feats)
                    .arg(&w)
                    .arg(&h)
                    .arg(&wpr)
                    .arg(&rows_i);
                // SAFETY: one warp per (band of rows, piece); records indexed by final labels
                // <= n < capacity.
                unsafe { l.launch(warp_cfg(warps, tuning.warps_per_block)) }?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Blocking readback of the last enqueued frame: label image and component table (empty
    /// table when the frame was labelled without features).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<CcaOutput, OpError> {
        self.download_with(stream, true)
    }

    /// The component table of the last frame without the label image (what a tracker needs:
    /// a few kB instead of 4 bytes a pixel).
    pub fn download_table(&self, stream: &Arc<CudaStream>) -> Result<ComponentTable, OpError> {
        Ok(self.download_with(stream, false)?.table)
    }

    /// The label image of the last enqueued frame on the device: `u32` labels `1..=n` in raster
    /// order of each component's first pixel, 0 for the background, packed, with the frame's
    /// width and height (the buffer may hold more than `width * height` labels: read that
    /// many). Written on the enqueuing stream: work that reads it must be ordered after it.
    /// `None` before any enqueue and for an empty frame. For a caller that keeps the labels on
    /// the device (the Python package); the count is [`CcaGpu::download_count`].
    #[must_use]
    pub fn device_labels(&self) -> Option<(&CudaSlice<u32>, usize, usize)> {
        let p = self.produced?;
        let b = self
            .bufs
            .as_ref()
            .filter(|b| b.width == p.width && b.height == p.height)?;
        (p.width * p.height > 0).then_some((&b.labels, p.width, p.height))
    }

    /// The number of components of the last enqueued frame: a 4-byte readback (blocks until the
    /// stream's work is done), with or without features.
    pub fn download_count(&self, stream: &Arc<CudaStream>) -> Result<usize, OpError> {
        let Some(p) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let Some(b) = self.bufs.as_ref().filter(|_| p.width * p.height > 0) else {
            return Ok(0);
        };
        let info = stream.clone_dtoh(&b.info.slice(0..1))?;
        stream.synchronize()?;
        Ok(info.first().map_or(0, |&c| c as usize))
    }

    fn download_with(
        &self,
        stream: &Arc<CudaStream>,
        with_labels: bool,
    ) -> Result<CcaOutput, OpError> {
        let Some(p) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        // Without labels the (unused) label image is 0x0, not a frame of zeros.
        let (lw, lh) = if with_labels {
            (p.width, p.height)
        } else {
            (0, 0)
        };
        let empty = |t: u32| CcaOutput {
            labels: Image::new(lw, lh, 0),
            table: ComponentTable {
                width: p.width,
                height: p.height,
                connectivity: p.connectivity,
                threshold: t,
                components: Vec::new(),
            },
        };
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else {
            return Ok(empty(0));
        };
        let info = stream.clone_dtoh(&b.info.slice(0..2))?;
        let labels = if with_labels {
            Some(stream.clone_dtoh(&b.labels.slice(0..n))?)
        } else {
            None
        };
        stream.synchronize()?;
        let (count, threshold) = (info[0] as usize, info[1]);
        let mut out = empty(threshold);
        if let Some(labels) = labels {
            out.labels = Image::from_vec(p.width, p.height, labels)?;
        }
        if p.features && count > 0 {
            let raw = stream.clone_dtoh(&b.feats.slice(0..count * FEAT_WORDS))?;
            stream.synchronize()?;
            let sums: Vec<ComponentSums> = raw
                .as_chunks::<FEAT_WORDS>()
                .0
                .iter()
                .map(decode_record)
                .collect();
            out.table =
                ComponentTable::from_sums(p.width, p.height, p.connectivity, threshold, &sums);
        }
        Ok(out)
    }
}

/// One device feature record (see the layout in cca.cu) as sums.
fn decode_record(r: &[u64; FEAT_WORDS]) -> ComponentSums {
    let lo = |v: u64| (v & 0xffff_ffff) as u32;
    let hi = |v: u64| (v >> 32) as u32;
    ComponentSums {
        area: r[0],
        sum_x: r[1],
        sum_y: r[2],
        sum_xx: r[3],
        sum_xy: r[4],
        sum_yy: r[5],
        min_x: lo(r[6]),
        max_x: hi(r[6]),
        min_y: lo(r[7]),
        max_y: hi(r[7]),
        sum_grey: r[8],
    }
}

/// Uploads one 8-bit image, labels it on the GPU and downloads the result (CLI and tests).
/// Stateless: with `source = "motion"` this only seeds a fresh background (run frames through
/// one [`CcaGpu`] with [`round_trip`] to keep it).
pub fn cca_gpu(
    gpu: &GpuContext,
    img: ImageView<'_, u8>,
    params: &CcaParams,
) -> Result<CcaOutput, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut CcaGpu::new(gpu)?,
        |op, timer, input| op.enqueue(timer, input, params),
        |op, stream| op.download(stream),
    )
}

/// Checks a labelling request: 4 or 8 neighbours, and a features frame (its pixel count) at
/// least the bitmask's size.
fn check_labeling(
    connectivity: u8,
    frame_pixels: Option<usize>,
    (width, height): (usize, usize),
) -> Result<(), OpError> {
    if connectivity != 4 && connectivity != 8 {
        return Err(OpError::InvalidParam(format!(
            "connectivity must be 4 or 8, got {connectivity}"
        )));
    }
    if let Some(n) = frame_pixels
        && n < width * height
    {
        return Err(OpError::InvalidParam(format!(
            "the frame for the features has {n} pixels, the bitmask {width}x{height}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_decoding() {
        let r = [5u64, 6, 7, 8, 9, 10, 3 | (9 << 32), 4 | (4 << 32), 5 << 33];
        let s = decode_record(&r);
        assert_eq!(
            (s.area, s.sum_yy, s.min_x, s.max_x, s.min_y, s.max_y),
            (5, 10, 3, 9, 4, 4)
        );
        assert_eq!(s.sum_grey, 5 << 33, "Σg keeps all 64 bits");
    }
}
