//! The GPU lines kernel's opening (`orientation_open_line` in `kernels/orientation.cu`), step by
//! step as one thread runs it, for the tests: van Herk / Gil-Werman over blocks of L steps
//! aligned to the warp's first step, one ring of L words packing the erosion (low 16 bits) and
//! the inverted erosion (high 16 bits), +inf (0xffff) outside the samples read, a position
//! outside them ignored by the dilation. The property test below checks it against the opening
//! by its definition on random lines, zones and warp ranges, so the kernel's loop is checked on
//! machines without a GPU; the GPU tests check the kernel against the CPU reference.

use std::ops::Range;

/// +inf of the packed halves (at least the largest u8 or u16 sample).
const TOP: u32 = 0xffff;

/// One thread's outputs `(position, opening)` for its zone `out`, reading the samples `read` of
/// `x` (u16 values), over the warp's steps `lo..hi` (`lo <= read.start`, `hi >= out.end + 2r`).
fn open_line(
    x: &[u16],
    r: usize,
    read: &Range<usize>,
    out: &Range<usize>,
    lo: usize,
    hi: usize,
) -> Vec<(usize, u32)> {
    let l = 2 * r + 1;
    let mut ring = vec![u32::MAX; l];
    let (mut pe, mut pd) = (TOP, TOP);
    let mut j = 0;
    let mut written = Vec::new();
    for p in lo..hi {
        let v = match x.get(p) {
            Some(&sample) if read.contains(&p) => u32::from(sample),
            _ => TOP,
        };
        let w = if j + 1 < l { ring[j + 1] } else { u32::MAX };
        pe = if j == 0 { v } else { pe.min(v) };
        let e = (w & TOP).min(pe);
        let ei = match p.checked_sub(r) {
            Some(c) if read.contains(&c) => TOP - e,
            _ => TOP,
        };
        pd = if j == 0 { ei } else { pd.min(ei) };
        let o = TOP - (w >> 16).min(pd);
        ring[j] = v | (ei << 16);
        if let Some(aw) = p.checked_sub(2 * r).filter(|aw| out.contains(aw)) {
            written.push((aw, o));
        }
        if j == l - 1 {
            // __vminu2: both halves' minima.
            for s in (0..l - 1).rev() {
                let (a, b) = (ring[s], ring[s + 1]);
                ring[s] = (a & TOP).min(b & TOP) | ((a >> 16).min(b >> 16) << 16);
            }
            j = 0;
        } else {
            j += 1;
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use super::super::naive::opening_1d;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn zones_of_a_line_open_like_the_definition(
            x in proptest::collection::vec(prop_oneof![Just(0u16), Just(u16::MAX), any::<u16>(), 0u16..4], 1..90),
            r in 0usize..7,
            cut in (0usize..90, 0usize..90),
            zone_len in 1usize..40,
            slack in (0usize..6, 0usize..6),
        ) {
            let n = x.len();
            let (a0, a1) = (cut.0.min(cut.1) % n, cut.0.max(cut.1) % n);
            let line = a0.min(a1)..a0.max(a1) + 1;
            let opened = opening_1d(&x[line.clone()], r);
            for zlo in (0..n).step_by(zone_len) {
                let zhi = (zlo + zone_len).min(n);
                let out = zlo.max(line.start)..zhi.min(line.end);
                if out.is_empty() {
                    continue;
                }
                // The kernel's ranges (orientation_setup): the zone plus 2r samples each side.
                let read = line.start.max(zlo.saturating_sub(2 * r))..line.end.min(zhi + 2 * r);
                let lo = read.start.saturating_sub(slack.0);
                let hi = out.end + 2 * r + slack.1;
                let got = open_line(&x, r, &read, &out, lo, hi);
                prop_assert_eq!(got.len(), out.len());
                for (a, o) in got {
                    prop_assert_eq!(o, u32::from(opened[a - line.start]), "position {}", a);
                }
            }
        }
    }
}
