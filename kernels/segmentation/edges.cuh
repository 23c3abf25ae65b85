// The edge graph (Baranwal et al. section 3.1 step 1's input; Felzenszwalb & Huttenlocher
// section 5: the 8-neighbour grid graph of the blurred image): every pixel's 4 own weights
// (w4[4p + dir]) and its up to 8 incident edges sorted by key into one word (order[p]), either
// from a blurred image (segmentation_edges: grid-stride, a pixel a thread) or from the frame's bytes
// with scikit-image's f64 Gaussian in the same kernel (segmentation_blur_edges: a 32x16 tile a
// block of 512 threads, everything in shared memory). Both write the same bits as the CPU model.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// The edge graph of a frame in one pass (the weights of the paper's section 3.1, never stored
// as CSR): every pixel writes its own 4 weights (w4[4p + dir]: right, down, down-right,
// down-left; +inf outside the image) and sorts all (up to) 8 of its incident edges by key with
// the 19-comparator network in registers into order[p], cursor 0. The 4 edges owned by the
// left/upper neighbours are recomputed here (seg_dist of the owner, the same operations, so the
// same bits) instead of read back from w4: one pass instead of two. The rounds then walk a pixel's edges from its cursor in key
// order and stop at the first alive one: the pixel's least alive edge, usually after one or two
// neighbour lookups instead of eight. An edge that is dead (both ends in one component, or the
// far side done, or in min_size rounds both sides large) stays dead for the rest of its phase,
// so the cursor only moves forward (segmentation_reset_done rewinds it for the min_size phase, which
// revives edges to done components).
extern "C" __global__ void segmentation_edges(const double* __restrict__ s, double* __restrict__ w4, u32* order,
                                         u32 width, u32 height, u32 channels, u32 eb) {
    u32 n = width * height;
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 x = p % width, y = p / width;
        bool valid[8];
        seg_valid8(x, y, width, height, valid);
        double w[8];
#pragma unroll
        for (u32 i = 0; i < 8; ++i) {
            u32 q, id;
            seg_dir(p, i, width, q, id);
            w[i] = inf;
            if (valid[i]) w[i] = i < 4 ? seg_dist(s, channels, p, q) : seg_dist(s, channels, q, p);
        }
        double* o4 = w4 + (size_t)p * 4;
#pragma unroll
        for (u32 i = 0; i < 4; ++i) o4[i] = w[i];
        order[p] = seg_pixel_order(p, x, y, width, height, eb, w);
    }
}

// segmentation_blur_edges: the blur (common/blur.cuh, the arithmetic of kernels/blur.cu's f64 passes)
// and segmentation_edges in one kernel, from the frame's bytes, a 32x16 tile of pixels a block of 512
// threads, everything in shared memory: (A1) the samples of the rows and columns the tile's blur
// reaches, scaled to [0, 1] once each, at their reflected positions (row and column i of the
// window hold the image's reflect(first + i), so no tap reflects again); (A2) vertical sums of
// the tile's rows and one above and below; (B) horizontal sums of the tile plus the one-pixel
// ring its edges need (one more column either side for the down-left / down-right neighbours);
// (C) the 4 own weights of each pixel of the tile, the row above and the columns either side
// (the owners of the tile's up / left edges); (D) per pixel what segmentation_edges writes: its own
// weights and its 8 edges sorted by key. Every sample, sum and weight is the same operation
// sequence as blur_vertical_f64 -> blur_horizontal_f64 -> segmentation_edges (a tap of the window at
// i - j reads the value blur_reflect would), so the bits are the same; the smoothed image never
// reaches global memory. Window entries outside the image (rows or columns past the border of
// (A2) / (B)) hold reflected sums nothing reads.
// Shared memory (46 KB static, radius <= SEG_GT_MAXR): s_a = (A1) [26 rows][132 samples], then
// (B) [18][108]; s_b = (A2) [18][132], then (C) [dir][17][34]. Samples interleaved by channel
// (a warp reads doubles at a stride of 1 or 3: no bank conflicts). The passes it replaces are
// instruction-bound, so each sample is loaded, scaled and reflected once, not once a tap.
#define SEG_GT_W 32
#define SEG_GT_H 16
#define SEG_GT_THREADS 512
#define SEG_GT_MAXR 4
#define SEG_GT_AR (SEG_GT_H + 2 + 2 * SEG_GT_MAXR)    // (A1) rows
#define SEG_GT_RS ((SEG_GT_W + 4 + 2 * SEG_GT_MAXR) * 3)  // (A1) / (A2) row stride, samples
#define SEG_GT_SR (SEG_GT_H + 2)                      // (A2) / (B) rows
#define SEG_GT_SS ((SEG_GT_W + 4) * 3)                // (B) row stride, samples
#define SEG_GT_WR (SEG_GT_H + 1)
#define SEG_GT_WC (SEG_GT_W + 2)

