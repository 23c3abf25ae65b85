//! The viewer, headless: egui_kittest drives the app (built without a pipeline by
//! `ViewerApp::detached`, fed canned analysed frames through the same mailbox the worker uses,
//! their pictures composed by the CPU twin of the compose kernel with the styles the app sent,
//! as the pipeline does) and renders it with wgpu's software fallback for snapshot comparisons
//! (tests/snapshots/*.png; `UPDATE_SNAPSHOTS=true cargo test --test ui` rewrites the ones that
//! changed). Interaction tests check that clicks and keys become `Command`s on the channel the
//! worker reads.
//!
//! Last test: a real window under Xvfb (`scripts/ui_smoke.sh`), when `xvfb-run` and ImageMagick
//! are installed (skipped otherwise, or failed with MORPHOSCOPE_REQUIRE_XVFB=1).

#![allow(clippy::unwrap_used, clippy::panic)] // helpers outside #[test] fns (clippy.toml allows them inside)

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use morphoscope::compose::{ComposeStyle, LayerKind, LayerStyle, ORIGINAL};
use morphoscope::config::Settings;
use morphoscope::pipeline::{Command, PipelineEvent};
use morphoscope::ui::canned::{canned_frame, on_device, unknown_op_frame};
use morphoscope::ui::settings_form::SettingsForm;
use morphoscope::ui::{GridApp, TestLink, ViewerApp};
use serde::{Deserialize, Serialize};

const BACKEND: &str = "cuda: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)";

/// The app at 1280x800, fed by the returned link. The "Analyses" section is collapsed so that the
/// snapshots do not change when an analysis adds a setting (the generic form has its own test).
fn harness() -> (Harness<'static, ViewerApp>, TestLink) {
    harness_with(true)
}

/// [`harness`], with egui_kittest's accessibility check on or off (egui_file's dialog has text
/// fields without names).
fn harness_with(accessibility_check: bool) -> (Harness<'static, ViewerApp>, TestLink) {
    let (app, link) = ViewerApp::detached(
        Settings::defaults().unwrap(),
        "assets/samples/vtest.avi",
        BACKEND,
    );
    let mut h = Harness::builder()
        .with_size([1280.0, 800.0])
        .with_accessibility_check(accessibility_check)
        .build_ui_state(|ui, app: &mut ViewerApp| app.show(ui), app);
    h.run();
    h.get_by_label("Analyses").click();
    h.run();
    (h, link)
}

/// Opens the "Analyses" section again.
fn expand_analyses(h: &mut Harness<'static, ViewerApp>) {
    h.get_by_label("Analyses").click();
    h.run();
}

/// Delivers `n` canned frames, one per UI step, so the timing history fills.
fn play(h: &mut Harness<'static, ViewerApp>, link: &TestLink, n: u64) {
    for i in 0..n {
        link.deliver(canned_frame(i));
        h.step();
    }
    h.run();
}

/// Scrolls a widget into view, then clicks it.
fn click(h: &mut Harness<'static, ViewerApp>, label: &str) {
    h.get_by_label(label).scroll_to_me();
    h.run();
    h.get_by_label(label).click();
    h.run();
}

fn style_commands(link: &TestLink) -> Vec<ComposeStyle> {
    link.drain()
        .into_iter()
        .filter_map(|c| match c {
            Command::Style(s) => Some(*s),
            _ => None,
        })
        .collect()
}

/// The RGB of image pixel (x, y) of the picture on screen.
fn shown_rgb(h: &Harness<'static, ViewerApp>, x: usize, y: usize) -> [u8; 3] {
    let p = h.state().picture().unwrap(); // a picture on screen
    let i = (y * p.width + x) * 4;
    [p.data[i], p.data[i + 1], p.data[i + 2]]
}

fn settings_commands(link: &TestLink) -> Vec<morphoscope::analysis::OpSettings> {
    link.drain()
        .into_iter()
        .filter_map(|c| match c {
            Command::Settings(s) => Some(*s),
            _ => None,
        })
        .collect()
}

