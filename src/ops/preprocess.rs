//! Pre-processing shared by the analyses: colour to grey (BT.601, OpenCV's fixed-point rounding),
//! 16 to 8 bits, box downscaling by an integer factor (what `segmentation.downscale` runs on),
//! and the grey-level histogram the `preprocess` analysis' statistics ([`GrayStats`]: mean,
//! minimum, maximum) are read from, on the CPU (rayon over rows) and the GPU
//! (`kernels/preprocess.cu`), bit-identical. On the GPU only the 256 bins of the histogram come
//! back to the host, never the frame. The histogram's launch shape is [`PreprocessTuning`]
//! (chosen per device); the per-pixel kernels run 32x8 blocks (a warp along a row) everywhere.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use rayon::prelude::*;

use crate::gpu::{DeviceImage, DeviceInfo, GpuContext, KernelTimer, Readback, launch, round_trip};
use crate::image::{Image, ImageView, rgb_to_gray_pixel};
use crate::ops::OpError;

/// Bins of the grey-level histogram: one per 8-bit level.
pub(crate) const GRAY_BINS: usize = 256;

/// Launch shape of [`GrayHistogramGpu`]. Every field changes speed only: the bins are exact
/// integer counts for every valid value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreprocessTuning {
    /// Threads per block of `preprocess_histogram` (a multiple of 32, at most 1024).
    pub histogram_threads: u32,
    /// Four-byte words each histogram thread reads at least (sets the grid).
    pub histogram_words_per_thread: u32,
    /// Most blocks of `preprocess_histogram` (grid-stride beyond).
    pub histogram_max_blocks: u32,
}

impl PreprocessTuning {
    /// The defaults for `device`: the same on every device.
    #[must_use]
    pub fn for_device(_device: &DeviceInfo) -> Self {
        Self::default()
    }

    /// Checks the values the kernel can run with.
    pub fn validate(&self) -> Result<(), OpError> {
        let t = self.histogram_threads;
        if !(32..=1024).contains(&t) || !t.is_multiple_of(32) {
            return Err(OpError::InvalidParam(format!(
                "preprocess histogram_threads = {t}: must be a multiple of 32 in 32..=1024"
            )));
        }
        if self.histogram_words_per_thread == 0 || self.histogram_max_blocks == 0 {
            return Err(OpError::InvalidParam(format!(
                "preprocess histogram_words_per_thread = {}, histogram_max_blocks = {}: must be \
                 at least 1",
                self.histogram_words_per_thread, self.histogram_max_blocks
            )));
        }
        Ok(())
    }
}

impl Default for PreprocessTuning {
    /// The defaults of a compute capability 9.0 device (the H100).
    fn default() -> Self {
        Self {
            // One thread per bin: the block clears and flushes its shared bins in one step.
            histogram_threads: 256,
            // Few enough blocks that their 256 global atomics stay negligible, enough for 720p.
            histogram_words_per_thread: 16,
            // Grid-stride beyond: 4K frames need about 540 blocks.
            histogram_max_blocks: 1024,
        }
    }
}

/// RGB to grey on the CPU; output packed.
#[must_use]
pub fn rgb_to_gray(img: ImageView<'_, [u8; 3]>) -> Image<u8> {
    let (w, h) = (img.width(), img.height());
    let mut out = vec![0u8; w * h];
    if w > 0 {
        out.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
            for (o, &p) in row.iter_mut().zip(img.row(y)) {
                *o = rgb_to_gray_pixel(p);
            }
        });
    }
    Image::from_vec(w, h, out).unwrap_or_else(|_| Image::new(0, 0, 0))
}

/// 16-bit to 8-bit grey (high byte), on the CPU.
#[must_use]
pub fn gray16_to_gray8(img: ImageView<'_, u16>) -> Image<u8> {
    img.map(|v| (v >> 8) as u8)
}

/// Size of a `factor` box downscale of `width` x `height`: whole blocks only (at least 1x1;
/// a frame smaller than one block keeps its size and is not downscaled).
#[must_use]
pub fn downscaled_size(width: usize, height: usize, factor: usize) -> (usize, usize) {
    let f = factor.max(1);
    if width < f || height < f {
        (width, height)
    } else {
        (width / f, height / f)
    }
}

