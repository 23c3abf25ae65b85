//! CPU max-tree: union-find with sorting (Berger et al. 2007; the paper's Alg. 1), canonical form.
//!
//! 1. Counting sort of the pixels in ≺ order (level ascending, raster index descending within a
//!    level): one bucket per grey level (256 or 65536), filled from the last pixel back.
//! 2. Union-find in reverse ≺ order (highest level first, lowest index first within a level):
//!    each pixel becomes the root of its set and the parent of the roots of its already-processed
//!    neighbours' sets (path halving on a separate `zpar` array). Within a flat component the
//!    last pixel processed — its largest raster index — ends as the set root, i.e. the canonical
//!    element of §2.2.
//! 3. Canonicalisation in ≺ order (root first): `parent(p) ← parent(parent(p))` when
//!    `parent(p)` is not canonical.
//! 4. Node arrays: canonical elements in ≺ order (so a parent always precedes its children),
//!    the node of every pixel, and each node's parent node.

use std::sync::OnceLock;

use super::{Attribute, Connectivity, TreeKind};
use crate::image::{Gray, Image, ImageView};
use crate::ops::OpError;

/// A max-tree (or min-tree) of one image, in canonical form, with its nodes and cached attributes.
#[derive(Debug)]
pub struct MaxTree<T> {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) kind: TreeKind,
    pub(super) connectivity: Connectivity,
    /// The image in tree space (inverted for a min-tree), packed.
    pub(super) values: Vec<T>,
    /// Canonical parent image (root points to itself).
    pub(super) parent: Vec<u32>,
    /// Canonical elements in ≺ order (root first).
    pub(super) nodes: Vec<u32>,
    /// Node id of every pixel.
    pub(super) node_of: Vec<u32>,
    /// Parent node id of every node (the root's is itself, id 0).
    pub(super) node_parent: Vec<u32>,
    /// Attribute caches, indexed by [`Attribute::index`].
    pub(super) attr_cache: [OnceLock<Vec<f64>>; Attribute::ALL.len()],
}

impl<T: Gray> MaxTree<T> {
    /// Builds the max-tree (or the min-tree) of `img` with the given connectivity.
    pub fn build(
        img: ImageView<'_, T>,
        kind: TreeKind,
        connectivity: Connectivity,
    ) -> Result<Self, OpError> {
        let (width, height) = (img.width(), img.height());
        let n = width
            .checked_mul(height)
            .filter(|&n| n < u32::MAX as usize)
            .ok_or_else(|| {
                OpError::Unsupported(format!("{width}x{height}: more than 2^32-1 pixels"))
            })?;
        let mut values = Vec::with_capacity(n);
        for row in img.rows() {
            match kind {
                TreeKind::Max => values.extend_from_slice(row),
                TreeKind::Min => values.extend(row.iter().map(|v| v.invert())),
            }
        }
        // 16-bit trees are deep: merging bands walks long chains and loses to the sequential pass.
        let parent = if T::BITS == 8 && n >= PARALLEL_MIN_PIXELS && rayon::current_num_threads() > 1
        {
            let band = height.div_ceil(4 * rayon::current_num_threads()).max(16);
            super::parallel::parent_image(&values, width, height, connectivity, band)
        } else {
            let sorted = sort_pixels(&values);
            let mut parent = union_find(&values, &sorted, width, height, connectivity);
            canonicalize(&mut parent, &values, &sorted);
            parent
        };
        let mut tree = Self {
            width,
            height,
            kind,
            connectivity,
            values,
            parent,
            nodes: Vec::new(),
            node_of: vec![0; n],
            node_parent: Vec::new(),
            attr_cache: Default::default(),
        };
        tree.index_nodes();
        Ok(tree)
    }

