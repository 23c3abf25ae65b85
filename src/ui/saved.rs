//! What the viewer keeps between runs (eframe storage, `persistence` feature): the analyses'
//! settings as TOML (restored only when they still fit this version's schema), layer
//! toggles/opacities, the source picker, recent sources, panel visibility, the settings file
//! path. eframe keeps the window geometry itself.

use super::controls_ui::SourcePicker;
use super::layers::LayerState;
use super::spectrum_ui::SpectrumStyle;
use crate::analysis::OpSettings;

/// Storage key of [`Saved`].
pub(super) const STORAGE_KEY: &str = "morphoscope-viewer";

/// Which panels are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Panels {
    /// Left: source, layers, analyses.
    pub controls: bool,
    /// Right: tracks and spectrum.
    pub inspect: bool,
    /// Bottom: timings.
    pub timings: bool,
}

impl Default for Panels {
    fn default() -> Self {
        Self {
            controls: true,
            inspect: true,
            timings: true,
        }
    }
}

/// What persists between runs (besides the window, which eframe keeps).
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(super) struct Saved {
    pub(super) ops_toml: Option<String>,
    pub(super) layers: Vec<LayerState>,
    pub(super) picker: Option<SourcePicker>,
    pub(super) recent: Vec<String>,
    pub(super) panels: Panels,
    pub(super) settings_path: String,
    pub(super) spectrum_style: SpectrumStyle,
    pub(super) loop_playback: bool,
}

/// Analysis settings saved when the viewer last closed, if they still fit this version's schema.
pub(super) fn restore_ops(text: &str) -> Option<OpSettings> {
    match toml::from_str::<OpSettings>(text) {
        Ok(ops) if ops.validate().is_ok() => Some(ops),
        Ok(_) | Err(_) => {
            log::info!("viewer: saved settings do not fit this version; using the defaults");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn saved_settings_are_restored_only_when_they_fit() {
        let mut ops = Settings::defaults().unwrap().ops;
        ops.preprocess.enabled = false;
        let text = toml::to_string(&ops).unwrap();
        assert_eq!(restore_ops(&text), Some(ops));
        assert_eq!(restore_ops("[no_such_analysis]\nx = 1\n"), None);
        assert_eq!(restore_ops("not toml ["), None);
    }
}
