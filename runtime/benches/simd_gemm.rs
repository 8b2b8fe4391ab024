//! The SIMD backend's GEMM and convolution kernels against the machine's
//! measured limit: an FMA loop that keeps 12 accumulators in registers —
//! AVX-512 ones where the processor has AVX-512 (the `gemm` crate's
//! microkernels use it there), else AVX2 — gives the single-thread peak
//! (FLOP/s), and each kernel's
//! FLOP/s is quoted as a share of it, measured in the same run.
//! `cargo bench -p diamond-runtime --bench simd_gemm`; after criterion's
//! own figures, a table of "% of peak" (best of several runs each) is
//! printed. Goals: sgemm 512×512×512 on one thread ≥ 75% of peak;
//! transformer shapes (M = 128, K and N in 64–512) ≥ 50%.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use diamond_runtime::simd::conv::{conv2d_keeping, Conv2d};
use diamond_runtime::simd::epilogue::{Activation, Bias, Epilogue};
use diamond_runtime::simd::gemm::{sgemm, MatRef};
use diamond_runtime::simd::hot_pool::while_hot;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Iterations of the FMA loop (each: 12 vector FMAs, 192 FLOP).
const FMA_ITERS: u64 = 1 << 22;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop(iters: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm256_set1_ps(seed);
    let y = _mm256_set1_ps(0.999_999);
    let mut acc = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in &mut acc {
            *a = _mm256_fmadd_ps(*a, y, x);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for a in acc {
        sum = _mm256_add_ps(sum, a);
    }
    let mut out = [0.0f32; 8];
    _mm256_storeu_ps(out.as_mut_ptr(), sum);
    out.iter().sum()
}

/// [`fma_loop`] with 16-lane AVX-512 registers: the same FLOP in half the
/// iterations.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_loop_512(iters: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm512_set1_ps(seed);
    let y = _mm512_set1_ps(0.999_999);
    let mut acc = [_mm512_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in &mut acc {
            *a = _mm512_fmadd_ps(*a, y, x);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for a in acc {
        sum = _mm512_add_ps(sum, a);
    }
    _mm512_reduce_add_ps(sum)
}

/// Whether the peak is measured with AVX-512 registers.
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("avx512f");
    #[allow(unreachable_code)]
    false
}

fn fma_peak() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each loop only after the check of its features.
    if wide() {
        black_box(unsafe { fma_loop_512(black_box(FMA_ITERS / 2), black_box(1e-3)) });
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        black_box(unsafe { fma_loop(black_box(FMA_ITERS), black_box(1e-3)) });
    }
}

const FMA_FLOP: u64 = FMA_ITERS * 12 * 8 * 2;

/// One measured kernel: its name, FLOP per call, and the call.
struct Case {
    name: String,
    flop: u64,
    run: Box<dyn FnMut() + Send>,
}

fn gemm_case(m: usize, k: usize, n: usize, ep: &'static str) -> Case {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.01).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.01).collect();
    let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.001).collect();
    let mut c = vec![0.0f32; m * n];
    Case {
        name: format!("sgemm {m}x{k}x{n}{ep}"),
        flop: 2 * (m * k * n) as u64,
        run: Box::new(move || {
            let epilogue = if ep.is_empty() {
                Epilogue::default()
            } else {
                Epilogue { bias: Bias::PerCol(&bias), activation: Activation::Gelu, ..Epilogue::default() }
            };
            sgemm(MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n), &mut c, &epilogue);
            black_box(&c);
        }),
    }
}

fn conv_case(name: &str, p: Conv2d) -> Case {
    let (oh, ow) = p.output_hw().expect("the kernel fits");
    let input: Vec<f32> = (0..p.n * p.c_in * p.h * p.w).map(|i| (i % 17) as f32 * 0.01).collect();
    let weight: Vec<f32> = (0..p.c_out * p.c_in / p.group * p.kh * p.kw).map(|i| (i % 5) as f32 * 0.01).collect();
    let bias: Vec<f32> = (0..p.c_out).map(|i| i as f32 * 0.001).collect();
    let mut out = vec![0.0f32; p.n * p.c_out * oh * ow];
    // what the session keeps for a constant weight (Winograd's filters), made on the first call
    let mut kept = None;
    let flop = 2 * (p.n * p.c_out * oh * ow * (p.c_in / p.group) * p.kh * p.kw) as u64;
    Case {
        name: name.to_string(),
        flop,
        run: Box::new(move || {
            let ep = Epilogue { bias: Bias::PerRow(&bias), activation: Activation::Relu, ..Epilogue::default() };
            conv2d_keeping(&input, &weight, &p, &mut out, &ep, Some(&mut kept));
            black_box(&out);
        }),
    }
}

