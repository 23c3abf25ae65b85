//! Linear openings and closings at any angle, and orientation maps built from them (Karas et al.
//! 2015, "GPU implementation of linear morphological openings with arbitrary angle": line
//! families, zones, every angle in one launch), each line opened by van Herk / Gil-Werman.
//!
//! # Definition
//!
//! **Structuring element.** For an angle α (degrees, counter-clockwise from +x, y pointing up)
//! and an odd length L, let r = (L−1)/2 and m = max(|cos α|, |sin α|). The segment's end points
//! are ±(dx, dy) with dx = round(r·cos α / m) and dy = −round(r·sin α / m) in (column, row)
//! image coordinates (rows grow downwards, hence the minus), `round` rounding halves away from
//! zero. One of |dx|, |dy| equals r: that axis is the *major* axis (columns when |dx| = r, which
//! includes 45° and 135°). The segment has exactly L pixels, one per major coordinate
//! k = −r..=r, its minor coordinate being round(k·q/r) (Bresenham's digitisation, halves away
//! from zero), where q is the minor end-point coordinate once the major one is made +r. So 0° is
//! horizontal, 90° vertical, 45° rises to the right and 135° falls to the right.
//! [`segment_offsets`] lists these pixels.
//!
//! **Line family.** The opening is computed along the family of parallel digital lines of the
//! segment's slope q/r that sweep the image (Soille, Breen & Jones 1996): for a column-major
//! family the lines are `y = c + φ(x)`, for a row-major family `x = c + φ(y)`, with
//! φ(a) = sgn(q)·⌊(2|q|·a + r) / 2r⌋ for a = 0, 1, 2, … (a periodic Bresenham line, period r
//! along the major axis; a negative slope is the mirror image of the positive one). Every pixel
//! lies on exactly one line (c = minor − φ(major)). Each line, restricted to the image, is a 1D
//! signal; it is opened by a window of L consecutive samples. At 0°, 45°, 90° and 135° (q ∈ {0,
//! ±r}) this is exactly the 2D opening by the segment above; at other angles it is the standard
//! approximation used by Soille et al. and by Karas et al.: the L samples of a window follow the
//! line's own Bresenham pattern, which equals the segment up to the line's phase (a translation
//! variance of at most one pixel across the major axis).
//!
//! **Border.** Pixels outside the image are ignored: the erosion takes the minimum and the
//! dilation the maximum over the part of the window inside the image (OpenCV's default border for
//! `morphologyEx`, scikit-image's `mode="ignore"`). Equivalently, each line is padded with r
//! samples of +∞ at both ends and opened by full windows whose centre lies in the image.
//!
//! **Closing** is the dual: φ(f) = −γ(−f), computed as the opening of the inverted image
//! (`MAX − v` for u8/u16, `−v` for f32). Inputs are u8, u16 or f32 (NaN is rejected).
//!
//! # Orientation ops
//!
//! For K angles α_k (evenly spaced, α_k = 180°·k/K, or an explicit list) and one length L:
//! the **strength** ∨γ = sup_k γ_k(f) (input dtype), the **orientation** ζ = argmax_k γ_k(f)
//! (ties go to the smallest k; reported as α_k in degrees), and the **angular spectrum**
//! σ(α_k) = Σ_x γ_k(f)(x) (Eq. 3 and 6 of the paper). With `closing` the same is computed for
//! closings: strength = inf_k φ_k(f), orientation = argmin_k φ_k(f), σ = Σ φ_k(f). The colour
//! picture maps hue to the angle (180° of orientation = one turn of hue) and value to the
//! strength of the structure (for closings, the strength of the dark structure, MAX − inf φ).
//!
//! # Algorithms
//!
//! - CPU ([`cpu`]): van Herk / Gil-Werman (`van_herk.rs`: the minimum of every window of L
//!   samples from a prefix and a suffix minimum over blocks of L, three comparisons a sample
//!   whatever L, then the maximum of the erosion the same way) along every line of the family,
//!   lines in parallel with rayon. It replaced the paper's streaming FIFO (Bartovsky et al.
//!   2011), whose data-dependent pops made the CPU's orientation map about twice as slow.
//! - Reference (`naive`): min then max over the window along the same line, per pixel, O(N·L);
//!   and the true 2D opening by the segment's pixels (tests only).
//! - GPU ([`gpu`], `kernels/orientation.cu`; its launch plan in `plan.rs`): one thread per
//!   line (and zone), each line opened by van Herk / Gil-Werman (the window's minimum from a
//!   prefix and a suffix minimum over blocks of L samples: three operations a sample whatever L,
//!   no data-dependent branch, so the lanes of a warp never diverge), a ring of L words a thread
//!   in shared memory (in global memory for long segments), zones for
//!   occupancy, transposed working images for column-major families, every angle of an
//!   orientation map in one launch, strength, orientation and spectrum reduced on the GPU.
//!   Bit-identical to the CPU (both compute the opening by its definition; min and max are
//!   exact). `blocks.rs` models the kernel's loop step by step and tests it against the
//!   definition, without a GPU.

