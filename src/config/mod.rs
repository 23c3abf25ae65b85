//! Settings: what the user chose, from `config/default.toml`, `--config FILE` and
//! `--set section.key=value`, in that order. Kept apart from the negotiated stream format
//! (frame size and pixel format come from the source at run time).
//!
//! Unknown sections or keys and values of the wrong type are rejected with the key named
//! (`#[serde(deny_unknown_fields)]` throughout); each op validates its own ranges.

pub mod service;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::source::{FrameFormat, Pacing, TestSourceOptions};

/// The embedded defaults (also shipped as `config/default.toml`).
pub(crate) const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// Errors reading or applying settings.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or schema error (the message names the key).
    #[error("invalid config{where_}: {message}")]
    Invalid {
        /// " in FILE" or empty.
        where_: String,
        /// What is wrong, with the key.
        message: String,
    },
    /// A `--set` argument is malformed.
    #[error("invalid --set `{0}`: expected section.key=value")]
    BadSet(String),
    /// A `--set` names an unknown key or gives a value of the wrong type.
    #[error("invalid --set {key}={value}: {message}")]
    SetValue {
        /// The key, e.g. `cca.enabled`.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// A value given under another name than its settings key (a property of the GStreamer
    /// element): `what` names it as the user typed it, e.g. `property cca-threshold=abc`.
    #[error("invalid {what}: {message}")]
    Named {
        /// The name and the value as given.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A value is out of range.
    #[error("invalid setting {key}: {message}")]
    Range {
        /// The key, e.g. `pipeline.ring_size`.
        key: String,
        /// Allowed values.
        message: String,
    },
}

/// Which compute backend runs the analyses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// CUDA when a device, the driver and NVRTC are present, else the CPU.
    #[default]
    Auto,
    /// The CPU (multi-threaded reference implementations).
    Cpu,
    /// CUDA; an error when unavailable.
    Cuda,
}

/// How a frame reaches the GPU (`pipeline.upload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UploadMode {
    /// Mapped on an integrated GPU (Jetson), copied on a discrete one.
    #[default]
    Auto,
    /// Copied from a pinned buffer into device memory.
    Copy,
    /// Read by the kernels from mapped pinned host memory, with no copy (the Jetson path;
    /// on a discrete GPU every read crosses PCIe: for testing that path on one).
    Mapped,
}

/// `[source]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourceSettings {
    /// SOURCE used when none is given; empty = the sample clip, or `test` when it is missing.
    pub default: String,
    /// Pixel format asked of GStreamer: rgb, gray8 or gray16.
    pub format: FrameFormat,
    /// Size and length of `test` sources.
    pub test: TestSourceOptions,
    /// When frames leave a file or test source: auto (real time in the viewer, as fast as
    /// possible headless), realtime or fast. Live sources always run in real time.
    pub pacing: Pacing,
    /// Seconds to wait for the source to start, for each frame and for a network server to
    /// answer before the run ends with an error naming the source (a live source that
    /// reconnects is lost then, and reopened).
    pub timeout_seconds: u32,
    /// What a live source does when it is lost.
    pub reconnect: ReconnectSettings,
}

/// `[source.reconnect]`: a live source (RTSP, a camera, a live pipeline) that errors, stalls
/// or ends is torn down and reopened after a delay that doubles from `initial_seconds` to
/// `max_seconds`. Files and test patterns never reconnect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconnectSettings {
    /// Reconnect live sources at all.
    pub enabled: bool,
    /// The first delay, seconds.
    pub initial_seconds: f64,
    /// The longest delay, seconds.
    pub max_seconds: f64,
    /// Give up (the stream ends with an error naming the source) once it has been lost this
    /// long, seconds; 0: never.
    pub give_up_seconds: f64,
}

impl Default for ReconnectSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_seconds: 1.0,
            max_seconds: 30.0,
            give_up_seconds: 0.0,
        }
    }
}

impl ReconnectSettings {
    /// The policy of a live source (`None`: reconnecting is off).
    #[must_use]
    pub fn policy(&self) -> Option<crate::source::reconnect::ReconnectPolicy> {
        self.enabled
            .then(|| crate::source::reconnect::ReconnectPolicy {
                initial: std::time::Duration::from_secs_f64(self.initial_seconds),
                max: std::time::Duration::from_secs_f64(self.max_seconds),
                give_up: (self.give_up_seconds > 0.0)
                    .then(|| std::time::Duration::from_secs_f64(self.give_up_seconds)),
            })
    }

