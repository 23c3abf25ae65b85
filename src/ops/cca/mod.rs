//! Connected-component labeling and analysis (CCL + CCA): binarization, 4/8-connected labels
//! and per-component features, on the CPU and on the GPU (HA4, Hennequin et al. 2018).
//!
//! # Pipeline of one frame
//! 1. **Source value** `s(x, y)`: the frame itself, or (`source = "motion"`) the absolute
//!    difference to a running background, `s = |f - round(bg)|`, where `bg` is kept in 16.16
//!    fixed point and updated after each frame as `bg += ((f << 16) - bg) * a >> 16`
//!    (`a = round(learning_rate * 65536)`, arithmetic shift). Integer arithmetic makes the CPU
//!    and GPU backgrounds bit-identical. The first frame (or the first after a size change or
//!    `CcaCpu::reset_background`) only seeds the background, so its foreground is empty.
//! 2. **Threshold** `T`: fixed, or Otsu's on the histogram of `s` (between-class variance
//!    evaluated per level from exact integer prefix sums, first maximum wins, as OpenCV's
//!    `THRESH_OTSU` on real images).
//! 3. **Binarization**: bright polarity `s > T`, dark polarity `s <= T`.
//! 4. **Labeling** with 4- or 8-connectivity, with OpenCV `connectedComponentsWithStats`
//!    semantics: label 0 is the background, components are numbered `1..=n` in raster order of
//!    their first pixel (this module's output is that order on both backends; OpenCV's own 8-conn
//!    block-based scan may number differently, so goldens match components by pixel).
//! 5. **Features** per component from exact integer sums (area, bounding box, `Σx`, `Σy`,
//!    `Σx²`, `Σxy`, `Σy²`): centroid (x = column, y = row), unnormalized second-order central
//!    moments `mu20 = Σ(x-cx)²`, `mu11`, `mu02`, orientation and eccentricity
//!    ([`features`]). Both backends produce the same integer sums, so every feature is
//!    bit-identical between CPU and GPU.
//!
//! CPU: [`cpu`] (run-based two-pass labeling, rayon over strips). Reference definitions:
//! `naive` (BFS flood fill, direct per-pixel features). GPU: [`gpu`] with `kernels/cca.cu`.
//!
//! The max-tree residue mode of the `[cca]` config is the caller's: feed the residue image as
//! the input of this op (`source = "frame"`).

pub mod binarize;
pub mod cpu;
pub mod features;
pub mod gpu;
#[cfg(test)]
pub(crate) mod naive;
mod tuning;

#[cfg(test)]
mod emulate;
#[cfg(test)]
mod goldens;

use serde::{Deserialize, Serialize};

use crate::image::Image;
use crate::ops::OpError;

pub use super::Connectivity;
pub use binarize::{BackgroundModel, binarize, otsu_threshold};
pub use cpu::{CcaCpu, cca_cpu, label, label_with_stats};
pub use features::{Component, ComponentSums, ComponentTable, Moments};
pub use gpu::{CcaGpu, cca_gpu};
pub use tuning::CcaTuning;

/// How the threshold level is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ThresholdRepr", into = "ThresholdRepr")]
pub enum Threshold {
    /// A fixed level `T` (compared with the source value).
    Fixed(u32),
    /// Otsu's level, computed per frame from the histogram of the source value.
    Otsu,
}

/// Serde form of [`Threshold`]: a number or the string `"otsu"`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum ThresholdRepr {
    Level(u32),
    Name(String),
}

impl TryFrom<ThresholdRepr> for Threshold {
    type Error = String;
    fn try_from(r: ThresholdRepr) -> Result<Self, Self::Error> {
        match r {
            ThresholdRepr::Level(t) => Ok(Self::Fixed(t)),
            ThresholdRepr::Name(s) if s.eq_ignore_ascii_case("otsu") => Ok(Self::Otsu),
            ThresholdRepr::Name(s) => s
                .parse::<u32>()
                .map(Self::Fixed)
                .map_err(|_| format!("threshold: expected a level or \"otsu\", got {s:?}")),
        }
    }
}

impl From<Threshold> for ThresholdRepr {
    fn from(t: Threshold) -> Self {
        match t {
            Threshold::Fixed(v) => Self::Level(v),
            Threshold::Otsu => Self::Name("otsu".to_owned()),
        }
    }
}

impl std::str::FromStr for Threshold {
    type Err = OpError;
    /// Parses `otsu` or a level (the CLI's `--threshold`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(ThresholdRepr::Name(s.to_owned())).map_err(OpError::InvalidParam)
    }
}

/// Which side of the threshold is foreground.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Polarity {
    /// Foreground where `s > T`.
    #[default]
    Bright,
    /// Foreground where `s <= T`.
    Dark,
}

/// What is thresholded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The input frame (or whatever image the caller passes, e.g. a max-tree residue).
    #[default]
    Frame,
    /// `|frame - background|` with a running background model (see the module docs).
    Motion,
}

