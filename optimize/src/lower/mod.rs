//! Fusion grouping: the optimized main graph → a
//! [`diamond_runtime::kernel::LoweredModel`].
//!
//! Nodes are visited in the execution order. A node with a recipe
//! (`recipe`: elementwise operators with broadcasting, reductions,
//! Softmax, LayerNormalization, RMSNormalization) joins the group of one
//! of its inputs when its outputs frame into that group's space and no
//! cycle between groups would form; otherwise it starts a group. A
//! reduction joins the group computing its input (its prologue) and sets
//! the group's reduction axes; elementwise nodes after it (the epilogue,
//! or the decomposed forms of normalizations) join at the full or the
//! reduced shape. Transpose, Slice (constant starts and steps) and
//! Reshape-like nodes whose only reader is a group fold into that group's
//! operand views. MatMul, Gemm and Conv are
//! contractions; an elementwise group that alone reads a contraction's
//! result, its first node among the readers (SiLU's Sigmoid and Mul both
//! do), becomes its epilogue. A value computed in a
//! group is written out (materialized) when it is a graph output, a
//! subgraph reads it, or a node outside the group does. Shapes come from
//! the check ([`crate::Analysis`]); extents stay symbolic.

mod group;
mod recipe;

use crate::Analysis;
use diamond_ir::{Graph, Model, NodeId, ValueId};
use diamond_runtime::kernel::{
    Contraction, ContractionOp, Declared, Inst, Instr, LoweredModel, Output, Program, Step, Unfused, View, ViewDim,
};
use group::{extent, Group};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};

/// Lowers `model`'s main graph; `None` without a main graph.
pub fn lower(model: &Model) -> Option<LoweredModel> {
    let a = Analysis::new(model)?;
    Some(lower_with(model, &a))
}

/// What the groups see of the model and of the grouping so far.
pub(crate) struct Cx<'a> {
    model: &'a Model,
    a: &'a Analysis<'a>,
    graph: &'a Graph,
    kinds: &'a [Kind],
    group_of: &'a HashMap<NodeId, usize>,
    deps: &'a [BTreeSet<usize>],
    producer: &'a rustc_hash::FxHashMap<ValueId, NodeId>,
}

/// A group of the lowering.
#[derive(Clone, Debug)]
enum Kind {
    /// A node the reference kernels run.
    Plain(NodeId),
    /// A contraction node, and the group that became its epilogue.
    Contraction(NodeId, ContractionOp),
    /// A fused group, with the contraction whose epilogue it is.
    Fused(Box<Group>, Option<(NodeId, ContractionOp)>),
    /// Merged into another group.
    Gone,
}

const MOVEMENT: &[&str] = &["Transpose", "Slice", "Reshape", "Flatten", "Squeeze", "Unsqueeze"];

impl Cx<'_> {
    /// Whether group `from` depends, through any chain, on group `to`.
    fn reaches(&self, from: usize, to: usize) -> bool {
        let mut seen = HashSet::new();
        let mut stack = vec![from];
        while let Some(g) = stack.pop() {
            if g == to {
                return true;
            }
            if seen.insert(g) {
                stack.extend(self.deps[g].iter().copied());
            }
        }
        false
    }

    /// The group producing `v`, if a node does.
    fn group_of_value(&self, v: ValueId) -> Option<usize> {
        self.producer.get(&v).and_then(|n| self.group_of.get(n)).copied()
    }

    /// When `v` is the result of a movement node that runs alone and that
    /// only `reader` reads, and folding it into group `me` forms no cycle:
    /// the node and its input.
    fn absorbable(&self, v: ValueId, reader: NodeId, me: Option<usize>, taken: &[NodeId]) -> Option<(NodeId, ValueId)> {
        let m = *self.producer.get(&v)?;
        if taken.contains(&m) {
            return None;
        }
        let node = &self.graph.nodes[m];
        if !MOVEMENT.contains(&node.op_type()) || !node.domain().is_empty() {
            return None;
        }
        let g = *self.group_of.get(&m)?;
        if !matches!(self.kinds[g], Kind::Plain(_)) {
            return None;
        }
        if !self.a.is_internal(self.model, v) || self.a.consumers.get(&v)?.iter().any(|&c| c != reader) {
            return None;
        }
        let input = *node.inputs.first()?;
        self.a.shape(self.model, input)?;
        if self.a.dtype(self.model, input)? != self.a.dtype(self.model, v)? {
            return None;
        }
        if let (Some(me), Some(h)) = (me, self.group_of_value(input)) {
            if self.reaches(h, me) {
                return None;
            }
        }
        Some((m, input))
    }
}

