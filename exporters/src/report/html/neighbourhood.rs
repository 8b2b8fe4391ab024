//! Picking the part of a graph to draw for a diagnostic: the node it names, found by its graph prefix and index, and
//! the nodes up to [`HOPS`] producer/consumer steps away (at most [`MAX_NODES`], nearest first), with the values
//! between them. The result is a [`Scene`] of plain strings — operator boxes and value labels joined by edges — so
//! drawing needs neither the IR nor the report. Only the neighbourhood is visited, through per-graph producer and
//! consumer indexes built once, so a model of any size costs the same per diagnostic.

use diamond_infer::{CheckReport, Diagnostic};
use diamond_ir::entity::EntityId;
use diamond_ir::{Graph, GraphId, Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet, VecDeque};

/// How many producer/consumer steps from the diagnostic's node are drawn.
pub const HOPS: usize = 2;
/// At most this many operator nodes are drawn.
pub const MAX_NODES: usize = 25;
/// At most this many values entering or leaving the picture are drawn besides the diagnostic node's own operands.
const MAX_BOUNDARY: usize = 12;

/// What a drawn value is, for its style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Produced and consumed inside the picture.
    Inner,
    /// A graph input.
    Input,
    /// A stored weight or constant.
    Initializer,
    /// Produced by a node outside the picture (or an enclosing graph).
    Outside,
    /// A graph output.
    Output,
}

/// One thing to draw.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An operator node.
    Op {
        /// The operator type.
        op: String,
        /// The node's name, or `#index` when it has none.
        name: String,
        /// Whether this is the diagnostic's node.
        focus: bool,
    },
    /// A value, drawn as a label on the edges through it.
    Value {
        /// The value's name in its graph.
        name: String,
        /// The inferred element type, `?` when unknown.
        dtype: String,
        /// The inferred dims, `None` when even the rank is unknown.
        dims: Option<Vec<String>>,
        /// How it relates to the picture.
        role: Role,
        /// Whether it is the diagnostic's operand.
        operand: bool,
        /// The diagnostic's axis, when this is its operand.
        axis: Option<usize>,
    },
}

/// A picture's content: items, and edges between them (indices into `items`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scene {
    /// Operator nodes and values.
    pub items: Vec<Item>,
    /// Producer to value, value to consumer.
    pub edges: Vec<(usize, usize)>,
    /// The edges joining the diagnostic's operand and its node.
    pub highlighted: Vec<usize>,
    /// Operator nodes within reach that the cap left out.
    pub omitted: usize,
}

/// Who produces and who consumes each value of one graph.
struct GraphIndex {
    producer: HashMap<ValueId, NodeId>,
    consumers: HashMap<ValueId, Vec<NodeId>>,
    inputs: HashSet<ValueId>,
    outputs: HashSet<ValueId>,
    initializers: HashSet<ValueId>,
}

impl GraphIndex {
    fn new(graph: &Graph) -> GraphIndex {
        let mut producer = HashMap::new();
        let mut consumers: HashMap<ValueId, Vec<NodeId>> = HashMap::new();
        for (nid, node) in graph.nodes.iter() {
            for &v in &node.outputs {
                producer.entry(v).or_insert(nid);
            }
            for &v in &node.inputs {
                let list = consumers.entry(v).or_default();
                if list.last() != Some(&nid) {
                    list.push(nid);
                }
            }
        }
        let initializers: HashSet<ValueId> =
            graph.initializers.iter().filter_map(|t| t.name.as_deref()).filter_map(|n| graph.value_named(n)).collect();
        let inputs = graph.inputs.iter().filter_map(|vi| vi.value).filter(|v| !initializers.contains(v)).collect();
        let outputs = graph.outputs.iter().filter_map(|vi| vi.value).collect();
        GraphIndex { producer, consumers, inputs, outputs, initializers }
    }
}

/// Finds diagnostics' nodes and builds their scenes; indexes are built once per graph.
pub struct Picker<'a> {
    model: &'a Model,
    values: HashMap<&'a str, &'a diamond_infer::graph::ValueReport>,
    prefixes: HashMap<String, GraphId>,
    indexes: HashMap<GraphId, GraphIndex>,
}