// The kernel's body for a blur radius RT and channel count CHT known at compile time (the
// loops over taps and channels unrolled, the divisions by the window's row length by a
// constant), or read from the arguments (RT < 0, CHT 0). The shared arrays are the kernel's (a
// template's own would be allocated once per instantiation). The kernel is issue-bound, so the
// default radius 3 with 1 or 3 channels has bodies of its own; other radii take the generic one.
template <int RT, int CHT>
__device__ __forceinline__ void seg_blur_edges_body(const u8* __restrict__ src, const BlurWeightsF64& wt,
                                                    double* __restrict__ w4, u32* order, u32 width, u32 height,
                                                    u32 channels, u32 eb, double inv255, double* s_a, double* s_b) {
    double* s_w = s_b;  // (C) after (B): 4 * 17 * 34 <= 18 * 132 doubles
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    const int W = (int)width, H = (int)height, R = RT >= 0 ? RT : wt.radius, ch = CHT > 0 ? CHT : (int)channels;
    const int x0 = (int)(blockIdx.x * SEG_GT_W), y0 = (int)(blockIdx.y * SEG_GT_H);
    const u32 row = width * channels;
    const int tid = (int)threadIdx.x;
    // Window columns: pixels vx0 .. vx0 + pc - 1 (reflected), cols samples a row.
    const int vx0 = x0 - 2 - R, pc = SEG_GT_W + 4 + 2 * R, cols = pc * ch;
    const int arows = SEG_GT_H + 2 + 2 * R;
    // (A1) to (B): a thread keeps one window column (sample sm) and steps over rows, so the
    // column's index arithmetic and reflection are done once (not a division, reflection and
    // channel split a sample: the kernel is issue-bound).
    // (A1) scaled samples of rows reflect(y0 - 1 - R + r), columns reflect(vx0 + px).
    {
        const int rstep = SEG_GT_THREADS / cols, sm = tid % cols, r0 = tid / cols;
        if (r0 < rstep) {
            const int px = ch == 1 ? sm : sm / 3, c = sm - px * ch;
            const u32 gxc = (u32)(blur_reflect(vx0 + px, W) * ch + c);
            for (int r = r0; r < arows; r += rstep) {
                const int gy = blur_reflect(y0 - 1 - R + r, H);
                s_a[r * SEG_GT_RS + sm] = __dmul_rn((double)src[(size_t)gy * row + gxc], inv255);
            }
        }
    }
    __syncthreads();
    // (A2) vertical sums of rows y0 - 1 .. y0 + H (blur_vertical_f64_at's operations).
    auto vsum = [&](int vr, int sm) {
        const double* a = s_a + (vr + R) * SEG_GT_RS + sm;
        double t = __dmul_rn(a[0], wt.half[0]);
#pragma unroll
        for (int j = R; j >= 1; --j) t = __dadd_rn(t, __dmul_rn(__dadd_rn(a[-j * SEG_GT_RS], a[j * SEG_GT_RS]), wt.half[j]));
        s_b[vr * SEG_GT_RS + sm] = t;
    };
    {
        const int rstep = SEG_GT_THREADS / cols, sm = tid % cols, r0 = tid / cols;
        if (r0 < rstep)
            for (int vr = r0; vr < SEG_GT_SR; vr += rstep) vsum(vr, sm);
    }
    __syncthreads();
    // (B) horizontal sums of columns x0 - 2 .. x0 + W + 1 (blur_horizontal_f64_at's operations;
    // window column x - vx0 holds column reflect(x)), into s_a.
    const int bcols = (SEG_GT_W + 4) * ch;
    auto hsum = [&](int sr, int sm) {
        const double* v = s_b + sr * SEG_GT_RS + sm + R * ch;
        double t = __dmul_rn(v[0], wt.half[0]);
#pragma unroll
        for (int j = R; j >= 1; --j) t = __dadd_rn(t, __dmul_rn(__dadd_rn(v[-j * ch], v[j * ch]), wt.half[j]));
        s_a[sr * SEG_GT_SS + sm] = t;
    };
    {
        const int rstep = SEG_GT_THREADS / bcols, sm = tid % bcols, r0 = tid / bcols;
        if (r0 < rstep)
            for (int sr = r0; sr < SEG_GT_SR; sr += rstep) hsum(sr, sm);
    }
    __syncthreads();
    // (C) own weights (seg_dist's operations) of rows y0 - 1 .. y0 + H - 1, columns x0 - 1 ..
    // x0 + W, into s_b.
    for (int i = tid; i < SEG_GT_WR * SEG_GT_WC; i += SEG_GT_THREADS) {
        int wr = i / SEG_GT_WC, wc = i - wr * SEG_GT_WC;
        int x = x0 - 1 + wc, y = y0 - 1 + wr;
        if (x < 0 || x >= W || y < 0 || y >= H) continue;
        const double* sp = s_a + wr * SEG_GT_SS + (wc + 1) * ch;  // (x, y) in (B)
#pragma unroll
        for (int d = 0; d < 4; ++d) {
            int dx = d == 0 ? 1 : d == 1 ? 0 : d == 2 ? 1 : -1, dy = d == 0 ? 0 : 1;
            double w = inf;
            if (x + dx >= 0 && x + dx < W && y + dy < H) {
                const double* sq = sp + dy * SEG_GT_SS + dx * ch;
                double acc = 0.0;
#pragma unroll
                for (int c = 0; c < ch; ++c) {
                    double df = __dsub_rn(sq[c], sp[c]);
                    double sqr = __dmul_rn(df, df);
                    acc = (c == 0) ? sqr : __dadd_rn(acc, sqr);
                }
                w = __dsqrt_rn(acc);
            }
            s_w[(d * SEG_GT_WR + wr) * SEG_GT_WC + wc] = w;
        }
    }
    __syncthreads();
    // (D) each pixel of the tile: its own weights to w4, its edges sorted into order.
    for (int i = (int)threadIdx.x; i < SEG_GT_W * SEG_GT_H; i += SEG_GT_THREADS) {
        int ly = i / SEG_GT_W, lx = i - ly * SEG_GT_W;
        int x = x0 + lx, y = y0 + ly;
        if (x >= W || y >= H) continue;
        u32 p = (u32)y * width + (u32)x;
        // Weight of each direction: own (d < 4) at (lx, ly); left, up, up-left, up-right are the
        // right / down / down-right / down-left weights of the neighbour that owns them.
        const int wr = ly + 1, wc = lx + 1;
        double wd[8];
#pragma unroll
        for (int d = 0; d < 4; ++d) wd[d] = s_w[(d * SEG_GT_WR + wr) * SEG_GT_WC + wc];
        wd[4] = s_w[(0 * SEG_GT_WR + wr) * SEG_GT_WC + wc - 1];
        wd[5] = s_w[(1 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc];
        wd[6] = s_w[(2 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc - 1];
        wd[7] = s_w[(3 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc + 1];
        double2* o4 = (double2*)(w4 + (size_t)p * 4);
        o4[0] = make_double2(wd[0], wd[1]);
        o4[1] = make_double2(wd[2], wd[3]);
        order[p] = seg_pixel_order(p, (u32)x, (u32)y, width, height, eb, wd);
    }
}

extern "C" __global__ void __launch_bounds__(SEG_GT_THREADS, 3)
    segmentation_blur_edges(const u8* __restrict__ src, BlurWeightsF64 wt, double* __restrict__ w4, u32* order,
                       u32 width, u32 height, u32 channels, u32 eb, double inv255) {
    __shared__ double s_a[SEG_GT_AR * SEG_GT_RS];
    __shared__ double s_b[SEG_GT_SR * SEG_GT_RS];
    // sigma 0.8 (the default) has radius 3 (scikit-image: int(4 sigma + 0.5)).
    if (wt.radius == 3 && channels == 3)
        seg_blur_edges_body<3, 3>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
    else if (wt.radius == 3 && channels == 1)
        seg_blur_edges_body<3, 1>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
    else
        seg_blur_edges_body<-1, 0>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
}
