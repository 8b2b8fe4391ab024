//! A layered (Sugiyama-style) layout of a small directed graph, drawn top to bottom.
//!
//! The steps are the classic ones: cycles are broken by reversing the back edges of a depth-first search; layers come
//! from the longest path from the sources (a source is then pulled down to just above its first successor); edges
//! spanning several layers are split by dummy nodes; the order within each layer comes from alternating barycenter
//! sweeps, keeping the order with the fewest crossings; horizontal coordinates are the positions closest to the
//! barycenter of each node's neighbours that keep the order and the boxes apart (an isotonic regression per layer,
//! a few rounds down and up). The input is only sizes and edges, so the layout knows nothing about ONNX.

/// Horizontal space between two boxes of a layer.
const NODE_GAP: f64 = 24.0;
/// Vertical space between two layers (where the edges run).
const LAYER_GAP: f64 = 28.0;
/// Width reserved for a dummy node (an edge passing through a layer).
const DUMMY_WIDTH: f64 = 12.0;
/// Space around the drawing.
pub const MARGIN: f64 = 12.0;
/// Barycenter sweeps (each one down and one up).
const ORDER_SWEEPS: usize = 6;
/// Coordinate rounds (each one down and one up).
const PLACE_ROUNDS: usize = 6;

/// A box: its top-left corner and size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Rect {
    /// The horizontal center.
    pub fn cx(&self) -> f64 {
        self.x + self.w / 2.0
    }

    /// The bottom edge.
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }
}

/// Where everything went.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Each input node's box, in input order.
    pub boxes: Vec<Rect>,
    /// Each input node's layer (0 at the top); the tests check edges run downward.
    #[allow(dead_code)]
    pub layers: Vec<usize>,
    /// Each input edge's route, from its source's bottom to its target's top (through its dummy nodes); empty for a
    /// self-loop. An edge reversed to break a cycle still starts at its source.
    pub routes: Vec<Vec<(f64, f64)>>,
    /// Width of the whole drawing, margins included.
    pub width: f64,
    /// Height of the whole drawing, margins included.
    pub height: f64,
}

/// Lays out nodes of the given sizes (width, height) joined by the given edges (source, target).
pub fn layout(sizes: &[(f64, f64)], edges: &[(usize, usize)]) -> Layout {
    let n = sizes.len();
    let oriented = break_cycles(n, edges);
    let layer = assign_layers(n, &oriented);
    let mut graph = Expanded::new(sizes, &layer, &oriented);
    graph.order();
    let (xs, ys, width, height) = graph.place();
    let boxes: Vec<Rect> = (0..n)
        .map(|i| Rect { x: xs[i] - sizes[i].0 / 2.0, y: ys[i] - sizes[i].1 / 2.0, w: sizes[i].0, h: sizes[i].1 })
        .collect();
    // Routes from top to bottom; the ends are spread over the boxes' edges below.
    let mut routes: Vec<Vec<(f64, f64)>> = edges
        .iter()
        .enumerate()
        .map(|(e, &(s, t))| {
            if s == t {
                return Vec::new();
            }
            let (top, bottom) = (oriented[e].0, oriented[e].1);
            let mut points = vec![(boxes[top].cx(), boxes[top].bottom())];
            points.extend(graph.chains[e].iter().map(|&d| (xs[d], ys[d])));
            points.push((boxes[bottom].cx(), boxes[bottom].y));
            points
        })
        .collect();
    spread_ports(&boxes, &oriented, &mut routes);
    for (route, &(_, _, reversed)) in routes.iter_mut().zip(&oriented) {
        if reversed {
            route.reverse();
        }
    }
    Layout { boxes, layers: layer, routes, width, height }
}

