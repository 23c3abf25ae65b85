//! The tracker's settings (`[tracker]`) and its clock.
//!
//! Durations are set in seconds and turned into frames with the stream's frame rate, so the
//! same settings hold at 15, 25 or 60 fps. The frame rate comes from the frames' presentation
//! timestamps when the source gives them (`FrameClock::tick` with `Some(pts)`: the median of
//! the recent intervals), else from `frame_rate`. Each frame also advances the clock by its
//! `FrameClock::step`: the time since the previous frame in frames of that rate, 1 at a steady
//! rate and more after a stretch of dropped frames, so that durations and motion follow the
//! time that really passed. Distances are in pixels.

use serde::{Deserialize, Serialize};

use super::tuning::TUNING;
use crate::ops::OpError;

/// The largest process or measurement noise σ, pixels: wider than any frame, so no real
/// setting is refused, and its square (the Kalman filter's variances) stays far from overflow
/// (a σ of 1e308 made every covariance infinite and every track vanish).
pub(crate) const MAX_NOISE_PIXELS: f64 = 1e4;

/// Tracker settings (the `[tracker]` config section).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrackerParams {
    /// Components smaller than this (pixels) are not tracked.
    #[serde(with = "wide_u64")]
    pub min_area: u64,
    /// Frames per second assumed when the source gives no timestamps.
    pub frame_rate: f64,
    /// A new track gets its id after being matched in every frame for this long, seconds.
    pub confirm_seconds: f64,
    /// A lost track (hidden, unmatched) keeps predicting and can be re-identified for this
    /// long, seconds.
    pub lost_seconds: f64,
    /// Gate on the distance between predicted and measured centroids of a track matched in the
    /// previous frame, pixels.
    pub max_distance: f64,
    /// How fast the gate widens while a track goes unmeasured (lost or merged), pixels a
    /// second.
    pub gate_growth: f64,
    /// Pairs with at least this IoU pass the gate whatever their distance.
    pub min_iou: f64,
    /// Weight of `1 - IoU` in the association cost (the normalised distance weighs 1).
    pub iou_weight: f64,
    /// Weight of the appearance difference (area, mean grey level, second moments) in the cost.
    pub appearance_weight: f64,
    /// Mean grey levels further apart than this are a different object for re-identification.
    pub grey_tolerance: f64,
    /// Ratio of second-moment axes beyond which shapes count as different.
    pub shape_tolerance: f64,
    /// A component holds several tracks (a merge) when its area is at least the largest
    /// member's plus this share of the others'.
    pub merge_area_share: f64,
    /// Acceleration noise σa of the constant-velocity model, pixels a frame².
    pub process_noise: f64,
    /// Measurement noise σm of centroids and sizes, pixels.
    pub measurement_noise: f64,
    /// Length of the trail kept for the overlay, seconds.
    pub trail_seconds: f64,
}

impl Default for TrackerParams {
    fn default() -> Self {
        Self {
            min_area: 25,
            frame_rate: 25.0,
            confirm_seconds: 0.2,
            lost_seconds: 2.0,
            max_distance: 50.0,
            gate_growth: 100.0,
            min_iou: 0.1,
            iou_weight: 0.5,
            appearance_weight: 0.5,
            grey_tolerance: 20.0,
            shape_tolerance: 1.5,
            merge_area_share: 0.3,
            process_noise: 1.0,
            measurement_noise: 2.0,
            trail_seconds: 2.0,
        }
    }
}

/// A `u64` that TOML can carry whole: TOML integers are signed 64-bit, so a value above
/// `i64::MAX` is written as a string of digits, and one is read from an integer or from such a
/// string (`--set tracker.min_area=18446744073709551615` arrives as the string, not as a
/// number TOML could not hold).
mod wide_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(u64),
        Digits(String),
    }

    pub(crate) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        match i64::try_from(*v) {
            Ok(small) => s.serialize_i64(small),
            Err(_) => s.serialize_str(&v.to_string()),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Given::deserialize(d)? {
            Given::Number(n) => Ok(n),
            Given::Digits(s) => s.trim().parse().map_err(|_| {
                serde::de::Error::custom(format!("`{s}` is not a whole number in 0..={}", u64::MAX))
            }),
        }
    }
}