#[cfg(test)]
mod blocks;
pub mod cpu;
pub(crate) mod geometry;
#[cfg(test)]
mod goldens;
pub mod gpu;
#[cfg(test)]
pub(crate) mod naive;
mod plan;
mod tuning;
mod van_herk;

use serde::{Deserialize, Serialize};

use crate::image::Image;
use crate::ops::OpError;

pub use cpu::{
    close_along_lines, linear_closing, linear_opening, open_along_lines, orientation,
    orientation_colour,
};
pub use geometry::{LineFamily, segment_end, segment_offsets};
pub use gpu::{GpuSample, LinearOpeningGpu, OrientationGpu, linear_opening_gpu, orientation_gpu};
pub use tuning::OrientationTuning;

/// Largest structuring-element length accepted (odd).
pub(crate) const MAX_LENGTH: u32 = 1023;
/// Most angles in one orientation map.
pub(crate) const MAX_ANGLES: usize = 3600;

/// One linear opening (or closing): `image IN --op linear-opening --length L --angle DEG`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinearOpeningParams {
    /// Segment length L in pixels: odd, 1..=1023 (1 is the identity).
    pub length: u32,
    /// Angle in degrees, counter-clockwise from +x (any finite value; taken modulo 180).
    pub angle: f64,
    /// Compute the closing instead of the opening.
    pub closing: bool,
}

impl Default for LinearOpeningParams {
    fn default() -> Self {
        Self {
            length: 31,
            angle: 0.0,
            closing: false,
        }
    }
}

impl LinearOpeningParams {
    /// Checks every field; the error names the field and the allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        validate_length(self.length)?;
        if !self.angle.is_finite() {
            return Err(OpError::InvalidParam(format!(
                "angle = {:?}: must be a finite number of degrees",
                self.angle
            )));
        }
        Ok(())
    }
}

/// Orientation maps: config section `[orientation]`, `image IN --op orientation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrientationParams {
    /// Whether the pipeline runs this analysis (ignored by the functions here).
    pub enabled: bool,
    /// Segment length L in pixels: odd, 1..=1023.
    pub length: u32,
    /// Number K of angles evenly spaced over [0°, 180°): α_k = 180°·k/K; 1..=3600.
    pub angles: u32,
    /// Explicit angles in degrees; when non-empty it replaces `angles` (at most 3600 entries).
    pub angle_list: Vec<f64>,
    /// Use closings (dark linear structures) instead of openings.
    pub closing: bool,
}

impl Default for OrientationParams {
    fn default() -> Self {
        Self {
            enabled: true,
            length: 31,
            angles: 36,
            angle_list: Vec::new(),
            closing: false,
        }
    }
}

impl OrientationParams {
    /// Checks every field; the error names the field and the allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        validate_length(self.length)?;
        if self.angle_list.is_empty() {
            if self.angles == 0 || self.angles as usize > MAX_ANGLES {
                return Err(OpError::InvalidParam(format!(
                    "angles = {}: must be in 1..={MAX_ANGLES}",
                    self.angles
                )));
            }
        } else {
            if self.angle_list.len() > MAX_ANGLES {
                return Err(OpError::InvalidParam(format!(
                    "angle_list has {} entries: at most {MAX_ANGLES}",
                    self.angle_list.len()
                )));
            }
            if let Some(a) = self.angle_list.iter().find(|a| !a.is_finite()) {
                return Err(OpError::InvalidParam(format!(
                    "angle_list contains {a}: angles must be finite"
                )));
            }
        }
        Ok(())
    }

    /// The angles in degrees, in index order.
    #[must_use]
    pub(crate) fn angle_degrees(&self) -> Vec<f64> {
        if self.angle_list.is_empty() {
            let k = self.angles.max(1);
            (0..k)
                .map(|i| 180.0 * f64::from(i) / f64::from(k))
                .collect()
        } else {
            self.angle_list.clone()
        }
    }
}

