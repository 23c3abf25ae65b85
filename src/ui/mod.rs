//! The viewer: an eframe/egui app that shows the video with every analysis overlaid, edits the
//! analyses' settings live, and shows where the time goes.
//!
//! How it works. The pipeline's threads (which alone touch GStreamer and CUDA) put each analysed
//! frame into a newest-wins [`Mailbox`](crate::pipeline::Mailbox) whose waker calls
//! `request_repaint`. The pipeline composes the frame and every layer into one RGBA picture (on
//! the device on the GPU backend) only when the viewer has taken the previous frame, so
//! composing follows the display rate. On each repaint the UI takes the newest frame, uploads its
//! picture into one texture (`TextureHandle::set` re-uploads into the same texture; a frame
//! without a picture leaves the last one on screen), and draws the interactive marks (the
//! highlighted track, the track under the pointer) as egui shapes on top. User changes go back
//! as [`Command`](crate::pipeline::Command)s: `Settings` (the whole `OpSettings`, from the next
//! frame on), `Style` (the layers' toggles, opacities and blend modes as a
//! [`ComposeStyle`](crate::compose::ComposeStyle), for the pictures composed from then on),
//! `Pause`, `Step`. Pipelines are started and stopped on short-lived helper threads, so opening a
//! slow network stream never freezes the window.
//!
//! Nothing here names an analysis: layers, legends, controls and panels are driven by the
//! `OpOutput`s that arrive (keyed by `op`) and by the serde form of `OpSettings`, so a new
//! analysis gets a layer, a legend, a settings section and its numbers without UI changes.
//! Known op names only add a friendlier legend (`layers::legend_text`).
//!
//! Files: [`app`] (state, layout, keyboard), `saved` (what persists between runs), [`link`] (connection to the worker),
//! [`layers`] (toggles, opacity, legends, the compose style), [`picture`] (the picture's
//! texture), `video_ui` (zoom/pan, interactive marks),
//! [`grid`] (several sources: a grid of streams, one focused), `controls_ui` (source,
//! playback, settings), [`settings_form`] (generic editor of a serde
//! struct), `timings_ui`, `tracks_ui`, `spectrum_ui`, [`canned`] (synthetic frames for tests
//! and docs).

pub mod app;
pub mod canned;
pub(crate) mod controls_ui;
pub mod grid;
pub mod layers;
pub mod link;
pub mod picture;
mod saved;
pub mod settings_form;
pub(crate) mod spectrum_ui;
pub(crate) mod timings_ui;
pub(crate) mod tracks_ui;
pub(crate) mod video_ui;

pub use app::ViewerApp;
pub use eframe::egui;
pub use grid::GridApp;
pub use link::TestLink;

use crate::backend::Backend;
use crate::config::Settings;

/// Errors of the viewer.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// No window could be created (no display, no GL/Vulkan); nothing was shown.
    #[error("cannot open a window: {0}")]
    NoWindow(String),
    /// The window ran and then failed.
    #[error("viewer failed: {0}")]
    Failed(String),
}

/// What the viewer starts with.
pub struct ViewerOptions {
    /// Settings from defaults, `--config` and `--set`.
    pub settings: Settings,
    /// True when the user gave `--config` or `--set`: then the settings saved when the viewer last
    /// closed are not restored over them.
    pub settings_explicit: bool,
    /// SOURCE to open first.
    pub source: String,
    /// The backend the analyses run on.
    pub backend: Backend,
    /// Close the window by itself after this many seconds (`view --quit-after`, smoke tests).
    pub quit_after_secs: Option<f64>,
    /// Draw with wgpu instead of glow (OpenGL) (`view --renderer wgpu`).
    pub wgpu: bool,
}

impl ViewerOptions {
    /// Options that keep the window open and draw with glow.
    #[must_use]
    pub fn new(
        settings: Settings,
        settings_explicit: bool,
        source: String,
        backend: Backend,
    ) -> Self {
        Self {
            settings,
            settings_explicit,
            source,
            backend,
            quit_after_secs: None,
            wgpu: false,
        }
    }
}

