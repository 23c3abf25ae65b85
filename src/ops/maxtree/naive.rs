//! Brute-force definitions (slow, obviously right): the references for the tests.
//!
//! * [`canonical_parent_naive`]: the canonical parent image straight from §2.2 by flood fills.
//!   The node of `p` is the component `X` of `[f ≥ f(p)]` containing `p`; its canonical element
//!   is the largest raster index of `X` at level `f(p)`. A canonical `p` points to the canonical
//!   element of the component of `[f ≥ λ']` containing `p`, where `λ'` is the highest level on
//!   the outer boundary of `X` (the parent node's level); with no outer boundary `p` is the root.
//! * [`attribute_filter_naive`]: threshold decomposition. For every level `t`, label the
//!   components of `[f ≥ t]`; a component whose attribute passes lifts its pixels to `t`. The
//!   output is the highest such `t` (0 if none) — the direct rule, which for the increasing
//!   attributes here equals every other rule.
//!
//! Both are O(N²) or worse: for images of a few thousand pixels.

use std::collections::VecDeque;

use super::{Attribute, Connectivity, TreeKind};
use crate::image::{Gray, Image, ImageView};

fn values<T: Gray>(img: ImageView<'_, T>, kind: TreeKind) -> Vec<u32> {
    img.rows()
        .flat_map(|r| {
            r.iter().map(move |v| {
                if kind == TreeKind::Min {
                    v.invert()
                } else {
                    *v
                }
                .to_u32()
            })
        })
        .collect()
}

fn neighbors(p: usize, w: usize, h: usize, conn: Connectivity) -> impl Iterator<Item = usize> {
    let (x, y) = ((p % w) as i64, (p / w) as i64);
    let eight = conn == Connectivity::Eight;
    (-1i64..=1)
        .flat_map(move |dy| (-1i64..=1).map(move |dx| (dx, dy)))
        .filter(move |&(dx, dy)| (dx, dy) != (0, 0) && (eight || dx == 0 || dy == 0))
        .filter_map(move |(dx, dy)| {
            let (nx, ny) = (x + dx, y + dy);
            (nx >= 0 && ny >= 0 && nx < w as i64 && ny < h as i64)
                .then(|| (ny as usize) * w + nx as usize)
        })
}

