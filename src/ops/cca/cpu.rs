//! Run-based two-pass labeling on the CPU (the reference backend and the fallback).
//!
//! 1. **Runs** (rayon over rows): each row becomes its maximal foreground runs `x0..=x1`;
//!    runs are numbered in raster order.
//! 2. **Union-find over runs** (rayon over horizontal strips, then the strip borders in
//!    sequence): a run is united with every run of the row above it touches (overlapping
//!    columns for 4-connectivity, overlap of `x0-1..=x1+1` for 8), found with one two-pointer
//!    sweep per row pair. Unions link the larger root to the smaller, so every parent index is
//!    smaller than its child's and each root is the component's first run in raster order.
//! 3. **Final labels** in one pass over runs in order: a root takes the next label, any other run
//!    its parent's (already final, being earlier). This yields OpenCV's numbering (raster order
//!    of the first pixel) without a sort.
//! 4. **Label image** (rayon over rows) and **features** (closed-form per-run sums,
//!    `ComponentSums::add_run`).
//!
//! Cost: one read of the image, one write of the label image, O(runs · α) for the rest.

use rayon::prelude::*;

use crate::image::{Gray, Image, ImageView};
use crate::ops::OpError;

use super::binarize::{BackgroundModel, histogram, is_foreground, otsu_from_histogram};
use super::features::{ComponentSums, ComponentTable};
use super::{CcaOutput, CcaParams, Connectivity, Source, Threshold};

/// Checks that the integer sums of any component fit in u64 (`Σx² <= N·W²`).
pub fn check_sum_range(width: usize, height: usize) -> Result<(), OpError> {
    let (w, h) = (width as u128, height as u128);
    let m = w.max(h);
    if m * m * w * h >= (1u128 << 64) {
        return Err(OpError::Unsupported(format!(
            "{width}x{height} is too large for 64-bit moment sums"
        )));
    }
    Ok(())
}

/// Maximal foreground runs `(x0, x1)` (inclusive) of one row.
fn row_runs<T: Copy>(row: &[T], fg: &(impl Fn(T) -> bool + Sync)) -> Vec<(u32, u32)> {
    let mut runs = Vec::new();
    let w = row.len();
    let mut x = 0;
    while x < w {
        match row[x..].iter().position(|&v| fg(v)) {
            None => break,
            Some(o) => x += o,
        }
        let s = x;
        match row[x..].iter().position(|&v| !fg(v)) {
            None => x = w,
            Some(o) => x += o,
        }
        runs.push((s as u32, (x - 1) as u32));
    }
    runs
}

/// Root of `x` with path halving; `p` holds global indices, `base` is the index of `p[0]`.
#[inline]
fn find(p: &mut [u32], base: u32, mut x: u32) -> u32 {
    loop {
        let px = p[(x - base) as usize];
        if px == x {
            return x;
        }
        let ppx = p[(px - base) as usize];
        p[(x - base) as usize] = ppx;
        x = ppx;
    }
}

#[inline]
fn union(p: &mut [u32], base: u32, a: u32, b: u32) {
    let ra = find(p, base, a);
    let rb = find(p, base, b);
    if ra < rb {
        p[(rb - base) as usize] = ra;
    } else if rb < ra {
        p[(ra - base) as usize] = rb;
    }
}