impl TrackerParams {
    /// Checks every field; the error names the field and its allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        let positive = [
            ("frame_rate", self.frame_rate),
            ("max_distance", self.max_distance),
            ("grey_tolerance", self.grey_tolerance),
            ("process_noise", self.process_noise),
            ("measurement_noise", self.measurement_noise),
        ];
        // Values are shown with `{:?}`: 1e308 as `1e308`, not as its 309 digits.
        for (name, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(OpError::InvalidParam(format!(
                    "{name} must be a positive number, got {v:?}"
                )));
            }
        }
        for (name, v) in [
            ("process_noise", self.process_noise),
            ("measurement_noise", self.measurement_noise),
        ] {
            if v > MAX_NOISE_PIXELS {
                return Err(OpError::InvalidParam(format!(
                    "{name} must be at most {MAX_NOISE_PIXELS:?} pixels, got {v:?}"
                )));
            }
        }
        let non_negative = [
            ("confirm_seconds", self.confirm_seconds),
            ("lost_seconds", self.lost_seconds),
            ("gate_growth", self.gate_growth),
            ("iou_weight", self.iou_weight),
            ("appearance_weight", self.appearance_weight),
            ("trail_seconds", self.trail_seconds),
        ];
        for (name, v) in non_negative {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(OpError::InvalidParam(format!(
                    "{name} must be a number >= 0, got {v:?}"
                )));
            }
        }
        if !(0.0..=1.0).contains(&self.min_iou) {
            return Err(OpError::InvalidParam(format!(
                "min_iou must be in [0, 1], got {:?}",
                self.min_iou
            )));
        }
        if !(0.0..=1.0).contains(&self.merge_area_share) {
            return Err(OpError::InvalidParam(format!(
                "merge_area_share must be in [0, 1], got {:?}",
                self.merge_area_share
            )));
        }
        if !(self.shape_tolerance > 1.0 && self.shape_tolerance.is_finite()) {
            return Err(OpError::InvalidParam(format!(
                "shape_tolerance must be a ratio > 1, got {:?}",
                self.shape_tolerance
            )));
        }
        if self.lost_seconds > 3600.0
            || self.trail_seconds > 3600.0
            || self.confirm_seconds > 3600.0
        {
            return Err(OpError::InvalidParam(
                "durations must be at most 3600 seconds".into(),
            ));
        }
        Ok(())
    }
}

/// The stream's time: frame count, frame rate, and the conversion of durations to frames.
#[derive(Clone, Debug)]
pub(crate) struct FrameClock {
    default_fps: f64,
    last_pts: Option<u64>,
    intervals: std::collections::VecDeque<u64>,
    step: f64,
}

impl FrameClock {
    /// A clock that assumes `default_fps` until timestamps say otherwise.
    #[must_use]
    pub fn new(default_fps: f64) -> Self {
        Self {
            default_fps,
            last_pts: None,
            intervals: std::collections::VecDeque::new(),
            step: 1.0,
        }
    }

    /// Sets the frame rate assumed without timestamps.
    pub(crate) fn set_default_fps(&mut self, fps: f64) {
        self.default_fps = fps;
    }

    /// Records a new frame and its timestamp, if any. The frame-rate estimate ignores
    /// intervals that are not positive or longer than a second (seeks, gaps); the step counts
    /// every positive interval up to `TUNING.max_step_seconds`, and
    /// one frame otherwise.
    pub(crate) fn tick(&mut self, pts_nanos: Option<u64>) {
        self.step = 1.0;
        let Some(pts) = pts_nanos else { return };
        if let Some(last) = self.last_pts
            && pts > last
        {
            let interval = pts - last;
            if interval <= 1_000_000_000 {
                self.intervals.push_back(interval);
                if self.intervals.len() > TUNING.timestamp_intervals {
                    self.intervals.pop_front();
                }
            }
            let seconds = interval as f64 * 1e-9;
            if seconds <= TUNING.max_step_seconds {
                self.step = seconds * self.fps();
            }
        }
        self.last_pts = Some(pts);
    }

