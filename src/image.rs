//! Strided images: the one pixel container every op, source and sink shares.
//!
//! An [`Image<T>`] owns `height` rows of `width` pixels; row `y` starts at element `y * stride`
//! (`stride >= width`), so frames mapped from GStreamer with padded rows (a 642-pixel GRAY8 row
//! is 644 bytes long) are kept without a copy of the padding away. [`ImageView`] borrows the
//! same layout. Pixels are generic: `u8` (Gray8), `u16` (Gray16), `f32`, `[u8; 3]` (Rgb8),
//! `u32`/`i32` for label and parent images. [`DynImage`] is the runtime-typed form that file
//! I/O and sources hand around.
//!
//! Sizes of zero are allowed (an empty image); every op must accept them.

use thiserror::Error;

/// Errors building an image from raw parts.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImageError {
    /// The buffer does not hold `height` rows of `stride` elements (the last row needs only `width`).
    #[error("buffer of {len} elements is too small for {width}x{height} with stride {stride}")]
    BufferTooSmall {
        /// Pixels per row.
        width: usize,
        /// Rows.
        height: usize,
        /// Elements between row starts.
        stride: usize,
        /// Elements supplied.
        len: usize,
    },
    /// `stride < width`.
    #[error("stride {stride} is smaller than width {width}")]
    StrideTooSmall {
        /// Pixels per row.
        width: usize,
        /// Elements between row starts.
        stride: usize,
    },
    /// Two images that must agree in size do not.
    #[error("size mismatch: {a_width}x{a_height} vs {b_width}x{b_height}")]
    SizeMismatch {
        /// First width.
        a_width: usize,
        /// First height.
        a_height: usize,
        /// Second width.
        b_width: usize,
        /// Second height.
        b_height: usize,
    },
}

/// Number of elements a strided buffer must hold.
fn required_len(width: usize, height: usize, stride: usize) -> usize {
    if width == 0 || height == 0 {
        0
    } else {
        (height - 1) * stride + width
    }
}

fn check_layout(width: usize, height: usize, stride: usize, len: usize) -> Result<(), ImageError> {
    if stride < width {
        return Err(ImageError::StrideTooSmall { width, stride });
    }
    if len < required_len(width, height, stride) {
        return Err(ImageError::BufferTooSmall {
            width,
            height,
            stride,
            len,
        });
    }
    Ok(())
}

/// An owned image with `stride >= width` elements between row starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Image<T> {
    width: usize,
    height: usize,
    stride: usize,
    data: Vec<T>,
}

impl<T: Copy> Image<T> {
    /// A packed (`stride == width`) image filled with `value`.
    #[must_use]
    pub fn new(width: usize, height: usize, value: T) -> Self {
        Self {
            width,
            height,
            stride: width,
            data: vec![value; width * height],
        }
    }

    /// A packed image from row-major pixels; `data.len()` must be `width * height`.
    pub fn from_vec(width: usize, height: usize, data: Vec<T>) -> Result<Self, ImageError> {
        Self::from_strided(width, height, width, data)
    }

    /// An image over a strided buffer (padding elements are kept but never read by ops).
    pub fn from_strided(
        width: usize,
        height: usize,
        stride: usize,
        data: Vec<T>,
    ) -> Result<Self, ImageError> {
        check_layout(width, height, stride, data.len())?;
        Ok(Self {
            width,
            height,
            stride,
            data,
        })
    }

    /// This image mirrored to fill `width` x `height`: copies side by side, every other one
    /// flipped, so that the edges meet without a seam (real content at any frame size, for
    /// benchmarks and tests). An empty image gives an empty one.
    #[must_use]
    pub fn mirror_tiled(&self, width: usize, height: usize) -> Self {
        let (sw, sh) = (self.width, self.height);
        if sw == 0 || sh == 0 {
            return Self {
                width: 0,
                height: 0,
                stride: 0,
                data: Vec::new(),
            };
        }
        let mirror = |i: usize, n: usize| {
            if (i / n).is_multiple_of(2) {
                i % n
            } else {
                n - 1 - i % n
            }
        };
        Self::from_fn(width, height, |x, y| self.get(mirror(x, sw), mirror(y, sh)))
    }

