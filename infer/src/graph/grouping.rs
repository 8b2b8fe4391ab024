//! Node-level precision of the report, once everything is solved.
//!
//! - **One body node, one report.** A `Loop` or `Scan` body (or any
//!   subgraph) may be lowered several times — unrolled iterations, widening
//!   rounds — and each lowering can find the same conflict again. A
//!   diagnostic is identified by what it is about, not by the lowering that
//!   found it: inside a subgraph by (code, graph, node, operand, axis), the
//!   message aside (a later round may see the sizes differently); anywhere
//!   by that and the message. The first one found is kept.
//! - **One cause, one error.** Several shape errors at one node of the main
//!   graph are one error, the others its notes, when changing one
//!   attribute would make the node consistent (`help:` then says which, to
//!   what, and why), or when they share a clashing size.
//! - **Attribute hints.** The node is checked again on its inputs' closed
//!   shapes with one attribute changed: Gemm's `transA` / `transB`,
//!   Concat's `axis`, and `keepdims` of a reduction, `axis` of a Gather or
//!   `perm` of a Transpose whose output the erroneous node broadcasts with.
//!   A hint is given only when exactly one change works.

use super::report::{DimReport, ValueReport};
use crate::diagnostic::{Code, Diagnostic, Severity};
use diamond_ir::entity::EntityId;
use diamond_ir::{AttrValue, Graph, Node};
use std::collections::{HashMap, HashSet};

/// Deduplicates, groups and hints `diagnostics` (see the module documentation).
pub(crate) fn apply(graph: &Graph, values: &[ValueReport], diagnostics: &mut Vec<Diagnostic>) {
    dedup(diagnostics);
    if diagnostics.iter().all(|d| d.severity != Severity::Error) {
        return;
    }
    let shapes: HashMap<&str, &[DimReport]> =
        values.iter().filter_map(|v| Some((v.name.as_str(), v.shape.as_deref()?))).collect();
    let view = View { graph, shapes };
    group(&view, diagnostics);
}

/// The shape codes whose errors can share a cause.
fn is_shape_error(d: &Diagnostic) -> bool {
    d.severity == Severity::Error
        && matches!(
            d.code,
            Code::BroadcastConflict | Code::DimMismatch | Code::RankConflict | Code::ElementCountMismatch
        )
}

/// Drops repeats of a diagnostic about the same thing (see the module documentation).
fn dedup(diagnostics: &mut Vec<Diagnostic>) {
    type Key = (Code, Option<String>, Option<u32>, Option<String>, Option<usize>, Option<String>);
    let mut seen: HashSet<Key> = HashSet::new();
    diagnostics.retain(|d| {
        if d.node_index.is_none() {
            return true;
        }
        // Inside a subgraph the node's identity is enough; in the main graph
        // (and function bodies, whose nodes share its prefix) the message too.
        let message = d.graph.is_none().then(|| d.message.clone());
        seen.insert((d.code, d.graph.clone(), d.node_index, d.operand.clone(), d.axis, message))
    });
}

/// The main graph with every value's closed shape.
struct View<'g> {
    graph: &'g Graph,
    shapes: HashMap<&'g str, &'g [DimReport]>,
}

impl<'g> View<'g> {
    /// The main-graph node a diagnostic is located at: same index, name
    /// (or label) and operator, so a function body's node is never taken
    /// for the main graph's node of the same index.
    fn node_of(&self, d: &Diagnostic) -> Option<&'g Node> {
        let index = d.node_index?;
        let (nid, node) = self.graph.nodes.iter().find(|(nid, _)| EntityId::index(*nid) as u32 == index)?;
        let name =
            if node.name().is_empty() { super::lowering::node_label(self.graph, nid) } else { node.name().to_string() };
        (d.op.as_deref() == Some(node.op_type()) && d.node.as_deref() == Some(name.as_str())).then_some(node)
    }

    /// Input `i`'s closed shape, when its rank is known.
    fn input(&self, node: &Node, i: usize) -> Option<&'g [DimReport]> {
        let &v = node.inputs.get(i)?;
        let name = self.graph.value_name(v);
        if name.is_empty() {
            return None;
        }
        self.shapes.get(name).copied()
    }

    /// The node producing input `i` of `node`.
    fn producer(&self, node: &Node, i: usize) -> Option<&'g Node> {
        let &v = node.inputs.get(i)?;
        self.graph.nodes.iter().map(|(_, n)| n).find(|n| n.outputs.contains(&v))
    }

    /// The elements of an initializer input, as integers.
    fn const_ints(&self, node: &Node, i: usize) -> Option<Vec<i64>> {
        let &v = node.inputs.get(i)?;
        let name = self.graph.value_name(v);
        let t = self.graph.initializers.iter().find(|t| t.name.as_deref() == Some(name))?;
        crate::rule::decode::decode(t)?.as_i64s()
    }
}

