//! Felzenszwalb–Huttenlocher graph-based segmentation: an exact scikit-image CPU reference
//! (Kruskal) and a GPU version (atomics-based Borůvka, Baranwal et al., ETH report §3.1 and
//! Appendix A) with a segmentation hierarchy (§2.2, §3.2.3).
//!
//! # The definition (scikit-image 0.26 `felzenszwalb(image, scale, sigma, min_size)`)
//! 1. Smoothing: [`crate::ops::blur`] (`img_as_float64`, Gaussian `sigma`, `reflect`, truncate 4).
//! 2. Graph: 8-connected grid; edge weight = Euclidean distance of the smoothed colours
//!    (`sqrt(Σ_c d_c²)`, channels summed in order). Edges are listed right, down, down-right,
//!    up-right (each block in raster order) and sorted by weight.
//! 3. Kruskal with the merge predicate `w < min(Int(C1) + k/|C1|, Int(C2) + k/|C2|)`,
//!    `k = scale / 255`, where `Int(C)` is the largest MST edge inside `C`. scikit-image compares
//!    strictly (`<`) and rounds each threshold to `f32` before comparing with the `f64` weight;
//!    [`cpu`] does the same.
//! 4. `min_size`: a second pass over the sorted edges joins the two sides of every edge where
//!    either side is smaller than `min_size`.
//! 5. Labels `0..n-1` numbered in raster order of each segment's first pixel.
//!
//! scikit-image sorts with NumPy's default (unstable, SIMD) `argsort`; [`cpu`] sorts by
//! `(weight, edge index)`. Labels are identical unless two edges of exactly equal non-zero
//! weight compete (synthetic images with flat patches); see `tests/data/segmentation/README.md`.
//!
//! # GPU: exact rounds after the atomics-based Borůvka ([`gpu`], `kernels/segmentation.cu`)
//! The paper's loop (least outgoing edge per pixel, `atomicMin` per component on packed
//! `(weight, edge id)` keys, mutual-pair cycle removal, predicate, parent update, flatten,
//! sizes/`Int` in place) runs in rounds on the GPU, but plain Borůvka evaluates the predicate
//! out of Kruskal's order and leaks: on real frames whole images collapse into a few segments,
//! and even Kruskal with edges reordered inside 1 % weight buckets only reaches ASA 0.91. So
//! every round decides exactly what Kruskal decides ([`boruvka`] proves the rule): a component
//! an edge fails freezes for good, between freezes merges are order-free single linkage, and
//! each tree's core joins in key order, so one sort per tree gives every step Kruskal's own
//! statistics (the words — tree, core, caterpillar, sink, rounds — are defined in [`gpu`]).
//! scikit-image's arithmetic throughout (`f64` blur and weights, `f32`-rounded thresholds); the
//! `min_size` pass runs the same rounds with its own predicate. The result equals a sequential
//! Kruskal over the same keys ([`boruvka::kruskal_keys`], property-tested) and on the sample
//! images the CPU reference: identical labels except for exact ties (ASA >= 0.9998). 1080p
//! frames take ~20 merge and 1-2 `min_size` rounds, see `BENCHMARKS.md`. [`boruvka`] is the
//! sequential CPU model of every kernel: the GPU equals it bit for bit (labels, rounds,
//! hierarchy).
//!
//! # Hierarchy
//! Every round records, for each component root it absorbs, the new root and the round
//! ([`SegmentationHierarchy`]): two arrays of one entry per pixel hold all levels, and
//! [`SegmentationHierarchy::labels_at`] (or `SegmentationGpu::enqueue_level`) extracts any level without
//! recomputing. Level 0 is one segment per pixel; the last level is the final segmentation.

pub mod boruvka;
pub mod cpu;
pub mod gpu;
pub mod metrics;
#[cfg(test)]
pub(crate) mod naive;
pub mod overlay;

#[cfg(test)]
mod goldens;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::image::Image;
use crate::ops::OpError;
use crate::ops::blur::BlurParams;

pub use boruvka::felzenszwalb_boruvka;
pub use cpu::{felzenszwalb, felzenszwalb_rgb};
#[cfg(feature = "profiling")]
pub use gpu::SegmentationProfiling;
pub use gpu::{Finisher, SegmentationGpu, SegmentationTuning, segment_gpu, segment_gpu_rgb};
pub use metrics::{LabelCheck, asa, check_labels, undersegmentation_error};
pub use overlay::{
    OverlayMode, overlay_gray, overlay_rgb, overlay_segments_gray, overlay_segments_rgb,
};