    /// Checks the ranges, naming the key.
    fn validate(&self) -> Result<(), ConfigError> {
        let range = |key: &str, message: &str| ConfigError::Range {
            key: format!("source.reconnect.{key}"),
            message: message.into(),
        };
        if !(0.05..=3600.0).contains(&self.initial_seconds) {
            return Err(range("initial_seconds", "must be 0.05..=3600 seconds"));
        }
        if !(self.initial_seconds..=3600.0).contains(&self.max_seconds) {
            return Err(range(
                "max_seconds",
                "must be at least initial_seconds and at most 3600 seconds",
            ));
        }
        if !(0.0..=31_536_000.0).contains(&self.give_up_seconds) {
            return Err(range(
                "give_up_seconds",
                "must be 0 (never) ..= 31536000 seconds",
            ));
        }
        Ok(())
    }
}

impl Default for SourceSettings {
    fn default() -> Self {
        Self {
            default: String::new(),
            format: FrameFormat::Rgb,
            test: TestSourceOptions::default(),
            pacing: Pacing::Auto,
            timeout_seconds: 20,
            reconnect: ReconnectSettings::default(),
        }
    }
}

/// `--device` on the command line: one CUDA ordinal (`1`) or a comma-separated list (`0,1`),
/// each device at most once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceList(pub Vec<usize>);

impl std::str::FromStr for DeviceList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut list = Vec::new();
        for part in s.split(',') {
            let d: usize = part.trim().parse().map_err(|_| {
                format!(
                    "`{}` is not a device ordinal (expected e.g. 0 or 0,1)",
                    part.trim()
                )
            })?;
            if list.contains(&d) {
                return Err(format!("device {d} listed twice"));
            }
            list.push(d);
        }
        Ok(Self(list))
    }
}

/// `[pipeline]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineSettings {
    /// auto, cpu or cuda.
    pub backend: BackendChoice,
    /// CUDA device ordinal (used when `devices` is empty).
    pub device: usize,
    /// CUDA device ordinals that streams are spread over, round-robin (stream i on
    /// `devices[i % len]`). Empty: `[device]`. `--device 0,1` sets this list.
    pub devices: Vec<usize>,
    /// Frames in flight on the GPU (slots of the ring), 1..=8.
    pub ring_size: usize,
    /// Frames buffered between the source and the worker, 1..=64.
    pub queue: usize,
    /// SMs the analyses run on (CUDA green contexts; the driver rounds up to its partition
    /// size), leaving the others to other work; 0: all of the device's.
    pub sm_limit: u32,
    /// How frames reach the GPU.
    pub upload: UploadMode,
}

impl PipelineSettings {
    /// The devices streams run on: `devices` when given, else `[device]`.
    #[must_use]
    pub fn device_list(&self) -> Vec<usize> {
        if self.devices.is_empty() {
            vec![self.device]
        } else {
            self.devices.clone()
        }
    }

    /// The device of stream `stream` (streams go round-robin over [`Self::device_list`]).
    #[must_use]
    pub fn device_of_stream(&self, stream: usize) -> usize {
        let list = self.device_list();
        list.get(stream % list.len())
            .copied()
            .unwrap_or(self.device)
    }
}

impl Default for PipelineSettings {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            device: 0,
            devices: Vec::new(),
            ring_size: 3,
            queue: 4,
            sm_limit: 0,
            upload: UploadMode::Auto,
        }
    }
}

/// Which H.264 encoder writes the overlay video (`[output] encoder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EncoderChoice {
    /// The fastest present that accepts the frame size.
    #[default]
    Auto,
    /// NVENC only.
    Nvenc,
    /// x264 only.
    X264,
    /// OpenH264 only.
    Openh264,
}

