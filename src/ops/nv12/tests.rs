//! The CPU reference against GStreamer's own `VideoConverter` on random frames, and against the
//! definition of its chroma upsampling by sample positions.

use gstreamer as gst;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;
use proptest::prelude::*;

use super::*;

/// Deterministic bytes (SplitMix64).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

fn nv12_info(
    width: u32,
    height: u32,
    matrix: gst_video::VideoColorMatrix,
    range: gst_video::VideoColorRange,
    site: gst_video::VideoChromaSite,
) -> gst_video::VideoInfo {
    gst::init().unwrap();
    let colorimetry = gst_video::VideoColorimetry::new(
        range,
        matrix,
        gst_video::VideoTransferFunction::Bt709,
        gst_video::VideoColorPrimaries::Bt709,
    );
    gst_video::VideoInfo::builder(gst_video::VideoFormat::Nv12, width, height)
        .colorimetry(&colorimetry)
        .chroma_site(site)
        .build()
        .unwrap()
}

/// Converts `frames` random frames laid out as GStreamer lays out `info` (padding random too)
/// with one `VideoConverter` of `threads` threads, as the element does, and asserts that
/// [`nv12_to_rgb`] on the same planes gives every byte it gives.
fn assert_matches_gstreamer(info: &gst_video::VideoInfo, threads: u32, frames: u64) {
    gst::init().unwrap();
    let (w, h) = (info.width(), info.height());
    let rgb_info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Rgb, w, h)
        .build()
        .unwrap();
    let mut config = gst_video::VideoConverterConfig::new();
    config.set_threads(threads);
    let converter = gst_video::VideoConverter::new(info, &rgb_info, Some(config)).unwrap();
    let conv = Nv12Conversion::from_video_info(info, threads).unwrap();
    let (w, h) = (w as usize, h as usize);
    for seed in 0..frames {
        let input = gst::Buffer::from_mut_slice(random_bytes(info.size(), seed + 1000 * w as u64));
        let src = gst_video::VideoFrameRef::from_buffer_ref_readable(input.as_ref(), info).unwrap();
        let mut output = gst::Buffer::with_size(rgb_info.size()).unwrap();
        {
            let out = output.get_mut().unwrap();
            let mut dst =
                gst_video::VideoFrameRef::from_buffer_ref_writable(out, &rgb_info).unwrap();
            converter.frame_ref(&src, &mut dst);
        }
        let map = output.map_readable().unwrap();
        let stride = rgb_info.stride()[0] as usize;
        let theirs = Image::from_fn(w, h, |x, y| {
            let o = y * stride + 3 * x;
            [map[o], map[o + 1], map[o + 2]]
        });
        let ours = nv12_to_rgb(
            src.plane_data(0).unwrap(),
            src.plane_stride()[0] as usize,
            src.plane_data(1).unwrap(),
            src.plane_stride()[1] as usize,
            w,
            h,
            &conv,
        )
        .unwrap();
        let first_difference = (0..w * h).find(|&i| ours.data()[i] != theirs.data()[i]);
        if let Some(i) = first_difference {
            panic!(
                "{w}x{h} {conv:?}, frame {seed}: pixel ({}, {}) is {:?}, GStreamer gives {:?}",
                i % w,
                i / w,
                ours.data()[i],
                theirs.data()[i]
            );
        }
    }
}

const MATRICES: [gst_video::VideoColorMatrix; 5] = [
    gst_video::VideoColorMatrix::Bt601,
    gst_video::VideoColorMatrix::Bt709,
    gst_video::VideoColorMatrix::Bt2020,
    gst_video::VideoColorMatrix::Smpte240m,
    gst_video::VideoColorMatrix::Fcc,
];

/// The sitings decoders emit: none in the caps (unknown), "jpeg" (centred), "mpeg2"
/// (horizontally co-sited, H.264's default), "cosited", and the rarer vertical-only and "dv".
const SITES: [gst_video::VideoChromaSite; 6] = [
    gst_video::VideoChromaSite::empty(),
    gst_video::VideoChromaSite::JPEG,
    gst_video::VideoChromaSite::MPEG2,
    gst_video::VideoChromaSite::COSITED,
    gst_video::VideoChromaSite::V_COSITED,
    gst_video::VideoChromaSite::DV,
];

#[test]
fn matches_gstreamer_for_every_matrix_range_and_siting() {
    let ranges = [
        gst_video::VideoColorRange::Range16_235,
        gst_video::VideoColorRange::Range0_255,
        gst_video::VideoColorRange::Unknown,
    ];
    for (w, h) in [(1, 1), (2, 2), (1, 6), (7, 1), (3, 5), (37, 23), (64, 48)] {
        for matrix in MATRICES {
            for range in ranges {
                for site in SITES {
                    assert_matches_gstreamer(&nv12_info(w, h, matrix, range, site), 1, 1);
                }
            }
        }
    }
}