    /// A packed image whose pixel `(x, y)` is `f(x, y)`.
    #[must_use]
    pub fn from_fn(width: usize, height: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(width * height);
        for y in 0..height {
            for x in 0..width {
                data.push(f(x, y));
            }
        }
        Self {
            width,
            height,
            stride: width,
            data,
        }
    }

    /// Pixels per row.
    #[must_use]
    pub fn width(&self) -> usize {
        self.width
    }
    /// Rows.
    #[must_use]
    pub fn height(&self) -> usize {
        self.height
    }
    /// Elements between row starts.
    #[must_use]
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// `width * height`.
    #[must_use]
    pub fn len(&self) -> usize {
        self.width * self.height
    }
    /// True when the image has no pixels.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The raw buffer, padding included.
    #[must_use]
    pub fn data(&self) -> &[T] {
        &self.data
    }
    /// The raw buffer, padding included.
    pub(crate) fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// Consumes the image, returning its raw buffer (padding included).
    #[must_use]
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
    /// True when rows are packed (`stride == width`), so `data()` is exactly the pixels.
    #[must_use]
    pub(crate) fn is_packed(&self) -> bool {
        self.stride == self.width || self.height <= 1
    }
    /// Pixel at column `x`, row `y`. Panics when out of bounds (a programming error).
    #[must_use]
    pub fn get(&self, x: usize, y: usize) -> T {
        debug_assert!(x < self.width && y < self.height);
        self.data[y * self.stride + x]
    }
    /// Sets pixel `(x, y)`.
    pub fn set(&mut self, x: usize, y: usize, v: T) {
        debug_assert!(x < self.width && y < self.height);
        self.data[y * self.stride + x] = v;
    }
    /// Row `y` (exactly `width` pixels).
    #[must_use]
    pub fn row(&self, y: usize) -> &[T] {
        let s = y * self.stride;
        &self.data[s..s + self.width]
    }
    /// Row `y`, mutable.
    pub fn row_mut(&mut self, y: usize) -> &mut [T] {
        let s = y * self.stride;
        &mut self.data[s..s + self.width]
    }
    /// Iterator over the rows.
    pub fn rows(&self) -> impl Iterator<Item = &[T]> + '_ {
        (0..self.height).map(move |y| self.row(y))
    }
    /// A borrowed view of the whole image.
    #[must_use]
    pub fn view(&self) -> ImageView<'_, T> {
        ImageView {
            width: self.width,
            height: self.height,
            stride: self.stride,
            data: &self.data,
        }
    }
    /// A packed copy (copies only when padded).
    #[must_use]
    pub fn to_packed(&self) -> Image<T> {
        self.view().to_image()
    }
    /// This image packed, copying only when rows are padded.
    #[must_use]
    pub fn into_packed(self) -> Image<T> {
        if self.is_packed() {
            let mut s = self;
            s.data.truncate(s.width * s.height);
            s.stride = s.width;
            s
        } else {
            self.to_packed()
        }
    }
    /// Pixels in row-major order without padding (copies only when padded).
    #[must_use]
    pub fn to_packed_vec(&self) -> Vec<T> {
        if self.is_packed() {
            self.data[..self.len()].to_vec()
        } else {
            self.rows().flat_map(|r| r.iter().copied()).collect()
        }
    }
    /// A packed image with `f` applied to every pixel.
    #[must_use]
    pub fn map<U: Copy>(&self, f: impl FnMut(T) -> U) -> Image<U> {
        self.view().map(f)
    }

    /// [`Image::map`] with the rows on every core (for frame-sized conversions).
    #[must_use]
    pub fn par_map<U: Copy + Default + Send>(&self, f: impl Fn(T) -> U + Sync) -> Image<U>
    where
        T: Sync,
    {
        self.view().par_map(f)
    }
}

/// A borrowed strided image.
#[derive(Clone, Copy, Debug)]
pub struct ImageView<'a, T> {
    width: usize,
    height: usize,
    stride: usize,
    data: &'a [T],
}