/// `[output]` (headless `run`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputSettings {
    /// Write `overlay.mkv`.
    pub video: bool,
    /// H.264 bitrate of the overlay video, kbit/s.
    pub video_kbps: u32,
    /// H.264 encoder of the overlay video: auto (the fastest present), nvenc, x264 or openh264.
    pub encoder: EncoderChoice,
    /// Cut each stream's outputs into segments of this many seconds, aligned to the UTC clock
    /// (0: one set of files). Absent: `DEFAULT_LIVE_SEGMENT_SECONDS` for a live source, 0
    /// for a file or test pattern (whose end is the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_seconds: Option<u32>,
    /// Delete the oldest whole segments once older than this many hours (0: keep all).
    pub keep_hours: f64,
    /// Delete the oldest whole segments while a stream's segments take more than this many GB
    /// (10^9 bytes; 0: no limit).
    pub keep_gb: f64,
}

/// Segment length of a live source when `output.segment_seconds` is not set: ten minutes, so
/// a segment is a file one can open and retention frees space in small steps.
pub(crate) const DEFAULT_LIVE_SEGMENT_SECONDS: u32 = 600;

impl OutputSettings {
    /// The segment length for a source (`live` or not), seconds (0: not segmented).
    #[must_use]
    pub(crate) fn segment_seconds_for(&self, live: bool) -> u32 {
        self.segment_seconds.unwrap_or(if live {
            DEFAULT_LIVE_SEGMENT_SECONDS
        } else {
            0
        })
    }

    /// Checks the ranges of the segment and retention keys, naming the key.
    fn validate(&self) -> Result<(), ConfigError> {
        let range = |key: &str, message: &str| ConfigError::Range {
            key: format!("output.{key}"),
            message: message.into(),
        };
        if !(1..=200_000).contains(&self.video_kbps) {
            return Err(range("video_kbps", "must be 1..=200000 kbit/s"));
        }
        if self.segment_seconds.is_some_and(|s| s > 86_400) {
            return Err(range(
                "segment_seconds",
                "must be 0..=86400 (0: one set of files)",
            ));
        }
        if !(0.0..=1_000_000.0).contains(&self.keep_hours) {
            return Err(range(
                "keep_hours",
                "must be 0..=1000000 hours (0: keep all)",
            ));
        }
        if !(0.0..=1_000_000.0).contains(&self.keep_gb) {
            return Err(range("keep_gb", "must be 0..=1000000 GB (0: no limit)"));
        }
        let retention = self.keep_hours > 0.0 || self.keep_gb > 0.0;
        if retention && self.segment_seconds == Some(0) {
            let key = if self.keep_hours > 0.0 {
                "keep_hours"
            } else {
                "keep_gb"
            };
            return Err(range(
                key,
                "deletes whole segments: it needs output.segment_seconds > 0",
            ));
        }
        Ok(())
    }
}

impl Default for OutputSettings {
    fn default() -> Self {
        Self {
            video: true,
            video_kbps: 4000,
            encoder: EncoderChoice::Auto,
            segment_seconds: None,
            keep_hours: 0.0,
            keep_gb: 0.0,
        }
    }
}

/// Every user setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// `[source]`
    pub source: SourceSettings,
    /// `[pipeline]`
    pub pipeline: PipelineSettings,
    /// `[output]`
    pub output: OutputSettings,
    /// `[publish]`
    pub publish: crate::publish::PublishSettings,
    /// `[service]`
    pub service: service::ServiceSettings,
    /// The analyses' sections.
    #[serde(flatten)]
    pub ops: crate::analysis::OpSettings,
}

fn invalid(where_: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid {
        where_: where_.to_owned(),
        message: e.to_string().trim().replace('\n', " "),
    }
}

/// Parses TOML text without schema. A syntax error says where (line, column and the key of that
/// line) and what TOML expected, and never quotes the file: the line may hold a secret
/// (`password = "…` unterminated, a duplicate `password` key).
fn parse_toml(text: &str, where_: &str) -> Result<toml::Value, ConfigError> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        let Some(start) = e.span().map(|s| s.start.min(text.len())) else {
            return invalid(where_, e.message());
        };
        let before = &text.as_bytes()[..start];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        let line_text = text[line_start..].lines().next().unwrap_or("");
        let key = line_text
            .split_once('=')
            .map(|(k, _)| k.trim())
            .filter(|k| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            })
            .map_or_else(String::new, |k| format!(" (key `{k}`)"));
        invalid(
            where_,
            format!("line {line}, column {column}{key}: {}", e.message()),
        )
    })
}

