//! NV12 to packed RGB with the bytes of GStreamer 1.22's `VideoConverter` (what `videoconvert`
//! and the element's `convert.rs` run, default options but the thread count), on the CPU (the
//! reference) and on the GPU (`kernels/nv12.cu`, one thread per output pixel), bit-identical:
//! frames decoded into CUDA memory then give the tables of frames converted in system memory.
//!
//! GStreamer has no fast path from NV12 to RGB (`video_converter_lookup_fastpath` lists none),
//! so its generic line pipeline (`video-converter.c`) runs, all in 8 bits:
//! 1. unpack (`unpack_NV12`, `video-format.c`): each row to AYUV, luma column `x` taking the
//!    chroma pair `x / 2` of chroma row `y / 2`;
//! 2. chroma upsampling (`video-chroma.c`): each unpacked row horizontally
//!    (`video_chroma_up_h2_u8`, or `_h2_cs_u8` for horizontally co-sited chroma), then pairs of
//!    rows vertically (`video_chroma_up_v2_u8`: 3:1 and 1:3, rounded); vertically co-sited
//!    chroma is only repeated (`video_chroma_up_v2_cs_u8` is a stub in 1.22);
//! 3. the matrix: `prepare_matrix` picks `video_converter_matrix8_AYUV_ARGB`, the orc function
//!    `video_orc_convert_AYUV_ARGB`: five 8.8 fixed-point coefficients (`RgbCoefficients`) on
//!    samples centred on 128, luma included (the range offsets of the matrix are dropped, so
//!    limited-range white, 235, gives 253), `mulhsw` products, saturated to 0..=255;
//! 4. pack to RGB. Nothing else runs: no dithering (8 bits in and out), no gamma or primaries
//!    step (default options).
//!
//! [`nv12_to_rgb`] follows those steps pixel by pixel; `kernels/nv12.cu` (launched by
//! `gpu::enqueue_nv12_to_rgb`) repeats them with the coefficients computed here.
//!
//! **Bands.** The converter splits the rows into one band per thread, each with its own line
//! caches, and the vertical upsampler pairs rows from the start of a band: rows `(-1, 0), (1, 2),
//! ...` in the first band, `(b, b + 1), ...` in a band starting at row `b`. A band starting on
//! an even row therefore pairs two rows of the same chroma row and repeats it, where one thread
//! interpolates: the bytes depend on the converter's thread count ([`Nv12Conversion::threads`],
//! `Nv12Conversion::band_rows`).

use gstreamer_video as gst_video;
use rayon::prelude::*;

use crate::image::{Image, ImageView};
use crate::ops::OpError;

pub mod gpu;

/// The colour matrix of the YUV samples, by its Kr and Kb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YuvMatrix {
    /// ITU-R BT.601.
    Bt601,
    /// ITU-R BT.709.
    Bt709,
    /// ITU-R BT.2020.
    Bt2020,
    /// SMPTE 240M.
    Smpte240m,
    /// FCC (Title 47).
    Fcc,
}

impl YuvMatrix {
    /// Kr and Kb, GStreamer's values (`gst_video_color_matrix_get_Kr_Kb`).
    #[must_use]
    pub(crate) fn kr_kb(self) -> (f64, f64) {
        match self {
            Self::Bt601 => (0.2990, 0.1140),
            Self::Bt709 => (0.2126, 0.0722),
            Self::Bt2020 => (0.2627, 0.0593),
            Self::Smpte240m => (0.212, 0.087),
            Self::Fcc => (0.30, 0.11),
        }
    }
}

/// The range of the YUV samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YuvRange {
    /// Luma 16..=235, chroma 16..=240 (`GST_VIDEO_COLOR_RANGE_16_235`).
    Limited,
    /// 0..=255 (`GST_VIDEO_COLOR_RANGE_0_255`; GStreamer also reads an unknown range as full).
    Full,
}