/// Box average of `factor` x `factor` blocks of packed interleaved 8-bit samples (`channels`
/// per pixel), `(sum + n/2) / n` per channel; trailing columns and rows that do not fill a
/// block are left out ([`downscaled_size`]). Factor 1, or a frame smaller than one block,
/// returns the input unchanged.
#[must_use]
pub fn downscale_box(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    factor: usize,
) -> Vec<u8> {
    let (ow, oh) = downscaled_size(width, height, factor);
    if (ow, oh) == (width, height) || channels == 0 || data.len() < width * height * channels {
        return data.to_vec();
    }
    let f = factor;
    let n = (f * f) as u32;
    let mut out = vec![0u8; ow * oh * channels];
    out.par_chunks_mut(ow * channels)
        .enumerate()
        .for_each(|(y, row)| {
            for x in 0..ow {
                for c in 0..channels {
                    let mut sum = 0u32;
                    for dy in 0..f {
                        let base = ((y * f + dy) * width + x * f) * channels + c;
                        for dx in 0..f {
                            sum += u32::from(data[base + dx * channels]);
                        }
                    }
                    row[x * channels + c] = ((sum + n / 2) / n) as u8;
                }
            }
        });
    out
}

/// The `preprocess_downscale` kernel (resolve once, launch with [`enqueue_downscale`]).
pub fn downscale_function(gpu: &GpuContext) -> Result<CudaFunction, OpError> {
    Ok(gpu.function("preprocess", "preprocess_downscale")?)
}

/// Enqueues [`downscale_box`] of `src` (packed, `src.channels` samples a pixel) into `dst`,
/// which must hold `downscaled_size(..)` pixels, with `func` from [`downscale_function`].
/// Returns that size (the caller segments it).
pub fn enqueue_downscale(
    func: &CudaFunction,
    src: DeviceImage<'_, u8>,
    dst: &mut CudaSlice<u8>,
    factor: usize,
) -> Result<(usize, usize), OpError> {
    src.check(src.channels, "downscale")?;
    let DeviceImage {
        stream,
        width,
        height,
        channels,
        ..
    } = src;
    let (ow, oh) = downscaled_size(width, height, factor);
    if dst.len() < ow * oh * channels {
        return Err(OpError::InvalidParam(format!(
            "downscale buffers too small for {width}x{height}x{channels} by {factor}"
        )));
    }
    if ow == 0 || oh == 0 {
        return Ok((ow, oh));
    }
    // A frame smaller than one block is copied as it is (factor 1), as on the CPU.
    let f = if (ow, oh) == (width, height) {
        1
    } else {
        factor.max(1) as u32
    };
    let (w, ow32, oh32, c) = (width as u32, ow as u32, oh as u32, channels as u32);
    let mut b = stream.launch_builder(func);
    b.arg(src.data)
        .arg(dst)
        .arg(&w)
        .arg(&ow32)
        .arg(&oh32)
        .arg(&c)
        .arg(&f);
    // SAFETY: src holds width*height*channels bytes and dst ow*oh*channels (checked above);
    // output pixel (x, y) reads the block rows y*f.. and columns x*f.., inside the frame since
    // ow*f <= width and oh*f <= height; the kernel bounds-checks x < ow, y < oh.
    unsafe { b.launch(launch::grid2d(ow, oh, 32, 8)) }?;
    Ok((ow, oh))
}

/// Enqueues RGB→grey: `rgb` is packed RGB (3 bytes a pixel, rows `3 * width` bytes apart),
/// `gray` receives `width * height` bytes. (The ring's frame buffers are not yet
/// [`DeviceImage`]s, hence the plain buffers here.)
pub(crate) fn enqueue_rgb_to_gray(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    rgb: &CudaSlice<u8>,
    gray: &mut CudaSlice<u8>,
    width: usize,
    height: usize,
) -> Result<(), OpError> {
    launch::check_frame_size(width, height)?;
    if width == 0 || height == 0 {
        return Ok(());
    }
    if rgb.len() < 3 * width * height || gray.len() < width * height {
        return Err(OpError::InvalidParam(format!(
            "rgb_to_gray buffers too small for {width}x{height}"
        )));
    }
    let f = gpu.function("preprocess", "preprocess_rgb_to_gray")?;
    let (w, h, stride) = (width as u32, height as u32, (3 * width) as u32);
    let mut b = stream.launch_builder(&f);
    b.arg(rgb).arg(&stride).arg(gray).arg(&w).arg(&h);
    // SAFETY: `rgb` holds height rows of 3*width bytes and `gray` width*height bytes (checked
    // above); the kernel bounds-checks x < width, y < height.
    unsafe { b.launch(launch::grid2d(width, height, 32, 8)) }?;
    Ok(())
}

