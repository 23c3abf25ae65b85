//! Which H.264 encoder writes the overlay video (`[output] encoder`). `auto` takes the fastest
//! present that accepts the frame size: NVENC (`nvh264enc` or `nvcudah264enc` from GStreamer's
//! nvcodec plugin, which registers them only where the driver and a device are present;
//! `nvv4l2h264enc` on Jetson), else `x264enc` (ultrafast preset, every core), else
//! `openh264enc`. [`choose_encoder`] decides from what [`installed_encoder`] reports, so the
//! choice is tested without the elements; `properties` sets each one up by the names its
//! versions use.

use crate::config::EncoderChoice;
use gstreamer as gst;
use gstreamer::prelude::*;

/// NVENC encoder elements, preferred first: nvcodec's (desktop and data-centre GPUs), then
/// Jetson's V4L2 one.
pub(crate) const NVENC_ENCODERS: &[&str] = &["nvh264enc", "nvcudah264enc", "nvv4l2h264enc"];

/// The encoder elements a choice may use, fastest first.
#[must_use]
pub fn candidates(choice: EncoderChoice) -> &'static [&'static str] {
    match choice {
        EncoderChoice::Auto => &[
            "nvh264enc",
            "nvcudah264enc",
            "nvv4l2h264enc",
            "x264enc",
            "openh264enc",
        ],
        EncoderChoice::Nvenc => NVENC_ENCODERS,
        EncoderChoice::X264 => &["x264enc"],
        EncoderChoice::Openh264 => &["openh264enc"],
    }
}

/// Why no encoder can write the video.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoEncoder {
    /// None of the choice's elements is installed.
    #[error("no {wanted} H.264 encoder is installed ({}); install gstreamer1.0-plugins-ugly (x264) or -bad (openh264), or use --no-video", .looked_for.join(", "))]
    Missing {
        /// What the settings asked for.
        wanted: String,
        /// The elements looked for.
        looked_for: Vec<&'static str>,
    },
    /// Every installed one refuses frames this small.
    #[error(
        "frames of {width}x{height} are smaller than {encoder} accepts ({min_width}x{min_height})"
    )]
    TooSmall {
        /// Encoded width.
        width: usize,
        /// Encoded height.
        height: usize,
        /// The smallest-accepting installed encoder.
        encoder: &'static str,
        /// Its minimum width.
        min_width: usize,
        /// Its minimum height.
        min_height: usize,
    },
}

/// The first of `choice`'s encoders that `installed` knows (returning its minimum frame size)
/// and that accepts `width`×`height`.
pub fn choose_encoder(
    choice: EncoderChoice,
    width: usize,
    height: usize,
    installed: impl Fn(&str) -> Option<(usize, usize)>,
) -> Result<&'static str, NoEncoder> {
    choose_encoders(choice, width, height, installed).map(|all| all[0])
}

/// Every one of `choice`'s encoders that is installed and accepts `width`×`height`, fastest
/// first (never empty): the next is the fallback when one fails to start.
pub(crate) fn choose_encoders(
    choice: EncoderChoice,
    width: usize,
    height: usize,
    installed: impl Fn(&str) -> Option<(usize, usize)>,
) -> Result<Vec<&'static str>, NoEncoder> {
    let mut fitting = Vec::new();
    let mut smallest: Option<(&'static str, (usize, usize))> = None;
    for &name in candidates(choice) {
        let Some(min) = installed(name) else { continue };
        if width >= min.0 && height >= min.1 {
            fitting.push(name);
        } else if smallest.is_none_or(|(_, m)| min.0 * min.1 < m.0 * m.1) {
            smallest = Some((name, min));
        }
    }
    if !fitting.is_empty() {
        return Ok(fitting);
    }
    Err(match smallest {
        Some((encoder, (min_width, min_height))) => NoEncoder::TooSmall {
            width,
            height,
            encoder,
            min_width,
            min_height,
        },
        None => NoEncoder::Missing {
            wanted: format!("{choice:?}").to_lowercase(),
            looked_for: candidates(choice).to_vec(),
        },
    })
}