    /// Image width.
    #[must_use]
    pub fn width(&self) -> usize {
        self.width
    }
    /// Image height.
    #[must_use]
    pub fn height(&self) -> usize {
        self.height
    }
    /// Max- or min-tree.
    #[must_use]
    pub fn kind(&self) -> TreeKind {
        self.kind
    }
    /// Connectivity the tree was built with.
    #[must_use]
    pub fn connectivity(&self) -> Connectivity {
        self.connectivity
    }
    /// The canonical parent image as raster indices (root points to itself).
    #[must_use]
    pub fn parent(&self) -> &[u32] {
        &self.parent
    }
    /// The canonical parent image as an image.
    #[must_use]
    pub fn parent_image(&self) -> Image<u32> {
        Image::from_fn(self.width, self.height, |x, y| {
            self.parent[y * self.width + x]
        })
    }
    /// Number of nodes (canonical elements).
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
    /// Raster index of each node's canonical element, in ≺ order (root first).
    #[must_use]
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }
    /// Node id of every pixel.
    #[must_use]
    pub fn node_of(&self) -> &[u32] {
        &self.node_of
    }
    /// Parent node id of every node (root: 0, itself).
    #[must_use]
    pub fn node_parent(&self) -> &[u32] {
        &self.node_parent
    }
    /// Level of node `id` in tree space (inverted for a min-tree).
    #[must_use]
    pub(crate) fn node_level(&self, id: usize) -> u32 {
        self.nodes
            .get(id)
            .map_or(0, |&p| self.values[p as usize].to_u32())
    }

    /// Node arrays from the canonical parent image: canonical elements in ≺ order (counting sort
    /// by level, index descending), then every pixel's node and every node's parent.
    fn index_nodes(&mut self) {
        let (par, val) = (&self.parent, &self.values);
        let canonical = |p: usize| {
            let q = par[p] as usize;
            q == p || val[q] != val[p]
        };
        let mut start = vec![0u32; (1usize << T::BITS) + 1];
        for p in 0..val.len() {
            if canonical(p) {
                start[val[p].to_u32() as usize + 1] += 1;
            }
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut nodes = vec![0u32; start.last().copied().unwrap_or(0) as usize];
        for p in (0..val.len()).rev() {
            if canonical(p) {
                let b = &mut start[val[p].to_u32() as usize];
                nodes[*b as usize] = p as u32;
                *b += 1;
            }
        }
        for (id, &p) in nodes.iter().enumerate() {
            self.node_of[p as usize] = id as u32;
        }
        for (p, &q) in par.iter().enumerate() {
            if !canonical(p) {
                self.node_of[p] = self.node_of[q as usize];
            }
        }
        self.node_parent = nodes
            .iter()
            .map(|&p| self.node_of[par[p as usize] as usize])
            .collect();
        self.nodes = nodes;
    }

    /// Per-node attribute values (computed on first use, then cached).
    pub fn attribute(&self, attribute: Attribute) -> &[f64] {
        self.attr_cache[attribute.index()]
            .get_or_init(|| super::attributes::compute(self, attribute))
    }
}

/// Pixels in ≺ order: level ascending, raster index descending within a level (counting sort).
pub(super) fn sort_pixels<T: Gray>(values: &[T]) -> Vec<u32> {
    let buckets = 1usize << T::BITS;
    let mut start = vec![0u32; buckets + 1];
    for v in values {
        start[v.to_u32() as usize + 1] += 1;
    }
    for i in 0..buckets {
        start[i + 1] += start[i];
    }
    let mut sorted = vec![0u32; values.len()];
    for (p, v) in values.iter().enumerate().rev() {
        let b = &mut start[v.to_u32() as usize];
        sorted[*b as usize] = p as u32;
        *b += 1;
    }
    sorted
}

const UNDEF: u32 = u32::MAX;

/// 8-bit images at least this large are built band-parallel (`parallel.rs`) when rayon has threads.
const PARALLEL_MIN_PIXELS: usize = 1 << 18;

/// Canonicalisation in ≺ order (root first): `parent(p) ← parent(parent(p))` when `parent(p)` is
/// not canonical.
pub(super) fn canonicalize<T: Gray>(par: &mut [u32], val: &[T], sorted: &[u32]) {
    for &p in sorted {
        let p = p as usize;
        let q = par[p] as usize;
        let pq = par[q] as usize;
        if val[pq] == val[q] {
            par[p] = pq as u32;
        }
    }
}

