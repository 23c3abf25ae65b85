//! The files of a run's output folder, written so that whatever ends the run leaves them
//! readable: line files (`LineFile`) take each frame's lines in one `write` and, when a write
//! fails (a full disk), are cut back to their last whole line; JSON documents are written to a
//! temporary file and renamed over the old one (`write_json_atomic`), so a reader (or a hard
//! kill) sees the old document or the new one, never half of one. `prepare_folder` checks the
//! folder before any work starts; `remove_earlier_run` clears what an earlier run left.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::OutputError;

/// Every file `run` writes into its folder; an earlier run's copies are removed before a new run
/// starts. `overlay.mp4` is the overlay video as older versions wrote it (so that an old video
/// is not left beside the new results). An analysis that adds a file adds its name here.
pub(crate) const RUN_FILES: &[&str] = &[
    "frames.jsonl",
    "timings.json",
    "overlay.mkv",
    "tracks.csv",
    "components.jsonl",
    "events.jsonl",
    "overlay.mp4",
];

/// Temporary name of a document being replaced (in the same folder, so the rename is atomic).
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Creates `dir` if needed and checks that files can be created in it.
pub(crate) fn prepare_folder(dir: &Path) -> Result<(), OutputError> {
    if dir.exists() && !dir.is_dir() {
        return Err(OutputError::Io {
            path: dir.to_owned(),
            source: std::io::Error::other("exists and is not a folder"),
        });
    }
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let probe = dir.join(".morphoscope-write-check");
    std::fs::write(&probe, b"").map_err(io_at(dir))?;
    std::fs::remove_file(&probe).map_err(io_at(&probe))
}

/// Removes the [`RUN_FILES`] an earlier run left in `dir` (and any temporary documents);
/// returns the names removed.
pub(crate) fn remove_earlier_run(dir: &Path) -> Result<Vec<&'static str>, OutputError> {
    let mut removed = Vec::new();
    for &name in RUN_FILES {
        let p = dir.join(name);
        if p.is_file() {
            std::fs::remove_file(&p).map_err(io_at(&p))?;
            removed.push(name);
        }
        let tmp = temporary(&p);
        if tmp.is_file() {
            std::fs::remove_file(&tmp).map_err(io_at(&tmp))?;
        }
    }
    Ok(removed)
}

/// Writes `value` as pretty JSON to `path` through a temporary file and a rename.
pub(crate) fn write_json_atomic(path: &Path, value: &serde_json::Value) -> Result<(), OutputError> {
    let tmp = temporary(path);
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| OutputError::Io {
        path: path.to_owned(),
        source: e.into(),
    })?;
    text.push(b'\n');
    let written = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(OutputError::Io {
            path: path.to_owned(),
            source: e,
        });
    }
    Ok(())
}

/// A file of lines, appended a block of whole lines at a time, unbuffered: after each
/// [`LineFile::append`] the lines are in the file (a hard kill loses nothing appended).
#[derive(Debug)]
pub(crate) struct LineFile {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
}

impl LineFile {
    /// Creates (or empties) `path`.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let file = std::fs::File::create(path).map_err(io_at(path))?;
        Ok(Self {
            path: path.to_owned(),
            file,
            len: 0,
        })
    }

    /// Appends `lines` (whole lines, each ending in `\n`) in one write. On failure the file is cut
    /// back to the lines before, so it never ends mid-line.
    pub fn append(&mut self, lines: &[u8]) -> Result<(), OutputError> {
        match self.file.write_all(lines) {
            Ok(()) => {
                self.len += lines.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                let _ = self.file.seek(SeekFrom::Start(self.len));
                Err(OutputError::Io {
                    path: self.path.clone(),
                    source: e,
                })
            }
        }
    }

    /// True when nothing was appended.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_run_is_cleared_and_other_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "frames.jsonl",
            "overlay.mp4",
            "tracks.csv",
            "notes.txt",
            ".timings.json.tmp",
        ] {
            std::fs::write(dir.path().join(f), "old").unwrap();
        }
        let removed = remove_earlier_run(dir.path()).unwrap();
        assert_eq!(removed, vec!["frames.jsonl", "tracks.csv", "overlay.mp4"]);
        assert!(dir.path().join("notes.txt").is_file());
        assert!(!dir.path().join(".timings.json.tmp").exists());
    }

    #[test]
    fn a_folder_that_is_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        assert!(
            prepare_folder(&f)
                .unwrap_err()
                .to_string()
                .contains("not a folder")
        );
        prepare_folder(&dir.path().join("a/b")).unwrap();
        assert!(dir.path().join("a/b").is_dir());
    }

    #[test]
    fn documents_are_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 2})).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["a"], 2);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn a_failed_append_leaves_whole_lines() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let Ok(file) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let mut f = LineFile {
            path: "/dev/full".into(),
            file,
            len: 0,
        };
        let e = f.append(b"{\"index\":0}\n").unwrap_err().to_string();
        assert!(
            e.contains("/dev/full") && e.to_lowercase().contains("no space"),
            "{e}"
        );
        assert!(f.is_empty());
    }
}