/// Largest round cap per phase (the hierarchy stores global round numbers as `u16`).
pub const MAX_ROUNDS_LIMIT: u32 = 4000;

/// Felzenszwalb segmentation parameters (scikit-image names, plus the GPU round caps).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentationParams {
    /// Observation scale `k` (higher: fewer, larger segments). scikit-image's default is 1;
    /// ours is 100, a useful level for video.
    pub scale: f64,
    /// Gaussian smoothing before building the graph.
    pub sigma: f64,
    /// Minimum segment size, enforced by post-processing merges.
    pub min_size: usize,
    /// GPU/rounds: at most this many merge rounds (the device loops without reading back;
    /// rounds after the last one that changed anything return at once). 1080p frames need
    /// about 20 (photographs and video alike, scale 100 to 500); a capped run is a refinement
    /// of the exact result (fewer merges), flagged in [`SegmentationOutput::capped`].
    pub max_rounds: u32,
    /// GPU/rounds: at most this many `min_size` rounds.
    pub max_min_size_rounds: u32,
    /// GPU: launch the rounds recent frames needed instead of the caps and let the finisher run
    /// the rest of each phase (fewer empty launches on video, one captured graph a round-count
    /// bucket). A frame that still needs more is run again with doubled caps (up to
    /// `max_rounds` / `max_min_size_rounds`) before its download, so the result is the same as
    /// without this option.
    pub adaptive_rounds: bool,
}

impl Default for SegmentationParams {
    fn default() -> Self {
        Self {
            scale: 100.0,
            sigma: 0.8,
            min_size: 20,
            max_rounds: 256,
            max_min_size_rounds: 128,
            adaptive_rounds: true,
        }
    }
}

impl SegmentationParams {
    /// The smoothing step's parameters.
    #[must_use]
    pub fn blur(&self) -> BlurParams {
        BlurParams::with_sigma(self.sigma)
    }

    /// Checks every field and names the bad one.
    pub fn validate(&self) -> Result<(), OpError> {
        if !self.scale.is_finite() || self.scale < 0.0 {
            return Err(OpError::InvalidParam(format!(
                "scale must be a finite number >= 0, got {:?}",
                self.scale
            )));
        }
        self.blur().validate()?;
        if self.min_size > u32::MAX as usize {
            return Err(OpError::InvalidParam(format!(
                "min_size must be at most {}, got {}",
                u32::MAX,
                self.min_size
            )));
        }
        if self.max_rounds == 0 || self.max_rounds > MAX_ROUNDS_LIMIT {
            return Err(OpError::InvalidParam(format!(
                "max_rounds must be in 1..={MAX_ROUNDS_LIMIT}, got {}",
                self.max_rounds
            )));
        }
        if self.max_min_size_rounds > MAX_ROUNDS_LIMIT {
            return Err(OpError::InvalidParam(format!(
                "max_min_size_rounds must be in 0..={MAX_ROUNDS_LIMIT}, got {}",
                self.max_min_size_rounds
            )));
        }
        Ok(())
    }

    /// `k = scale / 255`, scikit-image's rescaling (images are in `[0, 1]`).
    #[must_use]
    pub fn k(&self) -> f64 {
        self.scale / 255.0
    }
}

/// A segmentation: labels `0..segment_count` in raster order of first pixel.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentationOutput {
    /// One label per pixel.
    pub labels: Image<u32>,
    /// Number of segments.
    pub segment_count: usize,
    /// Borůvka merge rounds that merged something (0 for the Kruskal CPU reference).
    pub rounds: u32,
    /// `min_size` rounds that merged something (0 for the Kruskal CPU reference).
    pub min_size_rounds: u32,
    /// True when a phase hit its round cap while still merging (raise `max_rounds`).
    pub capped: bool,
    /// The hierarchy level these labels are (`levels() - 1` for the final segmentation).
    pub level: u32,
    /// False for the sequential Kruskal CPU reference, which has no rounds and no hierarchy
    /// (its summary then leaves rounds and levels out).
    pub has_rounds: bool,
}

impl SegmentationOutput {
    /// Hierarchy levels: level 0 (one segment per pixel), one per merging round.
    #[must_use]
    pub fn levels(&self) -> u32 {
        self.rounds + self.min_size_rounds + 1
    }