/// Whether `element` is installed, and the smallest frame it takes: what its sink template
/// says (nvcodec builds it from the device's limits), at least 2×2 (4:2:0), and 16×16 for
/// OpenH264 (which refuses smaller frames at run time).
#[must_use]
pub fn installed_encoder(element: &str) -> Option<(usize, usize)> {
    let factory = gst::ElementFactory::find(element)?;
    let floor = if element == "openh264enc" {
        (16, 16)
    } else {
        (2, 2)
    };
    let template_min = |field: &str| -> usize {
        factory
            .static_pad_templates()
            .iter()
            .filter(|t| t.direction() == gst::PadDirection::Sink)
            .filter_map(|t| {
                t.caps()
                    .structure(0)
                    .and_then(|s| s.get::<gst::IntRange<i32>>(field).ok())
            })
            .map(|r| usize::try_from(r.min()).unwrap_or(0))
            .max()
            .unwrap_or(0)
    };
    Some((
        floor.0.max(template_min("width")),
        floor.1.max(template_min("height")),
    ))
}

/// Encoder properties: bitrate, key-frame interval and the fastest low-latency preset, by the
/// names each element uses. A property an installed version lacks is skipped (logged).
pub(super) fn properties(encoder: &str, kbps: u32, key_frames: u64) -> Vec<(&'static str, String)> {
    let (kbps, bps, key) = (
        kbps.to_string(),
        (u64::from(kbps) * 1000).to_string(),
        key_frames.to_string(),
    );
    match encoder {
        "x264enc" => vec![
            ("bitrate", kbps),
            ("speed-preset", "ultrafast".into()),
            ("tune", "zerolatency".into()),
            ("key-int-max", key),
            ("threads", "0".into()),
        ],
        "openh264enc" => vec![("bitrate", bps), ("gop-size", key)],
        "nvh264enc" => vec![
            ("bitrate", kbps),
            ("gop-size", key),
            ("preset", "low-latency-hp".into()),
            ("zerolatency", "true".into()),
        ],
        "nvcudah264enc" => vec![
            ("bitrate", kbps),
            ("gop-size", key),
            ("preset", "p1".into()),
            ("tune", "ultra-low-latency".into()),
        ],
        "nvv4l2h264enc" => vec![
            ("bitrate", bps),
            ("iframeinterval", key),
            ("insert-sps-pps", "true".into()),
        ],
        _ => Vec::new(),
    }
}

/// Sets `name` from its string form when the element has it and the value parses.
pub(super) fn set_if_present(element: &gst::Element, name: &str, value: &str) {
    let Some(pspec) = element.find_property(name) else {
        log::debug!("overlay video: {} has no property {name}", element.name());
        return;
    };
    if !pspec.flags().contains(gst::glib::ParamFlags::WRITABLE) {
        return;
    }
    match gst::glib::Value::deserialize_with_pspec(value, &pspec) {
        Ok(v) => element.set_property_from_value(name, &v),
        Err(e) => log::debug!(
            "overlay video: {name}={value} not accepted by {}: {e}",
            element.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_fastest_encoder_that_fits() {
        let all = |n: &str| match n {
            "nvh264enc" => Some((145, 49)),
            "x264enc" => Some((2, 2)),
            "openh264enc" => Some((16, 16)),
            _ => None,
        };
        assert_eq!(
            choose_encoder(EncoderChoice::Auto, 1920, 1080, all),
            Ok("nvh264enc")
        );
        // Too small for NVENC: x264 takes it.
        assert_eq!(
            choose_encoder(EncoderChoice::Auto, 64, 48, all),
            Ok("x264enc")
        );
        let software = |n: &str| all(n).filter(|_| n != "nvh264enc");
        assert_eq!(
            choose_encoder(EncoderChoice::Auto, 1920, 1080, software),
            Ok("x264enc")
        );
        let openh264_only = |n: &str| all(n).filter(|_| n == "openh264enc");
        assert_eq!(
            choose_encoder(EncoderChoice::Auto, 640, 480, openh264_only),
            Ok("openh264enc")
        );
        assert!(matches!(
            choose_encoder(EncoderChoice::Auto, 8, 8, openh264_only),
            Err(NoEncoder::TooSmall {
                encoder: "openh264enc",
                min_width: 16,
                ..
            })
        ));
        assert!(matches!(
            choose_encoder(EncoderChoice::Nvenc, 1920, 1080, software),
            Err(NoEncoder::Missing { .. })
        ));
        assert_eq!(
            choose_encoder(EncoderChoice::X264, 1920, 1080, all),
            Ok("x264enc")
        );
        let jetson = |n: &str| (n == "nvv4l2h264enc" || n == "x264enc").then_some((2, 2));
        assert_eq!(
            choose_encoder(EncoderChoice::Auto, 1920, 1080, jetson),
            Ok("nvv4l2h264enc")
        );
    }
}
