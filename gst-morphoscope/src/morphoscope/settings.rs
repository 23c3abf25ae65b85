//! The element's user settings (its properties), kept apart from the negotiated stream state.
//! The analyses' settings are morphoscope's own (`morphoscope::config::Settings`): the `config`
//! property names a TOML file in the format of `morphoscope --config`, and every analysis
//! property the user set overrides one key of it, exactly as `--set section.key=value` does.
//! A property never set leaves the file's (or the built-in) value alone; its default shown by
//! `gst-inspect-1.0` is the built-in one (`config/default.toml`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use gstreamer::prelude::*;

use morphoscope::analysis::{ANALYSES, Property, PropertyKind};

use super::{BackendChoice, QosPolicy};

/// The ring size, the one pipeline setting with a property.
static RING_SIZE: Property = Property {
    name: "ring-size",
    key: "pipeline.ring_size",
    blurb: "Frames in flight (slots of the ring of CUDA streams); behind a live source the element delays its output by this many frames",
    kind: PropertyKind::UInt {
        min: 1,
        max: 8,
        default: 3,
    },
};

/// Every property that overrides one settings key: the ring size, then each analysis' own
/// (from its descriptor; their defaults are those of `config/default.toml`).
pub(super) fn key_properties() -> impl Iterator<Item = &'static Property> {
    std::iter::once(&RING_SIZE).chain(ANALYSES.iter().flat_map(|d| d.properties))
}

/// The settings-key property named `name`.
pub(super) fn key_property(name: &str) -> Option<&'static Property> {
    key_properties().find(|p| p.name == name)
}

/// The spec of property `p`: settable in every state (the ring size only before the stream
/// starts: it sizes the ring).
pub(super) fn spec(p: &Property) -> glib::ParamSpec {
    if p.key == RING_SIZE.key
        && let PropertyKind::UInt { min, max, default } = p.kind
    {
        return glib::ParamSpecUInt::builder(p.name)
            .blurb(p.blurb)
            .minimum(min)
            .maximum(max)
            .default_value(default)
            .mutable_ready()
            .build();
    }
    match p.kind {
        PropertyKind::Bool(d) => glib::ParamSpecBoolean::builder(p.name)
            .blurb(p.blurb)
            .default_value(d)
            .mutable_playing()
            .build(),
        PropertyKind::UInt { min, max, default } => glib::ParamSpecUInt::builder(p.name)
            .blurb(p.blurb)
            .minimum(min)
            .maximum(max)
            .default_value(default)
            .mutable_playing()
            .build(),
        PropertyKind::Double { min, max, default } => glib::ParamSpecDouble::builder(p.name)
            .blurb(p.blurb)
            .minimum(min)
            .maximum(max)
            .default_value(default)
            .mutable_playing()
            .build(),
        PropertyKind::Text(d) => glib::ParamSpecString::builder(p.name)
            .blurb(p.blurb)
            .default_value(Some(d))
            .mutable_playing()
            .build(),
    }
}

/// The element's settings (properties).
#[derive(Clone, Debug)]
pub(super) struct Settings {
    /// A TOML settings file (`morphoscope --config` format).
    pub config: Option<PathBuf>,
    /// Compute backend, when set (else the file's).
    pub backend: Option<BackendChoice>,
    /// CUDA device ordinal, when set (else the file's).
    pub device: Option<u32>,
    /// Draw the overlays into the outgoing frames (RGB out).
    pub draw: bool,
    /// What happens to late frames.
    pub qos: QosPolicy,
    /// Analysis properties set by the user: property name -> value.
    pub overrides: BTreeMap<&'static str, PropValue>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            config: None,
            backend: None,
            device: None,
            draw: false,
            qos: QosPolicy::Analyse,
            overrides: BTreeMap::new(),
        }
    }
}

impl Settings {
    /// The engine's settings: defaults, the file, then each property set (as `--set`).
    pub(super) fn engine_settings(
        &self,
    ) -> Result<morphoscope::config::Settings, morphoscope::config::ConfigError> {
        let mut sets: Vec<String> = key_properties()
            .filter_map(|p| {
                self.overrides
                    .get(p.name)
                    .map(|v| format!("{}={}", p.key, v.text()))
            })
            .collect();
        if let Some(b) = self.backend {
            sets.push(format!("pipeline.backend={}", b.config_word()));
        }
        if let Some(d) = self.device {
            sets.push(format!("pipeline.device={d}"));
        }
        morphoscope::config::Settings::load(self.config.as_deref(), &sets).map_err(named_property)
    }

    /// The value of analysis property `p`: the one set, else its built-in default.
    pub(super) fn key_value(&self, p: &Property, spec: &glib::ParamSpec) -> glib::Value {
        self.overrides
            .get(p.name)
            .map_or_else(|| spec.default_value().clone(), PropValue::to_value)
    }
}