#[test]
fn snapshot_waiting_for_frames() {
    let (mut h, _link) = harness();
    h.run();
    assert_eq!(
        h.state().layers().len(),
        1,
        "only the original layer before any frame"
    );
    h.get_by_label("no frame yet");
    h.snapshot("viewer_waiting");
}

#[test]
fn snapshot_all_layers_and_panels() {
    let (mut h, link) = harness();
    play(&mut h, &link, 24);
    let keys: Vec<&str> = h.state().layers().iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys,
        ["original", "maxtree", "cca", "orientation", "segmentation"]
    );
    // Every panel shows its numbers.
    h.get_by_label("frame 23");
    h.get_by_label("3 tracks");
    h.get_by_label_contains("dominant 45°");
    h.get_by_label("orientation_openings");
    h.get_by_label("24 / 24");
    h.snapshot("viewer_all_layers");
}

#[test]
fn toggling_a_layer_by_click_and_by_key() {
    let (mut h, link) = harness();
    play(&mut h, &link, 3);
    // Inside blob 3 of canned frame 3 (the residue lights it up) and a plain background pixel.
    let (blob, background) = ((50, 80), (100, 20));
    let lit = shown_rgb(&h, blob.0, blob.1);
    let _ = link.drain();
    h.get_by_label("5 segmentation").click();
    h.run();
    let vis = |h: &Harness<'static, ViewerApp>, k: &str| {
        h.state()
            .layers()
            .iter()
            .find(|l| l.key == k)
            .unwrap()
            .visible
    };
    assert!(!vis(&h, "segmentation"));
    for key in [egui::Key::Num2, egui::Key::Num4] {
        h.key_press(key);
    }
    h.run();
    assert!(
        !vis(&h, "maxtree") && !vis(&h, "orientation") && vis(&h, "cca") && vis(&h, "original")
    );
    // Each change reached the worker as a style; the newest hides the three rasters.
    let styles = style_commands(&link);
    assert!(!styles.is_empty());
    let last = styles.last().unwrap();
    for hidden in ["maxtree", "orientation", "segmentation"] {
        assert!(!last.layers[hidden].visible, "{hidden} hidden");
    }
    assert!(last.layers["cca"].visible && last.layers[ORIGINAL].visible);
    // Until a frame composed with it arrives, the last picture stays.
    assert_eq!(shown_rgb(&h, blob.0, blob.1), lit);
    link.deliver(canned_frame(3));
    h.run();
    let frame = canned_frame(3);
    let rgb = frame.rgb.as_ref().unwrap();
    assert_eq!(
        shown_rgb(&h, blob.0, blob.1),
        rgb.get(blob.0, blob.1),
        "the frame alone under the residue"
    );
    assert_eq!(
        shown_rgb(&h, background.0, background.1),
        rgb.get(background.0, background.1)
    );
    assert_ne!(lit, rgb.get(blob.0, blob.1));
    h.snapshot("viewer_frame_and_components_only");
    h.key_press(egui::Key::Num5);
    h.run();
    assert!(vis(&h, "segmentation"));
}

#[test]
fn opacity_and_blend_become_the_style_sent_to_the_worker() {
    let (mut h, link) = harness();
    play(&mut h, &link, 1);
    // The viewer's look from the start: max-tree and orientation added at 0.6, the rest as the
    // overlay video.
    let style = link.style();
    assert_eq!(style.layers["maxtree"], LayerStyle::added(0.6));
    assert_eq!(style.layers["orientation"], LayerStyle::added(0.6));
    assert_eq!(style.layers["segmentation"], LayerStyle::mixed(0.4));
    assert_eq!(style.layers["cca"], LayerStyle::mixed(1.0));
    assert_eq!(style.layers[ORIGINAL], LayerStyle::mixed(1.0));
    let _ = link.drain();
    // Turn the orientation map's additive blending off: one style goes out, with just that.
    h.get_all_by_label("add").nth(1).unwrap().click();
    h.run();
    h.run();
    let styles = style_commands(&link);
    assert_eq!(styles.len(), 1, "one Style command per change");
    assert_eq!(styles[0].layers["orientation"], LayerStyle::mixed(0.6));
    assert_eq!(styles[0].layers["maxtree"], LayerStyle::added(0.6));
    // Repaints without a change send nothing.
    h.run();
    assert!(style_commands(&link).is_empty());
}

