//! Checks of the scene renderer itself.

use super::catalogue::{held_out, tuning};
use super::*;

#[test]
fn ground_truth_boxes_are_the_visible_pixels() {
    let mut scene = catalogue::RandomSpec {
        objects: 0,
        convoys: 0,
        occluders: 0,
        ..catalogue::RandomSpec::default()
    }
    .build();
    scene.noise = Noise::default();
    scene.frames = 3;
    scene.objects = vec![
        SceneObject {
            id: 1,
            radii: [5.0, 5.0],
            grey: 100,
            path: vec![Some([20.0, 20.0]); 3],
        },
        // Covers the right half of object 1 at frame 1.
        SceneObject {
            id: 2,
            radii: [5.0, 5.0],
            grey: 200,
            path: vec![Some([60.0, 20.0]), Some([25.0, 20.0]), Some([20.0, 20.0])],
        },
    ];
    let (img, truth) = scene.render(0);
    assert_eq!(img.get(20, 20), 100);
    assert_eq!(img.get(0, 0), scene.background);
    assert_eq!(truth[0].bbox, [15.0, 15.0, 11.0, 11.0]);
    assert_eq!(truth[0].visibility, 1.0);
    let (_, truth) = scene.render(1);
    // Object 2 (x 20..=30 on the centre row, narrower above and below) leaves columns 15..=21.
    assert_eq!(truth[0].bbox, [15.0, 15.0, 7.0, 11.0]);
    assert!(truth[0].visibility < 0.6 && truth[0].visibility > 0.3);
    // Fully covered: out of the ground truth.
    let (_, truth) = scene.render(2);
    assert_eq!(truth.iter().map(|t| t.id).collect::<Vec<_>>(), vec![2]);
}

#[test]
fn occluders_and_background_stay_below_the_threshold() {
    for scene in tuning().iter().chain(held_out().iter()) {
        assert!(
            scene.width % 2 == 0 && scene.height % 2 == 0,
            "{}",
            scene.name
        );
        let max_dark = scene
            .background
            .max(scene.occluders.iter().map(|o| o.grey).max().unwrap_or(0))
            + scene.noise.pixel;
        assert!(max_dark < FOREGROUND_THRESHOLD, "{}", scene.name);
        assert!(
            scene
                .objects
                .iter()
                .all(|o| o.grey >= FOREGROUND_THRESHOLD + scene.noise.pixel + 20),
            "{}",
            scene.name
        );
        assert!(
            scene.objects.iter().all(|o| o.path.len() == scene.frames),
            "{}",
            scene.name
        );
    }
}

#[test]
fn rendering_is_deterministic() {
    let s = &tuning()[5];
    assert_eq!(s.render(17), s.render(17));
    assert_ne!(s.render(17).0, s.render(18).0);
}
