//! Max-tree (and min-tree) attribute filtering, exact on the CPU and on CUDA (Blin et al. 2022).
//!
//! **Representation** (paper §2.2). The max-tree of a grey image `f` is stored as a `parent`
//! image of `u32` raster indices in *canonical form*: with the total order
//! `p ≺ q ⇔ f(p) < f(q) or (f(p) = f(q) and p > q)`, the canonical element of a node (the set of
//! pixels of one connected component of `[f ≥ λ]` that are at level `λ`) is its ≺-smallest pixel,
//! i.e. its bottom-right-most pixel in raster order; every pixel points to the canonical element
//! of its node, a canonical element to the canonical element of its parent node, and the root
//! (the ≺-smallest pixel of the image) points to itself. So `parent(p) ≺ p` for every `p` but the
//! root, and the parent image of an input is unique: both backends produce exactly this array.
//! The min-tree is the max-tree of the inverted image (`T::MAX - f`). Connectivity is 4 or 8;
//! pixels outside the image have no neighbours.
//!
//! **CPU** ([`MaxTree::build`], `cpu.rs`): union-find with sorting (Berger et al. 2007, the
//! paper's Alg. 1): counting sort of the pixels by ≺ (one bucket per grey level, 8 and 16 bit),
//! union-find with path halving in reverse order, then one canonicalisation pass. Large 8-bit
//! images are built in bands of rows in parallel with rayon and merged along the band borders
//! by CONNECT (`parallel.rs`). Node arrays (one entry per canonical element, in ≺ order, root
//! first) give linear-time attribute passes.
//!
//! **Attributes** (`attributes.rs`, per node, `f64`): `area` (pixels), `height` (contrast:
//! `max f` over the component minus the parent node's level), `volume`
//! (`Σ (f(p) − parent level)` over the component), and the bounding box `bbox_width`,
//! `bbox_height`, `diameter` (the box's longest side, scikit-image's "maximal extension") and
//! `diagonal` (`√(w² + h²)`). For the root the parent level is taken
//! as the root's own level. They are computed once per tree and cached, so changing only the
//! threshold re-runs the cheap restitution pass ([`MaxTree::filter`]).
//!
//! **Rules** (Salembier et al. 1998, Urbach & Wilkinson 2002): a node *passes* when
//! `attribute ≥ threshold`. `direct`: removed nodes take the value of the nearest kept ancestor;
//! `min`: a node is kept when it and all its ancestors pass; `max`: when it or a descendant
//! passes; `subtractive`: kept nodes keep their contrast to their parent, removed ones flatten
//! into it (the output of a node is the sum of the kept contrasts on its path to the root). A
//! root that is removed takes the value 0 (`T::MIN` in tree space), as in scikit-image. All six
//! attributes are increasing, so for them the four rules give the same image. Results: the
//! filtered image and the residue `|input − filtered|` (the white top-hat for a max-tree, the
//! black top-hat for a min-tree).
//!
//! **GPU** (`gpu.rs` ↔ `kernels/maxtree.cu`): the paper's pipeline — tiles with 1D column
//! max-trees in shared memory (§5.1, Alg. 2), lock-free CONNECT with `atomicMax` on packed
//! (level, parent level, parent index) records (§4.2, Alg. 6), tile-border merging in global
//! memory (§4.3), flattening; the 8-connectivity grid simplification (§5.2, Props. 1-2, and a
//! corrected Prop. 3 for 4-connectivity); 64-bit records for 16-bit images (§5.3). Attributes
//! (subtree accumulation by doubling along ancestor pointers, `BITS` rounds) and restitution
//! (pointer jumping) stay on the GPU, and so does the residue: its summary ([`MaxTreeSummary`])
//! is reduced on the device, and the compose step reads the buffer where it is.
//!
//! [`area_opening`] / [`area_closing`] are scikit-image's `area_opening(image, area_threshold=N,
//! connectivity=1|2)` / `area_closing`: they keep the components of area ≥ N.

pub(crate) mod attributes;
pub mod cpu;
pub mod gpu;
#[cfg(test)]
pub(crate) mod naive;
pub mod output;
mod parallel;

