//! Formats the analyses do not take directly — NV12 and I420 from decoders (nvcodec's
//! `nvh264dec` among them), YUY2 from cameras — converted to RGB inside the element by
//! GStreamer's own video converter, the one `videoconvert` runs, so the tables equal those of
//! `videoconvert ! video/x-raw,format=RGB ! morphoscope`. The converter writes straight into the
//! frame the analyses take (one pass over the pixels, no intermediate buffer) and splits its
//! rows over several threads, where `videoconvert` uses one by default.

use gstreamer as gst;
use gstreamer_video as gst_video;

use gstreamer::glib;

use super::spec::CONVERTER_THREADS;
use crate::image::{DynImage, Image};

/// Formats converted to RGB on the way in.
pub const CONVERTED: [gst_video::VideoFormat; 3] = [
    gst_video::VideoFormat::Nv12,
    gst_video::VideoFormat::I420,
    gst_video::VideoFormat::Yuy2,
];

/// Whether frames of `format` are converted (else the analyses take them as they are).
pub fn is_converted(format: gst_video::VideoFormat) -> bool {
    CONVERTED.contains(&format)
}

/// RGB of `input`'s size, rate, pixel aspect and interlacing; `packed`: rows back to back,
/// else GStreamer's default stride (rows padded to 4 bytes).
pub fn rgb_like(
    input: &gst_video::VideoInfo,
    packed: bool,
) -> Result<gst_video::VideoInfo, glib::BoolError> {
    let stride = [i32::try_from(input.width() as usize * 3)
        .map_err(|_| glib::bool_error!("frame too wide"))?];
    gst_video::VideoInfo::builder(gst_video::VideoFormat::Rgb, input.width(), input.height())
        .fps(input.fps())
        .par(input.par())
        .interlace_mode(input.interlace_mode())
        .stride_if(&stride, packed)
        .offset_if(&[0], packed)
        .build()
}

/// The threads of the converter: as many as `morphoscope run`'s `videoconvert`, at most one a
/// core. They also decide its bytes (the converter's bands: `ops::nv12`), which the GPU
/// conversion of frames in CUDA memory reproduces.
pub fn converter_threads() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    CONVERTER_THREADS.min(u32::try_from(cores).unwrap_or(1))
}

/// RGB pixels the converter writes into and the analyses then own.
struct RgbPixels(Vec<[u8; 3]>);

impl AsMut<[u8]> for RgbPixels {
    fn as_mut(&mut self) -> &mut [u8] {
        self.0.as_flattened_mut()
    }
}

/// A converter from one negotiated format to packed RGB of the same size.
pub struct ToRgb {
    converter: gst_video::VideoConverter,
    rgb: gst_video::VideoInfo,
}

impl ToRgb {
    /// The converter for frames of `input`.
    pub fn new(input: &gst_video::VideoInfo) -> Result<Self, glib::BoolError> {
        // Rows packed back to back (no padding to 4 bytes): the layout of `Image<[u8; 3]>`.
        let rgb = rgb_like(input, true)?;
        let mut config = gst_video::VideoConverterConfig::new();
        config.set_threads(converter_threads());
        let converter = gst_video::VideoConverter::new(input, &rgb, Some(config))?;
        Ok(Self { converter, rgb })
    }

    /// `frame` (of the format this converter was made for) as an RGB image.
    pub fn convert(
        &self,
        frame: &gst_video::VideoFrameRef<&gst::BufferRef>,
    ) -> Result<DynImage, String> {
        let (w, h) = (self.rgb.width() as usize, self.rgb.height() as usize);
        // The frame's size as GStreamer counts it (its default stride, rows padded to 4 bytes,
        // whatever the stride set): at least the packed rows, which are all that is kept.
        let len = self.rgb.size().div_ceil(3).max(w * h);
        let mut buffer = gst::Buffer::from_mut_slice(RgbPixels(vec![[0u8; 3]; len]));
        {
            let b = buffer
                .get_mut()
                .ok_or_else(|| "the RGB buffer is shared".to_owned())?;
            let mut out = gst_video::VideoFrameRef::from_buffer_ref_writable(b, &self.rgb)
                .map_err(|e| e.to_string())?;
            self.converter.frame_ref(frame, &mut out);
        }
        let RgbPixels(mut pixels) = buffer
            .try_into_inner::<RgbPixels>()
            .map_err(|(_, e)| e.to_string())?;
        pixels.truncate(w * h);
        Image::from_vec(w, h, pixels)
            .map(DynImage::Rgb8)
            .map_err(|e| e.to_string())
    }
}
