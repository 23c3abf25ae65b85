//! The linear openings' tuning: the choices that change their speed, never their pictures or
//! spectra (the lines kernel's block, the zones of a line, where its rings live, the planes of
//! one launch), in one typed struct with defaults per device. Tests and benchmarks
//! set fields of [`OrientationTuning`]; nothing is read from the environment. The transpose and
//! reduce kernels' 32x32 tiles of 32x8 threads are fixed by `kernels/orientation.cu`.

use crate::gpu::DeviceInfo;

/// Launch tuning of [`super::LinearOpeningGpu`] and [`super::OrientationGpu`] (the defaults are
/// the heuristics of the paper's section 5.4; the benchmark sweeps them). Every field changes
/// speed only: the GPU tests check the openings against the CPU for several values of each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrientationTuning {
    /// Threads per block of the lines kernel (a multiple of 32, at most 1024).
    pub block: u32,
    /// Zones per line; `None`: enough for about four waves of
    /// [`OrientationTuning::resident_threads_per_sm`], at most one zone per `max(2L, 64)`
    /// samples (rules 2 and 3 of section 5.4).
    pub zones: Option<u32>,
    /// Threads an SM is taken to hold at once, for the zone heuristic.
    pub resident_threads_per_sm: usize,
    /// Most words of a thread's ring (L words: one per sample of a van Herk / Gil-Werman block)
    /// kept in shared memory; longer segments keep their rings in global memory.
    pub shared_ring_words: u32,
    /// Compute angles with identical line families once (`false`: every angle its own plane,
    /// the benchmark's "all 180" workload).
    pub dedup: bool,
    /// Largest stack of opening planes of one launch, in bytes.
    pub stack_bytes: usize,
}

impl OrientationTuning {
    /// The defaults for `device`: the same on every device (the zones scale with its SMs).
    #[must_use]
    pub fn for_device(_device: &DeviceInfo) -> Self {
        Self::default()
    }
}

impl Default for OrientationTuning {
    /// The defaults of a compute capability 9.0 device (the H100).
    fn default() -> Self {
        Self {
            // 128 threads measured alike with 64 and 256 on the H200 (BENCHMARKS.md).
            block: 128,
            // The section 5.4 heuristic matches the best fixed zone count of the 1080p sweep.
            zones: None,
            // 36 warps: what an SM holds of the lines kernel at its 52 registers a thread.
            resident_threads_per_sm: 1152,
            // Segments up to L = 95 keep their rings in shared memory (the 48 KiB a block may take).
            shared_ring_words: 96,
            // Angles of one family give one plane: 180 angles at L = 31 need at most 60.
            dedup: true,
            // 512 MiB of planes: the 36 angles of a 4K map (about 8 MiB each in u8) in one launch.
            stack_bytes: 512 << 20,
        }
    }
}