#[test]
fn frames_without_a_picture_keep_the_last_one() {
    let (mut h, link) = harness();
    play(&mut h, &link, 2);
    let before = h.state().picture().unwrap().clone();
    let mut f = canned_frame(2);
    f.picture = None;
    link.deliver_as_is(f);
    h.run();
    h.get_by_label("frame 2");
    assert_eq!(
        h.state().picture(),
        Some(&before),
        "the last picture stays on screen"
    );
}

#[test]
fn gpu_frames_show_their_picture_and_layers_from_the_device() {
    let (mut h, link) = harness();
    for i in 0..3 {
        link.deliver_as_is(on_device(canned_frame(i)));
        h.step();
    }
    h.run();
    let keys: Vec<&str> = h.state().layers().iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys,
        ["original", "maxtree", "cca", "orientation", "segmentation"]
    );
    let add = |k: &str| h.state().layers().iter().find(|l| l.key == k).unwrap().add;
    assert!(add("maxtree") && add("orientation") && !add("segmentation"));
    assert_eq!(
        h.get_all_by_label("add").count(),
        3,
        "every raster layer has a blend switch"
    );
    let frame = on_device(canned_frame(2));
    assert!(frame.outputs.iter().all(|o| o.layer.raster.is_none()));
    assert_eq!(
        frame.output("maxtree").unwrap().layer.device_raster,
        Some(LayerKind::Residue)
    );
    // Without host pixels, the status line reads the picture on screen.
    let mut bare = on_device(canned_frame(3));
    bare.rgb = None;
    link.deliver_as_is(bare);
    h.run();
    let p = screen_of(&h, 50.0, 80.0);
    h.hover_at(p);
    h.run();
    let [r, g, b] = shown_rgb(&h, 50, 80);
    h.get_by_label(&format!("x   50  y   80  picture rgb {r:>3} {g:>3} {b:>3}"));
}

#[test]
fn parameter_change_reaches_the_worker() {
    let (mut h, link) = harness();
    play(&mut h, &link, 1);
    expand_analyses(&mut h);
    let _ = link.drain();
    // The `enabled` checkbox of the [preprocess] section header.
    click(&mut h, "preprocess");
    h.run();
    let sent = settings_commands(&link);
    assert_eq!(sent.len(), 1, "one Settings command");
    assert!(!sent[0].preprocess.enabled);
    assert!(!h.state().settings().ops.preprocess.enabled);
    // Reset all brings the defaults back, and sends them.
    click(&mut h, "Reset all");
    h.run();
    let sent = settings_commands(&link);
    assert_eq!(sent.last().unwrap(), &Settings::defaults().unwrap().ops);
}

#[test]
fn keyboard_pause_step_fit() {
    let (mut h, link) = harness();
    play(&mut h, &link, 2);
    let _ = link.drain();
    h.key_press(egui::Key::Space);
    h.run();
    assert!(h.state().paused());
    h.key_press(egui::Key::ArrowRight);
    h.run();
    h.key_press(egui::Key::Space);
    h.run();
    let cmds: Vec<String> = link.drain().iter().map(|c| format!("{c:?}")).collect();
    assert_eq!(cmds, ["Pause(true)", "Step", "Pause(false)"]);
    // Zoom with the wheel over the video leaves fit mode; `f` fits again.
    let center = h
        .ctx
        .data(|d| d.get_temp::<egui::Rect>(egui::Id::unique("video_rect")))
        .unwrap()
        .center();
    h.hover_at(center);
    wheel(&h, 120.0);
    h.run();
    assert!(!h.state().view().fit);
    h.key_press(egui::Key::F);
    h.run();
    assert!(h.state().view().fit);
}