fn validate_length(length: u32) -> Result<(), OpError> {
    if length == 0 || length.is_multiple_of(2) || length > MAX_LENGTH {
        return Err(OpError::InvalidParam(format!(
            "length = {length}: must be odd, in 1..={MAX_LENGTH}"
        )));
    }
    Ok(())
}

/// Pixel types the linear openings accept: totally ordered within the values they carry, with
/// extremes used as padding (+∞) and as the end-of-line sentinel (−∞).
pub trait Sample: Copy + PartialOrd + Default + Send + Sync + std::fmt::Debug + 'static {
    /// The top element (+∞ for the order): the border padding of the erosion.
    const TOP: Self;
    /// The bottom element: the border padding of the dilation.
    const BOTTOM: Self;
    /// The duality used for closings: `MAX − v` (integers) or `−v` (f32).
    #[must_use]
    fn invert(self) -> Self;
    /// The value as f64 (exact for u8/u16), for the angular spectrum.
    fn to_f64(self) -> f64;
    /// The value scaled to 8 bits for the colour picture: u8 as is, u16 `v >> 8`, f32
    /// `round(clamp(v, 0, 1)·255)`.
    fn to_u8_value(self) -> u8;
    /// False for values the order cannot handle (NaN).
    fn is_ordered(self) -> bool {
        true
    }
}

impl Sample for u8 {
    const TOP: Self = u8::MAX;
    const BOTTOM: Self = 0;
    fn invert(self) -> Self {
        u8::MAX - self
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn to_u8_value(self) -> u8 {
        self
    }
}

impl Sample for u16 {
    const TOP: Self = u16::MAX;
    const BOTTOM: Self = 0;
    fn invert(self) -> Self {
        u16::MAX - self
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn to_u8_value(self) -> u8 {
        (self >> 8) as u8
    }
}

impl Sample for f32 {
    const TOP: Self = f32::INFINITY;
    const BOTTOM: Self = f32::NEG_INFINITY;
    fn invert(self) -> Self {
        -self
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn to_u8_value(self) -> u8 {
        (self.clamp(0.0, 1.0) * 255.0).round() as u8
    }
    fn is_ordered(self) -> bool {
        !self.is_nan()
    }
}

/// The orientation maps of one image.
#[derive(Clone, Debug, PartialEq)]
pub struct OrientationOutput<T> {
    /// The K angles in degrees, in index order.
    pub angles_deg: Vec<f64>,
    /// sup_k γ_k(f) (or inf_k φ_k(f) for closings), in the input dtype.
    pub strength: Image<T>,
    /// argmax_k γ_k(f) (argmin_k φ_k(f) for closings), ties to the smallest k.
    pub angle_index: Image<u16>,
    /// σ(α_k) = Σ over the image of γ_k(f) (or φ_k(f)); exact for u8/u16.
    pub spectrum: Vec<f64>,
    /// True when computed with closings.
    pub closing: bool,
}

impl<T: Sample> OrientationOutput<T> {
    /// The orientation map in degrees (float32): α of each pixel's argmax (rows in parallel,
    /// through a table of the angles).
    #[must_use]
    pub fn angle_map_deg(&self) -> Image<f32> {
        let table: Vec<f32> = self.angles_deg.iter().map(|&a| a as f32).collect();
        self.angle_index
            .par_map(|k| table.get(usize::from(k)).copied().unwrap_or(0.0))
    }

    /// The colour picture: hue = angle, value = strength (see [`orientation_colour`]).
    #[must_use]
    pub fn colour(&self) -> Image<[u8; 3]> {
        orientation_colour(self)
    }

    /// The spectrum as CSV text with a header line: `angle_deg,sum`.
    #[must_use]
    pub fn spectrum_csv(&self) -> String {
        let mut s = String::from("angle_deg,sum\n");
        for (a, v) in self.angles_deg.iter().zip(&self.spectrum) {
            s.push_str(&format!("{a},{v}\n"));
        }
        s
    }

