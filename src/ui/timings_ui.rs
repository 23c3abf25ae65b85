//! The timings panel: where the time of a frame goes.
//!
//! Left: the numbers of the last frame (end-to-end latency, upload, download, queue wait,
//! compute), the rates (frames analysed per second from the worker's counter, frames shown per
//! second by the UI), frame counts and drops, then one bar per timed region (a kernel, timed with
//! CUDA events, or a CPU function) with its milliseconds. Right: the rolling history of the
//! regions and the latency over the last frames (egui_plot). Rates use the UI clock
//! (`InputState::time`), so headless tests are deterministic.

use std::collections::VecDeque;

use eframe::egui::{self, Color32, RichText};
use egui_plot::{Line, LineStyle, Plot, PlotPoints};

use super::layers::name_color;
use crate::analysis::FrameTimings;

/// Frames kept for the history plot.
pub(crate) const HISTORY_FRAMES: usize = 300;
/// Window of the fps estimates, seconds.
const RATE_WINDOW_SECS: f64 = 2.0;

/// Rolling history of frame timings and rates.
#[derive(Default)]
pub(crate) struct TimingsHistory {
    frames: VecDeque<(u64, FrameTimings)>,
    shown_at: VecDeque<f64>,
    out_samples: VecDeque<(f64, u64)>,
}

/// Frame counts as the panel shows them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Frames the source delivered.
    pub frames_in: u64,
    /// Frames analysed.
    pub frames_out: u64,
    /// Frames the source dropped (live sources, worker busy).
    pub dropped: u64,
    /// Analysed frames replaced in the mailbox before the UI showed them.
    pub not_shown: u64,
}

impl TimingsHistory {
    /// Records a frame shown at UI time `now` (seconds).
    pub fn push(&mut self, seq: u64, t: &FrameTimings, now: f64) {
        self.frames.push_back((seq, t.clone()));
        while self.frames.len() > HISTORY_FRAMES {
            self.frames.pop_front();
        }
        self.shown_at.push_back(now);
        while self
            .shown_at
            .front()
            .is_some_and(|&t0| now - t0 > RATE_WINDOW_SECS)
        {
            self.shown_at.pop_front();
        }
    }

    /// Records the worker's output counter at UI time `now`.
    pub(crate) fn tick(&mut self, now: f64, frames_out: u64) {
        if self
            .out_samples
            .back()
            .is_some_and(|&(_, n)| n > frames_out)
        {
            self.out_samples.clear(); // a new pipeline
        }
        self.out_samples.push_back((now, frames_out));
        while self.out_samples.len() > 2
            && self
                .out_samples
                .front()
                .is_some_and(|&(t0, _)| now - t0 > RATE_WINDOW_SECS)
        {
            self.out_samples.pop_front();
        }
    }

    /// Forgets everything (a new source).
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Frames shown per second over the last two seconds.
    #[must_use]
    pub(crate) fn display_fps(&self, now: f64) -> f64 {
        let n = self
            .shown_at
            .iter()
            .filter(|&&t| now - t <= RATE_WINDOW_SECS)
            .count();
        match self.shown_at.front() {
            Some(&t0) if n >= 2 && now > t0 => (n - 1) as f64 / (now - t0).max(1e-6),
            _ => 0.0,
        }
    }

    /// Frames analysed per second over the last two seconds.
    #[must_use]
    pub(crate) fn processing_fps(&self) -> f64 {
        match (self.out_samples.front(), self.out_samples.back()) {
            (Some(&(t0, n0)), Some(&(t1, n1))) if t1 > t0 => (n1 - n0) as f64 / (t1 - t0),
            _ => 0.0,
        }
    }

    /// The timings of the newest frame.
    #[must_use]
    pub fn last(&self) -> Option<&FrameTimings> {
        self.frames.back().map(|(_, t)| t)
    }

