//! Segmentation quality and validity: achievable segmentation accuracy (ASA) and
//! under-segmentation error (UE) as the ETH report §4.2 defines them (after Wei et al. 2018),
//! and a checker of the label invariants every segmentation here must satisfy.
//!
//! With segments `s_k` and ground-truth segments `g_i` over `N` pixels:
//! - `ASA = Σ_k max_i |s_k ∩ g_i| / N` (1 = every segment inside one ground-truth segment);
//! - `UE = Σ_i Σ_k min(|s_k ∩ g_i|, |s_k − g_i|) / N` (0 = no segment spills).
//!
//! Both come from the contingency table of label pairs, built by sorting packed
//! `(segment << 32 | truth)` keys, so labels may be any `u32` values.

use std::collections::VecDeque;

use rayon::prelude::*;

use crate::image::{ImageError, ImageView};
use crate::ops::OpError;

/// `(segment, truth, count)` for every pair that meets, sorted by segment.
fn contingency(
    seg: ImageView<'_, u32>,
    truth: ImageView<'_, u32>,
) -> Result<Vec<(u32, u32, u64)>, OpError> {
    if seg.width() != truth.width() || seg.height() != truth.height() {
        return Err(OpError::Image(ImageError::SizeMismatch {
            a_width: seg.width(),
            a_height: seg.height(),
            b_width: truth.width(),
            b_height: truth.height(),
        }));
    }
    let mut keys: Vec<u64> = seg
        .rows()
        .zip(truth.rows())
        .flat_map(|(a, b)| {
            a.iter()
                .zip(b)
                .map(|(&s, &g)| (u64::from(s) << 32) | u64::from(g))
        })
        .collect();
    keys.par_sort_unstable();
    let mut out: Vec<(u32, u32, u64)> = Vec::new();
    for k in keys {
        let (s, g) = ((k >> 32) as u32, k as u32);
        match out.last_mut() {
            Some(last) if last.0 == s && last.1 == g => last.2 += 1,
            _ => out.push((s, g, 1)),
        }
    }
    Ok(out)
}

/// Calls `f(segment total, counts of that segment)` for each segment of the table.
fn per_segment(table: &[(u32, u32, u64)], mut f: impl FnMut(u64, &[(u32, u32, u64)])) {
    let mut i = 0;
    while i < table.len() {
        let mut j = i;
        while j < table.len() && table[j].0 == table[i].0 {
            j += 1;
        }
        let total = table[i..j].iter().map(|t| t.2).sum();
        f(total, &table[i..j]);
        i = j;
    }
}

/// Achievable segmentation accuracy of `segments` against `truth` (1.0 for empty images).
pub fn asa(segments: ImageView<'_, u32>, truth: ImageView<'_, u32>) -> Result<f64, OpError> {
    let n = segments.len();
    if n == 0 {
        return Ok(1.0);
    }
    let t = contingency(segments, truth)?;
    let mut hit = 0u64;
    per_segment(&t, |_, rows| {
        hit += rows.iter().map(|r| r.2).max().unwrap_or(0)
    });
    Ok(hit as f64 / n as f64)
}

/// Under-segmentation error of `segments` against `truth` (0.0 for empty images).
pub fn undersegmentation_error(
    segments: ImageView<'_, u32>,
    truth: ImageView<'_, u32>,
) -> Result<f64, OpError> {
    let n = segments.len();
    if n == 0 {
        return Ok(0.0);
    }
    let t = contingency(segments, truth)?;
    let mut spill = 0u64;
    per_segment(&t, |total, rows| {
        spill += rows.iter().map(|r| r.2.min(total - r.2)).sum::<u64>()
    });
    Ok(spill as f64 / n as f64)
}

/// What [`check_labels`] found in a valid label image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelCheck {
    /// Number of segments.
    pub segments: usize,
    /// Pixels in the smallest segment (0 for an empty image).
    pub min_size: usize,
    /// Pixels in the largest segment.
    pub max_size: usize,
}

