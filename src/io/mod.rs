//! Image files in and out: PNG (8/16-bit grey, RGB, RGBA), JPEG and TIFF through the `image`
//! crate; `.npy` through [`npy`]. Output by extension: `.png` or `.npy`. Errors say which file
//! and why (missing, unreadable, truncated, unsupported bit depth).

pub mod npy;

use std::path::{Path, PathBuf};

use crate::image::{DynImage, Image};

/// File I/O errors.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Underlying I/O failure.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file is not what its name says, or is truncated.
    #[error("{0}")]
    Format(String),
    /// A valid file of a kind we do not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Wraps any of the above with the path.
    #[error("{}: {source}", path.display())]
    At {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<IoError>,
    },
}

fn at(path: &Path) -> impl FnOnce(IoError) -> IoError + '_ {
    move |e| IoError::At {
        path: path.to_owned(),
        source: Box::new(e),
    }
}

/// Reads an image file (PNG, JPEG, TIFF, or `.npy` 2-D u8/u16/f32, or H×W×3 u8).
pub fn read_image(path: &Path) -> Result<DynImage, IoError> {
    read_image_inner(path).map_err(at(path))
}

fn read_image_inner(path: &Path) -> Result<DynImage, IoError> {
    if !path.exists() {
        return Err(IoError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "file not found",
        )));
    }
    if path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        let mut f = std::fs::File::open(path)?;
        let a = npy::read(&mut f)?;
        return dyn_from_npy(a);
    }
    let reader = image::ImageReader::open(path)?.with_guessed_format()?;
    let img = reader.decode().map_err(|e| match e {
        image::ImageError::Unsupported(u) => IoError::Unsupported(u.to_string()),
        image::ImageError::IoError(io) => IoError::Io(io),
        other => IoError::Format(other.to_string()),
    })?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let bad = |e: crate::image::ImageError| IoError::Format(e.to_string());
    Ok(match img {
        image::DynamicImage::ImageLuma8(g) => {
            DynImage::Gray8(Image::from_vec(w, h, g.into_raw()).map_err(bad)?)
        }
        image::DynamicImage::ImageLuma16(g) => {
            DynImage::Gray16(Image::from_vec(w, h, g.into_raw()).map_err(bad)?)
        }
        image::DynamicImage::ImageLumaA16(_)
        | image::DynamicImage::ImageRgb16(_)
        | image::DynamicImage::ImageRgba16(_) => {
            // 16-bit colour: keep 16 bits of luminance rather than dropping to 8.
            let g = img.to_luma16();
            DynImage::Gray16(Image::from_vec(w, h, g.into_raw()).map_err(bad)?)
        }
        image::DynamicImage::ImageRgb32F(_) | image::DynamicImage::ImageRgba32F(_) => {
            let g = img.to_luma32f();
            DynImage::F32(Image::from_vec(w, h, g.into_raw()).map_err(bad)?)
        }
        other => {
            let rgb = other.to_rgb8();
            let px: Vec<[u8; 3]> = rgb.pixels().map(|p| p.0).collect();
            if px.iter().all(|p| p[0] == p[1] && p[1] == p[2])
                && matches!(other, image::DynamicImage::ImageLumaA8(_))
            {
                DynImage::Gray8(
                    Image::from_vec(w, h, px.iter().map(|p| p[0]).collect()).map_err(bad)?,
                )
            } else {
                DynImage::Rgb8(Image::from_vec(w, h, px).map_err(bad)?)
            }
        }
    })
}

fn dyn_from_npy(a: npy::NpyArray) -> Result<DynImage, IoError> {
    let bad = |e: crate::image::ImageError| IoError::Format(e.to_string());
    match (a.dtype, a.shape.as_slice()) {
        (npy::NpyDtype::U8, &[h, w]) => Ok(DynImage::Gray8(
            Image::from_vec(w, h, a.bytes).map_err(bad)?,
        )),
        (npy::NpyDtype::U8, &[h, w, 3]) => {
            let px = a.bytes.as_chunks::<3>().0.to_vec();
            Ok(DynImage::Rgb8(Image::from_vec(w, h, px).map_err(bad)?))
        }
        (npy::NpyDtype::U16, &[h, w]) => {
            let px = a
                .bytes
                .as_chunks::<2>()
                .0
                .iter()
                .map(|c| u16::from_le_bytes(*c))
                .collect();
            Ok(DynImage::Gray16(Image::from_vec(w, h, px).map_err(bad)?))
        }
        (npy::NpyDtype::F32, &[h, w]) => {
            let px = a
                .bytes
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| f32::from_le_bytes(*c))
                .collect();
            Ok(DynImage::F32(Image::from_vec(w, h, px).map_err(bad)?))
        }
        (d, s) => Err(IoError::Unsupported(format!(
            ".npy {d:?} array of shape {s:?} (want 2-D u8/u16/f32 or HxWx3 u8)"
        ))),
    }
}

/// Output kinds chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    /// `.png`
    Png,
    /// `.npy`
    Npy,
    /// `.json`
    Json,
}

