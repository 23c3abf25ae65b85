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

#[test]
fn nvdec_frames_of_a_file_source_stay_on_the_gpu_with_the_results_of_system_memory() {
    use morphoscope::backend::Backend;
    use morphoscope::config::Settings;
    use morphoscope::pipeline::{PictureWant, run_source};
    use morphoscope::source::SourceSpec;

    let Some(g) = gpu() else { return };
    // The GPU machine carries the clip as H.264 (`vtest.mp4`), which NVDEC decodes; a checkout
    // without it has nothing to decode on the GPU.
    let clip = crate::samples::samples_dir().join("vtest.mp4");
    if !clip.is_file() {
        assert!(
            std::env::var("MORPHOSCOPE_REQUIRE_GPU").as_deref() != Ok("1"),
            "MORPHOSCOPE_REQUIRE_GPU=1 but {} is missing",
            clip.display()
        );
        return;
    }
    let backend = Backend::Cuda(std::sync::Arc::new(
        morphoscope::gpu::GpuContext::new(g.info().ordinal).unwrap(),
    ));
    let settings = Settings::default();
    // `run`'s file source: the decoder writes into the analyses' context.
    let device = run_source(
        &backend,
        &settings,
        SourceSpec::File(clip.clone()),
        PictureWant::None,
    )
    .unwrap();
    // The same decoding through a pipeline description, which always hands system memory over.
    let uri = format!("file://{}", clip.canonicalize().unwrap().display());
    let host = run_source(
        &backend,
        &settings,
        SourceSpec::Pipeline(format!(
            "uridecodebin uri=\"{uri}\" ! {}",
            morphoscope::source::spec::SINK_TAIL
        )),
        PictureWant::None,
    )
    .unwrap();
    assert_eq!(device.decoder.as_deref(), Some("nvh264dec"));
    assert_eq!(host.decoder.as_deref(), Some("nvh264dec"));
    assert!(device.frames_on_device, "NVDEC frames read in CUDA memory");
    assert!(!host.frames_on_device);
    assert_eq!((device.frames.len(), host.frames.len()), (795, 795));
    for (a, b) in device.frames.iter().zip(&host.frames) {
        assert_eq!(a.index, b.index);
        assert_eq!(a.outputs.len(), b.outputs.len());
        for (x, y) in a.outputs.iter().zip(&b.outputs) {
            assert_eq!(x.summary, y.summary, "frame {} op {}", a.index, x.op);
        }
    }
}