/// Checks that `labels` is a partition into `count` 8-connected segments numbered `0..count`
/// in raster order of their first pixel. Returns sizes, or a description of the first defect.
pub fn check_labels(labels: ImageView<'_, u32>, count: usize) -> Result<LabelCheck, String> {
    let (w, h) = (labels.width(), labels.height());
    let mut next = 0usize;
    let mut size = vec![0usize; count];
    for y in 0..h {
        for (x, &l) in labels.row(y).iter().enumerate() {
            let l = l as usize;
            if l >= count {
                return Err(format!("label {l} at ({x}, {y}) >= segment count {count}"));
            }
            if size[l] == 0 {
                if l != next {
                    return Err(format!(
                        "label {l} first appears at ({x}, {y}) where {next} was expected (raster order)"
                    ));
                }
                next += 1;
            }
            size[l] += 1;
        }
    }
    if next != count {
        return Err(format!("{next} labels used, {count} announced"));
    }
    // Each label must be one 8-connected piece: flood from each label's first pixel.
    let mut seen = vec![false; w * h];
    let mut pieces = 0usize;
    let mut queue = VecDeque::new();
    for start in 0..w * h {
        if seen[start] {
            continue;
        }
        pieces += 1;
        let l = labels.get(start % w, start / w);
        seen[start] = true;
        queue.push_back(start);
        while let Some(p) = queue.pop_front() {
            let (x, y) = ((p % w) as i64, (p / w) as i64);
            for dy in -1..=1i64 {
                for dx in -1..=1i64 {
                    let (nx, ny) = (x + dx, y + dy);
                    if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                        continue;
                    }
                    let q = ny as usize * w + nx as usize;
                    if !seen[q] && labels.get(nx as usize, ny as usize) == l {
                        seen[q] = true;
                        queue.push_back(q);
                    }
                }
            }
        }
    }
    if pieces != count {
        return Err(format!(
            "{count} labels but {pieces} 8-connected pieces: some segment is split"
        ));
    }
    Ok(LabelCheck {
        segments: count,
        min_size: size.iter().copied().min().unwrap_or(0),
        max_size: size.iter().copied().max().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;

    #[test]
    fn asa_and_ue_on_a_small_case() {
        // Truth: left half 0, right half 1 (4x2). Segments: one spills one pixel.
        let truth = Image::from_vec(4, 2, vec![0, 0, 1, 1, 0, 0, 1, 1]).unwrap();
        let seg = Image::from_vec(4, 2, vec![5, 5, 5, 7, 5, 5, 7, 7]).unwrap();
        // Segment 5: 4 in truth 0, 1 in truth 1 -> max 4; segment 7: 3 in truth 1 -> 3.
        assert!((asa(seg.view(), truth.view()).unwrap() - 7.0 / 8.0).abs() < 1e-12);
        // UE: seg 5: min(4, 1) + min(1, 4) = 2; seg 7: min(3, 0) = 0 -> 2/8.
        assert!((undersegmentation_error(seg.view(), truth.view()).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(asa(truth.view(), truth.view()).unwrap(), 1.0);
        assert_eq!(
            undersegmentation_error(truth.view(), truth.view()).unwrap(),
            0.0
        );
        let other = Image::new(3, 2, 0u32);
        assert!(asa(seg.view(), other.view()).is_err());
    }

    #[test]
    fn label_checks() {
        let ok = Image::from_vec(3, 2, vec![0, 0, 1, 2, 0, 1]).unwrap();
        assert_eq!(
            check_labels(ok.view(), 3).unwrap(),
            LabelCheck {
                segments: 3,
                min_size: 1,
                max_size: 3
            }
        );
        let order = Image::from_vec(2, 1, vec![1, 0]).unwrap();
        assert!(
            check_labels(order.view(), 2)
                .unwrap_err()
                .contains("raster")
        );
        let split = Image::from_vec(3, 1, vec![0, 1, 0]).unwrap();
        assert!(check_labels(split.view(), 2).unwrap_err().contains("split"));
        // Diagonal contact is 8-connected.
        let diag = Image::from_vec(2, 2, vec![0, 1, 1, 0]).unwrap();
        assert!(check_labels(diag.view(), 2).is_ok());
        assert!(check_labels(Image::<u32>::new(0, 0, 0).view(), 0).is_ok());
    }
}
