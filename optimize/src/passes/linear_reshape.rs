//! `unflatten-linear`: a Gemm between two Reshapes that only flatten the
//! leading axes and restore them becomes a MatMul on the unflattened input.
//! GPT-2's `Conv1D` (and torch's `addmm` over `x.view(-1, K)`) exports as
//! `Reshape(Gemm(Reshape(x, [-1, K]), W, b), T)` with `T` built from
//! `Shape(x)` by Gathers, Unsqueezes and a Concat; when the check proves
//! the first Reshape keeps `x`'s last axis `K` as the row length and the
//! second gives back `x`'s leading sizes with the Gemm's `N` last, the
//! three nodes are `MatMul(x, W') + b'` (`W' = α·W`, transposed for
//! `transB`; `b' = β·b`) and the shape scaffolding is left to `dead-code`:
//! 9 nodes become 2 per layer.
//!
//! Gates: `transA = 0`; `W` (and `C`, if any) stored float32 tensors, `C`
//! broadcasting along the rows (`[]`, `[1]`, `[N]` or `[1, N]`); each
//! intermediate value has one reader and is not part of the model's
//! interface; `x` has rank 3 or more with a known last size.

use super::pattern::{float_or, int_or, stored_floats};
use super::Pass;
use crate::rewrite::{add_initializer, float_tensor, node, replace_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};

pub(crate) struct LinearReshape;

/// One rewrite: the three nodes, the unflattened input, and the new
/// weight and bias (`None`: the stored one is used as it is).
struct Unflatten {
    flatten: NodeId,
    gemm: NodeId,
    restore: NodeId,
    x: ValueId,
    weight: Result<(Vec<usize>, Vec<f64>), ValueId>,
    bias: Option<Result<(Vec<usize>, Vec<f64>), ValueId>>,
}

impl Pass for LinearReshape {
    fn name(&self) -> &'static str {
        "unflatten-linear"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let found: Vec<Unflatten> = graph.nodes.iter().filter_map(|(id, _)| unflatten_at(model, a, id)).collect();
        let count = found.len();
        if count > 0 {
            apply(model, a, found);
        }
        count
    }
}