impl<'a, T: Copy> ImageView<'a, T> {
    /// A view over a strided buffer.
    pub fn new(
        width: usize,
        height: usize,
        stride: usize,
        data: &'a [T],
    ) -> Result<Self, ImageError> {
        check_layout(width, height, stride, data.len())?;
        Ok(Self {
            width,
            height,
            stride,
            data,
        })
    }
    /// Pixels per row.
    #[must_use]
    pub fn width(&self) -> usize {
        self.width
    }
    /// Rows.
    #[must_use]
    pub fn height(&self) -> usize {
        self.height
    }
    /// Elements between row starts.
    #[must_use]
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// `width * height`.
    #[must_use]
    pub fn len(&self) -> usize {
        self.width * self.height
    }
    /// True when the view has no pixels.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The raw buffer, padding included.
    #[must_use]
    pub fn data(&self) -> &'a [T] {
        self.data
    }
    /// Pixel at column `x`, row `y`.
    #[must_use]
    pub fn get(&self, x: usize, y: usize) -> T {
        debug_assert!(x < self.width && y < self.height);
        self.data[y * self.stride + x]
    }
    /// Row `y` (exactly `width` pixels).
    #[must_use]
    pub fn row(&self, y: usize) -> &'a [T] {
        let s = y * self.stride;
        &self.data[s..s + self.width]
    }
    /// Iterator over the rows.
    pub fn rows(&self) -> impl Iterator<Item = &'a [T]> + '_ {
        (0..self.height).map(move |y| self.row(y))
    }
    /// A packed owned copy.
    #[must_use]
    pub fn to_image(&self) -> Image<T> {
        let data: Vec<T> = self.rows().flat_map(|r| r.iter().copied()).collect();
        Image {
            width: self.width,
            height: self.height,
            stride: self.width,
            data,
        }
    }
    /// A packed image with `f` applied to every pixel.
    #[must_use]
    pub fn map<U: Copy>(&self, mut f: impl FnMut(T) -> U) -> Image<U> {
        let mut data = Vec::with_capacity(self.width * self.height);
        for r in self.rows() {
            data.extend(r.iter().map(|&v| f(v)));
        }
        Image {
            width: self.width,
            height: self.height,
            stride: self.width,
            data,
        }
    }

    /// [`ImageView::map`] with the rows on every core (for frame-sized conversions).
    #[must_use]
    pub fn par_map<U: Copy + Default + Send>(&self, f: impl Fn(T) -> U + Sync) -> Image<U>
    where
        T: Sync,
    {
        use rayon::prelude::*;
        let (w, h) = (self.width, self.height);
        let mut out = Image::new(w, h, U::default());
        if w > 0 {
            out.data.par_chunks_mut(w).enumerate().for_each(|(y, dst)| {
                for (d, &v) in dst.iter_mut().zip(self.row(y)) {
                    *d = f(v);
                }
            });
        }
        out
    }
}

/// Grey-level pixel types the morphological ops accept (totally ordered, with extremes).
pub trait Gray: Copy + Ord + Default + Send + Sync + std::fmt::Debug + 'static {
    /// Smallest value.
    const MIN: Self;
    /// Largest value.
    const MAX: Self;
    /// Bits per sample (8 or 16).
    const BITS: u32;
    /// Value as `u32` (lossless).
    fn to_u32(self) -> u32;
    /// Value from `u32`, saturating at `MAX`.
    fn from_u32_sat(v: u32) -> Self;
    /// `MAX - self` (the inversion used for min-trees and closings).
    #[must_use]
    fn invert(self) -> Self;
}

impl Gray for u8 {
    const MIN: Self = 0;
    const MAX: Self = u8::MAX;
    const BITS: u32 = 8;
    fn to_u32(self) -> u32 {
        u32::from(self)
    }
    fn from_u32_sat(v: u32) -> Self {
        v.min(255) as u8
    }
    fn invert(self) -> Self {
        u8::MAX - self
    }
}

impl Gray for u16 {
    const MIN: Self = 0;
    const MAX: Self = u16::MAX;
    const BITS: u32 = 16;
    fn to_u32(self) -> u32 {
        u32::from(self)
    }
    fn from_u32_sat(v: u32) -> Self {
        v.min(65535) as u16
    }
    fn invert(self) -> Self {
        u16::MAX - self
    }
}

/// Pixel formats the pipeline and file I/O know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PixelFormat {
    /// 8-bit grey.
    Gray8,
    /// 16-bit grey.
    Gray16,
    /// 8-bit RGB, interleaved.
    Rgb8,
    /// 32-bit float grey.
    F32,
}

