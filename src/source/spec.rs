//! SOURCE strings: what the user typed, parsed into a [`SourceSpec`], then turned into a
//! GStreamer pipeline description ending in an appsink named `sink`.
//!
//! | SOURCE | pipeline |
//! |---|---|
//! | `path/to/file.mp4` | `uridecodebin uri=file:///abs/path` (checked to exist first) |
//! | `file://…`, `rtsp://…`, `http(s)://…` | `uridecodebin uri=…` |
//! | `camera`, `camera:N` | `v4l2src device=/dev/videoN` |
//! | `csi`, `csi:N` | `nvarguscamerasrc sensor-id=N ! nvvidconv` (Jetson CSI cameras) |
//! | `test`, `test:PATTERN` | `videotestsrc pattern=PATTERN num-buffers=…` at the test size |
//! | `… ! appsink name=sink` | the description as given |
//!
//! Where Jetson's `nvvidconv` is installed, decoded and camera frames pass through it to system
//! memory first (see [`super::elements`]). Every built-in form ends in [`SINK_TAIL`],
//! `videoconvert n-threads=4 ! appsink name=sink`; the appsink's caps (RGB,
//! GRAY8 or GRAY16_LE) are set by [`super::Source`]. Whether a source is live is not decided
//! here from the scheme but asked of the running pipeline (an `http://` file is not live, an
//! `rtsp://` stream is).

use std::path::{Path, PathBuf};

use super::SourceError;
use super::elements::VideoElements;

/// Threads the conversion to the analyses' format splits a frame's rows over (`videoconvert`
/// and the GStreamer element's converter). One (GStreamer's default) caps a file run at about
/// 60 fps of 1080p on a 2-core host; 4 take that to the decoder's rate and leave the other
/// cores to decoding and the analyses.
pub const CONVERTER_THREADS: u32 = 4;

/// The end of every built-in pipeline: the conversion to the appsink's caps, and the appsink.
pub const SINK_TAIL: &str = "videoconvert n-threads=4 ! appsink name=sink";

/// A parsed SOURCE string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceSpec {
    /// A local file.
    File(PathBuf),
    /// A URI handled by uridecodebin (file, rtsp, http, https).
    Uri(String),
    /// A V4L2 camera `/dev/videoN`.
    Camera(u32),
    /// A Jetson CSI camera through `nvarguscamerasrc sensor-id=N`.
    Csi(u32),
    /// GStreamer's videotestsrc with a pattern name (smpte, ball, snow, …).
    Test(String),
    /// A user pipeline description that ends in `appsink name=sink`.
    Pipeline(String),
}

/// Size and length of the `test` source.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TestSourceOptions {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// Frames to produce before end of stream (0 = endless).
    pub frames: u32,
    /// Frames per second (timestamps; the source runs as fast as the pipeline pulls).
    pub fps: u32,
}

impl Default for TestSourceOptions {
    fn default() -> Self {
        Self {
            width: 640,
            height: 480,
            frames: 300,
            fps: 30,
        }
    }
}

/// videotestsrc patterns accepted after `test:`.
pub(crate) const TEST_PATTERNS: &[&str] = &[
    "smpte",
    "snow",
    "black",
    "white",
    "red",
    "green",
    "blue",
    "checkers-1",
    "checkers-2",
    "checkers-4",
    "checkers-8",
    "circular",
    "blink",
    "smpte75",
    "zone-plate",
    "gamut",
    "chroma-zone-plate",
    "solid-color",
    "ball",
    "smpte100",
    "bar",
    "pinwheel",
    "spokes",
    "gradient",
    "colors",
];

impl SourceSpec {
    /// Whether a source that cannot be opened at the start is waited for (reconnecting, as
    /// after a loss): a network stream URL (RTSP, RTMP, SRT, UDP), live by its kind, whose
    /// server may be down for a while. A camera device missing at the start is most often a
    /// wrong number, and an HTTP URL or a pipeline may not be live at all: those are errors.
    #[must_use]
    pub(crate) fn awaited_at_start(&self) -> bool {
        match self {
            Self::Uri(u) => {
                let scheme = u.split_once("://").map_or("", |(s, _)| s);
                ["rtsp", "rtsps", "rtmp", "srt", "udp"]
                    .iter()
                    .any(|k| scheme.eq_ignore_ascii_case(k))
            }
            Self::File(_) | Self::Camera(_) | Self::Csi(_) | Self::Test(_) | Self::Pipeline(_) => {
                false
            }
        }
    }