fn find_root(zpar: &mut [u32], mut x: u32) -> u32 {
    // Path halving.
    loop {
        let p = zpar[x as usize];
        if p == x {
            return x;
        }
        let gp = zpar[p as usize];
        zpar[x as usize] = gp;
        x = gp;
    }
}

/// Union-find in reverse ≺ order; returns the (not yet canonical) parent image.
pub(super) fn union_find<T: Gray>(
    values: &[T],
    sorted: &[u32],
    width: usize,
    height: usize,
    conn: Connectivity,
) -> Vec<u32> {
    let n = values.len();
    let mut parent = vec![0u32; n];
    let mut zpar = vec![UNDEF; n];
    let eight = conn == Connectivity::Eight;
    for &p in sorted.iter().rev() {
        let pu = p as usize;
        parent[pu] = p;
        zpar[pu] = p;
        let (x, y) = (pu % width, pu / width);
        let visit = |q: usize, zpar: &mut [u32], parent: &mut [u32]| {
            if zpar[q] != UNDEF {
                let r = find_root(zpar, q as u32);
                if r != p {
                    parent[r as usize] = p;
                    zpar[r as usize] = p;
                }
            }
        };
        let (l, r, u, d) = (x > 0, x + 1 < width, y > 0, y + 1 < height);
        if u {
            if eight && l {
                visit(pu - width - 1, &mut zpar, &mut parent);
            }
            visit(pu - width, &mut zpar, &mut parent);
            if eight && r {
                visit(pu - width + 1, &mut zpar, &mut parent);
            }
        }
        if l {
            visit(pu - 1, &mut zpar, &mut parent);
        }
        if r {
            visit(pu + 1, &mut zpar, &mut parent);
        }
        if d {
            if eight && l {
                visit(pu + width - 1, &mut zpar, &mut parent);
            }
            visit(pu + width, &mut zpar, &mut parent);
            if eight && r {
                visit(pu + width + 1, &mut zpar, &mut parent);
            }
        }
    }
    parent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(w: usize, h: usize, v: &[u8], c: Connectivity) -> MaxTree<u8> {
        let img = Image::from_vec(w, h, v.to_vec()).unwrap();
        MaxTree::build(img.view(), TreeKind::Max, c).unwrap()
    }

    #[test]
    fn paper_figure_example() {
        // Figure 1 of Carlinet & Géraud 2014 (the scikit-image docstring example), 8-connected.
        let t = tree(
            3,
            3,
            &[15, 13, 16, 12, 12, 10, 16, 12, 14],
            Connectivity::Eight,
        );
        // Root: the only pixel at level 10 (index 5).
        assert_eq!(t.parent()[5], 5);
        // Level 12 flat zone {3, 4, 7}: canonical = 7.
        assert_eq!(t.parent()[3], 7);
        assert_eq!(t.parent()[4], 7);
        assert_eq!(t.parent()[7], 5);
        // 13 and 14 hang on 12; 15 on 13 (8-connected via 0-1); 16s: 2 on 13, 6 on 12.
        assert_eq!(t.parent()[1], 7);
        assert_eq!(t.parent()[8], 7);
        assert_eq!(t.parent()[0], 1);
        assert_eq!(t.parent()[2], 1);
        assert_eq!(t.parent()[6], 7);
        assert_eq!(t.node_count(), 7);
    }

    #[test]
    fn flat_image_is_one_node_rooted_bottom_right() {
        let t = tree(4, 3, &[7; 12], Connectivity::Four);
        assert!(t.parent().iter().all(|&p| p == 11));
        assert_eq!(t.node_count(), 1);
    }

    #[test]
    fn empty_and_single_pixel() {
        let t = tree(0, 5, &[], Connectivity::Four);
        assert_eq!(t.node_count(), 0);
        assert!(t.parent().is_empty());
        let t = tree(1, 1, &[9], Connectivity::Eight);
        assert_eq!(t.parent(), &[0]);
        assert_eq!(t.node_count(), 1);
    }

    #[test]
    fn strided_input_and_min_tree() {
        let img = Image::from_strided(3, 2, 5, vec![1u16, 5, 1, 99, 99, 1, 1, 1]).unwrap();
        let t = MaxTree::build(img.view(), TreeKind::Max, Connectivity::Four).unwrap();
        // The 5 at index 1 is its own node hanging on the root (index 5); padding is ignored.
        assert_eq!(t.parent(), &[5, 5, 5, 5, 5, 5]);
        assert_eq!(t.node_count(), 2);
        let img = Image::from_vec(3, 2, vec![1u16, 5, 1, 1, 1, 1]).unwrap();
        let t = MaxTree::build(img.view(), TreeKind::Max, Connectivity::Four).unwrap();
        assert_eq!(t.parent(), &[5, 5, 5, 5, 5, 5]);
        let t = MaxTree::build(img.view(), TreeKind::Min, Connectivity::Four).unwrap();
        // Inverted: 5 becomes the lowest level, the root.
        assert_eq!(t.parent(), &[5, 1, 5, 5, 5, 1]);
    }

    #[test]
    fn sort_is_prec_order() {
        let v = [3u8, 1, 3, 0, 1];
        assert_eq!(sort_pixels(&v), vec![3, 4, 1, 2, 0]);
    }
}

