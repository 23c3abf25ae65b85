//! GPU parity of the NV12 to RGB conversion (`kernels/nv12.cu`) with the CPU reference, itself
//! tested against GStreamer's `VideoConverter` (`src/ops/nv12/tests.rs`): random frames with
//! padded rows, odd sizes and 1080p, every chroma siting, one and several converter bands.

use morphoscope::ops::nv12::gpu::nv12_to_rgb_gpu;
use morphoscope::ops::nv12::{Nv12Conversion, YuvMatrix, YuvRange, nv12_to_rgb};

use crate::common::{Rng, gpu};

#[test]
fn nv12_to_rgb_matches_cpu_exactly() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(21);
    let conversions = [
        (YuvMatrix::Bt709, YuvRange::Limited, true, false),
        (YuvMatrix::Bt601, YuvRange::Limited, false, false),
        (YuvMatrix::Bt601, YuvRange::Full, false, false),
        (YuvMatrix::Bt2020, YuvRange::Limited, true, true),
        (YuvMatrix::Smpte240m, YuvRange::Full, false, true),
    ];
    for (w, h) in [
        (1, 1),
        (2, 2),
        (1, 7),
        (7, 1),
        (37, 23),
        (640, 480),
        (31, 481),
        (1921, 1081),
        (1920, 1080),
    ] {
        for (i, &(matrix, range, h_cosited, v_cosited)) in conversions.iter().enumerate() {
            // The largest frames once (1080p with the decoders' default siting), all sitings below.
            if w * h > 1_000_000 && i > 0 {
                continue;
            }
            let pad = rng.below(5);
            let (y_stride, uv_stride) = (w + pad, 2 * w.div_ceil(2) + pad);
            let y_plane: Vec<u8> = (0..y_stride * h).map(|_| rng.next_u64() as u8).collect();
            let uv: Vec<u8> = (0..uv_stride * h.div_ceil(2))
                .map(|_| rng.next_u64() as u8)
                .collect();
            for threads in [1, 4] {
                let conv = Nv12Conversion {
                    matrix,
                    range,
                    h_cosited,
                    v_cosited,
                    threads,
                };
                let cpu = nv12_to_rgb(&y_plane, y_stride, &uv, uv_stride, w, h, &conv).unwrap();
                let got =
                    nv12_to_rgb_gpu(g, &y_plane, y_stride, &uv, uv_stride, w, h, &conv).unwrap();
                let first_difference = (0..w * h).find(|&i| got.data()[i] != cpu.data()[i]);
                assert!(
                    first_difference.is_none(),
                    "{w}x{h} {conv:?}: pixel {first_difference:?} differs"
                );
            }
        }
    }
}