/// True when the environment names a display (X11 `DISPLAY` or `WAYLAND_DISPLAY`). A window may
/// still fail to open; [`run_viewer`] then returns [`UiError::NoWindow`].
#[must_use]
pub fn display_available() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// The renderer: glow (OpenGL) unless `wgpu`. Glow starts faster and repaints ~5× faster under
/// Mesa/Xvfb; wgpu is there for drivers without usable OpenGL.
fn renderer(wgpu: bool) -> eframe::Renderer {
    if wgpu {
        eframe::Renderer::Wgpu
    } else {
        eframe::Renderer::Glow
    }
}

/// The window icon, drawn here (no image file needed): a lens ring over a hue wheel, the
/// orientation map's colours.
fn icon() -> egui::IconData {
    const N: usize = 64;
    let mut rgba = vec![0u8; N * N * 4];
    for y in 0..N {
        for x in 0..N {
            let (dx, dy) = (x as f32 - 31.5, y as f32 - 31.5);
            let r = (dx * dx + dy * dy).sqrt();
            let px = &mut rgba[(y * N + x) * 4..][..4];
            if r < 22.0 {
                let hue = (dy.atan2(dx) / std::f32::consts::TAU).rem_euclid(1.0);
                let c = egui::ecolor::Hsva::new(hue, 0.8, 0.35 + 0.6 * r / 22.0, 1.0)
                    .to_srgba_unmultiplied();
                px.copy_from_slice(&c);
            } else if r < 30.0 {
                px.copy_from_slice(&[235, 235, 240, 255]);
            }
        }
    }
    egui::IconData {
        rgba,
        width: N as u32,
        height: N as u32,
    }
}

/// Opens the window and runs until it is closed. Blocks the calling thread (it must be the main
/// thread: winit's event loop). Returns [`UiError::NoWindow`] when no window could be created, so
/// the caller can fall back to a headless run.
pub fn run_viewer(opts: ViewerOptions) -> Result<(), UiError> {
    let wgpu = opts.wgpu;
    run_window(wgpu, Box::new(move |cc| Box::new(ViewerApp::new(cc, opts))))
}

/// [`run_viewer`] on several sources: a grid of the streams ([`GridApp`]), stream i on
/// `backends[i % len]`.
pub fn run_viewer_grid(
    opts: ViewerOptions,
    sources: Vec<String>,
    backends: Vec<Backend>,
) -> Result<(), UiError> {
    let wgpu = opts.wgpu;
    run_window(
        wgpu,
        Box::new(move |cc| Box::new(GridApp::new(cc, &opts, &sources, &backends))),
    )
}

/// Makes the app of a window once the window exists.
type MakeApp = Box<dyn FnOnce(&eframe::CreationContext<'_>) -> Box<dyn eframe::App>>;

/// Opens the window with the app `make` builds and runs until it is closed.
fn run_window(wgpu: bool, make: MakeApp) -> Result<(), UiError> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let viewport = egui::ViewportBuilder::default()
        .with_title("morphoscope")
        .with_app_id("morphoscope")
        .with_inner_size([1440.0, 900.0])
        .with_min_inner_size([800.0, 500.0])
        .with_icon(icon());
    let native = eframe::NativeOptions {
        viewport,
        renderer: renderer(wgpu),
        ..Default::default()
    };
    let started = Arc::new(AtomicBool::new(false));
    let started_in_app = started.clone();
    let result = eframe::run_native(
        "morphoscope",
        native,
        Box::new(move |cc| {
            started_in_app.store(true, Ordering::SeqCst);
            Ok(make(cc))
        }),
    );
    match result {
        Ok(()) => Ok(()),
        Err(e) if !started.load(Ordering::SeqCst) => Err(UiError::NoWindow(e.to_string())),
        Err(e) => Err(UiError::Failed(e.to_string())),
    }
}
