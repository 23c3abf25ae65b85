//! Binarization on the CPU: histogram, Otsu's level, threshold with polarity, and the running
//! background of the motion source. The GPU kernels (`cca_hist`, `cca_otsu`, `cca_binarize`)
//! compute the same integers and the same IEEE double sequence, so thresholds and masks agree
//! exactly between backends.

use crate::image::{Gray, Image, ImageView};

use super::Polarity;

/// Histogram of an image with `2^BITS` bins (256 for u8, 65536 for u16).
#[must_use]
pub fn histogram<T: Gray>(img: ImageView<'_, T>) -> Vec<u64> {
    let mut h = vec![0u64; 1usize << T::BITS];
    for row in img.rows() {
        for &v in row {
            h[v.to_u32() as usize] += 1;
        }
    }
    h
}

/// Otsu's level from a histogram: the first level `t` maximising the between-class variance
/// `q1·q2·(mu1 - mu2)²` of the classes `<= t` and `> t`; levels where a class weight is under
/// `FLT_EPSILON` are skipped (as OpenCV). 0 for an empty or constant image.
///
/// Every quantity is a quotient of exact integers, evaluated in this exact order of IEEE double
/// operations (the GPU kernel `cca_otsu` uses `__d*_rn` intrinsics to match, without FMA).
#[must_use]
pub(crate) fn otsu_from_histogram(hist: &[u64]) -> u32 {
    let n: u64 = hist.iter().sum();
    if n == 0 {
        return 0;
    }
    let s: u64 = hist.iter().enumerate().map(|(i, &h)| i as u64 * h).sum();
    let nf = n as f64;
    let eps = f64::from(f32::EPSILON);
    let one_minus_eps = 1.0 - eps;
    let (mut w0, mut m0) = (0u64, 0u64);
    let (mut best, mut best_t) = (0.0f64, 0u32);
    for (i, &h) in hist.iter().enumerate() {
        w0 += h;
        m0 += i as u64 * h;
        let q1 = w0 as f64 / nf;
        let q2 = 1.0 - q1;
        if q1 < eps || q2 < eps || q1 > one_minus_eps || q2 > one_minus_eps {
            continue;
        }
        let mu1 = m0 as f64 / w0 as f64;
        let mu2 = (s - m0) as f64 / (n - w0) as f64;
        let d = mu1 - mu2;
        let sigma = q1 * q2 * d * d;
        if sigma > best {
            best = sigma;
            best_t = i as u32;
        }
    }
    best_t
}

/// Otsu's level of an image.
#[must_use]
pub fn otsu_threshold<T: Gray>(img: ImageView<'_, T>) -> u32 {
    otsu_from_histogram(&histogram(img))
}

/// Foreground test: `v > t` (bright) or `v <= t` (dark).
#[inline]
#[must_use]
pub(crate) fn is_foreground(v: u32, t: u32, polarity: Polarity) -> bool {
    match polarity {
        Polarity::Bright => v > t,
        Polarity::Dark => v <= t,
    }
}

/// A packed 0/255 mask of the foreground.
#[must_use]
pub fn binarize<T: Gray>(img: ImageView<'_, T>, t: u32, polarity: Polarity) -> Image<u8> {
    img.map(|v| {
        if is_foreground(v.to_u32(), t, polarity) {
            255
        } else {
            0
        }
    })
}

/// Running-average background in 16.16 fixed point (see the module docs of `cca`).
#[derive(Clone, Debug, Default)]
pub struct BackgroundModel {
    width: usize,
    height: usize,
    bg: Vec<i64>,
}

impl BackgroundModel {
    /// An unseeded model (the next frame seeds it).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the background; the next frame seeds it again.
    pub fn reset(&mut self) {
        self.bg.clear();
        self.width = 0;
        self.height = 0;
    }

    /// True once a frame of the current size has been seen.
    #[must_use]
    pub fn is_seeded(&self) -> bool {
        !self.bg.is_empty()
    }

