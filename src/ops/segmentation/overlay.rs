//! Drawing a segmentation: each segment filled with its mean colour or a random colour
//! (stable per label), optionally with 1-pixel boundaries (a pixel whose right or lower
//! neighbour has another label).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::raster_relabel;
use crate::image::{Image, ImageError, ImageView};
use crate::ops::OpError;

/// How segments are filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlayMode {
    /// The mean colour of the segment's pixels in the input image.
    #[default]
    Mean,
    /// A pseudo-random colour derived from the label.
    Random,
}

/// A pseudo-random, fairly bright colour for `label` (SplitMix64 of the label).
#[must_use]
pub(crate) fn label_colour(label: u32) -> [u8; 3] {
    let mut z = u64::from(label).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    [
        (z & 0xff) as u8 | 0x30,
        ((z >> 8) & 0xff) as u8 | 0x30,
        ((z >> 16) & 0xff) as u8 | 0x30,
    ]
}

fn same_size<A: Copy, B: Copy>(a: &ImageView<'_, A>, b: &ImageView<'_, B>) -> Result<(), OpError> {
    if a.width() != b.width() || a.height() != b.height() {
        return Err(OpError::Image(ImageError::SizeMismatch {
            a_width: a.width(),
            a_height: a.height(),
            b_width: b.width(),
            b_height: b.height(),
        }));
    }
    Ok(())
}

/// Segments of an RGB image drawn as mean or random colours, with boundaries in `boundary`.
/// `labels` may be any values (they are renumbered for the tables).
pub fn overlay_rgb(
    img: ImageView<'_, [u8; 3]>,
    labels: ImageView<'_, u32>,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    overlay_with(img, |p| *p, labels, None, mode, boundary)
}

/// Segments of a grey image drawn as mean grey or random colours, with boundaries.
pub fn overlay_gray(
    img: ImageView<'_, u8>,
    labels: ImageView<'_, u32>,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    overlay_with(img, |&v| [v, v, v], labels, None, mode, boundary)
}

/// [`overlay_rgb`] of a segmentation's own labels, which are already `0..segment_count` in
/// raster order: no renumbering pass (the pipeline's per-frame path).
pub fn overlay_segments_rgb(
    img: ImageView<'_, [u8; 3]>,
    seg: &super::SegmentationOutput,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    overlay_with(
        img,
        |p| *p,
        seg.labels.view(),
        Some(seg.segment_count),
        mode,
        boundary,
    )
}

/// [`overlay_gray`] of a segmentation's own labels (see [`overlay_segments_rgb`]).
pub fn overlay_segments_gray(
    img: ImageView<'_, u8>,
    seg: &super::SegmentationOutput,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    overlay_with(
        img,
        |&v| [v, v, v],
        seg.labels.view(),
        Some(seg.segment_count),
        mode,
        boundary,
    )
}

/// The four entry points: `dense_count = Some(n)` when `labels` are already `0..n` in raster
/// order (then they are used as they are), `None` to renumber them first.
fn overlay_with<P: Copy + Sync>(
    img: ImageView<'_, P>,
    to_rgb: impl Fn(&P) -> [u8; 3] + Sync,
    labels: ImageView<'_, u32>,
    dense_count: Option<usize>,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    same_size(&img, &labels)?;
    let (w, h) = (labels.width(), labels.height());
    let copied: Vec<u32>;
    let raw: &[u32] = if labels.stride() == w {
        &labels.data()[..w * h]
    } else {
        copied = labels.rows().flat_map(|r| r.iter().copied()).collect();
        &copied
    };
    let renumbered: (Vec<u32>, usize);
    let (dense, count): (&[u32], usize) = match dense_count {
        Some(n) => (raw, n),
        None => {
            renumbered = raster_relabel(raw);
            (&renumbered.0, renumbered.1)
        }
    };
    let fill = segment_fill(img.rows(), to_rgb, w, dense, raw, count, mode);
    paint(w, h, dense, &fill, boundary)
}