/// Lowers with an analysis already made.
pub fn lower_with(model: &Model, a: &Analysis) -> LoweredModel {
    let graph = a.graph(model);
    let ids: Vec<NodeId> = graph.nodes.iter().map(|(id, _)| id).collect();
    let outputs: Vec<ValueId> = graph.outputs.iter().filter_map(|o| o.value).collect();
    let Ok(schedule) = diamond_runtime::schedule::Schedule::new(model, graph, &outputs) else {
        return LoweredModel { steps: ids.iter().map(|&n| Step::Node(n)).collect(), unfused: Vec::new() };
    };
    let order: Vec<NodeId> = schedule.order.iter().map(|&i| ids[i]).collect();
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(p, &n)| (n, p)).collect();
    let producer = &a.producer;
    let mut kinds: Vec<Kind> = Vec::new();
    let mut deps: Vec<BTreeSet<usize>> = Vec::new();
    let mut group_of: HashMap<NodeId, usize> = HashMap::new();
    for &n in &order {
        let node = &graph.nodes[n];
        let reads = diamond_runtime::schedule::reads(model, graph, node);
        let placed = {
            let cx = Cx { model, a, graph, kinds: &kinds, group_of: &group_of, deps: &deps, producer };
            place(&cx, n, &reads)
        };
        let (g, group) = match placed {
            Placed::Join(g, group) => (g, Some(group)),
            Placed::New(group) => {
                kinds.push(Kind::Plain(n));
                deps.push(BTreeSet::new());
                (kinds.len() - 1, Some(group))
            }
            Placed::Alone(kind) => {
                kinds.push(kind);
                deps.push(BTreeSet::new());
                (kinds.len() - 1, None)
            }
        };
        group_of.insert(n, g);
        if let Some(group) = group {
            for &m in &group.absorbed {
                if let Some(&h) = group_of.get(&m) {
                    if h != g {
                        let moved = std::mem::take(&mut deps[h]);
                        deps[g].extend(moved);
                        kinds[h] = Kind::Gone;
                        group_of.insert(m, g);
                    }
                }
            }
            kinds[g] = Kind::Fused(Box::new(group), None);
        }
        for v in reads {
            if let Some(&h) = producer.get(&v).and_then(|p| group_of.get(p)) {
                if h != g {
                    deps[g].insert(h);
                }
            }
        }
        deps[g].remove(&g);
    }
    attach_epilogues(model, a, graph, &mut kinds, &mut deps, &mut group_of);
    assemble(model, a, graph, &kinds, &deps, &group_of, &position)
}

enum Placed {
    Join(usize, Group),
    New(Group),
    Alone(Kind),
}

