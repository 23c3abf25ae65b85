//! The viewer app: state, layout, keyboard, persistence.
//!
//! Layout: a toolbar (play/pause, step, restart, zoom, panel toggles), the controls on the left
//! (source, layers, analyses), tracks and spectrum on the right, timings at the bottom, a status
//! line under everything (pixel under the pointer, last error, keys), the video in the middle.
//! Each repaint: keyboard → poll the link (newest frame, end, error) → the picture's texture → panels.
//!
//! Errors (a source that fails, a camera that goes away, an analysis error) open a modal once,
//! with the message and a source picker; closing it leaves the last frame on screen and the
//! message in the status line. The app keeps running whatever the pipeline does.
//!
//! Persistence (eframe storage, `persistence` feature): window geometry (eframe), the analyses'
//! settings as TOML (restored unless `--config`/`--set` were given), layer toggles/opacities,
//! the source picker, recent sources, panel visibility, the settings file path.

use std::time::Duration;

use eframe::egui::{self, Key, Modifiers, RichText};

use super::ViewerOptions;
use super::controls_ui::{self, FileAction, PickerAction, SourcePicker};
use super::layers::{LayerState, Layers};
use super::link::{Link, TestLink};
use super::picture::PictureView;
pub use super::saved::Panels;
use super::saved::{STORAGE_KEY, Saved, restore_ops};
use super::settings_form::SettingsForm;
use super::spectrum_ui::{self, SpectrumStyle};
use super::timings_ui::{self, Counts, TimingsHistory};
use super::tracks_ui;
use super::video_ui::{self, VideoView};
use crate::analysis::{AnalysedFrame, OpSettings};
use crate::compose::ComposeStyle;
use crate::config::{DEFAULT_TOML, Settings};
use crate::pipeline::Command;
use crate::source::SourceSpec;

/// The viewer (see the module docs).
pub struct ViewerApp {
    settings: Settings,
    defaults: Settings,
    form: SettingsForm,
    link: Link,
    source: String,
    picker: SourcePicker,
    file_dialog: Option<egui_file::FileDialog>,
    frame: Option<AnalysedFrame>,
    frame_seq: u64,
    picture: PictureView,
    layers: Layers,
    /// The layer styles last sent to the pipeline.
    sent_style: Option<ComposeStyle>,
    video: VideoView,
    timings: TimingsHistory,
    selected_track: Option<u64>,
    spectrum_style: SpectrumStyle,
    error: Option<String>,
    last_error: Option<String>,
    notice: Option<String>,
    paused: bool,
    ended: bool,
    panels: Panels,
    settings_path: String,
    recent: Vec<String>,
    quit_after_secs: Option<f64>,
    loop_playback: bool,
}

impl ViewerApp {
    fn with_parts(settings: Settings, link: Link, source: String, saved: Saved) -> Self {
        let defaults = Settings::defaults().unwrap_or_default();
        let form =
            SettingsForm::new::<OpSettings>("ops", &settings.ops, &defaults.ops, DEFAULT_TOML);
        let picker = saved
            .picker
            .unwrap_or_else(|| SourcePicker::from_source(&source));
        Self {
            settings,
            defaults,
            form,
            link,
            source,
            picker,
            file_dialog: None,
            frame: None,
            frame_seq: 0,
            picture: PictureView::default(),
            layers: Layers::from_saved(saved.layers),
            sent_style: None,
            video: VideoView::default(),
            timings: TimingsHistory::default(),
            selected_track: None,
            spectrum_style: saved.spectrum_style,
            error: None,
            last_error: None,
            notice: None,
            paused: false,
            ended: false,
            panels: saved.panels,
            settings_path: if saved.settings_path.is_empty() {
                "morphoscope.toml".into()
            } else {
                saved.settings_path
            },
            recent: saved.recent,
            quit_after_secs: None,
            loop_playback: saved.loop_playback,
        }
    }

    /// The app of a real window: restores what the viewer saved when it last closed and opens
    /// `opts.source`.
    pub fn new(cc: &eframe::CreationContext<'_>, opts: ViewerOptions) -> Self {
        let saved: Saved = cc
            .storage
            .and_then(|s| eframe::get_value(s, STORAGE_KEY))
            .unwrap_or_default();
        let mut settings = opts.settings;
        if !opts.settings_explicit
            && let Some(ops) = saved.ops_toml.as_deref().and_then(restore_ops)
        {
            log::info!(
                "viewer: analysis settings restored from when the viewer last closed (--config or --set to override)"
            );
            settings.ops = ops;
        }
        let mut app = Self::with_parts(
            settings,
            Link::new(opts.backend),
            opts.source.clone(),
            saved,
        );
        app.picker.set_from(&opts.source);
        app.quit_after_secs = opts.quit_after_secs;
        app.open_source(&opts.source, &cc.egui_ctx);
        app
    }