/// Groups the shape errors of each main-graph node (see the module documentation).
fn group(view: &View, diagnostics: &mut Vec<Diagnostic>) {
    // Keyed by the node's index and name: a function body's nodes are
    // numbered in their own graph, and their diagnostics carry no prefix.
    type NodeKey = (u32, Option<String>);
    let mut by_node: Vec<(NodeKey, Vec<usize>)> = Vec::new();
    for (k, d) in diagnostics.iter().enumerate() {
        let (None, Some(index), true) = (&d.graph, d.node_index, is_shape_error(d)) else { continue };
        let key = (index, d.node.clone());
        match by_node.iter_mut().find(|(i, _)| *i == key) {
            Some((_, list)) => list.push(k),
            None => by_node.push((key, vec![k])),
        }
    }
    let mut drop: HashSet<usize> = HashSet::new();
    for (_, list) in by_node {
        let Some(node) = view.node_of(&diagnostics[list[0]]) else { continue };
        let hint = hint(view, node);
        let primary = list[0];
        if let Some(h) = &hint {
            if diagnostics[primary].help.is_none() {
                diagnostics[primary].help = Some(h.clone());
            }
        }
        let sizes: HashSet<String> =
            diagnostics[primary].clash.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect();
        for &k in &list[1..] {
            let shares = diagnostics[k].clash.as_ref().is_some_and(|(a, b)| sizes.contains(a) || sizes.contains(b));
            if hint.is_none() && !shares {
                continue;
            }
            let note = also_note(&diagnostics[k]);
            diagnostics[primary].notes.push(note);
            drop.insert(k);
        }
    }
    if drop.is_empty() {
        return;
    }
    let mut k = 0;
    diagnostics.retain(|_| {
        k += 1;
        !drop.contains(&(k - 1))
    });
}

/// A grouped error as a note of the one it is grouped into.
fn also_note(d: &Diagnostic) -> String {
    let mut at = d.operand.clone().unwrap_or_else(|| "the node".to_string());
    if let Some(axis) = d.axis {
        at = format!("{at}, axis {axis}");
    }
    let label = match (&d.op, d.node_index) {
        (Some(op), Some(i)) => {
            let name = d.node.as_deref().filter(|n| !n.contains(' '));
            match name {
                Some(n) => format!("{op} '{n}' (node {i}): "),
                None => format!("{op} (node {i}): "),
            }
        }
        _ => String::new(),
    };
    let message = d.message.strip_prefix(label.as_str()).unwrap_or(&d.message);
    format!("same cause, also at {at}: error[{}] {message}", d.code.as_str())
}

/// The one-attribute change that makes `node` consistent, as a `help:` line.
fn hint(view: &View, node: &Node) -> Option<String> {
    match node.op_type() {
        "Gemm" => gemm_hint(view, node),
        "Concat" => concat_hint(view, node),
        _ => producer_hint(view, node),
    }
}

fn attr_int(node: &Node, name: &str) -> Option<i64> {
    match node.attribute(name)?.value()? {
        AttrValue::Int(i) => Some(i),
        _ => None,
    }
}

fn attr_ints(node: &Node, name: &str) -> Option<Vec<i64>> {
    match node.attribute(name)?.value()? {
        AttrValue::Ints(v) => Some(v.to_vec()),
        _ => None,
    }
}

/// Whether two sizes can be equal (an unknown one can).
fn same(a: &DimReport, b: &DimReport) -> bool {
    matches!(a, DimReport::Unknown) || matches!(b, DimReport::Unknown) || a == b
}