impl<'a> Picker<'a> {
    /// A picker for the model and its report.
    pub fn new(model: &'a Model, report: &'a CheckReport) -> Picker<'a> {
        let values = report.values.iter().map(|v| (v.name.as_str(), v)).collect();
        let mut prefixes = HashMap::new();
        if let Some(main) = model.graph {
            collect_prefixes(model, main, String::new(), &mut prefixes, 0);
        }
        Picker { model, values, prefixes, indexes: HashMap::new() }
    }

    /// The graph and node a diagnostic names, when it names one that exists. A diagnostic inside a model-local
    /// function's body has no prefix; its node is looked up in the function bodies when the main graph's node at
    /// that index is not the one named.
    pub fn locate(&self, d: &Diagnostic) -> Option<(GraphId, NodeId)> {
        let index = d.node_index? as usize;
        let matches = |g: GraphId| {
            let graph = &self.model.graphs[g];
            let nid = NodeId::new(index);
            let node = graph.nodes.get(nid)?;
            let op_ok = d.op.as_deref().is_none_or(|op| op == node.op_type());
            let name_ok = node.name().is_empty() || d.node.as_deref().is_none_or(|n| n == node.name());
            (op_ok && name_ok).then_some((g, nid))
        };
        let prefix = d.graph.as_deref().unwrap_or("");
        if let Some(found) = self.prefixes.get(prefix).and_then(|&g| matches(g)) {
            return Some(found);
        }
        if prefix.is_empty() {
            return self.model.functions.iter().find_map(|f| matches(f.body));
        }
        None
    }

    /// The scene around node `focus` of graph `g` for diagnostic `d`.
    pub fn scene(&mut self, g: GraphId, focus: NodeId, d: &Diagnostic) -> Scene {
        let graph = &self.model.graphs[g];
        let index = self.indexes.entry(g).or_insert_with(|| GraphIndex::new(graph));
        let (nodes, omitted) = reach(graph, index, focus);
        let prefix = d.graph.as_deref().unwrap_or("");
        let operand = operand_value(graph, focus, d.operand.as_deref());
        let rank = |v: ValueId| {
            let name = graph.value_name(v);
            let report = self.values.get(format!("{prefix}{name}").as_str()).or_else(|| self.values.get(name));
            report.and_then(|r| r.shape.as_ref()).map(Vec::len)
        };
        let axes = highlighted_axes(graph, focus, d, operand, rank);
        let mut builder = Builder {
            graph,
            index,
            values: &self.values,
            prefix,
            members: nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect(),
            scene: Scene { omitted, ..Scene::default() },
            value_items: HashMap::new(),
            boundary: 0,
            edges: HashSet::new(),
            focus,
            operand,
            axes,
        };
        for &nid in &nodes {
            let node = &graph.nodes[nid];
            let name = if node.name().is_empty() { format!("#{}", nid.index()) } else { node.name().to_string() };
            builder.scene.items.push(Item::Op { op: node.op_type().to_string(), name, focus: nid == focus });
        }
        for &nid in &nodes {
            builder.wire(nid);
        }
        builder.scene
    }
}

/// Records the report-name prefix of every subgraph under graph `g` (`If_0/then_branch/`), as the checker names them.
fn collect_prefixes(model: &Model, g: GraphId, prefix: String, out: &mut HashMap<String, GraphId>, depth: usize) {
    if depth > 64 || out.contains_key(&prefix) {
        return;
    }
    out.insert(prefix.clone(), g);
    for (nid, node) in model.graphs[g].nodes.iter() {
        let label = if node.name().is_empty() {
            format!("{}_{}", node.op_type(), nid.index())
        } else {
            node.name().to_string()
        };
        for attribute in &node.attributes {
            for sub in attribute.subgraphs() {
                let inner = format!("{prefix}{label}/{}/", attribute.name());
                collect_prefixes(model, sub, inner, out, depth + 1);
            }
        }
    }
}

/// The nodes within [`HOPS`] steps of `focus`, nearest first (focus first), capped at [`MAX_NODES`]; and how many
/// more were within reach.
fn reach(graph: &Graph, index: &GraphIndex, focus: NodeId) -> (Vec<NodeId>, usize) {
    let mut distance: HashMap<NodeId, usize> = HashMap::from([(focus, 0)]);
    let mut order = vec![focus];
    let mut omitted: HashSet<NodeId> = HashSet::new();
    let mut queue = VecDeque::from([focus]);
    while let Some(v) = queue.pop_front() {
        let d = distance[&v];
        if d == HOPS {
            continue;
        }
        let node = &graph.nodes[v];
        let producers = node.inputs.iter().filter_map(|x| index.producer.get(x).copied());
        let consumers = node.outputs.iter().flat_map(|x| index.consumers.get(x).into_iter().flatten().copied());
        for w in producers.chain(consumers) {
            if distance.contains_key(&w) {
                continue;
            }
            if order.len() >= MAX_NODES {
                omitted.insert(w);
                continue;
            }
            distance.insert(w, d + 1);
            order.push(w);
            queue.push_back(w);
        }
    }
    (order, omitted.len())
}

/// The value a diagnostic's operand (`input 1`, `output 0`, `input 1 (scale)`) names at node `focus`.
fn operand_value(graph: &Graph, focus: NodeId, operand: Option<&str>) -> Option<ValueId> {
    let (side, k) = operand?.split_once(' ')?;
    let k: usize = k.split(' ').next()?.parse().ok()?;
    let node = &graph.nodes[focus];
    let v = *match side {
        "input" => node.inputs.get(k),
        "output" => node.outputs.get(k),
        _ => None,
    }?;
    (!graph.value_name(v).is_empty()).then_some(v)
}

