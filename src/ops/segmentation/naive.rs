//! The brute-force reference definition of Felzenszwalb segmentation (scikit-image's loop,
//! written as plainly as possible): an explicit edge list built pixel by pixel, a stable sort
//! by weight (ties keep list order), Kruskal over a label array that is rewritten on every
//! union (no union-find), the `min_size` pass, and raster-order numbering. Quadratic: for tests
//! on small images only.

use super::SegmentationParams;
use super::cpu::threshold_f32;
use crate::ops::OpError;
use crate::ops::blur::cpu::blur_f64;

/// One graph edge: endpoints and weight.
#[derive(Clone, Copy, Debug)]
pub struct Edge {
    /// First pixel (row-major index).
    pub a: usize,
    /// Second pixel.
    pub b: usize,
    /// Euclidean distance of the smoothed colours.
    pub w: f64,
}

/// The 8-connected edge list of a smoothed interleaved image, in scikit-image's order.
#[must_use]
pub fn edges(s: &[f64], width: usize, height: usize, channels: usize) -> Vec<Edge> {
    let dist = |a: usize, b: usize| -> f64 {
        let mut acc = 0.0;
        for c in 0..channels {
            let d = s[a * channels + c] - s[b * channels + c];
            acc = if c == 0 { d * d } else { acc + d * d };
        }
        acc.sqrt()
    };
    let at = |x: usize, y: usize| y * width + x;
    let mut e = Vec::new();
    let mut push = |a: usize, b: usize| {
        e.push(Edge {
            a,
            b,
            w: dist(a, b),
        })
    };
    for y in 0..height {
        for x in 0..width.saturating_sub(1) {
            push(at(x + 1, y), at(x, y));
        }
    }
    for y in 0..height.saturating_sub(1) {
        for x in 0..width {
            push(at(x, y + 1), at(x, y));
        }
    }
    for y in 0..height.saturating_sub(1) {
        for x in 0..width.saturating_sub(1) {
            push(at(x + 1, y + 1), at(x, y));
        }
    }
    for y in 0..height.saturating_sub(1) {
        for x in 0..width.saturating_sub(1) {
            push(at(x + 1, y), at(x, y + 1));
        }
    }
    e
}

/// Felzenszwalb labels (raster order) of a packed interleaved image by the plain definition.
pub fn felzenszwalb_naive(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentationParams,
) -> Result<(Vec<u32>, usize), OpError> {
    params.validate()?;
    let n = width * height;
    let s = blur_f64(data, width, height, channels, &params.blur())?;
    let mut e = edges(&s, width, height, channels);
    e.sort_by(|x, y| x.w.total_cmp(&y.w));
    let k = params.scale / 255.0;
    let mut label: Vec<usize> = (0..n).collect();
    let mut size = vec![1usize; n];
    let mut cint = vec![0.0f64; n];
    let join = |label: &mut Vec<usize>, size: &mut Vec<usize>, from: usize, to: usize| {
        for l in label.iter_mut() {
            if *l == from {
                *l = to;
            }
        }
        size[to] += size[from];
    };
    for ed in &e {
        let (c0, c1) = (label[ed.a], label[ed.b]);
        if c0 == c1 {
            continue;
        }
        let t0 = threshold_f32(cint[c0], k, size[c0]);
        let t1 = threshold_f32(cint[c1], k, size[c1]);
        if ed.w < f64::from(t0.min(t1)) {
            join(&mut label, &mut size, c1, c0);
            cint[c0] = ed.w;
        }
    }
    for ed in &e {
        let (c0, c1) = (label[ed.a], label[ed.b]);
        if c0 != c1 && (size[c0] < params.min_size || size[c1] < params.min_size) {
            join(&mut label, &mut size, c1, c0);
        }
    }
    let mut first = vec![u32::MAX; n];
    let mut next = 0u32;
    let out = label
        .iter()
        .map(|&c| {
            if first[c] == u32::MAX {
                first[c] = next;
                next += 1;
            }
            first[c]
        })
        .collect();
    Ok((out, next as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkerboard_with_scale_zero_stays_apart() {
        let data: Vec<u8> = (0..16)
            .map(|i| if (i + i / 4) % 2 == 0 { 0 } else { 255 })
            .collect();
        let p = SegmentationParams {
            scale: 0.0,
            sigma: 0.0,
            min_size: 0,
            ..SegmentationParams::default()
        };
        let (l, n) = felzenszwalb_naive(&data, 4, 4, 1, &p).unwrap();
        assert_eq!(n, 16);
        assert_eq!(l[15], 15);
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;
    use crate::ops::segmentation::cpu::felzenszwalb_interleaved;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The fast CPU path (union-find, parallel sort by (weight, index)) equals the definition,
        /// ties included (few grey levels make many equal weights).
        #[test]
        fn fast_equals_naive(
            w in 1usize..14, h in 1usize..14, channels in prop::sample::select(vec![1usize, 3]),
            levels in 2u32..6, seed in any::<u64>(),
            scale in prop::sample::select(vec![0.0, 1.0, 30.0, 300.0, 3000.0]),
            sigma in prop::sample::select(vec![0.0, 0.5, 0.8]), min_size in 0usize..12,
        ) {
            let mut st = seed;
            let data: Vec<u8> = (0..w * h * channels).map(|_| {
                st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (((st >> 33) as u32 % levels) * 255 / (levels - 1)) as u8
            }).collect();
            let p = SegmentationParams { scale, sigma, min_size, ..SegmentationParams::default() };
            let fast = felzenszwalb_interleaved(&data, w, h, channels, &p).unwrap();
            let (l, n) = felzenszwalb_naive(&data, w, h, channels, &p).unwrap();
            prop_assert_eq!(fast.labels.data(), &l[..]);
            prop_assert_eq!(fast.segment_count, n);
        }
    }
}