fn place(cx: &Cx<'_>, n: NodeId, reads: &[ValueId]) -> Placed {
    let node = &cx.graph.nodes[n];
    if let Some((r, data)) = recipe::recipe(cx.model, cx.a, node) {
        let mut candidates: Vec<usize> = Vec::new();
        let tried: Vec<usize> = if r.axes().is_some() { vec![data[0]] } else { data.clone() };
        for &i in &tried {
            let v = node.inputs[i];
            if let Some(g) = cx.group_of_value(v) {
                if let Kind::Fused(group, _) = &cx.kinds[g] {
                    if group.values.contains_key(&v) && !candidates.contains(&g) {
                        candidates.push(g);
                    }
                }
            }
        }
        for g in candidates {
            let cyclic = reads.iter().filter_map(|&v| cx.group_of_value(v)).any(|h| h != g && cx.reaches(h, g));
            if cyclic {
                continue;
            }
            let Kind::Fused(group, _) = &cx.kinds[g] else { continue };
            let mut trial = (**group).clone();
            if trial.add(cx, Some(g), n, &r, &data).is_some() {
                return Placed::Join(g, trial);
            }
        }
        let mut fresh = Group::default();
        if fresh.add(cx, None, n, &r, &data).is_some() {
            return Placed::New(fresh);
        }
    }
    let contraction = match node.op_type() {
        "MatMul" => Some(ContractionOp::MatMul),
        "Gemm" => Some(ContractionOp::Gemm),
        "Conv" => Some(ContractionOp::Conv),
        _ => None,
    };
    match contraction {
        Some(op) if node.domain().is_empty() => Placed::Alone(Kind::Contraction(n, op)),
        _ => Placed::Alone(Kind::Plain(n)),
    }
}

/// Makes an elementwise group the epilogue of the contraction whose result
/// only the group's nodes read, its first node among them.
fn attach_epilogues(
    model: &Model,
    a: &Analysis,
    graph: &Graph,
    kinds: &mut [Kind],
    deps: &mut [BTreeSet<usize>],
    group_of: &mut HashMap<NodeId, usize>,
) {
    for c in 0..kinds.len() {
        let Kind::Contraction(cn, op) = kinds[c] else { continue };
        let Some(&v) = graph.nodes[cn].outputs.first() else { continue };
        if !a.is_internal(model, v) {
            continue;
        }
        let Some(readers) = a.consumers.get(&v) else { continue };
        let Some(&first) = readers.first() else { continue };
        let Some(&g) = group_of.get(&first) else { continue };
        // every reader in the one group (SiLU's Sigmoid and Mul both read it)
        if readers.iter().any(|r| group_of.get(r) != Some(&g)) {
            continue;
        }
        let Kind::Fused(group, None) = &kinds[g] else { continue };
        if !group.reduce.is_empty() || group.nodes.first() != Some(&first) {
            continue;
        }
        let cyclic = {
            let cx_deps: &[BTreeSet<usize>] = deps;
            let reaches = |from: usize| {
                let mut seen = HashSet::new();
                let mut stack = vec![from];
                while let Some(h) = stack.pop() {
                    if h == g {
                        return true;
                    }
                    if seen.insert(h) {
                        stack.extend(cx_deps[h].iter().copied());
                    }
                }
                false
            };
            deps[c].iter().any(|&h| reaches(h))
        };
        if cyclic {
            continue;
        }
        let Kind::Fused(group, _) = std::mem::replace(&mut kinds[g], Kind::Gone) else { continue };
        kinds[g] = Kind::Fused(group, Some((cn, op)));
        kinds[c] = Kind::Gone;
        let moved = std::mem::take(&mut deps[c]);
        deps[g].extend(moved);
        deps[g].remove(&c);
        deps[g].remove(&g);
        group_of.insert(cn, g);
    }
}