fn conv(c_in: usize, hw: usize, c_out: usize, k: usize, stride: usize, group: usize) -> Conv2d {
    let pad = k / 2;
    Conv2d {
        n: 1,
        c_in,
        h: hw,
        w: hw,
        c_out,
        kh: k,
        kw: k,
        stride: [stride; 2],
        dilation: [1, 1],
        pads: [pad; 4],
        group,
    }
}

fn cases() -> Vec<Case> {
    let mut cases = vec![gemm_case(512, 512, 512, ""), gemm_case(512, 512, 512, " +bias+gelu")];
    for k in [64, 128, 256, 512] {
        for n in [64, 128, 256, 512] {
            cases.push(gemm_case(128, k, n, ""));
        }
    }
    cases.extend([
        conv_case("resnet50 conv1 7x7/2 3->64 224", conv(3, 224, 64, 7, 2, 1)),
        conv_case("resnet18 export conv1 7x7/2 3->8 32", conv(3, 32, 8, 7, 2, 1)),
        conv_case("resnet18 export 3x3 8->8 8", conv(8, 8, 8, 3, 1, 1)),
        conv_case("resnet18 export 3x3/2 16->32 4", conv(16, 4, 32, 3, 2, 1)),
        conv_case("resnet18 export 3x3 32->32 2", conv(32, 2, 32, 3, 1, 1)),
        conv_case("efficientnet export dw 3x3/2 48 16", conv(48, 16, 48, 3, 2, 48)),
        conv_case("unet export 3x3 16->8 32", conv(16, 32, 8, 3, 1, 1)),
        conv_case("3x3 64->64 24", conv(64, 24, 64, 3, 1, 1)),
        conv_case("resnet50 3x3 64->64 56", conv(64, 56, 64, 3, 1, 1)),
        conv_case("resnet50 1x1 256->64 56", conv(256, 56, 64, 1, 1, 1)),
        conv_case("resnet50 3x3 256->256 14", conv(256, 14, 256, 3, 1, 1)),
        conv_case("resnet50 3x3 128->128 28", conv(128, 28, 128, 3, 1, 1)),
        conv_case("resnet50 3x3 512->512 7", conv(512, 7, 512, 3, 1, 1)),
        conv_case("vgg19 3x3 64->64 224", conv(64, 224, 64, 3, 1, 1)),
        conv_case("vgg19 3x3 256->256 56", conv(256, 56, 256, 3, 1, 1)),
        conv_case("vgg19 3x3 512->512 28", conv(512, 28, 512, 3, 1, 1)),
        conv_case("vgg19 3x3 512->512 14", conv(512, 14, 512, 3, 1, 1)),
        conv_case("densenet 3x3 128->32 56", conv(128, 56, 32, 3, 1, 1)),
        conv_case("densenet 3x3 128->32 7", conv(128, 7, 32, 3, 1, 1)),
        conv_case("squeezenet conv1 3x3/2 3->64 224", Conv2d { pads: [0; 4], ..conv(3, 224, 64, 3, 2, 1) }),
        conv_case("squeezenet 3x3 16->64 55", conv(16, 55, 64, 3, 1, 1)),
        conv_case("squeezenet 3x3 32->128 27", conv(32, 27, 128, 3, 1, 1)),
        conv_case("squeezenet 3x3 48->192 13", conv(48, 13, 192, 3, 1, 1)),
        conv_case("squeezenet 3x3 64->256 13", conv(64, 13, 256, 3, 1, 1)),
        conv_case("squeezenet 1x1 512->1000 13", conv(512, 13, 1000, 1, 1, 1)),
        conv_case("squeezenet 1x1 64->16 55", conv(64, 55, 16, 1, 1, 1)),
        conv_case("squeezenet 1x1 128->16 55", conv(128, 55, 16, 1, 1, 1)),
        conv_case("squeezenet 1x1 16->64 55", conv(16, 55, 64, 1, 1, 1)),
        conv_case("squeezenet 1x1 256->32 27", conv(256, 27, 32, 1, 1, 1)),
        conv_case("squeezenet 1x1 32->128 27", conv(32, 27, 128, 1, 1, 1)),
        conv_case("squeezenet 1x1 512->64 13", conv(512, 13, 64, 1, 1, 1)),
        conv_case("mobilenet dw 3x3 32 112", conv(32, 112, 32, 3, 1, 32)),
        conv_case("mobilenet dw 3x3/2 144 56", conv(144, 56, 144, 3, 2, 144)),
        conv_case("mobilenet 1x1 32->64 112", conv(32, 112, 64, 1, 1, 1)),
        conv_case("shufflenet 1x1 g4 136->136 28", conv(136, 28, 136, 1, 1, 4)),
        conv_case("shufflenet 1x1 g4 272->272 14", conv(272, 14, 272, 1, 1, 4)),
        conv_case("shufflenet 1x1 g4 544->544 7", conv(544, 7, 544, 1, 1, 4)),
        conv_case("shufflenet dw 3x3 272 14", conv(272, 14, 272, 3, 1, 272)),
        conv_case("efficientnet export dw 3x3 8 16", conv(8, 16, 8, 3, 1, 8)),
        conv_case("efficientnet export dw 3x3 288 1", conv(288, 1, 288, 3, 1, 288)),
        conv_case("efficientnet export dw 5x5 144 2", conv(144, 2, 144, 5, 1, 144)),
        conv_case("convnext export dw 7x7 16 8", conv(16, 8, 16, 7, 1, 16)),
        conv_case("mobilenet dw 3x3 192 28", conv(192, 28, 192, 3, 1, 192)),
        conv_case("mobilenet dw 3x3 576 14", conv(576, 14, 576, 3, 1, 576)),
        conv_case("mobilenet dw 3x3 960 7", conv(960, 7, 960, 3, 1, 960)),
    ]);
    cases
}

