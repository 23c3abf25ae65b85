//! Test-only sequential emulation of `kernels/cca.cu` (one function per kernel, lanes as loops,
//! warps one after the other — a legal schedule of the lock-free kernels). It checks the HA4
//! bit logic (segment starts, chunk carries, 4/8-connectivity merge rules, renumbering, the
//! relabel shuffle and the feature slot cache) against the CPU labeler without a GPU. Keep in
//! sync with the kernels line by line.

use crate::image::{Image, ImageView};

use super::Connectivity;
use super::features::ComponentSums;

const FLAG: u32 = 0x8000_0000;
const NONE: u32 = u32::MAX;
const STRIP_H: usize = 4;
const FEAT_PIECE: usize = 8;
const STRIP_PIECE: usize = 8;

fn start_distance64(w: u64, p: u32) -> u32 {
    let below = !w & ((1u64 << p) - 1);
    if below != 0 {
        p - (64 - below.leading_zeros())
    } else {
        p
    }
}
fn run_end64(w: u64, p: u32) -> u32 {
    let above = !w >> p;
    if above != 0 {
        p + above.trailing_zeros() - 1
    } else {
        63
    }
}
fn chunk_starts(w: u64) -> u64 {
    w & !(w << 1)
}
fn true_starts(w: u64, prev: u64) -> u64 {
    w & !((w << 1) | (prev >> 63))
}
fn pair_pos(p0: u32, sb: u32) -> u32 {
    p0 + if sb & 1 != 0 { 0 } else { 1 }
}

/// cca_binarize on a 0/non-zero mask.
fn bits_of(mask: ImageView<'_, u8>) -> (Vec<u64>, usize) {
    let (w, h) = (mask.width(), mask.height());
    let wpr = w.div_ceil(64);
    let mut bits = vec![0u64; wpr * h];
    for y in 0..h {
        for c in 0..wpr {
            let (mut lo, mut hi) = (0u32, 0u32);
            for lane in 0..32 {
                for half in 0..2 {
                    let x = c * 64 + half * 32 + lane;
                    if x < w && mask.get(x, y) != 0 {
                        if half == 0 {
                            lo |= 1 << lane
                        } else {
                            hi |= 1 << lane
                        }
                    }
                }
            }
            bits[y * wpr + c] = u64::from(lo) | (u64::from(hi) << 32);
        }
    }
    (bits, wpr)
}

fn find_root(l: &[u32], mut a: u32) -> u32 {
    let mut p = l[a as usize];
    while p != a {
        a = p;
        p = l[a as usize];
    }
    a
}

fn merge(l: &mut [u32], mut a: u32, mut b: u32) {
    loop {
        a = find_root(l, a);
        b = find_root(l, b);
        if a == b {
            return;
        }
        if a < b {
            let old = l[b as usize];
            l[b as usize] = old.min(a);
            if old == b {
                return;
            }
            b = old;
        } else {
            let old = l[a as usize];
            l[a as usize] = old.min(b);
            if old == a {
                return;
            }
            a = old;
        }
    }
}

fn segment_at(w: u64, prev: u64, k0: u32, p: i32) -> u32 {
    if p >= 0 {
        k0 + (p as u32 - start_distance64(w, p as u32))
    } else {
        k0 - 1 - start_distance64(prev, 63)
    }
}

fn touching(o: u64, op: u64, ko: u32, p: u32, conn8: bool) -> u32 {
    if (o >> p) & 1 != 0 {
        return segment_at(o, op, ko, p as i32);
    }
    if conn8 {
        if p > 0 {
            if (o >> (p - 1)) & 1 != 0 {
                return segment_at(o, op, ko, p as i32 - 1);
            }
        } else if op >> 63 != 0 {
            return segment_at(o, op, ko, -1);
        }
    }
    NONE
}

#[allow(clippy::too_many_arguments)]
fn merge_chunk(
    l: &mut [u32],
    wl: u64,
    wu: u64,
    pl: u64,
    pu: u64,
    y: u32,
    c: u32,
    width: u32,
    conn8: bool,
) {
    let touch = if conn8 {
        (wl & (wu | (wu << 1) | (wu >> 1) | (pu >> 63))) | (wu & (pl >> 63))
    } else {
        wl & wu
    };
    if touch == 0 {
        return;
    }
    let kl0 = y * width + c * 64;
    let ku0 = kl0 - width;
    let tl = true_starts(wl, pl);
    let tu = true_starts(wu, pu);
    for lane in 0..32u32 {
        let p0 = 2 * lane;
        let sbl = (tl >> p0) as u32 & 3;
        let sbu = (tu >> p0) as u32 & 3;
        if sbl != 0 {
            let p = pair_pos(p0, sbl);
            let other = touching(wu, pu, ku0, p, conn8);
            if other != NONE {
                merge(l, kl0 + p, other);
            }
        }
        if sbu != 0 {
            let p = pair_pos(p0, sbu);
            if (tl >> p) & 1 == 0 {
                let other = touching(wl, pl, kl0, p, conn8);
                if other != NONE {
                    merge(l, ku0 + p, other);
                }
            }
        }
    }
}