    /// Parses a SOURCE string; a missing file or an unknown scheme is an error here, before any
    /// pipeline is built.
    pub fn parse(s: &str) -> Result<Self, SourceError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(SourceError::BadSpec("empty SOURCE".into()));
        }
        if s.contains('!') || s.contains("appsink") {
            if !s.contains("appsink name=sink") {
                return Err(SourceError::BadSpec(
                    "a pipeline description must end in `appsink name=sink`".into(),
                ));
            }
            return Ok(Self::Pipeline(s.to_owned()));
        }
        if s == "test" {
            return Ok(Self::Test("smpte".into()));
        }
        if let Some(p) = s.strip_prefix("test:") {
            if !TEST_PATTERNS.contains(&p) {
                return Err(SourceError::BadSpec(format!(
                    "unknown test pattern `{p}` (one of: {})",
                    TEST_PATTERNS.join(", ")
                )));
            }
            return Ok(Self::Test(p.to_owned()));
        }
        if s == "camera" {
            return Ok(Self::Camera(0));
        }
        if let Some(n) = s.strip_prefix("camera:") {
            return n.parse().map(Self::Camera).map_err(|_| {
                SourceError::BadSpec(format!("`{s}`: camera index must be a number"))
            });
        }
        if s == "csi" {
            return Ok(Self::Csi(0));
        }
        if let Some(n) = s.strip_prefix("csi:") {
            return n.parse().map(Self::Csi).map_err(|_| {
                SourceError::BadSpec(format!("`{s}`: CSI sensor id must be a number"))
            });
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return match scheme {
                "file" | "rtsp" | "rtsps" | "http" | "https" | "rtmp" | "udp" | "srt" => {
                    Ok(Self::Uri(s.to_owned()))
                }
                _ => Err(SourceError::BadSpec(format!(
                    "unknown scheme `{scheme}://` (file, rtsp, http, https, rtmp, udp, srt)"
                ))),
            };
        }
        if s.contains(':') && !Path::new(s).exists() && !s.starts_with('.') && !s.starts_with('/') {
            let scheme = s.split(':').next().unwrap_or("");
            if !scheme.contains('/') && !scheme.contains('.') {
                return Err(SourceError::BadSpec(format!(
                    "unknown source `{s}` (a file, a URI, camera[:N], test[:PATTERN] or a pipeline ending in `appsink name=sink`)"
                )));
            }
        }
        let path = PathBuf::from(s);
        if !path.exists() {
            return Err(SourceError::NotFound(path));
        }
        if path.is_dir() {
            return Err(SourceError::BadSpec(format!(
                "{} is a directory, not a video",
                path.display()
            )));
        }
        Ok(Self::File(path))
    }

    /// The GStreamer description, without the final caps/appsink part for built-in forms, for
    /// the elements GStreamer has installed.
    pub fn pipeline_description(&self, test: &TestSourceOptions) -> Result<String, SourceError> {
        self.pipeline_description_with(test, &VideoElements::installed())
    }

    /// [`Self::pipeline_description`] for a given set of Jetson elements.
    pub(crate) fn pipeline_description_with(
        &self,
        test: &TestSourceOptions,
        elements: &VideoElements,
    ) -> Result<String, SourceError> {
        let tail = SINK_TAIL;
        let decoded = elements.to_system_memory();
        Ok(match self {
            Self::File(p) => {
                let abs = std::fs::canonicalize(p).map_err(|e| SourceError::Io(p.clone(), e))?;
                format!("uridecodebin uri=\"{}\" ! {decoded}{tail}", file_uri(&abs))
            }
            Self::Uri(u) => format!("uridecodebin uri=\"{u}\" ! {decoded}{tail}"),
            Self::Camera(n) => format!("v4l2src device=/dev/video{n} ! {tail}"),
            Self::Csi(n) => format!(
                "{}{tail}",
                elements.csi_camera(*n).map_err(SourceError::BadSpec)?
            ),
            Self::Test(pattern) => {
                let TestSourceOptions {
                    width,
                    height,
                    frames,
                    fps,
                } = *test;
                if width == 0 || height == 0 || fps == 0 {
                    return Err(SourceError::BadSpec(format!(
                        "test source size {width}x{height} at {fps} fps is invalid"
                    )));
                }
                let n = if frames == 0 { -1 } else { i64::from(frames) };
                format!(
                    "videotestsrc pattern={pattern} num-buffers={n} ! video/x-raw,width={width},height={height},framerate={fps}/1 ! {tail}"
                )
            }
            Self::Pipeline(p) => p.clone(),
        })
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(p) => write!(f, "{}", p.display()),
            Self::Uri(u) => write!(f, "{}", crate::redact::url(u)),
            Self::Camera(n) => write!(f, "camera:{n}"),
            Self::Csi(n) => write!(f, "csi:{n}"),
            Self::Test(p) => write!(f, "test:{p}"),
            Self::Pipeline(p) => write!(f, "pipeline `{}`", crate::redact::text(p)),
        }
    }
}