    /// An app without a pipeline, for tests and demos: frames, events and counters come from the
    /// returned [`TestLink`], and the commands the app sends go to it.
    #[must_use]
    pub fn detached(settings: Settings, source: &str, backend_label: &str) -> (Self, TestLink) {
        let (link, test_link) = Link::detached(backend_label);
        let app = Self::with_parts(settings, link, source.to_owned(), Saved::default());
        (app, test_link)
    }

    /// Shows `f` as if it had just arrived from the worker: its tables at once, its picture (when
    /// it has one; else the last picture stays) from the next repaint.
    pub(crate) fn show_frame(&mut self, f: AnalysedFrame, now: f64) {
        self.frame_seq += 1;
        self.layers.discover(&f.outputs);
        if let Some(p) = &f.picture {
            self.picture.set(p.clone());
        }
        self.timings.push(self.frame_seq, &f.timings, now);
        self.frame = Some(f);
    }

    /// Takes this stream's newest frame and uploads its picture (what [`Self::show`] does before
    /// drawing): the grid of several streams calls it for the streams it does not show.
    pub(crate) fn poll_frames(&mut self, ctx: &egui::Context) {
        let now = ctx.input(|i| i.time);
        self.poll(ctx, now);
    }

    /// One cell of the grid of several streams ([`super::grid`]): takes the newest frame and
    /// draws its picture fitted into the space `ui` has, the source and counts over its foot.
    /// True when the cell was clicked.
    pub(crate) fn tile_ui(&mut self, ui: &mut egui::Ui) -> bool {
        self.poll_frames(ui.ctx());
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), egui::Sense::click());
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 0.0, egui::Color32::BLACK);
        match (self.picture.texture(), self.picture.shown()) {
            (Some(t), Some(p)) if p.width > 0 && p.height > 0 => {
                let scale = (rect.width() / p.width as f32).min(rect.height() / p.height as f32);
                let fit = egui::Rect::from_center_size(
                    rect.center(),
                    egui::vec2(p.width as f32, p.height as f32) * scale,
                );
                let uv = egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0));
                painter.image(t.id(), fit, uv, egui::Color32::WHITE);
            }
            _ => {
                let waiting = match (self.link.opening(), &self.last_error) {
                    (Some(_), _) => "opening…",
                    (None, Some(_)) => "error: click to see it",
                    (None, None) => "waiting for frames…",
                };
                painter.text(
                    rect.center(),
                    egui::Align2::CENTER_CENTER,
                    waiting,
                    egui::FontId::proportional(14.0),
                    egui::Color32::GRAY,
                );
            }
        }
        let (_, out, dropped, _) = self.link.counts();
        let caption = format!("{} · {out} frames · {dropped} dropped", self.source);
        let at = rect.left_bottom() + egui::vec2(6.0, -6.0);
        let galley = painter.layout_no_wrap(
            caption,
            egui::FontId::proportional(13.0),
            egui::Color32::WHITE,
        );
        let back = egui::Rect::from_min_size(
            at - egui::vec2(3.0, galley.size().y + 1.0),
            galley.size() + egui::vec2(6.0, 2.0),
        );
        painter.rect_filled(back, 3.0, egui::Color32::from_black_alpha(160));
        painter.galley(
            at - egui::vec2(0.0, galley.size().y),
            galley,
            egui::Color32::WHITE,
        );
        if resp.hovered() {
            painter.rect_stroke(
                rect.shrink(1.0),
                0.0,
                egui::Stroke::new(2.0, egui::Color32::from_rgb(255, 230, 0)),
                egui::StrokeKind::Inside,
            );
        }
        resp.on_hover_text("click to focus this stream").clicked()
    }

    /// Current settings (with the live edits).
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The picture on screen (the newest composed picture received), if any.
    #[must_use]
    pub fn picture(&self) -> Option<&crate::compose::Picture> {
        self.picture.shown()
    }

    /// Layer toggles and opacities.
    #[must_use]
    pub fn layers(&self) -> &[LayerState] {
        &self.layers.states
    }

    /// The highlighted track.
    #[must_use]
    pub fn selected_track(&self) -> Option<u64> {
        self.selected_track
    }

    /// The error modal's message, while it is open.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether the worker is paused.
    #[must_use]
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The current SOURCE (or the one last asked for).
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Zoom and pan.
    #[must_use]
    pub fn view(&self) -> &VideoView {
        &self.video
    }

    /// Sets the settings file path (as typing it would).
    pub fn set_settings_path(&mut self, p: &str) {
        p.clone_into(&mut self.settings_path);
    }

    fn open_source(&mut self, s: &str, ctx: &egui::Context) {
        let s = s.trim().to_owned();
        self.source.clone_from(&s);
        self.recent.retain(|r| *r != s);
        self.recent.insert(0, s.clone());
        self.recent.truncate(8);
        match SourceSpec::parse(&s) {
            Err(e) => self.report_error(format!("cannot open {s}: {e}")),
            Ok(spec) if self.link.can_open() => {
                self.error = None;
                self.ended = false;
                self.paused = false;
                let style = self.layers.compose_style();
                self.link.open(spec, &self.settings, &style, ctx);
                self.sent_style = Some(style);
            }
            Ok(_) => {
                self.error = None;
                self.notice = Some("detached viewer: no pipeline to open sources with".into());
            }
        }
    }

    fn report_error(&mut self, e: String) {
        log::error!("{e}");
        self.last_error = Some(e.clone());
        self.error = Some(e);
    }

    fn set_paused(&mut self, p: bool) {
        self.paused = p;
        self.link.send(Command::Pause(p));
    }

    fn step(&mut self) {
        if !self.paused {
            self.set_paused(true);
        }
        self.link.send(Command::Step);
    }

    fn apply_ops(&mut self, ops: OpSettings) {
        self.settings.ops = ops;
        self.link.send_settings(&self.settings.ops);
    }

    /// Sends the layer styles to the pipeline when they changed (a toggle, a slider): the
    /// pictures composed from then on use them.
    fn sync_style(&mut self) {
        let style = self.layers.compose_style();
        if self.sent_style.as_ref() != Some(&style) {
            self.link.send_style(&style);
            self.sent_style = Some(style);
        }
    }

    fn keyboard(&mut self, ui: &mut egui::Ui) {
        if ui.ctx().egui_wants_keyboard_input() {
            return;
        }
        let (space, right, f, nums, quit) = ui.input_mut(|i| {
            let nums: Vec<usize> = [
                Key::Num1,
                Key::Num2,
                Key::Num3,
                Key::Num4,
                Key::Num5,
                Key::Num6,
                Key::Num7,
                Key::Num8,
                Key::Num9,
            ]
            .iter()
            .enumerate()
            .filter(|(_, k)| i.consume_key(Modifiers::NONE, **k))
            .map(|(n, _)| n + 1)
            .collect();
            (
                i.consume_key(Modifiers::NONE, Key::Space),
                i.consume_key(Modifiers::NONE, Key::ArrowRight),
                i.consume_key(Modifiers::NONE, Key::F),
                nums,
                i.consume_key(Modifiers::COMMAND, Key::Q),
            )
        });
        if space {
            self.set_paused(!self.paused);
        }
        if right {
            self.step();
        }
        if f {
            self.video.fit = true;
        }
        for n in nums {
            self.layers.toggle_nth(n);
        }
        if quit {
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    fn poll(&mut self, ctx: &egui::Context, now: f64) {
        let p = self.link.poll();
        if p.started {
            self.timings.clear();
            self.notice = None;
            self.last_error = None;
        }
        if let Some(f) = p.frame {
            self.show_frame(f, now);
        }
        if p.ended {
            self.ended = true;
            if self.loop_playback && p.error.is_none() && self.link.can_open() {
                let s = self.source.clone();
                self.open_source(&s, ctx);
            }
        }
        if let Some(e) = p.error {
            self.ended = true;
            self.report_error(e);
        }
        let (_, out, _, _) = self.link.counts();
        self.timings.tick(now, out);
        self.picture.upload(ctx);
    }

    fn counts(&self) -> Counts {
        let (frames_in, frames_out, dropped, not_shown) = self.link.counts();
        Counts {
            frames_in,
            frames_out,
            dropped,
            not_shown,
        }
    }

    fn state_text(&self) -> String {
        if let Some(s) = self.link.opening() {
            return format!("opening {s}…");
        }
        if self.link.reconnecting() {
            return "reconnecting to the source…".into();
        }
        if self.ended {
            return if self.last_error.is_some() {
                "stopped (error)".into()
            } else {
                "ended".into()
            };
        }
        if self.paused {
            "paused".into()
        } else {
            "playing".into()
        }
    }

    fn toolbar_ui(&mut self, ui: &mut egui::Ui, video_rect: Option<egui::Rect>) {
        ui.horizontal(|ui| {
            ui.label(RichText::new("morphoscope").strong());
            ui.separator();
            let (icon, tip) = if self.paused {
                ("▶ Play", "resume (space)")
            } else {
                ("⏸ Pause", "pause (space)")
            };
            if ui.button(icon).on_hover_text(tip).clicked() {
                let p = !self.paused;
                self.set_paused(p);
            }
            if ui
                .button("⏭ Step")
                .on_hover_text("analyse one more frame (right arrow)")
                .clicked()
            {
                self.step();
            }
            if ui
                .add_enabled(self.link.can_open(), egui::Button::new("⟲ Restart"))
                .on_hover_text("open the source again")
                .clicked()
            {
                let s = self.source.clone();
                self.open_source(&s, &ui.ctx().clone());
            }
            ui.toggle_value(&mut self.loop_playback, "loop")
                .on_hover_text("open the source again when it ends (files)");
            ui.separator();
            let frame_text = match &self.frame {
                Some(f) => format!("frame {}", f.index),
                None => "no frame".to_owned(),
            };
            ui.label(RichText::new(frame_text).monospace());
            ui.label(RichText::new(self.state_text()).weak());
            ui.separator();
            if ui
                .button("Fit")
                .on_hover_text("fit the frame to the view (f, or double-click)")
                .clicked()
            {
                self.video.fit = true;
            }
            if ui
                .button("1:1")
                .on_hover_text("one image pixel per screen pixel")
                .clicked()
                && let Some(r) = video_rect
            {
                self.video.actual_size(r);
            }
            ui.label(RichText::new(format!("{:.0}%", self.video.zoom * 100.0)).monospace())
                .on_hover_text("scroll to zoom, drag to pan");
            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                ui.toggle_value(&mut self.panels.timings, "timings");
                ui.toggle_value(&mut self.panels.inspect, "tracks · spectrum");
                ui.toggle_value(&mut self.panels.controls, "controls");
                ui.label(RichText::new(self.link.backend_label()).small().weak());
            });
        });
    }

    fn status_ui(&self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            match (self.video.hover_image_pos, &self.frame) {
                (Some(p), Some(f)) if p.x >= 0.0 && p.y >= 0.0 && (p.x as usize) < f.size().0 && (p.y as usize) < f.size().1 => {
                    let (x, y) = (p.x as usize, p.y as usize);
                    let mut s = format!("x {x:>4}  y {y:>4}");
                    if let Some(g) = &f.gray {
                        s.push_str(&format!("  grey {:>3}", g.get(x, y)));
                    }
                    // The frame's own colour where the host has it, else the picture's.
                    let rgb = match &f.rgb {
                        Some(rgb) => Some(("rgb", rgb.get(x, y))),
                        None => self.picture.rgb_at(x, y).map(|c| ("picture rgb", c)),
                    };
                    if let Some((name, c)) = rgb {
                        s.push_str(&format!("  {name} {:>3} {:>3} {:>3}", c[0], c[1], c[2]));
                    }
                    ui.label(RichText::new(s).monospace());
                }
                _ => {
                    ui.label(RichText::new("keys: space pause · right arrow step · f fit · 1-9 layers · scroll zoom · drag pan").weak());
                }
            }
            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                if let Some(e) = &self.last_error {
                    ui.label(RichText::new(format!("error: {e}")).color(ui.visuals().error_fg_color)).on_hover_text(e);
                } else if let Some(n) = &self.notice {
                    ui.label(RichText::new(n).weak());
                }
            });
        });
    }

    fn controls_ui(&mut self, ui: &mut egui::Ui) {
        egui::ScrollArea::vertical()
            .id_salt("controls_scroll")
            .show(ui, |ui| {
                egui::CollapsingHeader::new(RichText::new("Source").strong())
                    .default_open(true)
                    .show(ui, |ui| {
                        ui.label(RichText::new(&self.source).monospace())
                            .on_hover_text("current source");
                        ui.label(
                            RichText::new(format!(
                                "backend {} · device {}",
                                self.link.backend_label(),
                                self.settings.pipeline.device
                            ))
                            .small()
                            .weak(),
                        );
                        if let Some(a) = self.picker.ui(ui, "side") {
                            self.picker_action(a, ui.ctx());
                        }
                        if self.recent.len() > 1 {
                            ui.horizontal_wrapped(|ui| {
                                ui.label(RichText::new("recent").small());
                                for r in self.recent.clone().iter().skip(1).take(4) {
                                    let short = r.rsplit('/').next().unwrap_or(r);
                                    if ui.small_button(short).on_hover_text(r).clicked() {
                                        self.picker.set_from(r);
                                        self.open_source(r, &ui.ctx().clone());
                                    }
                                }
                            });
                        }
                    });
                egui::CollapsingHeader::new(RichText::new("Layers").strong())
                    .default_open(true)
                    .show(ui, |ui| {
                        controls_ui::layers_ui(ui, &mut self.layers, self.frame.as_ref());
                    });
                egui::CollapsingHeader::new(RichText::new("Analyses").strong())
                    .default_open(true)
                    .show(ui, |ui| {
                        ui.label(
                            RichText::new("Changes apply from the next frame.")
                                .small()
                                .weak(),
                        );
                        if let Some(ops) = self.form.ui::<OpSettings>(ui, OpSettings::validate) {
                            self.apply_ops(ops);
                        }
                        ui.separator();
                        if let Some(a) = controls_ui::settings_file_ui(ui, &mut self.settings_path)
                        {
                            self.file_action(a);
                        }
                    });
            });
    }

    fn picker_action(&mut self, a: PickerAction, ctx: &egui::Context) {
        match a {
            PickerAction::Open(s) => self.open_source(&s, ctx),
            PickerAction::Browse => {
                let start = std::path::Path::new(&self.picker.file)
                    .parent()
                    .filter(|p| p.is_dir())
                    .map(std::path::Path::to_path_buf)
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_default();
                let mut d = egui_file::FileDialog::open_file()
                    .initial_path(start)
                    .title("Open a video");
                d.open();
                self.file_dialog = Some(d);
            }
        }
    }

    fn file_action(&mut self, a: FileAction) {
        match a {
            FileAction::Save => {
                let r = self
                    .settings
                    .to_toml()
                    .map_err(|e| e.to_string())
                    .and_then(|text| {
                        let header =
                            "# morphoscope settings saved by the viewer; use with --config FILE\n";
                        std::fs::write(&self.settings_path, format!("{header}{text}"))
                            .map_err(|e| e.to_string())
                    });
                match r {
                    Ok(()) => {
                        self.notice = Some(format!(
                            "settings saved to {} (use with --config)",
                            self.settings_path
                        ))
                    }
                    Err(e) => self.report_error(format!("cannot save {}: {e}", self.settings_path)),
                }
            }
            FileAction::Load => {
                match Settings::load(Some(std::path::Path::new(&self.settings_path)), &[]) {
                    Ok(s) => {
                        self.form.reset_from(&s.ops);
                        let ops = s.ops.clone();
                        self.settings = s;
                        self.apply_ops(ops);
                        self.notice = Some(format!("settings loaded from {}", self.settings_path));
                    }
                    Err(e) => self.report_error(e.to_string()),
                }
            }
            FileAction::ResetAll => {
                let ops = self.defaults.ops.clone();
                self.form.reset_from(&ops);
                self.apply_ops(ops);
                self.notice = Some("analyses reset to their defaults".into());
            }
        }
    }

    fn inspect_ui(&mut self, ui: &mut egui::Ui) {
        let h = ui.available_height();
        egui::CollapsingHeader::new(RichText::new("Tracks").strong())
            .default_open(true)
            .show(ui, |ui| {
                ui.set_max_height(h * 0.45);
                tracks_ui::tracks_ui(ui, self.frame.as_ref(), &mut self.selected_track);
            });
        egui::CollapsingHeader::new(RichText::new("Spectrum").strong())
            .default_open(true)
            .show(ui, |ui| {
                spectrum_ui::spectrum_ui(ui, self.frame.as_ref(), &mut self.spectrum_style);
            });
    }

    fn error_modal(&mut self, ctx: &egui::Context) {
        let Some(msg) = self.error.clone() else {
            return;
        };
        let mut close = false;
        let mut action = None;
        let r = egui::Modal::new(egui::Id::unique("error_modal")).show(ctx, |ui| {
            ui.set_max_width(520.0);
            ui.heading("⚠ Source or analysis failed");
            ui.add(egui::Label::new(RichText::new(&msg).monospace()).wrap());
            ui.label(
                RichText::new(
                    "The last frame stays on screen. Pick another source, or close this message.",
                )
                .weak(),
            );
            ui.separator();
            action = self.picker.ui(ui, "modal");
            ui.separator();
            if ui.button("Close").clicked() {
                close = true;
            }
        });
        if let Some(a) = action {
            self.picker_action(a, ctx);
        }
        if close || r.should_close() {
            self.error = None;
        }
    }

    fn dialogs(&mut self, ctx: &egui::Context) {
        let mut chosen = None;
        if let Some(d) = &mut self.file_dialog {
            if d.show(ctx).selected() {
                chosen = d.path().map(|p| p.display().to_string());
            }
            if !d.visible() {
                self.file_dialog = None;
            }
        }
        if let Some(p) = chosen {
            self.file_dialog = None;
            self.picker.file.clone_from(&p);
            self.open_source(&p, ctx);
        }
    }

    /// Draws the whole app into `ui` (the root `Ui` of the window or of a test harness).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        let now = ui.input(|i| i.time);
        self.keyboard(ui);
        self.poll(&ctx, now);

        let video_rect_id = egui::Id::unique("video_rect");
        let video_rect: Option<egui::Rect> = ctx.data(|d| d.get_temp(video_rect_id));
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui, video_rect));
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        if self.panels.controls {
            egui::Panel::left("controls")
                .resizable(true)
                .default_size(330.0)
                .min_size(240.0)
                .show(ui, |ui| self.controls_ui(ui));
        }
        if self.panels.inspect {
            egui::Panel::right("inspect")
                .resizable(true)
                .default_size(330.0)
                .min_size(220.0)
                .show(ui, |ui| self.inspect_ui(ui));
        }
        if self.panels.timings {
            egui::Panel::bottom("timings")
                .resizable(true)
                .default_size(240.0)
                .min_size(120.0)
                .show(ui, |ui| {
                    let counts = self.counts();
                    ui.columns(2, |cols| {
                        timings_ui::numbers_ui(&mut cols[0], &self.timings, counts, now);
                        timings_ui::history_ui(&mut cols[1], &self.timings);
                    });
                });
        }
        egui::CentralPanel::no_frame().show(ui, |ui| {
            ctx.data_mut(|d| d.insert_temp(video_rect_id, ui.available_rect_before_wrap()));
            let placeholder = match self.link.opening() {
                Some(s) => format!("opening {s}…"),
                None if self.last_error.is_some() => {
                    "no frame: see the error; pick another source on the left".to_owned()
                }
                None => format!("waiting for frames from {}…", self.source),
            };
            let r = video_ui::video_ui(
                ui,
                &mut self.video,
                self.frame.as_ref(),
                &self.picture,
                self.selected_track,
                &placeholder,
            );
            if let (Some(p), Some(f)) = (r.clicked, &self.frame) {
                self.selected_track = video_ui::track_at(f, p);
            }
        });
        self.error_modal(&ctx);
        self.dialogs(&ctx);
        self.sync_style();

        if let Some(q) = self.quit_after_secs {
            if now >= q {
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            } else {
                ctx.request_repaint_after(Duration::from_secs_f64((q - now).max(0.01)));
            }
        }
        if self.link.opening().is_some() || (!self.ended && !self.paused && self.link.can_open()) {
            // Keep the rates fresh; frames themselves wake the UI through the mailbox.
            ctx.request_repaint_after(Duration::from_millis(250));
        }
    }

    fn saved(&self) -> Saved {
        Saved {
            ops_toml: toml::to_string(&self.settings.ops).ok(),
            layers: self.layers.states.clone(),
            picker: Some(self.picker.clone()),
            recent: self.recent.clone(),
            panels: self.panels,
            settings_path: self.settings_path.clone(),
            spectrum_style: self.spectrum_style,
            loop_playback: self.loop_playback,
        }
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, STORAGE_KEY, &self.saved());
    }

    fn on_exit(&mut self, _gl: Option<&eframe::glow::Context>) {
        self.link.shutdown();
    }
}
