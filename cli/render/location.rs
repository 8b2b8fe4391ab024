//! Where a diagnostic points: the node (with its graph for subgraph nodes),
//! its operator, operand and axis, as one line of text and as the qualified
//! name SARIF's logical locations use.

use diamond::check::Diagnostic;

/// The node's own name, or `None` when the node is unnamed (the solver then
/// stores its label, `Add (node 3)`, which the location line says anyway).
pub fn node_name(d: &Diagnostic) -> Option<&str> {
    let node = d.node.as_deref()?;
    let label = match (&d.op, d.node_index) {
        (Some(op), Some(i)) => format!("{op} (node {i})"),
        _ => String::new(),
    };
    (node != label).then_some(node)
}

/// The subgraph holding the node without its trailing `/` (`If_0/then_branch`), or `None` for the main graph.
pub fn graph(d: &Diagnostic) -> Option<&str> {
    d.graph.as_deref().map(|g| g.trim_end_matches('/')).filter(|g| !g.is_empty())
}

/// The location line's text: `node 0 \`add1\` (Add), input 1, axis 1`, with
/// `If_0/then_branch: ` in front for a subgraph node; `line 4` for a `.rows`
/// constraint; `None` when the diagnostic has no location.
pub fn describe(d: &Diagnostic) -> Option<String> {
    let mut parts = Vec::new();
    if d.node.is_some() || d.node_index.is_some() {
        let mut node = String::from("node");
        if let Some(i) = d.node_index {
            node += &format!(" {i}");
        }
        match node_name(d) {
            Some(name) => node += &format!(" `{name}`"),
            None if d.node_index.is_none() => node += &format!(" `{}`", d.node.as_deref().unwrap_or("")),
            None => {}
        }
        if let Some(op) = &d.op {
            node += &format!(" ({op})");
        }
        if let Some(g) = graph(d) {
            node = format!("{g}: {node}");
        }
        parts.push(node);
    } else if let Some(line) = d.line {
        parts.push(format!("line {line}"));
    }
    if parts.is_empty() {
        return None;
    }
    parts.extend(d.operand.clone());
    parts.extend(d.axis.map(|a| format!("axis {a}")));
    Some(parts.join(", "))
}

/// The node's fully qualified name: graph prefix and node name (`If_0/then_branch/add`), or its label when unnamed.
pub fn qualified_name(d: &Diagnostic) -> Option<String> {
    let node = d.node.as_deref()?;
    Some(format!("{}{node}", d.graph.as_deref().unwrap_or("")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use diamond::check::{Code, Severity};

    /// A diagnostic at node `index` named `name` (empty: unnamed) of op `op`.
    pub(crate) fn at_node(code: Code, name: &str, op: &str, index: u32) -> Diagnostic {
        Diagnostic {
            severity: code.severity(),
            code,
            message: "m".into(),
            line: None,
            node: Some(if name.is_empty() { format!("{op} (node {index})") } else { name.into() }),
            op: Some(op.into()),
            node_index: Some(index),
            graph: None,
            operand: None,
            axis: None,
            help: None,
            notes: Vec::new(),
            clash: None,
            assumes: Vec::new(),
        }
    }

    #[test]
    fn a_main_graph_node_with_operand_and_axis() {
        let mut d = at_node(Code::BroadcastConflict, "add1", "Add", 0);
        d.operand = Some("input 1".into());
        d.axis = Some(1);
        assert_eq!(describe(&d).unwrap(), "node 0 `add1` (Add), input 1, axis 1");
        assert_eq!(qualified_name(&d).unwrap(), "add1");
        assert_eq!(d.severity, Severity::Error);
    }

    #[test]
    fn a_subgraph_node_is_prefixed_with_its_graph() {
        let mut d = at_node(Code::DimMismatch, "", "MatMul", 2);
        d.graph = Some("If_0/then_branch/".into());
        assert_eq!(describe(&d).unwrap(), "If_0/then_branch: node 2 (MatMul)");
        assert_eq!(qualified_name(&d).unwrap(), "If_0/then_branch/MatMul (node 2)");
        assert_eq!(node_name(&d), None);
    }

    #[test]
    fn no_node_no_location() {
        let mut d = at_node(Code::InvalidGraph, "x", "Add", 0);
        (d.node, d.op, d.node_index) = (None, None, None);
        assert_eq!(describe(&d), None);
        d.line = Some(4);
        assert_eq!(describe(&d).unwrap(), "line 4");
    }
}
