//! One phase's launched rounds (7-10 launches in 6 dependent steps each, side streams forked and
//! joined by events) and the finisher after them.

use super::*;

impl SegmentGpu {
    /// `count` rounds of `mode` with global numbers `first..`, each gated on the previous.
    pub(super) fn enqueue_phase(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        ph: &Phase,
    ) -> Result<(), GpuError> {
        let (mode, first, count, k, min_size) = (ph.mode, ph.first, ph.count, ph.k, ph.min_size);
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (w, h) = (b.width as u32, b.height as u32);
        let n = b.width * b.height;
        let nn = n as u32;
        let eb = eid_bits(n);
        let cfg = self.stride(n);
        let ms = mode == MODE_MIN_SIZE;
        let zlim = zero_key_limit(self.zero_joins, ms, k, nn, eb);
        // Every round kernel starts while the one before it drains (programmatic dependent
        // launch; each waits on the device first) unless every launch is timed (the timer's
        // events sit between them).
        let pdl = ph.programmatic && timer.is_none();
        let name = |merge: &'static str| if ms { "segment_minsize" } else { merge };
        // Address of list count `kind` of round `r`.
        let count_of = |kind: u64, r: u32| p.counts + 4 * (kind * NCTL as u64 + u64::from(r));
        // The min_size phase's first round runs over lists segment_reset_done makes (the pixels
        // and roots of components below min_size), which it counts in the unused slot of
        // round 0 (zeroed by segment_init) and writes where the first round reads its input
        // (flist[1], rlist[1]: the lists of "the previous round").
        let ms_lists = ms && self.min_size_lists;
        if ms {
            timed(timer, stream, "segment_minsize", || {
                let mut l = ExLaunch::new(stream, &self.f_reset_done, pdl);
                l.arg(&p.done).arg(&p.order).arg(&p.size).arg(&min_size).arg(&nn);
                let lists = u32::from(ms_lists);
                let (fc0, rc0) = (count_of(C_FRONTIER, 0), count_of(C_ROOTS, 0));
                l.arg(&p.comp).arg(&p.link);
                l.arg(&p.flist[1]).arg(&fc0).arg(&p.rlist[1]).arg(&rc0).arg(&lists);
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
            let giant_here = self.giant_blocks > 0 && (gi >= 64 || (ph.giant >> gi) & 1 == 1);
            let gcnt = count_of(C_GIANT, r);
            let gate = if i == 0 { 0 } else { r - 1 };
            // The caterpillar kernels' parameters (SEG_CAT_ARGS) for tree list `$list`.
            macro_rules! cat_args {
                ($l:ident, $list:expr, $lcount:expr) => {
                    $l.arg(&p.link).arg(&p.done).arg(&p.size).arg(&p.cint).arg(&p.tkey).arg(&p.tcnt).arg(&p.joff);
                    $l.arg(&p.jarr).arg(&p.round).arg(&p.w4).arg(&eb).arg(&mode).arg(&min_size);
                    $l.arg(&k).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r).arg($list).arg($lcount);
                    $l.arg(&p.scr_k).arg(&p.scr_i).arg(&nn).arg(&gcnt);
                };
            }
            // Rounds after the first of their phase run over the previous round's lists.
            let from_lists = i == 0 && ms_lists;
            let use_list = if i > 0 || from_lists { LIST } else { ph.first_iter };
            // Round 2 after segment_tiles: its targets take the roots tiles listed.
            let targets_list = if !ms && i == 0 && ph.first_iter == ALL && self.tile_roots { LIST } else { use_list };
            let (cur, prev) = ((i & 1) as usize, ((i + 1) & 1) as usize);
            let (fin, fout) = (p.flist[prev], p.flist[cur]);
            let (rin, rout) = (p.rlist[prev], p.rlist[cur]);
            let input = if from_lists { 0 } else { r - 1 };
            let (fcin, fcout) = (count_of(C_FRONTIER, input), count_of(C_FRONTIER, r));
            let (rcin, rcout) = (count_of(C_ROOTS, input), count_of(C_ROOTS, r));
            let (hcount, xcount) = (count_of(C_TREES, r), count_of(C_MEMBERS, r));
            let (scount, bcount, cursor) = (count_of(C_SMALL, r), count_of(C_LARGE, r), count_of(C_CURSOR, r));
            let (tcount, mcount) = (count_of(C_TINY, r), count_of(C_MID, r));
            timed(timer, stream, name("segment_minedge"), || {
                let mut l = ExLaunch::new(stream, &self.f_least, pdl);
                l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.best).arg(&p.done).arg(&p.target).arg(&p.tkey);
                l.arg(&p.order).arg(&w).arg(&h).arg(&eb).arg(&mode).arg(&p.ctl).arg(&gate).arg(&use_list);
                l.arg(&fin).arg(&fcin).arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over pixels < n (or list entries < the list's count, which
                // hold pixel ids); neighbours are bounds-checked; lists hold n entries.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            // Targets and trees in one launch, over a list of roots (the previous round's, or the
            // lists of segment_tiles and segment_reset_done that start a phase).
            let fused = targets_list == LIST && self.fuse_from > 0 && (ms || r >= self.fuse_from);
            if fused {
                timed(timer, stream, name("segment_targets_trees"), || {
                    let mut l = ExLaunch::new(stream, &self.f_targets_trees, pdl);
                    l.arg(&p.comp).arg(&p.link).arg(&p.best).arg(&p.tkey).arg(&p.target).arg(&p.tree);
                    l.arg(&p.exitk).arg(&p.done).arg(&w).arg(&eb).arg(&mode).arg(&p.ctl).arg(&p.mctl);
                    l.arg(&gate).arg(&r).arg(&rin).arg(&rcin).arg(&rout).arg(&rcout).arg(&p.tcnt);
                    l.arg(&p.hlist).arg(&hcount);
                    // SAFETY: grid-stride over the previous round's roots (list entries < its
                    // count, ids < n); edge ids decode to pixels < n; each walk follows targets
                    // to a mutual pair or a sink; a tree is listed once; r < NCTL.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
            } else {
                timed(timer, stream, name("segment_targets"), || {
                    let mut l = ExLaunch::new(stream, &self.f_targets, pdl);
                    l.arg(&p.comp).arg(&p.link).arg(&p.best).arg(&p.tkey).arg(&p.target).arg(&p.tree).arg(&p.exitk);
                    l.arg(&p.done).arg(&w).arg(&nn).arg(&eb).arg(&mode).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r);
                    l.arg(&targets_list).arg(&rin).arg(&rcin).arg(&rout).arg(&rcout);
                    // SAFETY: grid-stride over roots < n; edge ids decode to pixels < n; r < NCTL.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                timed(timer, stream, name("segment_trees"), || {
                    let mut l = ExLaunch::new(stream, &self.f_trees, pdl);
                    l.arg(&p.target).arg(&p.tree).arg(&p.done).arg(&mode).arg(&p.tcnt).arg(&p.hlist).arg(&hcount);
                    l.arg(&p.ctl).arg(&gate).arg(&rout).arg(&rcout);
                    // SAFETY: grid-stride over this round's active roots (ids < n, each with a
                    // target whose chain ends in a mutual pair or a sink); a tree is listed once (by
                    // its first counted member), at most n trees.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
            }
            // With per-launch timing everything stays on `stream` (the timer's events are there);
            // else the trees' ranges are allocated on a side stream while the exits are scanned.
            let concurrent = timer.is_none();
            if concurrent {
                self.fork.record(stream)?;
                self.side[0].wait(&self.fork)?;
            }
            let on = if concurrent { &self.side[0] } else { stream };
            timed(timer, stream, name("segment_alloc"), || {
                let mut l = ExLaunch::new(on, &self.f_alloc, pdl);
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
                let mut l = ExLaunch::new(stream, &self.f_exits, pdl);
                l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.done).arg(&p.target).arg(&p.tree).arg(&p.order);
                l.arg(&p.exitk).arg(&w).arg(&eb).arg(&mode).arg(&p.ctl).arg(&gate);
                l.arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over this round's frontier (pixel ids < n); the order
                // words only name in-image neighbours; tree ids are roots < n.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            if concurrent {
                self.joins[0].record(&self.side[0])?;
                stream.wait(&self.joins[0])?;
            }
            timed(timer, stream, name("segment_core"), || {
                let mut l = ExLaunch::new(stream, &self.f_core, pdl);
                l.arg(&p.target).arg(&p.tree).arg(&p.best).arg(&p.tkey).arg(&p.exitk).arg(&p.done).arg(&mode);
                l.arg(&p.tcnt).arg(&p.joff).arg(&p.jarr).arg(&xcount);
                l.arg(&p.tlist).arg(&tcount).arg(&p.slist).arg(&scount).arg(&p.mlist).arg(&mcount);
                l.arg(&p.blist).arg(&bcount).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&rout).arg(&rcout);
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
            // From `cat_fuse_from` the tiny and small (and mid-size) trees share one launch on
            // `stream`; the kernels left get a side stream each.
            let cat_fused = self.cat_fuse_from > 0 && r >= self.cat_fuse_from;
            let with_mid = self.cat_fuse_mid_from > 0 && r >= self.cat_fuse_mid_from;
            let block_f = if giant_here { &self.f_cat_block_g } else { &self.f_cat_block };
            let mut cats = Vec::with_capacity(4);
            if cat_fused {
                let (f, lcfg) = if with_mid {
                    (&self.f_cat_small_mid, self.small_mid_cfg)
                } else {
                    (&self.f_cat_small, self.small_cfg)
                };
                cats.push((f, p.tlist, tcount, lcfg, "segment_cat_small", true));
                if !with_mid {
                    cats.push((&self.f_cat_mid, p.mlist, mcount, self.mid_cfg, "segment_cat_mid", false));
                }
            } else {
                cats.push((&self.f_cat_thread, p.tlist, tcount, self.tiny_cfg, "segment_cat_thread", false));
                cats.push((&self.f_cat_warp, p.slist, scount, self.warp_cfg, "segment_cat_warp", false));
                cats.push((&self.f_cat_mid, p.mlist, mcount, self.mid_cfg, "segment_cat_mid", false));
            }
            // segment_cat_block (and segment_cat_giant after it) last, on the last side stream;
            // the first kernel on `stream`, the others on the side streams in order.
            cats.push((block_f, p.blist, bcount, self.block_cfg, "segment_cat_block", false));
            let block_side = self.side.len() - 1;
            let last = cats.len() - 1;
            let side_of = |j: usize| match j {
                0 => None,
                j if j == last => Some(block_side),
                j => Some(j - 1),
            };
            let sides_used: Vec<usize> = (0..cats.len()).filter_map(side_of).collect();
            if concurrent {
                self.fork.record(stream)?;
                for &j in &sides_used {
                    self.side[j].wait(&self.fork)?;
                }
            }
            for (j, (f, list, lcount, lcfg, region, with_small)) in cats.into_iter().enumerate() {
                let on = match side_of(j) {
                    Some(side) if concurrent => &self.side[side],
                    _ => stream,
                };
                timed(timer, stream, name(region), || {
                    let mut l = ExLaunch::new(on, f, pdl);
                    cat_args!(l, &list, &lcount);
                    if with_small {
                        l.arg(&p.slist).arg(&scount).arg(&p.mlist).arg(&mcount);
                    }
                    // SAFETY: one thread (warp, block) per listed tree, each tree listed once, the
                    // four lists disjoint (so the kernels may run at once); a member is in one
                    // tree's range, so its link/round and the tree root's size/Int/done
                    // are written by that thread (warp, block) only, as is the tree's range of the
                    // sort scratch (2n keys and ids: [off, off + count) and n past it); the block
                    // launches have their kernels' SEG_CAT_THREADS / SEG_CAT_MID_THREADS threads;
                    // segment_cat_block stages a whole tree only when it fits the dynamic shared
                    // memory given here (its capacity read from %dynamic_smem_size);
                    // segment_cat_small takes the small and mid-size lists after its own.
                    unsafe { l.launch(lcfg) }?;
                    Ok(())
                })?;
            }
            if giant_here {
                // After segment_cat_block_g on its stream (a branch of its own cost more).
                let on = if concurrent { &self.side[block_side] } else { stream };
                timed(timer, stream, name("segment_cat_giant"), || {
                    let mut l = ExLaunch::new(on, &self.f_cat_giant, false).cooperative();
                    cat_args!(l, &p.blist, &bcount);
                    l.arg(&p.giant);
                    let gcfg = LaunchConfig {
                        grid_dim: (self.giant_blocks, 1, 1),
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
                    self.joins[j].record(&self.side[j])?;
                    stream.wait(&self.joins[j])?;
                }
            }
            if ph.stamps {
                self.stamp(stream, if ms { "min_size" } else { "merge" }, Some(r))?;
            }
        }
        if ph.finish > 0 {
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
                limit: self.finish_limit,
                info_slot: ph.info_slot,
                solo: self.finish_solo,
                resume: 0,
            };
            timed(timer, stream, name("segment_finish"), || {
                if self.grid_finisher {
                    let mut l = ExLaunch::new(stream, &self.f_finish_grid, false).cooperative();
                    l.arg(&a);
                    let cfg = LaunchConfig {
                        grid_dim: (self.grid_finish_blocks, 1, 1),
                        block_dim: (CAT_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: as below over a cooperative grid of at most the blocks the device
                    // holds at once (so its barriers, info[4..6], complete); info has 8 entries.
                    unsafe { l.launch(cfg) }?;
                    if self.finish_solo == 0 {
                        return Ok(());
                    }
                }
                // After the grid: the rounds it left, from the one it recorded in info[6].
                let a = SegFinish { resume: u32::from(self.grid_finisher), ..a };
                // A programmatic launch where allowed: segment_finish starts with grid_dep_wait.
                let mut l = ExLaunch::new(stream, &self.f_finish, pdl);
                l.arg(&a);
                // SAFETY: one block of SEG_CAT_THREADS threads runs rounds from..=last (< NCTL)
                // over this frame's buffers, the same accesses as the round kernels (each step's
                // grid-stride loops over one block); info has 8 entries (info_slot 2 or 3).
                unsafe {
                    l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (CAT_THREADS, 1, 1), shared_mem_bytes: 0 })
                }?;
                Ok(())
            })?;
            if ph.stamps {
                self.stamp(stream, if ms { "min_size finish" } else { "merge finish" }, None)?;
            }
        }
        Ok(())
    }
}