#[cfg(test)]
pub(super) mod proptests {
    use proptest::prelude::*;

    use super::super::naive::{attribute_filter_naive, canonical_parent_naive};
    use super::super::{Attribute, Connectivity, Rule, area_closing, area_opening};
    use super::*;

    /// Random images of 1..=40 x 1..=40 pixels with few (2-4) or many grey levels.
    pub(crate) fn image_u8() -> impl Strategy<Value = Image<u8>> {
        (
            1usize..=40,
            1usize..=40,
            prop_oneof![Just(2u32), Just(3), Just(4), Just(256)],
        )
            .prop_flat_map(|(w, h, k)| {
                prop::collection::vec(0..k, w * h).prop_map(move |v| {
                    let step = if k >= 256 { 1 } else { 255 / (k - 1) };
                    Image::from_vec(w, h, v.into_iter().map(|x| (x * step) as u8).collect())
                        .unwrap()
                })
            })
    }

    /// 16-bit images: few levels spread over the range, or arbitrary 16-bit values.
    pub(crate) fn image_u16() -> impl Strategy<Value = Image<u16>> {
        (
            1usize..=40,
            1usize..=40,
            prop_oneof![Just(3u32), Just(65536)],
        )
            .prop_flat_map(|(w, h, k)| {
                prop::collection::vec(0..k, w * h).prop_map(move |v| {
                    let step = if k >= 65536 { 1 } else { 65535 / (k - 1) };
                    Image::from_vec(w, h, v.into_iter().map(|x| (x * step) as u16).collect())
                        .unwrap()
                })
            })
    }

    fn conn() -> impl Strategy<Value = Connectivity> {
        prop_oneof![Just(Connectivity::Four), Just(Connectivity::Eight)]
    }
    fn kind() -> impl Strategy<Value = TreeKind> {
        prop_oneof![Just(TreeKind::Max), Just(TreeKind::Min)]
    }

