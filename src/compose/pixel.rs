//! The integer pixel arithmetic of the compose step, written once for the CPU twin and mirrored
//! line by line in `kernels/compose.cu` (keep the two in sync): blending with a quantised alpha,
//! the residue's alpha, and the BT.601 limited-range RGB to YUV conversion of the I420 picture.
//!
//! I420 (8-bit BT.601, limited range, integer coefficients scaled by 256):
//! - `Y = ((66 R + 129 G + 25 B + 128) >> 8) + 16` for every pixel (16..=235);
//! - for every 2x2 block, with `ΣR`, `ΣG`, `ΣB` the sums of its four pixels (the average times
//!   4, so the block average and the rounding are one step):
//!   `U = ((-38 ΣR - 74 ΣG + 112 ΣB + 512) >> 10) + 128`,
//!   `V = ((112 ΣR - 94 ΣG - 18 ΣB + 512) >> 10) + 128` (16..=240; `>>` is an arithmetic shift,
//!   i.e. floor division, on both sides).

/// `dst*(255-a) + src*a`, divided by 255 and rounded: the mix of `src` over `dst` with alpha
/// `a` in `0..=255` (`a = 0` keeps `dst`, `a = 255` gives `src`).
#[inline]
#[must_use]
pub(crate) fn mix(dst: u8, src: u8, alpha: u32) -> u8 {
    ((u32::from(dst) * (255 - alpha) + u32::from(src) * alpha + 127) / 255) as u8
}

/// `dst + src*a/255` (rounded), clamped to 255: `src` added over `dst` with alpha `a`.
#[inline]
#[must_use]
pub fn add(dst: u8, src: u8, alpha: u32) -> u8 {
    (u32::from(dst) + (u32::from(src) * alpha + 127) / 255).min(255) as u8
}

/// `mix` or [`add`] of a pixel, per channel.
#[inline]
#[must_use]
pub fn blend(dst: [u8; 3], src: [u8; 3], alpha: u32, additive: bool) -> [u8; 3] {
    if additive {
        [
            add(dst[0], src[0], alpha),
            add(dst[1], src[1], alpha),
            add(dst[2], src[2], alpha),
        ]
    } else {
        [
            mix(dst[0], src[0], alpha),
            mix(dst[1], src[1], alpha),
            mix(dst[2], src[2], alpha),
        ]
    }
}

/// The alpha of a residue value `v` for a layer whose strongest residue gets `peak`:
/// `min(4 v, 255) * peak / 255`, rounded (see [`super::style::RESIDUE_GAIN`]).
#[inline]
#[must_use]
pub(crate) fn residue_alpha(v: u8, peak: u32) -> u32 {
    ((u32::from(v) * super::style::RESIDUE_GAIN).min(255) * peak + 127) / 255
}

/// BT.601 limited-range luma of one pixel.
#[inline]
#[must_use]
pub(crate) fn luma(p: [u8; 3]) -> u8 {
    let [r, g, b] = p.map(i32::from);
    (((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8
}

/// BT.601 limited-range chroma (U, V) of a 2x2 block from the sums of its four pixels' channels.
#[inline]
#[must_use]
pub fn chroma(sum: [i32; 3]) -> (u8, u8) {
    let [r, g, b] = sum;
    let u = ((-38 * r - 74 * g + 112 * b + 512) >> 10) + 128;
    let v = ((112 * r - 94 * g - 18 * b + 512) >> 10) + 128;
    (u as u8, v as u8)
}

/// A colour packed as the kernels store it: `r | g << 8 | b << 16`.
#[inline]
#[must_use]
pub fn pack_rgb(c: [u8; 3]) -> u32 {
    u32::from(c[0]) | u32::from(c[1]) << 8 | u32::from(c[2]) << 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_and_add_match_their_definitions() {
        for d in 0..=255u8 {
            for s in [0u8, 1, 77, 128, 254, 255] {
                assert_eq!(mix(d, s, 0), d);
                assert_eq!(mix(d, s, 255), s);
                assert_eq!(add(d, s, 0), d);
                assert_eq!(add(d, 0, 255), d);
                assert_eq!(add(d, s, 255), (u32::from(d) + u32::from(s)).min(255) as u8);
                for a in [1u32, 102, 128, 229] {
                    let exact =
                        (f64::from(d) * f64::from(255 - a) + f64::from(s) * f64::from(a)) / 255.0;
                    assert!(
                        (f64::from(mix(d, s, a)) - exact).abs() <= 0.5 + 1e-9,
                        "mix({d}, {s}, {a})"
                    );
                }
            }
        }
    }

    #[test]
    fn residue_alpha_grows_to_the_peak() {
        assert_eq!(residue_alpha(0, 229), 0);
        assert_eq!(residue_alpha(64, 229), 229);
        assert_eq!(residue_alpha(255, 229), 229);
        assert_eq!(residue_alpha(32, 255), 128);
        assert!((1..64).all(|v| residue_alpha(v, 229) <= residue_alpha(v + 1, 229)));
    }

    #[test]
    fn yuv_of_reference_colours() {
        assert_eq!(luma([0, 0, 0]), 16);
        assert_eq!(luma([255, 255, 255]), 235);
        assert_eq!(chroma([0; 3]), (128, 128));
        assert_eq!(chroma([1020; 3]), (128, 128));
        // Pure red, green and blue (BT.601: U/V of red 90/240, green 54/34, blue 240/110).
        assert_eq!((luma([255, 0, 0]), chroma([1020, 0, 0])), (82, (90, 240)));
        assert_eq!((luma([0, 255, 0]), chroma([0, 1020, 0])), (144, (54, 34)));
        assert_eq!((luma([0, 0, 255]), chroma([0, 0, 1020])), (41, (240, 110)));
    }
}
