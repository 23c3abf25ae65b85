//! Jetson's video elements in the source pipelines. JetPack's GStreamer plugins decode with
//! `nvv4l2decoder` (NVDEC) and read CSI cameras with `nvarguscamerasrc`; both hand out frames
//! in NVMM memory (`video/x-raw(memory:NVMM)`), which `videoconvert` cannot read. `nvvidconv`
//! (the VIC converter) copies NVMM frames to system memory and passes system-memory frames
//! through, so where it is installed every decoded stream goes through it before `videoconvert`,
//! whichever decoder decodebin plugged.
//!
//! `VideoElements` records which of these elements the registry has; it is built from a set
//! of factory names (`VideoElements::among`) so the choices are tested without a Jetson, and
//! from GStreamer's registry at run time (`VideoElements::installed`).

use gstreamer as gst;

/// The Jetson elements a source pipeline may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VideoElements {
    /// `nvvidconv`: NVMM to system memory conversion.
    pub nvvidconv: bool,
    /// `nvv4l2decoder`: Jetson's NVDEC decoder (NVMM output).
    pub nvv4l2decoder: bool,
    /// `nvarguscamerasrc`: CSI cameras through libargus.
    pub nvarguscamerasrc: bool,
}

impl VideoElements {
    /// The elements among the factory names `registered` reports.
    #[must_use]
    pub fn among(registered: impl Fn(&str) -> bool) -> Self {
        Self {
            nvvidconv: registered("nvvidconv"),
            nvv4l2decoder: registered("nvv4l2decoder"),
            nvarguscamerasrc: registered("nvarguscamerasrc"),
        }
    }

    /// The elements GStreamer's registry has (none when GStreamer cannot be initialised).
    #[must_use]
    pub fn installed() -> Self {
        if gst::init().is_err() {
            return Self::default();
        }
        let registry = gst::Registry::get();
        Self::among(|name| registry.lookup_feature(name).is_some())
    }

    /// What goes between a decoder (or camera) and `videoconvert`: `nvvidconv` to system memory
    /// where it is installed, else nothing.
    #[must_use]
    pub fn to_system_memory(&self) -> &'static str {
        if self.nvvidconv {
            "nvvidconv ! video/x-raw ! "
        } else {
            ""
        }
    }

    /// True when `nvv4l2decoder` can be used: it is installed and `nvvidconv` can read its NVMM
    /// output.
    #[must_use]
    pub(crate) fn nvv4l2_decodes(&self) -> bool {
        self.nvv4l2decoder && self.nvvidconv
    }

    /// The head of a CSI camera pipeline (up to `videoconvert`), or why there is none.
    pub(crate) fn csi_camera(&self, sensor_id: u32) -> Result<String, String> {
        match (self.nvarguscamerasrc, self.nvvidconv) {
            (true, true) => Ok(format!(
                "nvarguscamerasrc sensor-id={sensor_id} ! video/x-raw(memory:NVMM) ! nvvidconv ! video/x-raw ! "
            )),
            (false, _) => Err(format!(
                "csi:{sensor_id} needs the nvarguscamerasrc element (JetPack's nvidia-l4t-gstreamer, Jetson only); GStreamer does not have it"
            )),
            (true, false) => Err(format!(
                "csi:{sensor_id} needs the nvvidconv element (JetPack's nvidia-l4t-gstreamer) to read the camera's NVMM frames"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JETSON: &[&str] = &[
        "nvvidconv",
        "nvv4l2decoder",
        "nvv4l2h264enc",
        "nvarguscamerasrc",
        "videoconvert",
    ];
    const DESKTOP: &[&str] = &["videoconvert", "nvh264dec", "avdec_h264", "x264enc"];

    #[test]
    fn a_jetson_registry_converts_through_nvvidconv() {
        let e = VideoElements::among(|n| JETSON.contains(&n));
        assert_eq!(e.to_system_memory(), "nvvidconv ! video/x-raw ! ");
        assert!(e.nvv4l2_decodes());
        let csi = e.csi_camera(1).unwrap();
        assert!(
            csi.starts_with("nvarguscamerasrc sensor-id=1 ! video/x-raw(memory:NVMM) ! nvvidconv"),
            "{csi}"
        );
    }

    #[test]
    fn a_desktop_registry_adds_nothing_and_refuses_csi() {
        let e = VideoElements::among(|n| DESKTOP.contains(&n));
        assert_eq!(e, VideoElements::default());
        assert_eq!(e.to_system_memory(), "");
        assert!(!e.nvv4l2_decodes());
        assert!(e.csi_camera(0).unwrap_err().contains("nvarguscamerasrc"));
    }

    #[test]
    fn nvv4l2decoder_without_nvvidconv_is_not_used() {
        let e = VideoElements::among(|n| n == "nvv4l2decoder" || n == "nvarguscamerasrc");
        assert!(!e.nvv4l2_decodes());
        assert!(e.csi_camera(0).unwrap_err().contains("nvvidconv"));
    }
}