/// The output kind for a path, or an error naming the extensions allowed.
pub fn out_kind(path: &Path, allowed: &[OutKind]) -> Result<OutKind, IoError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let kind = match ext.as_str() {
        "png" => OutKind::Png,
        "npy" => OutKind::Npy,
        "json" => OutKind::Json,
        _ => {
            return Err(IoError::Unsupported(format!(
                "output extension `.{ext}` (use {})",
                names(allowed)
            )));
        }
    };
    if allowed.contains(&kind) {
        Ok(kind)
    } else {
        Err(IoError::Unsupported(format!(
            "output extension `.{ext}` for this op (use {})",
            names(allowed)
        )))
    }
}

fn names(k: &[OutKind]) -> String {
    k.iter()
        .map(|k| match k {
            OutKind::Png => ".png",
            OutKind::Npy => ".npy",
            OutKind::Json => ".json",
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

fn create(path: &Path) -> Result<std::io::BufWriter<std::fs::File>, IoError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(std::io::BufWriter::new(std::fs::File::create(path)?))
}

/// Writes an image as PNG (Gray8, Gray16, Rgb8) or `.npy` (any), by extension.
pub fn write_image(path: &Path, img: &DynImage) -> Result<(), IoError> {
    write_image_inner(path, img).map_err(at(path))
}

fn write_image_inner(path: &Path, img: &DynImage) -> Result<(), IoError> {
    let kind = out_kind(path, &[OutKind::Png, OutKind::Npy])?;
    let (w, h) = img.size();
    if kind == OutKind::Npy {
        let mut f = create(path)?;
        return match img {
            DynImage::Gray8(i) => npy::write(&mut f, &[h, w], i.to_packed_vec().into_iter()),
            DynImage::Gray16(i) => npy::write(&mut f, &[h, w], i.to_packed_vec().into_iter()),
            DynImage::F32(i) => npy::write(&mut f, &[h, w], i.to_packed_vec().into_iter()),
            DynImage::Rgb8(i) => {
                npy::write(&mut f, &[h, w, 3], i.to_packed_vec().into_iter().flatten())
            }
        };
    }
    if w == 0 || h == 0 {
        return Err(IoError::Unsupported(
            "PNG cannot hold an empty image; use .npy".into(),
        ));
    }
    let (w32, h32) = (w as u32, h as u32);
    let err = |e: image::ImageError| IoError::Format(e.to_string());
    let fmt = image::ImageFormat::Png;
    match img {
        DynImage::Gray8(i) => image::GrayImage::from_raw(w32, h32, i.to_packed_vec())
            .map(|b| b.save_with_format(path, fmt)),
        DynImage::Gray16(i) => {
            image::ImageBuffer::<image::Luma<u16>, _>::from_raw(w32, h32, i.to_packed_vec())
                .map(|b| b.save_with_format(path, fmt))
        }
        DynImage::Rgb8(i) => image::RgbImage::from_raw(w32, h32, i.to_packed_vec().concat())
            .map(|b| b.save_with_format(path, fmt)),
        DynImage::F32(_) => {
            return Err(IoError::Unsupported(
                "float images are written as .npy, not PNG".into(),
            ));
        }
    }
    .ok_or_else(|| IoError::Format("image buffer size mismatch".into()))?
    .map_err(err)
}

/// Writes a 2-D `.npy` of labels or maps.
pub fn write_npy<T: npy::NpyElement>(path: &Path, img: &Image<T>) -> Result<(), IoError> {
    let mut f = create(path).map_err(at(path))?;
    npy::write(
        &mut f,
        &[img.height(), img.width()],
        img.to_packed_vec().into_iter(),
    )
    .map_err(at(path))
}

/// Writes pretty JSON.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), IoError> {
    let f = create(path).map_err(at(path))?;
    serde_json::to_writer_pretty(f, value)
        .map_err(|e| IoError::Format(e.to_string()))
        .map_err(at(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_and_npy_round_trip_all_gray_depths() {
        let dir = tempfile::tempdir().unwrap();
        let g8 = DynImage::Gray8(Image::from_fn(5, 3, |x, y| (x * 40 + y) as u8));
        let g16 = DynImage::Gray16(Image::from_fn(5, 3, |x, y| (x * 9000 + y) as u16));
        let rgb = DynImage::Rgb8(Image::from_fn(4, 2, |x, y| [x as u8, y as u8, 7]));
        for (img, name) in [(&g8, "a"), (&g16, "b"), (&rgb, "c")] {
            for ext in ["png", "npy"] {
                let p = dir.path().join(format!("{name}.{ext}"));
                write_image(&p, img).unwrap();
                assert_eq!(&read_image(&p).unwrap(), img, "{name}.{ext}");
            }
        }
    }

    #[test]
    fn bad_files_give_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fake.png");
        std::fs::write(&p, b"this is text").unwrap();
        let e = read_image(&p).unwrap_err().to_string();
        assert!(e.contains("fake.png"), "{e}");
        assert!(
            read_image(&dir.path().join("missing.png"))
                .unwrap_err()
                .to_string()
                .contains("not found")
        );
        let g = DynImage::Gray8(Image::new(2, 2, 1));
        assert!(write_image(&dir.path().join("x.bmp"), &g).is_err());
    }

    #[test]
    fn truncated_png_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.png");
        write_image(
            &p,
            &DynImage::Gray8(Image::from_fn(64, 64, |x, y| (x ^ y) as u8)),
        )
        .unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_image(&p).is_err());
    }
}
