//! Segments and retention of a stream's outputs (`output.segment_seconds`, `keep_hours`,
//! `keep_gb`). A segmented stream writes its per-frame files into `DIR/segments/<start>/`,
//! where `<start>` is the segment's first second in UTC (`20261129T031000Z`: sortable, and a
//! valid name on every file system). Segments are cut where the UTC clock passes a multiple of
//! the segment length (so streams and restarts line up); the first segment of a run starts at
//! its first frame. Retention deletes the oldest whole segments, never the one being written:
//! those older than `keep_hours` (by their last write), and while the stream's segments take
//! more than `keep_gb`; with either set, a full disk deletes the oldest segment and the stream
//! goes on (`Segments::free_space`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::OutputError;

/// The folder, below a stream's output folder, that holds its segments.
pub(crate) const SEGMENTS_DIR: &str = "segments";

/// How a stream's outputs are cut and kept.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SegmentPolicy {
    /// Segment length, seconds (0: one set of files, no segments).
    pub seconds: u32,
    /// Delete segments last written longer ago than this (`None`: keep all).
    pub keep_for: Option<Duration>,
    /// Delete the oldest segments while all of them take more bytes than this (`None`: no
    /// limit).
    pub keep_bytes: Option<u64>,
}

impl SegmentPolicy {
    /// The segments and retention that `[output]` sets for a stream (`live` or not).
    #[must_use]
    pub fn of(output: &crate::config::OutputSettings, live: bool) -> Self {
        let positive = |v: f64| (v > 0.0).then_some(v);
        Self {
            seconds: output.segment_seconds_for(live),
            keep_for: positive(output.keep_hours).map(|h| Duration::from_secs_f64(h * 3600.0)),
            keep_bytes: positive(output.keep_gb).map(|gb| (gb * 1e9) as u64),
        }
    }

    /// Whether retention deletes segments at all (then a full disk deletes one too).
    #[must_use]
    pub(crate) fn retains(&self) -> bool {
        self.keep_for.is_some() || self.keep_bytes.is_some()
    }

    /// The end of the segment that holds `now` (the next multiple of the length, UTC).
    #[must_use]
    pub fn segment_end(&self, now: SystemTime) -> SystemTime {
        let len = u64::from(self.seconds.max(1));
        let secs = unix_seconds(now);
        SystemTime::UNIX_EPOCH + Duration::from_secs((secs / len + 1) * len)
    }
}

/// A segment deleted by retention, and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Deleted {
    /// Its folder name (its start).
    pub segment: String,
    /// The bytes it held.
    pub bytes: u64,
    /// `keep_hours`, `keep_gb` or `disk full`.
    pub reason: &'static str,
}

/// The segments of one stream's folder.
#[derive(Debug)]
pub struct Segments {
    root: PathBuf,
    policy: SegmentPolicy,
}

/// One segment folder found on disk.
#[derive(Debug)]
struct OnDisk {
    name: String,
    path: PathBuf,
    bytes: u64,
    last_write: SystemTime,
}

impl Segments {
    /// The segments below `dir` (the stream's output folder).
    #[must_use]
    pub fn new(dir: &Path, policy: SegmentPolicy) -> Self {
        Self {
            root: dir.join(SEGMENTS_DIR),
            policy,
        }
    }

    /// The policy.
    #[must_use]
    pub fn policy(&self) -> SegmentPolicy {
        self.policy
    }

