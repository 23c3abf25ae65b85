//! The max-tree's tuning: the choices that change its speed, never its tree, attributes or
//! pictures (the local kernel's tile height, the threads of a block, the node kernels' grid), in
//! one typed struct with defaults per device. Tests and benchmarks set fields of
//! [`MaxTreeTuning`]; nothing is read from the environment. The tile width and the pixels a
//! thread flattens are fixed by `kernels/maxtree.cu` (`MT_TW`, `MT_FLAT`), not tuned.

use crate::gpu::DeviceInfo;
use crate::ops::OpError;

/// Launch shapes of [`super::MaxTreeGpu`]. Every field changes speed only: the parent image, the
/// attributes, the filtered image and the residue are the same for every valid value (the GPU
/// tests check that for every tile height).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxTreeTuning {
    /// Rows of a tile of `maxtree_local` (its columns are `super::TILE_WIDTH`): 16, 32, 64,
    /// or 128 for 8-bit images (local indices fit 16 bits); taller tiles leave fewer borders to
    /// `maxtree_merge` but run fewer blocks at once.
    pub tile_height: usize,
    /// Threads per block of every other kernel (a multiple of 32, at most 1024).
    pub block_threads: u32,
    /// Blocks per SM of the node kernels (`maxtree_nodes`, the doubling and jumping rounds, the
    /// residue's statistics): grid-stride loops over a node count only the device knows.
    pub node_blocks_per_sm: u32,
}

impl MaxTreeTuning {
    /// The defaults for `device`: the same on every device (the node grid scales with its SMs).
    #[must_use]
    pub fn for_device(_device: &DeviceInfo) -> Self {
        Self::default()
    }

    /// Checks the values the kernels can run with (the 16-bit limit on the tile height is
    /// checked per frame).
    pub fn validate(&self) -> Result<(), OpError> {
        if !matches!(self.tile_height, 16 | 32 | 64 | 128) {
            return Err(OpError::InvalidParam(format!(
                "maxtree tile_height = {}: allowed values are 16, 32, 64 (and 128 for 8-bit images)",
                self.tile_height
            )));
        }
        if !(32..=1024).contains(&self.block_threads) || !self.block_threads.is_multiple_of(32) {
            return Err(OpError::InvalidParam(format!(
                "maxtree block_threads = {}: must be a multiple of 32 in 32..=1024",
                self.block_threads
            )));
        }
        if self.node_blocks_per_sm == 0 {
            return Err(OpError::InvalidParam(
                "maxtree node_blocks_per_sm = 0: must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

impl Default for MaxTreeTuning {
    /// The defaults of a compute capability 9.0 device (the H100).
    fn default() -> Self {
        Self {
            // The fastest on the H100 for 8 and 16 bits (BENCHMARKS.md).
            tile_height: 16,
            // Eight warps a block: eight blocks fill an SM's 2 048 threads.
            block_threads: 256,
            // Twice the 256-thread blocks an SM holds at once; the grid-stride loops take the rest.
            node_blocks_per_sm: 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MaxTreeTuning;

    #[test]
    fn defaults_are_valid_and_bad_values_are_refused() {
        let d = MaxTreeTuning::default();
        assert!(d.validate().is_ok());
        for th in [16, 32, 64, 128] {
            let t = MaxTreeTuning {
                tile_height: th,
                ..d
            };
            assert!(t.validate().is_ok(), "{t:?}");
        }
        for bad in [
            MaxTreeTuning {
                tile_height: 0,
                ..d
            },
            MaxTreeTuning {
                tile_height: 256,
                ..d
            },
            MaxTreeTuning {
                block_threads: 100,
                ..d
            },
            MaxTreeTuning {
                block_threads: 2048,
                ..d
            },
            MaxTreeTuning {
                node_blocks_per_sm: 0,
                ..d
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
