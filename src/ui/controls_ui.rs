//! The controls side panel's parts: the source picker (file, camera, test pattern, URI, pipeline),
//! the layer list (toggle, opacity, legend, numbers of each op), and the settings file row
//! (path, save, load). The analyses' parameters are drawn by [`super::settings_form`].
//!
//! These functions draw and return what the user asked for; the app acts on it (opening a source
//! starts a pipeline on a helper thread, a settings change is sent to the worker).

use eframe::egui::{self, RichText};

use super::layers::{self, Layers, ORIGINAL};
use crate::analysis::AnalysedFrame;
use crate::source::spec::TEST_PATTERNS;

/// Kinds of SOURCE the picker offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SourceKind {
    /// A video file.
    File,
    /// A V4L2 camera.
    Camera,
    /// A videotestsrc pattern.
    Test,
    /// A URI (rtsp, http, file).
    Uri,
    /// A GStreamer pipeline ending in `appsink name=sink`.
    Pipeline,
}

/// What the source picker asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PickerAction {
    /// Open this SOURCE string.
    Open(String),
    /// Show the file dialog.
    Browse,
}

/// The source picker's fields.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct SourcePicker {
    /// Selected kind.
    pub kind: SourceKind,
    /// File path.
    pub file: String,
    /// Camera index.
    pub camera: u32,
    /// Test pattern.
    pub pattern: String,
    /// URI.
    pub uri: String,
    /// Pipeline description.
    pub pipeline: String,
}

impl SourcePicker {
    /// Fields prefilled from a SOURCE string.
    #[must_use]
    pub(crate) fn from_source(s: &str) -> Self {
        let mut p = Self {
            kind: SourceKind::File,
            file: String::new(),
            camera: 0,
            pattern: "ball".into(),
            uri: "rtsp://".into(),
            pipeline: "videotestsrc pattern=ball ! appsink name=sink".into(),
        };
        p.set_from(s);
        p
    }

    /// Selects the kind and field matching `s`.
    pub(crate) fn set_from(&mut self, s: &str) {
        let s = s.trim();
        if s.contains('!') {
            self.kind = SourceKind::Pipeline;
            self.pipeline = s.to_owned();
        } else if s == "test" {
            self.kind = SourceKind::Test;
            self.pattern = "smpte".into();
        } else if let Some(p) = s.strip_prefix("test:") {
            self.kind = SourceKind::Test;
            self.pattern = p.to_owned();
        } else if s == "camera" || s.starts_with("camera:") {
            self.kind = SourceKind::Camera;
            self.camera = s
                .strip_prefix("camera:")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        } else if s.contains("://") {
            self.kind = SourceKind::Uri;
            self.uri = s.to_owned();
        } else {
            self.kind = SourceKind::File;
            self.file = s.to_owned();
        }
    }

    /// The SOURCE string of the current kind.
    #[must_use]
    pub fn source(&self) -> String {
        match self.kind {
            SourceKind::File => self.file.trim().to_owned(),
            SourceKind::Camera => format!("camera:{}", self.camera),
            SourceKind::Test => format!("test:{}", self.pattern),
            SourceKind::Uri => self.uri.trim().to_owned(),
            SourceKind::Pipeline => self.pipeline.trim().to_owned(),
        }
    }

    /// Draws the picker (ids salted with `salt`, so it can appear twice in a frame).
    pub fn ui(&mut self, ui: &mut egui::Ui, salt: &str) -> Option<PickerAction> {
        let mut action = None;
        ui.push_id(salt, |ui| {
            ui.horizontal_wrapped(|ui| {
                for (k, name) in [
                    (SourceKind::File, "file"),
                    (SourceKind::Camera, "camera"),
                    (SourceKind::Test, "test"),
                    (SourceKind::Uri, "URI"),
                    (SourceKind::Pipeline, "pipeline"),
                ] {
                    ui.selectable_value(&mut self.kind, k, name);
                }
            });
            let mut enter = false;
            ui.horizontal(|ui| match self.kind {
                SourceKind::File => {
                    let l = ui.label("path");
                    let r = ui
                        .add(
                            egui::TextEdit::singleline(&mut self.file)
                                .desired_width(150.0)
                                .hint_text("video file"),
                        )
                        .labelled_by(l.id);
                    enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if ui.button("Browse").on_hover_text("choose a file").clicked() {
                        action = Some(PickerAction::Browse);
                    }
                }
                SourceKind::Camera => {
                    let l = ui.label("/dev/video");
                    ui.add(egui::DragValue::new(&mut self.camera).range(0..=63))
                        .labelled_by(l.id);
                }
                SourceKind::Test => {
                    let l = ui.label("pattern");
                    egui::ComboBox::from_id_salt("pattern")
                        .selected_text(self.pattern.as_str())
                        .height(240.0)
                        .show_ui(ui, |ui| {
                            for p in TEST_PATTERNS {
                                ui.selectable_value(&mut self.pattern, (*p).to_owned(), *p);
                            }
                        })
                        .response
                        .labelled_by(l.id);
                }
                SourceKind::Uri => {
                    let l = ui.label("URI");
                    let r = ui
                        .add(
                            egui::TextEdit::singleline(&mut self.uri)
                                .desired_width(180.0)
                                .hint_text("rtsp://host/path"),
                        )
                        .labelled_by(l.id);
                    enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                }
                SourceKind::Pipeline => {
                    let l = ui.label("pipeline");
                    let r = ui
                        .add(
                            egui::TextEdit::singleline(&mut self.pipeline)
                                .desired_width(180.0)
                                .hint_text("… ! appsink name=sink"),
                        )
                        .labelled_by(l.id);
                    enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                }
            });
            if ui
                .button("Open")
                .on_hover_text(format!("open {}", self.source()))
                .clicked()
                || enter
            {
                action = Some(PickerAction::Open(self.source()));
            }
        });
        action
    }
}