/// The NumPy broadcast of `shapes`, when they broadcast.
fn broadcast(shapes: &[Vec<DimReport>]) -> Option<Vec<DimReport>> {
    let rank = shapes.iter().map(Vec::len).max()?;
    let mut out = vec![DimReport::Known(1); rank];
    for s in shapes {
        for (k, d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            match (&*o, d) {
                (_, DimReport::Known(1)) => {}
                (DimReport::Known(1), _) => *o = d.clone(),
                (x, y) if same(x, y) => {
                    if matches!(x, DimReport::Unknown) {
                        *o = d.clone();
                    }
                }
                _ => return None,
            }
        }
    }
    Some(out)
}

fn show(dims: &[DimReport]) -> String {
    format!("[{}]", dims.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// Gemm: whether `A`, `B` (and `C`) fit under `trans_a`, `trans_b`.
fn gemm_fits(a: &[DimReport], b: &[DimReport], c: Option<&[DimReport]>, trans_a: bool, trans_b: bool) -> bool {
    let (m, ka) = if trans_a { (&a[1], &a[0]) } else { (&a[0], &a[1]) };
    let (kb, n) = if trans_b { (&b[1], &b[0]) } else { (&b[0], &b[1]) };
    if !same(ka, kb) {
        return false;
    }
    match c {
        None => true,
        Some(c) => {
            c.len() <= 2 && c.iter().rev().zip([n, m]).all(|(x, t)| matches!(x, DimReport::Known(1)) || same(x, t))
        }
    }
}

/// Gemm: flipping `transA` or `transB`.
fn gemm_hint(view: &View, node: &Node) -> Option<String> {
    let a = view.input(node, 0).filter(|s| s.len() == 2)?;
    let b = view.input(node, 1).filter(|s| s.len() == 2)?;
    let c = view.input(node, 2);
    let ta = attr_int(node, "transA").unwrap_or(0) != 0;
    let tb = attr_int(node, "transB").unwrap_or(0) != 0;
    if gemm_fits(a, b, c, ta, tb) {
        return None;
    }
    let flip_a = gemm_fits(a, b, c, !ta, tb);
    let flip_b = gemm_fits(a, b, c, ta, !tb);
    let layout = |t: bool, x: &str, y: &str| if t { format!("[{y}, {x}]") } else { format!("[{x}, {y}]") };
    match (flip_a, flip_b) {
        (true, false) => Some(format!(
            "set transA={} (currently {}): A {} is {}",
            u8::from(!ta),
            u8::from(ta),
            show(a),
            layout(!ta, "M", "K")
        )),
        (false, true) => Some(format!(
            "set transB={} (currently {}): B {} is {}",
            u8::from(!tb),
            u8::from(tb),
            show(b),
            layout(!tb, "K", "N")
        )),
        _ => None,
    }
}

/// Concat: another `axis` on which the inputs agree everywhere else.
fn concat_hint(view: &View, node: &Node) -> Option<String> {
    let inputs: Vec<&[DimReport]> = (0..node.inputs.len()).filter_map(|i| view.input(node, i)).collect();
    let rank = inputs.first()?.len();
    if inputs.len() < 2 || inputs.iter().any(|s| s.len() != rank) {
        return None;
    }
    let raw = attr_int(node, "axis")?;
    let current = if raw < 0 { raw + rank as i64 } else { raw };
    let fits =
        |axis: usize| (0..rank).filter(|&j| j != axis).all(|j| inputs.iter().all(|s| same(&s[j], &inputs[0][j])));
    if usize::try_from(current).is_ok_and(|c| c < rank && fits(c)) {
        return None;
    }
    let candidates: Vec<usize> = (0..rank).filter(|&c| fits(c)).collect();
    let [axis] = candidates[..] else { return None };
    let shapes: Vec<String> = inputs.iter().map(|s| show(s)).collect();
    Some(format!("set axis={axis} (currently {raw}): the inputs {} agree on every axis but {axis}", shapes.join(", ")))
}

/// The reductions whose `keepdims` matters to a consumer.
fn is_reduction(op: &str) -> bool {
    op.starts_with("Reduce") || op == "ArgMax" || op == "ArgMin"
}

/// A broadcasting node whose input comes from a reduction, a Gather or a
/// Transpose: changing that producer's `keepdims`, `axis` or `perm` makes
/// the inputs broadcast.
fn producer_hint(view: &View, node: &Node) -> Option<String> {
    const BROADCASTING: [&str; 16] = [
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Mod",
        "Where",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "And",
        "Or",
        "Max",
        "Min",
    ];
    if !BROADCASTING.contains(&node.op_type()) {
        return None;
    }
    let shapes: Vec<Option<&[DimReport]>> = (0..node.inputs.len()).map(|i| view.input(node, i)).collect();
    let fits = |i: usize, replaced: &[DimReport]| {
        let all: Vec<Vec<DimReport>> = shapes
            .iter()
            .enumerate()
            .filter_map(|(j, s)| if j == i { Some(replaced.to_vec()) } else { s.map(<[DimReport]>::to_vec) })
            .collect();
        broadcast(&all).is_some()
    };
    let mut found = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let Some(producer) = view.producer(node, i) else { continue };
        let name = if producer.name().is_empty() { String::new() } else { format!(" '{}'", producer.name()) };
        let op = producer.op_type();
        if is_reduction(op) {
            let Some((keep, out)) = flipped_keepdims(view, producer) else { continue };
            if *shape != Some(out.as_slice()) && fits(i, &out) {
                found.push(format!(
                    "set keepdims={keep} on {op}{name} (currently {}): its output {} then broadcasts with the other operands",
                    1 - keep,
                    show(&out)
                ));
            }
        } else if op == "Gather" {
            let (Some(data), Some(indices)) = (view.input(producer, 0), view.input(producer, 1)) else { continue };
            let r = data.len() as i64;
            let raw = attr_int(producer, "axis").unwrap_or(0);
            let current = if raw < 0 { raw + r } else { raw };
            for a in (0..data.len()).filter(|&a| a as i64 != current) {
                let out: Vec<DimReport> = data[..a].iter().chain(indices).chain(&data[a + 1..]).cloned().collect();
                if *shape != Some(out.as_slice()) && fits(i, &out) {
                    found.push(format!(
                        "set axis={a} on Gather{name} (currently {raw}): its output {} then broadcasts with the other operands",
                        show(&out)
                    ));
                }
            }
        } else if op == "Transpose" {
            let Some(input) = view.input(producer, 0).filter(|s| (2..=5).contains(&s.len())) else { continue };
            let current = attr_ints(producer, "perm").unwrap_or_else(|| (0..input.len() as i64).rev().collect());
            for perm in permutations(input.len()) {
                let as_i64: Vec<i64> = perm.iter().map(|&k| k as i64).collect();
                let out: Vec<DimReport> = perm.iter().map(|&k| input[k].clone()).collect();
                if as_i64 != current && *shape != Some(out.as_slice()) && fits(i, &out) {
                    found.push(format!(
                        "set perm={as_i64:?} on Transpose{name} (currently {current:?}): its output {} then broadcasts with the other operands",
                        show(&out)
                    ));
                }
            }
        }
    }
    match found.len() {
        1 => found.pop(),
        _ => None,
    }
}

/// Every permutation of `0..n`, in lexicographic order.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A reduction's `keepdims` flipped, and its output shape then.
fn flipped_keepdims(view: &View, reduce: &Node) -> Option<(i64, Vec<DimReport>)> {
    let input = view.input(reduce, 0)?;
    let rank = input.len() as i64;
    let keep = attr_int(reduce, "keepdims").unwrap_or(1) != 0;
    let axes: Vec<i64> = match reduce.op_type() {
        "ArgMax" | "ArgMin" => vec![attr_int(reduce, "axis").unwrap_or(0)],
        _ => match attr_ints(reduce, "axes") {
            Some(a) => a,
            None if reduce.inputs.len() > 1 => view.const_ints(reduce, 1)?,
            None if attr_int(reduce, "noop_with_empty_axes").unwrap_or(0) != 0 => return None,
            None => (0..rank).collect(),
        },
    };
    let axes: Vec<usize> = axes
        .into_iter()
        .map(|a| if a < 0 { a + rank } else { a })
        .map(|a| usize::try_from(a).ok().filter(|&a| a < input.len()))
        .collect::<Option<_>>()?;
    let out: Vec<DimReport> = input
        .iter()
        .enumerate()
        .filter_map(|(k, d)| match (axes.contains(&k), keep) {
            // Now kept: flipped, the reduced axes disappear.
            (true, true) => None,
            (true, false) => Some(DimReport::Known(1)),
            (false, _) => Some(d.clone()),
        })
        .collect();
    Some((i64::from(!keep), out))
}