/// Spreads the ends of the edges meeting a box's top (or bottom) edge across it, in the order of where they come
/// from, so that arrows into one box do not all meet at one point.
fn spread_ports(boxes: &[Rect], oriented: &[(usize, usize, bool)], routes: &mut [Vec<(f64, f64)>]) {
    // For each box and side (false: top, true: bottom), the (route, x of the neighbouring point).
    let mut ports: Vec<[Vec<(usize, f64)>; 2]> = vec![[Vec::new(), Vec::new()]; boxes.len()];
    for (e, route) in routes.iter().enumerate() {
        if route.len() < 2 {
            continue;
        }
        let (top, bottom, _) = oriented[e];
        ports[top][1].push((e, route[1].0));
        ports[bottom][0].push((e, route[route.len() - 2].0));
    }
    for (v, sides) in ports.iter_mut().enumerate() {
        for (side, list) in sides.iter_mut().enumerate() {
            if list.len() < 2 {
                continue;
            }
            list.sort_by(|a, b| a.1.total_cmp(&b.1));
            let k = list.len() as f64;
            let spread = (boxes[v].w - 16.0).max(0.0).min((k - 1.0) * 14.0);
            for (i, &(e, _)) in list.iter().enumerate() {
                let x = boxes[v].cx() - spread / 2.0 + spread * i as f64 / (k - 1.0);
                let at = if side == 1 { 0 } else { routes[e].len() - 1 };
                routes[e][at].0 = x;
            }
        }
    }
}

