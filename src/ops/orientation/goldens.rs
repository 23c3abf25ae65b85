//! Golden tests against OpenCV (`tests/data/orientation/`, made by `make_goldens.py` there):
//! `morphologyEx(MORPH_OPEN / MORPH_CLOSE)` with the segment of the definition at 0°, 45°, 90°
//! and 135° on crops of real images, u8, u16 and f32. Equality is exact.

use crate::image::Image;

use super::{LinearOpeningParams, Sample, linear_opening};

/// A parsed `.npy` array: dtype descriptor, shape and raw little-endian data.
struct Npy {
    descr: &'static str,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn parse_npy(mut bytes: &[u8]) -> Npy {
    let a = crate::io::npy::read(&mut bytes).expect("a readable .npy file");
    Npy {
        descr: a.dtype.descr(),
        shape: a.shape,
        data: a.bytes,
    }
}

trait FromLe: Sized + Copy {
    const DESCR: &'static str;
    fn from_le(b: &[u8]) -> Self;
}
impl FromLe for u8 {
    const DESCR: &'static str = "|u1";
    fn from_le(b: &[u8]) -> Self {
        b[0]
    }
}
impl FromLe for u16 {
    const DESCR: &'static str = "<u2";
    fn from_le(b: &[u8]) -> Self {
        u16::from_le_bytes([b[0], b[1]])
    }
}
impl FromLe for f32 {
    const DESCR: &'static str = "<f4";
    fn from_le(b: &[u8]) -> Self {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// Plane `i` of an (n, H, W) array, or the whole (H, W) array for `i = 0`.
fn plane<T: FromLe>(npy: &Npy, i: usize) -> Image<T> {
    assert_eq!(npy.descr, T::DESCR);
    let (h, w) = (
        npy.shape[npy.shape.len() - 2],
        npy.shape[npy.shape.len() - 1],
    );
    let sz = std::mem::size_of::<T>();
    let base = i * w * h * sz;
    let px = (0..w * h)
        .map(|k| T::from_le(&npy.data[base + k * sz..]))
        .collect();
    Image::from_vec(w, h, px).unwrap()
}

fn check_set<T: FromLe + Sample + PartialEq>(name: &str, input: &[u8], cases: &[u8]) -> usize {
    let index: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/data/orientation/goldens.json")).unwrap();
    let set = index["sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap();
    let input = parse_npy(input);
    let cases_npy = parse_npy(cases);
    let img = plane::<T>(&input, 0);
    let list = set["cases"].as_array().unwrap();
    assert_eq!(list.len(), cases_npy.shape[0]);
    for (i, case) in list.iter().enumerate() {
        let p = LinearOpeningParams {
            length: case["length"].as_u64().unwrap() as u32,
            angle: case["angle"].as_f64().unwrap(),
            closing: case["op"] == "close",
        };
        let want = plane::<T>(&cases_npy, i);
        let got = linear_opening(img.view(), &p).unwrap();
        let diff = got
            .data()
            .iter()
            .zip(want.data())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            diff, 0,
            "{name} case {case}: {diff} pixels differ from OpenCV"
        );
    }
    list.len()
}

#[test]
fn opencv_goldens() {
    let mut n = 0;
    n += check_set::<u8>(
        "building_u8",
        include_bytes!("../../../tests/data/orientation/building_u8_input.npy"),
        include_bytes!("../../../tests/data/orientation/building_u8_cases.npy"),
    );
    n += check_set::<u8>(
        "baboon_u8",
        include_bytes!("../../../tests/data/orientation/baboon_u8_input.npy"),
        include_bytes!("../../../tests/data/orientation/baboon_u8_cases.npy"),
    );
    n += check_set::<u16>(
        "building_u16",
        include_bytes!("../../../tests/data/orientation/building_u16_input.npy"),
        include_bytes!("../../../tests/data/orientation/building_u16_cases.npy"),
    );
    n += check_set::<f32>(
        "fruits_f32",
        include_bytes!("../../../tests/data/orientation/fruits_f32_input.npy"),
        include_bytes!("../../../tests/data/orientation/fruits_f32_cases.npy"),
    );
    assert_eq!(n, 16 + 8 + 8 + 4);
}
