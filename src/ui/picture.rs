//! The picture on screen: the frame with every layer drawn over it, composed by the pipeline
//! (on the device on the GPU backend, with the CPU twin on the CPU backend) in the style the
//! Layers panel sent, and shown here as one texture.
//!
//! Only frames composed for the viewer carry a picture (the pipeline composes one when the viewer
//! has taken the previous frame, so composing follows the display rate); frames without one
//! update the panels and leave the last picture on screen, so a style change or a busy pipeline
//! never blanks the view. A new picture is uploaded with `TextureHandle::set` into the same
//! texture.

use std::sync::Arc;

use eframe::egui::{self, ColorImage, TextureHandle, TextureOptions};

use crate::compose::{Picture, PictureFormat};

/// The last picture received and its texture.
#[derive(Default)]
pub(crate) struct PictureView {
    /// The newest picture received (shown once uploaded).
    picture: Option<Arc<Picture>>,
    /// The texture and the picture it holds.
    texture: Option<(TextureHandle, Arc<Picture>)>,
}

impl PictureView {
    /// Keeps `picture` as the one to show (uploaded by the next [`PictureView::upload`]).
    /// Pictures in a format the viewer cannot show are ignored (the last one stays).
    pub fn set(&mut self, picture: Arc<Picture>) {
        if picture.format == PictureFormat::Rgba
            && picture.data.len() == PictureFormat::Rgba.byte_len(picture.width, picture.height)
        {
            self.picture = Some(picture);
        } else {
            log::warn!(
                "viewer: a {:?} picture cannot be shown; the last one stays",
                picture.format
            );
        }
    }

    /// Uploads the newest picture if the texture does not hold it yet. Where the copy happens:
    /// the picture's RGBA bytes are copied into an egui `ColorImage` (one copy per new picture),
    /// then handed to the renderer.
    pub fn upload(&mut self, ctx: &egui::Context) {
        let Some(p) = &self.picture else { return };
        if self
            .texture
            .as_ref()
            .is_some_and(|(_, shown)| Arc::ptr_eq(shown, p))
        {
            return;
        }
        let opts = TextureOptions {
            magnification: egui::TextureFilter::Nearest,
            ..TextureOptions::LINEAR
        };
        let img = ColorImage::from_rgba_unmultiplied([p.width, p.height], &p.data);
        match &mut self.texture {
            Some((handle, shown)) => {
                handle.set(img, opts);
                *shown = p.clone();
            }
            None => self.texture = Some((ctx.load_texture("picture", img, opts), p.clone())),
        }
    }

    /// The texture of the picture on screen, if one was uploaded.
    #[must_use]
    pub fn texture(&self) -> Option<&TextureHandle> {
        self.texture.as_ref().map(|(t, _)| t)
    }

    /// The picture on screen (the one the texture holds).
    #[must_use]
    pub fn shown(&self) -> Option<&Picture> {
        self.texture.as_ref().map(|(_, p)| p.as_ref())
    }

    /// The colour of pixel `(x, y)` of the picture on screen, if it has that pixel.
    #[must_use]
    pub(crate) fn rgb_at(&self, x: usize, y: usize) -> Option<[u8; 3]> {
        let p = self.shown()?;
        if x >= p.width || y >= p.height {
            return None;
        }
        let i = (y * p.width + x) * 4;
        p.data.get(i..i + 3).map(|c| [c[0], c[1], c[2]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgba(width: usize, height: usize, f: impl Fn(usize, usize) -> [u8; 4]) -> Arc<Picture> {
        let mut data = Vec::new();
        for y in 0..height {
            for x in 0..width {
                data.extend_from_slice(&f(x, y));
            }
        }
        Arc::new(Picture {
            format: PictureFormat::Rgba,
            width,
            height,
            data,
        })
    }

    #[test]
    fn one_texture_follows_the_newest_picture_and_reads_its_pixels() {
        let ctx = egui::Context::default();
        let mut v = PictureView::default();
        assert!(v.texture().is_none() && v.rgb_at(0, 0).is_none());
        v.set(rgba(4, 3, |x, y| [x as u8, y as u8, 7, 255]));
        v.upload(&ctx);
        let id = v.texture().unwrap().id();
        assert_eq!(v.rgb_at(3, 2), Some([3, 2, 7]));
        assert_eq!(v.rgb_at(4, 0), None);
        assert_eq!(v.rgb_at(0, 3), None);
        // A newer picture goes into the same texture.
        v.set(rgba(4, 3, |x, y| [10 + x as u8, 20 + y as u8, 30, 255]));
        assert_eq!(v.rgb_at(1, 1), Some([1, 1, 7]), "shown once uploaded");
        v.upload(&ctx);
        assert_eq!(v.texture().unwrap().id(), id);
        assert_eq!(v.rgb_at(1, 1), Some([11, 21, 30]));
        // A picture the viewer cannot show leaves the last one.
        v.set(Arc::new(Picture {
            format: PictureFormat::I420,
            width: 4,
            height: 2,
            data: vec![0; 12],
        }));
        v.upload(&ctx);
        assert_eq!(v.rgb_at(1, 1), Some([11, 21, 30]));
    }
}