    /// Creates the folder of a new segment starting at `start` and returns (name, path); a
    /// name already taken (a run restarted within the same second) gets `-2`, `-3`, ….
    pub fn create(&self, start: SystemTime) -> Result<(String, PathBuf), OutputError> {
        std::fs::create_dir_all(&self.root).map_err(|source| OutputError::Io {
            path: self.root.clone(),
            source,
        })?;
        let stamp = stamp(start);
        for n in 1u32.. {
            let name = if n == 1 {
                stamp.clone()
            } else {
                format!("{stamp}-{n}")
            };
            let path = self.root.join(&name);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok((name, path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => return Err(OutputError::Io { path, source }),
            }
        }
        Err(OutputError::Io {
            path: self.root.clone(),
            source: std::io::Error::other("no free segment name"),
        })
    }

    /// Applies `keep_hours` and `keep_gb`, oldest first, sparing `current`; returns what it
    /// deleted (a segment that cannot be deleted is skipped with a warning).
    pub(crate) fn apply_retention(&self, current: Option<&str>, now: SystemTime) -> Vec<Deleted> {
        let mut deleted = Vec::new();
        let mut found = self.on_disk();
        let mut total: u64 = found.iter().map(|s| s.bytes).sum();
        found.retain(|s| Some(s.name.as_str()) != current);
        for s in found {
            let too_old = self
                .policy
                .keep_for
                .is_some_and(|keep| now.duration_since(s.last_write).unwrap_or_default() > keep);
            let too_big = self.policy.keep_bytes.is_some_and(|keep| total > keep);
            let reason = match (too_old, too_big) {
                (true, _) => "keep_hours",
                (false, true) => "keep_gb",
                (false, false) => continue,
            };
            if let Some(d) = delete(s, reason) {
                total = total.saturating_sub(d.bytes);
                deleted.push(d);
            }
        }
        deleted
    }

    /// Deletes the oldest segment other than `current` to make room after a write failed
    /// (`None`: there is none, or retention is off).
    pub(crate) fn free_space(&self, current: Option<&str>) -> Option<Deleted> {
        if !self.policy.retains() {
            return None;
        }
        self.on_disk()
            .into_iter()
            .filter(|s| Some(s.name.as_str()) != current)
            .find_map(|s| delete(s, "disk full"))
    }

    /// Keeps `needed` bytes free on the segments' file system for the next segment (when
    /// retention is set): deletes the oldest segments other than `current` until they are, or
    /// none is left; returns what it deleted.
    pub(crate) fn ensure_room(&self, current: Option<&str>, needed: u64) -> Vec<Deleted> {
        let mut deleted = Vec::new();
        if !self.policy.retains() {
            return deleted;
        }
        while available_bytes(&self.root).is_some_and(|free| free < needed) {
            match self.free_space(current) {
                Some(d) => deleted.push(d),
                None => break,
            }
        }
        deleted
    }

    /// The bytes a segment's files take (0 when it is gone).
    #[must_use]
    pub(crate) fn bytes_of(&self, name: &str) -> u64 {
        folder_size(&self.root.join(name)).0
    }

    /// The segment folders, oldest first (names that are not segment stamps are left alone).
    fn on_disk(&self) -> Vec<OnDisk> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut found: Vec<OnDisk> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                is_stamp(&name).then(|| {
                    let path = e.path();
                    let (bytes, last_write) = folder_size(&path);
                    OnDisk {
                        name,
                        path,
                        bytes,
                        last_write,
                    }
                })
            })
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        found
    }
}

/// Deletes a segment folder; `None` (with a warning) when it cannot be.
fn delete(s: OnDisk, reason: &'static str) -> Option<Deleted> {
    match std::fs::remove_dir_all(&s.path) {
        Ok(()) => Some(Deleted {
            segment: s.name,
            bytes: s.bytes,
            reason,
        }),
        Err(e) => {
            log::warn!("cannot delete segment {}: {e}", s.path.display());
            None
        }
    }
}

/// Bytes free for unprivileged writes on the file system of `path` (`None`: unknown).
fn available_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Bytes of the files in a folder and its newest modification time.
fn folder_size(dir: &Path) -> (u64, SystemTime) {
    let mut bytes = 0;
    let mut newest = SystemTime::UNIX_EPOCH;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for meta in entries
            .filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok())
        {
            bytes += meta.len();
            if let Ok(m) = meta.modified() {
                newest = newest.max(m);
            }
        }
    }
    (bytes, newest)
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The segment name of `t`: its UTC second as `YYYYMMDDTHHMMSSZ`.
#[must_use]
pub(crate) fn stamp(t: SystemTime) -> String {
    let secs = i64::try_from(unix_seconds(t)).unwrap_or(i64::MAX);
    jiff::Timestamp::from_second(secs)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string()
}