/// The edges oriented so the graph is acyclic: (upper, lower, reversed). Self-loops stay as they are and are ignored
/// from here on.
fn break_cycles(n: usize, edges: &[(usize, usize)]) -> Vec<(usize, usize, bool)> {
    let mut succ: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (e, &(s, t)) in edges.iter().enumerate() {
        succ[s].push((t, e));
    }
    // 0 unvisited, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let mut reversed = vec![false; edges.len()];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&(w, e)) = succ[v].get(*next) {
                *next += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 if w != v => reversed[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    edges.iter().zip(reversed).map(|(&(s, t), r)| if r { (t, s, true) } else { (s, t, false) }).collect()
}

/// Layers by longest path from the sources; a source then sits just above its highest successor.
fn assign_layers(n: usize, edges: &[(usize, usize, bool)]) -> Vec<usize> {
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for &(s, t, _) in edges.iter().filter(|(s, t, _)| s != t) {
        succ[s].push(t);
        indegree[t] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut remaining = indegree.clone();
    while let Some(v) = ready.pop() {
        for &w in &succ[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            remaining[w] -= 1;
            if remaining[w] == 0 {
                ready.push(w);
            }
        }
    }
    for v in 0..n {
        if indegree[v] == 0 {
            if let Some(lowest) = succ[v].iter().map(|&w| layer[w]).min() {
                layer[v] = lowest.saturating_sub(1).max(layer[v]);
            }
        }
    }
    layer
}

/// The graph with dummy nodes: every edge joins adjacent layers.
struct Expanded {
    /// Width and height of each node (real ones first, then dummies).
    size: Vec<(f64, f64)>,
    /// Nodes of each layer, in order.
    layers: Vec<Vec<usize>>,
    /// Neighbours in the layer above.
    up: Vec<Vec<usize>>,
    /// Neighbours in the layer below.
    down: Vec<Vec<usize>>,
    /// For each input edge, its dummy nodes from top to bottom.
    chains: Vec<Vec<usize>>,
}

impl Expanded {
    fn new(sizes: &[(f64, f64)], layer: &[usize], edges: &[(usize, usize, bool)]) -> Expanded {
        let mut size = sizes.to_vec();
        let mut node_layer = layer.to_vec();
        let mut links = Vec::new();
        let mut chains = Vec::with_capacity(edges.len());
        for &(s, t, _) in edges {
            let mut chain = Vec::new();
            if s != t {
                let mut prev = s;
                for l in layer[s] + 1..layer[t] {
                    let d = size.len();
                    size.push((DUMMY_WIDTH, 0.0));
                    node_layer.push(l);
                    links.push((prev, d));
                    chain.push(d);
                    prev = d;
                }
                links.push((prev, t));
            }
            chains.push(chain);
        }
        let count = size.len();
        let mut up = vec![Vec::new(); count];
        let mut down = vec![Vec::new(); count];
        for &(a, b) in &links {
            down[a].push(b);
            up[b].push(a);
        }
        let depth = node_layer.iter().max().map_or(0, |m| m + 1);
        let mut layers = vec![Vec::new(); depth];
        // Initial order: a depth-first walk from the top, so connected nodes start near each other.
        let mut seen = vec![false; count];
        let mut roots: Vec<usize> = (0..count).collect();
        roots.sort_by_key(|&v| node_layer[v]);
        for root in roots {
            let mut stack = vec![root];
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut seen[v], true) {
                    continue;
                }
                layers[node_layer[v]].push(v);
                stack.extend(down[v].iter().rev().filter(|&&w| !seen[w]));
            }
        }
        Expanded { size, layers, up, down, chains }
    }

    /// Orders each layer by barycenter sweeps, keeping the best order found.
    fn order(&mut self) {
        let mut best = self.layers.clone();
        let mut best_crossings = self.crossings();
        for _ in 0..ORDER_SWEEPS {
            for l in 1..self.layers.len() {
                self.sort_by_barycenter(l, l - 1, true);
            }
            for l in (0..self.layers.len().saturating_sub(1)).rev() {
                self.sort_by_barycenter(l, l + 1, false);
            }
            let crossings = self.crossings();
            if crossings < best_crossings {
                best_crossings = crossings;
                best = self.layers.clone();
            }
            if best_crossings == 0 {
                break;
            }
        }
        self.layers = best;
    }

    /// Reorders layer `l` by the mean position of each node's neighbours in layer `fixed`; a node without neighbours
    /// there keeps its position.
    fn sort_by_barycenter(&mut self, l: usize, fixed: usize, from_above: bool) {
        let mut position = vec![0.0; self.size.len()];
        for (i, &v) in self.layers[fixed].iter().enumerate() {
            position[v] = i as f64;
        }
        let mut keys: Vec<(f64, usize)> = self.layers[l]
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let neighbours = if from_above { &self.up[v] } else { &self.down[v] };
                let key = if neighbours.is_empty() {
                    i as f64
                } else {
                    neighbours.iter().map(|&w| position[w]).sum::<f64>() / neighbours.len() as f64
                };
                (key, v)
            })
            .collect();
        keys.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.layers[l] = keys.into_iter().map(|(_, v)| v).collect();
    }

    /// Edge crossings between all pairs of adjacent layers.
    fn crossings(&self) -> usize {
        let mut position = vec![0usize; self.size.len()];
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                position[v] = i;
            }
        }
        let mut total = 0;
        for layer in &self.layers {
            let edges: Vec<(usize, usize)> =
                layer.iter().flat_map(|&v| self.down[v].iter().map(move |&w| (v, w))).collect();
            let edges: Vec<(usize, usize)> = edges.iter().map(|&(a, b)| (position[a], position[b])).collect();
            for (i, &(a1, b1)) in edges.iter().enumerate() {
                for &(a2, b2) in &edges[i + 1..] {
                    if (a1 < a2 && b1 > b2) || (a1 > a2 && b1 < b2) {
                        total += 1;
                    }
                }
            }
        }
        total
    }

    /// Centers of every node and the drawing's size.
    fn place(&self) -> (Vec<f64>, Vec<f64>, f64, f64) {
        let count = self.size.len();
        let mut ys = vec![0.0; count];
        let mut top = MARGIN;
        for layer in &self.layers {
            let height = layer.iter().map(|&v| self.size[v].1).fold(0.0, f64::max);
            for &v in layer {
                ys[v] = top + height / 2.0;
            }
            top += height + LAYER_GAP;
        }
        let mut xs = vec![0.0; count];
        for layer in &self.layers {
            let desired: Vec<f64> = vec![0.0; layer.len()];
            self.pack(layer, &desired, &mut xs);
        }
        for _ in 0..PLACE_ROUNDS {
            for l in 1..self.layers.len() {
                self.align(l, true, &mut xs);
            }
            for l in (0..self.layers.len().saturating_sub(1)).rev() {
                self.align(l, false, &mut xs);
            }
        }
        let left = (0..count).map(|v| xs[v] - self.size[v].0 / 2.0).fold(f64::INFINITY, f64::min);
        let right = (0..count).map(|v| xs[v] + self.size[v].0 / 2.0).fold(f64::NEG_INFINITY, f64::max);
        let shift = if left.is_finite() { MARGIN - left } else { MARGIN };
        for x in &mut xs {
            *x += shift;
        }
        let width = if right.is_finite() { right - left + 2.0 * MARGIN } else { 2.0 * MARGIN };
        let height = (top - LAYER_GAP + MARGIN).max(2.0 * MARGIN);
        (xs, ys, width, height)
    }

    /// Moves layer `l` towards the mean center of each node's neighbours above (or below).
    fn align(&self, l: usize, from_above: bool, xs: &mut [f64]) {
        let layer = &self.layers[l];
        let desired: Vec<f64> = layer
            .iter()
            .map(|&v| {
                let neighbours = if from_above { &self.up[v] } else { &self.down[v] };
                if neighbours.is_empty() {
                    xs[v]
                } else {
                    neighbours.iter().map(|&w| xs[w]).sum::<f64>() / neighbours.len() as f64
                }
            })
            .collect();
        self.pack(layer, &desired, xs);
    }

    /// Sets the centers of `layer` as close to `desired` as possible (least squares) while keeping the order and at
    /// least the gap between boxes: with offsets `o`, `x - o` must be nondecreasing, which is isotonic regression
    /// (pool adjacent violators).
    fn pack(&self, layer: &[usize], desired: &[f64], xs: &mut [f64]) {
        let mut offsets = Vec::with_capacity(layer.len());
        let mut offset = 0.0;
        for (i, &v) in layer.iter().enumerate() {
            if i > 0 {
                offset += (self.size[layer[i - 1]].0 + self.size[v].0) / 2.0 + NODE_GAP;
            }
            offsets.push(offset);
        }
        // Blocks of (mean, count).
        let mut blocks: Vec<(f64, usize)> = Vec::new();
        for (d, o) in desired.iter().zip(&offsets) {
            blocks.push((d - o, 1));
            while blocks.len() > 1 && blocks[blocks.len() - 2].0 > blocks[blocks.len() - 1].0 {
                let (m2, c2) = blocks.pop().unwrap_or((0.0, 0));
                let (m1, c1) = blocks.pop().unwrap_or((0.0, 0));
                blocks.push(((m1 * c1 as f64 + m2 * c2 as f64) / (c1 + c2) as f64, c1 + c2));
            }
        }
        let mut i = 0;
        for (mean, count) in blocks {
            for _ in 0..count {
                xs[layer[i]] = mean + offsets[i];
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(n: usize) -> Vec<(f64, f64)> {
        (0..n).map(|i| (40.0 + 10.0 * (i % 5) as f64, 30.0)).collect()
    }

    /// No two boxes overlap, and every box is inside the drawing.
    fn assert_disjoint(l: &Layout) {
        for (i, a) in l.boxes.iter().enumerate() {
            assert!(a.x >= 0.0 && a.y >= 0.0 && a.x + a.w <= l.width + 1e-6 && a.bottom() <= l.height + 1e-6);
            for b in &l.boxes[i + 1..] {
                let apart = a.x + a.w <= b.x + 1e-6
                    || b.x + b.w <= a.x + 1e-6
                    || a.bottom() <= b.y + 1e-6
                    || b.bottom() <= a.y + 1e-6;
                assert!(apart, "{a:?} overlaps {b:?}");
            }
        }
    }

    /// Layers increase along every edge and boxes of later layers sit lower.
    fn assert_downward(l: &Layout, edges: &[(usize, usize)]) {
        for &(s, t) in edges {
            assert!(l.layers[t] > l.layers[s], "edge {s}->{t} goes from layer {} to {}", l.layers[s], l.layers[t]);
            assert!(l.boxes[t].y >= l.boxes[s].bottom());
            let route = &l.routes[edges.iter().position(|&e| e == (s, t)).unwrap()];
            assert!(route.windows(2).all(|w| w[1].1 >= w[0].1), "route goes up: {route:?}");
        }
    }

    #[test]
    fn a_long_chain_is_one_column() {
        let edges: Vec<(usize, usize)> = (0..39).map(|i| (i, i + 1)).collect();
        let l = layout(&boxes(40), &edges);
        assert_disjoint(&l);
        assert_downward(&l, &edges);
        assert_eq!(l.layers, (0..40).collect::<Vec<_>>());
        let centers: Vec<f64> = l.boxes.iter().map(Rect::cx).collect();
        assert!(centers.iter().all(|c| (c - centers[0]).abs() < 1e-6), "a chain is straight: {centers:?}");
    }

    #[test]
    fn a_diamond_has_three_layers_and_no_crossings() {
        let edges = [(0, 1), (0, 2), (1, 3), (2, 3)];
        let l = layout(&boxes(4), &edges);
        assert_disjoint(&l);
        assert_downward(&l, &edges);
        assert_eq!(l.layers, vec![0, 1, 1, 2]);
        // The join sits between its two parents, the fork above them.
        let (a, b) = (l.boxes[1].cx().min(l.boxes[2].cx()), l.boxes[1].cx().max(l.boxes[2].cx()));
        assert!(a < l.boxes[3].cx() && l.boxes[3].cx() < b);
        assert!(a < l.boxes[0].cx() && l.boxes[0].cx() < b);
    }

    #[test]
    fn a_fan_in_puts_the_sources_side_by_side_above_the_sink() {
        let edges: Vec<(usize, usize)> = (1..21).map(|i| (i, 0)).collect();
        let l = layout(&boxes(21), &edges);
        assert_disjoint(&l);
        assert_downward(&l, &edges);
        assert!((1..21).all(|i| l.layers[i] == 0) && l.layers[0] == 1);
    }

    #[test]
    fn a_skip_connection_goes_around_through_dummies() {
        // 0 -> 1 -> 2 -> 3 and 0 -> 3: the long edge passes layers 1 and 2.
        let edges = [(0, 1), (1, 2), (2, 3), (0, 3)];
        let l = layout(&boxes(4), &edges);
        assert_disjoint(&l);
        assert_downward(&l, &edges);
        assert_eq!(l.routes[3].len(), 4, "two dummy points: {:?}", l.routes[3]);
        // The long edge does not run through the boxes it passes.
        for &(x, y) in &l.routes[3][1..3] {
            assert!(l.boxes.iter().all(|b| !(b.x < x && x < b.x + b.w && b.y < y && y < b.bottom())));
        }
    }

    #[test]
    fn sources_sit_just_above_their_first_consumer() {
        // A weight (3) used only by the last node of a chain is drawn next to it, not at the top.
        let edges = [(0, 1), (1, 2), (3, 2)];
        let l = layout(&boxes(4), &edges);
        assert_eq!(l.layers, vec![0, 1, 2, 1]);
    }

    #[test]
    fn a_cycle_and_a_self_loop_still_lay_out() {
        let edges = [(0, 1), (1, 2), (2, 0), (1, 1)];
        let l = layout(&boxes(3), &edges);
        assert_disjoint(&l);
        assert!(l.routes[3].is_empty());
        // The reversed edge still starts at its source (2, the bottom) and ends at its target (0, the top).
        let back = &l.routes[2];
        assert!(back.first().unwrap().1 > back.last().unwrap().1);
    }

    #[test]
    fn crossings_are_removed_from_a_twisted_bipartite_graph() {
        // Top 0,1,2; bottom 3,4,5 wired in reverse: ordering untwists it.
        let edges = [(0, 5), (1, 4), (2, 3)];
        let l = layout(&boxes(6), &edges);
        assert_disjoint(&l);
        let order = |v: usize| l.boxes[v].cx();
        let top_increasing = order(0) < order(1) && order(1) < order(2);
        let bottom_matches = (order(5) < order(4)) == top_increasing && (order(4) < order(3)) == top_increasing;
        assert!(bottom_matches);
    }

    #[test]
    fn an_empty_graph_is_just_the_margins() {
        let l = layout(&[], &[]);
        assert!(l.boxes.is_empty() && l.width > 0.0 && l.height > 0.0);
    }
}