/// An image whose pixel type is known only at run time (files, sources).
#[derive(Clone, Debug, PartialEq)]
pub enum DynImage {
    /// 8-bit grey.
    Gray8(Image<u8>),
    /// 16-bit grey.
    Gray16(Image<u16>),
    /// 8-bit RGB.
    Rgb8(Image<[u8; 3]>),
    /// 32-bit float grey.
    F32(Image<f32>),
}

impl DynImage {
    /// The pixel format.
    #[must_use]
    pub fn format(&self) -> PixelFormat {
        match self {
            Self::Gray8(_) => PixelFormat::Gray8,
            Self::Gray16(_) => PixelFormat::Gray16,
            Self::Rgb8(_) => PixelFormat::Rgb8,
            Self::F32(_) => PixelFormat::F32,
        }
    }
    /// (width, height).
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        match self {
            Self::Gray8(i) => (i.width(), i.height()),
            Self::Gray16(i) => (i.width(), i.height()),
            Self::Rgb8(i) => (i.width(), i.height()),
            Self::F32(i) => (i.width(), i.height()),
        }
    }
}

/// RGB to grey, ITU-R BT.601 with OpenCV's fixed-point rounding
/// (`(R*4899 + G*9617 + B*1868 + 8192) >> 14`, as `cv::cvtColor(COLOR_RGB2GRAY)`).
#[must_use]
pub fn rgb_to_gray_pixel(p: [u8; 3]) -> u8 {
    let v = u32::from(p[0]) * 4899 + u32::from(p[1]) * 9617 + u32::from(p[2]) * 1868 + 8192;
    (v >> 14) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_and_par_map_skip_padding_and_pack() {
        for (w, h) in [(0, 0), (1, 1), (3, 2), (17, 9)] {
            let stride = w + 3;
            let data: Vec<u16> = (0..stride * h).map(|i| (i * 7 % 251) as u16).collect();
            let img = Image::from_strided(w, h, stride, data.clone()).unwrap();
            let naive: Vec<i64> = (0..h)
                .flat_map(|y| (0..w).map(move |x| (y, x)))
                .map(|(y, x)| i64::from(data[y * stride + x]) * 3)
                .collect();
            let want = Image::from_vec(w, h, naive).unwrap();
            assert_eq!(img.map(|v| i64::from(v) * 3), want, "{w}x{h}");
            assert_eq!(img.par_map(|v| i64::from(v) * 3), want, "{w}x{h}");
        }
    }

    #[test]
    fn strided_rows_skip_padding() {
        let img = Image::from_strided(3, 2, 4, vec![1u8, 2, 3, 99, 4, 5, 6]).unwrap();
        assert_eq!(img.row(1), &[4, 5, 6]);
        assert_eq!(img.to_packed_vec(), vec![1, 2, 3, 4, 5, 6]);
        assert!(!img.is_packed());
        assert_eq!(img.to_packed().data(), &[1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn mirror_tiling_flips_every_other_copy() {
        let img = Image::from_vec(2, 1, vec![1u8, 2]).unwrap();
        let tiled = img.mirror_tiled(5, 2);
        assert_eq!(tiled.to_packed_vec(), vec![1, 2, 2, 1, 1, 1, 2, 2, 1, 1]);
        assert_eq!(Image::<u8>::new(0, 0, 0).mirror_tiled(3, 3).width(), 0);
    }

    #[test]
    fn layout_errors_are_reported() {
        assert_eq!(
            Image::from_strided(3, 2, 2, vec![0u8; 6]).unwrap_err(),
            ImageError::StrideTooSmall {
                width: 3,
                stride: 2
            }
        );
        assert!(matches!(
            Image::from_strided(3, 2, 4, vec![0u8; 6]),
            Err(ImageError::BufferTooSmall { .. })
        ));
        assert!(Image::<u8>::from_vec(0, 5, vec![]).unwrap().is_empty());
    }

    #[test]
    fn gray_conversion_matches_opencv_rounding() {
        assert_eq!(rgb_to_gray_pixel([255, 255, 255]), 255);
        assert_eq!(rgb_to_gray_pixel([0, 0, 0]), 0);
        // (10*4899 + 200*9617 + 30*1868 + 8192) >> 14 = 124
        assert_eq!(rgb_to_gray_pixel([10, 200, 30]), 124);
    }
}