/// A mouse wheel turn of `dy` points (positive: zoom in).
fn wheel(h: &Harness<'static, ViewerApp>, dy: f32) {
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, dy),
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Wheel,
        modifiers: egui::Modifiers::NONE,
    });
}

/// Screen position of image point (x, y) in the video view.
fn screen_of(h: &Harness<'static, ViewerApp>, x: f32, y: f32) -> egui::Pos2 {
    let rect = h
        .ctx
        .data(|d| d.get_temp::<egui::Rect>(egui::Id::unique("video_rect")))
        .unwrap();
    h.state().view().screen_from_image(rect, egui::pos2(x, y))
}

fn click_at(h: &mut Harness<'static, ViewerApp>, p: egui::Pos2) {
    h.hover_at(p);
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
    }
    h.run();
}

#[test]
fn tracks_highlight_from_table_and_video_and_zoom() {
    let (mut h, link) = harness();
    play(&mut h, &link, 10);
    // Click a row of the tracks table.
    h.get_by_label("   7").click();
    h.run();
    assert_eq!(h.state().selected_track(), Some(7));
    // Click inside track 12's box in the video (canned frame 9: left 221, top 154.5, 26 x 52).
    let p = screen_of(&h, 234.0, 180.0);
    click_at(&mut h, p);
    assert_eq!(h.state().selected_track(), Some(12));
    // Zoom in twice about the highlighted track: boxes and labels scale with the view.
    for _ in 0..2 {
        let p = screen_of(&h, 234.0, 180.0);
        h.hover_at(p);
        wheel(&h, 140.0);
        h.run();
    }
    assert!(h.state().view().zoom > 2.0);
    h.snapshot("viewer_zoomed_track_highlighted");
    // Clicking the background clears the highlight.
    let p = screen_of(&h, 200.0, 140.0);
    click_at(&mut h, p);
    assert_eq!(h.state().selected_track(), None);
}

#[test]
fn a_lost_live_source_shows_as_reconnecting_until_it_is_back() {
    let (mut h, link) = harness();
    play(&mut h, &link, 3);
    h.get_by_label("playing");
    link.reconnecting
        .store(true, std::sync::atomic::Ordering::Relaxed);
    h.run();
    h.get_by_label("reconnecting to the source…");
    link.reconnecting
        .store(false, std::sync::atomic::Ordering::Relaxed);
    play(&mut h, &link, 1);
    assert!(h.query_by_label("reconnecting to the source…").is_none());
    h.get_by_label("playing");
}

#[test]
fn error_is_shown_once_and_the_app_keeps_running() {
    let (mut h, link) = harness();
    play(&mut h, &link, 5);
    let msg = "v4l2src0: Could not read from resource. (camera unplugged)";
    link.events.send(PipelineEvent::Error(msg.into())).unwrap();
    h.run();
    assert_eq!(h.state().error(), Some(msg));
    assert!(h.get_all_by_label_contains("camera unplugged").count() >= 1);
    h.get_by_label("⚠ Source or analysis failed");
    h.snapshot("viewer_error");
    // Pick another source from the modal: the test pattern (detached: recorded, not opened).
    h.get_all_by_label("test").next_back().unwrap().click();
    h.run();
    h.get_all_by_label("Open").next_back().unwrap().click();
    h.run();
    assert_eq!(h.state().source(), "test:ball");
    assert_eq!(
        h.state().error(),
        None,
        "picking a source closes the message"
    );
    // More frames: no second modal; the message stays in the status line.
    play(&mut h, &link, 2);
    assert_eq!(h.state().error(), None);
    h.get_by_label_contains("error: v4l2src0");
}

#[test]
fn browse_opens_the_file_dialog() {
    let (mut h, _link) = harness_with(false);
    h.get_by_label("Browse").click();
    h.run();
    h.get_by_label_contains("Open a video");
    h.key_press(egui::Key::Escape);
    h.run();
    assert!(h.query_by_label_contains("Open a video").is_none());
}

