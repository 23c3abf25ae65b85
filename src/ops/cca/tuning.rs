//! The labeling's tuning: the choices that change its speed, never its labels or its component
//! table (the warps of a block, the rows a feature warp walks, the histogram's launch), in one
//! typed struct with defaults per device. Tests and benchmarks set fields of [`CcaTuning`];
//! nothing is read from the environment. The strip height and the words of a strip or feature
//! piece are fixed by `kernels/cca.cu` (`STRIP_H`, `STRIP_PIECE`, `FEAT_PIECE`), not tuned.

use crate::gpu::DeviceInfo;
use crate::ops::OpError;

/// Launch shapes of [`super::CcaGpu`]. Every field changes speed only: the labels and the
/// component table are the same for every valid value (the GPU tests vary `feature_rows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcaTuning {
    /// Warps per block of the warp-per-item kernels (grid-stride loops over words, rows and
    /// border chunks), 1..=32.
    pub warps_per_block: u32,
    /// Rows per warp of `cca_features` (1..=64): more rows merge more runs of large components
    /// before their atomic flush, fewer rows give more warps.
    pub feature_rows: u32,
    /// Threads per block of `cca_hist` (Otsu's histogram; a multiple of 32, at most 1024).
    pub hist_threads: u32,
    /// Pixels per thread that set the histogram's grid (before [`CcaTuning::hist_max_blocks`]).
    pub hist_pixels_per_thread: u32,
    /// Most blocks of `cca_hist` (each merges its shared bins into the global ones once).
    pub hist_max_blocks: u32,
}

impl CcaTuning {
    /// The defaults for `device`: the same on every device.
    #[must_use]
    pub fn for_device(_device: &DeviceInfo) -> Self {
        Self::default()
    }

    /// Checks the values the kernels can run with.
    pub fn validate(&self) -> Result<(), OpError> {
        let bad = |what: &str, v: u32, allowed: &str| {
            Err(OpError::InvalidParam(format!(
                "cca {what} = {v}: {allowed}"
            )))
        };
        if !(1..=32).contains(&self.warps_per_block) {
            return bad("warps_per_block", self.warps_per_block, "must be in 1..=32");
        }
        if !(1..=64).contains(&self.feature_rows) {
            return bad("feature_rows", self.feature_rows, "must be in 1..=64");
        }
        if !(32..=1024).contains(&self.hist_threads) || !self.hist_threads.is_multiple_of(32) {
            return bad(
                "hist_threads",
                self.hist_threads,
                "must be a multiple of 32 in 32..=1024",
            );
        }
        if self.hist_pixels_per_thread == 0 {
            return bad("hist_pixels_per_thread", 0, "must be at least 1");
        }
        if self.hist_max_blocks == 0 {
            return bad("hist_max_blocks", 0, "must be at least 1");
        }
        Ok(())
    }
}

impl Default for CcaTuning {
    /// The defaults of a compute capability 9.0 device (the H100).
    fn default() -> Self {
        Self {
            // Eight warps a block: eight blocks fill an SM's 2 048 threads.
            warps_per_block: 8,
            // The best of 1 / 2 / 4 rows over the benchmark's frames (docs/benchmarks-history.md).
            feature_rows: 2,
            // One thread per bin: the block clears and flushes its shared bins in one step.
            hist_threads: 256,
            // Sixteen pixels a thread amortise the block's bin clear and flush.
            hist_pixels_per_thread: 16,
            // Caps the global atomics of the flush at 1 024 x 256 bins a frame.
            hist_max_blocks: 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CcaTuning;

    #[test]
    fn defaults_are_valid_and_bad_values_are_refused() {
        let d = CcaTuning::default();
        assert!(d.validate().is_ok());
        for bad in [
            CcaTuning {
                warps_per_block: 0,
                ..d
            },
            CcaTuning {
                warps_per_block: 33,
                ..d
            },
            CcaTuning {
                feature_rows: 0,
                ..d
            },
            CcaTuning {
                feature_rows: 65,
                ..d
            },
            CcaTuning {
                hist_threads: 100,
                ..d
            },
            CcaTuning {
                hist_pixels_per_thread: 0,
                ..d
            },
            CcaTuning {
                hist_max_blocks: 0,
                ..d
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