    /// Per-frame summary for frames.jsonl: the segment count and how it was computed
    /// (`"method"`: `"kruskal"` for the sequential CPU reference, `"rounds"` with the round
    /// counts and hierarchy levels for the GPU and its CPU model).
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        if !self.has_rounds {
            return serde_json::json!({ "segments": self.segment_count, "method": "kruskal" });
        }
        serde_json::json!({
            "segments": self.segment_count,
            "method": "rounds",
            "rounds": self.rounds,
            "min_size_rounds": self.min_size_rounds,
            "levels": self.levels(),
            "level": self.level,
            "capped": self.capped,
        })
    }
}

/// A segmentation of a frame downscaled by `factor` ([`crate::ops::preprocess::downscale_box`])
/// brought back to `width` x `height` (nearest neighbour: pixel `(x, y)` takes the label of
/// block `(x / factor, y / factor)`, clamped to the last block for trailing columns and rows).
/// Labels stay numbered in raster order of first pixel and the segment count is unchanged: a
/// segment's first block comes first in the large raster too.
#[must_use]
pub fn upsample_labels(
    out: SegmentationOutput,
    width: usize,
    height: usize,
    factor: usize,
) -> SegmentationOutput {
    let small = out.labels.view();
    let (sw, sh) = (small.width(), small.height());
    if (sw, sh) == (width, height) || sw == 0 || sh == 0 {
        return out;
    }
    let f = factor.max(1);
    let cols: Vec<usize> = (0..width).map(|x| (x / f).min(sw - 1)).collect();
    let mut data = vec![0u32; width * height];
    if width > 0 {
        data.par_chunks_mut(width).enumerate().for_each(|(y, row)| {
            let src = small.row((y / f).min(sh - 1));
            for (o, &c) in row.iter_mut().zip(&cols) {
                *o = src[c];
            }
        });
    }
    let labels = Image::from_vec(width, height, data).unwrap_or_else(|_| Image::new(0, 0, 0));
    SegmentationOutput { labels, ..out }
}

/// Every level of a round-based segmentation in two per-pixel arrays: when root `v` was
/// absorbed (`round[v]`, a global round number; `u16::MAX` if never) and the root it joined
/// then (`parent[v]`). Merge rounds are numbered `1..=max_rounds`, `min_size` rounds after
/// them; `level_rounds[l-1]` is the round of level `l`
/// (only rounds that merged something are levels).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentationHierarchy {
    /// Image width.
    pub width: usize,
    /// Image height.
    pub height: usize,
    /// Root joined when absorbed.
    pub parent: Vec<u32>,
    /// Global round when absorbed (`u16::MAX`: never).
    pub round: Vec<u16>,
    /// Global round number of each level `1..levels()`.
    pub level_rounds: Vec<u16>,
}

impl SegmentationHierarchy {
    /// Number of levels (level 0 is one segment per pixel).
    #[must_use]
    pub fn levels(&self) -> u32 {
        self.level_rounds.len() as u32 + 1
    }

    /// Global round number up to which merges are applied at `level`.
    pub(crate) fn threshold_round(&self, level: u32) -> Result<u16, OpError> {
        if level >= self.levels() {
            return Err(OpError::InvalidParam(format!(
                "level must be in 0..{}, got {level}",
                self.levels()
            )));
        }
        Ok(if level == 0 {
            0
        } else {
            self.level_rounds[level as usize - 1]
        })
    }

    /// The labels of `level`, numbered in raster order of first pixel.
    pub fn labels_at(&self, level: u32) -> Result<(Image<u32>, usize), OpError> {
        let thr = self.threshold_round(level)?;
        let n = self.width * self.height;
        let roots: Vec<u32> = (0..n)
            .map(|p| {
                let mut v = p;
                while self.round[v] <= thr {
                    v = self.parent[v] as usize;
                }
                v as u32
            })
            .collect();
        let (labels, count) = raster_relabel(&roots);
        Ok((Image::from_vec(self.width, self.height, labels)?, count))
    }
}