/// RGB→grey on the GPU for one image (upload, kernel, download): the CLI and parity tests.
pub fn rgb_to_gray_gpu(
    gpu: &GpuContext,
    img: ImageView<'_, [u8; 3]>,
) -> Result<Image<u8>, OpError> {
    let (w, h) = (img.width(), img.height());
    let mut gray: Option<CudaSlice<u8>> = None;
    let data = round_trip(
        &gpu.new_stream()?,
        img,
        &mut gray,
        |gray, _timer, rgb| {
            let mut out = launch::alloc_zeroed::<u8>(rgb.stream, w * h, "grey frame", w, h)?;
            enqueue_rgb_to_gray(gpu, rgb.stream, rgb.data, &mut out, w, h)?;
            *gray = Some(out);
            Ok(())
        },
        |gray, stream| -> Result<Vec<u8>, OpError> {
            let Some(gray) = gray.as_ref().filter(|_| w * h > 0) else {
                return Ok(Vec::new());
            };
            let v = stream.clone_dtoh(&gray.slice(0..w * h))?;
            stream.synchronize()?;
            Ok(v)
        },
    )?;
    Ok(Image::from_vec(w, h, data)?)
}

/// Mean, minimum and maximum grey level of a frame: the `preprocess` analysis' summary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrayStats {
    /// Mean grey level (0 for an empty frame).
    pub mean_gray: f64,
    /// Darkest level (255 for an empty frame).
    pub min_gray: u8,
    /// Brightest level (0 for an empty frame).
    pub max_gray: u8,
}

impl GrayStats {
    /// The statistics of the frame whose histogram is `bins`: the same values as a scan of its
    /// pixels (the sum of levels is exact in integers, divided by the pixel count once).
    #[must_use]
    pub fn from_histogram(bins: &[u64; GRAY_BINS]) -> Self {
        let pixels: u64 = bins.iter().sum();
        let sum: u64 = bins.iter().zip(0u64..).map(|(&c, v)| c * v).sum();
        let level = |i: usize| u8::try_from(i).unwrap_or(u8::MAX);
        Self {
            mean_gray: sum as f64 / pixels.max(1) as f64,
            min_gray: bins.iter().position(|&c| c > 0).map_or(u8::MAX, level),
            max_gray: bins.iter().rposition(|&c| c > 0).map_or(u8::MIN, level),
        }
    }

    /// The numbers for frames.jsonl: `mean_gray`, `min_gray`, `max_gray`.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({ "mean_gray": self.mean_gray, "min_gray": self.min_gray, "max_gray": self.max_gray })
    }
}

/// The grey-level histogram of `img` on the CPU (rows in parallel).
#[must_use]
pub fn gray_histogram(img: ImageView<'_, u8>) -> [u64; GRAY_BINS] {
    let rows: Vec<&[u8]> = img.rows().collect();
    rows.par_iter()
        .fold(
            || [0u64; GRAY_BINS],
            |mut bins, row| {
                for &v in *row {
                    bins[usize::from(v)] += 1;
                }
                bins
            },
        )
        .reduce(
            || [0u64; GRAY_BINS],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        )
}

/// The grey-level histogram on the GPU (`preprocess_histogram`): an enqueue per frame, then a
/// readback of the 256 bins (1 KiB) through a pinned buffer.
pub struct GrayHistogramGpu {
    func: CudaFunction,
    tuning: PreprocessTuning,
    bins: Option<CudaSlice<u32>>,
    readback: RefCell<Readback<u32>>,
    /// Whether the last enqueued frame had pixels (an empty frame's histogram is all zeros).
    counted: bool,
}

impl std::fmt::Debug for GrayHistogramGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrayHistogramGpu")
            .field("counted", &self.counted)
            .finish_non_exhaustive()
    }
}

