//! Parallel CPU max-tree: bands of rows built concurrently (rayon), merged along the band
//! borders, flattened — the CPU counterpart of the GPU's tile-and-merge (§3.2, §4.3).
//!
//! 1. Each band of `band_rows` rows gets its own canonical max-tree (the sequential union-find of
//!    `cpu.rs` on the band alone, indices shifted to the image's), written into its disjoint slice
//!    of the parent image.
//! 2. The trees are merged by CONNECT (the paper's Alg. 3) on every edge crossing a band border,
//!    sequentially (a few thousand edges per border). CONNECT keeps the invariant that a link
//!    between two pixels of one level goes to the larger raster index (ties: the larger index
//!    becomes the parent), and every band's canonical element is its node's largest index, so the
//!    level root of each final node is its largest index: the §2.2 canonical element.
//! 3. FLATTEN (Alg. 5): `parent(p) ← level root of parent(p)`, in parallel into a new array.
//!
//! The result is the same array as the sequential algorithm's (the canonical form is unique).

use rayon::prelude::*;

use super::Connectivity;
use super::cpu::{canonicalize, sort_pixels, union_find};
use crate::image::Gray;

/// Level root of `x`: climb while the parent has the same level (roots point to themselves).
fn level_root<T: Gray>(par: &[u32], f: &[T], mut x: usize) -> usize {
    loop {
        let q = par[x] as usize;
        if q == x || f[q] != f[x] {
            return x;
        }
        x = q;
    }
}

/// The highest ancestor-or-self of `x` whose level is >= `lvl` (x itself must satisfy it).
fn peak_root<T: Gray>(par: &[u32], f: &[T], mut x: usize, lvl: T) -> usize {
    loop {
        let q = par[x] as usize;
        if q == x || f[q] < lvl {
            return x;
        }
        x = q;
    }
}

/// CONNECT (Alg. 3) of the neighbours `a` and `b` in a parent array whose roots point to
/// themselves.
pub(super) fn connect<T: Gray>(par: &mut [u32], f: &[T], mut a: usize, mut b: usize) {
    loop {
        if f[b] < f[a] {
            std::mem::swap(&mut a, &mut b);
        }
        a = level_root(par, f, a);
        b = peak_root(par, f, b, f[a]);
        if a == b {
            return;
        }
        if f[b] == f[a] && b > a {
            std::mem::swap(&mut a, &mut b);
        }
        let old = par[b] as usize;
        par[b] = a as u32;
        if old == b {
            return;
        }
        b = old;
    }
}

/// Canonical parent image, built band by band in parallel.
pub(super) fn parent_image<T: Gray>(
    values: &[T],
    width: usize,
    height: usize,
    conn: Connectivity,
    band_rows: usize,
) -> Vec<u32> {
    let band_rows = band_rows.max(1);
    let mut parent = vec![0u32; values.len()];
    if values.is_empty() {
        return parent;
    }
    parent
        .par_chunks_mut(band_rows * width)
        .zip(values.par_chunks(band_rows * width))
        .enumerate()
        .for_each(|(i, (par, val))| {
            let offset = (i * band_rows * width) as u32;
            let sorted = sort_pixels(val);
            let mut local = union_find(val, &sorted, width, val.len() / width, conn);
            canonicalize(&mut local, val, &sorted);
            for (o, l) in par.iter_mut().zip(local) {
                *o = l + offset;
            }
        });
    let eight = conn == Connectivity::Eight;
    for y in (band_rows..height).step_by(band_rows) {
        // Edges between row y-1 (band above) and row y (band below).
        let (up, down) = ((y - 1) * width, y * width);
        for x in 0..width {
            connect(&mut parent, values, up + x, down + x);
            if eight {
                if x > 0 {
                    connect(&mut parent, values, up + x - 1, down + x);
                }
                if x + 1 < width {
                    connect(&mut parent, values, up + x + 1, down + x);
                }
            }
        }
    }
    let old = &parent;
    (0..values.len())
        .into_par_iter()
        .map(|p| {
            let q = old[p] as usize;
            if q == p {
                p as u32
            } else {
                level_root(old, values, q) as u32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Attribute, MaxTree, Rule, TreeKind, naive};
    use super::*;
    use crate::image::Image;

    #[test]
    fn large_images_take_the_parallel_path_and_agree() {
        // 700x400 > PARALLEL_MIN_PIXELS: MaxTree::build uses the bands when rayon has threads.
        let mut s = 12345u64;
        let img = Image::from_fn(700, 400, |x, y| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x / 7 + y / 5) as u64 * 13 + (s >> 61)) as u8
        });
        for c in [Connectivity::Four, Connectivity::Eight] {
            let t = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
            let sorted = sort_pixels(img.data());
            let mut seq = union_find(img.data(), &sorted, 700, 400, c);
            canonicalize(&mut seq, img.data(), &sorted);
            assert_eq!(t.parent(), &seq[..]);
            // And the filter on a crop agrees with the threshold decomposition.
            let crop = Image::from_fn(40, 30, |x, y| img.get(x + 300, y + 200));
            let tc = MaxTree::build(crop.view(), TreeKind::Min, c).unwrap();
            assert_eq!(
                tc.filter(Attribute::Area, 20.0, Rule::Direct).filtered,
                naive::attribute_filter_naive(crop.view(), TreeKind::Min, Attribute::Area, 20.0, c)
            );
        }
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::super::cpu::proptests::{image_u8, image_u16};
    use super::super::{MaxTree, TreeKind};
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn bands_give_the_sequential_parent_u8(img in image_u8(), rows in 1usize..9, eight in any::<bool>()) {
            let c = if eight { Connectivity::Eight } else { Connectivity::Four };
            let seq = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
            let par = parent_image(img.data(), img.width(), img.height(), c, rows);
            prop_assert_eq!(seq.parent(), &par[..]);
        }

        #[test]
        fn bands_give_the_sequential_parent_u16(img in image_u16(), rows in 1usize..9, eight in any::<bool>()) {
            let c = if eight { Connectivity::Eight } else { Connectivity::Four };
            let seq = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
            let par = parent_image(img.data(), img.width(), img.height(), c, rows);
            prop_assert_eq!(seq.parent(), &par[..]);
        }
    }
}
