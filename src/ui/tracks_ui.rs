//! The tracks panel: the current tracks (id, age, area, position, speed) from every output that
//! carries [`OpData::Tracks`](crate::analysis::OpData); clicking a row highlights that track in
//! the video (and clicking it again clears the highlight).

use eframe::egui::{self, RichText};

use super::video_ui::frame_tracks;
use crate::analysis::{AnalysedFrame, TrackInfo};

/// Draws the table; updates `selected` when a row is clicked.
pub(crate) fn tracks_ui(
    ui: &mut egui::Ui,
    frame: Option<&AnalysedFrame>,
    selected: &mut Option<u64>,
) {
    let mut tracks: Vec<&TrackInfo> = frame.map(|f| frame_tracks(f).collect()).unwrap_or_default();
    if tracks.is_empty() {
        ui.label(RichText::new("No tracks in this frame (components analysis off, not built yet, or nothing found).").weak());
        return;
    }
    tracks.sort_by_key(|t| t.id);
    ui.label(format!(
        "{} tracks{}",
        tracks.len(),
        selected
            .map(|s| format!(" · track {s} highlighted"))
            .unwrap_or_default()
    ));
    egui::ScrollArea::vertical()
        .id_salt("tracks_scroll")
        .auto_shrink([false, true])
        .max_height(ui.available_height().max(80.0))
        .show(ui, |ui| {
            egui::Grid::new("tracks_grid")
                .num_columns(6)
                .striped(true)
                .spacing([10.0, 2.0])
                .show(ui, |ui| {
                    for h in ["id", "age", "area", "x", "y", "speed"] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for t in tracks {
                        let is_sel = *selected == Some(t.id);
                        let r = ui.selectable_label(
                            is_sel,
                            RichText::new(format!("{:>4}", t.id)).monospace(),
                        );
                        if r.on_hover_text("highlight this track in the video")
                            .clicked()
                        {
                            *selected = if is_sel { None } else { Some(t.id) };
                        }
                        let speed = (t.velocity[0].hypot(t.velocity[1])).abs();
                        for s in [
                            t.age.to_string(),
                            t.area.to_string(),
                            format!("{:.1}", t.position[0]),
                            format!("{:.1}", t.position[1]),
                            format!("{speed:.1} px/s"),
                        ] {
                            ui.label(RichText::new(s).monospace());
                        }
                        ui.end_row();
                    }
                });
        });
}