impl GrayHistogramGpu {
    /// Resolves the kernel (the bins are allocated on the first frame), with the tuning's
    /// defaults for this device.
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Self::with_tuning(gpu, PreprocessTuning::for_device(gpu.info()))
    }

    /// Resolves the kernel, with `tuning` (checked: [`PreprocessTuning::validate`]).
    pub fn with_tuning(gpu: &GpuContext, tuning: PreprocessTuning) -> Result<Self, OpError> {
        tuning.validate()?;
        Ok(Self {
            func: gpu.function("preprocess", "preprocess_histogram")?,
            tuning,
            bins: None,
            readback: RefCell::new(Readback::new(gpu.cuda())),
            counted: false,
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &PreprocessTuning {
        &self.tuning
    }

    /// Enqueues the histogram of a packed grey image (timer region `preprocess_histogram`).
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
    ) -> Result<(), OpError> {
        input.check(1, "the grey histogram")?;
        let n = input.pixels();
        self.counted = n > 0;
        if n == 0 {
            return Ok(());
        }
        let stream = input.stream;
        if self.bins.is_none() {
            self.bins = Some(launch::alloc_zeroed::<u32>(
                stream,
                GRAY_BINS,
                "grey histogram",
                input.width,
                input.height,
            )?);
        }
        let Some(bins) = self.bins.as_mut() else {
            return Ok(());
        };
        let n32 = u32::try_from(n)
            .map_err(|_| OpError::Unsupported(format!("{n} pixels exceed 32 bits")))?;
        let t = self.tuning;
        let cfg = LaunchConfig {
            grid_dim: (
                launch::blocks_for(
                    n.div_ceil(4),
                    t.histogram_threads * t.histogram_words_per_thread,
                )
                .min(t.histogram_max_blocks),
                1,
                1,
            ),
            block_dim: (t.histogram_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let func = &self.func;
        timer.time(stream, "preprocess_histogram", || {
            stream.memset_zeros(&mut *bins)?;
            let mut b = stream.launch_builder(func);
            b.arg(input.data).arg(&n32).arg(&mut *bins);
            // SAFETY: `input` holds n bytes (checked above) and is a whole CudaSlice, so it
            // starts at an allocation's 256-byte aligned base (the kernel loads 4-byte words
            // below n); `bins` holds 256 counters.
            unsafe { b.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// The histogram of the last enqueued frame (blocks until the stream's work is done).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<[u64; GRAY_BINS], OpError> {
        let mut out = [0u64; GRAY_BINS];
        let Some(bins) = self.bins.as_ref().filter(|_| self.counted) else {
            return Ok(out);
        };
        let counts = self.readback.borrow_mut().fetch(stream, bins, GRAY_BINS)?;
        for (o, c) in out.iter_mut().zip(counts) {
            *o = u64::from(c);
        }
        Ok(out)
    }
}

/// The grey-level histogram of one image on the GPU (upload, kernel, readback): the parity tests.
pub fn gray_histogram_gpu(
    gpu: &GpuContext,
    img: ImageView<'_, u8>,
) -> Result<[u64; GRAY_BINS], OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut GrayHistogramGpu::new(gpu)?,
        |op, timer, input| op.enqueue(timer, input),
        |op, stream| op.download(stream),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, pixel by pixel: the rounded mean of each whole block.
    fn naive_downscale(data: &[u8], w: usize, h: usize, ch: usize, f: usize) -> Vec<u8> {
        if w < f || h < f {
            return data.to_vec();
        }
        let mut out = Vec::new();
        for y in 0..h / f {
            for x in 0..w / f {
                for c in 0..ch {
                    let block: Vec<u32> = (0..f * f)
                        .map(|i| u32::from(data[((y * f + i / f) * w + x * f + i % f) * ch + c]))
                        .collect();
                    let sum: u32 = block.iter().sum();
                    out.push(((f64::from(sum) / (f * f) as f64) + 0.5).floor() as u8);
                }
            }
        }
        out
    }

    #[test]
    fn downscale_is_the_rounded_block_mean() {
        let mut seed = 7u64;
        for &(w, h, ch, f) in &[
            (9, 7, 3, 2),
            (9, 7, 1, 3),
            (8, 8, 3, 1),
            (1, 5, 1, 2),
            (3, 3, 3, 4),
            (16, 9, 3, 4),
            (0, 4, 1, 2),
        ] {
            let data: Vec<u8> = (0..w * h * ch)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 56) as u8
                })
                .collect();
            let got = downscale_box(&data, w, h, ch, f);
            assert_eq!(
                got,
                naive_downscale(&data, w, h, ch, f),
                "{w}x{h}x{ch} by {f}"
            );
            let (ow, oh) = downscaled_size(w, h, f);
            assert_eq!(got.len(), ow * oh * ch);
        }
        // Halves round up: (1 + 2 + 2 + 2) / 4 = 1.75 -> 2, (0 + 0 + 1 + 1) / 4 = 0.5 -> 1.
        assert_eq!(downscale_box(&[1, 2, 2, 2], 2, 2, 1, 2), vec![2]);
        assert_eq!(downscale_box(&[0, 0, 1, 1], 2, 2, 1, 2), vec![1]);
    }

    /// The definition: a scan of every pixel, as the `preprocess` analysis computes it.
    fn scanned_stats(img: ImageView<'_, u8>) -> GrayStats {
        let (mut lo, mut hi, mut sum) = (u8::MAX, u8::MIN, 0u64);
        for row in img.rows() {
            for &v in row {
                lo = lo.min(v);
                hi = hi.max(v);
                sum += u64::from(v);
            }
        }
        GrayStats {
            mean_gray: sum as f64 / img.len().max(1) as f64,
            min_gray: lo,
            max_gray: hi,
        }
    }

    proptest::proptest! {
        #[test]
        fn histogram_counts_every_pixel_and_gives_the_scanned_stats(
            w in 0usize..40,
            h in 0usize..12,
            pad in 0usize..3,
            seed in proptest::prelude::any::<u64>(),
            levels in 1u64..=256,
        ) {
            let mut s = seed;
            let px: Vec<u8> = (0..(w + pad) * h)
                .map(|_| {
                    s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    ((s >> 33) % levels) as u8
                })
                .collect();
            let img = Image::from_strided(w, h, w + pad, px).unwrap();
            let bins = gray_histogram(img.view());
            for (v, &c) in bins.iter().enumerate() {
                let want = img.rows().flatten().filter(|&&p| usize::from(p) == v).count() as u64;
                proptest::prop_assert_eq!(c, want, "level {}", v);
            }
            proptest::prop_assert_eq!(GrayStats::from_histogram(&bins), scanned_stats(img.view()));
        }
    }

    #[test]
    fn stats_of_extreme_histograms() {
        let mut bins = [0u64; GRAY_BINS];
        assert_eq!(
            GrayStats::from_histogram(&bins),
            GrayStats {
                mean_gray: 0.0,
                min_gray: 255,
                max_gray: 0
            }
        );
        bins[0] = 3;
        bins[255] = 1;
        assert_eq!(
            GrayStats::from_histogram(&bins),
            GrayStats {
                mean_gray: 63.75,
                min_gray: 0,
                max_gray: 255
            }
        );
        let s = GrayStats::from_histogram(&bins).summary();
        assert_eq!(
            (
                s["mean_gray"].as_f64(),
                s["min_gray"].as_u64(),
                s["max_gray"].as_u64()
            ),
            (Some(63.75), Some(0), Some(255))
        );
    }

    #[test]
    fn gray_honours_stride_and_empty_sizes() {
        let px = vec![
            [255, 255, 255],
            [0, 0, 0],
            [9, 9, 9],
            [10, 200, 30],
            [1, 1, 1],
            [7, 7, 7],
        ];
        let img = Image::from_strided(2, 2, 3, px).unwrap();
        let g = rgb_to_gray(img.view());
        assert_eq!(g.data(), &[255, 0, 124, 1]);
        assert!(rgb_to_gray(Image::<[u8; 3]>::new(0, 3, [0; 3]).view()).is_empty());
        assert_eq!(
            gray16_to_gray8(
                Image::from_vec(2, 1, vec![0xffffu16, 0x1234])
                    .unwrap()
                    .view()
            )
            .data(),
            &[0xff, 0x12]
        );
    }
}