/// Orders the groups and turns each into a step.
fn assemble(
    model: &Model,
    a: &Analysis,
    graph: &Graph,
    kinds: &[Kind],
    deps: &[BTreeSet<usize>],
    group_of: &HashMap<NodeId, usize>,
    position: &HashMap<NodeId, usize>,
) -> LoweredModel {
    let alive: Vec<usize> = (0..kinds.len()).filter(|&g| !matches!(kinds[g], Kind::Gone)).collect();
    let first_pos = |g: usize| -> usize {
        match &kinds[g] {
            Kind::Plain(n) | Kind::Contraction(n, _) => position[n],
            Kind::Fused(group, c) => group
                .nodes
                .iter()
                .chain(&group.absorbed)
                .chain(c.iter().map(|(n, _)| n))
                .map(|n| position[n])
                .min()
                .unwrap_or(0),
            Kind::Gone => 0,
        }
    };
    // Kahn's algorithm, earliest first node first.
    let mut waiting: HashMap<usize, usize> = HashMap::new();
    let mut users: HashMap<usize, Vec<usize>> = HashMap::new();
    for &g in &alive {
        let d: Vec<usize> = deps[g].iter().copied().filter(|&h| h != g && !matches!(kinds[h], Kind::Gone)).collect();
        waiting.insert(g, d.len());
        for h in d {
            users.entry(h).or_default().push(g);
        }
    }
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> =
        alive.iter().filter(|g| waiting[g] == 0).map(|&g| Reverse((first_pos(g), g))).collect();
    let mut steps = Vec::new();
    let mut count = 0;
    while let Some(Reverse((_, g))) = ready.pop() {
        count += 1;
        steps.extend(step(model, a, graph, &kinds[g], g, group_of, position));
        for &u in users.get(&g).map(Vec::as_slice).unwrap_or(&[]) {
            let w = waiting.get_mut(&u).expect("every user is alive");
            *w -= 1;
            if *w == 0 {
                ready.push(Reverse((first_pos(u), u)));
            }
        }
    }
    if count != alive.len() {
        // A cycle slipped through: fall back to the plain node order.
        let mut nodes: Vec<(usize, NodeId)> = position.iter().map(|(&n, &p)| (p, n)).collect();
        nodes.sort_unstable();
        return LoweredModel {
            steps: nodes.into_iter().map(|(_, n)| Step::Node(n)).collect(),
            unfused: unfused(model, a, graph, kinds),
        };
    }
    let mut k = 0;
    for s in &mut steps {
        let p = match s {
            Step::Program(p) => Some(p),
            Step::Contraction(c) => c.epilogue.as_mut(),
            Step::Node(_) => None,
        };
        if let Some(p) = p {
            p.name = format!("k{k}");
            k += 1;
        }
    }
    LoweredModel { steps, unfused: unfused(model, a, graph, kinds) }
}

/// The plain nodes of an operator fused groups compute, and why each was left out.
fn unfused(model: &Model, a: &Analysis, graph: &Graph, kinds: &[Kind]) -> Vec<Unfused> {
    kinds
        .iter()
        .filter_map(|k| match k {
            Kind::Plain(n) => {
                recipe::refusal(model, a, &graph.nodes[*n]).map(|(refusal, float)| Unfused { node: *n, refusal, float })
            }
            _ => None,
        })
        .collect()
}

fn step(
    model: &Model,
    a: &Analysis,
    graph: &Graph,
    kind: &Kind,
    g: usize,
    group_of: &HashMap<NodeId, usize>,
    position: &HashMap<NodeId, usize>,
) -> Vec<Step> {
    match kind {
        Kind::Plain(n) => vec![Step::Node(*n)],
        Kind::Contraction(n, op) => vec![Step::Contraction(contraction_step(model, a, graph, *n, *op, None))],
        Kind::Fused(group, contraction) => {
            let program = program(model, a, graph, group, g, group_of, position);
            match (contraction, program) {
                (Some((n, op)), p) => vec![Step::Contraction(contraction_step(model, a, graph, *n, *op, p))],
                (None, Some(p)) => vec![Step::Program(p)],
                (None, None) => Vec::new(),
            }
        }
        Kind::Gone => Vec::new(),
    }
}

