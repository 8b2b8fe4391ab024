//! Times one convolution shape by each SIMD route in turn, in one process:
//! the direct kernel forced on, every direct route forced off (im2col and
//! its GEMM), and the route the shape chooses. The three alternate call by
//! call for `PROBE_SECONDS` (default 1.5) and each keeps its best time, so
//! a drift of the machine's speed (tens of percent within seconds on a
//! shared VM) falls on all three alike. `fixtures/bench/conv_routes.py`
//! runs it over every convolution shape of the benchmark zoo.
//!
//! ```sh
//! cargo run --release -p diamond-runtime --example conv_routes -- C_IN HW C_OUT K STRIDE DILATION GROUP THREADS
//! cargo run --release -p diamond-runtime --example conv_routes -- \
//!     C_IN H W C_OUT KH KW SH SW DH DW GROUP PAD_TOP PAD_LEFT PAD_BOTTOM PAD_RIGHT THREADS
//! ```
//! prints `… direct D im2col I auto A GF/s`.

use diamond_runtime::simd::conv::{conv2d_keeping, Conv2d};
use diamond_runtime::simd::cpu::force_direct_conv;
use diamond_runtime::simd::epilogue::Epilogue;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Result<Vec<usize>, _> = std::env::args().skip(1).map(|s| s.parse()).collect();
    let a = match args {
        Ok(a) if a.len() == 8 || a.len() == 16 => a,
        _ => {
            eprintln!("usage: conv_routes C_IN HW C_OUT K STRIDE DILATION GROUP THREADS");
            eprintln!("   or: conv_routes C_IN H W C_OUT KH KW SH SW DH DW GROUP PAD_T PAD_L PAD_B PAD_R THREADS");
            return ExitCode::from(2);
        }
    };
    let p = if a.len() == 16 {
        Conv2d {
            n: 1,
            c_in: a[0],
            h: a[1],
            w: a[2],
            c_out: a[3],
            kh: a[4],
            kw: a[5],
            stride: [a[6], a[7]],
            dilation: [a[8], a[9]],
            group: a[10],
            pads: [a[11], a[12], a[13], a[14]],
        }
    } else {
        // a square input and kernel, padded to keep the plane ("same" at stride 1)
        let (c_in, hw, c_out, k, s, d, g) = (a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        let pad = d * (k / 2);
        let (stride, dilation, pads) = ([s; 2], [d; 2], [pad; 4]);
        Conv2d { n: 1, c_in, h: hw, w: hw, c_out, kh: k, kw: k, stride, dilation, pads, group: g }
    };
    let threads = a[a.len() - 1];
    let Some((oh, ow)) = p.output_hw() else {
        eprintln!("conv_routes: the kernel does not fit the padded input: {p:?}");
        return ExitCode::from(2);
    };
    if p.group == 0 || p.c_in % p.group != 0 || p.c_out % p.group != 0 {
        eprintln!("conv_routes: the group {} divides neither channel count", p.group);
        return ExitCode::from(2);
    }
    let _ = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global();
    let patch = p.c_in / p.group * p.kh * p.kw;
    let input: Vec<f32> = (0..p.c_in * p.h * p.w).map(|i| (i % 7) as f32 * 0.1).collect();
    let weight: Vec<f32> = (0..p.c_out * patch).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut out = vec![0.0f32; p.c_out * oh * ow];
    let ep = Epilogue::default();
    // direct forced on, forced off (im2col), chosen by the shape
    let routes = [Some(true), Some(false), None];
    let mut kept: Vec<_> = routes.iter().map(|_| None).collect();
    let mut best = [f64::MAX; 3];
    let budget: f64 = std::env::var("PROBE_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1.5);
    let start = Instant::now();
    let mut calls = 0;
    while calls < 10 || start.elapsed().as_secs_f64() < budget {
        calls += 1;
        for (i, route) in routes.iter().enumerate() {
            force_direct_conv(*route);
            let t = Instant::now();
            conv2d_keeping(&input, &weight, &p, &mut out, &ep, Some(&mut kept[i]));
            best[i] = best[i].min(t.elapsed().as_secs_f64());
        }
    }
    let flop = 2.0 * (p.c_out * oh * ow * patch) as f64;
    let rate = |t: f64| flop / t / 1e9;
    println!(
        "{}->{} k{}x{} s{:?} d{:?} g{} {}x{} thr{threads}: direct {:.1} im2col {:.1} auto {:.1} GF/s",
        p.c_in,
        p.c_out,
        p.kh,
        p.kw,
        p.stride,
        p.dilation,
        p.group,
        p.h,
        p.w,
        rate(best[0]),
        rate(best[1]),
        rate(best[2])
    );
    ExitCode::SUCCESS
}
