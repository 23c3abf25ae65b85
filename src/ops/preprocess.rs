//! Pre-processing shared by the analyses: colour to grey (BT.601, OpenCV's fixed-point rounding),
//! 16 to 8 bits, and box downscaling by an integer factor (what `segmentation.downscale` runs
//! on), on the CPU (rayon over rows) and the GPU (`kernels/preprocess.cu`), bit-identical.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use rayon::prelude::*;

use crate::gpu::{GpuContext, launch};
use crate::image::{Image, ImageView, rgb_to_gray_pixel};
use crate::ops::OpError;

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
    if width < f || height < f { (width, height) } else { (width / f, height / f) }
}

/// Box average of `factor` x `factor` blocks of packed interleaved 8-bit samples (`channels`
/// per pixel), `(sum + n/2) / n` per channel; trailing columns and rows that do not fill a
/// block are left out ([`downscaled_size`]). Factor 1, or a frame smaller than one block,
/// returns the input unchanged.
#[must_use]
pub fn downscale_box(data: &[u8], width: usize, height: usize, channels: usize, factor: usize) -> Vec<u8> {
    let (ow, oh) = downscaled_size(width, height, factor);
    if (ow, oh) == (width, height) || channels == 0 || data.len() < width * height * channels {
        return data.to_vec();
    }
    let f = factor;
    let n = (f * f) as u32;
    let mut out = vec![0u8; ow * oh * channels];
    out.par_chunks_mut(ow * channels).enumerate().for_each(|(y, row)| {
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

/// Enqueues [`downscale_box`] of `src` (packed, `channels` samples a pixel) into `dst`, which
/// must hold `downscaled_size(..)` pixels, with `func` from [`downscale_function`]. Returns
/// that size (the caller segments it).
#[allow(clippy::too_many_arguments)]
pub fn enqueue_downscale(
    func: &CudaFunction,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<u8>,
    dst: &mut CudaSlice<u8>,
    width: usize,
    height: usize,
    channels: usize,
    factor: usize,
) -> Result<(usize, usize), OpError> {
    let (ow, oh) = downscaled_size(width, height, factor);
    launch::check_frame_size(width * channels, height)?;
    if src.len() < width * height * channels || dst.len() < ow * oh * channels {
        return Err(OpError::InvalidParam(format!(
            "downscale buffers too small for {width}x{height}x{channels} by {factor}"
        )));
    }
    if ow == 0 || oh == 0 {
        return Ok((ow, oh));
    }
    // A frame smaller than one block is copied as it is (factor 1), as on the CPU.
    let f = if (ow, oh) == (width, height) { 1 } else { factor.max(1) as u32 };
    let (w, ow32, oh32, c) = (width as u32, ow as u32, oh as u32, channels as u32);
    let mut b = stream.launch_builder(func);
    b.arg(src).arg(dst).arg(&w).arg(&ow32).arg(&oh32).arg(&c).arg(&f);
    // SAFETY: src holds width*height*channels bytes and dst ow*oh*channels (checked above);
    // output pixel (x, y) reads the block rows y*f.. and columns x*f.., inside the frame since
    // ow*f <= width and oh*f <= height; the kernel bounds-checks x < ow, y < oh.
    unsafe { b.launch(launch::grid2d(ow, oh, 32, 8)) }?;
    Ok((ow, oh))
}

/// Enqueues RGB→grey: `rgb` is packed RGB (3 bytes a pixel, rows `3 * width` bytes apart),
/// `gray` receives `width * height` bytes.
pub fn enqueue_rgb_to_gray(
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
    let f = gpu.function("preprocess", "preprocess_rgb_to_gray")?;
    let (w, h, stride) = (width as u32, height as u32, (3 * width) as u32);
    let mut b = stream.launch_builder(&f);
    b.arg(rgb).arg(&stride).arg(gray).arg(&w).arg(&h);
    // SAFETY: `rgb` holds height rows of 3*width bytes and `gray` width*height bytes (callers
    // allocate them for this frame size); the kernel bounds-checks x < width, y < height.
    unsafe { b.launch(launch::grid2d(width, height, 32, 8)) }?;
    Ok(())
}

/// RGB→grey on the GPU for one image (upload, kernel, download): the CLI and parity tests.
pub fn rgb_to_gray_gpu(gpu: &GpuContext, img: ImageView<'_, [u8; 3]>) -> Result<Image<u8>, OpError> {
    let (w, h) = (img.width(), img.height());
    if w == 0 || h == 0 {
        return Ok(Image::new(w, h, 0));
    }
    let stream = gpu.new_stream()?;
    let bytes: Vec<u8> = img.rows().flat_map(|r| r.iter().flat_map(|p| p.iter().copied())).collect();
    let d_rgb = launch::upload_packed(&stream, &bytes, w, h)?;
    let mut d_gray = launch::alloc_zeroed::<u8>(&stream, w * h, "grey frame", w, h)?;
    enqueue_rgb_to_gray(gpu, &stream, &d_rgb, &mut d_gray, w, h)?;
    let out = stream.clone_dtoh(&d_gray)?;
    stream.synchronize()?;
    Ok(Image::from_vec(w, h, out)?)
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
                    let block: Vec<u32> = (0..f * f).map(|i| u32::from(data[((y * f + i / f) * w + x * f + i % f) * ch + c])).collect();
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
        for &(w, h, ch, f) in &[(9, 7, 3, 2), (9, 7, 1, 3), (8, 8, 3, 1), (1, 5, 1, 2), (3, 3, 3, 4), (16, 9, 3, 4), (0, 4, 1, 2)] {
            let data: Vec<u8> = (0..w * h * ch)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 56) as u8
                })
                .collect();
            let got = downscale_box(&data, w, h, ch, f);
            assert_eq!(got, naive_downscale(&data, w, h, ch, f), "{w}x{h}x{ch} by {f}");
            let (ow, oh) = downscaled_size(w, h, f);
            assert_eq!(got.len(), ow * oh * ch);
        }
        // Halves round up: (1 + 2 + 2 + 2) / 4 = 1.75 -> 2, (0 + 0 + 1 + 1) / 4 = 0.5 -> 1.
        assert_eq!(downscale_box(&[1, 2, 2, 2], 2, 2, 1, 2), vec![2]);
        assert_eq!(downscale_box(&[0, 0, 1, 1], 2, 2, 1, 2), vec![1]);
    }

    #[test]
    fn gray_honours_stride_and_empty_sizes() {
        let px = vec![[255, 255, 255], [0, 0, 0], [9, 9, 9], [10, 200, 30], [1, 1, 1], [7, 7, 7]];
        let img = Image::from_strided(2, 2, 3, px).unwrap();
        let g = rgb_to_gray(img.view());
        assert_eq!(g.data(), &[255, 0, 124, 1]);
        assert!(rgb_to_gray(Image::<[u8; 3]>::new(0, 3, [0; 3]).view()).is_empty());
        assert_eq!(gray16_to_gray8(Image::from_vec(2, 1, vec![0xffffu16, 0x1234]).unwrap().view()).data(), &[0xff, 0x12]);
    }
}