/// What the RGB bytes of GStreamer's NV12 conversion depend on besides the pixels: the
/// colorimetry's matrix and range, the chroma siting and the converter's thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nv12Conversion {
    /// The colour matrix.
    pub matrix: YuvMatrix,
    /// The sample range.
    pub range: YuvRange,
    /// Chroma sits on the even luma columns (`GST_VIDEO_CHROMA_SITE_H_COSITED`: "mpeg2",
    /// "cosited", "dv"), not halfway between two columns.
    pub h_cosited: bool,
    /// Chroma sits on the even luma rows (`GST_VIDEO_CHROMA_SITE_V_COSITED`: "cosited", "dv"),
    /// not halfway between two rows.
    pub v_cosited: bool,
    /// The threads the converter runs (at least 1, at most the processor count): they decide
    /// its bands (`Self::band_rows`).
    pub threads: u32,
}

impl Nv12Conversion {
    /// The conversion of frames described by `info` by a `VideoConverter` configured with
    /// `converter_threads` (`VideoConverterConfig::set_threads`; 0 or more than the processors
    /// means one a processor, as in GStreamer) into RGB with the default RGB colorimetry (sRGB,
    /// full range), other options at their defaults. Errors on what this module does not
    /// reproduce: another format than NV12, interlaced frames, a matrix without Kr and Kb.
    pub fn from_video_info(
        info: &gst_video::VideoInfo,
        converter_threads: u32,
    ) -> Result<Self, OpError> {
        if info.format() != gst_video::VideoFormat::Nv12 {
            return Err(OpError::Unsupported(format!(
                "{:?} frames: the GPU conversion takes NV12",
                info.format()
            )));
        }
        if info.interlace_mode() != gst_video::VideoInterlaceMode::Progressive {
            return Err(OpError::Unsupported(format!(
                "{:?} NV12: the GPU conversion takes progressive frames",
                info.interlace_mode()
            )));
        }
        let colorimetry = info.colorimetry();
        let matrix = match colorimetry.matrix() {
            gst_video::VideoColorMatrix::Bt601 => YuvMatrix::Bt601,
            gst_video::VideoColorMatrix::Bt709 => YuvMatrix::Bt709,
            gst_video::VideoColorMatrix::Bt2020 => YuvMatrix::Bt2020,
            gst_video::VideoColorMatrix::Smpte240m => YuvMatrix::Smpte240m,
            gst_video::VideoColorMatrix::Fcc => YuvMatrix::Fcc,
            other => {
                return Err(OpError::Unsupported(format!(
                    "NV12 with colour matrix {other:?}"
                )));
            }
        };
        let range = match colorimetry.range() {
            gst_video::VideoColorRange::Range16_235 => YuvRange::Limited,
            _ => YuvRange::Full,
        };
        let site = info.chroma_site();
        let processors = gstreamer::glib::num_processors().max(1);
        let threads = if converter_threads == 0 || converter_threads > processors {
            processors
        } else {
            converter_threads
        };
        Ok(Self {
            matrix,
            range,
            h_cosited: site.contains(gst_video::VideoChromaSite::H_COSITED),
            v_cosited: site.contains(gst_video::VideoChromaSite::V_COSITED),
            threads,
        })
    }

    /// The matrix coefficients, computed as `compute_matrix_to_RGB`, `compute_matrix_to_YUV`
    /// and `prepare_matrix` compute them: the range's scale (`1 / (float) scale`), the YCbCr to
    /// R'G'B' matrix, times 255 (full-range RGB), times 256, `rint`. The values before `rint`
    /// are at least 0.002 from a tie for every matrix and range, so operation order and FMA
    /// contraction cannot change them.
    #[must_use]
    pub(crate) fn coefficients(&self) -> RgbCoefficients {
        let [y, r_v, g_u, g_v, b_u] = self
            .unrounded_coefficients()
            .map(|c| c.round_ties_even() as i32);
        RgbCoefficients {
            y,
            r_v,
            g_u,
            g_v,
            b_u,
        }
    }