/// The message of a value that does not fit the schema, naming its key when known. A secret
/// key's value is never quoted (serde's "invalid type: integer 123" would show it).
fn schema_message(key: Option<&str>, e: &toml::de::Error) -> String {
    match key {
        Some(key) if crate::redact::is_secret_key(key) => {
            format!("{key}: must be a string (the value is not shown)")
        }
        Some(key) => format!("{key}: {}", e.message()),
        None => e.message().to_owned(),
    }
}

impl Settings {
    /// The built-in defaults.
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::from_toml(DEFAULT_TOML, " (built-in defaults)")
    }

    /// Parses TOML text (missing keys take their defaults).
    pub(crate) fn from_toml(text: &str, where_: &str) -> Result<Self, ConfigError> {
        let user = parse_toml(text, where_)?;
        let s: Self = user.clone().try_into().map_err(|e| {
            let empty = toml::Value::Table(toml::Table::new());
            invalid(
                where_,
                schema_message(first_bad_key(&empty, &user).as_deref(), &e),
            )
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Defaults, then `file`, then each `section.key=value` of `sets`. An error names the key:
    /// the file is checked on its own first (TOML's message gives the line and key), then each
    /// `--set` is checked as it is applied.
    ///
    /// ```
    /// use morphoscope::config::Settings;
    ///
    /// let s = Settings::load(None, &["cca.threshold=otsu".into(), "segmentation.enabled=false".into()])?;
    /// assert!(!s.ops.is_enabled("segmentation"));
    /// let bad = Settings::load(None, &["orientation.length=0".into()]).unwrap_err();
    /// assert!(bad.to_string().contains("orientation"));
    /// # Ok::<(), morphoscope::config::ConfigError>(())
    /// ```
    pub fn load(file: Option<&Path>, sets: &[String]) -> Result<Self, ConfigError> {
        let mut value = parse_toml(DEFAULT_TOML, " (built-in defaults)")?;
        let mut where_ = String::new();
        if let Some(p) = file {
            let text = std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
                path: p.display().to_string(),
                source: e,
            })?;
            where_ = format!(" in {}", p.display());
            let user = parse_toml(&text, &where_)?;
            let defaults = value.clone();
            merge(&mut value, user.clone());
            if let Err(e) = value.clone().try_into::<Self>() {
                // serde loses the key inside flattened sections: find it by trying each one.
                let key = first_bad_key(&defaults, &user);
                return Err(invalid(&where_, schema_message(key.as_deref(), &e)));
            }
        }
        for s in sets {
            refuse_secret_on_command_line(s)?;
            apply_set(&mut value, s)?;
            if let Err(e) = value.clone().try_into::<Self>() {
                let (key, raw) = s.split_once('=').unwrap_or((s, ""));
                let message = e.to_string().trim().replace('\n', " ");
                return Err(ConfigError::SetValue {
                    key: key.trim().to_owned(),
                    value: raw.trim().to_owned(),
                    message,
                });
            }
        }
        let settings: Self = value
            .try_into()
            .map_err(|e| invalid(&where_, schema_message(None, &e)))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Range checks of every section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = |key: &str, message: &str| ConfigError::Range {
            key: key.into(),
            message: message.into(),
        };
        if !(1..=8).contains(&self.pipeline.ring_size) {
            return Err(range("pipeline.ring_size", "must be 1..=8"));
        }
        if !(1..=64).contains(&self.pipeline.queue) {
            return Err(range("pipeline.queue", "must be 1..=64"));
        }
        let devices = &self.pipeline.devices;
        if devices
            .iter()
            .enumerate()
            .any(|(i, d)| devices[..i].contains(d))
        {
            return Err(range("pipeline.devices", "each device at most once"));
        }
        if self.source.test.width == 0 || self.source.test.height == 0 || self.source.test.fps == 0
        {
            return Err(range(
                "source.test",
                "width, height and fps must be positive",
            ));
        }
        if !(1..=3600).contains(&self.source.timeout_seconds) {
            return Err(range("source.timeout_seconds", "must be 1..=3600"));
        }
        self.source.reconnect.validate()?;
        self.output.validate()?;
        self.publish
            .validate()
            .map_err(|(key, message)| ConfigError::Range { key, message })?;
        self.service
            .validate()
            .map_err(|(key, message)| ConfigError::Range { key, message })?;
        self.ops
            .validate()
            .map_err(|(key, message)| ConfigError::Range { key, message })
    }

    /// TOML text of these settings (what the viewer saves).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string_pretty(self).map_err(|e| invalid("", e))
    }
}

