//! One phase's launched rounds (7-8 launches in 5 dependent steps each, side streams forked
//! and joined by events) and the finisher after them.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::enqueue::timed;
use super::history::zero_key_limit;
use super::layout::{
    ALL, C_CURSOR, C_FRONTIER, C_GIANT, C_LARGE, C_MEMBERS, C_MID, C_ROOTS, C_SMALL, C_TINY,
    C_TREES, CAT_THREADS, LIST, MODE_MIN_SIZE, NCTL, SegFinish,
};
use super::{SegmentGpu, eid_bits};
use crate::gpu::launch::{ExLaunch, one_block};
use crate::gpu::{GpuError, KernelTimer};

/// One phase of rounds to enqueue.
pub(super) struct Phase {
    pub mode: u32,
    /// Global number of its first launched round.
    pub first: u32,
    /// Rounds launched.
    pub count: u32,
    pub k: f64,
    pub min_size: u32,
    pub pdl: bool,
    pub stamps: bool,
    /// Rounds the finisher may run after the launched ones (0: none).
    pub finish: u32,
    /// [`super::enqueue::Body::giant`] of this phase.
    pub giant: u64,
    /// Slot of `info` where the finisher reports rounds left undone.
    pub info_slot: u32,
}

/// A caterpillar launch of a round: kernel, tree list and its count, shape, timer region, and
/// whether the small and mid-size lists follow the kernel's own (the fused launches).
struct CatLaunch<'a> {
    kernel: &'a CudaFunction,
    list: u64,
    count: u64,
    cfg: LaunchConfig,
    region: &'static str,
    fused: bool,
}