    /// [`Self::coefficients`] before `rint`, in the order of [`RgbCoefficients`]' fields.
    fn unrounded_coefficients(&self) -> [f64; 5] {
        let (luma_scale, chroma_scale) = match self.range {
            YuvRange::Limited => (219.0f32, 224.0f32),
            YuvRange::Full => (255.0, 255.0),
        };
        let (sy, sc) = (f64::from(1.0 / luma_scale), f64::from(1.0 / chroma_scale));
        let (kr, kb) = self.matrix.kr_kb();
        let kg = 1.0 - kr - kb;
        let fixed = |k: f64, s: f64| (k * s) * 255.0 * 256.0;
        [
            fixed(1.0, sy),
            fixed(2.0 * (1.0 - kr), sc),
            fixed(-2.0 * kb * (1.0 - kb) / kg, sc),
            fixed(-2.0 * kr * (1.0 - kr) / kg, sc),
            fixed(2.0 * (1.0 - kb), sc),
        ]
    }

    /// Rows of each of the converter's bands for frames `height` rows high (the last band may
    /// be shorter): `ceil(height / n)` for its `n` threads, or for `ceil(height / 200)` threads
    /// when `height / n` is under 200 (`gst_video_converter_new_with_pool`).
    #[must_use]
    pub(crate) fn band_rows(&self, height: usize) -> usize {
        let mut n = self.threads.max(1) as usize;
        if height / n < 200 {
            n = height.div_ceil(200);
        }
        height.div_ceil(n.max(1)).max(1)
    }
}

/// The five coefficients of GStreamer's AYUV to RGB matrix, 8.8 fixed point (`im[i][j]` of
/// `video_converter_matrix8_AYUV_ARGB`); the CUDA kernel takes them as arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RgbCoefficients {
    /// Luma into R, G and B.
    pub y: i32,
    /// V into R.
    pub r_v: i32,
    /// U into G.
    pub g_u: i32,
    /// V into G.
    pub g_v: i32,
    /// U into B.
    pub b_u: i32,
}

/// orc's `splatbw` of a sample centred on 128: the byte `v - 128` (wrapping) in both halves of
/// a signed 16-bit word, about `257 * (v - 128)`.
fn splat(v: u8) -> i32 {
    let b = u16::from(v.wrapping_sub(128));
    i32::from(((b << 8) | b) as i16)
}

/// orc's `mulhsw`: the high half of the signed 16 x 16-bit product.
fn mulhs(w: i32, c: i32) -> i32 {
    (w * c) >> 16
}

/// orc's `convssswb` then `addb 128`: saturated to -128..=127, back to 0..=255.
fn saturate(v: i32) -> u8 {
    (v.clamp(-128, 127) + 128) as u8
}

/// One pixel through `video_orc_convert_AYUV_ARGB`.
#[must_use]
pub(crate) fn yuv_to_rgb(y: u8, u: u8, v: u8, c: &RgbCoefficients) -> [u8; 3] {
    let (wy, wu, wv) = (mulhs(splat(y), c.y), splat(u), splat(v));
    [
        saturate(wy + mulhs(wv, c.r_v)),
        saturate(wy + mulhs(wu, c.g_u) + mulhs(wv, c.g_v)),
        saturate(wy + mulhs(wu, c.b_u)),
    ]
}

/// The chroma rows luma row `y` blends and whether `y` is the first row of its pair: rows are
/// paired from the start of their band of `band_rows` rows (the first band from row -1),
/// clamped to the frame; vertically co-sited chroma pairs a row with itself.
fn chroma_rows(y: usize, height: usize, band_rows: usize, v_cosited: bool) -> (usize, usize, bool) {
    if v_cosited {
        return (y / 2, y / 2, true);
    }
    let band = y - y % band_rows;
    let first = if band == 0 {
        y % 2 == 1
    } else {
        (y - band).is_multiple_of(2)
    };
    let (r0, r1) = if first {
        (y, (y + 1).min(height - 1))
    } else {
        (y.saturating_sub(1), y)
    };
    (r0 / 2, r1 / 2, first)
}

