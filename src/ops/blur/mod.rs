//! Gaussian blur as scikit-image's `felzenszwalb` applies it: the shared smoothing step of
//! graph-based segmentation (and any other op that wants a smoothed float image).
//!
//! # Definition (scikit-image 0.26 / SciPy)
//! `felzenszwalb` converts the image with `img_as_float64` (`v = u8 * (1/255)`, so values are in
//! `[0, 1]`) and calls `gaussian(image, sigma=[sigma, sigma, 0], mode='reflect',
//! channel_axis=-1)`, which is `scipy.ndimage.gaussian_filter` with `truncate = 4`:
//! - the kernel has radius `r = int(truncate * sigma + 0.5)` and weights
//!   `phi(x) = exp(-0.5 / sigma² * x²)`, `x = -r..=r`, divided by their sum (NumPy's pairwise
//!   summation order) — `BlurParams::kernel_f64`;
//! - it is separable: first along rows' direction of axis 0 (vertical), then axis 1
//!   (horizontal), each channel on its own (never across channels);
//! - borders use SciPy's `reflect` mode (half-sample symmetric: `d c b a | a b c d | d c b a`),
//!   repeated for kernels longer than the line;
//! - SciPy's symmetric 1-D correlation sums `out = x[0]*w[0]`, then adds
//!   `(x[-j] + x[+j]) * w[j]` for `j = r, r-1, .., 1` (outermost pair first).
//!
//! [`cpu::blur_f64`] follows that arithmetic in `f64` operation by operation; on the sample
//! images it is bit-identical to SciPy (NumPy's SIMD `exp` can differ from libm's by one ulp for
//! some sigmas — 0.95, 1.5, … but not 0.5, 0.8, 1.0 — which moves the smoothed values by ~1e-16).
//!
//! The public blur of this op returns `f32` ([`cpu::blur_gray`], [`cpu::blur_rgb`]): the same
//! sums in `f32` with the weights rounded to `f32`, in the exact operation order of the CUDA
//! kernels (`kernels/blur.cu`, no fused multiply-add), so CPU and GPU agree bit for bit. The
//! GPU also has the `f64` path ([`gpu::BlurGpu::enqueue_f64_named`], bit-identical to
//! [`cpu::blur_f64`]), which the segmentation uses.
//! `sigma = 0` (SciPy skips axes with `sigma <= 1e-15`) returns the converted input.

pub mod cpu;
pub mod gpu;

use serde::{Deserialize, Serialize};

use crate::ops::OpError;

pub use cpu::{blur_f64, blur_gray, blur_rgb};
pub use gpu::BlurGpu;

/// The largest kernel radius the CUDA kernels accept (`int(truncate * sigma + 0.5)`).
pub(crate) const MAX_RADIUS: usize = 127;

/// Gaussian blur parameters (scikit-image / SciPy names).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlurParams {
    /// Standard deviation in pixels (`0` = no smoothing).
    pub sigma: f64,
    /// Truncate the kernel at this many standard deviations (SciPy's default 4).
    pub truncate: f64,
}

impl Default for BlurParams {
    fn default() -> Self {
        Self {
            sigma: 0.8,
            truncate: 4.0,
        }
    }
}

impl BlurParams {
    /// Parameters with `sigma` and the default truncation.
    #[must_use]
    pub fn with_sigma(sigma: f64) -> Self {
        Self {
            sigma,
            ..Self::default()
        }
    }

    /// Checks the ranges: `sigma` finite and `>= 0`, `truncate` finite and `> 0`, radius at most
    /// `MAX_RADIUS`.
    pub fn validate(&self) -> Result<(), OpError> {
        if !self.sigma.is_finite() || self.sigma < 0.0 {
            return Err(OpError::InvalidParam(format!(
                "sigma must be a finite number >= 0, got {:?}",
                self.sigma
            )));
        }
        if !self.truncate.is_finite() || self.truncate <= 0.0 {
            return Err(OpError::InvalidParam(format!(
                "truncate must be a finite number > 0, got {:?}",
                self.truncate
            )));
        }
        if self.radius() > MAX_RADIUS {
            return Err(OpError::InvalidParam(format!(
                "sigma {} with truncate {} gives a kernel radius {} > {MAX_RADIUS}",
                self.sigma,
                self.truncate,
                self.radius()
            )));
        }
        Ok(())
    }

    /// True when SciPy would skip the filter (`sigma <= 1e-15`).
    #[must_use]
    pub(crate) fn is_identity(&self) -> bool {
        self.sigma <= 1e-15
    }