    /// Region names in order of first appearance over the history.
    fn region_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (_, t) in &self.frames {
            for (n, _) in &t.regions {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// The numbers and the per-region bars of the newest frame.
pub(crate) fn numbers_ui(ui: &mut egui::Ui, hist: &TimingsHistory, counts: Counts, now: f64) {
    let Some(t) = hist.last() else {
        ui.label("no frame yet");
        return;
    };
    egui::Grid::new("timing_numbers")
        .num_columns(4)
        .spacing([10.0, 2.0])
        .striped(true)
        .show(ui, |ui| {
            let strong =
                |ui: &mut egui::Ui, s: String| ui.label(RichText::new(s).monospace().strong());
            ui.label("latency").on_hover_text(
                "from the source delivering the frame to the results being ready (wall clock)",
            );
            strong(ui, ms(t.latency_ms));
            ui.label("processing")
                .on_hover_text("frames analysed per second (worker)");
            strong(ui, format!("{:.1} fps", hist.processing_fps()));
            ui.end_row();
            ui.label("upload")
                .on_hover_text("host to device copy of the frame (CUDA events; 0 on the CPU)");
            strong(ui, ms(t.upload_ms));
            ui.label("display")
                .on_hover_text("frames shown per second by this window");
            strong(ui, format!("{:.1} fps", hist.display_fps(now)));
            ui.end_row();
            ui.label("download")
                .on_hover_text("device to host copies of the results");
            strong(ui, ms(t.download_ms));
            ui.label("in / out")
                .on_hover_text("frames delivered by the source / analysed");
            strong(ui, format!("{} / {}", counts.frames_in, counts.frames_out));
            ui.end_row();
            ui.label("queue wait")
                .on_hover_text("time between the source and the worker");
            strong(ui, ms(t.queue_wait_ms));
            ui.label("dropped")
                .on_hover_text("dropped by a live source because the worker was busy");
            let c = if counts.dropped > 0 {
                Color32::from_rgb(255, 160, 80)
            } else {
                ui.visuals().strong_text_color()
            };
            ui.label(
                RichText::new(counts.dropped.to_string())
                    .monospace()
                    .strong()
                    .color(c),
            );
            ui.end_row();
            ui.label("compute")
                .on_hover_text("sum of the analysis regions below");
            strong(ui, ms(t.compute_ms));
            ui.label("not shown").on_hover_text(
                "analysed, but replaced by a newer frame before the window showed it",
            );
            strong(ui, counts.not_shown.to_string());
            ui.end_row();
        });
    ui.add_space(4.0);
    ui.label(
        RichText::new(format!(
            "per region, last frame ({})",
            if t.backend.is_empty() { "?" } else { t.backend }
        ))
        .small(),
    );
    let max = t
        .regions
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    egui::ScrollArea::vertical()
        .id_salt("timing_bars_scroll")
        .auto_shrink([false, true])
        .max_height(ui.available_height().max(40.0))
        .show(ui, |ui| {
            egui::Grid::new("timing_bars")
                .num_columns(3)
                .spacing([6.0, 2.0])
                .show(ui, |ui| {
                    for (name, v) in &t.regions {
                        ui.label(RichText::new(name).monospace().small());
                        let width = 140.0;
                        let (rect, _) =
                            ui.allocate_exact_size(egui::vec2(width, 10.0), egui::Sense::hover());
                        let bar = egui::Rect::from_min_size(
                            rect.min,
                            egui::vec2((width * (*v / max) as f32).max(1.0), rect.height()),
                        );
                        ui.painter()
                            .rect_filled(rect, 1.0, ui.visuals().faint_bg_color);
                        ui.painter().rect_filled(bar, 1.0, name_color(name));
                        ui.label(RichText::new(ms(*v)).monospace().small());
                        ui.end_row();
                    }
                });
        });
}

/// The rolling history of each region and the latency.
pub(crate) fn history_ui(ui: &mut egui::Ui, hist: &TimingsHistory) {
    let names = hist.region_names();
    ui.label(
        RichText::new("history: one line per region, colours as in the bars; dashed = latency")
            .small()
            .weak(),
    );
    Plot::new("timing_history")
        .y_axis_label("ms")
        .x_axis_label("frame")
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |plot| {
            for name in &names {
                let pts: PlotPoints<'_> = hist
                    .frames
                    .iter()
                    .filter_map(|(seq, t)| {
                        t.regions
                            .iter()
                            .find(|(n, _)| n == name)
                            .map(|(_, v)| [*seq as f64, *v])
                    })
                    .collect();
                plot.line(Line::new(name.clone(), pts).color(name_color(name)));
            }
            let lat: PlotPoints<'_> = hist
                .frames
                .iter()
                .map(|(seq, t)| [*seq as f64, t.latency_ms])
                .collect();
            plot.line(
                Line::new("latency", lat)
                    .color(Color32::from_gray(220))
                    .style(LineStyle::dashed_loose()),
            );
        });
}
