//! The viewer on several sources (`morphoscope view A B C`): a grid of the streams, each its
//! composed picture in one texture with its source and counts; a click focuses one, which then
//! gets the whole window as a single-source viewer (its controls, tracks, spectrum, timings),
//! and "all streams" goes back to the grid.
//!
//! Each stream is a whole [`ViewerApp`] with its own pipeline (and its own settings once
//! edited). The streams not on screen keep taking their newest frame on every repaint, so
//! their pipelines run on and their cells are current when the grid comes back.

use std::time::Duration;

use eframe::egui;

use super::ViewerOptions;
use super::app::ViewerApp;
use crate::backend::Backend;

/// The app of a window on several streams.
pub struct GridApp {
    streams: Vec<ViewerApp>,
    /// The stream shown whole, if one is.
    focus: Option<usize>,
}

impl GridApp {
    /// A window's app: one [`ViewerApp`] a source, stream i on `backends[i % len]`.
    pub fn new(
        cc: &eframe::CreationContext<'_>,
        opts: &ViewerOptions,
        sources: &[String],
        backends: &[Backend],
    ) -> Self {
        let streams = sources
            .iter()
            .enumerate()
            .map(|(i, source)| {
                let backend = backends
                    .get(i % backends.len().max(1))
                    .cloned()
                    .unwrap_or(Backend::Cpu);
                let one = ViewerOptions {
                    settings: opts.settings.clone(),
                    settings_explicit: opts.settings_explicit,
                    source: source.clone(),
                    backend,
                    quit_after_secs: opts.quit_after_secs,
                    wgpu: opts.wgpu,
                };
                ViewerApp::new(cc, one)
            })
            .collect();
        Self::from_apps(streams)
    }

    /// A grid of ready apps (tests: apps made by [`ViewerApp::detached`]).
    #[must_use]
    pub fn from_apps(streams: Vec<ViewerApp>) -> Self {
        Self {
            streams,
            focus: None,
        }
    }

    /// The stream shown whole, if one is.
    #[must_use]
    pub fn focused(&self) -> Option<usize> {
        self.focus
    }

    /// Draws the grid, or the focused stream with a bar to go back.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        let n = self.streams.len();
        if let Some(i) = self.focus.filter(|&i| i < n) {
            let source = self.streams[i].source().to_owned();
            let back = egui::Panel::top("streams_bar")
                .show(ui, |ui| {
                    ui.horizontal(|ui| {
                        let back = ui
                            .button("back to all streams")
                            .on_hover_text("the grid of every stream")
                            .clicked();
                        ui.label(format!("stream {i} of {n}: {source}"));
                        back
                    })
                    .inner
                })
                .inner;
            for (j, s) in self.streams.iter_mut().enumerate() {
                if j != i {
                    s.poll_frames(&ctx);
                }
            }
            self.streams[i].show(ui);
            if back {
                self.focus = None;
            }
            return;
        }
        let mut clicked = None;
        egui::CentralPanel::default().show(ui, |ui| {
            let cols = (n as f64).sqrt().ceil().max(1.0) as usize;
            let rows = n.div_ceil(cols).max(1);
            let gap = ui.spacing().item_spacing;
            let avail = ui.available_size();
            let cell = egui::vec2(
                (avail.x - gap.x * (cols - 1) as f32) / cols as f32,
                (avail.y - gap.y * (rows - 1) as f32) / rows as f32,
            )
            .max(egui::vec2(40.0, 30.0));
            for r in 0..rows {
                ui.horizontal(|ui| {
                    for c in 0..cols {
                        let i = r * cols + c;
                        let Some(s) = self.streams.get_mut(i) else {
                            break;
                        };
                        ui.allocate_ui(cell, |ui| {
                            ui.set_min_size(cell);
                            if s.tile_ui(ui) {
                                clicked = Some(i);
                            }
                        });
                    }
                });
            }
        });
        if clicked.is_some() {
            self.focus = clicked;
        }
        // Keep the counts fresh; frames themselves wake the UI through the mailboxes.
        ctx.request_repaint_after(Duration::from_millis(250));
    }
}

impl eframe::App for GridApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        // What the viewer restores next time: the stream last focused, else the first.
        let i = self.focus.unwrap_or(0);
        if let Some(s) = self.streams.get_mut(i) {
            eframe::App::save(s, storage);
        }
    }

    fn on_exit(&mut self, gl: Option<&eframe::glow::Context>) {
        for s in &mut self.streams {
            eframe::App::on_exit(s, gl);
        }
    }
}