/// The dotted key of the first value of `user` that `base` does not accept on its own.
fn first_bad_key(base: &toml::Value, user: &toml::Value) -> Option<String> {
    fn leaves(v: &toml::Value, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(v, &key, out);
                }
            }
            other => out.push((prefix.to_owned(), other.clone())),
        }
    }
    let mut all = Vec::new();
    leaves(user, "", &mut all);
    all.into_iter().map(|(key, _)| key).find(|key| {
        let mut one = toml::Table::new();
        let mut cur = &mut one;
        let parts: Vec<&str> = key.split('.').collect();
        for p in &parts[..parts.len() - 1] {
            cur = match cur
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            {
                toml::Value::Table(t) => t,
                _ => return false,
            };
        }
        let leaf = parts.iter().try_fold(user, |v, p| v.get(p));
        if let (Some(last), Some(leaf)) = (parts.last(), leaf) {
            cur.insert(last.to_string(), leaf.clone());
        }
        let mut b = base.clone();
        merge(&mut b, toml::Value::Table(one));
        b.try_into::<Settings>().is_err()
    })
}

/// A secret is never taken from the command line (the process list and shell history would
/// show it): `--set publish.password=…` or `--set service.token=…` is refused without repeating
/// the value.
fn refuse_secret_on_command_line(set: &str) -> Result<(), ConfigError> {
    let key = set.split_once('=').map_or(set, |(k, _)| k).trim();
    let env = match key {
        "publish.password" => crate::publish::settings::PASSWORD_ENV,
        "service.token" => service::TOKEN_ENV,
        _ => return Ok(()),
    };
    Err(ConfigError::SetValue {
        key: key.to_owned(),
        value: "<redacted>".to_owned(),
        message: format!(
            "a secret is never taken from the command line: set it in the config file or in {env}"
        ),
    })
}

/// The analyses' settings `ops` with `changes` applied, each `(section.key, value)` checked as
/// `--set section.key=value` is (an error names the key and why). Only the analyses' sections
/// change while streams run; a key of another section is refused.
pub(crate) fn change_ops(
    ops: &crate::analysis::OpSettings,
    changes: &[(String, toml::Value)],
) -> Result<crate::analysis::OpSettings, ConfigError> {
    let mut value = toml::Value::try_from(ops).map_err(|e| invalid("", e))?;
    for (key, v) in changes {
        let refused = |message: String| ConfigError::Named {
            what: format!("setting {key}={v}"),
            message,
        };
        let section = key.split('.').next().unwrap_or_default();
        if value.get(section).is_none() {
            let sections: Vec<&str> = value
                .as_table()
                .map(|t| t.keys().map(String::as_str).collect())
                .unwrap_or_default();
            return Err(refused(format!(
                "only the analyses' settings change while streams run (sections {})",
                sections.join(", ")
            )));
        }
        insert_at(&mut value, key, v.clone())
            .map_err(|()| refused("expected section.key".into()))?;
        if let Err(e) = value.clone().try_into::<crate::analysis::OpSettings>() {
            return Err(refused(e.to_string().trim().replace('\n', " ")));
        }
    }
    let changed: crate::analysis::OpSettings = value.try_into().map_err(|e| invalid("", e))?;
    changed
        .validate()
        .map_err(|(key, message)| ConfigError::Range { key, message })?;
    Ok(changed)
}

/// Recursively overlays `top` on `base`.
fn merge(base: &mut toml::Value, top: toml::Value) {
    match (base, top) {
        (toml::Value::Table(b), toml::Value::Table(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(bv) => merge(bv, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, t) => *b = t,
    }
}

/// Applies `a.b.c=value`; the value is parsed as TOML (number, bool, string, array), else taken
/// as a bare string.
fn apply_set(root: &mut toml::Value, s: &str) -> Result<(), ConfigError> {
    let (key, raw) = s
        .split_once('=')
        .ok_or_else(|| ConfigError::BadSet(s.to_owned()))?;
    let raw = raw.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()));
    insert_at(root, key.trim(), value).map_err(|()| ConfigError::BadSet(s.to_owned()))
}