/// Parameters of binarization + labeling (the `[cca]` config section).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CcaParams {
    /// `"otsu"` or a fixed level (default `"otsu"`).
    pub threshold: Threshold,
    /// `"bright"` (`s > T`, default) or `"dark"` (`s <= T`).
    pub polarity: Polarity,
    /// 4 or 8 (default 8, as OpenCV's `connectedComponentsWithStats`).
    pub connectivity: u8,
    /// `"frame"` (default) or `"motion"`.
    pub source: Source,
    /// Background learning rate of the motion source, in (0, 1] (default 0.05): the weight of
    /// the new frame in the running average.
    pub learning_rate: f64,
}

impl Default for CcaParams {
    fn default() -> Self {
        Self {
            threshold: Threshold::Otsu,
            polarity: Polarity::Bright,
            connectivity: 8,
            source: Source::Frame,
            learning_rate: 0.05,
        }
    }
}

impl CcaParams {
    /// Checks every field; the error names the field and its allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        if self.connectivity != 4 && self.connectivity != 8 {
            return Err(OpError::InvalidParam(format!(
                "connectivity must be 4 or 8, got {}",
                self.connectivity
            )));
        }
        if !(self.learning_rate > 0.0 && self.learning_rate <= 1.0) {
            return Err(OpError::InvalidParam(format!(
                "learning_rate must be in (0, 1], got {:?}",
                self.learning_rate
            )));
        }
        if let Threshold::Fixed(t) = self.threshold
            && t > u32::from(u16::MAX)
        {
            return Err(OpError::InvalidParam(format!(
                "threshold must be \"otsu\" or a level in 0..=65535, got {t}"
            )));
        }
        Ok(())
    }

    /// The connectivity as an enum (call [`Self::validate`] first; anything but 4 reads as 8).
    #[must_use]
    pub fn conn(&self) -> Connectivity {
        if self.connectivity == 4 {
            Connectivity::Four
        } else {
            Connectivity::Eight
        }
    }

    /// The background update weight in 1/65536 units, `round(learning_rate * 65536)` in 1..=65536.
    #[must_use]
    pub(crate) fn learning_rate_fixed(&self) -> u32 {
        ((self.learning_rate * 65536.0).round() as u32).clamp(1, 65536)
    }
}

/// The result of one frame: label image and component table.
#[derive(Clone, Debug, PartialEq)]
pub struct CcaOutput {
    /// Packed `width x height` labels: 0 background, `1..=n` components in raster order.
    pub labels: Image<u32>,
    /// One row per component, label `i + 1` at index `i`.
    pub table: ComponentTable,
}

impl CcaOutput {
    /// Per-frame summary numbers for `frames.jsonl`.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        let fg: u64 = self.table.components.iter().map(|c| c.area).sum();
        let largest = self
            .table
            .components
            .iter()
            .map(|c| c.area)
            .max()
            .unwrap_or(0);
        serde_json::json!({
            "components": self.table.components.len(),
            "threshold": self.table.threshold,
            "foreground_pixels": fg,
            "largest_area": largest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_serde_round_trip_and_validate() {
        let p: CcaParams =
            serde_json::from_str(r#"{"threshold": 40, "polarity": "dark", "connectivity": 4}"#)
                .unwrap();
        assert_eq!(p.threshold, Threshold::Fixed(40));
        assert_eq!(p.polarity, Polarity::Dark);
        assert_eq!(p.conn(), Connectivity::Four);
        assert_eq!(p.source, Source::Frame);
        p.validate().unwrap();
        let q: CcaParams =
            serde_json::from_str(r#"{"threshold": "otsu", "source": "motion"}"#).unwrap();
        assert_eq!(q.threshold, Threshold::Otsu);
        let back: CcaParams = serde_json::from_str(&serde_json::to_string(&q).unwrap()).unwrap();
        assert_eq!(back, q);
        assert!(serde_json::from_str::<CcaParams>(r#"{"threshold": "median"}"#).is_err());
        assert!(serde_json::from_str::<CcaParams>(r#"{"thresh": 3}"#).is_err());
        let bad = CcaParams {
            connectivity: 6,
            ..CcaParams::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("connectivity")
        );
        let bad = CcaParams {
            learning_rate: 0.0,
            ..CcaParams::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("learning_rate")
        );
        assert_eq!("otsu".parse::<Threshold>().unwrap(), Threshold::Otsu);
        assert_eq!("17".parse::<Threshold>().unwrap(), Threshold::Fixed(17));
        assert!("x".parse::<Threshold>().is_err());
        assert_eq!(
            CcaParams {
                learning_rate: 1.0,
                ..CcaParams::default()
            }
            .learning_rate_fixed(),
            65536
        );
        assert_eq!(CcaParams::default().learning_rate_fixed(), 3277);
    }
}
