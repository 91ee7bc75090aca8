// Cluster feasibility probe for the decode split's fold (issue 13, session f):
// placement of clusters of CS CTAs at 2 CTAs/SM (192 threads, ~100 KB smem), the latency of a
// cluster barrier, and a DSMEM distributed fold against the global atomic hand-off + fold by the
// last CTA (today's fused fold shape: 4 heads x 128 fp32 per slot).
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
namespace cg = cooperative_groups;

__device__ __forceinline__ uint64_t gt()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ uint32_t smid()
{
    uint32_t s;
    asm volatile("mov.u32 %0, %smid;" : "=r"(s));
    return s;
}

constexpr int NT = 192;
constexpr int SLOT = 512; // floats per slot: 4 heads x 128

struct rec {
    unsigned long long sm, t0, t1, t2, t3;
};

// mode 0: cluster barrier + distributed DSMEM fold; mode 1: global slots + acq_rel counter, last
// folds
template <int MODE>
__global__ void __launch_bounds__(NT, 2)
    probe(rec *out, float *slots, int *cnt, float *res, int spin_ns, int cs)
{
    extern __shared__ float sm[];
    const int tid = threadIdx.x;
    const int cta = blockIdx.x;
    uint64_t t0 = gt();
    // fake work: spin, staggered by rank so the last CTA of a group is late
    const int rank = cta % cs, grp = cta / cs;
    uint64_t until = t0 + spin_ns + (rank * 37 % cs) * 100;
    while (gt() < until) {
    }
    for (int i = tid; i < SLOT; i += NT)
        sm[i] = (float)(cta * 1000 + i);
    if (tid < 8)
        sm[SLOT + tid] = (float)rank; // m, l
    uint64_t t1 = gt();
    uint64_t t2 = 0;
    if constexpr (MODE == 0) {
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();
        t2 = gt();
        // distributed: this CTA folds columns [rank*SLOT/cs, (rank+1)*SLOT/cs) over cs peers in
        // order
        const int w = SLOT / cs;
        for (int c = tid; c < w; c += NT) {
            float acc = 0.f;
            for (int r = 0; r < cs; r++) {
                const float *peer = cl.map_shared_rank(sm, r);
                float mm = peer[SLOT];
                acc = acc * 0.5f + peer[rank * w + c] * __expf(mm - 1.f);
            }
            res[(size_t)grp * SLOT + rank * w + c] = acc;
        }
        cl.sync(); // peers' smem stays alive until everyone read it
    } else {
        for (int i = tid; i < SLOT; i += NT)
            slots[(size_t)cta * SLOT + i] = sm[i];
        __shared__ int last;
        __syncthreads();
        if (tid == 0) {
            int prev;
            asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;"
                         : "=r"(prev)
                         : "l"(cnt + grp)
                         : "memory");
            last = prev == cs - 1;
            if (last)
                cnt[grp] = 0;
        }
        __syncthreads();
        t2 = gt();
        if (last) {
            for (int c = tid; c < SLOT; c += NT) {
                float acc = 0.f;
                for (int r = 0; r < cs; r++)
                    acc = acc * 0.5f + __ldcg(slots + (size_t)(grp * cs + r) * SLOT + c) * 1.0001f;
                res[(size_t)grp * SLOT + c] = acc;
            }
        }
    }
    __syncthreads();
    if (tid == 0)
        out[cta] = rec{smid(), t0, t1, t2, gt()};
}

int main()
{
    const int smem = 100 * 1024;
    cudaFuncSetAttribute(probe<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(probe<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(probe<0>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    int nctas = 256;
    rec *d_out;
    float *slots, *res;
    int *cnt;
    cudaMalloc(&d_out, sizeof(rec) * 1024);
    cudaMalloc(&slots, 1024 * SLOT * 4);
    cudaMalloc(&res, 1024 * SLOT * 4);
    cudaMalloc(&cnt, 4096);
    cudaMemset(cnt, 0, 4096);
    for (int cs : {2, 4, 8, 16}) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = cs;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(nctas);
        cfg.blockDim = dim3(NT);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int ncl = -1;
        cudaError_t e = cudaOccupancyMaxActiveClusters(&ncl, (void *)probe<0>, &cfg);
        printf("cs %2d: max active clusters %d (%s) -> %d CTAs resident\n", cs, ncl,
               cudaGetErrorString(e), ncl * cs);
        for (int mode = 0; mode < 2; mode++) {
            std::vector<double> bar, fold, tail;
            int spread_min = 99, spread_max = 0;
            for (int rep = 0; rep < 6; rep++) {
                if (mode == 0)
                    e = cudaLaunchKernelEx(&cfg, probe<0>, d_out, slots, cnt, res, 20000, cs);
                else {
                    probe<1><<<nctas, NT, smem>>>(d_out, slots, cnt, res, 20000, cs);
                    e = cudaGetLastError();
                }
                if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
                    printf("  mode %d launch failed: %s\n", mode,
                           cudaGetErrorString(cudaGetLastError()));
                    break;
                }
                std::vector<rec> h(nctas);
                cudaMemcpy(h.data(), d_out, sizeof(rec) * nctas, cudaMemcpyDeviceToHost);
                for (int g = 0; g < nctas / cs; g++) {
                    unsigned long long lastt1 = 0, end = 0, t2max = 0;
                    std::vector<int> sms;
                    for (int r = 0; r < cs; r++) {
                        const rec &x = h[g * cs + r];
                        lastt1 = std::max(lastt1, x.t1);
                        end = std::max(end, x.t3);
                        t2max = std::max(t2max, x.t2);
                        sms.push_back((int)x.sm);
                    }
                    std::sort(sms.begin(), sms.end());
                    int d = (int)(std::unique(sms.begin(), sms.end()) - sms.begin());
                    spread_min = std::min(spread_min, d);
                    spread_max = std::max(spread_max, d);
                    bar.push_back((t2max - lastt1) / 1e3);
                    tail.push_back((end - lastt1) / 1e3);
                }
            }
            if (bar.empty())
                continue;
            std::sort(bar.begin(), bar.end());
            std::sort(tail.begin(), tail.end());
            printf("  %s: distinct SMs per group %d..%d; last arrival -> all released p50 %.2f us "
                   "max %.2f; last arrival -> group end p50 %.2f max %.2f us\n",
                   mode == 0 ? "cluster/DSMEM" : "global/atomic", spread_min, spread_max,
                   bar[bar.size() / 2], bar.back(), tail[tail.size() / 2], tail.back());
        }
    }
    return 0;
}
