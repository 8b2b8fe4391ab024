//! Contraction steps (MatMul, Gemm, Conv with the elementwise program fused
//! after them) as CUDA C: one tiled shared-memory kernel per step
//! ([`tiled`]) whose accumulators go through the epilogue in registers
//! ([`epilogue`]) before the only store. The node's attributes and operand
//! ranks are baked in ([`geometry::Geometry`]); every size (`M`, `N`, `K`,
//! batch dims and their strides, Conv's batch, channels and spatial sizes)
//! is an argument, so one kernel serves every binding of the model's
//! symbols. An epilogue that does not read the product one to one is not
//! fused: the kernel then stores the product, and the epilogue runs as its
//! own program kernel. [`job`] builds a host-shim launch from tensors.
//!
//! Parameters, in order: the node's inputs `ca`, `cb` (and `cc`: Gemm's C
//! or Conv's bias), the epilogue's other operands `in<k>`, the outputs
//! `out<k>` (the epilogue's, or the product), the model's symbols the
//! epilogue mentions `S<i>`, then the sizes ([`geometry::size_names`]).

pub mod epilogue;
pub mod geometry;
pub mod job;
pub mod tiled;

use super::codegen::{identifier, program_symbols, storage_type, store_expr, CudaKernel};
use super::launch::Launch;
use crate::kernel::{Contraction, ContractionOp, Declared};
use diamond_ir::Node;
use geometry::Geometry;

/// A generated contraction kernel and what a launcher needs to know.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractionKernel {
    /// The kernel (its `symbols` are the model's symbols, then the size names).
    pub kernel: CudaKernel,
    /// Which operator.
    pub op: ContractionOp,
    /// Its static form.
    pub geometry: Geometry,
    /// The model's symbols passed first (a prefix of `kernel.symbols`).
    pub symbols: Vec<String>,
    /// The size arguments after them, with how each is computed.
    pub sizes: Vec<(String, &'static str)>,
    /// The values of the pointer parameters before the outputs: the node's
    /// inputs, then the epilogue's other operands.
    pub reads: Vec<String>,
    /// How many of `reads` are the node's inputs.
    pub node_inputs: usize,
    /// The tensors written, in parameter order.
    pub writes: Vec<Declared>,
    /// Whether the epilogue is applied in registers (`false` with an
    /// epilogue: the product is written, and the program runs after).
    pub fused: bool,
}

/// Threads, tile and shared-memory step of every contraction kernel.
pub fn launch() -> Launch {
    Launch::tiled(tiled::TILE_M, tiled::TILE_N, tiled::K_STEP, tiled::MICRO)
}

/// Generates kernel `name` for contraction step `c` of node `node`.
pub fn generate(c: &Contraction, node: &Node, name: &str) -> Result<ContractionKernel, String> {
    let name = identifier(name);
    let geometry = Geometry::of(c.op, node, &c.inputs)?;
    let output = c.output.as_ref().ok_or("the result's shape is unknown")?;
    storage_type(output.elem)?;
    let present: Vec<&Declared> = c.inputs.iter().flatten().collect();
    let (a, b) = (present[0], present[1]);
    let third = match (&geometry, c.inputs.get(2).and_then(Option::as_ref)) {
        (Geometry::Gemm { c: true, .. } | Geometry::Conv { bias: true, .. }, Some(d)) => Some(d),
        _ => None,
    };
    let mut params = vec![
        format!("const {}* __restrict__ ca", storage_type(a.elem)?),
        format!("const {}* __restrict__ cb", storage_type(b.elem)?),
    ];
    let mut buffers = vec![storage_type(a.elem)?.to_string(), storage_type(b.elem)?.to_string()];
    let mut reads = vec![a.value.clone(), b.value.clone()];
    if let Some(d) = third {
        params.push(format!("const {}* __restrict__ cc", storage_type(d.elem)?));
        buffers.push(storage_type(d.elem)?.to_string());
        reads.push(d.value.clone());
    }
    let node_inputs = reads.len();
    let fusion = c.epilogue.as_ref().and_then(|p| Some((p, epilogue::product_operands(p, &output.value)?)));
    let mut source = String::new();
    let (symbols, writes, statement) = match &fusion {
        Some((p, readers)) => {
            let symbols = program_symbols(p);
            let function = format!("{name}_epilogue");
            source.push_str(&epilogue::device_function(&function, p, readers, output.elem, &symbols)?);
            params.extend(epilogue::buffer_params(p, readers)?);
            for (k, v) in p.operands.iter().enumerate() {
                if !readers.contains(&k) {
                    buffers.push(storage_type(v.elem)?.to_string());
                    reads.push(v.value.clone());
                }
            }
            let mut writes = Vec::new();
            for o in &p.outputs {
                buffers.push(storage_type(o.view.elem)?.to_string());
                writes.push(Declared { value: o.view.value.clone(), elem: o.view.elem, dims: o.view.dims.clone() });
            }
            let mut args = epilogue::buffer_args(p, readers);
            args.extend((0..symbols.len()).map(|i| format!("S{i}")));
            args.extend(["L".to_string(), "v".to_string()]);
            (symbols, writes, format!("{function}({});", args.join(", ")))
        }
        None => {
            params.push(format!("{}* __restrict__ out0", storage_type(output.elem)?));
            buffers.push(storage_type(output.elem)?.to_string());
            (Vec::new(), vec![output.clone()], format!("out0[L] = {};", store_expr(output.elem, "v")))
        }
    };
    let n_inputs = reads.len();
    params.extend((0..symbols.len()).map(|i| format!("long long S{i}")));
    let sizes = geometry::size_names(&geometry);
    params.extend(sizes.iter().map(|(s, _)| format!("long long {s}")));
    source.push_str(&format!("extern \"C\" __global__ void {name}({}) {{\n", params.join(", ")));
    let types = tiled::InputTypes { a: a.elem, b: b.elem, c: third.map(|d| d.elem) };
    source.push_str(&tiled::body(&geometry, &types, &tiled::Finish { statement }));
    let mut all_symbols = symbols.clone();
    all_symbols.extend(sizes.iter().map(|(s, _)| format!("#{s}")));
    let kernel = CudaKernel { name, source, symbols: all_symbols, launch: launch(), reduces: false, buffers, n_inputs };
    Ok(ContractionKernel {
        kernel,
        op: c.op,
        geometry,
        symbols,
        sizes,
        reads,
        node_inputs,
        writes,
        fused: fusion.is_some(),
    })
}