#[test]
fn error_modal_closes() {
    let (mut h, link) = harness();
    link.events
        .send(PipelineEvent::Error("file not found: nope.mp4".into()))
        .unwrap();
    h.run();
    h.get_by_label("Close").click();
    h.run();
    assert_eq!(h.state().error(), None);
}

#[test]
fn unknown_ops_still_get_a_layer() {
    let (mut h, link) = harness();
    link.deliver(unknown_op_frame(0));
    h.run();
    // The first picture has the layer's default look (the viewer had not seen the op yet); the
    // next one the viewer's style for it.
    link.deliver(unknown_op_frame(1));
    h.run();
    assert_eq!(link.style().layers["future_op"], LayerStyle::mixed(0.4));
    let keys: Vec<&str> = h.state().layers().iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["original", "future_op"]);
    h.get_by_label_contains("Analysis `future_op` draws a grey picture and 1 shapes");
    h.snapshot("viewer_unknown_op");
}

#[test]
fn settings_save_and_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saved.toml");
    let (mut h, link) = harness();
    play(&mut h, &link, 1);
    expand_analyses(&mut h);
    click(&mut h, "preprocess");
    h.run();
    h.state_mut().set_settings_path(path.to_str().unwrap());
    click(&mut h, "Save");
    h.run();
    let loaded = Settings::load(Some(&path), &[]).unwrap();
    assert_eq!(&loaded, h.state().settings());
    assert!(!loaded.ops.preprocess.enabled);
    // Reset, then Load brings the saved values back and sends them to the worker.
    click(&mut h, "Reset all");
    h.run();
    let _ = link.drain();
    click(&mut h, "Load");
    h.run();
    assert!(!h.state().settings().ops.preprocess.enabled);
    assert!(!settings_commands(&link).last().unwrap().preprocess.enabled);
}

// ---- the viewer's pipeline ----

/// The pipeline the viewer starts, on the CPU backend: a frame gets an RGBA picture once the
/// viewer took the previous one, and a `Style` changes the pictures composed after it.
#[test]
fn viewer_pipeline_composes_pictures_in_the_sent_style() {
    viewer_pipeline_check(&morphoscope::backend::Backend::Cpu);
}

/// [`viewer_pipeline_composes_pictures_in_the_sent_style`] on the CUDA backend, where the
/// analyses' layers stay on the device and say so (skipped without a GPU, failed then with
/// MORPHOSCOPE_REQUIRE_GPU=1).
#[test]
fn gpu_viewer_pipeline_composes_pictures_in_the_sent_style() {
    match morphoscope::gpu::GpuContext::new(0) {
        Ok(g) => {
            viewer_pipeline_check(&morphoscope::backend::Backend::Cuda(std::sync::Arc::new(g)))
        }
        Err(e) => {
            assert!(
                std::env::var("MORPHOSCOPE_REQUIRE_GPU").as_deref() != Ok("1"),
                "MORPHOSCOPE_REQUIRE_GPU=1 but the CUDA backend is unavailable: {e}"
            );
            eprintln!("GPU test skipped: {e}");
        }
    }
}

