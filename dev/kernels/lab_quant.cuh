/*
 * lab_quant.cuh — host-side random Q4_K / Q6_K matrices (llama.cpp block layout, from the synthetic
 * generator), their host dequantization (the lab's reference), and upload + repack to a device gmat.
 */
#ifndef LILAC_LAB_QUANT_CUH
#define LILAC_LAB_QUANT_CUH

#include "lab.cuh"
#include "../../src/backend/cuda/k_misc.cuh"

struct host_qmat {
    int type, rows, cols;
    std::vector<uint8_t> blocks; /* AoS llama blocks */
};

static host_qmat lab_make_qmat(int type, int rows, int cols, uint64_t seed) {
    host_qmat m{type, rows, cols, {}};
    if (type == GT_BF16) { /* blocks = the bf16 values [rows][cols], uniform in [-0.05, 0.05) */
        m.blocks.resize((size_t)rows * cols * 2);
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            __nv_bfloat16 v = __float2bfloat16((float)((x >> 40) * (1.0 / 16777216.0) - 0.5) * 0.1f);
            memcpy(m.blocks.data() + 2 * i, &v, 2);
        }
        return m;
    }
    int bb = type == GT_Q4_K ? 144 : 210;
    long nb = (long)rows * (cols / 256);
    m.blocks.resize((size_t)nb * bb);
    for (long b = 0; b < nb; b++) qsyn_block_fill(type, seed, 77, (uint64_t)b, m.blocks.data() + b * bb);
    return m;
}