#[test]
fn matches_gstreamer_across_the_converters_bands() {
    use gst_video::VideoChromaSite as Site;
    use gst_video::VideoColorMatrix as M;
    use gst_video::VideoColorRange as R;
    // Bands starting on even rows (270, 540, 180, 200) and odd ones (541, 241); the thread counts
    // are capped at the processor count as GStreamer caps them.
    for (w, h, threads) in [
        (33, 1080, 4),
        (64, 1081, 2),
        (31, 481, 2),
        (17, 720, 4),
        (20, 600, 0),
    ] {
        for site in [Site::empty(), Site::MPEG2, Site::COSITED] {
            assert_matches_gstreamer(&nv12_info(w, h, M::Bt709, R::Range16_235, site), threads, 2);
            assert_matches_gstreamer(&nv12_info(w, h, M::Bt601, R::Range0_255, site), threads, 1);
        }
    }
    let hd = nv12_info(1920, 1080, M::Bt709, R::Range16_235, Site::MPEG2);
    // 4: the thread count of the sources' converter (`source::spec::CONVERTER_THREADS`).
    assert_matches_gstreamer(&hd, 4, 1);
}

#[test]
fn band_rows_follow_gstreamers_thread_split() {
    let conv = |threads| Nv12Conversion {
        matrix: YuvMatrix::Bt709,
        range: YuvRange::Limited,
        h_cosited: true,
        v_cosited: false,
        threads,
    };
    for (height, threads, rows) in [
        (1080, 1, 1080),
        (1080, 4, 270),
        (1081, 2, 541),
        (720, 4, 180),
        (600, 4, 200),
        (576, 4, 192),
        (199, 4, 199),
        (0, 4, 1),
    ] {
        assert_eq!(
            conv(threads).band_rows(height),
            rows,
            "{height} rows, {threads} threads"
        );
    }
}

#[test]
fn from_video_info_reads_colorimetry_siting_and_threads_and_rejects_the_rest() {
    use gst_video::VideoChromaSite as Site;
    use gst_video::VideoColorMatrix as M;
    use gst_video::VideoColorRange as R;
    gst::init().unwrap();
    let info = nv12_info(64, 48, M::Bt709, R::Range16_235, Site::MPEG2);
    assert_eq!(
        Nv12Conversion::from_video_info(&info, 1).unwrap(),
        Nv12Conversion {
            matrix: YuvMatrix::Bt709,
            range: YuvRange::Limited,
            h_cosited: true,
            v_cosited: false,
            threads: 1,
        }
    );
    let info = nv12_info(64, 48, M::Bt601, R::Unknown, Site::DV);
    let conv = Nv12Conversion::from_video_info(&info, 0).unwrap();
    assert_eq!(
        (conv.range, conv.h_cosited, conv.v_cosited),
        (YuvRange::Full, true, true)
    );
    let processors = gst::glib::num_processors();
    assert_eq!(conv.threads, processors);
    assert_eq!(
        Nv12Conversion::from_video_info(&info, processors + 1)
            .unwrap()
            .threads,
        processors
    );

    let i420 = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, 64, 48)
        .build()
        .unwrap();
    assert!(Nv12Conversion::from_video_info(&i420, 1).is_err());
    let interlaced = gst_video::VideoInfo::builder(gst_video::VideoFormat::Nv12, 64, 48)
        .interlace_mode(gst_video::VideoInterlaceMode::Interleaved)
        .build()
        .unwrap();
    assert!(Nv12Conversion::from_video_info(&interlaced, 1).is_err());
    let no_matrix = nv12_info(64, 48, M::Unknown, R::Range16_235, Site::MPEG2);
    assert!(Nv12Conversion::from_video_info(&no_matrix, 1).is_err());
}

#[test]
fn coefficients_are_gstreamers_and_clear_of_rounding_ties() {
    let conv = |matrix, range| Nv12Conversion {
        matrix,
        range,
        h_cosited: false,
        v_cosited: false,
        threads: 1,
    };
    let c = conv(YuvMatrix::Bt601, YuvRange::Limited).coefficients();
    assert_eq!(
        [c.y, c.r_v, c.g_u, c.g_v, c.b_u],
        [298, 409, -100, -208, 516]
    );
    let c = conv(YuvMatrix::Bt709, YuvRange::Full).coefficients();
    assert_eq!(
        [c.y, c.r_v, c.g_u, c.g_v, c.b_u],
        [256, 403, -48, -120, 475]
    );
    for matrix in [
        YuvMatrix::Bt601,
        YuvMatrix::Bt709,
        YuvMatrix::Bt2020,
        YuvMatrix::Smpte240m,
        YuvMatrix::Fcc,
    ] {
        for range in [YuvRange::Limited, YuvRange::Full] {
            for v in conv(matrix, range).unrounded_coefficients() {
                let tie_distance = ((v - v.floor()) - 0.5).abs();
                assert!(tie_distance > 0.002, "{matrix:?} {range:?}: {v}");
            }
        }
    }
}

