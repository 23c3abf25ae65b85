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
pub fn label_colour(label: u32) -> [u8; 3] {
    let mut z = u64::from(label).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    [(z & 0xff) as u8 | 0x30, ((z >> 8) & 0xff) as u8 | 0x30, ((z >> 16) & 0xff) as u8 | 0x30]
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
pub fn overlay_rgb(
    img: ImageView<'_, [u8; 3]>,
    labels: ImageView<'_, u32>,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    same_size(&img, &labels)?;
    let (w, h) = (img.width(), img.height());
    let raw: Vec<u32> = labels.rows().flat_map(|r| r.iter().copied()).collect();
    // Dense labels for the per-segment tables (the raw values may be sparse).
    let (dense, count) = raster_relabel(&raw);
    let fill: Vec<[u8; 3]> = match mode {
        OverlayMode::Random => {
            let mut first = vec![u32::MAX; count];
            for (&d, &r) in dense.iter().zip(&raw) {
                if first[d as usize] == u32::MAX {
                    first[d as usize] = r;
                }
            }
            first.into_iter().map(label_colour).collect()
        }
        OverlayMode::Mean => {
            let mut sums = vec![[0u64; 4]; count];
            for (row, ids) in img.rows().zip(dense.chunks_exact(w.max(1))) {
                for (p, &d) in row.iter().zip(ids) {
                    let s = &mut sums[d as usize];
                    for c in 0..3 {
                        s[c] += u64::from(p[c]);
                    }
                    s[3] += 1;
                }
            }
            sums.iter()
                .map(|s| {
                    let n = s[3].max(1);
                    [((s[0] + n / 2) / n) as u8, ((s[1] + n / 2) / n) as u8, ((s[2] + n / 2) / n) as u8]
                })
                .collect()
        }
    };
    // Rows in parallel: each output row reads its label row and the next one.
    let mut px = vec![[0u8; 3]; w * h];
    px.par_chunks_mut(w.max(1)).enumerate().for_each(|(y, out)| {
        for (x, o) in out.iter_mut().enumerate() {
            let l = dense[y * w + x];
            let edge = boundary.is_some()
                && ((x + 1 < w && dense[y * w + x + 1] != l) || (y + 1 < h && dense[(y + 1) * w + x] != l));
            *o = match boundary {
                Some(b) if edge => b,
                _ => fill[l as usize],
            };
        }
    });
    Ok(Image::from_vec(w, h, px)?)
}

/// Segments of a grey image drawn as mean grey or random colours, with boundaries.
pub fn overlay_gray(
    img: ImageView<'_, u8>,
    labels: ImageView<'_, u32>,
    mode: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Result<Image<[u8; 3]>, OpError> {
    let rgb = img.map(|v| [v, v, v]);
    overlay_rgb(rgb.view(), labels, mode, boundary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_colours_and_boundaries() {
        let img = Image::from_vec(4, 1, vec![[10, 0, 0], [20, 0, 0], [100, 50, 0], [200, 50, 0]]).unwrap();
        let labels = Image::from_vec(4, 1, vec![9, 9, 4, 4]).unwrap();
        let out = overlay_rgb(img.view(), labels.view(), OverlayMode::Mean, None).unwrap();
        assert_eq!(out.row(0), &[[15, 0, 0], [15, 0, 0], [150, 50, 0], [150, 50, 0]]);
        let out = overlay_rgb(img.view(), labels.view(), OverlayMode::Mean, Some([0, 255, 0])).unwrap();
        assert_eq!(out.get(1, 0), [0, 255, 0]);
        assert_eq!(out.get(3, 0), [150, 50, 0]);
        let r = overlay_rgb(img.view(), labels.view(), OverlayMode::Random, None).unwrap();
        assert_eq!(r.get(0, 0), label_colour(9));
        assert_eq!(r.get(2, 0), label_colour(4));
        let g = overlay_gray(Image::new(4, 1, 7u8).view(), labels.view(), OverlayMode::Mean, None).unwrap();
        assert_eq!(g.get(0, 0), [7, 7, 7]);
        assert!(overlay_gray(Image::new(3, 1, 7u8).view(), labels.view(), OverlayMode::Mean, None).is_err());
    }
}