/// The colour of each of `count` dense labels: the mean of its pixels, or [`label_colour`] of
/// its original label `raw` (first pixel). Labels `>= count` are ignored.
fn segment_fill<'a, P: Sync + 'a>(
    rows: impl Iterator<Item = &'a [P]>,
    to_rgb: impl Fn(&P) -> [u8; 3] + Sync,
    width: usize,
    dense: &[u32],
    raw: &[u32],
    count: usize,
    mode: OverlayMode,
) -> Vec<[u8; 3]> {
    match mode {
        OverlayMode::Random => {
            let mut first = vec![u32::MAX; count];
            for (&d, &r) in dense.iter().zip(raw) {
                if let Some(f) = first.get_mut(d as usize).filter(|f| **f == u32::MAX) {
                    *f = r;
                }
            }
            first.into_iter().map(label_colour).collect()
        }
        OverlayMode::Mean => {
            let rows: Vec<&[P]> = rows.collect();
            let ids: Vec<&[u32]> = dense.chunks_exact(width.max(1)).collect();
            let add = |sums: &mut [[u64; 4]], y: usize| {
                for (p, &d) in rows[y].iter().zip(ids[y]) {
                    if let Some(s) = sums.get_mut(d as usize) {
                        let c = to_rgb(p);
                        for k in 0..3 {
                            s[k] += u64::from(c[k]);
                        }
                        s[3] += 1;
                    }
                }
            };
            let n_rows = rows.len().min(ids.len());
            let sums = segment_sums(count, n_rows, dense.len(), add);
            sums.iter()
                .map(|s| {
                    let n = s[3].max(1);
                    [
                        ((s[0] + n / 2) / n) as u8,
                        ((s[1] + n / 2) / n) as u8,
                        ((s[2] + n / 2) / n) as u8,
                    ]
                })
                .collect()
        }
    }
}

/// Paints each pixel with its segment's fill, or `boundary` where its right or lower
/// neighbour has another label; rows in parallel.
fn paint(
    w: usize,
    h: usize,
    dense: &[u32],
    fill: &[[u8; 3]],
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    let mut px = vec![[0u8; 3]; w * h];
    px.par_chunks_mut(w.max(1))
        .enumerate()
        .for_each(|(y, out)| {
            for (x, o) in out.iter_mut().enumerate() {
                let l = dense[y * w + x];
                let edge = boundary.is_some()
                    && ((x + 1 < w && dense[y * w + x + 1] != l)
                        || (y + 1 < h && dense[(y + 1) * w + x] != l));
                *o = match boundary {
                    Some(b) if edge => b,
                    _ => fill.get(l as usize).copied().unwrap_or([0; 3]),
                };
            }
        });
    Ok(Image::from_vec(w, h, px)?)
}

