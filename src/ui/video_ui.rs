//! The video view: the composed picture (the frame with every layer) in one zoomable, pannable
//! view, with the interactive marks drawn over it.
//!
//! Image coordinates (pixels, origin top-left) map to the screen as
//! `screen = rect.min + offset + zoom * image`. In *fit* mode (the default, and after `f` or a
//! double click) zoom and offset are recomputed every frame so the picture fills the view;
//! scrolling zooms about the pointer and dragging pans, which leaves fit mode. The picture is one
//! texture drawn into the mapped rectangle (the pipeline composed the layers into it); what
//! depends on the pointer or a selection (the highlighted track, the track under the pointer)
//! is mapped point by point and drawn as egui shapes on top, so it stays sharp at any zoom.

use eframe::egui::{
    self, Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, StrokeKind, Vec2, pos2, vec2,
};

use super::picture::PictureView;
use crate::analysis::{AnalysedFrame, OpData, TrackInfo};

/// Zoom limits (screen pixels per image pixel).
const ZOOM_RANGE: std::ops::RangeInclusive<f32> = 0.05..=64.0;

/// Zoom and pan state.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoView {
    /// Recompute zoom/offset to fit the view.
    pub fit: bool,
    /// Screen pixels per image pixel.
    pub zoom: f32,
    /// Screen offset of the image origin from the view's top-left corner.
    pub offset: Vec2,
    /// Image point under the pointer, last frame.
    pub hover_image_pos: Option<Pos2>,
}

impl Default for VideoView {
    fn default() -> Self {
        Self {
            fit: true,
            zoom: 1.0,
            offset: Vec2::ZERO,
            hover_image_pos: None,
        }
    }
}

impl VideoView {
    /// Screen position of image point `p` in view `rect`.
    #[must_use]
    pub fn screen_from_image(&self, rect: Rect, p: Pos2) -> Pos2 {
        rect.min + self.offset + p.to_vec2() * self.zoom
    }

    /// Image point under screen position `s` in view `rect`.
    #[must_use]
    pub(crate) fn image_from_screen(&self, rect: Rect, s: Pos2) -> Pos2 {
        ((s - rect.min - self.offset) / self.zoom).to_pos2()
    }

    /// Sets zoom and offset so an image of `size` fits `rect`, centred.
    pub(crate) fn fit_to(&mut self, rect: Rect, size: Vec2) {
        if size.x <= 0.0 || size.y <= 0.0 {
            return;
        }
        self.zoom = (rect.width() / size.x)
            .min(rect.height() / size.y)
            .clamp(*ZOOM_RANGE.start(), *ZOOM_RANGE.end());
        self.offset = (rect.size() - size * self.zoom) * 0.5;
    }

    /// Multiplies the zoom by `factor`, keeping the image point under `anchor` in place.
    pub(crate) fn zoom_about(&mut self, rect: Rect, anchor: Pos2, factor: f32) {
        let before = self.image_from_screen(rect, anchor);
        self.zoom = (self.zoom * factor).clamp(*ZOOM_RANGE.start(), *ZOOM_RANGE.end());
        self.offset = anchor - rect.min - before.to_vec2() * self.zoom;
        self.fit = false;
    }

    /// One image pixel per screen pixel, keeping the view's centre.
    pub(crate) fn actual_size(&mut self, rect: Rect) {
        let f = 1.0 / self.zoom;
        self.zoom_about(rect, rect.center(), f);
    }
}

/// What the user did in the view.
#[derive(Debug, Default)]
pub(crate) struct VideoResponse {
    /// Image point clicked (primary button, no drag).
    pub clicked: Option<Pos2>,
}

/// The tracks of a frame (every output with [`OpData::Tracks`]).
pub(crate) fn frame_tracks(frame: &AnalysedFrame) -> impl Iterator<Item = &TrackInfo> {
    frame.outputs.iter().flat_map(|o| match &o.data {
        OpData::Tracks(t) => t.as_slice(),
        _ => &[],
    })
}

