//! The launch plan of the CUDA linear openings ([`super::gpu`]): for one frame size and one
//! set of parameters, the distinct line families (angles whose families coincide share one
//! plane, [`OrientationTuning::dedup`]), each family's zones (section 5.4 of the paper), the
//! chunks of planes one launch computes within [`OrientationTuning::stack_bytes`], and where
//! each thread's ring of L words lives (shared or global memory). Pure host arithmetic, tested here; the engine
//! uploads it as a table of [`OrientationAngle`] records.

use crate::gpu::launch::{blocks_for, check_frame_size};
use crate::ops::OpError;

use super::geometry::LineFamily;
use super::tuning::OrientationTuning;

/// One angle's launch parameters. Keep in sync with `OrientationAngle` in kernels/orientation.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct OrientationAngle {
    pub(super) q: i32,
    pub(super) transposed: i32,
    pub(super) nlines: i32,
    pub(super) cmin: i32,
    pub(super) zones: i32,
    pub(super) zone_len: i32,
    pub(super) lines_pad: i32,
    pub(super) plane: i32,
}
const _: () = assert!(std::mem::size_of::<OrientationAngle>() == 32);

impl OrientationAngle {
    pub(super) fn to_words(self) -> [i32; 8] {
        [
            self.q,
            self.transposed,
            self.nlines,
            self.cmin,
            self.zones,
            self.zone_len,
            self.lines_pad,
            self.plane,
        ]
    }
}

/// The launches of one (frame size, parameters) pair.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Plan {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) length: u32,
    pub(super) angles_deg: Vec<f64>,
    pub(super) tuning: OrientationTuning,
    /// The distinct families (all of them without dedup), in increasing first-angle order.
    pub(super) planes: Vec<OrientationAngle>,
    /// For each plane, the first angle index using its family.
    pub(super) plane_angle: Vec<i32>,
    /// For each angle, its plane.
    pub(super) angle_plane: Vec<usize>,
    /// (first plane, plane count, grid.x) of each launch.
    pub(super) chunks: Vec<(usize, usize, u32)>,
    pub(super) any_transposed: bool,
    /// Whether the lines kernel's rings live in shared memory (else in global memory).
    pub(super) ring_in_shared: bool,
    /// Words of the global rings (every thread of the largest launch × L; 0 when in shared).
    pub(super) global_ring_len: usize,
    /// Dynamic shared memory of a lines block (block × L words when the rings live there).
    pub(super) shared_bytes: u32,
}

pub(super) fn zero_sized(what: &str) -> OpError {
    OpError::Unsupported(format!("{what}: empty frames are handled on the host"))
}

pub(super) fn to_i32(v: usize, what: &str) -> Result<i32, OpError> {
    i32::try_from(v).map_err(|_| {
        OpError::Unsupported(format!("{what} = {v} exceeds the kernel's 32-bit range"))
    })
}