/// Per-label sums `[r, g, b, pixels]` of `count` labels over `rows` rows of `pixels` pixels in
/// all, `add_row` adding one row into a table: bands of rows in parallel, each with its own
/// table, when the tables are small next to the image (the usual case: thousands of segments),
/// else one pass. Shared by the overlay here and the compose step's CPU twin.
pub(crate) fn segment_sums(
    count: usize,
    rows: usize,
    pixels: usize,
    add_row: impl Fn(&mut [[u64; 4]], usize) + Sync,
) -> Vec<[u64; 4]> {
    let bands = rayon::current_num_threads().clamp(1, 16);
    if bands > 1 && count.saturating_mul(bands) <= pixels / 4 {
        let band = rows.div_ceil(bands).max(1);
        (0..rows.div_ceil(band))
            .into_par_iter()
            .map(|b| {
                let mut sums = vec![[0u64; 4]; count];
                for y in b * band..((b + 1) * band).min(rows) {
                    add_row(&mut sums, y);
                }
                sums
            })
            .reduce_with(|mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    for k in 0..4 {
                        x[k] += y[k];
                    }
                }
                a
            })
            .unwrap_or_else(|| vec![[0u64; 4]; count])
    } else {
        let mut sums = vec![[0u64; 4]; count];
        for y in 0..rows {
            add_row(&mut sums, y);
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_colours_and_boundaries() {
        let img = Image::from_vec(
            4,
            1,
            vec![[10, 0, 0], [20, 0, 0], [100, 50, 0], [200, 50, 0]],
        )
        .unwrap();
        let labels = Image::from_vec(4, 1, vec![9, 9, 4, 4]).unwrap();
        let out = overlay_rgb(img.view(), labels.view(), OverlayMode::Mean, None).unwrap();
        assert_eq!(
            out.row(0),
            &[[15, 0, 0], [15, 0, 0], [150, 50, 0], [150, 50, 0]]
        );
        let out = overlay_rgb(
            img.view(),
            labels.view(),
            OverlayMode::Mean,
            Some([0, 255, 0]),
        )
        .unwrap();
        assert_eq!(out.get(1, 0), [0, 255, 0]);
        assert_eq!(out.get(3, 0), [150, 50, 0]);
        let r = overlay_rgb(img.view(), labels.view(), OverlayMode::Random, None).unwrap();
        assert_eq!(r.get(0, 0), label_colour(9));
        assert_eq!(r.get(2, 0), label_colour(4));
        let g = overlay_gray(
            Image::new(4, 1, 7u8).view(),
            labels.view(),
            OverlayMode::Mean,
            None,
        )
        .unwrap();
        assert_eq!(g.get(0, 0), [7, 7, 7]);
        assert!(
            overlay_gray(
                Image::new(3, 1, 7u8).view(),
                labels.view(),
                OverlayMode::Mean,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn banded_mean_fill_equals_the_definition() {
        // 4x4 blocks: 192 segments on 64x48, few enough for the banded path with 4 threads.
        let img = Image::from_fn(64, 48, |x, y| {
            [(x * 37 + y * 11) as u8, (x * y) as u8, (x ^ y) as u8 * 3]
        });
        let labels = Image::from_fn(64, 48, |x, y| ((y / 4) * 16 + x / 4) as u32);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let out = pool
            .install(|| overlay_rgb(img.view(), labels.view(), OverlayMode::Mean, None))
            .unwrap();
        for (bx, by) in [(0, 0), (5, 3), (15, 11)] {
            let mut sum = [0u64; 3];
            for y in by * 4..by * 4 + 4 {
                for x in bx * 4..bx * 4 + 4 {
                    for (s, &v) in sum.iter_mut().zip(img.get(x, y).iter()) {
                        *s += u64::from(v);
                    }
                }
            }
            let mean = sum.map(|s| ((s + 8) / 16) as u8);
            assert_eq!(out.get(bx * 4 + 1, by * 4 + 2), mean, "block ({bx}, {by})");
        }
    }

    #[test]
    fn the_segmentation_path_equals_the_general_one() {
        use crate::ops::segmentation::{SegmentationParams, felzenszwalb_rgb};
        let img = Image::from_fn(40, 30, |x, y| {
            [(x * 6) as u8, (y * 8) as u8, ((x * y) % 256) as u8]
        });
        let seg = felzenszwalb_rgb(
            img.view(),
            &SegmentationParams {
                min_size: 5,
                ..SegmentationParams::default()
            },
        )
        .unwrap();
        assert!(seg.segment_count > 1);
        let gray = img.map(|p| p[1]);
        for mode in [OverlayMode::Mean, OverlayMode::Random] {
            for boundary in [None, Some([255, 0, 0])] {
                assert_eq!(
                    overlay_segments_rgb(img.view(), &seg, mode, boundary).unwrap(),
                    overlay_rgb(img.view(), seg.labels.view(), mode, boundary).unwrap()
                );
                assert_eq!(
                    overlay_segments_gray(gray.view(), &seg, mode, boundary).unwrap(),
                    overlay_gray(gray.view(), seg.labels.view(), mode, boundary).unwrap()
                );
            }
        }
        assert!(
            overlay_segments_gray(Image::new(3, 3, 0u8).view(), &seg, OverlayMode::Mean, None)
                .is_err()
        );
    }
}