/// `e` naming the property the user set rather than the settings key it overrides
/// (`property cca-threshold=abc`, not `--set cca.threshold=abc`); errors of the file unchanged.
fn named_property(e: morphoscope::config::ConfigError) -> morphoscope::config::ConfigError {
    use morphoscope::config::ConfigError;
    let (key, value, message) = match &e {
        ConfigError::SetValue {
            key,
            value,
            message,
        } => (key, Some(value), message),
        ConfigError::Range { key, message } => (key, None, message),
        _ => return e,
    };
    let Some(p) = key_properties().find(|p| p.key == key) else {
        return e;
    };
    ConfigError::Named {
        what: match value {
            Some(v) => format!("property {}={v}", p.name),
            None => format!("property {} ({key})", p.name),
        },
        message: message.clone(),
    }
}

/// The value of an analysis property (a plain value: settings cross threads).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum PropValue {
    /// A boolean property.
    Bool(bool),
    /// An unsigned integer property.
    UInt(u32),
    /// A double property.
    Double(f64),
    /// A string property.
    Text(String),
}

impl PropValue {
    /// The value of a property of kind `kind`.
    pub(super) fn from_value(kind: PropertyKind, v: &glib::Value) -> Option<Self> {
        match kind {
            PropertyKind::Bool(_) => v.get::<bool>().ok().map(Self::Bool),
            PropertyKind::UInt { .. } => v.get::<u32>().ok().map(Self::UInt),
            PropertyKind::Double { .. } => v.get::<f64>().ok().map(Self::Double),
            PropertyKind::Text(_) => v
                .get::<Option<String>>()
                .ok()
                .flatten()
                .map(|s| Self::Text(s.trim().to_owned())),
        }
    }

    /// As a GLib value.
    pub(super) fn to_value(&self) -> glib::Value {
        match self {
            Self::Bool(b) => b.to_value(),
            Self::UInt(u) => u.to_value(),
            Self::Double(d) => d.to_value(),
            Self::Text(t) => t.to_value(),
        }
    }

    /// As the right-hand side of `section.key=value`.
    fn text(&self) -> String {
        match self {
            Self::Bool(b) => b.to_string(),
            Self::UInt(u) => u.to_string(),
            // `{:?}` keeps the decimal point ("64.0"): TOML reads it as a float.
            Self::Double(d) => format!("{d:?}"),
            Self::Text(t) => t.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_set_override_their_key_and_the_others_keep_the_defaults() {
        gstreamer::init().unwrap();
        let mut s = Settings {
            backend: Some(BackendChoice::Cpu),
            ..Settings::default()
        };
        s.overrides
            .insert("maxtree-threshold", PropValue::Double(100.0));
        s.overrides
            .insert("cca-threshold", PropValue::Text("otsu".into()));
        s.overrides.insert("segmentation", PropValue::Bool(false));
        s.overrides.insert("ring-size", PropValue::UInt(5));
        let e = s.engine_settings().unwrap();
        assert_eq!(e.ops.maxtree.threshold, 100.0);
        assert!(!e.ops.segmentation.enabled);
        assert_eq!(e.pipeline.ring_size, 5);
        assert_eq!(e.pipeline.backend, morphoscope::config::BackendChoice::Cpu);
        let defaults = morphoscope::config::Settings::load(None, &[]).unwrap();
        assert_eq!(e.ops.orientation, defaults.ops.orientation);
        assert_ne!(
            format!("{:?}", e.ops.cca.threshold),
            format!("{:?}", defaults.ops.cca.threshold)
        );
    }

    #[test]
    fn a_bad_value_is_named_by_its_property() {
        gstreamer::init().unwrap();
        let mut s = Settings::default();
        s.overrides
            .insert("cca-threshold", PropValue::Text("abc".into()));
        let e = s.engine_settings().unwrap_err().to_string();
        assert!(
            e.contains("property cca-threshold=abc") && !e.contains("--set"),
            "{e}"
        );
        let mut s = Settings::default();
        s.overrides
            .insert("orientation-length", PropValue::UInt(30));
        // A value of the right type that the analysis refuses: the key and the value are named.
        let e = s.engine_settings().unwrap_err().to_string();
        assert!(e.contains("length = 30") && !e.contains("--set"), "{e}");
    }

    #[test]
    fn every_built_in_default_shown_equals_the_settings_file_default() {
        gstreamer::init().unwrap();
        // Setting every property to the default gst-inspect shows must change nothing.
        let mut s = Settings::default();
        for p in key_properties() {
            s.overrides.insert(
                p.name,
                PropValue::from_value(p.kind, spec(p).default_value()).unwrap(),
            );
        }
        let e = s.engine_settings().unwrap();
        let defaults = morphoscope::config::Settings::load(None, &[]).unwrap();
        assert_eq!(e, defaults);
    }
}