/// Unites the touching runs of two consecutive rows (`up` starts at index `iu`, `lo` at `il`).
fn merge_rows(
    p: &mut [u32],
    base: u32,
    up: &[(u32, u32)],
    iu: u32,
    lo: &[(u32, u32)],
    il: u32,
    conn: Connectivity,
) {
    let grow = u32::from(conn == Connectivity::Eight);
    let (mut i, mut j) = (0usize, 0usize);
    while i < up.len() && j < lo.len() {
        let (us, ue) = up[i];
        let (ls, le) = lo[j];
        if us <= le + grow && ls <= ue + grow {
            union(p, base, iu + i as u32, il + j as u32);
        }
        if ue < le {
            i += 1;
        } else if le < ue {
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
}

/// Labels the pixels where `fg` holds; returns the label image and the sums of labels `1..=n`.
pub(crate) fn label_sums<T: Copy + Send + Sync>(
    img: ImageView<'_, T>,
    fg: impl Fn(T) -> bool + Sync,
    conn: Connectivity,
) -> Result<(Image<u32>, Vec<ComponentSums>), OpError> {
    let (w, h) = (img.width(), img.height());
    check_sum_range(w, h)?;
    if w == 0 || h == 0 {
        return Ok((Image::new(w, h, 0), Vec::new()));
    }
    if w * h >= u32::MAX as usize {
        return Err(OpError::Unsupported(format!(
            "{w}x{h} has more than 2^32 pixels"
        )));
    }
    // 1. Runs per row, in raster order.
    let rows: Vec<Vec<(u32, u32)>> = (0..h)
        .into_par_iter()
        .map(|y| row_runs(img.row(y), &fg))
        .collect();
    let mut row_start = Vec::with_capacity(h + 1);
    let mut total = 0u32;
    for r in &rows {
        row_start.push(total);
        total += r.len() as u32;
    }
    row_start.push(total);
    // 2. Union-find: strips in parallel, then strip borders.
    let mut parent: Vec<u32> = (0..total).collect();
    let strips = (rayon::current_num_threads() * 4).clamp(1, h);
    let strip_rows = h.div_ceil(strips);
    let bounds: Vec<(usize, usize)> = (0..h)
        .step_by(strip_rows)
        .map(|y0| (y0, (y0 + strip_rows).min(h)))
        .collect();
    {
        let mut pieces = Vec::with_capacity(bounds.len());
        let mut rest: &mut [u32] = &mut parent;
        for &(y0, y1) in &bounds {
            let len = (row_start[y1] - row_start[y0]) as usize;
            let (piece, tail) = rest.split_at_mut(len);
            pieces.push((y0, y1, piece));
            rest = tail;
        }
        pieces.into_par_iter().for_each(|(y0, y1, piece)| {
            let base = row_start[y0];
            for y in y0 + 1..y1 {
                merge_rows(
                    piece,
                    base,
                    &rows[y - 1],
                    row_start[y - 1],
                    &rows[y],
                    row_start[y],
                    conn,
                );
            }
        });
    }
    for &(y0, _) in bounds.iter().skip(1) {
        merge_rows(
            &mut parent,
            0,
            &rows[y0 - 1],
            row_start[y0 - 1],
            &rows[y0],
            row_start[y0],
            conn,
        );
    }
    // 3. Final labels in raster order: parents are always earlier runs.
    let mut run_label = vec![0u32; total as usize];
    let mut n = 0u32;
    for i in 0..total as usize {
        let p = parent[i] as usize;
        run_label[i] = if p == i {
            n += 1;
            n
        } else {
            run_label[p]
        };
    }
    // 4. Label image and features.
    let mut labels = Image::new(w, h, 0u32);
    labels
        .data_mut()
        .par_chunks_mut(w)
        .enumerate()
        .for_each(|(y, out)| {
            let first = row_start[y] as usize;
            for (k, &(x0, x1)) in rows[y].iter().enumerate() {
                out[x0 as usize..=x1 as usize].fill(run_label[first + k]);
            }
        });
    let mut sums = vec![ComponentSums::empty(); n as usize];
    for (y, r) in rows.iter().enumerate() {
        let first = row_start[y] as usize;
        for (k, &(x0, x1)) in r.iter().enumerate() {
            sums[(run_label[first + k] - 1) as usize].add_run(x0, x1, y as u32);
        }
    }
    Ok((labels, sums))
}

/// Labels a binary image (non-zero is foreground).
pub fn label(binary: ImageView<'_, u8>, connectivity: Connectivity) -> Result<Image<u32>, OpError> {
    Ok(label_sums(binary, |v| v != 0, connectivity)?.0)
}

/// Labels a binary image (non-zero is foreground) and measures its components
/// (`connectedComponentsWithStats`). The table's threshold is 0 (foreground is `v > 0`).
///
/// ```
/// use morphoscope::image::Image;
/// use morphoscope::ops::Connectivity;
/// use morphoscope::ops::cca::label_with_stats;
///
/// // Two diagonal pixels: two components with 4 neighbours, one with 8.
/// let img = Image::from_fn(4, 4, |x, y| if x == y && (1..3).contains(&x) { 255u8 } else { 0 });
/// let (_, four) = label_with_stats(img.view(), Connectivity::Four)?;
/// let (labels, eight) = label_with_stats(img.view(), Connectivity::Eight)?;
/// assert_eq!((four.components.len(), eight.components.len()), (2, 1));
/// assert_eq!((labels.get(2, 2), eight.components[0].area), (1, 2));
/// # Ok::<(), morphoscope::ops::OpError>(())
/// ```
pub fn label_with_stats(
    binary: ImageView<'_, u8>,
    connectivity: Connectivity,
) -> Result<(Image<u32>, ComponentTable), OpError> {
    let (labels, sums) = label_sums(binary, |v| v != 0, connectivity)?;
    let table = ComponentTable::from_sums(
        binary.width(),
        binary.height(),
        connectivity.neighbors(),
        0,
        &sums,
    );
    Ok((labels, table))
}

/// The CPU pipeline of one frame: source value, threshold, labels and features. Holds the
/// motion background between frames.
#[derive(Clone, Debug, Default)]
pub struct CcaCpu {
    background: BackgroundModel,
}

impl CcaCpu {
    /// A fresh pipeline (unseeded background).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the motion background.
    pub(crate) fn reset_background(&mut self) {
        self.background.reset();
    }

    /// The motion background model.
    #[must_use]
    pub fn background(&self) -> &BackgroundModel {
        &self.background
    }

    /// Binarizes, labels and measures one frame.
    pub fn process<T: Gray>(
        &mut self,
        img: ImageView<'_, T>,
        params: &CcaParams,
    ) -> Result<CcaOutput, OpError> {
        params.validate()?;
        let diff;
        let src = match params.source {
            Source::Frame => img,
            Source::Motion => {
                diff = self
                    .background
                    .difference_and_update(img, params.learning_rate_fixed());
                diff.view()
            }
        };
        let t = match params.threshold {
            Threshold::Fixed(t) => t,
            Threshold::Otsu => otsu_from_histogram(&histogram(src)),
        };
        let pol = params.polarity;
        let conn = params.conn();
        let (labels, mut sums) =
            label_sums(src, move |v: T| is_foreground(v.to_u32(), t, pol), conn)?;
        add_grey_sums(&mut sums, &labels, img);
        let table =
            ComponentTable::from_sums(img.width(), img.height(), conn.neighbors(), t, &sums);
        Ok(CcaOutput { labels, table })
    }
}

/// Adds each component's Σg: the 8-bit grey level of `img` (16-bit frames: the high byte, as
/// `preprocess::gray16_to_gray8` gives the GPU path) over its pixels.
fn add_grey_sums<T: Gray>(sums: &mut [ComponentSums], labels: &Image<u32>, img: ImageView<'_, T>) {
    let shift = T::BITS - 8;
    let labels = labels.view();
    for y in 0..img.height() {
        for (&v, &l) in img.row(y).iter().zip(labels.row(y)) {
            if let Some(s) = l.checked_sub(1).and_then(|i| sums.get_mut(i as usize)) {
                s.sum_grey += u64::from(v.to_u32() >> shift);
            }
        }
    }
}

/// One image through a fresh [`CcaCpu`] (for `source = "motion"` this only seeds the
/// background, so the result is empty).
pub fn cca_cpu<T: Gray>(img: ImageView<'_, T>, params: &CcaParams) -> Result<CcaOutput, OpError> {
    CcaCpu::new().process(img, params)
}

#[cfg(test)]
mod tests {
    use super::super::naive;
    use super::*;
    use crate::ops::cca::Polarity;

    fn img(rows: &[&str]) -> Image<u8> {
        let h = rows.len();
        let w = rows.first().map_or(0, |r| r.len());
        Image::from_fn(w, h, |x, y| u8::from(rows[y].as_bytes()[x] == b'#'))
    }

    #[test]
    fn raster_order_and_connectivity() {
        let b = img(&["..#..#", "#..#..", "#.....", ".##..#"]);
        let l4 = label(b.view(), Connectivity::Four).unwrap();
        assert_eq!(l4.row(0), &[0, 0, 1, 0, 0, 2]);
        assert_eq!(l4.row(1), &[3, 0, 0, 4, 0, 0]);
        assert_eq!(l4.row(2), &[3, 0, 0, 0, 0, 0]);
        assert_eq!(l4.row(3), &[0, 5, 5, 0, 0, 6]);
        let l8 = label(b.view(), Connectivity::Eight).unwrap();
        assert_eq!(l8.row(0), &[0, 0, 1, 0, 0, 2]);
        assert_eq!(l8.row(1), &[3, 0, 0, 1, 0, 0]);
        assert_eq!(l8.row(3), &[0, 3, 3, 0, 0, 4]);
    }

    #[test]
    fn u_shape_merges_to_first_pixel() {
        // Two arms meet at the bottom: the right arm's runs come first in row 0 but the
        // component's label is decided by its first pixel.
        let b = img(&["#.#.#", "#.#.#", "###.#", "....#"]);
        let (l, t) = label_with_stats(b.view(), Connectivity::Four).unwrap();
        assert_eq!(l.row(0), &[1, 0, 1, 0, 2]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.components[0].area, 7);
        assert_eq!((t.components[1].left, t.components[1].height), (4, 4));
    }

    #[test]
    fn edge_sizes_and_stride() {
        for (w, h) in [(0, 0), (0, 3), (3, 0)] {
            let e = Image::new(w, h, 1u8);
            let (l, t) = label_with_stats(e.view(), Connectivity::Eight).unwrap();
            assert_eq!((l.width(), l.height(), t.len()), (w, h, 0));
        }
        let one = Image::new(1, 1, 1u8);
        assert_eq!(label(one.view(), Connectivity::Four).unwrap().data(), &[1]);
        let col = Image::from_fn(1, 5, |_, y| u8::from(y != 2));
        assert_eq!(
            label(col.view(), Connectivity::Four).unwrap().data(),
            &[1, 1, 0, 2, 2]
        );
        // Padded rows: the padding (9) must not be read as foreground.
        let s = Image::from_strided(2, 2, 3, vec![1u8, 0, 9, 0, 1]).unwrap();
        assert_eq!(
            label(s.view(), Connectivity::Four).unwrap().data(),
            &[1, 0, 0, 2]
        );
        assert_eq!(
            label(s.view(), Connectivity::Eight).unwrap().data(),
            &[1, 0, 0, 1]
        );
    }

    #[test]
    fn grey_sums_are_the_frame_over_each_components_pixels() {
        // Pseudo-random grey frame, thresholded, 8- and 16-bit (the high byte counts).
        let g = Image::from_fn(37, 23, |x, y| {
            (((x * 2_654_435_761) ^ (y * 40_503)).wrapping_mul(2_246_822_519) >> 13) as u8
        });
        let g16 = Image::from_fn(37, 23, |x, y| {
            u16::from(g.view().row(y)[x]) * 256 + (x as u16 % 200)
        });
        let p = CcaParams {
            threshold: Threshold::Fixed(200),
            connectivity: 8,
            ..CcaParams::default()
        };
        let out = cca_cpu(g.view(), &p).unwrap();
        let out16 = cca_cpu(
            g16.view(),
            &CcaParams {
                threshold: Threshold::Fixed(200 * 256 + 255),
                ..p
            },
        )
        .unwrap();
        assert!(out.table.len() > 5);
        assert_eq!(out16.table.components, out.table.components);
        let mut naive = vec![0u64; out.table.len()];
        for y in 0..g.height() {
            for x in 0..g.width() {
                let l = out.labels.view().row(y)[x] as usize;
                if l > 0 {
                    naive[l - 1] += u64::from(g.view().row(y)[x]);
                }
            }
        }
        let sums: Vec<u64> = out.table.components.iter().map(|c| c.grey_sum).collect();
        assert_eq!(sums, naive);
        for c in &out.table.components {
            assert!(c.mean_grey() > 200.0 && c.mean_grey() <= 255.0, "{c:?}");
        }
    }

    #[test]
    fn process_threshold_polarity_motion() {
        let g = Image::from_fn(8, 4, |x, _| if x % 4 == 0 { 200u8 } else { 20 });
        let p = CcaParams {
            threshold: Threshold::Fixed(100),
            connectivity: 4,
            ..CcaParams::default()
        };
        let out = cca_cpu(g.view(), &p).unwrap();
        assert_eq!(out.table.len(), 2);
        assert_eq!(out.table.threshold, 100);
        let dark = CcaParams {
            polarity: Polarity::Dark,
            ..p.clone()
        };
        assert_eq!(cca_cpu(g.view(), &dark).unwrap().table.len(), 2);
        let otsu = CcaParams {
            threshold: Threshold::Otsu,
            ..p.clone()
        };
        assert_eq!(cca_cpu(g.view(), &otsu).unwrap().table.threshold, 20);
        let mut m = CcaCpu::new();
        let mot = CcaParams {
            source: Source::Motion,
            threshold: Threshold::Fixed(30),
            ..p
        };
        assert!(m.process(g.view(), &mot).unwrap().table.is_empty());
        let mut g2 = g.clone();
        g2.set(2, 1, 250);
        let out = m.process(g2.view(), &mot).unwrap();
        assert_eq!(out.table.len(), 1);
        assert_eq!(out.table.components[0].centroid, [2.0, 1.0]);
        // The naive reference agrees on a real-ish pattern.
        let r = Image::from_fn(37, 23, |x, y| u8::from((x * 7 + y * 13) % 5 < 2));
        let (a, sa) = label_sums(r.view(), |v| v != 0, Connectivity::Eight).unwrap();
        let (b, sb) = naive::label_bfs(r.view(), Connectivity::Eight);
        assert_eq!(a, b);
        assert_eq!(sa, sb);
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::super::naive;
    use super::*;
    use crate::ops::cca::features::Component;

    fn binary() -> impl Strategy<Value = Image<u8>> {
        (1usize..24, 1usize..24, 0u32..=100, 0usize..3).prop_flat_map(|(w, h, density, pad)| {
            proptest::collection::vec(0u32..100, (w + pad) * h).prop_map(move |v| {
                let data: Vec<u8> = v.iter().map(|&r| u8::from(r < density)).collect();
                Image::from_strided(w, h, w + pad, data).unwrap_or_else(|_| Image::new(w, h, 0))
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]
        #[test]
        fn labels_and_features_equal_bfs(b in binary(), eight in any::<bool>()) {
            let conn = if eight { Connectivity::Eight } else { Connectivity::Four };
            let (l, s) = label_sums(b.view(), |v| v != 0, conn).unwrap();
            let (l2, s2) = naive::label_bfs(b.view(), conn);
            prop_assert_eq!(&l, &l2);
            prop_assert_eq!(&s, &s2);
            // Features equal their direct per-pixel definition.
            for (i, sum) in s.iter().enumerate() {
                let c = Component::from_sums(i as u32 + 1, sum);
                let d = naive::direct_features(&l, i as u32 + 1);
                prop_assert_eq!((c.area, c.left, c.top, c.width, c.height), (d.area, d.left, d.top, d.width, d.height));
                prop_assert!((c.centroid[0] - d.centroid[0]).abs() < 1e-9 && (c.centroid[1] - d.centroid[1]).abs() < 1e-9);
                let tol = 1e-9 * (1.0 + d.moments.mu20.abs() + d.moments.mu02.abs());
                prop_assert!((c.moments.mu20 - d.moments.mu20).abs() < tol);
                prop_assert!((c.moments.mu11 - d.moments.mu11).abs() < tol);
                prop_assert!((c.moments.mu02 - d.moments.mu02).abs() < tol);
                prop_assert!((c.moments.eccentricity - d.moments.eccentricity).abs() < 1e-6);
                // Orientation is undefined for isotropic shapes (equal eigenvalues).
                if c.moments.eccentricity > 1e-3 {
                    let dt = (c.moments.orientation - d.moments.orientation).abs();
                    prop_assert!(dt < 1e-6 || (dt - std::f64::consts::PI).abs() < 1e-6, "{:?} vs {:?}", c.moments, d.moments);
                }
            }
        }
    }
}
