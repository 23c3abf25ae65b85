//! Checks against OpenCV goldens (`tests/data/cca`, made by `make_goldens.py` with
//! opencv-python-headless): Otsu's level, and per component area, bounding box, centroid
//! (within 1e-6) and central moments (relative 1e-9), for 4- and 8-connectivity on real crops.

use crate::image::Image;
use crate::ops::cca::{Connectivity, Polarity, binarize, label_with_stats, otsu_threshold};

use crate::io::npy::golden::Npy;

pub(crate) fn load(name: &str) -> Npy {
    crate::io::npy::golden::load("cca", name)
}

pub(crate) const STEMS: &[&str] = &["baboon", "building", "fruits", "pic1", "text_motion"];

/// The stored grey crop, and (Otsu level, dark polarity) OpenCV used.
pub(crate) fn gray_crop(stem: &str) -> (Image<u8>, u32, bool) {
    let g = load(&format!("{stem}_gray.npy"));
    let (h, w) = (g.shape[0], g.shape[1]);
    let img = Image::from_vec(w, h, g.data.iter().map(|&v| v as u8).collect()).expect("crop size");
    let t = load(&format!("{stem}_otsu.npy"));
    (img, t.data[0] as u32, t.data[1] != 0.0)
}

#[test]
fn otsu_and_components_match_opencv() {
    for stem in STEMS {
        let (img, t_cv, dark) = gray_crop(stem);
        let t = otsu_threshold(img.view());
        assert_eq!(t, t_cv, "{stem}: Otsu level");
        let pol = if dark {
            Polarity::Dark
        } else {
            Polarity::Bright
        };
        let mask = binarize(img.view(), t, pol);
        for conn in [Connectivity::Four, Connectivity::Eight] {
            let gold = load(&format!("{stem}_c{}.npy", conn.neighbors()));
            let n = gold.shape[0];
            let (labels, table) = label_with_stats(mask.view(), conn).expect("labels");
            assert_eq!(table.len(), n, "{stem} {conn:?}: component count");
            for (i, c) in table.components.iter().enumerate() {
                let r = &gold.data[i * 11..(i + 1) * 11];
                let first = r[0] as usize;
                assert_eq!(
                    labels.data()[first],
                    i as u32 + 1,
                    "{stem} {conn:?}: raster order at row {i}"
                );
                let ours = [c.left, c.top, c.width, c.height].map(f64::from);
                assert_eq!(ours, [r[1], r[2], r[3], r[4]], "{stem} {conn:?} #{i}: bbox");
                assert_eq!(c.area as f64, r[5], "{stem} {conn:?} #{i}: area");
                assert!(
                    (c.centroid[0] - r[6]).abs() < 1e-6 && (c.centroid[1] - r[7]).abs() < 1e-6,
                    "{stem} #{i}: centroid"
                );
                for (ours, cv) in [
                    (c.moments.mu20, r[8]),
                    (c.moments.mu11, r[9]),
                    (c.moments.mu02, r[10]),
                ] {
                    assert!(
                        (ours - cv).abs() <= 1e-9 * (1.0 + cv.abs()),
                        "{stem} {conn:?} #{i}: moment {ours} vs {cv}"
                    );
                }
            }
        }
    }
}