    /// The background rounded to whole levels (for display).
    #[must_use]
    pub fn background<T: Gray>(&self) -> Image<T> {
        Image::from_fn(self.width, self.height, |x, y| {
            T::from_u32_sat(round_bg(self.bg[y * self.width + x]) as u32)
        })
    }

    /// Returns `|f - round(bg)|` (0 everywhere when the model was unseeded or the size changed,
    /// which seeds it), then updates `bg += ((f << 16) - bg) * a >> 16`, `a` in 1..=65536.
    pub(crate) fn difference_and_update<T: Gray>(
        &mut self,
        img: ImageView<'_, T>,
        a: u32,
    ) -> Image<T> {
        let (w, h) = (img.width(), img.height());
        if self.bg.len() != w * h || self.width != w || self.height != h || self.bg.is_empty() {
            self.width = w;
            self.height = h;
            self.bg = img
                .rows()
                .flat_map(|r| r.iter().map(|v| i64::from(v.to_u32()) << 16))
                .collect();
            return Image::new(w, h, T::MIN);
        }
        let a = i64::from(a.clamp(1, 65536));
        let mut out = Vec::with_capacity(w * h);
        for (y, row) in img.rows().enumerate() {
            let bg = &mut self.bg[y * w..(y + 1) * w];
            for (b, &v) in bg.iter_mut().zip(row) {
                let f = i64::from(v.to_u32());
                out.push(T::from_u32_sat((f - round_bg(*b)).unsigned_abs() as u32));
                *b += (((f << 16) - *b) * a) >> 16;
            }
        }
        Image::from_vec(w, h, out).unwrap_or_else(|_| Image::new(w, h, T::MIN))
    }
}

/// `round(bg / 65536)` for a non-negative 16.16 value.
#[inline]
fn round_bg(b: i64) -> i64 {
    (b + 32768) >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otsu_bimodal_and_degenerate() {
        let mut h = vec![0u64; 256];
        h[10] = 100;
        h[200] = 100;
        assert_eq!(otsu_from_histogram(&h), 10);
        assert_eq!(otsu_from_histogram(&vec![0; 256]), 0);
        let mut h = vec![0u64; 256];
        h[77] = 5;
        assert_eq!(otsu_from_histogram(&h), 0);
        let img = Image::from_fn(10, 10, |x, _| if x < 5 { 30u8 } else { 220 });
        let t = otsu_threshold(img.view());
        assert!((30..220).contains(&t));
        let m = binarize(img.view(), t, Polarity::Bright);
        assert_eq!(m.get(4, 0), 0);
        assert_eq!(m.get(5, 0), 255);
        let d = binarize(img.view(), t, Polarity::Dark);
        assert_eq!(d.get(4, 0), 255);
        let img16 = Image::from_fn(4, 1, |x, _| if x < 2 { 1000u16 } else { 60000 });
        assert_eq!(otsu_threshold(img16.view()), 1000);
    }

    #[test]
    fn background_seeds_then_follows() {
        let mut m = BackgroundModel::new();
        let f0 = Image::new(3, 2, 100u8);
        assert!(
            m.difference_and_update(f0.view(), 65536)
                .data()
                .iter()
                .all(|&v| v == 0)
        );
        let f1 = Image::new(3, 2, 180u8);
        // Difference against the seed, then full replacement (a = 1.0).
        assert!(
            m.difference_and_update(f1.view(), 65536)
                .data()
                .iter()
                .all(|&v| v == 80)
        );
        assert!(m.background::<u8>().data().iter().all(|&v| v == 180));
        // Slow learning: the background creeps towards the frame and stays in range.
        let f2 = Image::new(3, 2, 0u8);
        for _ in 0..200 {
            m.difference_and_update(f2.view(), 3277);
        }
        assert!(m.background::<u8>().data().iter().all(|&v| v <= 1));
        // A size change reseeds.
        let f3 = Image::new(2, 2, 7u8);
        assert!(
            m.difference_and_update(f3.view(), 3277)
                .data()
                .iter()
                .all(|&v| v == 0)
        );
    }
}