    /// `parent(p) ≺ p` for all but the root, every parent canonical, one root (the ≺-minimum).
    pub(crate) fn check_canonical<T: Gray>(t: &MaxTree<T>) -> Result<(), TestCaseError> {
        let (par, g) = (t.parent(), &t.values);
        let prec = |a: usize, b: usize| g[a] < g[b] || (g[a] == g[b] && a > b);
        let roots: Vec<usize> = (0..par.len()).filter(|&p| par[p] as usize == p).collect();
        if par.is_empty() {
            return Ok(());
        }
        prop_assert_eq!(roots.len(), 1);
        let root = roots[0];
        prop_assert!(
            (0..g.len()).all(|p| p == root || prec(root, p)),
            "root is not the minimum"
        );
        for p in 0..par.len() {
            let q = par[p] as usize;
            if p != root {
                prop_assert!(prec(q, p), "parent({p}) = {q} is not ≺ {p}");
            }
            let qq = par[q] as usize;
            prop_assert!(
                qq == q || g[qq] < g[q],
                "parent({p}) = {q} is not canonical"
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn parent_is_the_canonical_definition_u8(img in image_u8(), c in conn(), k in kind()) {
            let t = MaxTree::build(img.view(), k, c).unwrap();
            check_canonical(&t)?;
            prop_assert_eq!(t.parent(), &canonical_parent_naive(img.view(), k, c)[..]);
        }

        #[test]
        fn parent_is_the_canonical_definition_u16(img in image_u16(), c in conn(), k in kind()) {
            let t = MaxTree::build(img.view(), k, c).unwrap();
            check_canonical(&t)?;
            prop_assert_eq!(t.parent(), &canonical_parent_naive(img.view(), k, c)[..]);
        }

        #[test]
        fn area_opening_and_closing_equal_threshold_decomposition(
            img in image_u8(), c in conn(), n in 0u64..60,
        ) {
            let o = area_opening(img.view(), n, c).unwrap();
            prop_assert_eq!(&o, &attribute_filter_naive(img.view(), TreeKind::Max, Attribute::Area, n as f64, c));
            let cl = area_closing(img.view(), n, c).unwrap();
            prop_assert_eq!(&cl, &attribute_filter_naive(img.view(), TreeKind::Min, Attribute::Area, n as f64, c));
        }

        #[test]
        fn area_opening_u16_equals_threshold_decomposition(img in image_u16(), c in conn(), n in 0u64..60) {
            let o = area_opening(img.view(), n, c).unwrap();
            prop_assert_eq!(&o, &attribute_filter_naive(img.view(), TreeKind::Max, Attribute::Area, n as f64, c));
            let cl = area_closing(img.view(), n, c).unwrap();
            prop_assert_eq!(&cl, &attribute_filter_naive(img.view(), TreeKind::Min, Attribute::Area, n as f64, c));
        }

        #[test]
        fn every_attribute_and_rule_equals_threshold_decomposition(
            img in image_u8(), c in conn(), k in kind(), ai in 0..Attribute::ALL.len(), q in 0.0f64..1.0, ri in 0usize..4,
        ) {
            let a = Attribute::ALL[ai];
            let t = MaxTree::build(img.view(), k, c).unwrap();
            // A threshold among the attribute values (so that some nodes pass and some fail).
            let mut vals = t.attribute(a).to_vec();
            vals.sort_by(f64::total_cmp);
            let thr = vals[((vals.len() - 1) as f64 * q) as usize];
            let rule = [Rule::Direct, Rule::Min, Rule::Max, Rule::Subtractive][ri];
            let o = t.filter(a, thr, rule);
            prop_assert_eq!(&o.filtered, &attribute_filter_naive(img.view(), k, a, thr, c));
            // Residue = |input - filtered|.
            for (i, (&f, &r)) in img.data().iter().zip(o.residue.data()).enumerate() {
                let out = o.filtered.data()[i];
                prop_assert_eq!(r, f.abs_diff(out), "residue at {}", i);
            }
        }

        #[test]
        fn sixteen_bit_attributes_equal_threshold_decomposition(
            img in image_u16(), c in conn(), ai in 0..Attribute::ALL.len(), q in 0.0f64..1.0,
        ) {
            let a = Attribute::ALL[ai];
            let t = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
            let mut vals = t.attribute(a).to_vec();
            vals.sort_by(f64::total_cmp);
            let thr = vals[((vals.len() - 1) as f64 * q) as usize];
            prop_assert_eq!(
                &t.filter(a, thr, Rule::Direct).filtered,
                &attribute_filter_naive(img.view(), TreeKind::Max, a, thr, c)
            );
        }

        #[test]
        fn strided_views_give_the_packed_result(img in image_u8(), pad in 1usize..5, c in conn()) {
            let (w, h) = (img.width(), img.height());
            let mut data = vec![77u8; (w + pad) * h];
            for y in 0..h {
                data[y * (w + pad)..y * (w + pad) + w].copy_from_slice(img.row(y));
            }
            let s = Image::from_strided(w, h, w + pad, data).unwrap();
            let a = MaxTree::build(s.view(), TreeKind::Max, c).unwrap();
            let b = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
            prop_assert_eq!(a.parent(), b.parent());
        }
    }
}
