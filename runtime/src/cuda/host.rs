//! Host execution of generated CUDA source: the kernels of a model, as one
//! translation unit with the shim of [`super::prelude`], compiled by g++
//! and run on the CPU — one fiber per CUDA thread of a block, blocks in
//! sequence. This is how the CUDA code is tested numerically on machines
//! without a GPU.
//!
//! The program reads jobs from its standard input (kernel index, grid,
//! block, the buffers — operands then outputs — and the symbol values) and
//! writes every buffer back after running each, so one process runs a
//! model's kernels. The executable is cached by a hash of its source.

use super::codegen::CudaKernel;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One launch.
#[derive(Clone, Debug)]
pub struct Job {
    /// Index of the kernel in the translation unit.
    pub kernel: usize,
    /// Blocks.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// Operand buffers then output buffers (outputs zeroed, at their size).
    pub buffers: Vec<Vec<u8>>,
    /// The kernel's symbol values, in its order.
    pub symbols: Vec<i64>,
}

/// A compiled host program for a set of kernels.
#[derive(Clone, Debug)]
pub struct HostProgram {
    exe: PathBuf,
}

/// The C++ translation unit: shim, helpers, kernels, and the job loop.
pub fn translation_unit(kernels: &[CudaKernel]) -> String {
    let mut tu = String::from(super::prelude::HOST_SHIM);
    tu.push_str(super::prelude::DEVICE_HELPERS);
    for k in kernels {
        tu.push_str(&k.source);
    }
    for (i, k) in kernels.iter().enumerate() {
        let mut args: Vec<String> = k
            .buffers
            .iter()
            .enumerate()
            .map(|(b, ty)| if b < k.n_inputs { format!("(const {ty}*)b[{b}]") } else { format!("({ty}*)b[{b}]") })
            .collect();
        args.extend((0..k.symbols.len()).map(|s| format!("s[{s}]")));
        tu.push_str(&format!(
            "static void dm_run_{i}(void** b, const long long* s, unsigned grid, unsigned block) {{\n  \
             dm_launch(grid, block, [&] {{ {}({}); }});\n}}\n",
            k.name,
            args.join(", ")
        ));
    }
    tu.push_str(
        "static bool dm_read(void* p, size_t n) { return n == 0 || fread(p, 1, n, stdin) == n; }\n\
         int main() {\n  for (;;) {\n    uint32_t h[4];\n    if (!dm_read(h, sizeof h)) return 0;\n    \
         void** ptrs = (void**)calloc(h[3] + 1, sizeof(void*));\n    uint64_t* sizes = (uint64_t*)calloc(h[3] + 1, 8);\n    \
         if (!ptrs || !sizes) return 2;\n    \
         for (uint32_t i = 0; i < h[3]; i++) {\n      if (!dm_read(&sizes[i], 8)) return 2;\n      \
         ptrs[i] = malloc(sizes[i] ? sizes[i] : 1);\n      if (!ptrs[i] || !dm_read(ptrs[i], sizes[i])) return 2;\n    }\n    \
         uint32_t ns; if (!dm_read(&ns, 4)) return 2;\n    long long* syms = (long long*)malloc(((size_t)ns + 1) * 8);\n    \
         if (!syms || !dm_read(syms, (size_t)ns * 8)) return 2;\n    \
         switch (h[0]) {\n",
    );
    for i in 0..kernels.len() {
        tu.push_str(&format!("      case {i}: dm_run_{i}(ptrs, syms, h[1], h[2]); break;\n"));
    }
    tu.push_str(
        "      default: return 3;\n    }\n    \
         for (uint32_t i = 0; i < h[3]; i++) { fwrite(&sizes[i], 8, 1, stdout); fwrite(ptrs[i], 1, sizes[i], stdout); free(ptrs[i]); }\n    \
         free(ptrs); free(sizes); free(syms);\n    fflush(stdout);\n  }\n}\n",
    );
    tu
}

impl HostProgram {
    /// Compiles `kernels` with g++ (cached under `cache`).
    pub fn build(kernels: &[CudaKernel], cache: &Path) -> Result<HostProgram, String> {
        let tu = translation_unit(kernels);
        let key = super::hash_hex(&[tu.as_bytes()]);
        std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
        let exe = cache.join(format!("host-{key}"));
        if exe.is_file() {
            return Ok(HostProgram { exe });
        }
        // Names of this build's own: builds of one source may run side by side (threads, processes).
        static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let unique = format!("{}.{}", std::process::id(), BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let src = cache.join(format!("host-{key}.{unique}.cpp"));
        std::fs::write(&src, &tu).map_err(|e| format!("{}: {e}", src.display()))?;
        let tmp = cache.join(format!("host-{key}.{unique}.tmp"));
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
        let out = Command::new(&cxx)
            .args(["-std=c++20", "-O1", "-w", "-x", "c++"])
            .arg(&src)
            .arg("-o")
            .arg(&tmp)
            .output()
            .map_err(|e| format!("{cxx}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{cxx} could not compile {}:\n{}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::fs::rename(&tmp, &exe).map_err(|e| e.to_string())?;
        Ok(HostProgram { exe })
    }

    /// Runs `jobs` in order; each job's buffers after it ran.
    pub fn run(&self, jobs: Vec<Job>) -> Result<Vec<Vec<Vec<u8>>>, String> {
        let mut child = Command::new(&self.exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.exe.display()))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let counts: Vec<usize> = jobs.iter().map(|j| j.buffers.len()).collect();
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            for j in jobs {
                let header = [j.kernel as u32, j.grid, j.block, j.buffers.len() as u32];
                for h in header {
                    stdin.write_all(&h.to_le_bytes())?;
                }
                for b in &j.buffers {
                    stdin.write_all(&(b.len() as u64).to_le_bytes())?;
                    stdin.write_all(b)?;
                }
                stdin.write_all(&(j.symbols.len() as u32).to_le_bytes())?;
                for s in &j.symbols {
                    stdin.write_all(&s.to_le_bytes())?;
                }
            }
            Ok(())
        });
        let mut stdout = child.stdout.take().ok_or("no stdout")?;
        let mut results = Vec::new();
        for (j, n) in counts.into_iter().enumerate() {
            let mut buffers = Vec::with_capacity(n);
            for _ in 0..n {
                let mut len = [0u8; 8];
                if stdout.read_exact(&mut len).is_err() {
                    let status = child.wait().map_err(|e| e.to_string())?;
                    return Err(format!("the host kernels stopped in job {j} ({status})"));
                }
                let mut b = vec![0u8; u64::from_le_bytes(len) as usize];
                stdout.read_exact(&mut b).map_err(|e| e.to_string())?;
                buffers.push(b);
            }
            results.push(buffers);
        }
        let _ = writer.join();
        let status = child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("the host kernels exited with {status}"));
        }
        Ok(results)
    }
}
