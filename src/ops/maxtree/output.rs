//! What the max-tree analysis hands on. [`MaxTreeOutput`] is the filtered image and the residue
//! in full (the CLI's `image` command, the CPU path, the parity tests); [`MaxTreeSummary`] is
//! the three numbers of frames.jsonl, which the GPU reduces on the device
//! ([`super::MaxTreeGpu::download_summary`]) so that a frame's summary is a 24-byte readback
//! instead of two frame-sized ones.

use crate::image::{DynImage, Image};

/// The filtered image and residue of one frame, with the tree's node count.
#[derive(Clone, Debug, PartialEq)]
pub struct MaxTreeOutput {
    /// The filtered image (input type).
    pub filtered: DynImage,
    /// `|input − filtered|` (input type).
    pub residue: DynImage,
    /// Number of nodes of the tree.
    pub node_count: u32,
}

impl MaxTreeOutput {
    /// The counts of [`MaxTreeSummary`], taken from the residue image.
    #[must_use]
    pub fn stats(&self) -> MaxTreeSummary {
        let (changed_pixels, residue_sum, pixels) = match &self.residue {
            DynImage::Gray8(r) => residue_counts(r),
            DynImage::Gray16(r) => residue_counts(r),
            _ => (0, 0, 0),
        };
        MaxTreeSummary {
            node_count: self.node_count,
            changed_pixels,
            residue_sum,
            pixels,
        }
    }

    /// Per-frame numbers for frames.jsonl (see [`MaxTreeSummary::summary`]).
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        self.stats().summary()
    }
}

/// (pixels with a non-zero residue, Σ residue, pixels) of a residue image.
fn residue_counts<T: Copy + Into<u64>>(residue: &Image<T>) -> (u64, u64, u64) {
    residue
        .rows()
        .flatten()
        .fold((0, 0, 0), |(changed, sum, n), &v| {
            let v: u64 = v.into();
            (changed + u64::from(v > 0), sum + v, n + 1)
        })
}

/// The small result of a frame: what frames.jsonl reports of the max-tree analysis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaxTreeSummary {
    /// Number of nodes of the tree.
    pub node_count: u32,
    /// Pixels the filter changed (non-zero residue).
    pub changed_pixels: u64,
    /// Σ residue over the frame.
    pub residue_sum: u64,
    /// Pixels of the frame.
    pub pixels: u64,
}

impl MaxTreeSummary {
    /// Per-frame numbers for frames.jsonl: nodes, pixels changed, mean residue.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        let mean = if self.pixels == 0 {
            0.0
        } else {
            self.residue_sum as f64 / self.pixels as f64
        };
        serde_json::json!({
            "maxtree_nodes": self.node_count,
            "maxtree_changed_pixels": self.changed_pixels,
            "maxtree_residue_mean": mean,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_residue_image() {
        // A strided residue: the padding (99) must not count.
        let residue = Image::from_strided(3, 2, 4, vec![0u8, 2, 0, 99, 4, 0, 6, 99]).unwrap();
        let out = MaxTreeOutput {
            filtered: DynImage::Gray8(Image::new(3, 2, 0)),
            residue: DynImage::Gray8(residue),
            node_count: 7,
        };
        let s = out.stats();
        assert_eq!(
            s,
            MaxTreeSummary {
                node_count: 7,
                changed_pixels: 3,
                residue_sum: 12,
                pixels: 6
            }
        );
        assert_eq!(
            out.summary(),
            serde_json::json!({ "maxtree_nodes": 7, "maxtree_changed_pixels": 3, "maxtree_residue_mean": 2.0 })
        );
        assert_eq!(
            MaxTreeSummary::default().summary()["maxtree_residue_mean"],
            0.0
        );
    }
}