    /// Time from the previous frame to the last one recorded, in frames at [`FrameClock::fps`]:
    /// 1 without timestamps, about 1 at a steady rate, `k + 1` after `k` dropped frames.
    #[must_use]
    pub fn step(&self) -> f64 {
        self.step
    }

    /// Frames per second: the median recent timestamp interval, else the default.
    #[must_use]
    pub fn fps(&self) -> f64 {
        if self.intervals.is_empty() {
            return self.default_fps;
        }
        let mut v: Vec<u64> = self.intervals.iter().copied().collect();
        v.sort_unstable();
        1e9 / v[v.len() / 2] as f64
    }

    /// `seconds` as a whole number of frames (nearest, at least `min`).
    #[must_use]
    pub fn frames(&self, seconds: f64, min: u32) -> u32 {
        ((seconds * self.fps()).round() as u32).max(min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_values_are_refused_and_shown_short() {
        let e = TrackerParams {
            process_noise: 1e308,
            ..TrackerParams::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("process_noise") && e.contains("1e308"), "{e}");
        let e = TrackerParams {
            max_distance: -1e308,
            ..TrackerParams::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("-1e308") && e.len() < 100, "{e}");
        assert!(
            TrackerParams {
                measurement_noise: MAX_NOISE_PIXELS,
                ..TrackerParams::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn validate_names_the_field() {
        assert!(TrackerParams::default().validate().is_ok());
        let e = TrackerParams {
            lost_seconds: -1.0,
            ..TrackerParams::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("lost_seconds"), "{e}");
        let e = TrackerParams {
            frame_rate: 0.0,
            ..TrackerParams::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("frame_rate"), "{e}");
        assert!(
            TrackerParams {
                min_iou: 2.0,
                ..TrackerParams::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            TrackerParams {
                shape_tolerance: 1.0,
                ..TrackerParams::default()
            }
            .validate()
            .is_err()
        );
        let p: TrackerParams = serde_json::from_str(r#"{"min_area": 5}"#).unwrap();
        assert_eq!(p.min_area, 5);
        assert!(serde_json::from_str::<TrackerParams>(r#"{"max_misses": 5}"#).is_err());
    }

    #[test]
    fn clock_follows_timestamps_else_the_default() {
        let mut c = FrameClock::new(25.0);
        c.tick(None);
        assert_eq!(c.fps(), 25.0);
        assert_eq!(c.frames(2.0, 1), 50);
        assert_eq!(c.frames(0.0, 1), 1);
        // 50 fps timestamps, one gap of 3 s (ignored) and one jittered interval.
        for (i, pts) in [0u64, 20, 40, 3040, 3060, 3081, 3100]
            .into_iter()
            .enumerate()
        {
            c.tick(Some(pts * 1_000_000));
            if i == 1 {
                assert_eq!(c.fps(), 50.0);
            }
        }
        assert_eq!(c.fps(), 50.0);
        assert_eq!(c.frames(2.0, 1), 100);
        assert!((c.step() - 0.95).abs() < 1e-9, "{}", c.step());
        // Four dropped frames: the next frame is five frames on.
        c.tick(Some(3200 * 1_000_000));
        assert_eq!(c.fps(), 50.0);
        assert!((c.step() - 5.0).abs() < 1e-9, "{}", c.step());
        // The 3 s gap counted its real length; a timestamp going back counts one frame, and so
        // does a frame without one.
        c.tick(Some(1_000_000));
        assert_eq!(c.step(), 1.0);
        c.tick(Some(2_000_000));
        c.tick(None);
        assert_eq!(c.step(), 1.0);
    }

    #[test]
    fn a_gap_longer_than_a_second_counts_its_real_length() {
        let mut c = FrameClock::new(25.0);
        for pts in [0u64, 40, 80, 3080] {
            c.tick(Some(pts * 1_000_000));
        }
        assert_eq!(c.fps(), 25.0);
        assert!((c.step() - 75.0).abs() < 1e-9, "{}", c.step());
    }
}