    /// Kernel radius `int(truncate * sigma + 0.5)` (0 for the identity).
    #[must_use]
    pub fn radius(&self) -> usize {
        if self.is_identity() {
            0
        } else {
            // Truncation toward zero, as Python's int(); the value is >= 0.5 here.
            (self.truncate * self.sigma + 0.5) as usize
        }
    }

    /// The normalised kernel `w[0..=2r]` exactly as SciPy's `_gaussian_kernel1d` computes it
    /// (libm `exp`; NumPy's pairwise sum). `[1.0]` for the identity.
    #[must_use]
    pub(crate) fn kernel_f64(&self) -> Vec<f64> {
        if self.is_identity() {
            return vec![1.0];
        }
        let r = self.radius() as i64;
        let c = -0.5 / (self.sigma * self.sigma);
        let phi: Vec<f64> = (-r..=r).map(|x| (c * (x * x) as f64).exp()).collect();
        let s = numpy_pairwise_sum(&phi);
        phi.iter().map(|p| p / s).collect()
    }

    /// The half kernel `w[j]`, `j = 0..=r` (centre first), rounded to `f32`: what the `f32`
    /// blur and the CUDA kernels use.
    #[must_use]
    pub(crate) fn half_kernel_f32(&self) -> Vec<f32> {
        let k = self.kernel_f64();
        let r = k.len() / 2;
        k[r..].iter().map(|&w| w as f32).collect()
    }

    /// The half kernel in `f64`, centre first.
    #[must_use]
    pub(crate) fn half_kernel_f64(&self) -> Vec<f64> {
        let k = self.kernel_f64();
        let r = k.len() / 2;
        k[r..].to_vec()
    }
}

/// NumPy's `pairwise_sum` for a contiguous float64 array of at most 128 elements (8
/// accumulators, combined as `((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`, then the remainder);
/// longer arrays are split in halves at a multiple of 8, as NumPy does.
fn numpy_pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut r = -0.0;
        for &v in a {
            r += v;
        }
        r
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let n2 = (n / 2) - (n / 2) % 8;
        numpy_pairwise_sum(&a[..n2]) + numpy_pairwise_sum(&a[n2..])
    }
}

/// SciPy's `reflect` extension: index `i` (any integer) of a line of `n > 0` samples.
#[inline]
#[must_use]
pub(crate) fn reflect_index(i: i64, n: usize) -> usize {
    let n = n as i64;
    let p = 2 * n;
    let m = i.rem_euclid(p);
    (if m < n { m } else { p - 1 - m }) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_matches_scipy_values() {
        // scipy.ndimage._filters._gaussian_kernel1d(0.8, 0, 3) (printed with repr()).
        let k = BlurParams::with_sigma(0.8).kernel_f64();
        assert_eq!(k.len(), 7);
        let expect: [f64; 7] = [
            0.000_440_743_366_932_356_74,
            0.021_910_314_171_364_808,
            0.228_310_716_458_465_48,
            0.498_676_452_006_474_87,
            0.228_310_716_458_465_48,
            0.021_910_314_171_364_808,
            0.000_440_743_366_932_356_74,
        ];
        for (a, b) in k.iter().zip(expect) {
            assert_eq!(a.to_bits(), b.to_bits(), "{a} vs {b}");
        }
        assert_eq!(BlurParams::with_sigma(0.0).kernel_f64(), vec![1.0]);
        assert_eq!(BlurParams::with_sigma(2.0).radius(), 8);
        assert_eq!(BlurParams::with_sigma(0.1).radius(), 0);
    }

    #[test]
    fn reflect_is_half_sample_symmetric() {
        let v: Vec<usize> = (-5..9).map(|i| reflect_index(i, 4)).collect();
        assert_eq!(v, vec![3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0]);
        assert_eq!(reflect_index(-3, 1), 0);
    }

    #[test]
    fn validation_names_the_field() {
        let e = BlurParams {
            sigma: -1.0,
            ..BlurParams::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("sigma"));
        let e = BlurParams {
            sigma: 100.0,
            ..BlurParams::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("radius"));
        assert!(BlurParams::default().validate().is_ok());
    }

    #[test]
    fn pairwise_sum_order() {
        let a: Vec<f64> = (0..13).map(|i| 0.1 * f64::from(i)).collect();
        let mut r = [0.0; 8];
        r.copy_from_slice(&a[..8]);
        let expect = ((r[0] + r[1]) + (r[2] + r[3]))
            + ((r[4] + r[5]) + (r[6] + r[7]))
            + a[8]
            + a[9]
            + a[10]
            + a[11]
            + a[12];
        assert_eq!(numpy_pairwise_sum(&a).to_bits(), expect.to_bits());
    }
}