use serde::{Deserialize, Serialize};

use crate::image::{Gray, Image, ImageView};
use crate::ops::OpError;

pub use super::Connectivity;
pub use cpu::MaxTree;
pub use gpu::{GpuGray, MaxTreeGpu, MaxTreeTuning, maxtree_gpu, maxtree_parent_gpu};
pub use output::{MaxTreeOutput, MaxTreeSummary};

/// Which component tree: of the upper level sets (max-tree, filters bright structures) or of the
/// lower level sets (min-tree, filters dark structures; built as the max-tree of the inverse).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TreeKind {
    /// Max-tree: openings (bright peaks are removed).
    #[default]
    Max,
    /// Min-tree: closings (dark basins are filled).
    Min,
}

/// Node attribute a filter thresholds (all are increasing: a node's value is at least its
/// children's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    /// Number of pixels of the component.
    #[default]
    Area,
    /// Contrast (dynamics): highest level in the component minus the parent node's level.
    Height,
    /// `Σ (f(p) − parent level)` over the component.
    Volume,
    /// Bounding-box width in pixels.
    BboxWidth,
    /// Bounding-box height in pixels.
    BboxHeight,
    /// Longest side of the bounding box, `max(w, h)` (scikit-image's `diameter_opening`).
    Diameter,
    /// Bounding-box diagonal `√(w² + h²)`.
    Diagonal,
}

impl Attribute {
    /// Every attribute, in a fixed order (the index used by caches and the GPU kernels).
    pub const ALL: [Attribute; 7] = [
        Self::Area,
        Self::Height,
        Self::Volume,
        Self::BboxWidth,
        Self::BboxHeight,
        Self::Diameter,
        Self::Diagonal,
    ];

    /// Position in [`Attribute::ALL`] (the code passed to the kernels).
    #[must_use]
    pub fn index(self) -> usize {
        match self {
            Self::Area => 0,
            Self::Height => 1,
            Self::Volume => 2,
            Self::BboxWidth => 3,
            Self::BboxHeight => 4,
            Self::Diameter => 5,
            Self::Diagonal => 6,
        }
    }

    /// The name used in configs and on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Area => "area",
            Self::Height => "height",
            Self::Volume => "volume",
            Self::BboxWidth => "bbox_width",
            Self::BboxHeight => "bbox_height",
            Self::Diameter => "diameter",
            Self::Diagonal => "diagonal",
        }
    }
}

/// How removed nodes are restituted (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// Nodes that fail take the value of the nearest kept ancestor.
    #[default]
    Direct,
    /// A node is kept when it and all its ancestors pass.
    Min,
    /// A node is kept when it or one of its descendants passes.
    Max,
    /// Kept nodes keep their contrast to their parent; the output is the sum of kept contrasts.
    Subtractive,
}

impl Rule {
    /// Code passed to the kernels.
    #[must_use]
    pub fn index(self) -> u32 {
        match self {
            Self::Direct => 0,
            Self::Min => 1,
            Self::Max => 2,
            Self::Subtractive => 3,
        }
    }
}

/// The `[maxtree]` config section and the CLI's attribute-filter options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaxTreeParams {
    /// Run the analysis in the frame pipeline.
    pub enabled: bool,
    /// `max` (openings) or `min` (closings).
    pub tree: TreeKind,
    /// Attribute thresholded.
    pub attribute: Attribute,
    /// Nodes with `attribute >= threshold` pass (scikit-image's `area_threshold`).
    pub threshold: f64,
    /// Restitution rule.
    pub rule: Rule,
    /// 4 or 8.
    pub connectivity: u32,
}

impl Default for MaxTreeParams {
    fn default() -> Self {
        Self {
            enabled: true,
            tree: TreeKind::Max,
            attribute: Attribute::Area,
            threshold: 64.0,
            rule: Rule::Direct,
            connectivity: 4,
        }
    }
}