#[test]
fn planes_too_small_are_errors() {
    let conv = Nv12Conversion {
        matrix: YuvMatrix::Bt601,
        range: YuvRange::Limited,
        h_cosited: false,
        v_cosited: false,
        threads: 1,
    };
    // 5x4: 4 luma rows of 5, 2 chroma rows of 3 pairs.
    assert!(nv12_to_rgb(&[0; 20], 5, &[0; 12], 6, 5, 4, &conv).is_ok());
    assert!(nv12_to_rgb(&[0; 19], 5, &[0; 12], 6, 5, 4, &conv).is_err());
    assert!(nv12_to_rgb(&[0; 20], 5, &[0; 11], 6, 5, 4, &conv).is_err());
    assert!(nv12_to_rgb(&[0; 20], 4, &[0; 12], 6, 5, 4, &conv).is_err());
    assert!(nv12_to_rgb(&[0; 20], 5, &[0; 12], 5, 5, 4, &conv).is_err());
    assert!(nv12_to_rgb(&[], 0, &[], 0, 0, 3, &conv).unwrap().is_empty());
}

/// Linear interpolation between sample sites, in quarter pixels: sample `k` sits at luma
/// position `2k` (co-sited) or `2k + 1/2`; a position takes the two sites around it, weighted by
/// distance, or the nearest site beyond the first and the last; rounded, halves up.
fn interpolate(samples: &[u32], cosited: bool, position: usize) -> u32 {
    let site = |k: usize| 8 * k + if cosited { 0 } else { 2 };
    let (p, last) = (4 * position, samples.len() - 1);
    if p <= site(0) {
        return samples[0];
    }
    if p >= site(last) {
        return samples[last];
    }
    let k = (0..last).find(|&k| p < site(k + 1)).unwrap();
    let d = (p - site(k)) as u32;
    (samples[k] * (8 - d) + samples[k + 1] * d + 4) / 8
}

/// The definition of GStreamer's NV12 to RGB: chroma interpolated between its sites along
/// each chroma row, then down each column of those rows (chroma row `k` at luma row `2k +
/// 1/2`), except that vertically co-sited chroma, and every row of a converter band starting on
/// an even row, repeat chroma row `y / 2`; then the matrix.
fn naive(y_plane: &[u8], uv: &[u8], w: usize, h: usize, conv: &Nv12Conversion) -> Vec<[u8; 3]> {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let band_rows = conv.band_rows(h);
    let upsampled_rows: Vec<Vec<[u32; 2]>> = (0..ch)
        .map(|k| {
            (0..w)
                .map(|x| {
                    [0, 1].map(|c| {
                        let row: Vec<u32> = (0..cw)
                            .map(|i| u32::from(uv[k * 2 * cw + 2 * i + c]))
                            .collect();
                        interpolate(&row, conv.h_cosited, x)
                    })
                })
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for y in 0..h {
        let band = y - y % band_rows;
        let repeat = conv.v_cosited || (band > 0 && band.is_multiple_of(2));
        for x in 0..w {
            let [u, v] = [0, 1].map(|c| {
                if repeat {
                    upsampled_rows[y / 2][x][c]
                } else {
                    let column: Vec<u32> = upsampled_rows.iter().map(|r| r[x][c]).collect();
                    interpolate(&column, false, y)
                }
            });
            out.push(yuv_to_rgb(
                y_plane[y * w + x],
                u as u8,
                v as u8,
                &conv.coefficients(),
            ));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn upsampling_is_interpolation_between_chroma_sites(
        w in 1usize..24,
        h in 1usize..460,
        threads in 1u32..4,
        h_cosited in any::<bool>(),
        v_cosited in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let conv = Nv12Conversion {
            matrix: YuvMatrix::Bt709,
            range: YuvRange::Limited,
            h_cosited,
            v_cosited,
            threads,
        };
        let y_plane = random_bytes(w * h, seed);
        let uv = random_bytes(2 * w.div_ceil(2) * h.div_ceil(2), seed ^ 1);
        let got = nv12_to_rgb(&y_plane, w, &uv, 2 * w.div_ceil(2), w, h, &conv).unwrap();
        let want = naive(&y_plane, &uv, w, h, &conv);
        prop_assert_eq!(got.data(), want.as_slice());
    }
}