/// The component of `[g >= t]` containing `seed` (which must satisfy it), as a sorted list.
fn component(g: &[u32], w: usize, h: usize, conn: Connectivity, seed: usize, t: u32) -> Vec<usize> {
    let mut seen = vec![false; g.len()];
    let mut out = vec![seed];
    let mut q = VecDeque::from([seed]);
    seen[seed] = true;
    while let Some(p) = q.pop_front() {
        for n in neighbors(p, w, h, conn) {
            if !seen[n] && g[n] >= t {
                seen[n] = true;
                out.push(n);
                q.push_back(n);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Highest level on the outer boundary of `comp` (`None`: the component is the whole image).
fn boundary_max(g: &[u32], w: usize, h: usize, conn: Connectivity, comp: &[usize]) -> Option<u32> {
    let mut inside = vec![false; g.len()];
    for &p in comp {
        inside[p] = true;
    }
    comp.iter()
        .flat_map(|&p| neighbors(p, w, h, conn))
        .filter(|&n| !inside[n])
        .map(|n| g[n])
        .max()
}

/// The canonical parent image by definition (root points to itself).
#[must_use]
pub fn canonical_parent_naive<T: Gray>(
    img: ImageView<'_, T>,
    kind: TreeKind,
    conn: Connectivity,
) -> Vec<u32> {
    let (w, h) = (img.width(), img.height());
    let g = values(img, kind);
    let canonical_at = |p: usize, t: u32| -> usize {
        let c = component(&g, w, h, conn, p, t);
        c.iter().copied().filter(|&q| g[q] == t).max().unwrap_or(p)
    };
    (0..g.len())
        .map(|p| {
            let x = component(&g, w, h, conn, p, g[p]);
            let canon = x
                .iter()
                .copied()
                .filter(|&q| g[q] == g[p])
                .max()
                .unwrap_or(p);
            if canon != p {
                return canon as u32;
            }
            match boundary_max(&g, w, h, conn, &x) {
                None => p as u32,
                Some(t) => canonical_at(p, t) as u32,
            }
        })
        .collect()
}

/// Attribute of one component `comp` of `[g >= t]` (node semantics, see the `maxtree` docs).
fn component_attribute(
    g: &[u32],
    w: usize,
    h: usize,
    conn: Connectivity,
    comp: &[usize],
    a: Attribute,
) -> f64 {
    let level = comp.iter().map(|&p| g[p]).min().unwrap_or(0);
    let plevel = boundary_max(g, w, h, conn, comp).unwrap_or(level);
    let (mut x0, mut x1, mut y0, mut y1) = (usize::MAX, 0, usize::MAX, 0);
    for &p in comp {
        let (x, y) = (p % w, p / w);
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let (bw, bh) = ((x1 - x0 + 1) as f64, (y1 - y0 + 1) as f64);
    match a {
        Attribute::Area => comp.len() as f64,
        Attribute::Height => f64::from(comp.iter().map(|&p| g[p]).max().unwrap_or(0) - plevel),
        Attribute::Volume => comp.iter().map(|&p| u64::from(g[p] - plevel)).sum::<u64>() as f64,
        Attribute::BboxWidth => bw,
        Attribute::BboxHeight => bh,
        Attribute::Diameter => bw.max(bh),
        Attribute::Diagonal => (bw * bw + bh * bh).sqrt(),
    }
}

/// Attribute filter (direct rule) by threshold decomposition; a min-tree filters the inverse.
#[must_use]
pub fn attribute_filter_naive<T: Gray>(
    img: ImageView<'_, T>,
    kind: TreeKind,
    attribute: Attribute,
    threshold: f64,
    conn: Connectivity,
) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    let g = values(img, kind);
    let mut levels: Vec<u32> = g.clone();
    levels.sort_unstable();
    levels.dedup();
    let mut out = vec![0u32; g.len()];
    for &t in &levels {
        let mut labelled = vec![false; g.len()];
        for s in 0..g.len() {
            if labelled[s] || g[s] < t {
                continue;
            }
            let comp = component(&g, w, h, conn, s, t);
            for &p in &comp {
                labelled[p] = true;
            }
            if component_attribute(&g, w, h, conn, &comp, attribute) >= threshold {
                for &p in &comp {
                    out[p] = t;
                }
            }
        }
    }
    Image::from_fn(w, h, |x, y| {
        let v = T::from_u32_sat(out[y * w + x]);
        if kind == TreeKind::Min { v.invert() } else { v }
    })
}

/// scikit-image's `area_opening` by threshold decomposition.
#[must_use]
pub fn area_opening_naive<T: Gray>(
    img: ImageView<'_, T>,
    area_threshold: u64,
    conn: Connectivity,
) -> Image<T> {
    attribute_filter_naive(
        img,
        TreeKind::Max,
        Attribute::Area,
        area_threshold as f64,
        conn,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_parent_of_the_paper_example() {
        let img = Image::from_vec(3, 3, vec![15u8, 13, 16, 12, 12, 10, 16, 12, 14]).unwrap();
        let p = canonical_parent_naive(img.view(), TreeKind::Max, Connectivity::Eight);
        assert_eq!(p, vec![1, 7, 1, 7, 7, 5, 7, 5, 7]);
    }

    #[test]
    fn naive_area_opening() {
        let img = Image::from_vec(5, 1, vec![1u8, 4, 4, 9, 2]).unwrap();
        assert_eq!(
            area_opening_naive(img.view(), 2, Connectivity::Four).data(),
            &[1, 4, 4, 4, 2]
        );
        assert_eq!(
            area_opening_naive(img.view(), 6, Connectivity::Four).data(),
            &[0; 5]
        );
    }
}
