//! CPU Gaussian blur: two separable passes over a packed, channel-interleaved buffer, in `f64`
//! (scikit-image's arithmetic) or `f32` (the CUDA kernels' arithmetic), rows in parallel.
//!
//! Layout: `width * channels` samples per row; the vertical pass treats the row as one line
//! of samples (channels never mix), the horizontal pass reflects pixel columns and keeps the
//! channel. See the module docs of [`super`] for the summation order.

use std::ops::{Add, Mul};

use rayon::prelude::*;

use super::{BlurParams, reflect_index};
use crate::image::{Image, ImageView};
use crate::ops::OpError;

/// Float types the blur computes in.
pub(crate) trait BlurFloat:
    Copy + Send + Sync + Default + Add<Output = Self> + Mul<Output = Self> + 'static
{
    /// `v * (1/255)` in this type (scikit-image's `img_as_float` of a `u8`).
    fn from_u8_scaled(v: u8) -> Self;
    /// Rounds an `f64` weight to this type.
    fn from_f64(w: f64) -> Self;
}

/// `1/255` rounded to `f32` once (the CUDA kernels receive this value as an argument).
pub(crate) const INV255_F32: f32 = 1.0f32 / 255.0f32;

impl BlurFloat for f32 {
    #[inline]
    fn from_u8_scaled(v: u8) -> Self {
        f32::from(v) * INV255_F32
    }
    #[inline]
    fn from_f64(w: f64) -> Self {
        w as f32
    }
}

impl BlurFloat for f64 {
    #[inline]
    fn from_u8_scaled(v: u8) -> Self {
        f64::from(v) * (1.0 / 255.0)
    }
    #[inline]
    fn from_f64(w: f64) -> Self {
        w
    }
}

/// Blurs a packed interleaved image (`width * height * channels` bytes) and returns the
/// smoothed samples in the same layout, values in `[0, 1]`.
pub(crate) fn blur_interleaved<F: BlurFloat>(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &BlurParams,
) -> Result<Vec<F>, OpError> {
    params.validate()?;
    let row = width * channels;
    let n = row * height;
    if data.len() < n {
        return Err(OpError::Unsupported(format!(
            "buffer of {} bytes for {width}x{height}x{channels}",
            data.len()
        )));
    }
    let data = &data[..n];
    if n == 0 {
        return Ok(Vec::new());
    }
    if params.is_identity() {
        return Ok(data.par_iter().map(|&v| F::from_u8_scaled(v)).collect());
    }
    let half: Vec<F> = params
        .half_kernel_f64()
        .into_iter()
        .map(F::from_f64)
        .collect();
    let r = half.len() - 1;
    let mut tmp = vec![F::default(); n];
    // Axis 0 (vertical): sample e of row y from rows reflect(y -+ j).
    tmp.par_chunks_mut(row).enumerate().for_each(|(y, out)| {
        let yi = y as i64;
        let lines: Vec<(&[u8], &[u8])> = (1..=r)
            .map(|j| {
                let a = reflect_index(yi - j as i64, height) * row;
                let b = reflect_index(yi + j as i64, height) * row;
                (&data[a..a + row], &data[b..b + row])
            })
            .collect();
        let centre = &data[y * row..(y + 1) * row];
        for (e, o) in out.iter_mut().enumerate() {
            let mut t = F::from_u8_scaled(centre[e]) * half[0];
            for j in (1..=r).rev() {
                let (a, b) = lines[j - 1];
                t = t + (F::from_u8_scaled(a[e]) + F::from_u8_scaled(b[e])) * half[j];
            }
            *o = t;
        }
    });
    // Axis 1 (horizontal): pixel x of the row from columns reflect(x -+ j), same channel.
    let mut out = vec![F::default(); n];
    out.par_chunks_mut(row)
        .zip(tmp.par_chunks(row))
        .for_each(|(o, t)| {
            for x in 0..width {
                let xi = x as i64;
                for c in 0..channels {
                    let mut s = t[x * channels + c] * half[0];
                    for j in (1..=r).rev() {
                        let a = reflect_index(xi - j as i64, width) * channels + c;
                        let b = reflect_index(xi + j as i64, width) * channels + c;
                        s = s + (t[a] + t[b]) * half[j];
                    }
                    o[x * channels + c] = s;
                }
            }
        });
    Ok(out)
}

/// scikit-image's smoothing in `f64` (bit-identical to `gaussian(img_as_float64(img), ...)` for
/// the sigmas where NumPy's and libm's `exp` agree), packed interleaved in and out.
pub fn blur_f64(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &BlurParams,
) -> Result<Vec<f64>, OpError> {
    blur_interleaved::<f64>(data, width, height, channels, params)
}

/// Packs a grey view into a contiguous buffer (copies only the visible pixels).
#[must_use]
pub fn pack_gray(img: ImageView<'_, u8>) -> Vec<u8> {
    img.rows().flat_map(|r| r.iter().copied()).collect()
}

