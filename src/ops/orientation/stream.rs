//! The streaming 1D opening of Bartovsky et al. (ISMM 2011; Alg. 2 of Karas et al. 2015): one
//! pass over the signal, a FIFO of at most L+1 (value, position) pairs, amortised O(1) work per
//! sample whatever L, and output written at a fixed latency of L−1 samples.
//!
//! # How it works
//!
//! The signal is seen as padded with r = (L−1)/2 samples of +∞ on each side (so windows that
//! stick out of the signal ignore the outside), then followed by one −∞ sentinel that flushes
//! the FIFO. After reading position `rp`, the FIFO holds the run-length encoding, as
//! (value, start position) pairs, of the *provisional* opening `h(j)` of every position `j` not
//! yet written, where `h(j) = max(c(j), min f[j..=rp])` and `c(j)` is the best erosion of a
//! complete window containing `j`. When `rp = j + L − 1` every window through `j` is complete and
//! `h(j)` is the opening: it is the FIFO's front, written out, and entries that end before the
//! next output position leave at the front.
//!
//! A new sample `x` lower than the back entries closes the plateaus ("peaks") above `x`. From the
//! back, an entry `(v, s)` whose peak is narrower than L (`rp − s < L`, and the entry before it is
//! lower, so its level really starts at `s`) is erased: its positions fall to the level of the
//! entry before it (the widest peak they belong to), or to `x`. The first entry that is wide
//! enough, or not above `x`, stops the loop: everything before it is final ("passed"). Then `x`
//! is appended (or merged with an equal back entry). Each sample is pushed and popped at most
//! once. The queue never holds more than L+1 entries: at most one per pending position.
//!
//! The GPU kernel (`kernels/orientation.cu`) computes the same opening by van Herk / Gil-Werman
//! instead: on a GPU the FIFO's data-dependent pops make the lanes of a warp diverge, while van
//! Herk / Gil-Werman does the same three operations for every sample.

use super::Sample;

/// A ring-buffer deque of (value, start position) pairs, sized for one segment length.
#[derive(Clone, Debug)]
pub(crate) struct Fifo<T> {
    val: Vec<T>,
    pos: Vec<u32>,
    head: usize,
    len: usize,
    mask: usize,
}

impl<T: Sample> Fifo<T> {
    /// A FIFO for segments of `length` samples (capacity: L+1 rounded up to a power of two).
    #[must_use]
    pub fn new(length: usize) -> Self {
        let cap = (length + 1).next_power_of_two();
        Self {
            val: vec![T::default(); cap],
            pos: vec![0; cap],
            head: 0,
            len: 0,
            mask: cap - 1,
        }
    }

    fn slot(&self, i: usize) -> usize {
        (self.head + i) & self.mask
    }

    fn push(&mut self, v: T, p: u32) {
        debug_assert!(self.len <= self.mask, "FIFO overflow");
        let i = self.slot(self.len);
        self.val[i] = v;
        self.pos[i] = p;
        self.len += 1;
    }

    fn entry(&self, i: usize) -> (T, u32) {
        let s = self.slot(i);
        (self.val[s], self.pos[s])
    }

    /// Reads sample `x` at stream position `rp` (Alg. 2's loop body).
    fn step(&mut self, rp: u32, x: T, length: u32) {
        let mut erased_start = None;
        while self.len > 0 {
            let (bv, bs) = self.entry(self.len - 1);
            // Values are totally ordered here (NaN is rejected upstream).
            if bv <= x {
                break;
            }
            let narrow = rp - bs < length;
            let starts_here = self.len < 2 || self.entry(self.len - 2).0 < bv;
            if !(narrow && starts_here) {
                break;
            }
            self.len -= 1;
            erased_start = Some(bs);
        }
        match self.len.checked_sub(1).map(|i| self.entry(i).0) {
            Some(bv) if bv == x => {}
            Some(bv) if bv > x => self.push(x, rp),
            _ => self.push(x, erased_start.unwrap_or(rp)),
        }
    }

    /// Drops front entries that end before `wp` and returns the value covering `wp`.
    fn front_at(&mut self, wp: u32) -> T {
        while self.len >= 2 && self.entry(1).1 <= wp {
            self.head = (self.head + 1) & self.mask;
            self.len -= 1;
        }
        self.entry(0).0
    }
}

/// Opens `signal` by a window of `2r + 1` samples, ignoring samples outside, into `out`
/// (`out.len() == signal.len()`). `fifo` must have been made for a length of at least `2r + 1`.
pub(crate) fn open_1d<T: Sample>(signal: &[T], r: usize, fifo: &mut Fifo<T>, out: &mut [T]) {
    let n = signal.len().min(out.len());
    if n == 0 {
        return;
    }
    if r == 0 {
        out[..n].copy_from_slice(&signal[..n]);
        return;
    }
    let length = (2 * r + 1) as u32;
    let (r32, n32) = (r as u32, n as u32);
    fifo.head = 0;
    fifo.len = 0;
    // The r samples of left padding: one entry (+∞, 0) covers stream positions 0..r.
    fifo.push(T::TOP, 0);
    // Real samples at stream positions r..r+n, then r pads of +∞, then the −∞ sentinel.
    let total = n32 + r32 + 1;
    for k in 0..total {
        let x = if k < n32 {
            signal[k as usize]
        } else if k < n32 + r32 {
            T::TOP
        } else {
            T::BOTTOM
        };
        let rp = r32 + k;
        fifo.step(rp, x, length);
        if rp >= 2 * r32 {
            let wp = rp - 2 * r32;
            let v = fifo.front_at(wp);
            if wp >= r32 && wp - r32 < n32 {
                out[(wp - r32) as usize] = v;
            }
        }
    }
    // Flush: after the sentinel every pending value is final.
    let last_wp = r32 + total - 1 - 2 * r32;
    for wp in (last_wp + 1).max(r32)..(n32 + r32) {
        out[(wp - r32) as usize] = fifo.front_at(wp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(f: &[u8], r: usize) -> Vec<u8> {
        let n = f.len();
        let e: Vec<u8> = (0..n)
            .map(|j| {
                *f[j.saturating_sub(r)..(j + r + 1).min(n)]
                    .iter()
                    .min()
                    .unwrap()
            })
            .collect();
        (0..n)
            .map(|i| {
                *e[i.saturating_sub(r)..(i + r + 1).min(n)]
                    .iter()
                    .max()
                    .unwrap()
            })
            .collect()
    }

    fn open(f: &[u8], r: usize) -> Vec<u8> {
        let mut fifo = Fifo::new(2 * r + 1);
        let mut out = vec![0; f.len()];
        open_1d(f, r, &mut fifo, &mut out);
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
                    assert_eq!(open(&f, r), brute(&f, r), "{f:?} r={r}");
                }
            }
        }
    }

    #[test]
    fn fifo_never_exceeds_l_plus_one() {
        let mut rng = 0x1234_5678u64;
        for r in [1usize, 2, 5, 15] {
            let length = (2 * r + 1) as u32;
            let mut fifo = Fifo::<u16>::new(2 * r + 1);
            fifo.push(u16::MAX, 0);
            let mut worst = 0;
            for k in 0..5000u32 {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = ((rng >> 33) % 50) as u16;
                let rp = r as u32 + k;
                fifo.step(rp, x, length);
                worst = worst.max(fifo.len);
                if rp >= 2 * r as u32 {
                    fifo.front_at(rp - 2 * r as u32);
                }
            }
            assert!(worst <= 2 * r + 2, "r={r} worst={worst}");
        }
    }
}