/// U and V of luma column `x` upsampled from one chroma row (`width` luma columns wide): the
/// unpacked pair on column 0 and on the last column of an even width; elsewhere the 3:1 / 1:3
/// blends of `video_chroma_up_h2_u8`, or for co-sited chroma the pair itself on even columns and
/// the rounded mean of the two neighbours on odd ones (`video_chroma_up_h2_cs_u8`).
fn upsample_h(row: &[u8], x: usize, width: usize, h_cosited: bool) -> [u8; 2] {
    let k = 2 * (x / 2);
    let at = |i: usize| u32::from(row[i]);
    let mut out = [0u8; 2];
    for (c, o) in out.iter_mut().enumerate() {
        let v = if x % 2 == 1 && x + 1 < width {
            if h_cosited {
                (at(k + c) + at(k + 2 + c) + 1) >> 1
            } else {
                (3 * at(k + c) + at(k + 2 + c) + 2) >> 2
            }
        } else if x.is_multiple_of(2) && x >= 2 && !h_cosited {
            (at(k - 2 + c) + 3 * at(k + c) + 2) >> 2
        } else {
            at(k + c)
        };
        *o = v as u8;
    }
    out
}

/// The vertical blend of two horizontally upsampled chroma values (`video_orc_chroma_up_v2_u8`).
fn blend_v(a: u8, b: u8, first: bool) -> u8 {
    let (a, b) = (u32::from(a), u32::from(b));
    (if first {
        (3 * a + b + 2) >> 2
    } else {
        (a + 3 * b + 2) >> 2
    }) as u8
}

/// The Y plane and the UV plane (as bytes: `2 * ceil(width / 2)` a row) of an NV12 frame, or an
/// error when a plane is too small for the frame at its stride.
pub(crate) fn plane_views<'a>(
    y_plane: &'a [u8],
    y_stride: usize,
    uv_plane: &'a [u8],
    uv_stride: usize,
    width: usize,
    height: usize,
) -> Result<(ImageView<'a, u8>, ImageView<'a, u8>), OpError> {
    let luma = ImageView::new(width, height, y_stride, y_plane)?;
    let chroma = ImageView::new(
        2 * width.div_ceil(2),
        height.div_ceil(2),
        uv_stride,
        uv_plane,
    )?;
    Ok((luma, chroma))
}

/// NV12 to packed RGB on the CPU, the bytes of GStreamer 1.22's `VideoConverter` for `conv`.
/// `y_plane` holds `height` rows of `width` luma bytes, `y_stride` bytes apart; `uv_plane`
/// `ceil(height / 2)` rows of `ceil(width / 2)` interleaved U, V pairs, `uv_stride` bytes apart
/// (the last row of each plane needs only its samples). Rows in parallel.
pub fn nv12_to_rgb(
    y_plane: &[u8],
    y_stride: usize,
    uv_plane: &[u8],
    uv_stride: usize,
    width: usize,
    height: usize,
    conv: &Nv12Conversion,
) -> Result<Image<[u8; 3]>, OpError> {
    let (luma, chroma) = plane_views(y_plane, y_stride, uv_plane, uv_stride, width, height)?;
    let mut out = vec![[0u8; 3]; width * height];
    if width > 0 {
        let coeffs = conv.coefficients();
        let band_rows = conv.band_rows(height);
        out.par_chunks_mut(width).enumerate().for_each(|(y, row)| {
            let (r0, r1, first) = chroma_rows(y, height, band_rows, conv.v_cosited);
            let (c0, c1) = (chroma.row(r0), chroma.row(r1));
            for (x, (o, &l)) in row.iter_mut().zip(luma.row(y)).enumerate() {
                let a = upsample_h(c0, x, width, conv.h_cosited);
                let b = upsample_h(c1, x, width, conv.h_cosited);
                let (u, v) = (blend_v(a[0], b[0], first), blend_v(a[1], b[1], first));
                *o = yuv_to_rgb(l, u, v, &coeffs);
            }
        });
    }
    Ok(Image::from_vec(width, height, out)?)
}

#[cfg(test)]
mod tests;
