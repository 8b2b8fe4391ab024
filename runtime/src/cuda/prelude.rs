//! The source every generated translation unit starts with: the device
//! helpers the kernels call (`dm_*`, with the reference executor's NaN and
//! rounding conventions: NaN-propagating max/min, round half to even, Clip
//! keeping NaN), and the host shim that lets g++ compile and run the very
//! same CUDA source on the CPU.
//!
//! The shim maps `__global__`/`__device__` to plain C++, runs each CUDA
//! thread of a block as a fiber (its own stack and context; `threadIdx` is
//! set as each is resumed) with the blocks in sequence, makes
//! `__syncthreads` a barrier across the block's fibers (each yields there
//! until all live ones have arrived), and `__shared__` a function-level
//! `static` (one copy, which the block running now owns: blocks never
//! overlap). Fibers rather than OS threads: a barrier is a context switch,
//! not a wake-up of hundreds of threads on a few cores, and the shim needs
//! no C++ threading headers (half of a small translation unit's compile).
//! `__half`/`__nv_bfloat16` are 16-bit structs with the conversions written
//! out (round to nearest even).

/// Device helpers, compiled for the GPU and, under the shim, for the host.
pub const DEVICE_HELPERS: &str = r#"
#define DM_BOTH(T) \
__device__ __forceinline__ bool dm_isnan(T x) { return x != x; } \
__device__ __forceinline__ T dm_max(T a, T b) { return (dm_isnan(a) || dm_isnan(b)) ? (a + b) : (a > b ? a : b); } \
__device__ __forceinline__ T dm_min(T a, T b) { return (dm_isnan(a) || dm_isnan(b)) ? (a + b) : (a < b ? a : b); } \
__device__ __forceinline__ T dm_clamp(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); } \
__device__ __forceinline__ T dm_clip(T x, T lo, T hi) { x = x < lo ? lo : x; return x > hi ? hi : x; } \
__device__ __forceinline__ T dm_sign(T x) { return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : x); } \
__device__ __forceinline__ T dm_sigmoid(T x) { return x >= (T)0 ? (T)1 / ((T)1 + dm_exp(-x)) : dm_exp(x) / ((T)1 + dm_exp(x)); } \
__device__ __forceinline__ T dm_softplus(T x) { return x > (T)30 ? x : dm_log1p(dm_exp(x)); } \
__device__ __forceinline__ T dm_gelu(T x) { return (T)0.5 * x * ((T)1 + dm_erf(x * (T)0.70710678118654752440)); } \
__device__ __forceinline__ T dm_gelu_tanh(T x) { return (T)0.5 * x * ((T)1 + dm_tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x))); } \
__device__ __forceinline__ double dm_trunc(T x) { return dm_isnan(x) ? 0.0 : (double)x; }

__device__ __forceinline__ float dm_abs(float x) { return fabsf(x); }
__device__ __forceinline__ float dm_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ float dm_floor(float x) { return floorf(x); }
__device__ __forceinline__ float dm_round(float x) { return rintf(x); }
__device__ __forceinline__ float dm_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float dm_exp(float x) { return expf(x); }
__device__ __forceinline__ float dm_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ float dm_log(float x) { return logf(x); }
__device__ __forceinline__ float dm_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ float dm_sin(float x) { return sinf(x); }
__device__ __forceinline__ float dm_cos(float x) { return cosf(x); }
__device__ __forceinline__ float dm_tan(float x) { return tanf(x); }
__device__ __forceinline__ float dm_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float dm_erf(float x) { return erff(x); }
__device__ __forceinline__ float dm_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double dm_abs(double x) { return fabs(x); }
__device__ __forceinline__ double dm_ceil(double x) { return ceil(x); }
__device__ __forceinline__ double dm_floor(double x) { return floor(x); }
__device__ __forceinline__ double dm_round(double x) { return rint(x); }
__device__ __forceinline__ double dm_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ double dm_exp(double x) { return exp(x); }
__device__ __forceinline__ double dm_expm1(double x) { return expm1(x); }
__device__ __forceinline__ double dm_log(double x) { return log(x); }
__device__ __forceinline__ double dm_log1p(double x) { return log1p(x); }
__device__ __forceinline__ double dm_sin(double x) { return sin(x); }
__device__ __forceinline__ double dm_cos(double x) { return cos(x); }
__device__ __forceinline__ double dm_tan(double x) { return tan(x); }
__device__ __forceinline__ double dm_tanh(double x) { return tanh(x); }
__device__ __forceinline__ double dm_erf(double x) { return erf(x); }
__device__ __forceinline__ double dm_pow(double x, double y) { return pow(x, y); }
DM_BOTH(float)
DM_BOTH(double)
__device__ __forceinline__ bool dm_isnan(int x) { return false; }
__device__ __forceinline__ bool dm_isnan(long long x) { return false; }
__device__ __forceinline__ bool dm_isnan(bool x) { return false; }
"#;

/// The 16-bit float headers, for NVRTC (from the CUDA runtime wheel's include folder).
pub const DEVICE_HALF_INCLUDES: &str = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";