/// The dim to mark in each value's label: the operand's own axis, and for an operand that broadcasts to the
/// output (or to input 0), the target's axis it meets, aligned from the right (shifted by the difference in rank).
fn highlighted_axes(
    graph: &Graph,
    focus: NodeId,
    d: &Diagnostic,
    operand: Option<ValueId>,
    rank: impl Fn(ValueId) -> Option<usize>,
) -> HashMap<ValueId, usize> {
    let mut axes = HashMap::new();
    let (Some(v), Some(axis)) = (operand, d.axis) else { return axes };
    let node = &graph.nodes[focus];
    let target = d.operand.as_deref().and_then(|o| o.strip_prefix("input ")).and_then(|k| {
        let broadcasts = format!("input {k}: broadcasts to ");
        let note = d.notes.iter().find_map(|n| n.split_once(broadcasts.as_str()).map(|(_, rest)| rest))?;
        let side = if note.starts_with("the output") { node.outputs.first() } else { node.inputs.first() };
        side.copied().filter(|&t| t != v)
    });
    axes.insert(v, axis);
    if let Some((t, target_rank, own_rank)) = target.and_then(|t| Some((t, rank(t)?, rank(v)?))) {
        if target_rank >= own_rank {
            axes.insert(t, axis + (target_rank - own_rank));
        }
    }
    axes
}

/// Builds a scene's values and edges for the chosen nodes.
struct Builder<'s, 'a> {
    graph: &'s Graph,
    index: &'s GraphIndex,
    values: &'s HashMap<&'a str, &'a diamond_infer::graph::ValueReport>,
    prefix: &'s str,
    /// Chosen nodes and their item index.
    members: HashMap<NodeId, usize>,
    scene: Scene,
    value_items: HashMap<ValueId, usize>,
    boundary: usize,
    edges: HashSet<(usize, usize)>,
    focus: NodeId,
    operand: Option<ValueId>,
    axes: HashMap<ValueId, usize>,
}

impl Builder<'_, '_> {
    /// Adds the edges of node `nid`: from the values it reads, to the values it writes.
    fn wire(&mut self, nid: NodeId) {
        let node = &self.graph.nodes[nid];
        let item = self.members[&nid];
        let focus = nid == self.focus;
        for &v in &node.inputs {
            if self.graph.value_name(v).is_empty() {
                continue;
            }
            let inside = self.index.producer.get(&v).is_some_and(|p| self.members.contains_key(p));
            let wanted = inside || focus || self.index.inputs.contains(&v);
            if let Some(value) = wanted.then(|| self.value_item(v, focus)).flatten() {
                self.edge(value, item, focus && Some(v) == self.operand);
            }
        }
        for &v in &node.outputs {
            if self.graph.value_name(v).is_empty() {
                continue;
            }
            let read_inside =
                self.index.consumers.get(&v).is_some_and(|c| c.iter().any(|n| self.members.contains_key(n)));
            if read_inside || focus || self.index.outputs.contains(&v) {
                self.value_item(v, focus);
            }
        }
    }

    /// The item of value `v`, created (with the edge from its producer) on first use; `None` when the picture already
    /// has enough boundary values and `v` is not the diagnostic node's own operand.
    fn value_item(&mut self, v: ValueId, own: bool) -> Option<usize> {
        if let Some(&i) = self.value_items.get(&v) {
            return Some(i);
        }
        let producer = self.index.producer.get(&v).and_then(|p| self.members.get(p).map(|&i| (*p, i)));
        let role = if self.index.initializers.contains(&v) {
            Role::Initializer
        } else if self.index.inputs.contains(&v) {
            Role::Input
        } else if self.index.outputs.contains(&v) {
            Role::Output
        } else if producer.is_none() {
            Role::Outside
        } else {
            Role::Inner
        };
        if role != Role::Inner && !own {
            if self.boundary >= MAX_BOUNDARY {
                return None;
            }
            self.boundary += 1;
        }
        let name = self.graph.value_name(v);
        let report = self.values.get(format!("{}{name}", self.prefix).as_str()).or_else(|| self.values.get(name));
        let operand = Some(v) == self.operand;
        let item = self.scene.items.len();
        self.scene.items.push(Item::Value {
            name: name.to_string(),
            dtype: report.and_then(|r| r.dtype).map_or("?".into(), |t| t.to_string()),
            dims: report.and_then(|r| r.shape.as_ref()).map(|s| s.iter().map(|d| d.to_string()).collect()),
            role,
            operand,
            axis: self.axes.get(&v).copied(),
        });
        self.value_items.insert(v, item);
        if let Some((p, producer_item)) = producer {
            self.edge(producer_item, item, p == self.focus && operand);
        }
        Some(item)
    }

