//! `ptxas`, NVIDIA's PTX assembler (from the `nvidia-cuda-nvcc-cu12`
//! wheel), as the check that generated PTX assembles for a real
//! architecture, and the source of each kernel's resource use: registers,
//! shared memory, and spill stores and loads (`-v` prints them).

use std::path::PathBuf;
use std::process::Command;

/// Resource use of one kernel on one architecture, as ptxas reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// The kernel.
    pub kernel: String,
    /// `sm_80`, ...
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u32,
    /// Bytes stored to and loaded from local memory by spilling.
    pub spill_stores: u32,
    /// See `spill_stores`.
    pub spill_loads: u32,
}

/// Where ptxas is: `$DIAMOND_PTXAS`, else `ptxas` on `PATH`, else the
/// nvcc wheel's `bin/` next to NVRTC's library on `LD_LIBRARY_PATH`.
pub fn locate() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DIAMOND_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    if let Some(p) = dirs.iter().map(|d| d.join("ptxas")).find(|p| p.is_file()) {
        return Some(p);
    }
    let libs =
        std::env::var_os("LD_LIBRARY_PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    // .../site-packages/nvidia/cuda_nvrtc/lib → .../site-packages/nvidia/cuda_nvcc/bin/ptxas
    libs.iter().filter_map(|l| Some(l.parent()?.parent()?.join("cuda_nvcc/bin/ptxas"))).find(|p| p.is_file())
}

/// Assembles `ptx` for `arch` with `-v`: the CUBIN, and the usage of every
/// kernel in it.
pub fn assemble(ptx: &[u8], arch: &str) -> Result<(Vec<u8>, Vec<Usage>), String> {
    let exe = locate().ok_or("ptxas not found: set DIAMOND_PTXAS or install nvidia-cuda-nvcc-cu12 (see the README)")?;
    let key = super::hash_hex(&[ptx, arch.as_bytes()]);
    // A folder per call: calls for several architectures may run at once.
    let dir = std::env::temp_dir().join(format!("diamond-ptxas-{}-{key}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let input = dir.join(format!("{key}.ptx"));
    let output = dir.join(format!("{key}.cubin"));
    std::fs::write(&input, ptx).map_err(|e| e.to_string())?;
    let out = Command::new(&exe)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()));
    let cubin = std::fs::read(&output);
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ptxas -arch={arch} failed:\n{text}"));
    }
    let cubin = cubin.map_err(|e| format!("ptxas -arch={arch} wrote no CUBIN: {e}"))?;
    Ok((cubin, parse(&text, arch)))
}

/// Reads ptxas' `-v` report.
fn parse(text: &str, arch: &str) -> Vec<Usage> {
    let mut usages: Vec<Usage> = Vec::new();
    let number_before = |line: &str, word: &str| -> u32 {
        line.find(word)
            .and_then(|at| line[..at].trim_end().rsplit([' ', ',']).next().and_then(|n| n.trim().parse().ok()))
            .unwrap_or(0)
    };
    for line in text.lines() {
        if let Some(at) = line.find("Compiling entry function '") {
            let rest = &line[at + "Compiling entry function '".len()..];
            let kernel = rest.split('\'').next().unwrap_or("").to_string();
            usages.push(Usage { kernel, arch: arch.to_string(), ..Usage::default() });
        } else if let Some(u) = usages.last_mut() {
            if line.contains("bytes spill stores") {
                u.spill_stores = number_before(line, "bytes spill stores");
                u.spill_loads = number_before(line, "bytes spill loads");
            }
            if line.contains("Used") && line.contains("registers") {
                u.registers = number_before(line, "registers");
                u.shared_bytes = number_before(line, "bytes smem");
            }
        }
    }
    usages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_verbose_report() {
        let text = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'k3' for 'sm_80'\n\
            ptxas info    : Function properties for k3\n\
                0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 26 registers, 1024 bytes smem, 380 bytes cmem[0]\n";
        let u = parse(text, "sm_80");
        assert_eq!(
            u,
            vec![Usage {
                kernel: "k3".into(),
                arch: "sm_80".into(),
                registers: 26,
                shared_bytes: 1024,
                spill_stores: 8,
                spill_loads: 12
            }]
        );
    }
}