fn viewer_pipeline_check(backend: &morphoscope::backend::Backend) {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use morphoscope::backend::Backend;
    use morphoscope::compose::{Picture, PictureFormat};
    use morphoscope::image::DynImage;
    use morphoscope::pipeline::{Delivery, FrameSource, Mailbox, PictureWant, Pipeline};
    use morphoscope::source::Frame;
    use morphoscope::ui::layers::{Layers, draws};

    let rgb = canned_frame(5).rgb.unwrap();
    let frame = Frame {
        index: 0,
        pts_nanos: None,
        image: DynImage::Rgb8((*rgb).clone()).into(),
        after_gap: false,
    };
    let source = FrameSource::Memory {
        frames: Arc::new(vec![frame]),
        count: 1_000_000,
    };
    let mailbox = Arc::new(Mailbox::new());
    let want = PictureWant::WhenTaken(PictureFormat::Rgba);
    let p = Pipeline::start(
        source,
        &Settings::defaults().unwrap(),
        backend,
        Delivery::Latest(mailbox.clone()),
        want,
    )
    .unwrap();
    // Takes frames as the viewer does until one with a picture passes `check`.
    let until = |what: &str, check: &dyn Fn(&Picture) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match mailbox.take() {
                Some(f) if f.picture.as_deref().is_some_and(check) => return f,
                _ => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        panic!("no picture {what} within 60 s");
    };
    let f = until("at all", &|_| true);
    let pic = f.picture.clone().unwrap();
    assert_eq!(
        (pic.format, pic.width, pic.height),
        (PictureFormat::Rgba, rgb.width(), rgb.height())
    );
    for op in ["maxtree", "orientation", "segmentation"] {
        let o = f.output(op).unwrap();
        match backend {
            Backend::Cpu => assert!(
                o.layer.raster.is_some() && o.layer.device_raster.is_none(),
                "{op}: layer on the host"
            ),
            Backend::Cuda(_) => assert!(
                o.layer.raster.is_none() && o.layer.device_raster.is_some(),
                "{op}: layer on the device"
            ),
        }
        assert!(draws(o));
    }
    let mut layers = Layers::default();
    layers.discover(&f.outputs);
    let keys: Vec<&str> = layers.states.iter().map(|s| s.key.as_str()).collect();
    for op in ["original", "maxtree", "orientation", "segmentation"] {
        assert!(keys.contains(&op), "layer {op} discovered: {keys:?}");
    }
    // The rasters drew something over the frame.
    let frame_rgba: Vec<u8> = rgb
        .rows()
        .flat_map(|r| r.iter().flat_map(|c| [c[0], c[1], c[2], 255]))
        .collect();
    assert_ne!(pic.data, frame_rgba);
    // Every layer but the frame hidden: the pictures after the command are the frame itself.
    let mut style = ComposeStyle::default();
    for key in layers
        .states
        .iter()
        .map(|s| s.key.clone())
        .chain(["cca".to_owned()])
    {
        if key != ORIGINAL {
            style.set(key, LayerStyle::HIDDEN);
        }
    }
    p.commands.send(Command::Style(Box::new(style))).unwrap();
    until("of the frame alone", &|pic| pic.data == frame_rgba);
    p.stop();
}