impl MaxTreeParams {
    /// Checks every field, naming the bad one and the allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        if !self.threshold.is_finite() || self.threshold < 0.0 {
            return Err(OpError::InvalidParam(format!(
                "maxtree.threshold = {:?}: must be a finite number >= 0",
                self.threshold
            )));
        }
        Connectivity::from_neighbors(self.connectivity).map_err(|_| {
            OpError::InvalidParam(format!(
                "maxtree.connectivity = {}: allowed values are 4 and 8",
                self.connectivity
            ))
        })?;
        Ok(())
    }

    /// The connectivity as an enum (after [`MaxTreeParams::validate`]).
    pub fn connectivity(&self) -> Result<Connectivity, OpError> {
        Connectivity::from_neighbors(self.connectivity)
    }
}

/// A filtered image and its residue `|input − filtered|`.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterOutput<T> {
    /// The attribute-filtered image (same type and size as the input).
    pub filtered: Image<T>,
    /// `input − filtered` for a max-tree, `filtered − input` for a min-tree.
    pub residue: Image<T>,
}

/// Area opening, exactly scikit-image's `area_opening(image, area_threshold, connectivity)`:
/// every pixel takes the highest level `t` at which its component of `[f ≥ t]` has at least
/// `area_threshold` pixels (0 when even the whole image is smaller). `area_threshold` 0 or 1 is
/// the identity.
pub fn area_opening<T: Gray>(
    img: ImageView<'_, T>,
    area_threshold: u64,
    connectivity: Connectivity,
) -> Result<Image<T>, OpError> {
    let tree = MaxTree::build(img, TreeKind::Max, connectivity)?;
    Ok(tree
        .filter(Attribute::Area, area_threshold as f64, Rule::Direct)
        .filtered)
}

/// Area closing, exactly scikit-image's `area_closing(image, area_threshold, connectivity)`:
/// the dual of [`area_opening`] (dark components smaller than `area_threshold` are filled).
pub fn area_closing<T: Gray>(
    img: ImageView<'_, T>,
    area_threshold: u64,
    connectivity: Connectivity,
) -> Result<Image<T>, OpError> {
    let tree = MaxTree::build(img, TreeKind::Min, connectivity)?;
    Ok(tree
        .filter(Attribute::Area, area_threshold as f64, Rule::Direct)
        .filtered)
}