/// `file://` URI of an absolute path, percent-encoding what URIs cannot hold.
fn file_uri(p: &Path) -> String {
    let mut out = String::from("file://");
    for b in p.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stream_urls_are_awaited_at_the_start() {
        let awaited = |s: &str| SourceSpec::parse(s).unwrap().awaited_at_start();
        for s in [
            "rtsp://cam/1",
            "rtsps://cam/1",
            "rtmp://h/live",
            "srt://h:9000",
            "udp://0.0.0.0:5000",
        ] {
            assert!(awaited(s), "{s}");
        }
        for s in [
            "http://h/x.mp4",
            "camera:3",
            "test",
            "videotestsrc ! appsink name=sink",
        ] {
            assert!(!awaited(s), "{s}");
        }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            SourceSpec::parse("test").unwrap(),
            SourceSpec::Test("smpte".into())
        );
        assert_eq!(
            SourceSpec::parse("test:ball").unwrap(),
            SourceSpec::Test("ball".into())
        );
        assert_eq!(SourceSpec::parse("camera").unwrap(), SourceSpec::Camera(0));
        assert_eq!(
            SourceSpec::parse("camera:7").unwrap(),
            SourceSpec::Camera(7)
        );
        assert_eq!(SourceSpec::parse("csi").unwrap(), SourceSpec::Csi(0));
        assert_eq!(SourceSpec::parse("csi:2").unwrap(), SourceSpec::Csi(2));
        assert_eq!(SourceSpec::Csi(2).to_string(), "csi:2");
        assert!(matches!(
            SourceSpec::parse("rtsp://h/x").unwrap(),
            SourceSpec::Uri(_)
        ));
        assert!(matches!(
            SourceSpec::parse("videotestsrc ! appsink name=sink").unwrap(),
            SourceSpec::Pipeline(_)
        ));
        assert!(matches!(
            SourceSpec::parse("Cargo.toml").unwrap(),
            SourceSpec::File(_)
        ));
    }

    #[test]
    fn rejects_bad_forms_with_a_reason() {
        for bad in [
            "",
            "test:nope",
            "camera:x",
            "csi:x",
            "gopher://x",
            "foo:bar",
            "videotestsrc ! fakesink",
        ] {
            let e = SourceSpec::parse(bad).unwrap_err().to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(matches!(
            SourceSpec::parse("/no/such/file.mp4"),
            Err(SourceError::NotFound(_))
        ));
    }

    #[test]
    fn the_sink_tail_converts_on_the_converter_threads() {
        assert!(SINK_TAIL.contains(&format!("n-threads={CONVERTER_THREADS} ")));
    }

    #[test]
    fn jetson_elements_shape_the_pipelines() {
        let test = TestSourceOptions::default();
        let jetson = VideoElements {
            nvvidconv: true,
            nvv4l2decoder: true,
            nvarguscamerasrc: true,
        };
        let uri = SourceSpec::Uri("rtsp://h/x".into());
        assert_eq!(
            uri.pipeline_description_with(&test, &jetson).unwrap(),
            "uridecodebin uri=\"rtsp://h/x\" ! nvvidconv ! video/x-raw ! videoconvert n-threads=4 ! appsink name=sink"
        );
        assert_eq!(
            uri.pipeline_description_with(&test, &VideoElements::default())
                .unwrap(),
            "uridecodebin uri=\"rtsp://h/x\" ! videoconvert n-threads=4 ! appsink name=sink"
        );
        assert_eq!(
            SourceSpec::Csi(1)
                .pipeline_description_with(&test, &jetson)
                .unwrap(),
            "nvarguscamerasrc sensor-id=1 ! video/x-raw(memory:NVMM) ! nvvidconv ! video/x-raw ! videoconvert n-threads=4 ! appsink name=sink"
        );
        let missing = SourceSpec::Csi(0)
            .pipeline_description_with(&test, &VideoElements::default())
            .unwrap_err()
            .to_string();
        assert!(missing.contains("nvarguscamerasrc"), "{missing}");
    }

    #[test]
    fn uri_encoding() {
        assert_eq!(file_uri(Path::new("/a b/c.mp4")), "file:///a%20b/c.mp4");
    }
}