/// The host shim: what g++ needs to compile and run CUDA kernels on the CPU.
pub const HOST_SHIM: &str = r#"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ucontext.h>
using std::fabs; using std::ceil; using std::floor; using std::rint; using std::sqrt; using std::exp;
using std::expm1; using std::log; using std::log1p; using std::sin; using std::cos; using std::tan;
using std::tanh; using std::erf; using std::pow;
struct dim3 { unsigned int x = 1, y = 1, z = 1; };
static dim3 threadIdx;
static dim3 blockIdx;
static dim3 blockDim;
static dim3 gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
// One emulated CUDA thread: a fiber with its own stack.
struct dm_fiber { ucontext_t context; bool done; };
static ucontext_t dm_scheduler;
static dm_fiber* dm_running = nullptr;
// The barrier: the running thread stops here until every live thread of the block has reached it.
static inline void __syncthreads() { swapcontext(&dm_running->context, &dm_scheduler); }
static void (*dm_body)(void*) = nullptr;
static void* dm_body_state = nullptr;
static void dm_thread_main() { dm_body(dm_body_state); dm_running->done = true; }
template <class F> static void dm_call(void* f) { (*(F*)f)(); }
static const size_t dm_stack_bytes = 128 * 1024;
static char* dm_stacks = nullptr;
static unsigned int dm_stacks_for = 0;
static dm_fiber* dm_fibers = nullptr;
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
struct __half { unsigned short bits; };
struct __nv_bfloat16 { unsigned short bits; };
static inline float __half2float(__half h) {
    unsigned int sign = (h.bits >> 15) & 1, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ff, out;
    if (exp == 0) {
        if (man == 0) { out = sign << 31; }
        else { int e = -1; do { e++; man <<= 1; } while (!(man & 0x400)); out = (sign << 31) | ((127 - 15 - e) << 23) | ((man & 0x3ff) << 13); }
    } else if (exp == 31) { out = (sign << 31) | 0x7f800000 | (man << 13); }
    else { out = (sign << 31) | ((exp + 127 - 15) << 23) | (man << 13); }
    float f; std::memcpy(&f, &out, 4); return f;
}
static inline __half __float2half(float f) {
    unsigned int x; std::memcpy(&x, &f, 4);
    unsigned int sign = (x >> 16) & 0x8000; int exp = (int)((x >> 23) & 0xff) - 127 + 15; unsigned int man = x & 0x7fffff;
    __half h;
    if (((x >> 23) & 0xff) == 0xff) { h.bits = sign | 0x7c00 | (man ? 0x200 : 0); return h; }
    if (exp >= 31) { h.bits = sign | 0x7c00; return h; }
    if (exp <= 0) {
        if (exp < -10) { h.bits = sign; return h; }
        man |= 0x800000; unsigned int shift = 14 - exp; unsigned int half_man = man >> shift;
        unsigned int rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half_man & 1))) half_man++;
        h.bits = sign | half_man; return h;
    }
    unsigned int half_man = man >> 13, rem = man & 0x1fff;
    unsigned int bits = sign | ((unsigned int)exp << 10) | half_man;
    if (rem > 0x1000 || (rem == 0x1000 && (half_man & 1))) bits++;
    h.bits = (unsigned short)bits; return h;
}
static inline float __bfloat162float(__nv_bfloat16 b) { unsigned int x = (unsigned int)b.bits << 16; float f; std::memcpy(&f, &x, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16(float f) {
    unsigned int x; std::memcpy(&x, &f, 4); __nv_bfloat16 b;
    if ((x & 0x7fffffff) > 0x7f800000) { b.bits = (unsigned short)((x >> 16) | 0x40); return b; }
    x += 0x7fff + ((x >> 16) & 1); b.bits = (unsigned short)(x >> 16); return b;
}
// Runs `body` as a grid of `grid` blocks of `block` threads, the blocks in
// sequence. Each CUDA thread of a block is a fiber; the block runs in rounds,
// each fiber going until its next `__syncthreads` or its end, so a round is
// the span between two barriers. Odd rounds take the threads in reverse
// order, so a missing barrier (one thread reading shared memory another has
// not written yet, or overwriting what another has not read) shows.
template <class F>
static void dm_launch(unsigned int grid, unsigned int block, F body) {
    gridDim.x = grid; blockDim.x = block;
    dm_body = &dm_call<F>; dm_body_state = &body;
    if (block > dm_stacks_for) {
        free(dm_stacks); free(dm_fibers);
        dm_stacks = (char*)malloc((size_t)block * dm_stack_bytes);
        dm_fibers = (dm_fiber*)calloc(block, sizeof(dm_fiber));
        if (!dm_stacks || !dm_fibers) { fprintf(stderr, "out of memory for %u threads\n", block); exit(4); }
        dm_stacks_for = block;
    }
    for (unsigned int b = 0; b < grid; b++) {
        blockIdx.x = b;
        for (unsigned int t = 0; t < block; t++) {
            dm_fiber* f = &dm_fibers[t];
            f->done = false;
            getcontext(&f->context);
            f->context.uc_stack.ss_sp = dm_stacks + (size_t)t * dm_stack_bytes;
            f->context.uc_stack.ss_size = dm_stack_bytes;
            f->context.uc_link = &dm_scheduler;
            makecontext(&f->context, dm_thread_main, 0);
        }
        for (unsigned int round = 0, live = block; live > 0; round++) {
            live = 0;
            for (unsigned int i = 0; i < block; i++) {
                unsigned int t = (round & 1) ? block - 1 - i : i;
                dm_fiber* f = &dm_fibers[t];
                if (f->done) continue;
                dm_running = f; threadIdx.x = t;
                swapcontext(&dm_scheduler, &f->context);
                live += !f->done;
            }
        }
    }
    dm_running = nullptr;
}
"#;