/// The step of contraction node `n` with its epilogue, and the types and
/// shapes of what the node reads and writes.
fn contraction_step(
    model: &Model,
    a: &Analysis,
    graph: &Graph,
    n: NodeId,
    op: ContractionOp,
    epilogue: Option<Program>,
) -> Contraction {
    let declared = |v: ValueId| -> Option<Declared> {
        let dims = a.shape(model, v)?.iter().map(extent).collect();
        Some(Declared { value: graph.value_name(v).to_string(), elem: a.dtype(model, v)?, dims })
    };
    let node = &graph.nodes[n];
    let inputs: Option<Vec<Option<Declared>>> = node
        .inputs
        .iter()
        .map(|&v| if graph.value_name(v).is_empty() { Some(None) } else { declared(v).map(Some) })
        .collect();
    Contraction {
        op,
        node: n,
        epilogue,
        inputs: inputs.unwrap_or_default(),
        output: node.outputs.first().and_then(|&v| declared(v)),
    }
}

/// The program of a fused group: the values others read written out, the
/// instructions they need, the operands those load.
fn program(
    model: &Model,
    a: &Analysis,
    graph: &Graph,
    group: &Group,
    g: usize,
    group_of: &HashMap<NodeId, usize>,
    position: &HashMap<NodeId, usize>,
) -> Option<Program> {
    let mut outputs = Vec::new();
    for &v in &group.order {
        let val = &group.values[&v];
        let name = graph.value_name(v);
        let read_outside = a.consumers.get(&v).is_some_and(|cs| cs.iter().any(|c| group_of.get(c) != Some(&g)));
        if !(a.outputs.contains(&v) || a.outer_refs.contains(name) || read_outside) {
            continue;
        }
        let shape = a.shape(model, v)?;
        outputs.push(Output {
            view: View {
                value: name.to_string(),
                elem: a.dtype(model, v)?,
                dims: shape.iter().map(extent).collect(),
                view: val.frame.iter().map(|f| f.map_or_else(ViewDim::fixed, ViewDim::follow)).collect(),
            },
            source: val.inst,
        });
    }
    if outputs.is_empty() {
        return None;
    }
    // Keep the instructions the outputs need, and the operands they load.
    let mut need = vec![false; group.body.len()];
    let mut stack: Vec<usize> = outputs.iter().map(|o| o.source).collect();
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut need[i], true) {
            stack.extend(group.body[i].inst.args());
        }
    }
    let mut new_index = vec![usize::MAX; group.body.len()];
    let mut operand_index: HashMap<usize, usize> = HashMap::new();
    let mut operands = Vec::new();
    let mut body = Vec::new();
    for (i, ins) in group.body.iter().enumerate() {
        if !need[i] {
            continue;
        }
        let m = |x: usize| new_index[x];
        let inst = match ins.inst {
            Inst::Load(k) => {
                let next = operands.len();
                let j = *operand_index.entry(k).or_insert(next);
                if j == next {
                    operands.push(group.operands[k].clone());
                }
                Inst::Load(j)
            }
            Inst::Const(c) => Inst::Const(c),
            Inst::Unary(op, x) => Inst::Unary(op, m(x)),
            Inst::Binary(op, x, y) => Inst::Binary(op, m(x), m(y)),
            Inst::Select(c, x, y) => Inst::Select(m(c), m(x), m(y)),
            Inst::Cast(x) => Inst::Cast(m(x)),
            Inst::Reduce(c, x) => Inst::Reduce(c, m(x)),
        };
        new_index[i] = body.len();
        body.push(Instr { inst, ty: ins.ty });
    }
    for o in &mut outputs {
        o.source = new_index[o.source];
    }
    let reduce =
        if body.iter().any(|i| matches!(i.inst, Inst::Reduce(..))) { group.reduce.clone() } else { Vec::new() };
    let mut nodes: Vec<NodeId> = group.nodes.iter().chain(&group.absorbed).copied().collect();
    nodes.sort_by_key(|n| position[n]);
    Some(Program {
        name: String::new(),
        axes: group.space.iter().map(extent).collect(),
        reduce,
        operands,
        body,
        outputs,
        nodes,
    })
}