/// Puts `value` at the dotted `key` of `root`, making the tables on the way; `Err` when the
/// key is not `section.key` or a part of it is not a table.
fn insert_at(root: &mut toml::Value, key: &str, value: toml::Value) -> Result<(), ()> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return Err(());
    }
    let mut cur = root;
    for p in &parts[..parts.len() - 1] {
        cur = cur
            .as_table_mut()
            .ok_or(())?
            .entry((*p).to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    }
    cur.as_table_mut()
        .ok_or(())?
        .insert(parts[parts.len() - 1].to_owned(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_min_area_takes_every_u64_and_round_trips() {
        let s = Settings::load(None, &[format!("tracker.min_area={}", u64::MAX)]).unwrap();
        assert_eq!(s.ops.tracker.min_area, u64::MAX);
        let back = Settings::from_toml(&s.to_toml().unwrap(), "").unwrap();
        assert_eq!(back.ops.tracker.min_area, u64::MAX);
        let s = Settings::load(None, &["tracker.min_area=7".into()]).unwrap();
        assert_eq!(s.ops.tracker.min_area, 7);
        let e = Settings::load(None, &["tracker.min_area=-1".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("tracker.min_area"), "{e}");
        let e = Settings::load(None, &["tracker.min_area=abc".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("tracker.min_area") && e.contains("`abc`"), "{e}");
    }

    #[test]
    fn defaults_parse_and_equal_the_rust_defaults() {
        let s = Settings::defaults().unwrap();
        assert_eq!(
            s,
            Settings::default(),
            "config/default.toml and Default impls disagree"
        );
    }

    #[test]
    fn device_lists_parse_one_ordinal_or_a_comma_list_and_reject_the_rest() {
        assert_eq!("1".parse::<DeviceList>(), Ok(DeviceList(vec![1])));
        assert_eq!("0, 1".parse::<DeviceList>(), Ok(DeviceList(vec![0, 1])));
        assert!("0,0".parse::<DeviceList>().unwrap_err().contains("twice"));
        assert!("0,x".parse::<DeviceList>().unwrap_err().contains("`x`"));
        assert!("".parse::<DeviceList>().is_err());
        assert!("-1".parse::<DeviceList>().is_err());
    }

    #[test]
    fn devices_list_takes_precedence_over_device_and_spreads_streams_round_robin() {
        let one = Settings::load(None, &["pipeline.device=2".into()]).unwrap();
        assert_eq!(one.pipeline.device_list(), vec![2]);
        assert_eq!(one.pipeline.device_of_stream(5), 2);
        let two = Settings::load(
            None,
            &["pipeline.device=2".into(), "pipeline.devices=[0, 1]".into()],
        )
        .unwrap();
        assert_eq!(two.pipeline.device_list(), vec![0, 1]);
        let spread: Vec<usize> = (0..5).map(|i| two.pipeline.device_of_stream(i)).collect();
        assert_eq!(spread, vec![0, 1, 0, 1, 0]);
        let err = Settings::load(None, &["pipeline.devices=[1, 1]".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("pipeline.devices"), "{err}");
    }

    #[test]
    fn set_overrides_and_unknown_keys_are_named() {
        let s = Settings::load(
            None,
            &["pipeline.ring_size=4".into(), "pipeline.backend=cpu".into()],
        )
        .unwrap();
        assert_eq!(s.pipeline.ring_size, 4);
        assert_eq!(s.pipeline.backend, BackendChoice::Cpu);
        let e = Settings::load(None, &["pipeline.ring_sise=4".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ring_sise"), "{e}");
        let e = Settings::load(None, &["pipeline.ring_size=99".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("pipeline.ring_size"), "{e}");
        let e = Settings::load(None, &["pipeline.ring_size=abc".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ring_size"), "{e}");
        assert!(Settings::load(None, &["nodots".into()]).is_err());
    }

    #[test]
    fn retention_needs_segments_and_live_sources_are_segmented_by_default() {
        let sets = ["output.segment_seconds=0".into(), "output.keep_gb=5".into()];
        let e = Settings::load(None, &sets).unwrap_err().to_string();
        assert!(
            e.contains("output.keep_gb") && e.contains("segment_seconds"),
            "{e}"
        );
        let s = Settings::load(None, &["output.keep_hours=24".into()]).unwrap();
        assert_eq!(
            s.output.segment_seconds_for(true),
            DEFAULT_LIVE_SEGMENT_SECONDS
        );
        assert_eq!(s.output.segment_seconds_for(false), 0);
        let s = Settings::load(None, &["output.segment_seconds=10".into()]).unwrap();
        assert_eq!(s.output.segment_seconds_for(false), 10);
        assert!(s.to_toml().unwrap().contains("segment_seconds = 10"));
    }

    #[test]
    fn every_invalid_set_names_its_key() {
        for (set, key) in [
            ("cca.enabled=yes", "cca.enabled"),
            ("maxtree.threshold=big", "maxtree.threshold"),
            ("output.encoder=h265", "output.encoder"),
            ("source.pacing=slow", "source.pacing"),
            ("output.video_kbps=0", "output.video_kbps"),
            ("output.segment_seconds=-1", "output.segment_seconds"),
            ("output.segment_seconds=90000", "output.segment_seconds"),
            ("output.keep_hours=-2", "output.keep_hours"),
            ("output.keep_gb=nan", "output.keep_gb"),
            ("source.timeout_seconds=0", "source.timeout_seconds"),
            (
                "source.reconnect.initial_seconds=0",
                "source.reconnect.initial_seconds",
            ),
            (
                "source.reconnect.max_seconds=0.5",
                "source.reconnect.max_seconds",
            ),
            (
                "source.reconnect.give_up_seconds=-1",
                "source.reconnect.give_up_seconds",
            ),
            ("source.reconnect.enabled=maybe", "source.reconnect.enabled"),
            ("source.reconnect.every=1", "every"),
            ("nosuchsection.x=1", "nosuchsection"),
        ] {
            let e = Settings::load(None, &[set.into()]).unwrap_err().to_string();
            assert!(e.contains(key), "--set {set}: `{e}` does not name {key}");
        }
    }

    #[test]
    fn a_password_is_refused_on_the_command_line_and_read_from_a_file() {
        let e = Settings::load(None, &["publish.password=hunter2".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("publish.password") && e.contains("never taken"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let s = Settings::load(None, &["publish.url=mqtt://b/p".into()]).unwrap();
        assert_eq!(s.publish.url, "mqtt://b/p");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("login.toml");
        std::fs::write(&p, "[publish]\nusername = \"u\"\npassword = \"pw\"\n").unwrap();
        let s = Settings::load(Some(&p), &[]).unwrap();
        assert_eq!(s.publish.password.expose(), "pw");
        let e = Settings::load(None, &["publish.url=http://b".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("publish.url"), "{e}");
    }

    #[test]
    fn a_config_file_error_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[cca]\nenabled = \"yes\"\n").unwrap();
        let e = Settings::load(Some(&p), &[]).unwrap_err().to_string();
        assert!(e.contains("enabled") && e.contains("c.toml"), "{e}");
    }

    #[test]
    fn a_config_error_never_quotes_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("login.toml");
        for (text, says) in [
            (
                "[publish]\nusername = \"u\"\npassword = \"secret123\n",
                "line 3",
            ),
            (
                "[publish]\npassword = \"secret123\"\npassword = \"secret123\"\n",
                "duplicate key",
            ),
            ("[publish]\npassword = 123456789\n", "publish.password"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = Settings::load(Some(&p), &[]).unwrap_err().to_string();
            assert!(
                !e.contains("secret123") && !e.contains("123456789"),
                "{text:?}: the error quotes the password: {e}"
            );
            assert!(
                e.contains(says) && e.contains("login.toml"),
                "{text:?}: {e}"
            );
            let e = Settings::from_toml(text, "").unwrap_err().to_string();
            assert!(
                !e.contains("secret123") && !e.contains("123456789"),
                "{text:?}: the error quotes the password: {e}"
            );
        }
    }

    #[test]
    fn round_trips_through_toml() {
        let s = Settings::defaults().unwrap();
        assert_eq!(Settings::from_toml(&s.to_toml().unwrap(), "").unwrap(), s);
    }
}