impl Plan {
    pub(super) fn new(
        width: usize,
        height: usize,
        length: u32,
        angles_deg: &[f64],
        tuning: OrientationTuning,
        sm_count: usize,
        elem_bytes: usize,
    ) -> Result<Self, OpError> {
        check_frame_size(width, height)?;
        if width == 0 || height == 0 {
            return Err(zero_sized("plan"));
        }
        if tuning.block == 0 || !tuning.block.is_multiple_of(32) || tuning.block > 1024 {
            return Err(OpError::InvalidParam(format!(
                "block = {}: a multiple of 32 up to 1024",
                tuning.block
            )));
        }
        let mut planes: Vec<OrientationAngle> = Vec::new();
        let mut families: Vec<LineFamily> = Vec::new();
        let mut plane_angle = Vec::new();
        let mut angle_plane = Vec::with_capacity(angles_deg.len());
        for (k, &a) in angles_deg.iter().enumerate() {
            let f = LineFamily::new(a, length);
            if let Some(p) = families
                .iter()
                .position(|g| *g == f)
                .filter(|_| tuning.dedup)
            {
                angle_plane.push(p);
                continue;
            }
            let (major, minor) = f.extents(width, height);
            let nlines = f.line_count(major, minor);
            planes.push(OrientationAngle {
                q: f.q,
                transposed: i32::from(f.x_major),
                nlines: to_i32(nlines, "lines")?,
                cmin: i32::try_from(f.first_line(major)).map_err(|_| zero_sized("first line"))?,
                lines_pad: to_i32(nlines.div_ceil(32) * 32, "lines")?,
                ..OrientationAngle::default()
            });
            families.push(f);
            plane_angle.push(to_i32(k, "angle index")?);
            angle_plane.push(planes.len() - 1);
        }
        // Chunks: as many planes per launch as the stack budget allows.
        let plane_bytes = width * height * elem_bytes;
        let per_chunk = (tuning.stack_bytes / plane_bytes.max(1)).clamp(1, 65535);
        // Zones (section 5.4): about four resident waves of threads for load balance, but zones
        // of at least 4(L-1) samples (the 2(L-1) overlap costs at most half); when that leaves
        // the GPU under-filled (few lines: one opening), smaller zones down to max(L, 16).
        let capacity = sm_count.max(1) * tuning.resident_threads_per_sm;
        let overlap = 4 * (length as usize).saturating_sub(1);
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < planes.len() {
            let count = per_chunk.min(planes.len() - start);
            let total_lines: usize = planes[start..start + count]
                .iter()
                .map(|p| p.lines_pad as usize)
                .sum::<usize>()
                .max(1);
            let z_balance = (4 * capacity).div_ceil(total_lines);
            let z_fill = capacity.div_ceil(total_lines);
            let mut grid_x = 1u32;
            for (i, p) in planes[start..start + count].iter_mut().enumerate() {
                let major = if p.transposed == 1 { width } else { height };
                let z = match tuning.zones {
                    Some(z) => (z as usize).clamp(1, major),
                    None => {
                        let z_eff = (major / overlap.max(1)).max(1);
                        let z_fine = (major / (length as usize).max(16)).max(1);
                        let z1 = z_balance.min(z_eff);
                        if z1 < z_fill {
                            z_fill.min(z_fine).max(z1)
                        } else {
                            z1
                        }
                    }
                };
                let zone_len = major.div_ceil(z);
                let zones = major.div_ceil(zone_len);
                p.zones = to_i32(zones, "zones")?;
                p.zone_len = to_i32(zone_len, "zone length")?;
                p.plane = to_i32(i, "plane")?;
                let threads = zones * p.lines_pad as usize;
                grid_x = grid_x.max(blocks_for(threads, tuning.block));
            }
            chunks.push((start, count, grid_x));
            start += count;
        }
        // Each thread's ring holds L words: in shared memory when they fit the tuning's share
        // and the 48 KiB a block may take without opting in, else in global memory.
        let ring = length as usize;
        let by_budget = 48 * 1024 / (tuning.block as usize * 4);
        let ring_in_shared = ring <= (tuning.shared_ring_words as usize).min(by_budget);
        let global_ring_len = if ring_in_shared {
            0
        } else {
            chunks
                .iter()
                .map(|&(_, count, gx)| gx as usize * count * tuning.block as usize)
                .max()
                .unwrap_or(0)
                * ring
        };
        Ok(Self {
            width,
            height,
            length,
            angles_deg: angles_deg.to_vec(),
            tuning,
            any_transposed: planes.iter().any(|p| p.transposed == 1),
            planes,
            plane_angle,
            angle_plane,
            chunks,
            ring_in_shared,
            global_ring_len,
            shared_bytes: if ring_in_shared {
                (tuning.block as usize * ring * 4) as u32
            } else {
                0
            },
        })
    }