/// Links across the piece border at word `c` of row `y`: the run continuing over the border,
/// and (8-conn, rows inside a strip) the two diagonals with the row above.
fn merge_piece_border(
    l: &mut [u32],
    bits: &[u64],
    wpr: usize,
    width: u32,
    y: u32,
    c: u32,
    conn8: bool,
) {
    let row = y as usize * wpr;
    let (w, prev) = (bits[row + c as usize], bits[row + c as usize - 1]);
    let k0 = y * width + c * 64;
    if w & 1 != 0 && prev >> 63 != 0 {
        merge(l, segment_at(w, prev, k0, -1), k0);
    }
    if conn8 && !(y as usize).is_multiple_of(STRIP_H) {
        let up = row - wpr;
        let (wu, pu) = (bits[up + c as usize], bits[up + c as usize - 1]);
        let ku0 = k0 - width;
        let (a, b, cu, d) = (w & 1 != 0, prev >> 63 != 0, wu & 1 != 0, pu >> 63 != 0);
        if a && d && !b && !cu {
            merge(l, k0, segment_at(wu, pu, ku0, -1));
        }
        if b && cu && !a && !d {
            merge(l, segment_at(w, prev, k0, -1), ku0);
        }
    }
}

/// The whole GPU labeling chain, emulated: labels and per-label sums.
pub(crate) fn label_emulated(
    mask: ImageView<'_, u8>,
    conn: Connectivity,
    feature_rows: usize,
) -> (Image<u32>, Vec<ComponentSums>) {
    let (width, height) = (mask.width(), mask.height());
    let conn8 = conn == Connectivity::Eight;
    let (bits, wpr) = bits_of(mask);
    let n = width * height;
    // Poison L and labels: only written entries may be read.
    let mut l = vec![0xdead_beefu32; n];
    let mut labels = vec![0xdead_beefu32; n];
    // cca_strip phase 1 then phase 2, block by block (strip x piece of STRIP_PIECE words);
    // piece borders act as image borders inside a block.
    let pieces = wpr.div_ceil(STRIP_PIECE);
    for strip in 0..height.div_ceil(STRIP_H) {
        for piece in 0..pieces {
            let (cb, ce) = (piece * STRIP_PIECE, ((piece + 1) * STRIP_PIECE).min(wpr));
            for ty in 0..STRIP_H {
                let y = strip * STRIP_H + ty;
                if y >= height {
                    continue;
                }
                let base = (y * width) as u32;
                for lane in 0..32u32 {
                    let p0 = 2 * lane;
                    let mut carry = 0u32;
                    for c in cb..ce {
                        let w = bits[y * wpr + c];
                        let sb = (chunk_starts(w) >> p0) as u32 & 3;
                        if sb != 0 {
                            let p = pair_pos(p0, sb);
                            let k = base + c as u32 * 64 + p;
                            l[k as usize] = if p == 0 && carry != 0 { k - carry } else { k };
                        }
                        carry = if w == !0 {
                            carry + 64
                        } else {
                            (!w).leading_zeros()
                        };
                    }
                }
            }
            for ty in 1..STRIP_H {
                let y = strip * STRIP_H + ty;
                if y >= height {
                    continue;
                }
                let (mut pl, mut pu) = (0u64, 0u64);
                for c in cb..ce {
                    let (wl, wu) = (bits[y * wpr + c], bits[(y - 1) * wpr + c]);
                    merge_chunk(
                        &mut l,
                        wl,
                        wu,
                        pl,
                        pu,
                        y as u32,
                        c as u32,
                        width as u32,
                        conn8,
                    );
                    pl = wl;
                    pu = wu;
                }
            }
        }
    }
    // cca_merge: strip border rows (full rows, real previous words) ...
    let borders = if height > 0 {
        (height - 1) / STRIP_H
    } else {
        0
    };
    for b in 0..borders {
        for c in 0..wpr {
            let y = (b + 1) * STRIP_H;
            let pl = if c > 0 { bits[y * wpr + c - 1] } else { 0 };
            let pu = if c > 0 {
                bits[(y - 1) * wpr + c - 1]
            } else {
                0
            };
            merge_chunk(
                &mut l,
                bits[y * wpr + c],
                bits[(y - 1) * wpr + c],
                pl,
                pu,
                y as u32,
                c as u32,
                width as u32,
                conn8,
            );
        }
    }
    // ... and piece borders: one thread per (row, piece border).
    for y in 0..height {
        for piece in 1..pieces {
            merge_piece_border(
                &mut l,
                &bits,
                wpr,
                width as u32,
                y as u32,
                (piece * STRIP_PIECE) as u32,
                conn8,
            );
        }
    }
    // cca_count_roots, cca_scan_rows, cca_label_roots.
    let mut roots = vec![0u64; wpr * height];
    let mut rowcount = vec![0u32; height];
    for y in 0..height {
        for c in 0..wpr {
            let mut ts = true_starts(
                bits[y * wpr + c],
                if c > 0 { bits[y * wpr + c - 1] } else { 0 },
            );
            let mut r = 0u64;
            let k0 = (y * width + c * 64) as u32;
            while ts != 0 {
                let p = ts.trailing_zeros();
                ts &= ts - 1;
                if l[(k0 + p) as usize] == k0 + p {
                    r |= 1 << p;
                }
            }
            roots[y * wpr + c] = r;
            rowcount[y] += r.count_ones();
        }
    }
    let mut rowoff = vec![0u32; height];
    let mut total = 0;
    for y in 0..height {
        rowoff[y] = total;
        total += rowcount[y];
    }
    let mut feats = vec![ComponentSums::default(); total as usize];
    for y in 0..height {
        let mut lab = rowoff[y];
        for c in 0..wpr {
            let mut r = roots[y * wpr + c];
            let k0 = (y * width + c * 64) as u32;
            while r != 0 {
                let p = r.trailing_zeros();
                r &= r - 1;
                lab += 1;
                l[(k0 + p) as usize] = FLAG | lab;
                let x = (c * 64) as u32 + p;
                feats[(lab - 1) as usize] = ComponentSums {
                    min_x: x,
                    max_x: x,
                    min_y: y as u32,
                    max_y: y as u32,
                    ..ComponentSums::default()
                };
            }
        }
    }
    // cca_relabel.
    for y in 0..height {
        for c in 0..wpr {
            let w = bits[y * wpr + c];
            let k0 = (y * width + c * 64) as u32;
            let mut lab = [0u32; 32];
            for lane in 0..32u32 {
                let p0 = 2 * lane;
                let sb = (chunk_starts(w) >> p0) as u32 & 3;
                if sb != 0 {
                    let mut v = l[(k0 + pair_pos(p0, sb)) as usize];
                    while v & FLAG == 0 {
                        v = l[v as usize];
                    }
                    lab[lane as usize] = v & !FLAG;
                }
            }
            for lane in 0..32u32 {
                let p0 = 2 * lane;
                let pr = (w >> p0) as u32 & 3;
                let src = if pr != 0 {
                    let rep = if pr & 1 != 0 { p0 } else { p0 + 1 };
                    (rep - start_distance64(w, rep)) >> 1
                } else {
                    0
                };
                let lv = lab[src as usize];
                let x = c as u32 * 64 + p0;
                if (x as usize) < width {
                    labels[(k0 + p0) as usize] = if pr & 1 != 0 { lv } else { 0 };
                }
                if ((x + 1) as usize) < width {
                    labels[(k0 + p0 + 1) as usize] = if pr & 2 != 0 { lv } else { 0 };
                }
            }
        }
    }
    // cca_features with the per-warp slot cache.
    #[derive(Clone, Copy, Default)]
    struct Slot {
        label: u32,
        area: u32,
        min_x: u32,
        max_x: u32,
        max_y: u32,
        sx: u64,
        sxx: u64,
        sy: u64,
        sxy: u64,
        syy: u64,
    }
    let flush = |feats: &mut Vec<ComponentSums>, s: &Slot| {
        let r = &mut feats[(s.label - 1) as usize];
        r.area += u64::from(s.area);
        r.sum_x += s.sx;
        r.sum_y += s.sy;
        r.sum_xx += s.sxx;
        r.sum_xy += s.sxy;
        r.sum_yy += s.syy;
        r.min_x = r.min_x.min(s.min_x);
        r.max_x = r.max_x.max(s.max_x);
        r.max_y = r.max_y.max(s.max_y);
    };
    let s2 = super::features::sum_squares_to;
    let fpieces = wpr.div_ceil(FEAT_PIECE);
    let rows = feature_rows.max(1);
    for band in 0..height.div_ceil(rows) {
        for piece in 0..fpieces {
            let mut slots = [Slot::default(); 32];
            let mut victim = 0usize;
            for (y, c) in (band * rows..((band + 1) * rows).min(height)).flat_map(|y| {
                (piece * FEAT_PIECE..((piece + 1) * FEAT_PIECE).min(wpr)).map(move |c| (y, c))
            }) {
                let w = bits[y * wpr + c];
                if w == 0 {
                    continue;
                }
                for lane in 0..32u32 {
                    let p0 = 2 * lane;
                    let sb = (chunk_starts(w) >> p0) as u32 & 3;
                    if sb == 0 {
                        continue;
                    }
                    let p = pair_pos(p0, sb);
                    let x0 = c as u32 * 64 + p;
                    let n = run_end64(w, p) - p + 1;
                    let lab = labels[y * width + x0 as usize];
                    let x1 = x0 + n - 1;
                    let sx = (u64::from(x0) + u64::from(x1)) * u64::from(n) / 2;
                    let sxx = s2(u64::from(x1)) - if x0 > 0 { s2(u64::from(x0) - 1) } else { 0 };
                    let yy = y as u64;
                    if let Some(s) = slots.iter_mut().find(|s| s.label == lab) {
                        s.area += n;
                        s.sx += sx;
                        s.sxx += sxx;
                        s.sy += yy * u64::from(n);
                        s.sxy += yy * sx;
                        s.syy += yy * yy * u64::from(n);
                        s.min_x = s.min_x.min(x0);
                        s.max_x = s.max_x.max(x1);
                        s.max_y = y as u32;
                    } else {
                        if slots[victim].label != 0 {
                            flush(&mut feats, &slots[victim]);
                        }
                        slots[victim] = Slot {
                            label: lab,
                            area: n,
                            min_x: x0,
                            max_x: x1,
                            max_y: y as u32,
                            sx,
                            sxx,
                            sy: yy * u64::from(n),
                            sxy: yy * sx,
                            syy: yy * yy * u64::from(n),
                        };
                        victim = (victim + 1) & 31;
                    }
                }
            }
            for s in &slots {
                if s.label != 0 {
                    flush(&mut feats, s);
                }
            }
        }
    }
    (
        Image::from_vec(width, height, labels).unwrap_or_else(|_| Image::new(width, height, 0)),
        feats,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ops::cca::cpu::label_sums;

    fn check(mask: &Image<u8>) {
        for conn in [Connectivity::Four, Connectivity::Eight] {
            let (a, sa) = label_sums(mask.view(), |v| v != 0, conn).unwrap();
            for rows in [1, 2, 4] {
                let (b, sb) = label_emulated(mask.view(), conn, rows);
                assert_eq!(a, b, "{conn:?} {}x{}", mask.width(), mask.height());
                assert_eq!(sa, sb, "{conn:?} feature rows {rows}");
            }
        }
    }

    #[test]
    fn helpers() {
        let w = 0b0111_0110u64;
        assert_eq!(start_distance64(w, 1), 0);
        assert_eq!(start_distance64(w, 2), 1);
        assert_eq!(start_distance64(w, 6), 2);
        assert_eq!(run_end64(w, 1), 2);
        assert_eq!(run_end64(w, 4), 6);
        assert_eq!(run_end64(!0, 0), 63);
        assert_eq!(start_distance64(!0, 63), 63);
    }

    #[test]
    fn wide_patterns() {
        // Runs across chunk borders, diagonals at chunk borders, long snakes, all/none.
        let sizes = [
            (1, 1),
            (64, 3),
            (65, 9),
            (128, 8),
            (130, 13),
            (300, 17),
            (1000, 5),
            (513, 9),
            (1537, 6),
        ];
        for &(w, h) in &sizes {
            check(&Image::new(w, h, 1u8));
            check(&Image::new(w, h, 0u8));
            check(&Image::from_fn(w, h, |x, y| u8::from((x + y) % 2 == 0)));
            check(&Image::from_fn(w, h, |x, y| {
                u8::from((x + y) % 64 == 0 || (x + 2 * y) % 63 == 0)
            }));
            check(&Image::from_fn(w, h, |x, y| {
                u8::from(y % 2 == 0 || (y % 4 == 1 && x == w - 1) || (y % 4 == 3 && x == 0))
            }));
            check(&Image::from_fn(w, h, |x, y| {
                u8::from(x % 2 == 0 || (x % 4 == 1 && y == h - 1) || (x % 4 == 3 && y == 0))
            }));
            check(&Image::from_fn(w, h, |x, y| {
                u8::from(x % 64 == 63 && y % 2 == 0 || x % 64 == 0 && y % 2 == 1)
            }));
        }
    }

    fn mask() -> impl Strategy<Value = Image<u8>> {
        (1usize..1400, 1usize..14, 0u32..=100).prop_flat_map(|(w, h, d)| {
            proptest::collection::vec(0u32..100, w * h).prop_map(move |v| {
                Image::from_vec(w, h, v.iter().map(|&r| u8::from(r < d)).collect())
                    .unwrap_or_else(|_| Image::new(w, h, 0))
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn emulated_kernels_equal_cpu(m in mask()) {
            check(&m);
        }
    }
}