/// Best time of `f` over at least `min_time` and 5 calls.
fn best(mut f: impl FnMut(), min_time: Duration) -> Duration {
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut calls = 0;
    while calls < 5 || start.elapsed() < min_time {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        calls += 1;
    }
    best
}

fn kernels(c: &mut Criterion) {
    // every figure is for one thread: the kernels take their threads from the global pool
    let _ = rayon::ThreadPoolBuilder::new().num_threads(1).build_global();
    let mut group = c.benchmark_group("simd");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(FMA_FLOP));
    group.bench_function("fma peak (FLOP)", |b| b.iter(fma_peak));
    for mut case in cases() {
        group.throughput(Throughput::Elements(case.flop));
        group.bench_function(format!("{} (FLOP, 1 thread)", case.name), |b| b.iter(&mut case.run));
    }
    group.finish();
    percent_of_peak();
}

/// The table of each kernel's share of the FMA peak, measured now.
fn percent_of_peak() {
    let peak = FMA_FLOP as f64 / best(fma_peak, Duration::from_millis(300)).as_secs_f64();
    let width = if wide() { "AVX-512" } else { "AVX2" };
    eprintln!("\nFMA peak ({width}), 1 thread: {:.1} GFLOP/s", peak / 1e9);
    eprintln!("{:<40} {:>10} {:>8}", "kernel (1 thread)", "GFLOP/s", "% peak");
    // `SIMD_GEMM_CASES=text`: only the cases whose name holds it.
    let only = std::env::var("SIMD_GEMM_CASES").unwrap_or_default();
    // `SIMD_GEMM_THREADS=n`: the table again on a pool of n threads, against n times the peak.
    let threads: Option<usize> = std::env::var("SIMD_GEMM_THREADS").ok().and_then(|t| t.parse().ok());
    for mut case in cases().into_iter().filter(|c| c.name.contains(&only)) {
        let t = best(&mut case.run, Duration::from_millis(300));
        let rate = case.flop as f64 / t.as_secs_f64();
        eprintln!("{:<40} {:>10.1} {:>7.1}%", case.name, rate / 1e9, 100.0 * rate / peak);
    }
    if let Some(n) = threads.filter(|&n| n > 1) {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("a thread pool");
        // the FMA loop on every thread of the pool at once
        let together = pool.install(|| best(|| drop(rayon::broadcast(|_| fma_peak())), Duration::from_millis(300)));
        let peak_n = (n * FMA_FLOP as usize) as f64 / together.as_secs_f64();
        eprintln!(
            "\nFMA peak, {n} threads together: {:.1} GFLOP/s ({:.2} × one thread's)",
            peak_n / 1e9,
            peak_n / peak
        );
        eprintln!("{:<40} {:>10} {:>8}", format!("kernel ({n} threads)"), "GFLOP/s", "% peak");
        for mut case in cases().into_iter().filter(|c| c.name.contains(&only)) {
            // as a session runs its steps: the pool's other threads kept awake between calls
            let t = pool.install(|| while_hot(|| best(&mut case.run, Duration::from_millis(300))));
            let rate = case.flop as f64 / t.as_secs_f64();
            eprintln!("{:<40} {:>10.1} {:>7.1}%", case.name, rate / 1e9, 100.0 * rate / peak_n);
        }
    }
}

criterion_group!(benches, kernels);
criterion_main!(benches);
