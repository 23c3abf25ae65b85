//! Which sources a client may add over HTTP: network URIs, cameras, test patterns, files under
//! `service.media_root` only, and pipeline descriptions only when `service.allow_pipelines` is
//! set (a pipeline can read and write any file the process can).

use std::path::{Component, Path, PathBuf};

use crate::source::SourceSpec;

use super::{ServiceError, ServiceSettings};

/// URI schemes a client may give: network streams, which read no local file.
const NETWORK_SCHEMES: &[&str] = &["rtsp", "rtsps", "http", "https", "rtmp", "srt", "udp"];

/// The rule sources added over HTTP follow.
#[derive(Clone, Debug)]
pub struct Admission {
    /// The media root, canonical (symlinks resolved).
    media_root: Option<PathBuf>,
    allow_pipelines: bool,
}

impl Admission {
    /// The rule of `settings`; an error when the media root is set and cannot be opened.
    pub fn new(settings: &ServiceSettings) -> Result<Self, String> {
        let media_root = match settings.media_root() {
            Some(root) => Some(std::fs::canonicalize(&root).map_err(|e| {
                format!(
                    "invalid setting service.media_root: {}: {e}",
                    root.display()
                )
            })?),
            None => None,
        };
        Ok(Self {
            media_root,
            allow_pipelines: settings.allow_pipelines,
        })
    }

    /// The source `text` as a client gave it, when the rule lets it in. A file is a path under
    /// the media root (relative to it, or absolute inside it; `file://` too).
    pub(crate) fn admit(&self, text: &str) -> Result<SourceSpec, ServiceError> {
        let text = text.trim();
        let refused = |why: &str| ServiceError::Refused(format!("source refused: {why}"));
        if text.contains('!') || text.contains("appsink") {
            if !self.allow_pipelines {
                return Err(refused(
                    "GStreamer pipeline descriptions are not accepted over HTTP (service.allow_pipelines)",
                ));
            }
            return parse(text);
        }
        if let Some(path) = text.strip_prefix("file://") {
            return self.file(path);
        }
        if let Some((scheme, _)) = text.split_once("://") {
            if NETWORK_SCHEMES.contains(&scheme) {
                return parse(text);
            }
            return Err(refused(&format!(
                "scheme `{scheme}://` (over HTTP: {}, or a file under service.media_root)",
                NETWORK_SCHEMES.join(", ")
            )));
        }
        let device = ["test", "camera", "csi"]
            .iter()
            .any(|k| text == *k || text.starts_with(&format!("{k}:")));
        if device || text.is_empty() {
            return parse(text);
        }
        self.file(text)
    }

    /// A file under the media root.
    fn file(&self, path: &str) -> Result<SourceSpec, ServiceError> {
        let Some(root) = &self.media_root else {
            return Err(ServiceError::Refused(
                "source refused: files are not accepted over HTTP unless service.media_root is set"
                    .into(),
            ));
        };
        let given = Path::new(path);
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(ServiceError::Refused(
                "source refused: `..` in a file path".into(),
            ));
        }
        let joined = root.join(given);
        let real = std::fs::canonicalize(&joined).map_err(|e| {
            ServiceError::BadRequest(format!("cannot open {}: {e}", given.display()))
        })?;
        if !real.starts_with(root) {
            return Err(ServiceError::Refused(format!(
                "source refused: {} is not under service.media_root",
                given.display()
            )));
        }
        if !real.is_file() {
            return Err(ServiceError::BadRequest(format!(
                "{} is not a file",
                given.display()
            )));
        }
        Ok(SourceSpec::File(real))
    }
}

/// `text` parsed as a SOURCE; a bad one is the client's error.
fn parse(text: &str) -> Result<SourceSpec, ServiceError> {
    SourceSpec::parse(text).map_err(|e| ServiceError::BadRequest(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(root: Option<&Path>, allow_pipelines: bool) -> Admission {
        Admission::new(&ServiceSettings {
            media_root: root.map(|r| r.display().to_string()).unwrap_or_default(),
            allow_pipelines,
            ..ServiceSettings::default()
        })
        .unwrap()
    }

    fn refused(r: Result<SourceSpec, ServiceError>) -> String {
        match r {
            Err(ServiceError::Refused(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn network_uris_cameras_and_test_patterns_are_let_in() {
        let r = rule(None, false);
        assert!(matches!(r.admit("rtsp://cam/x"), Ok(SourceSpec::Uri(_))));
        assert!(matches!(r.admit("https://h/v.mp4"), Ok(SourceSpec::Uri(_))));
        assert!(matches!(r.admit("test:ball"), Ok(SourceSpec::Test(_))));
        assert!(matches!(r.admit("camera:1"), Ok(SourceSpec::Camera(1))));
        assert!(matches!(r.admit("csi"), Ok(SourceSpec::Csi(0))));
        assert!(matches!(
            r.admit("test:nope"),
            Err(ServiceError::BadRequest(_))
        ));
        assert!(refused(r.admit("ftp://h/x")).contains("ftp://"));
    }

    #[test]
    fn pipelines_are_refused_unless_allowed() {
        let p = "videotestsrc ! appsink name=sink";
        assert!(refused(rule(None, false).admit(p)).contains("allow_pipelines"));
        assert!(matches!(
            rule(None, true).admit(p),
            Ok(SourceSpec::Pipeline(_))
        ));
    }

    #[test]
    fn files_only_under_the_media_root_without_dot_dot_or_symlink_escape() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("media");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.mkv"), b"x").unwrap();
        std::fs::write(dir.path().join("secret.mkv"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.mkv"), root.join("link.mkv")).unwrap();
        assert!(refused(rule(None, false).admit("a.mkv")).contains("media_root"));
        let r = rule(Some(&root), false);
        let inside = std::fs::canonicalize(root.join("a.mkv")).unwrap();
        assert_eq!(r.admit("a.mkv").unwrap(), SourceSpec::File(inside.clone()));
        assert_eq!(
            r.admit(&inside.display().to_string()).unwrap(),
            SourceSpec::File(inside.clone())
        );
        assert_eq!(
            r.admit(&format!("file://{}", inside.display())).unwrap(),
            SourceSpec::File(inside)
        );
        assert!(refused(r.admit("../secret.mkv")).contains(".."));
        assert!(refused(r.admit("link.mkv")).contains("not under"));
        let outside = dir.path().join("secret.mkv").display().to_string();
        assert!(refused(r.admit(&outside)).contains("not under"));
        assert!(matches!(
            r.admit("missing.mkv"),
            Err(ServiceError::BadRequest(_))
        ));
    }
}