    fn edge(&mut self, from: usize, to: usize, highlighted: bool) {
        if self.edges.insert((from, to)) {
            if highlighted {
                self.scene.highlighted.push(self.scene.edges.len());
            }
            self.scene.edges.push((from, to));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diamond_ir::graph::{GraphOwner, Node, ValueInfo};

    /// A chain `x -> Relu r0 -> Relu r1 -> ... -> y` of `n` nodes with an extra weight `w` into node `at`.
    fn chain(n: usize) -> Model {
        let mut g = Graph::new(GraphOwner::Main);
        let x = g.intern("x");
        g.inputs.push(ValueInfo { value: Some(x), ..ValueInfo::default() });
        let mut prev = x;
        for i in 0..n {
            let out = g.intern(&format!("t{i}"));
            g.nodes.push(Node {
                name: Some(format!("r{i}")),
                op_type: Some("Relu".into()),
                inputs: vec![prev],
                outputs: vec![out],
                ..Node::default()
            });
            prev = out;
        }
        g.outputs.push(ValueInfo { value: Some(prev), ..ValueInfo::default() });
        let mut model = Model::default();
        model.graph = Some(model.graphs.push(g));
        model
    }

    fn diagnostic(index: u32, operand: &str) -> Diagnostic {
        Diagnostic {
            severity: diamond_infer::Severity::Error,
            code: diamond_infer::Code::BroadcastConflict,
            message: String::new(),
            line: None,
            node: Some(format!("r{index}")),
            op: Some("Relu".into()),
            node_index: Some(index),
            graph: None,
            operand: Some(operand.into()),
            axis: Some(0),
            help: None,
            notes: Vec::new(),
            clash: None,
            assumes: Vec::new(),
        }
    }

    fn empty_report() -> CheckReport {
        CheckReport::default()
    }

    fn ops(scene: &Scene) -> Vec<&str> {
        scene
            .items
            .iter()
            .filter_map(|i| if let Item::Op { name, .. } = i { Some(name.as_str()) } else { None })
            .collect()
    }

    #[test]
    fn two_hops_either_way_from_the_node() {
        let model = chain(10);
        let report = empty_report();
        let mut picker = Picker::new(&model, &report);
        let d = diagnostic(5, "input 0");
        let (g, n) = picker.locate(&d).unwrap();
        let scene = picker.scene(g, n, &d);
        assert_eq!(ops(&scene), vec!["r5", "r4", "r6", "r3", "r7"]);
        // The operand t4 (r4 -> r5) is highlighted, on the edge into r5.
        let (_, into_focus) = scene.edges[scene.highlighted[0]];
        assert_eq!(into_focus, 0);
        assert!(scene
            .items
            .iter()
            .any(|i| matches!(i, Item::Value { name, operand: true, axis: Some(0), .. } if name == "t4")));
    }

    #[test]
    fn the_graph_input_enters_as_a_boundary_value() {
        let model = chain(3);
        let report = empty_report();
        let mut picker = Picker::new(&model, &report);
        let d = diagnostic(0, "output 0");
        let (g, n) = picker.locate(&d).unwrap();
        let scene = picker.scene(g, n, &d);
        assert!(scene.items.iter().any(|i| matches!(i, Item::Value { name, role: Role::Input, .. } if name == "x")));
        assert!(scene.items.iter().any(|i| matches!(i, Item::Value { name, role: Role::Inner, .. } if name == "t0")));
    }

    #[test]
    fn a_wide_fan_out_is_capped() {
        let mut model = chain(1);
        let g = model.graph.unwrap();
        let t0 = model.graphs[g].value_named("t0").unwrap();
        for i in 0..100 {
            let out = model.graphs[g].intern(&format!("u{i}"));
            model.graphs[g].nodes.push(Node {
                op_type: Some("Neg".into()),
                inputs: vec![t0],
                outputs: vec![out],
                ..Node::default()
            });
        }
        let report = empty_report();
        let mut picker = Picker::new(&model, &report);
        let d = diagnostic(0, "input 0");
        let (g, n) = picker.locate(&d).unwrap();
        let scene = picker.scene(g, n, &d);
        assert_eq!(ops(&scene).len(), MAX_NODES);
        assert_eq!(scene.omitted, 100 - (MAX_NODES - 1));
    }

    #[test]
    fn a_node_that_does_not_match_is_not_located() {
        let model = chain(2);
        let report = empty_report();
        let picker = Picker::new(&model, &report);
        let mut d = diagnostic(1, "input 0");
        d.op = Some("Add".into());
        assert_eq!(picker.locate(&d), None);
        d.node_index = Some(7);
        assert_eq!(picker.locate(&d), None);
    }
}