static void lab_dequant_row(const host_qmat &m, int r, float *y) {
    if (m.type == GT_BF16) {
        for (int k = 0; k < m.cols; k++) {
            __nv_bfloat16 v;
            memcpy(&v, m.blocks.data() + 2 * ((size_t)r * m.cols + k), 2);
            y[k] = __bfloat162float(v);
        }
        return;
    }
    int nb = m.cols / 256;
    for (int b = 0; b < nb; b++) {
        if (m.type == GT_Q4_K) {
            const uint8_t *p = m.blocks.data() + ((size_t)r * nb + b) * 144;
            float d = lab_h2f((uint16_t)(p[0] | p[1] << 8)), dmin = lab_h2f((uint16_t)(p[2] | p[3] << 8));
            const uint8_t *q = p + 4, *qs = p + 16;
            for (int s = 0; s < 8; s++) {
                int sc, mn;
                if (s < 4) { sc = q[s] & 63; mn = q[s + 4] & 63; }
                else { sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4); mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4); }
                for (int l = 0; l < 32; l++) y[256 * b + 32 * s + l] = d * sc * ((qs[32 * (s / 2) + l] >> (4 * (s & 1))) & 15) - dmin * mn;
            }
        } else {
            const uint8_t *p = m.blocks.data() + ((size_t)r * nb + b) * 210;
            const uint8_t *ql = p, *qh = p + 128;
            const int8_t *sc = (const int8_t *)(p + 192);
            float d = lab_h2f((uint16_t)(p[208] | p[209] << 8));
            float *yy = y + 256 * b;
            for (int h = 0; h < 2; h++, yy += 128, ql += 64, qh += 32, sc += 8)
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    yy[l] = d * sc[is] * (((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
                    yy[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
                    yy[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                    yy[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                }
        }
    }
}

static gmat lab_upload(const host_qmat &m) {
    gmat g{};
    g.type = m.type; g.rows = m.rows; g.cols = m.cols;
    long nb = (long)m.rows * (m.cols / 256);
    uint8_t *st;
    CK(cudaMalloc(&st, m.blocks.size()));
    CK(cudaMemcpy(st, m.blocks.data(), m.blocks.size(), cudaMemcpyHostToDevice));
    if (m.type == GT_BF16) { g.q = st; return g; }
    uint8_t *a, *b2, *c; __half *d;
    unsigned grid = (unsigned)((nb + 127) / 128);
    if (m.type == GT_Q4_K) {
        CK(cudaMalloc(&a, nb * 16)); CK(cudaMalloc(&b2, nb * 128));
        k_repack_q4k<<<grid, 128>>>(st, nb, a, b2);
        g.sc = a; g.q = b2;
    } else {
        CK(cudaMalloc(&a, nb * 128)); CK(cudaMalloc(&b2, nb * 64)); CK(cudaMalloc(&c, nb * 16)); CK(cudaMalloc(&d, nb * 2));
        k_repack_q6k<<<grid, 128>>>(st, nb, a, b2, c, d);
        g.q = a; g.qh = b2; g.sc = c; g.d = d;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaFree(st));
    return g;
}

static double lab_gmat_bytes(const gmat &g) {
    return g.type == GT_BF16 ? 2.0 * g.rows * g.cols : (double)g.rows * g.cols / 256 * (g.type == GT_Q4_K ? 144 : 210);
}

/* A decode-GEMV lab case: a random rows x cols matrix of `type`, x and the RMSNorm gain g, the fp64
 * reference yref = W (RMSNorm(x) * g), and on the device ~600 MB of copies of W (rotated past the
 * L2 by the timing loops), x, g and y. */
struct lab_gemv_case {
    std::vector<float> x, g, yref;
    std::vector<gmat> W;
    float *dx, *dg, *dy;
    double mb;                     /* bytes of one copy of W */
};

static lab_gemv_case lab_gemv_case_make(int type, int rows, int cols) {
    lab_gemv_case c;
    host_qmat hm = lab_make_qmat(type, rows, cols, rows * 31 + cols);
    std::vector<float> row(cols);
    c.x.resize(cols); c.g.resize(cols); c.yref.resize(rows);
    for (auto &v : c.x) v = lab_uniform(-1, 1);
    for (auto &v : c.g) v = lab_uniform(0.5f, 1.5f);
    double ss = 0;
    for (float t : c.x) ss += (double)t * t;
    float rs = (float)(1.0 / sqrt(ss / cols + 1e-6));
    for (int r = 0; r < rows; r++) {
        lab_dequant_row(hm, r, row.data());
        double acc = 0;
        for (int k = 0; k < cols; k++) acc += (double)row[k] * c.x[k] * c.g[k] * rs;
        c.yref[r] = (float)acc;
    }
    c.mb = lab_gmat_bytes({type, rows, cols});
    int copies = (int)std::max(2.0, std::ceil(600e6 / c.mb));
    c.W.resize(copies);
    for (int i = 0; i < copies; i++) c.W[i] = lab_upload(hm);
    CK(cudaMalloc(&c.dx, cols * 4)); CK(cudaMalloc(&c.dy, rows * 4)); CK(cudaMalloc(&c.dg, cols * 4));
    CK(cudaMemcpy(c.dx, c.x.data(), cols * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.dg, c.g.data(), cols * 4, cudaMemcpyHostToDevice));
    return c;
}

/* One variant of a GEMV case: fn(i) launches it on st for weight copy i. Runs fn(0) once on a
 * poisoned y and checks y against the reference, then times N launches in one graph; one line. */
template <typename F>
static void lab_gemv_case_run(const lab_gemv_case &c, cudaStream_t st, const char *name, const char *vname, F fn, int N) {
    size_t rows = c.yref.size();
    std::vector<float> y(rows);
    CK(cudaMemsetAsync(c.dy, 0xff, rows * 4, st));
    fn(0);
    CK(cudaStreamSynchronize(st));
    CK(cudaGetLastError());
    CK(cudaMemcpy(y.data(), c.dy, rows * 4, cudaMemcpyDeviceToHost));
    double ma, re = lab_relerr(c.yref.data(), y.data(), rows, &ma);
    float us = lab_graph_us(st, fn, N);
    printf("%-26s %-16s %s rel.err %.2e %8.2f us %6.0f GB/s\n", name, vname, re < 2e-2 ? "OK  " : "FAIL", re, us, c.mb / (us * 1e-6) / 1e9);
    fflush(stdout);
}

static void lab_gemv_case_free(lab_gemv_case &c) {
    for (auto &w : c.W) { cudaFree((void *)w.q); cudaFree((void *)w.sc); if (w.qh) cudaFree((void *)w.qh); if (w.d) cudaFree((void *)w.d); }
    cudaFree(c.dx); cudaFree(c.dy); cudaFree(c.dg);
}

#endif
