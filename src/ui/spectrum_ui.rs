//! The spectrum panel: the angular spectrum of the current frame (for each angle of the linear
//! openings, the sum of the opening) from every output that carries
//! [`OpData::Spectrum`](crate::analysis::OpData), as a polar rose (orientation is axial: θ and
//! θ+180° are drawn alike; 0° is horizontal, angles counter-clockwise) or as bars, coloured with
//! the orientation map's hue scale. The dominant angle is printed.

use eframe::egui::{self, RichText};
use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints, Polygon};

use super::layers::angle_color;
use crate::analysis::{AnalysedFrame, OpData};

/// How the spectrum is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SpectrumStyle {
    /// Polar rose.
    #[default]
    Polar,
    /// Bars over the angle.
    Bars,
}

/// The spectrum of a frame (the first output that has one), with its op name.
#[must_use]
pub(crate) fn frame_spectrum(frame: &AnalysedFrame) -> Option<(&'static str, &[(f32, f64)])> {
    frame.outputs.iter().find_map(|o| match &o.data {
        OpData::Spectrum(s) => Some((o.op, s.as_slice())),
        _ => None,
    })
}

/// Draws the panel.
pub(crate) fn spectrum_ui(
    ui: &mut egui::Ui,
    frame: Option<&AnalysedFrame>,
    style: &mut SpectrumStyle,
) {
    let Some((op, spec)) = frame
        .and_then(frame_spectrum)
        .filter(|(_, s)| !s.is_empty())
    else {
        ui.label(
            RichText::new("No spectrum in this frame (orientation analysis off or not built yet).")
                .weak(),
        );
        return;
    };
    let max = spec.iter().map(|(_, v)| *v).fold(0.0f64, f64::max);
    ui.horizontal(|ui| {
        ui.selectable_value(style, SpectrumStyle::Polar, "polar")
            .on_hover_text("radius from the smallest sum (centre) to the largest (rim)");
        ui.selectable_value(style, SpectrumStyle::Bars, "bars");
        if let Some((a, v)) = spec.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            ui.label(RichText::new(format!("dominant {a:.0}° ({v:.3e})")).monospace())
                .on_hover_text(format!("from `{op}`"));
        }
    });
    // Every angle's opening keeps most of the frame, so the raw sums differ by a few percent:
    // the rose shows them from the smallest (centre) to the largest (rim).
    let min = spec.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
    let range = if max > min { max - min } else { 1.0 };
    match style {
        SpectrumStyle::Polar => {
            Plot::new("spectrum_polar")
                .data_aspect(1.0)
                .show_axes(false)
                .show_grid(false)
                .allow_scroll(false)
                .include_x(-1.1)
                .include_x(1.1)
                .include_y(-1.1)
                .include_y(1.1)
                .show(ui, |plot| {
                    for r in [0.5, 1.0] {
                        let ring: PlotPoints<'_> = (0..=72)
                            .map(|i| {
                                let t = f64::from(i) / 72.0 * std::f64::consts::TAU;
                                [r * t.cos(), r * t.sin()]
                            })
                            .collect();
                        plot.line(Line::new("", ring).color(ui_weak()).allow_hover(false));
                    }
                    // One wedge per angle, mirrored: orientation θ is the same as θ + 180°.
                    let n = spec.len().max(1);
                    let half = std::f64::consts::PI / n as f64 / 2.0;
                    for &(a, v) in spec {
                        let r = 0.08 + 0.92 * (v - min) / range;
                        for base in [0.0, std::f64::consts::PI] {
                            let t = f64::from(a).to_radians() + base;
                            let pts: PlotPoints<'_> = vec![
                                [0.0, 0.0],
                                [r * (t - half).cos(), r * (t - half).sin()],
                                [r * (t + half).cos(), r * (t + half).sin()],
                            ]
                            .into();
                            plot.polygon(
                                Polygon::new(format!("{a:.0}°"), pts)
                                    .fill_color(angle_color(a).gamma_multiply(0.8))
                                    .stroke((0.5, angle_color(a))),
                            );
                        }
                    }
                });
        }
        SpectrumStyle::Bars => {
            let step = if spec.len() > 1 {
                f64::from((spec[1].0 - spec[0].0).abs()).max(0.5)
            } else {
                10.0
            };
            let bars = spec
                .iter()
                .map(|&(a, v)| {
                    Bar::new(f64::from(a), v)
                        .width(step * 0.85)
                        .fill(angle_color(a))
                        .name(format!("{a:.0}°"))
                })
                .collect();
            Plot::new("spectrum_bars")
                .allow_scroll(false)
                .x_axis_label("angle (°)")
                .include_y(0.0)
                .show(ui, |plot| plot.bar_chart(BarChart::new("spectrum", bars)));
        }
    }
}

fn ui_weak() -> egui::Color32 {
    egui::Color32::from_gray(90)
}