impl SegmentGpu {
    /// `ph.count` rounds of `ph.mode` with global numbers `ph.first..`, each gated on the
    /// previous, then the finisher.
    pub(super) fn enqueue_phase(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        ph: &Phase,
    ) -> Result<(), GpuError> {
        let (mode, first, count, k, min_size) = (ph.mode, ph.first, ph.count, ph.k, ph.min_size);
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let (kn, launch) = (&self.kernels, &self.launch);
        let p = b.p;
        let (w, h) = (b.width as u32, b.height as u32);
        let n = b.width * b.height;
        let nn = n as u32;
        let eb = eid_bits(n);
        let cfg = launch.stride(n);
        let ms = mode == MODE_MIN_SIZE;
        let zlim = zero_key_limit(ms, k, nn, eb);
        // Every round kernel starts while the one before it drains (programmatic dependent
        // launch; each waits on the device first) unless every launch is timed (the timer's
        // events sit between them).
        let pdl = ph.pdl && timer.is_none();
        let name = |merge: &'static str| if ms { "segment_minsize" } else { merge };
        // Address of list count `kind` of round `r`.
        let count_of = |kind: u64, r: u32| p.counts + 4 * (kind * NCTL as u64 + u64::from(r));
        // The min_size phase's first round runs over lists segment_reset_done makes (the pixels
        // and roots of components below min_size), which it counts in the unused slot of
        // round 0 (zeroed by segment_init) and writes where the first round reads its input
        // (flist[1], rlist[1]: the lists of "the previous round").
        if ms {
            timed(timer, stream, "segment_minsize", || {
                let mut l = ExLaunch::new(stream, &kn.reset_done, pdl);
                l.arg(&p.done)
                    .arg(&p.order)
                    .arg(&p.size)
                    .arg(&min_size)
                    .arg(&nn);
                let (fc0, rc0) = (count_of(C_FRONTIER, 0), count_of(C_ROOTS, 0));
                l.arg(&p.comp).arg(&p.link);
                l.arg(&p.flist[1]).arg(&fc0).arg(&p.rlist[1]).arg(&rc0);
                // SAFETY: block-uniform grid-stride over pixels < n; link chains end at roots
                // < n; each list gets at most n entries (one a pixel), counts NCOUNTS * NCTL.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
        }
        // Round r's index in its phase's giant mask (merge rounds count from 1, min_size rounds
        // from the phase's first).
        let phase_first = if ms { first } else { 1 };
        for i in 0..count {
            let r = first + i;
            let gi = r - phase_first;
            let giant_here = launch.giant_blocks > 0 && (gi >= 64 || (ph.giant >> gi) & 1 == 1);
            let gcnt = count_of(C_GIANT, r);
            let gate = if i == 0 { 0 } else { r - 1 };
            // The caterpillar kernels' parameters (SEG_CAT_ARGS) for tree list `$list`.
            macro_rules! cat_args {
                ($l:ident, $list:expr, $lcount:expr) => {
                    $l.arg(&p.link)
                        .arg(&p.done)
                        .arg(&p.size)
                        .arg(&p.cint)
                        .arg(&p.tkey)
                        .arg(&p.tcnt)
                        .arg(&p.joff);
                    $l.arg(&p.jarr)
                        .arg(&p.round)
                        .arg(&p.w4)
                        .arg(&eb)
                        .arg(&mode)
                        .arg(&min_size);
                    $l.arg(&k)
                        .arg(&p.ctl)
                        .arg(&p.mctl)
                        .arg(&gate)
                        .arg(&r)
                        .arg($list)
                        .arg($lcount);
                    $l.arg(&p.scr_k).arg(&p.scr_i).arg(&nn).arg(&gcnt);
                };
            }
            // A phase's first round reads the lists that start it (segment_reset_done's; for
            // merge round 2 the roots segment_tiles listed, while its least edges scan every
            // pixel); later rounds the previous round's.
            let from_lists = i == 0 && ms;
            let least_iterates = if i == 0 && !ms { ALL } else { LIST };
            let (cur, prev) = ((i & 1) as usize, ((i + 1) & 1) as usize);
            let (fin, fout) = (p.flist[prev], p.flist[cur]);
            let (rin, rout) = (p.rlist[prev], p.rlist[cur]);
            let input = if from_lists { 0 } else { r - 1 };
            let (fcin, fcout) = (count_of(C_FRONTIER, input), count_of(C_FRONTIER, r));
            let (rcin, rcout) = (count_of(C_ROOTS, input), count_of(C_ROOTS, r));
            let (hcount, xcount) = (count_of(C_TREES, r), count_of(C_MEMBERS, r));
            let (scount, bcount, cursor) = (
                count_of(C_SMALL, r),
                count_of(C_LARGE, r),
                count_of(C_CURSOR, r),
            );
            let (tcount, mcount) = (count_of(C_TINY, r), count_of(C_MID, r));
            timed(timer, stream, name("segment_minedge"), || {
                let mut l = ExLaunch::new(stream, &kn.least, pdl);
                l.arg(&p.comp)
                    .arg(&p.link)
                    .arg(&p.w4)
                    .arg(&p.best)
                    .arg(&p.done)
                    .arg(&p.target)
                    .arg(&p.tkey);
                l.arg(&p.order)
                    .arg(&w)
                    .arg(&h)
                    .arg(&eb)
                    .arg(&mode)
                    .arg(&p.ctl)
                    .arg(&gate)
                    .arg(&least_iterates);
                l.arg(&fin).arg(&fcin).arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over pixels < n (or list entries < the list's count, which
                // hold pixel ids); neighbours are bounds-checked; lists hold n entries.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            // Targets and trees in one launch, over a list of roots (the previous round's, or the
            // lists of segment_tiles and segment_reset_done that start a phase).
            timed(timer, stream, name("segment_targets_trees"), || {
                let mut l = ExLaunch::new(stream, &kn.targets_trees, pdl);
                l.arg(&p.comp)
                    .arg(&p.link)
                    .arg(&p.best)
                    .arg(&p.tkey)
                    .arg(&p.target)
                    .arg(&p.tree);
                l.arg(&p.exitk)
                    .arg(&p.done)
                    .arg(&w)
                    .arg(&eb)
                    .arg(&mode)
                    .arg(&p.ctl)
                    .arg(&p.mctl);
                l.arg(&gate)
                    .arg(&r)
                    .arg(&rin)
                    .arg(&rcin)
                    .arg(&rout)
                    .arg(&rcout)
                    .arg(&p.tcnt);
                l.arg(&p.hlist).arg(&hcount);
                // SAFETY: grid-stride over the previous round's roots (list entries < its
                // count, ids < n); edge ids decode to pixels < n; each walk follows targets
                // to a mutual pair or a sink; a tree is listed once; r < NCTL.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            // With per-launch timing everything stays on `stream` (the timer's events are there);
            // else the trees' ranges are allocated on a side stream while the exits are scanned.
            let concurrent = timer.is_none();
            if concurrent {
                kn.fork.record(stream)?;
                kn.side[0].wait(&kn.fork)?;
            }
            let on = if concurrent { &kn.side[0] } else { stream };
            timed(timer, stream, name("segment_alloc"), || {
                let mut l = ExLaunch::new(on, &kn.alloc, pdl);
                l.arg(&p.tcnt).arg(&p.joff).arg(&cursor);
                l.arg(&p.done).arg(&mode).arg(&p.jarr).arg(&p.tkey);
                l.arg(&p.ctl).arg(&gate).arg(&p.hlist).arg(&hcount);
                // SAFETY: grid-stride over the listed trees (ids < n, each once); the ranges sum
                // to the round's active roots plus one slot per sink tree (the sink, a root
                // outside them), at most n. It reads and writes nothing segment_exits touches.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            timed(timer, stream, name("segment_exits"), || {
                let mut l = ExLaunch::new(stream, &kn.exits, pdl);
                l.arg(&p.comp)
                    .arg(&p.link)
                    .arg(&p.w4)
                    .arg(&p.done)
                    .arg(&p.target)
                    .arg(&p.tree)
                    .arg(&p.order);
                l.arg(&p.exitk)
                    .arg(&w)
                    .arg(&eb)
                    .arg(&mode)
                    .arg(&p.ctl)
                    .arg(&gate);
                l.arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over this round's frontier (pixel ids < n); the order
                // words only name in-image neighbours; tree ids are roots < n.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            if concurrent {
                kn.joins[0].record(&kn.side[0])?;
                stream.wait(&kn.joins[0])?;
            }
            timed(timer, stream, name("segment_core"), || {
                let mut l = ExLaunch::new(stream, &kn.core, pdl);
                l.arg(&p.target)
                    .arg(&p.tree)
                    .arg(&p.best)
                    .arg(&p.tkey)
                    .arg(&p.exitk)
                    .arg(&p.done)
                    .arg(&mode);
                l.arg(&p.tcnt).arg(&p.joff).arg(&p.jarr).arg(&xcount);
                l.arg(&p.tlist)
                    .arg(&tcount)
                    .arg(&p.slist)
                    .arg(&scount)
                    .arg(&p.mlist)
                    .arg(&mcount);
                l.arg(&p.blist)
                    .arg(&bcount)
                    .arg(&p.ctl)
                    .arg(&p.mctl)
                    .arg(&gate)
                    .arg(&rout)
                    .arg(&rcout);
                l.arg(&p.link).arg(&p.size).arg(&p.round).arg(&r).arg(&zlim);
                // SAFETY: grid-stride over the active roots (ids < n); a weight-0 member joins
                // its tree's id (< n) directly; r < NCTL; a core member's slot is
                // below its tree's member count (its range's length, from segment_alloc, which
                // this stream has waited for), so it lands in the tree's range inside jarr; each
                // tree is listed once (by the group that counts its members off to 0), at most
                // n trees.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            // The tiny and small (and from `mid_trees_fused_from` the mid-size) trees share one
            // launch on `stream`; the mid-size trees' kernel before that and the large trees'
            // get a side stream each.
            let with_mid = self
                .tuning
                .mid_trees_fused_from
                .is_some_and(|from| r >= from);
            let mut cats = Vec::with_capacity(3);
            cats.push(if with_mid {
                CatLaunch {
                    kernel: &kn.cat_small_mid,
                    list: p.tlist,
                    count: tcount,
                    cfg: launch.small_mid,
                    region: "segment_cat_small",
                    fused: true,
                }
            } else {
                CatLaunch {
                    kernel: &kn.cat_small,
                    list: p.tlist,
                    count: tcount,
                    cfg: launch.small,
                    region: "segment_cat_small",
                    fused: true,
                }
            });
            if !with_mid {
                cats.push(CatLaunch {
                    kernel: &kn.cat_mid,
                    list: p.mlist,
                    count: mcount,
                    cfg: launch.mid,
                    region: "segment_cat_mid",
                    fused: false,
                });
            }
            // segment_cat_block (and segment_cat_giant after it) last, on the last side stream;
            // the first kernel on `stream`, the others on the side streams in order.
            cats.push(CatLaunch {
                kernel: if giant_here {
                    &kn.cat_block_g
                } else {
                    &kn.cat_block
                },
                list: p.blist,
                count: bcount,
                cfg: launch.block,
                region: "segment_cat_block",
                fused: false,
            });
            let block_side = kn.side.len() - 1;
            let last = cats.len() - 1;
            let side_of = |j: usize| match j {
                0 => None,
                j if j == last => Some(block_side),
                j => Some(j - 1),
            };
            let sides_used: Vec<usize> = (0..cats.len()).filter_map(side_of).collect();
            if concurrent {
                kn.fork.record(stream)?;
                for &j in &sides_used {
                    kn.side[j].wait(&kn.fork)?;
                }
            }
            for (j, cat) in cats.into_iter().enumerate() {
                let on = match side_of(j) {
                    Some(side) if concurrent => &kn.side[side],
                    _ => stream,
                };
                timed(timer, stream, name(cat.region), || {
                    let mut l = ExLaunch::new(on, cat.kernel, pdl);
                    cat_args!(l, &cat.list, &cat.count);
                    if cat.fused {
                        l.arg(&p.slist).arg(&scount).arg(&p.mlist).arg(&mcount);
                    }
                    // SAFETY: one warp lane group (block) per listed tree, each tree listed once,
                    // the four lists disjoint (so the kernels may run at once); a member is in one
                    // tree's range, so its link/round and the tree root's size/Int/done are
                    // written by that group (block) only, as is the tree's range of the sort
                    // scratch (2n keys and ids: [off, off + count) and n past it); the block
                    // launches have their kernels' SEG_CAT_THREADS / SEG_CAT_MID_THREADS threads;
                    // segment_cat_block stages a whole tree only when it fits the dynamic shared
                    // memory given here (its capacity read from %dynamic_smem_size);
                    // segment_cat_small takes the small and mid-size lists after its own.
                    unsafe { l.launch(cat.cfg) }?;
                    Ok(())
                })?;
            }
            if giant_here {
                // After segment_cat_block_g on its stream (a branch of its own cost more).
                let on = if concurrent {
                    &kn.side[block_side]
                } else {
                    stream
                };
                timed(timer, stream, name("segment_cat_giant"), || {
                    let mut l = ExLaunch::new(on, &kn.cat_giant, false).cooperative();
                    cat_args!(l, &p.blist, &bcount);
                    l.arg(&p.giant);
                    let gcfg = LaunchConfig {
                        grid_dim: (launch.giant_blocks, 1, 1),
                        block_dim: (CAT_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: the large trees' list, of which it takes the trees above
                    // SEG_CAT_GIANT members and segment_cat_block_g the others (a tree's count is
                    // zeroed by the one that walked it, and both read a zero as "not mine"); a
                    // cooperative grid of at most the blocks the device holds at once, so its
                    // barriers (in the GIANT_WORDS scratch, zero between trees) complete; the
                    // scratch ranges of its trees are theirs alone.
                    unsafe { l.launch(gcfg) }?;
                    Ok(())
                })?;
            }
            if concurrent {
                for &j in &sides_used {
                    kn.joins[j].record(&kn.side[j])?;
                    stream.wait(&kn.joins[j])?;
                }
            }
            if ph.stamps {
                self.stamp(stream, if ms { "min_size" } else { "merge" }, Some(r))?;
            }
        }
        if ph.finish > 0 {
            let fin = launch.finisher;
            let grid = fin.grid && launch.grid_finish_blocks > 0;
            let from = first + count;
            let a = SegFinish {
                p,
                k,
                zlim,
                width: w,
                height: h,
                n: nn,
                eb,
                mode,
                min_size,
                nctl: NCTL as u32,
                first,
                from,
                last: from + ph.finish - 1,
                limit: fin.frontier_limit,
                info_slot: ph.info_slot,
                solo: fin.solo_frontier,
                resume: 0,
            };
            timed(timer, stream, name("segment_finish"), || {
                if grid {
                    let mut l = ExLaunch::new(stream, &kn.finish_grid, false).cooperative();
                    l.arg(&a);
                    let cfg = LaunchConfig {
                        grid_dim: (launch.grid_finish_blocks, 1, 1),
                        block_dim: (CAT_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: as below over a cooperative grid of at most the blocks the device
                    // holds at once (so its barriers, info[4], complete); info has 8 entries.
                    unsafe { l.launch(cfg) }?;
                    if fin.solo_frontier == 0 {
                        return Ok(());
                    }
                }
                // After the grid: the rounds it left, from the one it recorded in info[6].
                let a = SegFinish {
                    resume: u32::from(grid),
                    ..a
                };
                // A programmatic launch where allowed: segment_finish starts with grid_dep_wait.
                let mut l = ExLaunch::new(stream, &kn.finish, pdl);
                l.arg(&a);
                // SAFETY: one block of SEG_CAT_THREADS threads runs rounds from..=last (< NCTL)
                // over this frame's buffers, the same accesses as the round kernels (each step's
                // grid-stride loops over one block); info has 8 entries (info_slot 2 or 3).
                unsafe { l.launch(one_block(CAT_THREADS)) }?;
                Ok(())
            })?;
            if ph.stamps {
                self.stamp(
                    stream,
                    if ms {
                        "min_size finish"
                    } else {
                        "merge finish"
                    },
                    None,
                )?;
            }
        }
        Ok(())
    }
}