// ---- the generic settings form, with a section no analysis has yet ----

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Fast,
    Exact,
    Both,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FutureSection {
    enabled: bool,
    mode: Mode,
    radius: u32,
    sigma: f64,
    angles: Vec<f32>,
    label: String,
    inner: Inner,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Inner {
    levels: u8,
}

impl Default for Inner {
    fn default() -> Self {
        Self { levels: 3 }
    }
}

impl Default for FutureSection {
    fn default() -> Self {
        Self {
            enabled: true,
            mode: Mode::Fast,
            radius: 5,
            sigma: 0.8,
            angles: vec![0.0, 45.0, 90.0, 135.0],
            label: "x".into(),
            inner: Inner::default(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FutureOps {
    future: FutureSection,
}

const FUTURE_DOCS: &str = "[future]\n# Run the future analysis.\nenabled = true\n# fast, exact or both.\nmode = \"fast\"\n# Radius in pixels.\nradius = 5\n";

#[test]
fn generic_form_builds_controls_from_serde() {
    let v = FutureOps::default();
    let form = SettingsForm::new::<FutureOps>("future", &v, &v, FUTURE_DOCS);
    assert_eq!(
        form.choices("future.mode").unwrap(),
        ["fast", "exact", "both"]
    );
    assert!(
        form.choices("future.label").is_none(),
        "free strings stay text fields"
    );
    let mut h = Harness::builder().with_size([360.0, 300.0]).build_ui_state(
        |ui, (form, out): &mut (SettingsForm, Option<FutureOps>)| {
            let validate = |s: &FutureOps| {
                if s.future.radius > 100 {
                    Err(("future.radius".into(), "must be <= 100".into()))
                } else {
                    Ok(())
                }
            };
            if let Some(v) = form.ui::<FutureOps>(ui, validate) {
                *out = Some(v);
            }
        },
        (form, None),
    );
    h.run();
    h.snapshot("settings_form_generic");
    // Pick a variant in the inferred combo box.
    h.get_by_label("mode").click();
    h.run();
    h.get_by_label("exact").click();
    h.run();
    assert_eq!(h.state().1.as_ref().unwrap().future.mode, Mode::Exact);
    // A value the struct rejects is shown under the section and not applied.
    h.state_mut().1 = None;
    h.get_by_label("radius").hover();
    let radius = h
        .get_all_by_role(egui::accesskit::Role::SpinButton)
        .next()
        .unwrap();
    radius.set_value_accesskit(500.0);
    h.run();
    assert!(h.state().1.is_none());
    assert_eq!(
        h.state().0.error("future"),
        Some("future.radius: must be <= 100")
    );
    // An array is edited as TOML text.
    let field = h
        .get_all_by_value("[0.0, 45.0, 90.0, 135.0]")
        .next()
        .unwrap();
    field.focus();
    field.type_text("x");
    h.run();
    assert!(h.state().0.error("future").is_some(), "invalid TOML array");
}

// ---- a real window under Xvfb ----

/// Runs scripts/ui_smoke.sh (a real window, a screenshot, a clean exit), then checks persistence:
/// a value written into the saved state is restored by a second run and saved again on exit.
#[test]
fn xvfb_smoke_and_persistence() {
    let have = |c: &str| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(have("xvfb-run") && have("import")) {
        assert!(
            std::env::var("MORPHOSCOPE_REQUIRE_XVFB").as_deref() != Ok("1"),
            "xvfb-run or ImageMagick missing"
        );
        eprintln!("xvfb-run or ImageMagick (import) missing; skipped");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = tempfile::tempdir().unwrap();
    let smoke = |secs: &str| {
        let status = std::process::Command::new("bash")
            .arg(format!("{root}/scripts/ui_smoke.sh"))
            .env("MORPHOSCOPE_BIN", env!("CARGO_BIN_EXE_morphoscope"))
            .env("UI_SMOKE_OUT", out.path())
            .env("UI_SMOKE_SECS", secs)
            .status()
            .unwrap();
        assert!(status.success(), "scripts/ui_smoke.sh failed");
    };
    smoke("6");
    let state = out.path().join("data/morphoscope/app.ron");
    let text = std::fs::read_to_string(&state).unwrap();
    let (from, to) = (
        r#"settings_path:\"morphoscope.toml\""#,
        r#"settings_path:\"persisted.toml\""#,
    );
    assert!(text.contains(from), "viewer state not saved: {state:?}");
    std::fs::write(&state, text.replace(from, to)).unwrap();
    smoke("3");
    assert!(
        std::fs::read_to_string(&state).unwrap().contains(to),
        "saved viewer state was not restored"
    );
}

#[test]
fn a_grid_of_streams_focuses_the_one_clicked_and_goes_back() {
    let settings = Settings::defaults().unwrap();
    let (a, link_a) = ViewerApp::detached(settings.clone(), "test:ball", BACKEND);
    let (b, link_b) = ViewerApp::detached(settings, "test:smpte", BACKEND);
    let mut h = Harness::builder()
        .with_size([1280.0, 800.0])
        .build_ui_state(
            |ui, g: &mut GridApp| g.show(ui),
            GridApp::from_apps(vec![a, b]),
        );
    link_a.deliver(canned_frame(0));
    link_b.deliver(canned_frame(1));
    link_b.deliver(canned_frame(2));
    h.run();
    assert_eq!(h.state().focused(), None, "the grid first");
    // Two streams: two cells side by side; the right one is stream 1.
    let p = egui::pos2(960.0, 400.0);
    h.hover_at(p);
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
    }
    h.run();
    assert_eq!(h.state().focused(), Some(1));
    h.get_by_label_contains("stream 1 of 2: test:smpte");
    // The focused stream is a whole viewer: its panels are there.
    h.get_by_label("Analyses");
    h.get_by_label("back to all streams").click();
    h.run();
    assert_eq!(h.state().focused(), None, "back to the grid");
}