    pub(super) fn max_chunk(&self) -> usize {
        self.chunks.iter().map(|c| c.1).max().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_dedups_and_zones() {
        let angles: Vec<f64> = (0..180).map(f64::from).collect();
        let p = Plan::new(640, 640, 31, &angles, OrientationTuning::default(), 132, 1).unwrap();
        assert_eq!(p.angle_plane.len(), 180);
        assert!(
            p.planes.len() <= 60,
            "{} distinct families of L = 31",
            p.planes.len()
        );
        assert_eq!(p.plane_angle[0], 0);
        assert!(p.plane_angle.windows(2).all(|w| w[0] < w[1]));
        for (k, &pl) in p.angle_plane.iter().enumerate() {
            assert!(p.plane_angle[pl] as usize <= k);
            assert_eq!(
                LineFamily::new(angles[k], 31),
                LineFamily::new(angles[p.plane_angle[pl] as usize], 31)
            );
        }
        assert_eq!(p.chunks.len(), 1);
        assert!(p.ring_in_shared);
        assert_eq!(p.global_ring_len, 0);
        assert_eq!(p.shared_bytes, 128 * 31 * 4);
        for a in &p.planes {
            assert!(a.zones >= 1 && a.zone_len as usize * a.zones as usize >= 640);
            assert_eq!(a.lines_pad % 32, 0);
        }
        let nodedup = OrientationTuning {
            dedup: false,
            ..OrientationTuning::default()
        };
        let p = Plan::new(640, 640, 31, &angles, nodedup, 132, 1).unwrap();
        assert_eq!(p.planes.len(), 180);
        // A long segment keeps its rings in global memory; a small stack budget makes several
        // launches.
        let small = OrientationTuning {
            stack_bytes: 640 * 640 * 7,
            shared_ring_words: 16,
            ..OrientationTuning::default()
        };
        let p = Plan::new(640, 640, 101, &angles, small, 132, 1).unwrap();
        assert!(p.chunks.len() > 1 && p.chunks.iter().all(|c| c.1 <= 7));
        assert!(!p.ring_in_shared);
        assert_eq!(p.shared_bytes, 0);
        let threads: usize = p
            .chunks
            .iter()
            .map(|c| c.2 as usize * c.1 * 128)
            .max()
            .unwrap();
        assert_eq!(p.global_ring_len, threads * 101);
        assert!(Plan::new(0, 5, 3, &angles, OrientationTuning::default(), 132, 1).is_err());
    }

    #[test]
    fn zone_heuristic_on_the_bench_cases() {
        let zones = |w: usize, h: usize, l: u32, angles: &[f64], dedup: bool| -> Vec<(i32, i32)> {
            let t = OrientationTuning {
                dedup,
                ..OrientationTuning::default()
            };
            let p = Plan::new(w, h, l, angles, t, 132, 1).unwrap();
            p.planes.iter().map(|a| (a.zones, a.zone_len)).collect()
        };
        let k36: Vec<f64> = (0..36).map(|k| 5.0 * f64::from(k)).collect();
        let k180: Vec<f64> = (0..180).map(f64::from).collect();
        // Many lines: zones of at least 4(L-1) samples.
        let z = zones(1920, 1080, 31, &k36, true);
        assert!(
            z.iter()
                .all(|&(n, len)| (8..=12).contains(&n) && len >= 120),
            "{z:?}"
        );
        let z = zones(640, 640, 31, &k180, false);
        assert!(z.iter().all(|&(n, _)| n == 4), "{z:?}");
        // One opening: few lines, smaller zones fill the GPU.
        let z = zones(1920, 1080, 31, &[90.0], true);
        assert!(z[0].0 >= 30, "{z:?}");
        let z = zones(1920, 1080, 31, &[0.0], true);
        assert!(z[0].0 >= 60, "{z:?}");
        eprintln!("{:?}", zones(4096, 2160, 31, &k36, true).first());
    }
}