/// Attribute filter on the max- or min-tree as `params` say: filtered image and residue.
pub fn attribute_filter<T: Gray>(
    img: ImageView<'_, T>,
    params: &MaxTreeParams,
) -> Result<FilterOutput<T>, OpError> {
    params.validate()?;
    let tree = MaxTree::build(img, params.tree, params.connectivity()?)?;
    Ok(tree.filter(params.attribute, params.threshold, params.rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip_and_validate() {
        let p = MaxTreeParams::default();
        p.validate().unwrap();
        let s = serde_json::to_string(&p).unwrap();
        let q: MaxTreeParams = serde_json::from_str(&s).unwrap();
        assert_eq!(p, q);
        let q: MaxTreeParams = serde_json::from_str(
            r#"{"tree":"min","attribute":"bbox_width","rule":"subtractive","connectivity":8}"#,
        )
        .unwrap();
        assert_eq!(q.tree, TreeKind::Min);
        assert_eq!(q.attribute, Attribute::BboxWidth);
        assert_eq!(q.rule, Rule::Subtractive);
        assert!(serde_json::from_str::<MaxTreeParams>(r#"{"bogus":1}"#).is_err());
        let bad = MaxTreeParams {
            connectivity: 6,
            ..MaxTreeParams::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("connectivity")
        );
        let bad = MaxTreeParams {
            threshold: f64::NAN,
            ..MaxTreeParams::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("threshold")
        );
    }

    #[test]
    fn attribute_indices_follow_all() {
        for (i, a) in Attribute::ALL.iter().enumerate() {
            assert_eq!(a.index(), i);
        }
    }
}

#[cfg(test)]
mod goldens {
    //! Exact equality with scikit-image 0.26 `area_opening` / `area_closing` on crops of the real
    //! samples (`tests/data/maxtree/make_goldens.py` made them).
    use super::*;

    /// A 2D C-order `.npy` of `|u1` or `<u2`, as (width, height, values as u32, bits).
    fn npy(bytes: &[u8]) -> (usize, usize, Vec<u32>, u32) {
        assert_eq!(&bytes[..6], b"\x93NUMPY");
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
        assert!(header.contains("'fortran_order': False"));
        let bits = if header.contains("'|u1'") {
            8
        } else if header.contains("'<u2'") {
            16
        } else {
            panic!("{header}")
        };
        let shape = &header[header.find("'shape': (").unwrap() + 10..];
        let shape = &shape[..shape.find(')').unwrap()];
        let dims: Vec<usize> = shape
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        let (h, w) = (dims[0], dims[1]);
        let data = &bytes[10 + hlen..];
        let v: Vec<u32> = if bits == 8 {
            data[..w * h].iter().map(|&b| u32::from(b)).collect()
        } else {
            data[..2 * w * h]
                .as_chunks::<2>()
                .0
                .iter()
                .map(|&c| u32::from(u16::from_le_bytes(c)))
                .collect()
        };
        (w, h, v, bits)
    }

    macro_rules! golden {
        ($name:literal) => {
            include_bytes!(concat!("../../../tests/data/maxtree/", $name, ".npy")).as_slice()
        };
    }

    fn check(input: &[u8], expected: &[u8], closing: bool, area: u64, conn: Connectivity) {
        let (w, h, v, bits) = npy(input);
        let (ew, eh, e, ebits) = npy(expected);
        assert_eq!((w, h, bits), (ew, eh, ebits));
        let got: Vec<u32> = if bits == 8 {
            let img = Image::from_vec(w, h, v.iter().map(|&x| x as u8).collect()).unwrap();
            let f = if closing { area_closing } else { area_opening };
            f(img.view(), area, conn)
                .unwrap()
                .data()
                .iter()
                .map(|&x| u32::from(x))
                .collect()
        } else {
            let img = Image::from_vec(w, h, v.iter().map(|&x| x as u16).collect()).unwrap();
            let f = if closing { area_closing } else { area_opening };
            f(img.view(), area, conn)
                .unwrap()
                .data()
                .iter()
                .map(|&x| u32::from(x))
                .collect()
        };
        let diff = got.iter().zip(&e).filter(|(a, b)| a != b).count();
        assert_eq!(diff, 0, "{diff} pixels differ from scikit-image");
        assert_ne!(v, e, "the golden should change the image");
    }

    #[test]
    fn area_opening_closing_equal_scikit_image() {
        use Connectivity::{Eight, Four};
        check(
            golden!("baboon_u8"),
            golden!("baboon_u8_opening_a30_c4"),
            false,
            30,
            Four,
        );
        check(
            golden!("baboon_u8"),
            golden!("baboon_u8_opening_a100_c8"),
            false,
            100,
            Eight,
        );
        check(
            golden!("baboon_u8"),
            golden!("baboon_u8_closing_a50_c4"),
            true,
            50,
            Four,
        );
        check(
            golden!("baboon_u8"),
            golden!("baboon_u8_closing_a200_c8"),
            true,
            200,
            Eight,
        );
        check(
            golden!("text_u8"),
            golden!("text_u8_closing_a8_c8"),
            true,
            8,
            Eight,
        );
        check(
            golden!("text_u8"),
            golden!("text_u8_opening_a64_c4"),
            false,
            64,
            Four,
        );
        check(
            golden!("building_u8"),
            golden!("building_u8_opening_a500_c4"),
            false,
            500,
            Four,
        );
        check(
            golden!("building_u8"),
            golden!("building_u8_closing_a20000_c8"),
            true,
            20000,
            Eight,
        );
        check(
            golden!("fruits_u16"),
            golden!("fruits_u16_opening_a20_c4"),
            false,
            20,
            Four,
        );
        check(
            golden!("fruits_u16"),
            golden!("fruits_u16_closing_a40_c8"),
            true,
            40,
            Eight,
        );
    }
}