/// Renumbers per-pixel component ids (any values) to `0..n` in raster order of first pixel.
#[must_use]
pub(crate) fn raster_relabel(comp: &[u32]) -> (Vec<u32>, usize) {
    // Values below 2^24 (every label image of this crate: root pixel indices or dense labels)
    // use a lookup table; others a hash map.
    let max = comp.iter().copied().max().unwrap_or(0);
    if max < (1 << 24) {
        let mut table = vec![u32::MAX; max as usize + 1];
        let mut next = 0u32;
        let labels = comp
            .iter()
            .map(|&c| {
                let t = &mut table[c as usize];
                if *t == u32::MAX {
                    *t = next;
                    next += 1;
                }
                *t
            })
            .collect();
        return (labels, next as usize);
    }
    let mut map = std::collections::HashMap::with_capacity(1024);
    let labels = comp
        .iter()
        .map(|&c| {
            let next = map.len() as u32;
            *map.entry(c).or_insert(next)
        })
        .collect();
    (labels, map.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raster_relabel_numbers_in_first_appearance_order_with_and_without_the_table() {
        assert_eq!(
            raster_relabel(&[7, 7, 3, 9, 3, 0]),
            (vec![0, 0, 1, 2, 1, 3], 4)
        );
        let big = [u32::MAX, 5, u32::MAX, 1 << 30];
        assert_eq!(raster_relabel(&big), (vec![0, 1, 0, 2], 3));
        assert_eq!(raster_relabel(&[]), (vec![], 0));
    }

    #[test]
    fn params_validate_and_roundtrip() {
        let p = SegmentationParams::default();
        assert!(p.validate().is_ok());
        let bad = SegmentationParams { scale: -1.0, ..p };
        assert!(bad.validate().unwrap_err().to_string().contains("scale"));
        let bad = SegmentationParams {
            sigma: f64::NAN,
            ..p
        };
        assert!(bad.validate().unwrap_err().to_string().contains("sigma"));
        let bad = SegmentationParams { max_rounds: 0, ..p };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("max_rounds")
        );
        let j = serde_json::to_string(&p).unwrap();
        let q: SegmentationParams = serde_json::from_str(&j).unwrap();
        assert_eq!(p, q);
        let partial: SegmentationParams = serde_json::from_str(r#"{"scale": 500}"#).unwrap();
        assert_eq!(partial.scale, 500.0);
        assert!(serde_json::from_str::<SegmentationParams>(r#"{"k": 5}"#).is_err());
    }

    #[test]
    fn upsampled_labels_stay_a_raster_ordered_partition() {
        // A 3x2 segmentation of a 7x5 frame downscaled by 2 (the trailing column and row take
        // the last block's labels).
        let small = Image::from_vec(3, 2, vec![0, 0, 1, 2, 0, 1]).unwrap();
        let out = SegmentationOutput {
            labels: small,
            segment_count: 3,
            rounds: 4,
            min_size_rounds: 1,
            capped: false,
            level: 5,
            has_rounds: true,
        };
        let big = upsample_labels(out.clone(), 7, 5, 2);
        assert_eq!(
            (
                big.labels.width(),
                big.labels.height(),
                big.segment_count,
                big.rounds
            ),
            (7, 5, 3, 4)
        );
        assert_eq!(big.labels.row(0), &[0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(big.labels.row(2), &[2, 2, 0, 0, 1, 1, 1]);
        assert_eq!(big.labels.row(4), big.labels.row(2));
        assert!(metrics::check_labels(big.labels.view(), 3).is_ok());
        assert_eq!(upsample_labels(out.clone(), 3, 2, 2), out);
    }

    #[test]
    fn relabel_is_raster_order() {
        let (l, n) = raster_relabel(&[7, 7, 3, 9, 3, 7]);
        assert_eq!(l, vec![0, 0, 1, 2, 1, 0]);
        assert_eq!(n, 3);
    }

    #[test]
    fn hierarchy_levels() {
        // 4 pixels: round 1 joins 1->0 and 3->2, round 5 joins 2->0.
        let h = SegmentationHierarchy {
            width: 4,
            height: 1,
            parent: vec![0, 0, 0, 2],
            round: vec![u16::MAX, 1, 5, 1],
            level_rounds: vec![1, 5],
        };
        assert_eq!(h.levels(), 3);
        assert_eq!(h.labels_at(0).unwrap().0.data(), &[0, 1, 2, 3]);
        assert_eq!(h.labels_at(1).unwrap().0.data(), &[0, 0, 1, 1]);
        assert_eq!(h.labels_at(2).unwrap().0.data(), &[0, 0, 0, 0]);
        assert!(h.labels_at(3).is_err());
    }
}
