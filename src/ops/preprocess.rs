//! Pre-processing shared by the analyses: colour to grey (BT.601, OpenCV's fixed-point rounding)
//! and 16 to 8 bits, on the CPU (rayon over rows) and the GPU (`kernels/preprocess.cu`).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};
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