    /// Per-frame summary numbers for frames.jsonl: the spectrum and the dominant angle.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        spectrum_summary(&self.angles_deg, &self.spectrum, self.closing)
    }
}

/// Summary numbers of an angular spectrum (see [`OrientationOutput::summary`]), for callers
/// that have the spectrum without the maps.
#[must_use]
pub(crate) fn spectrum_summary(
    angles_deg: &[f64],
    spectrum: &[f64],
    closing: bool,
) -> serde_json::Value {
    let dominant = dominant_index(spectrum, closing);
    serde_json::json!({
        "angle_count": angles_deg.len(),
        "closing": closing,
        "angles_deg": angles_deg,
        "spectrum": spectrum,
        "dominant_angle_deg": dominant.and_then(|k| angles_deg.get(k).copied()),
    })
}

/// The angle index with the largest spectrum value (smallest for closings: the darkest
/// structures), first on ties.
fn dominant_index(spectrum: &[f64], closing: bool) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (k, &v) in spectrum.iter().enumerate() {
        let better = match best {
            None => true,
            Some((_, b)) => {
                if closing {
                    v < b
                } else {
                    v > b
                }
            }
        };
        if better {
            best = Some((k, v));
        }
    }
    best.map(|(k, _)| k)
}

/// Hue table: the hue of angle α in 1/256 sextants, `⌊((α mod 180) / 180)·1536⌋` in 0..1536.
/// Shared by the CPU colour picture and the GPU kernel so both agree to the bit.
#[must_use]
pub(crate) fn hue_of_angle(angle_deg: f64) -> u16 {
    let a = angle_deg.rem_euclid(180.0);
    let h = (a / 180.0 * 1536.0).floor();
    (h as i64).clamp(0, 1535) as u16
}

/// HSV (full saturation) to RGB with integer arithmetic: `hue` in 0..1536 (six sextants of 256),
/// `value` 0..=255. The GPU kernel `orientation_finish_*` computes the same.
#[must_use]
pub(crate) fn hsv_to_rgb(hue: u16, value: u8) -> [u8; 3] {
    let v = u32::from(value);
    let sextant = (hue >> 8) % 6;
    let frac = u32::from(hue & 255);
    let rising = (v * frac / 255) as u8;
    let falling = (v * (255 - frac) / 255) as u8;
    let v = value;
    match sextant {
        0 => [v, rising, 0],
        1 => [falling, v, 0],
        2 => [0, v, rising],
        3 => [0, falling, v],
        4 => [rising, 0, v],
        _ => [v, 0, falling],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_validate() {
        assert!(LinearOpeningParams::default().validate().is_ok());
        assert!(OrientationParams::default().validate().is_ok());
        let bad = LinearOpeningParams {
            length: 4,
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("length"));
        let bad = LinearOpeningParams {
            angle: f64::NAN,
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("angle"));
        let bad = OrientationParams {
            angles: 0,
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("angles"));
        let bad = OrientationParams {
            angle_list: vec![1.0, f64::INFINITY],
            ..Default::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("angle_list")
        );
        let p: OrientationParams = serde_json::from_str(r#"{"length": 11, "angles": 4}"#).unwrap();
        assert_eq!(p.angle_degrees(), vec![0.0, 45.0, 90.0, 135.0]);
        assert!(serde_json::from_str::<OrientationParams>(r#"{"lenght": 11}"#).is_err());
    }

    #[test]
    fn hue_and_hsv() {
        assert_eq!(hue_of_angle(0.0), 0);
        assert_eq!(hue_of_angle(90.0), 768);
        assert_eq!(hue_of_angle(180.0), 0);
        assert_eq!(hue_of_angle(-45.0), hue_of_angle(135.0));
        assert_eq!(hsv_to_rgb(0, 255), [255, 0, 0]);
        assert_eq!(hsv_to_rgb(512, 255), [0, 255, 0]);
        assert_eq!(hsv_to_rgb(1024, 255), [0, 0, 255]);
        assert_eq!(hsv_to_rgb(700, 0), [0, 0, 0]);
    }

    #[test]
    fn dominant_angle() {
        assert_eq!(dominant_index(&[1.0, 3.0, 3.0, 2.0], false), Some(1));
        assert_eq!(dominant_index(&[1.0, 3.0, 0.5, 0.5], true), Some(2));
        assert_eq!(dominant_index(&[], false), None);
    }
}