/// Whether `name` is a segment name (a stamp, maybe with a `-N` suffix).
fn is_stamp(name: &str) -> bool {
    let stamp = name.split_once('-').map_or(name, |(s, _)| s);
    let b = stamp.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn segments_end_on_multiples_of_their_length_in_utc() {
        let p = SegmentPolicy {
            seconds: 600,
            ..SegmentPolicy::default()
        };
        // 2026-11-29 03:12:34 UTC ends at 03:20:00.
        let t = at(1_795_921_954);
        assert_eq!(stamp(t), "20261129T031234Z");
        assert_eq!(stamp(p.segment_end(t)), "20261129T032000Z");
        assert_eq!(stamp(p.segment_end(at(1_795_922_400))), "20261129T033000Z");
        assert!(is_stamp("20261129T031234Z") && is_stamp("20261129T031234Z-2"));
        assert!(!is_stamp("notes") && !is_stamp("20261129T0312Z"));
    }

    #[test]
    fn retention_deletes_the_oldest_whole_segments_and_spares_the_current() {
        let dir = tempfile::tempdir().unwrap();
        let policy = SegmentPolicy {
            seconds: 10,
            keep_for: None,
            keep_bytes: Some(2500),
        };
        let s = Segments::new(dir.path(), policy);
        let mut names = Vec::new();
        for k in 0..4 {
            let (name, path) = s.create(at(1_796_440_000 + 10 * k)).unwrap();
            std::fs::write(path.join("frames.jsonl"), vec![b'x'; 1000]).unwrap();
            names.push(name);
        }
        // A name taken in the same second gets a suffix; other folders are left alone.
        let (again, _) = s.create(at(1_796_440_030)).unwrap();
        assert_eq!(again, format!("{}-2", names[3]));
        std::fs::create_dir(dir.path().join(SEGMENTS_DIR).join("notes")).unwrap();
        let deleted = s.apply_retention(Some(&again), SystemTime::now());
        let gone: Vec<&str> = deleted.iter().map(|d| d.segment.as_str()).collect();
        assert_eq!(gone, [names[0].as_str(), names[1].as_str()]);
        assert!(
            deleted
                .iter()
                .all(|d| d.reason == "keep_gb" && d.bytes == 1000)
        );
        assert!(dir.path().join(SEGMENTS_DIR).join("notes").is_dir());
        // A full disk deletes the oldest one left, never the current one.
        assert_eq!(s.free_space(Some(&again)).unwrap().segment, names[2]);
        assert_eq!(s.free_space(Some(&again)).unwrap().segment, names[3]);
        assert_eq!(s.free_space(Some(&again)), None);
        // Room for the next segment: nothing to delete when there is room.
        assert!(s.ensure_room(Some(&again), 0).is_empty());
        assert!(dir.path().join(SEGMENTS_DIR).join(&again).is_dir());
    }

    #[test]
    fn too_little_room_deletes_the_oldest_but_never_the_current() {
        let dir = tempfile::tempdir().unwrap();
        let policy = SegmentPolicy {
            seconds: 10,
            keep_for: None,
            keep_bytes: Some(u64::MAX),
        };
        let s = Segments::new(dir.path(), policy);
        let (a, _) = s.create(at(1_796_440_000)).unwrap();
        let (b, _) = s.create(at(1_796_440_010)).unwrap();
        assert_eq!(s.bytes_of(&a), 0);
        // No file system has u64::MAX bytes free: every segment but the current one goes.
        let deleted = s.ensure_room(Some(&b), u64::MAX);
        assert_eq!(deleted.len(), 1);
        assert_eq!(
            (deleted[0].segment.as_str(), deleted[0].reason),
            (a.as_str(), "disk full")
        );
        assert!(dir.path().join(SEGMENTS_DIR).join(&b).is_dir());
        // Without retention nothing is ever deleted.
        let keep_all = Segments::new(
            dir.path(),
            SegmentPolicy {
                seconds: 10,
                ..SegmentPolicy::default()
            },
        );
        assert!(keep_all.ensure_room(None, u64::MAX).is_empty());
    }

    #[test]
    fn old_segments_go_by_their_last_write() {
        let dir = tempfile::tempdir().unwrap();
        let policy = SegmentPolicy {
            seconds: 10,
            keep_for: Some(Duration::from_secs(3600)),
            keep_bytes: None,
        };
        let s = Segments::new(dir.path(), policy);
        let (old, _) = s.create(at(1_796_440_000)).unwrap();
        let (new, _) = s.create(at(1_796_440_010)).unwrap();
        let later = SystemTime::now() + Duration::from_secs(7200);
        let deleted = s.apply_retention(Some(&new), later);
        assert_eq!(deleted.len(), 1);
        assert_eq!(
            (deleted[0].segment.as_str(), deleted[0].reason),
            (old.as_str(), "keep_hours")
        );
        assert!(s.apply_retention(Some(&new), SystemTime::now()).is_empty());
    }
}