/// The rewrite whose restoring Reshape is `restore_id`, when every gate holds.
fn unflatten_at(model: &Model, a: &Analysis, restore_id: NodeId) -> Option<Unflatten> {
    let graph = a.graph(model);
    let restore = &graph.nodes[restore_id];
    if restore.op_type() != "Reshape" || !restore.domain().is_empty() {
        return None;
    }
    let only_reader = |v: ValueId| a.is_internal(model, v) && a.consumers.get(&v).map_or(0, Vec::len) == 1;
    let product = *restore.inputs.first()?;
    let &gemm_id = a.producer.get(&product)?;
    let gemm = &graph.nodes[gemm_id];
    if gemm.op_type() != "Gemm" || !gemm.domain().is_empty() || !only_reader(product) {
        return None;
    }
    if int_or(gemm, "transA", 0) != 0 || a.dtype(model, product) != Some(ElemType::Float) {
        return None;
    }
    let flat = *gemm.inputs.first()?;
    let &flatten_id = a.producer.get(&flat)?;
    let flatten = &graph.nodes[flatten_id];
    if flatten.op_type() != "Reshape" || !flatten.domain().is_empty() || !only_reader(flat) {
        return None;
    }
    let x = *flatten.inputs.first()?;
    let (xs, fs, outs) = (a.shape(model, x)?, a.shape(model, flat)?, a.shape(model, restore.outputs[0])?);
    // the first Reshape keeps x's last axis as the row length
    let Some(DimReport::Known(k)) = xs.last() else { return None };
    if xs.len() < 3 || fs.len() != 2 || fs[1] != DimReport::Known(*k) {
        return None;
    }
    // the second gives back x's leading sizes, N last
    let n = match outs.last() {
        Some(DimReport::Known(n)) => *n as usize,
        _ => return None,
    };
    let settled = |d: &DimReport| !matches!(d, DimReport::Unknown);
    if outs.len() != xs.len() || outs[..outs.len() - 1] != xs[..xs.len() - 1] || !outs.iter().all(settled) {
        return None;
    }
    let k = *k as usize;
    let trans_b = int_or(gemm, "transB", 0) != 0;
    let alpha = float_or(gemm, "alpha", 1.0);
    let w_id = *gemm.inputs.get(1)?;
    let want = if trans_b { [n, k] } else { [k, n] };
    let stored_as = |v: ValueId, dims: &[usize]| {
        a.initializers.contains_key(&v)
            && a.dtype(model, v) == Some(ElemType::Float)
            && a.shape(model, v).is_some_and(|s| s.iter().map(known).eq(dims.iter().map(|&d| Some(d as u64))))
    };
    if !stored_as(w_id, &want) {
        return None;
    }
    // the weight is read (and a new one stored) only when it changes
    let weight = if !trans_b && alpha == 1.0 {
        Err(w_id)
    } else {
        let (w, _) = stored_floats(model, a, w_id)?;
        let at = |r: usize, c: usize| if trans_b { w[c * k + r] } else { w[r * n + c] };
        Ok((vec![k, n], (0..k).flat_map(|r| (0..n).map(move |c| alpha * at(r, c))).collect()))
    };
    let bias = match gemm.inputs.get(2).filter(|&&v| !graph.value_name(v).is_empty()) {
        None => None,
        Some(&c) => {
            let fits = [vec![], vec![1], vec![n], vec![1, n], vec![1, 1]].iter().any(|dims| stored_as(c, dims));
            if !fits {
                return None;
            }
            let beta = float_or(gemm, "beta", 1.0);
            if beta == 1.0 {
                Some(Err(c))
            } else {
                let (values, _) = stored_floats(model, a, c)?;
                Some(Ok((vec![values.len()], values.iter().map(|v| v * beta).collect())))
            }
        }
    };
    Some(Unflatten { flatten: flatten_id, gemm: gemm_id, restore: restore_id, x, weight, bias })
}

/// A known size, `None` for a symbolic or unknown one.
fn known(d: &DimReport) -> Option<u64> {
    match d {
        DimReport::Known(n) => Some(*n),
        _ => None,
    }
}

/// MatMul (and Add) in the restoring Reshape's place; the three nodes removed.
fn apply(model: &mut Model, a: &Analysis, found: Vec<Unflatten>) {
    let graph = &mut model.graphs[a.main];
    let mut dead: HashSet<NodeId> = HashSet::new();
    let mut replacements: HashMap<NodeId, Vec<diamond_ir::Node>> = HashMap::new();
    for u in found {
        let out = graph.nodes[u.restore].outputs[0];
        let out_name = graph.value_name(out).to_string();
        let name = graph.nodes[u.gemm].name.clone().unwrap_or_default();
        let stored = |graph: &mut diamond_ir::Graph, which: &str, t: Result<(Vec<usize>, Vec<f64>), ValueId>| match t {
            Err(id) => id,
            Ok((shape, values)) => {
                let t_name = unique_name(graph, &format!("{out_name}_{which}"));
                add_initializer(graph, float_tensor(&t_name, &shape, &values), a.initializers_are_constants);
                graph.intern(&t_name)
            }
        };
        let w = stored(graph, "weight", u.weight);
        let nodes = match u.bias {
            None => vec![node("MatMul", &name, vec![u.x, w], vec![out], Vec::new())],
            Some(bias) => {
                let b = stored(graph, "bias", bias);
                let product = graph.intern(&unique_name(graph, &format!("{out_name}_product")));
                vec![
                    node("MatMul", &name, vec![u.x, w], vec![product], Vec::new()),
                    node("Add", &format!("{name}_bias"), vec![product, b], vec![out], Vec::new()),
                ]
            }
        };
        dead.extend([u.flatten, u.gemm]);
        replacements.insert(u.restore, nodes);
    }
    replace_nodes(graph, &dead, replacements);
}
