//! The element's properties: the element-wide ones (`config`, `backend`, `device`, `draw`,
//! `qos`, the `dropped` counter) and the analysis ones of the settings module, each with
//! its doc and range for `gst-inspect-1.0`; and the pads, added once the object is built.

use super::*;

impl ObjectImpl for Morphoscope {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let mut p = vec![
                glib::ParamSpecString::builder("config")
                    .blurb("A TOML settings file in the format of `morphoscope --config` (a partial file is fine); the analysis properties set override its keys")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("backend", BackendChoice::Auto)
                    .blurb("Compute backend (when not set: the settings file's pipeline.backend)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("device")
                    .blurb("CUDA device ordinal (when not set: the settings file's pipeline.device)")
                    .minimum(0)
                    .maximum(63)
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("draw")
                    .blurb("Draw the overlays into the outgoing frames (RGB out, as morphoscope run's overlay video); else frames pass untouched")
                    .default_value(false)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("qos", QosPolicy::Analyse)
                    .blurb("Late frames (downstream QoS) and frames arriving while the ring is full: analysed, or dropped and counted")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt64::builder("dropped").blurb("Frames dropped so far (qos=drop)").read_only().build(),
            ];
            p.extend(
                crate::morphoscope::settings::key_properties()
                    .map(crate::morphoscope::settings::spec),
            );
            p
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut s = lock(&self.settings);
        match pspec.name() {
            "config" => {
                s.config = value
                    .get::<Option<String>>()
                    .ok()
                    .flatten()
                    .filter(|p| !p.is_empty())
                    .map(Into::into)
            }
            "backend" => s.backend = value.get::<BackendChoice>().ok(),
            "device" => s.device = value.get::<u32>().ok(),
            "draw" => s.draw = value.get::<bool>().unwrap_or(false),
            "qos" => s.qos = value.get::<QosPolicy>().unwrap_or(QosPolicy::Analyse),
            name => {
                if let Some(p) = key_property(name)
                    && let Some(v) = PropValue::from_value(p.kind, value)
                {
                    s.overrides.insert(p.name, v);
                    self.settings_changed.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        let s = lock(&self.settings);
        match pspec.name() {
            "config" => s
                .config
                .as_ref()
                .map(|p| p.display().to_string())
                .to_value(),
            "backend" => s.backend.unwrap_or(BackendChoice::Auto).to_value(),
            "device" => s.device.unwrap_or(0).to_value(),
            "draw" => s.draw.to_value(),
            "qos" => s.qos.to_value(),
            "dropped" => self.dropped.load(Ordering::Relaxed).to_value(),
            name => match key_property(name) {
                Some(p) => s.key_value(p, pspec),
                None => pspec.default_value().clone(),
            },
        }
    }

    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        if obj.add_pad(&self.sinkpad).is_err() || obj.add_pad(&self.srcpad).is_err() {
            gst::error!(CAT, imp = self, "cannot add the pads");
        }
    }
}
