//! The 1D opening of a line by van Herk / Gil-Werman (van Herk 1992, Gil and Werman 1993): the
//! minimum of every window of L = 2r + 1 samples from a prefix and a suffix minimum over blocks
//! of L, so three comparisons a sample whatever L and no data-dependent branch; then the
//! maximum of the erosion the same way. The GPU lines kernel (`kernels/orientation.cu`) computes
//! the same opening by the same blocks, one thread per line (its loop is modelled in
//! `blocks.rs`).
//!
//! # How it works
//!
//! The signal is padded with r samples of +∞ on each side (windows that stick out of the signal
//! ignore the outside) and cut into blocks of L from the first pad. For the window that starts
//! at padded position s, `min(suffix[s], prefix[s + L − 1])` is its minimum: the suffix minimum
//! of s inside its block and the prefix minimum of the window's last sample inside its block
//! (a window spans at most two blocks; one that is a whole block gets its minimum twice). The
//! window centred on sample c starts at padded position c, so the erosion of c is
//! `min(suffix[c], prefix[c + 2r])`. The dilation of the erosion by the same windows, with −∞
//! outside, is the opening.

use super::Sample;

/// Buffers reused from line to line (the prefix and suffix extrema and the erosion).
#[derive(Clone, Debug, Default)]
pub(crate) struct Scratch<T> {
    prefix: Vec<T>,
    suffix: Vec<T>,
    erosion: Vec<T>,
}

fn lower<T: Sample>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

fn higher<T: Sample>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// The window extremum (`pick`: [`lower`] or [`higher`]) of every sample of `signal`, windows of
/// `2r + 1` samples centred on it, `pad` outside, into `out`.
fn windows<T: Sample, F: Fn(T, T) -> T + Copy>(
    signal: &[T],
    r: usize,
    pad: T,
    pick: F,
    prefix: &mut Vec<T>,
    suffix: &mut Vec<T>,
    out: &mut [T],
) {
    let n = signal.len();
    let l = 2 * r + 1;
    let padded = (n + 2 * r).div_ceil(l) * l;
    prefix.clear();
    prefix.resize(r, pad);
    prefix.extend_from_slice(signal);
    prefix.resize(padded, pad);
    suffix.clear();
    suffix.extend_from_slice(prefix);
    for block in prefix.chunks_exact_mut(l) {
        for i in 1..l {
            block[i] = pick(block[i - 1], block[i]);
        }
    }
    for block in suffix.chunks_exact_mut(l) {
        for i in (0..l - 1).rev() {
            block[i] = pick(block[i], block[i + 1]);
        }
    }
    for (c, o) in out.iter_mut().enumerate().take(n) {
        *o = pick(suffix[c], prefix[c + 2 * r]);
    }
}

/// Opens `signal` by a window of `2r + 1` samples, ignoring samples outside, into `out`
/// (`out.len() == signal.len()`).
pub(crate) fn open_1d<T: Sample>(signal: &[T], r: usize, scratch: &mut Scratch<T>, out: &mut [T]) {
    let n = signal.len().min(out.len());
    let signal = &signal[..n];
    let Scratch {
        prefix,
        suffix,
        erosion,
    } = scratch;
    erosion.clear();
    erosion.resize(n, T::default());
    windows(signal, r, T::TOP, lower, prefix, suffix, erosion);
    windows(erosion, r, T::BOTTOM, higher, prefix, suffix, &mut out[..n]);
}

#[cfg(test)]
mod tests {
    use super::super::naive::opening_1d;
    use super::*;

    fn open(f: &[u8], r: usize) -> Vec<u8> {
        let mut scratch = Scratch::default();
        let mut out = vec![0; f.len()];
        open_1d(f, r, &mut scratch, &mut out);
        out
    }

    #[test]
    fn hand_cases() {
        // A peak of 3 survives L = 3, a peak of 2 does not.
        assert_eq!(
            open(&[0, 5, 5, 5, 0, 7, 7, 0], 1),
            vec![0, 5, 5, 5, 0, 0, 0, 0]
        );
        // A narrow peak on a wide plateau falls to the plateau.
        assert_eq!(open(&[1, 5, 5, 5, 9, 9, 1], 1), vec![1, 5, 5, 5, 5, 5, 1]);
        // Border: a half peak of r+1 samples touching the border survives (ignored outside).
        assert_eq!(open(&[9, 9, 9, 0, 0, 0, 0], 2), vec![9, 9, 9, 0, 0, 0, 0]);
        assert_eq!(open(&[9, 9, 0, 0, 0, 0, 0], 2), vec![0, 0, 0, 0, 0, 0, 0]);
        // Shorter than L: the whole signal is one window: its minimum.
        assert_eq!(open(&[4, 7, 5], 5), vec![4, 4, 4]);
        assert_eq!(open(&[], 3), Vec::<u8>::new());
        assert_eq!(open(&[3], 0), vec![3]);
        assert_eq!(open(&[255, 255, 0, 255], 1), vec![255, 255, 0, 0]);
    }

    #[test]
    fn equals_brute_force_exhaustively_on_short_signals() {
        // Every signal over {0,1,2} of length ≤ 7, and r ≤ 4 (windows longer than the signal).
        for n in 0..=7usize {
            let total = 3usize.pow(n as u32);
            for code in 0..total {
                let mut c = code;
                let f: Vec<u8> = (0..n)
                    .map(|_| {
                        let v = (c % 3) as u8;
                        c /= 3;
                        v * 100
                    })
                    .collect();
                for r in 0..=4 {
                    assert_eq!(open(&f, r), opening_1d(&f, r), "{f:?} r={r}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn one_scratch_serves_lines_of_any_length(
            lines in proptest::collection::vec(
                (proptest::collection::vec(proptest::num::u8::ANY, 0..90), 0usize..16),
                1..6,
            ),
        ) {
            let mut scratch = Scratch::default();
            for (f, r) in lines {
                let mut out = vec![0; f.len()];
                open_1d(&f, r, &mut scratch, &mut out);
                proptest::prop_assert_eq!(out, opening_1d(&f, r), "len={} r={}", f.len(), r);
            }
        }
    }
}