/// Packs an RGB view into an interleaved byte buffer.
#[must_use]
pub fn pack_rgb(img: ImageView<'_, [u8; 3]>) -> Vec<u8> {
    img.rows()
        .flat_map(|r| r.iter().flat_map(|p| p.iter().copied()))
        .collect()
}

/// Gaussian blur of a grey image to `f32` in `[0, 1]` (the CUDA kernels' arithmetic).
pub fn blur_gray(img: ImageView<'_, u8>, params: &BlurParams) -> Result<Image<f32>, OpError> {
    let v = blur_interleaved::<f32>(&pack_gray(img), img.width(), img.height(), 1, params)?;
    Ok(Image::from_vec(img.width(), img.height(), v)?)
}

/// Gaussian blur of an RGB image, each channel on its own, to `f32` in `[0, 1]`.
pub fn blur_rgb(
    img: ImageView<'_, [u8; 3]>,
    params: &BlurParams,
) -> Result<Image<[f32; 3]>, OpError> {
    let v = blur_interleaved::<f32>(&pack_rgb(img), img.width(), img.height(), 3, params)?;
    let px: Vec<[f32; 3]> = v.as_chunks::<3>().0.to_vec();
    Ok(Image::from_vec(img.width(), img.height(), px)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct 2-D definition: sum over the (2r+1)² window of w[dy] * w[dx] * v(reflect).
    fn direct(data: &[u8], w: usize, h: usize, sigma: f64) -> Vec<f64> {
        let k = BlurParams::with_sigma(sigma).kernel_f64();
        let r = (k.len() / 2) as i64;
        let mut out = vec![0.0; w * h];
        for y in 0..h {
            for x in 0..w {
                let mut s = 0.0;
                for dy in -r..=r {
                    for dx in -r..=r {
                        let yy = reflect_index(y as i64 + dy, h);
                        let xx = reflect_index(x as i64 + dx, w);
                        s += k[(dy + r) as usize]
                            * k[(dx + r) as usize]
                            * f64::from(data[yy * w + xx])
                            / 255.0;
                    }
                }
                out[y * w + x] = s;
            }
        }
        out
    }

    #[test]
    fn matches_the_2d_definition() {
        let (w, h) = (7, 5);
        let data: Vec<u8> = (0..w * h).map(|i| ((i * 37 + 11) % 256) as u8).collect();
        for sigma in [0.5, 0.8, 2.0, 5.0] {
            let a = blur_f64(&data, w, h, 1, &BlurParams::with_sigma(sigma)).unwrap();
            let b = direct(&data, w, h, sigma);
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-12, "sigma {sigma}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn constant_image_stays_constant_and_sigma_zero_is_identity() {
        let data = vec![200u8; 4 * 3];
        let a = blur_f64(&data, 4, 3, 1, &BlurParams::with_sigma(1.3)).unwrap();
        assert!(a.iter().all(|v| (v - 200.0 / 255.0).abs() < 1e-12));
        let id = blur_f64(&[0, 255, 51], 3, 1, 1, &BlurParams::with_sigma(0.0)).unwrap();
        assert_eq!(id, vec![0.0, 1.0, 51.0 * (1.0 / 255.0)]);
    }

    #[test]
    fn channels_do_not_mix_and_strides_are_honoured() {
        let rgb = Image::from_fn(5, 4, |x, y| [(x * 50) as u8, (y * 60) as u8, 7]);
        let out = blur_rgb(rgb.view(), &BlurParams::with_sigma(1.0)).unwrap();
        for y in 0..4 {
            for x in 0..5 {
                assert!((out.get(x, y)[2] - 7.0 * INV255_F32).abs() < 1e-6);
            }
        }
        // Channel 0 only varies along x, channel 1 only along y.
        assert_eq!(out.get(2, 0)[0], out.get(2, 3)[0]);
        assert_eq!(out.get(0, 1)[1], out.get(4, 1)[1]);
        let strided = Image::from_strided(3, 2, 5, vec![1u8, 2, 3, 99, 99, 4, 5, 6]).unwrap();
        let a = blur_gray(strided.view(), &BlurParams::default()).unwrap();
        let b = blur_gray(strided.to_packed().view(), &BlurParams::default()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn f32_is_close_to_f64_and_empty_is_fine() {
        let data: Vec<u8> = (0..64 * 3).map(|i| ((i * 91) % 256) as u8).collect();
        let p = BlurParams::with_sigma(1.7);
        let a = blur_interleaved::<f32>(&data, 8, 8, 3, &p).unwrap();
        let b = blur_f64(&data, 8, 8, 3, &p).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!((f64::from(*x) - y).abs() < 1e-6);
        }
        assert!(
            blur_gray(Image::<u8>::new(0, 3, 0).view(), &p)
                .unwrap()
                .is_empty()
        );
        assert!(
            (blur_gray(Image::new(1, 1, 255u8).view(), &p)
                .unwrap()
                .get(0, 0)
                - 1.0)
                .abs()
                < 1e-6
        );
    }
}