/// Summary numbers of an op as `key value · key value` (arrays shortened to their length).
#[must_use]
pub(crate) fn summary_line(v: &serde_json::Value) -> String {
    fn one(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() => format!("{f:.3}"),
                _ => n.to_string(),
            },
            serde_json::Value::String(s) if s.chars().count() > 40 => {
                format!("{}…", s.chars().take(40).collect::<String>())
            }
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a)
                if a.len() <= 4 && a.iter().all(|x| !x.is_array() && !x.is_object()) =>
            {
                format!("[{}]", a.iter().map(one).collect::<Vec<_>>().join(", "))
            }
            serde_json::Value::Array(a) => format!("[{} values]", a.len()),
            serde_json::Value::Object(m) => format!("{{{} keys}}", m.len()),
            other => other.to_string(),
        }
    }
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k} {}", one(v)))
            .collect::<Vec<_>>()
            .join(" · "),
        serde_json::Value::Null => String::new(),
        other => one(other),
    }
}

/// The layer list: per layer a numbered toggle (keys 1-9), an opacity slider, the legend and the
/// op's numbers; then the numbers of ops that draw nothing.
pub(crate) fn layers_ui(ui: &mut egui::Ui, layers: &mut Layers, frame: Option<&AnalysedFrame>) {
    if layers.states.len() <= 1 && frame.is_none() {
        ui.label(RichText::new("Layers appear with the first analysed frame.").weak());
    }
    for (i, st) in layers.states.iter_mut().enumerate() {
        let output = frame.and_then(|f| f.output(&st.key));
        let present = st.key == ORIGINAL || output.is_some();
        ui.push_id(&st.key, |ui| {
            let name = format!("{} {}", i + 1, layers::title(&st.key));
            let text = if present { RichText::new(name).strong() } else { RichText::new(name).weak() };
            let tip = if i < 9 { format!("show or hide (key {})", i + 1) } else { "show or hide".to_owned() };
            ui.checkbox(&mut st.visible, text).on_hover_text(tip);
            ui.indent("legend", |ui| {
                ui.horizontal(|ui| {
                    ui.add_enabled(st.visible, egui::Slider::new(&mut st.opacity, 0.0..=1.0).text("opacity").fixed_decimals(2));
                    if st.key != ORIGINAL && output.and_then(layers::raster_kind).is_some() {
                        ui.toggle_value(&mut st.add, "add")
                            .on_hover_text("additive blending: the picture's colours are added to the frame (black adds nothing); off: mixed by opacity");
                    }
                });
                ui.label(RichText::new(layers::legend_text(&st.key, output)).small().weak());
                if layers::has_hue_legend(&st.key) {
                    layers::hue_legend_ui(ui);
                }
                if let Some(o) = output {
                    let line = summary_line(&o.summary);
                    if !line.is_empty() {
                        ui.label(small_mono(line));
                    }
                }
            });
            ui.add_space(2.0);
        });
    }
    if let Some(f) = frame {
        let quiet: Vec<_> = f.outputs.iter().filter(|o| !layers::draws(o)).collect();
        if !quiet.is_empty() {
            ui.add_space(2.0);
            for o in quiet {
                ui.label(small_mono(format!(
                    "{}: {}",
                    o.op,
                    summary_line(&o.summary)
                )));
            }
        }
    }
}

/// Small monospace text (numbers).
fn small_mono(s: String) -> RichText {
    RichText::new(s).small().family(egui::FontFamily::Monospace)
}

/// What the settings-file row asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FileAction {
    /// Write the settings to the path.
    Save,
    /// Read settings from the path.
    Load,
    /// Every analysis back to its defaults.
    ResetAll,
}

/// Path field with Save / Load / Reset buttons.
pub(crate) fn settings_file_ui(ui: &mut egui::Ui, path: &mut String) -> Option<FileAction> {
    let mut action = None;
    ui.horizontal(|ui| {
        let l = ui.label("file");
        ui.add(
            egui::TextEdit::singleline(path)
                .desired_width(160.0)
                .hint_text("settings.toml"),
        )
        .labelled_by(l.id);
    });
    ui.horizontal(|ui| {
        if ui
            .button("Save")
            .on_hover_text("write every setting as TOML (load it with --config FILE)")
            .clicked()
        {
            action = Some(FileAction::Save);
        }
        if ui
            .button("Load")
            .on_hover_text("read settings from the file and apply them")
            .clicked()
        {
            action = Some(FileAction::Load);
        }
        if ui
            .button("Reset all")
            .on_hover_text("every analysis back to its defaults")
            .clicked()
        {
            action = Some(FileAction::ResetAll);
        }
    });
    action
}
