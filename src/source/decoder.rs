//! Which video decoder a file or URI source uses. decodebin plugs the decoder of highest rank for
//! the stream's format; GStreamer's nvcodec plugin registers NVDEC decoders (`nvh264dec`,
//! `nvh265dec`, `nvvp9dec`, `nvav1dec`, …) only where the NVIDIA driver and a device are
//! present, and not always above the software ones (`avdec_h264`, `openh264dec`, …). So once per
//! process `prefer_nvdec` raises every registered NVDEC decoder above the software decoders:
//! with the plugin, NVDEC decodes; without it, nothing changes. The decoder actually plugged is
//! reported by the source (`super::StreamInfo::decoder`) and [`kind`] says which it is.
//!
//! Jetson's `nvv4l2decoder` (NVDEC through V4L2) is raised the same way, but only where
//! `nvvidconv` is installed too: it outputs NVMM memory that only `nvvidconv` reads (the source
//! pipelines put it after the decoder then; see [`super::elements`]).

use std::sync::Once;

use gstreamer as gst;
use gstreamer::glib::translate::IntoGlib;
use gstreamer::prelude::*;

use super::elements::VideoElements;

/// NVDEC decoders of GStreamer's nvcodec plugin, by the names its versions register.
pub(crate) const NVDEC_DECODERS: &[&str] = &[
    "nvh264dec",
    "nvh265dec",
    "nvav1dec",
    "nvvp9dec",
    "nvvp8dec",
    "nvmpeg2videodec",
    "nvmpeg4videodec",
    "nvmpegvideodec",
    "nvjpegdec",
    "nvh264sldec",
    "nvh265sldec",
];

/// Jetson's NVDEC decoder (JetPack's V4L2 plugin): preferred over every other where present.
pub(crate) const JETSON_DECODER: &str = "nvv4l2decoder";

/// Rank given to NVDEC decoders: above `PRIMARY`, the rank of the software decoders
/// (`avdec_*`), so decodebin tries NVDEC first and falls back when it refuses a stream.
const NVDEC_RANK_ABOVE_PRIMARY: i32 = 10;

/// The NVDEC decoders among `registered` (element names), preferred first: Jetson's
/// [`JETSON_DECODER`] where it and `nvvidconv` are registered, then [`NVDEC_DECODERS`] in order:
/// the ones [`prefer_nvdec`] raises.
#[must_use]
pub(crate) fn nvdec_among<'a>(registered: impl Fn(&str) -> bool + 'a) -> Vec<&'static str> {
    let jetson = VideoElements::among(&registered).nvv4l2_decodes();
    let mut out: Vec<&'static str> = if jetson {
        vec![JETSON_DECODER]
    } else {
        Vec::new()
    };
    out.extend(NVDEC_DECODERS.iter().copied().filter(|n| registered(n)));
    out
}

/// `"NVDEC"` for an NVDEC decoder element, else `"software"`.
#[must_use]
pub fn kind(element: &str) -> &'static str {
    if element == JETSON_DECODER || NVDEC_DECODERS.contains(&element) {
        "NVDEC"
    } else {
        "software"
    }
}

/// Raises every registered NVDEC decoder above the software decoders, once per process (after
/// `gst::init`). Returns the decoders raised (empty without nvcodec).
pub(crate) fn prefer_nvdec() -> Vec<&'static str> {
    static ONCE: Once = Once::new();
    let registry = gst::Registry::get();
    let raised = nvdec_among(|n| registry.lookup_feature(n).is_some());
    ONCE.call_once(|| {
        let primary = gst::Rank::PRIMARY.into_glib();
        // Earlier names get higher ranks, so decodebin tries them first.
        let mut rank =
            primary + NVDEC_RANK_ABOVE_PRIMARY + i32::try_from(raised.len()).unwrap_or(0);
        for name in &raised {
            if let Some(f) = registry.lookup_feature(name)
                && f.rank().into_glib() < rank
            {
                f.set_rank(gst::Rank::from(rank));
            }
            rank -= 1;
        }
        if raised.is_empty() {
            log::debug!(
                "NVDEC: GStreamer's nvcodec decoders are not registered; software decoders decode"
            );
        } else {
            log::debug!("NVDEC preferred: {}", raised.join(", "));
        }
    });
    raised
}

/// True for an element decodebin plugs as a video decoder (its factory's class says so).
pub(super) fn is_video_decoder(element: &gst::Element) -> bool {
    element.factory().is_some_and(|f| {
        let klass = f.klass();
        klass.contains("Decoder") && klass.contains("Video")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvdec_is_chosen_only_where_registered() {
        let with_nvcodec = [
            "avdec_h264",
            "nvh264dec",
            "nvh265dec",
            "avdec_h265",
            "nvav1dec",
        ];
        assert_eq!(
            nvdec_among(|n| with_nvcodec.contains(&n)),
            vec!["nvh264dec", "nvh265dec", "nvav1dec"]
        );
        let jetson = ["nvv4l2decoder", "nvvidconv", "avdec_h264"];
        assert_eq!(nvdec_among(|n| jetson.contains(&n)), vec!["nvv4l2decoder"]);
        assert!(
            nvdec_among(|n| n == "nvv4l2decoder").is_empty(),
            "NVMM output needs nvvidconv"
        );
        assert_eq!(kind("nvv4l2decoder"), "NVDEC");
        let software_only = ["avdec_h264", "openh264dec", "vp9dec"];
        assert!(nvdec_among(|n| software_only.contains(&n)).is_empty());
        assert_eq!(kind("nvh265dec"), "NVDEC");
        assert_eq!(kind("avdec_h264"), "software");
    }

    #[test]
    fn raising_ranks_leaves_software_decoders_alone() {
        crate::source::init_gstreamer().unwrap();
        let registry = gst::Registry::get();
        let before = registry.lookup_feature("avdec_h264").map(|f| f.rank());
        let raised = prefer_nvdec();
        assert_eq!(
            registry.lookup_feature("avdec_h264").map(|f| f.rank()),
            before
        );
        for name in raised {
            let rank = registry
                .lookup_feature(name)
                .map(|f| f.rank().into_glib())
                .unwrap_or(0);
            assert!(rank > gst::Rank::PRIMARY.into_glib(), "{name} rank {rank}");
        }
    }
}
