//! The lowered artifact a deployment picks up: the model's kernels as one
//! CUDA translation unit (`kernels.cu`) and one file per kernel, NVRTC's
//! PTX (`compute_80`) and the CUBINs ptxas assembles from it (sm_80, sm_90), and `manifest.json`:
//! per kernel its name, the graph nodes it replaces, its arguments (the
//! values read and written, their types, the symbolic sizes; for a
//! contraction kernel also the sizes taken from the operands' shapes and
//! how), its launch configuration (a contraction's tile and block), and the registers, shared memory and spills ptxas
//! reports on each architecture.

use super::codegen::CudaKernel;
use super::contraction::ContractionKernel;
use super::ptxas::Usage;
use crate::kernel::Program;
use serde_json::{json, Value};
use std::path::Path;

/// The real architectures every kernel is built and checked for.
pub const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// What building a model's kernels produced.
#[derive(Clone, Debug)]
pub struct Built {
    /// The translation unit NVRTC compiled.
    pub source: String,
    /// PTX for `compute_80`.
    pub ptx: Vec<u8>,
    /// CUBIN per architecture of [`ARCHS`].
    pub cubins: Vec<(String, Vec<u8>)>,
    /// ptxas' report per kernel and architecture.
    pub usage: Vec<Usage>,
}

/// Compiles `kernels` as one translation unit with NVRTC to PTX
/// (`compute_80`, cached under `cache`) and assembles it with ptxas for
/// every architecture of [`ARCHS`], the architectures at once: the CUBINs
/// and the resource report. (NVRTC compiling the source again for each
/// real architecture would repeat its front end and ptxas' work: the
/// fixture test's translation unit took three front ends and four
/// assemblies, now one and two.)
pub fn build(kernels: &[CudaKernel], cache: Option<&Path>) -> Result<Built, String> {
    let source = super::device_source(kernels);
    let includes = super::include_dirs();
    let ptx = super::nvrtc::compile(&source, "compute_80", &includes, cache)?.bytes;
    let assembled: Vec<Result<(Vec<u8>, Vec<Usage>), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = ARCHS.iter().map(|arch| s.spawn(|| super::ptxas::assemble(&ptx, arch))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("ptxas thread panicked".into()))).collect()
    });
    let mut cubins = Vec::new();
    let mut usage = Vec::new();
    for (arch, result) in ARCHS.iter().zip(assembled) {
        let (cubin, used) = result?;
        cubins.push((arch.to_string(), cubin));
        usage.extend(used);
    }
    Ok(Built { source, ptx, cubins, usage })
}

/// The manifest entry of kernel `k` made from program `p`.
pub fn manifest_entry(p: &Program, k: &CudaKernel, nodes: &[String], usage: &[Usage]) -> Value {
    let mut args: Vec<Value> = p
        .operands
        .iter()
        .zip(&k.buffers)
        .map(|(v, ty)| json!({ "kind": "input", "value": v.value, "type": ty }))
        .collect();
    args.extend(
        p.outputs
            .iter()
            .zip(&k.buffers[k.n_inputs..])
            .map(|(o, ty)| json!({ "kind": "output", "value": o.view.value, "type": ty })),
    );
    args.extend(k.symbols.iter().map(|s| json!({ "kind": "size", "symbol": s, "type": "long long" })));
    json!({
        "name": k.name,
        "replaces": nodes,
        "kind": if k.reduces { "reduction" } else { "elementwise" },
        "arguments": args,
        "launch": k.launch.to_json(),
        "resources": resources(&k.name, usage),
    })
}

/// ptxas' report for kernel `name` on each architecture.
fn resources(name: &str, usage: &[Usage]) -> Vec<Value> {
    usage
        .iter()
        .filter(|u| u.kernel == name)
        .map(|u| {
            json!({
                "arch": u.arch, "registers": u.registers, "shared_bytes": u.shared_bytes,
                "spill_stores": u.spill_stores, "spill_loads": u.spill_loads,
            })
        })
        .collect()
}

/// The manifest entry of contraction kernel `c`, replacing `nodes` (the
/// contraction's, and its epilogue's when fused).
pub fn contraction_entry(c: &ContractionKernel, nodes: &[String], usage: &[Usage]) -> Value {
    let k = &c.kernel;
    let mut args: Vec<Value> = c
        .reads
        .iter()
        .zip(&k.buffers)
        .enumerate()
        .map(|(i, (v, ty))| {
            let role = if i < c.node_inputs { ["A", "B", "C"][i] } else { "epilogue" };
            json!({ "kind": "input", "value": v, "type": ty, "role": role })
        })
        .collect();
    args.extend(
        c.writes
            .iter()
            .zip(&k.buffers[k.n_inputs..])
            .map(|(w, ty)| json!({ "kind": "output", "value": w.value, "type": ty })),
    );
    args.extend(c.symbols.iter().map(|s| json!({ "kind": "size", "symbol": s, "type": "long long" })));
    args.extend(c.sizes.iter().map(|(s, how)| json!({ "kind": "size", "name": s, "type": "long long", "from": how })));
    json!({
        "name": k.name,
        "replaces": nodes,
        "kind": "contraction",
        "op": format!("{:?}", c.op),
        "geometry": format!("{:?}", c.geometry),
        "epilogue_fused": c.fused,
        "arguments": args,
        "launch": k.launch.to_json(),
        "resources": resources(&k.name, usage),
    })
}

/// Writes the artifact into `dir`: `kernels.cu`, `<kernel>.cu`,
/// `kernels.ptx`, `kernels.<arch>.cubin`, `manifest.json` (each file
/// written whole or not at all).
pub fn write(dir: &Path, kernels: &[CudaKernel], built: &Built, entries: Vec<Value>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let put = |name: &str, bytes: &[u8]| -> Result<(), String> {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    put("kernels.cu", built.source.as_bytes())?;
    for k in kernels {
        put(&format!("{}.cu", k.name), super::device_source(std::slice::from_ref(k)).as_bytes())?;
    }
    put("kernels.ptx", &built.ptx)?;
    for (arch, cubin) in &built.cubins {
        put(&format!("kernels.{arch}.cubin"), cubin)?;
    }
    let manifest = json!({
        "format": "diamond-cuda-kernels/1",
        "translation_unit": "kernels.cu",
        "ptx": { "file": "kernels.ptx", "arch": "compute_80" },
        "cubin": built.cubins.iter().map(|(a, _)| json!({ "arch": a, "file": format!("kernels.{a}.cubin") })).collect::<Vec<_>>(),
        "kernels": entries,
    });
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())?;
    put("manifest.json", text.as_bytes())
}