/// Draws the view: `picture` over the frame's area, then the marks of `frame` (the newest frame's
/// tracks). `placeholder` is shown when there is no frame.
pub(crate) fn video_ui(
    ui: &mut egui::Ui,
    view: &mut VideoView,
    frame: Option<&AnalysedFrame>,
    picture: &PictureView,
    selected_track: Option<u64>,
    placeholder: &str,
) -> VideoResponse {
    let (resp, painter) = ui.allocate_painter(ui.available_size(), Sense::click_and_drag());
    let rect = resp.rect;
    painter.rect_filled(rect, 0.0, Color32::from_gray(16));
    let mut out = VideoResponse::default();
    let Some(frame) = frame else {
        painter.text(
            rect.center(),
            Align2::CENTER_CENTER,
            placeholder,
            FontId::proportional(16.0),
            Color32::from_gray(170),
        );
        view.hover_image_pos = None;
        return out;
    };
    let (w, h) = frame.size();
    let size = vec2(w as f32, h as f32);

    // Input: zoom about the pointer, drag to pan, double click to fit.
    if resp.hovered() {
        let (scroll, pinch) = ui.input(|i| (i.smooth_scroll_delta.y, i.zoom_delta()));
        let factor = pinch * (scroll / 200.0).exp();
        if (factor - 1.0).abs() > 1e-4
            && let Some(p) = resp.hover_pos()
        {
            view.zoom_about(rect, p, factor);
        }
    }
    if resp.dragged() {
        view.offset += resp.drag_delta();
        view.fit = false;
    }
    if resp.double_clicked() {
        view.fit = true;
    }
    if view.fit {
        view.fit_to(rect, size);
    }
    view.hover_image_pos = resp.hover_pos().map(|p| view.image_from_screen(rect, p));
    if resp.clicked() {
        out.clicked = resp
            .interact_pointer_pos()
            .map(|p| view.image_from_screen(rect, p));
    }

    let painter = painter.with_clip_rect(rect);
    let image_rect = Rect::from_min_max(
        view.screen_from_image(rect, Pos2::ZERO),
        view.screen_from_image(rect, size.to_pos2()),
    );
    let uv = Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0));
    painter.rect_filled(image_rect, 0.0, Color32::BLACK);
    if let Some(t) = picture.texture() {
        painter.image(t.id(), image_rect, uv, Color32::WHITE);
    }
    let box_rect = |t: &TrackInfo| {
        let [l, tp, bw, bh] = t.bbox;
        Rect::from_min_max(
            view.screen_from_image(rect, pos2(l, tp)),
            view.screen_from_image(rect, pos2(l + bw, tp + bh)),
        )
    };
    let hovered = view
        .hover_image_pos
        .and_then(|p| track_at(frame, p))
        .filter(|&id| Some(id) != selected_track);
    if let Some(t) = hovered.and_then(|id| frame_tracks(frame).find(|t| t.id == id)) {
        let r = box_rect(t);
        let c = Color32::from_white_alpha(220);
        painter.rect_stroke(r.expand(1.0), 1.0, Stroke::new(1.0, c), StrokeKind::Outside);
        label(
            &painter,
            r.left_bottom() + vec2(0.0, 3.0),
            Align2::LEFT_TOP,
            &format!("track {} · click to highlight", t.id),
            c,
        );
    }
    if let Some(t) = selected_track.and_then(|id| frame_tracks(frame).find(|t| t.id == id)) {
        let r = box_rect(t);
        let hl = Color32::from_rgb(255, 230, 0);
        painter.rect_stroke(
            r.expand(2.0),
            2.0,
            Stroke::new(3.0, hl),
            StrokeKind::Outside,
        );
        label(
            &painter,
            r.left_bottom() + vec2(0.0, 4.0),
            Align2::LEFT_TOP,
            &format!("track {}", t.id),
            hl,
        );
    }
    out
}

fn label(painter: &egui::Painter, pos: Pos2, anchor: Align2, text: &str, c: Color32) {
    let galley = painter.layout_no_wrap(text.to_owned(), FontId::monospace(11.0), c);
    let r = anchor.anchor_size(pos, galley.size());
    painter.rect_filled(
        r.expand(1.0),
        2.0,
        Color32::from_black_alpha((200.0 * c.a() as f32 / 255.0) as u8),
    );
    painter.galley(r.min, galley, c);
}

/// The track whose box contains image point `p` (the smallest such box), for click selection.
#[must_use]
pub(crate) fn track_at(frame: &AnalysedFrame, p: Pos2) -> Option<u64> {
    frame_tracks(frame)
        .filter(|t| {
            let [l, tp, w, h] = t.bbox;
            p.x >= l && p.x <= l + w && p.y >= tp && p.y <= tp + h
        })
        .min_by(|a, b| (a.bbox[2] * a.bbox[3]).total_cmp(&(b.bbox[2] * b.bbox[3])))
        .map(|t| t.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_round_trips_and_zoom_keeps_the_anchor() {
        let rect = Rect::from_min_size(pos2(10.0, 20.0), vec2(400.0, 300.0));
        let mut v = VideoView::default();
        v.fit_to(rect, vec2(800.0, 300.0));
        assert!((v.zoom - 0.5).abs() < 1e-6);
        let p = pos2(123.0, 45.0);
        let s = v.screen_from_image(rect, p);
        assert!((v.image_from_screen(rect, s) - p).length() < 1e-3);
        let anchor = pos2(200.0, 100.0);
        let before = v.image_from_screen(rect, anchor);
        v.zoom_about(rect, anchor, 3.0);
        assert!((v.image_from_screen(rect, anchor) - before).length() < 1e-3);
        assert!(!v.fit);
        v.actual_size(rect);
        assert!((v.zoom - 1.0).abs() < 1e-6);
    }
}
