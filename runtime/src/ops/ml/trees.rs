//! Tree ensembles: `TreeEnsembleRegressor`, `TreeEnsembleClassifier` and
//! (opset 5) `TreeEnsemble`.
//!
//! The `nodes_*` attribute lists are validated and flattened once per call
//! into a [`Forest`]: struct-of-arrays node tables (feature, threshold,
//! mode, the false and true child as indices into the same tables), the
//! tree roots, and each leaf's weights as a range of one weight table; for
//! evaluation the nodes are packed again, one record per node in
//! depth-first order ([`Packed`]), and rows walk the trees in blocks. Every
//! length and id is checked first — lists of different lengths, a child or
//! leaf id that names no node, a feature past the input's columns, a cycle
//! — and named in the error, so evaluation indexes without failing. Rows are
//! independent and large batches are split over the rayon pool.

use super::{finish_scores, floats, score_tensor, two, Labels, Pick, Rows, Second, Transform};
use crate::error::Result;
use crate::ops::elementwise::from_f64s;
use crate::ops::{one, NodeCtx, Outs};
use rayon::prelude::*;
use std::collections::HashMap;

/// Rows a tree is walked for before the next tree.
const BLOCK_ROWS: usize = 256;

/// Rows walking a tree side by side ([`Forest::leaves`]).
const LANES: usize = 8;

/// How a node compares the row's feature with its threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    Leaf,
}

impl Mode {
    fn parse(s: &[u8]) -> Option<Mode> {
        Some(match s {
            b"BRANCH_LEQ" => Mode::Leq,
            b"BRANCH_LT" => Mode::Lt,
            b"BRANCH_GTE" => Mode::Gte,
            b"BRANCH_GT" => Mode::Gt,
            b"BRANCH_EQ" => Mode::Eq,
            b"BRANCH_NEQ" => Mode::Neq,
            b"LEAF" => Mode::Leaf,
            _ => return None,
        })
    }
}

/// The trees, flattened. Node `i` (in the attribute lists' order) has its
/// record for evaluation in `packed`, where a branch compares a feature with its
/// threshold and goes to its true child when that holds, else to its false
/// child (a NaN goes true when the comparison holds or the node tracks
/// missing values as true). A leaf's weights are
/// `leaf_start[i]..leaf_start[i+1]` of `weight_target`/`weight_value`.
struct Forest {
    /// The first branch node reading the highest feature index, and that
    /// index: what [`Forest::check_features`] checks a row's width against.
    widest: Option<(usize, usize)>,
    leaf_start: Vec<usize>,
    weight_target: Vec<usize>,
    weight_value: Vec<f64>,
    roots: Vec<usize>,
    /// The nodes again, for evaluation: one record per node (see [`Packed`]).
    packed: Vec<Packed>,
    /// Each tree's root in `packed`.
    packed_roots: Vec<u32>,
    /// Every branch is `BRANCH_LEQ` and sends NaN to its false child (what
    /// scikit-learn's converters write): [`Forest::leaves`] then compares
    /// without looking at the mode.
    plain_leq: bool,
    /// How many different targets the weights go to.
    distinct_targets: usize,
    /// Whether no weight is negative.
    all_positive: bool,
}

/// One node as evaluation reads it: everything one visit needs in one
/// record (24 bytes), the records of a tree in depth-first order with the
/// false child right after its parent, so that a walk reads few cache
/// lines. The node tables read one array per field (five loads from five
/// places per visit): a 100-tree random forest over 100 rows ran 2.3×
/// onnxruntime's time. A leaf holds its index in the node tables (where
/// its weights are found) in both children.
#[derive(Clone, Copy, Debug)]
struct Packed {
    threshold: f64,
    feature: u32,
    /// False child, true child.
    children: [u32; 2],
    mode: Mode,
    missing_true: bool,
}

impl Packed {
    /// Whether a branch sends feature value `v` to its true child: the
    /// comparison holds, or `v` is NaN and the node tracks missing values as true.
    #[inline(always)]
    fn goes_true(&self, v: f64) -> bool {
        let s = self.threshold;
        let holds = match self.mode {
            Mode::Leq => v <= s,
            Mode::Lt => v < s,
            Mode::Gte => v >= s,
            Mode::Gt => v > s,
            Mode::Eq => v == s,
            Mode::Neq | Mode::Leaf => v != s,
        };
        holds || (self.missing_true && v.is_nan())
    }
}

/// The nodes in depth-first order from each root, false child first, each
/// node once (a node two parents share keeps its first place); the packed
/// records and the roots' places. Node counts fit `u32` (checked by the caller).
fn pack(
    feature: &[usize],
    threshold: &[f64],
    mode: &[Mode],
    missing_true: &[bool],
    child: &[[usize; 2]],
    roots: &[usize],
) -> (Vec<Packed>, Vec<u32>) {
    let n = mode.len();
    let mut place = vec![u32::MAX; n];
    let mut order = Vec::with_capacity(n);
    let mut stack = Vec::new();
    for &root in roots {
        stack.push(root);
        while let Some(i) = stack.pop() {
            if place[i] != u32::MAX {
                continue;
            }
            place[i] = order.len() as u32;
            order.push(i);
            if mode[i] != Mode::Leaf {
                let [f, t] = child[i];
                stack.push(t);
                stack.push(f);
            }
        }
    }
    let packed = order
        .iter()
        .map(|&i| Packed {
            threshold: threshold[i],
            feature: feature[i] as u32,
            children: match mode[i] {
                Mode::Leaf => [i as u32; 2],
                _ => [place[child[i][0]], place[child[i][1]]],
            },
            mode: mode[i],
            missing_true: missing_true[i],
        })
        .collect();
    (packed, roots.iter().map(|&r| place[r]).collect())
}

/// How the trees' weights for one target combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Average,
    Min,
    Max,
}

impl Forest {
    /// Reads and checks the node lists and the `<prefix>_*` weight lists
    /// (`target` for the regressor, `class` for the classifier) for
    /// `targets` targets.
    fn read(ctx: &NodeCtx<'_>, prefix: &str, targets: usize) -> Result<Forest> {
        let ints = |name: &str| ctx.attr_ints(name).unwrap_or_default();
        let node_ids = ints("nodes_nodeids");
        let tree_ids = ints("nodes_treeids");
        let features = ints("nodes_featureids");
        let modes = ctx.attr_strings("nodes_modes").unwrap_or_default();
        let values = floats(ctx, "nodes_values")?.unwrap_or_default();
        let trues = ints("nodes_truenodeids");
        let falses = ints("nodes_falsenodeids");
        let mut missing = ints("nodes_missing_value_tracks_true");
        let n = node_ids.len();
        if missing.is_empty() {
            missing = vec![0; n];
        }
        let lists: [(&str, usize); 7] = [
            ("nodes_treeids", tree_ids.len()),
            ("nodes_featureids", features.len()),
            ("nodes_modes", modes.len()),
            ("nodes_values", values.len()),
            ("nodes_truenodeids", trues.len()),
            ("nodes_falsenodeids", falses.len()),
            ("nodes_missing_value_tracks_true", missing.len()),
        ];
        if let Some((name, len)) = lists.iter().find(|(_, len)| *len != n) {
            return Err(
                ctx.err(format!("{name} has {len} entries but nodes_nodeids {n}; the nodes_* lists must match"))
            );
        }
        let mut index: HashMap<(i64, i64), usize> = HashMap::with_capacity(n);
        for i in 0..n {
            if index.insert((tree_ids[i], node_ids[i]), i).is_some() {
                return Err(
                    ctx.err(format!("nodes_nodeids: node {} of tree {} appears twice", node_ids[i], tree_ids[i]))
                );
            }
        }
        let mut mode = Vec::with_capacity(n);
        let mut feature = Vec::with_capacity(n);
        let mut child = Vec::with_capacity(n);
        let mut is_child = vec![false; n];
        for i in 0..n {
            let m = Mode::parse(&modes[i]).ok_or_else(|| {
                ctx.err(format!("nodes_modes: '{}' is not a branch mode", String::from_utf8_lossy(&modes[i])))
            })?;
            mode.push(m);
            if m == Mode::Leaf {
                feature.push(0);
                child.push([i, i]);
                continue;
            }
            let f = usize::try_from(features[i])
                .map_err(|_| ctx.err(format!("nodes_featureids: node {i} reads feature {}", features[i])))?;
            feature.push(f);
            let find = |name: &str, id: i64| {
                index.get(&(tree_ids[i], id)).copied().ok_or_else(|| {
                    ctx.err(format!(
                        "{name}: node {} of tree {} goes to node {id}, which is not in the tree",
                        node_ids[i], tree_ids[i]
                    ))
                })
            };
            let (f_child, t_child) = (find("nodes_falsenodeids", falses[i])?, find("nodes_truenodeids", trues[i])?);
            is_child[f_child] = true;
            is_child[t_child] = true;
            child.push([f_child, t_child]);
        }
        check_acyclic(ctx, &mode, &child)?;
        let roots: Vec<usize> = (0..n).filter(|&i| !is_child[i]).collect();
        let (leaf_start, weight_target, weight_value) = leaf_weights(ctx, prefix, &index, n, targets)?;
        let missing_true: Vec<bool> = missing.iter().map(|&m| m != 0).collect();
        if u32::try_from(n).is_err() || feature.iter().any(|&f| u32::try_from(f).is_err()) {
            return Err(ctx.err(format!("nodes_nodeids: {n} nodes, or a feature index, past what a forest may hold")));
        }
        let (packed, packed_roots) = pack(&feature, &values, &mode, &missing_true, &child, &roots);
        let mut distinct = weight_target.clone();
        distinct.sort_unstable();
        distinct.dedup();
        Ok(Forest {
            distinct_targets: distinct.len(),
            all_positive: weight_value.iter().all(|&w| w >= 0.0),
            plain_leq: (0..n).all(|i| mode[i] == Mode::Leaf || (mode[i] == Mode::Leq && !missing_true[i])),
            widest: (0..n).filter(|&i| mode[i] != Mode::Leaf).map(|i| (i, feature[i])).reduce(|a, b| {
                if b.1 > a.1 {
                    b
                } else {
                    a
                }
            }),
            leaf_start,
            weight_target,
            weight_value,
            roots,
            packed,
            packed_roots,
        })
    }

    /// The leaf (its index in the node tables) row `x` reaches from the
    /// packed root `root`.
    #[inline]
    fn leaf(&self, root: u32, x: &[f64]) -> usize {
        let mut i = root as usize;
        loop {
            let node = &self.packed[i];
            if node.mode == Mode::Leaf {
                return node.children[0] as usize;
            }
            i = node.children[node.goes_true(x[node.feature as usize]) as usize] as usize;
        }
    }

    /// The leaves (indices in the node tables) that `LANES` rows reach from
    /// the packed root `root`: the rows walk side by side, one level each
    /// per round, so that their node loads overlap instead of each waiting
    /// for the one before (a walk is a chain of dependent loads).
    #[inline]
    fn leaves(&self, root: u32, xs: &[&[f64]; LANES]) -> [usize; LANES] {
        let mut at = [root as usize; LANES];
        if self.plain_leq {
            // every branch `x <= threshold`, NaN going false: no mode to dispatch on
            loop {
                let mut moved = false;
                for l in 0..LANES {
                    let node = &self.packed[at[l]];
                    if node.mode != Mode::Leaf {
                        let go = xs[l][node.feature as usize] <= node.threshold;
                        at[l] = node.children[go as usize] as usize;
                        moved = true;
                    }
                }
                if !moved {
                    return at.map(|i| self.packed[i].children[0] as usize);
                }
            }
        }
        loop {
            let mut moved = false;
            for l in 0..LANES {
                let node = &self.packed[at[l]];
                if node.mode == Mode::Leaf {
                    continue;
                }
                at[l] = node.children[node.goes_true(xs[l][node.feature as usize]) as usize] as usize;
                moved = true;
            }
            if !moved {
                return at.map(|i| self.packed[i].children[0] as usize);
            }
        }
    }

    /// Every row's per-target scores and whether any tree gave one. Rows
    /// go in blocks, each tree walked for every row of its block before the
    /// next tree (its nodes stay in cache), [`LANES`] rows at a time; blocks
    /// run in parallel when there is enough work. Each row's weights add up
    /// in tree order either way.
    fn scores(&self, rows: &Rows, targets: usize, agg: Aggregate) -> Vec<(Vec<f64>, Vec<bool>)> {
        let add = |leaf: usize, (score, has): &mut (Vec<f64>, Vec<bool>)| {
            for w in self.leaf_start[leaf]..self.leaf_start[leaf + 1] {
                let (t, v) = (self.weight_target[w], self.weight_value[w]);
                score[t] = match (has[t], agg) {
                    (false, _) => v,
                    (true, Aggregate::Sum | Aggregate::Average) => score[t] + v,
                    (true, Aggregate::Min) => score[t].min(v),
                    (true, Aggregate::Max) => score[t].max(v),
                };
                has[t] = true;
            }
        };
        let block = |first: usize, count: usize| {
            let mut out: Vec<(Vec<f64>, Vec<bool>)> =
                (0..count).map(|_| (vec![0.0; targets], vec![false; targets])).collect();
            let lanes = count / LANES * LANES;
            for &root in &self.packed_roots {
                for k in (0..lanes).step_by(LANES) {
                    let xs: [&[f64]; LANES] = std::array::from_fn(|l| rows.row(first + k + l));
                    for (l, leaf) in self.leaves(root, &xs).into_iter().enumerate() {
                        add(leaf, &mut out[k + l]);
                    }
                }
                for k in lanes..count {
                    add(self.leaf(root, rows.row(first + k)), &mut out[k]);
                }
            }
            out
        };
        let threads = rayon::current_num_threads();
        // a few thousand node visits per task are worth a thread
        if threads > 1 && rows.n * self.roots.len() >= 4096 && rows.n > 1 {
            let per_task = rows.n.div_ceil(threads * 4).clamp(1, BLOCK_ROWS);
            let starts: Vec<usize> = (0..rows.n).step_by(per_task).collect();
            starts.into_par_iter().flat_map_iter(|first| block(first, per_task.min(rows.n - first))).collect()
        } else {
            (0..rows.n).step_by(BLOCK_ROWS).flat_map(|first| block(first, BLOCK_ROWS.min(rows.n - first))).collect()
        }
    }

    /// Refuses a feature index past the row's `f` columns.
    fn check_features(&self, ctx: &NodeCtx<'_>, f: usize) -> Result<()> {
        match self.widest {
            Some((i, feature)) if feature >= f => {
                Err(ctx.err(format!("nodes_featureids: node {i} reads feature {feature} of {f}")))
            }
            _ => Ok(()),
        }
    }
}

/// Refuses a forest whose child links loop (Kahn's algorithm over every node).
fn check_acyclic(ctx: &NodeCtx<'_>, mode: &[Mode], child: &[[usize; 2]]) -> Result<()> {
    let n = mode.len();
    let mut indegree = vec![0u32; n];
    let branches = || (0..n).filter(|&i| mode[i] != Mode::Leaf);
    for i in branches() {
        for &c in &child[i] {
            indegree[c] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = ready.pop() {
        seen += 1;
        if mode[i] == Mode::Leaf {
            continue;
        }
        let [f, t] = child[i];
        for c in if f == t { vec![f] } else { vec![f, t] } {
            indegree[c] -= if f == t { 2 } else { 1 };
            if indegree[c] == 0 {
                ready.push(c);
            }
        }
    }
    if seen < n {
        return Err(ctx.err("nodes_truenodeids/nodes_falsenodeids: the child links form a cycle"));
    }
    Ok(())
}

/// The weight lists grouped by leaf: `(start per node and one past the
/// end, target per weight, value per weight)`.
fn leaf_weights(
    ctx: &NodeCtx<'_>,
    prefix: &str,
    index: &HashMap<(i64, i64), usize>,
    n: usize,
    targets: usize,
) -> Result<(Vec<usize>, Vec<usize>, Vec<f64>)> {
    let name = |s: &str| format!("{prefix}_{s}");
    let ints = |s: &str| ctx.attr_ints(&name(s)).unwrap_or_default();
    let (trees, nodes, ids) = (ints("treeids"), ints("nodeids"), ints("ids"));
    let weights = floats(ctx, &name("weights"))?.unwrap_or_default();
    let m = nodes.len();
    for (list, len) in [("treeids", trees.len()), ("ids", ids.len()), ("weights", weights.len())] {
        if len != m {
            return Err(ctx.err(format!(
                "{} has {len} entries but {} {m}; they must match",
                name(list),
                name("nodeids")
            )));
        }
    }
    let mut node_of = Vec::with_capacity(m);
    for k in 0..m {
        let node = index.get(&(trees[k], nodes[k])).copied().ok_or_else(|| {
            ctx.err(format!("{}: node {} of tree {} is not in nodes_nodeids", name("nodeids"), nodes[k], trees[k]))
        })?;
        if usize::try_from(ids[k]).map_or(true, |t| t >= targets) {
            return Err(ctx.err(format!("{} holds {}, outside the {targets} targets", name("ids"), ids[k])));
        }
        node_of.push(node);
    }
    let mut start = vec![0usize; n + 1];
    for &node in &node_of {
        start[node + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let (mut target, mut value) = (vec![0; m], vec![0.0; m]);
    for k in 0..m {
        let at = &mut fill[node_of[k]];
        target[*at] = ids[k] as usize;
        value[*at] = weights[k];
        *at += 1;
    }
    Ok((start, target, value))
}

fn aggregate(ctx: &NodeCtx<'_>) -> Result<Aggregate> {
    let s = ctx.attr_s("aggregate_function").unwrap_or_else(|| "SUM".into());
    Ok(match s.as_str() {
        "SUM" => Aggregate::Sum,
        "AVERAGE" => Aggregate::Average,
        "MIN" => Aggregate::Min,
        "MAX" => Aggregate::Max,
        other => return Err(ctx.err(format!("aggregate_function '{other}' is not one of SUM, AVERAGE, MIN, MAX"))),
    })
}

/// `TreeEnsembleRegressor`: `[N, n_targets]` float, the trees' weights
/// aggregated, `base_values` added, then the transform (a single target
/// takes only PROBIT, as in onnxruntime).
pub(super) fn regressor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let targets = usize::try_from(ctx.attr_i("n_targets", 1))
        .ok()
        .filter(|&t| t >= 1)
        .ok_or_else(|| ctx.err("n_targets must be at least 1"))?;
    let (agg, transform) = (aggregate(ctx)?, Transform::read(ctx)?);
    let base = floats(ctx, "base_values")?.unwrap_or_default();
    let forest = ctx.prepared(|| Forest::read(ctx, "target", targets))?;
    let rows = super::rows(ctx, 0)?;
    forest.check_features(ctx, rows.f)?;
    let trees = forest.roots.len().max(1) as f64;
    let per_target = base.len() == targets;
    let origin = if base.len() == 1 { base[0] } else { 0.0 };
    let out: Vec<Vec<f32>> = forest
        .scores(&rows, targets, agg)
        .into_iter()
        .map(|(mut score, has)| {
            for t in 0..targets {
                let b = if targets == 1 {
                    origin
                } else if per_target {
                    base[t]
                } else {
                    0.0
                };
                // a target no leaf weighs stays 0 under AVERAGE, MIN and MAX, its base not
                // added (onnxruntime's outputs on fixtures/ml/tree_regressor_*)
                score[t] = match agg {
                    Aggregate::Sum => score[t] + b,
                    _ if !has[t] => 0.0,
                    Aggregate::Average => score[t] / trees + b,
                    Aggregate::Min | Aggregate::Max => score[t] + b,
                };
            }
            finish_scores(&score, transform, Second::Alone)
        })
        .collect();
    one(score_tensor(&out, targets))
}

/// `TreeEnsembleClassifier`: labels `[N]` and scores `[N, classes]`. With
/// more than two classes the label is the best-scoring class; with two,
/// onnxruntime's rules for one-sided weights and `base_values` apply.
pub(super) fn classifier(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let labels = Labels::read(ctx, "classlabels_int64s")?;
    let classes = labels.len();
    let transform = Transform::read(ctx)?;
    let base = floats(ctx, "base_values")?.unwrap_or_default();
    let forest = ctx.prepared(|| Forest::read(ctx, "class", classes))?;
    let rows = super::rows(ctx, 0)?;
    forest.check_features(ctx, rows.f)?;
    let binary = Binary {
        one_class: classes == 2 && forest.distinct_targets == 1,
        positive: forest.all_positive,
        strings: labels.are_strings(),
    };
    let (picks, scores): (Vec<Pick>, Vec<Vec<f32>>) = forest
        .scores(&rows, classes, Aggregate::Sum)
        .into_iter()
        .map(|(score, has)| {
            if classes > 2 {
                many_classes(score, has, &base, transform)
            } else {
                binary.finish(score, has, &base, transform)
            }
        })
        .unzip();
    two(labels.tensor(&picks), score_tensor(&scores, classes))
}

fn many_classes(mut score: Vec<f64>, mut has: Vec<bool>, base: &[f64], t: Transform) -> (Pick, Vec<f32>) {
    for (k, &b) in base.iter().enumerate().take(score.len()) {
        score[k] = if has[k] { score[k] + b } else { b };
        has[k] = true;
    }
    let mut best: Option<usize> = None;
    for k in 0..score.len() {
        if has[k] && best.is_none_or(|b| score[k] > score[b]) {
            best = Some(k);
        }
    }
    (Pick::Index(best.unwrap_or(0)), finish_scores(&score, t, Second::Alone))
}

/// What decides a two-class tree classifier's label: whether all weights
/// go to one class, and whether they are all non-negative.
struct Binary {
    one_class: bool,
    positive: bool,
    strings: bool,
}

impl Binary {
    fn finish(&self, mut score: Vec<f64>, has: Vec<bool>, base: &[f64], t: Transform) -> (Pick, Vec<f32>) {
        let mut second = Second::Alone;
        let mut kept = 2;
        match base.len() {
            2 if has[1] => {
                // onnxruntime reads class 0's sum here, and ignores base_values[0]
                score[1] = base[1] + score[0];
                score[0] = -score[1];
            }
            2 => {
                score[1] += base[1];
                score[0] += base[0];
            }
            1 => {
                score[0] += base[0];
                kept = if has[1] { 2 } else { 1 };
            }
            0 => {
                second = Second::Negation;
                kept = if has[1] { 2 } else { 1 };
            }
            _ => {}
        }
        let positive_weight = if kept == 2 && has[1] {
            score[1]
        } else if has[0] {
            score[0]
        } else {
            0.0
        };
        let pick = match (self.one_class, self.positive) {
            (true, true) if positive_weight > 0.5 => {
                second = Second::Complement;
                Pick::Index(1)
            }
            (true, true) => {
                second = Second::Complement;
                Pick::Index(0)
            }
            (true, false) => {
                second = Second::Negation;
                Pick::Index(usize::from(positive_weight > 0.0))
            }
            // onnxruntime's labels 1 and 0, which index the string labels
            (false, _) if self.strings => Pick::Index(usize::from(positive_weight > 0.0)),
            (false, _) => Pick::Value(i64::from(positive_weight > 0.0)),
        };
        (pick, finish_scores(&score[..kept], t, second))
    }
}

/// `TreeEnsemble` (opset 5): `[N, n_targets]` of the input's type; see
/// [`ensemble_v5`] for the attributes.
pub(super) fn tree_ensemble(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (rows, out) = ensemble_v5(ctx)?;
    let x = ctx.input(0)?;
    let elem = ctx.attr_tensor("leaf_weights")?.map_or(x.elem(), |t| t.elem());
    let targets = if rows == 0 { ctx.attr_i("n_targets", 1).max(1) as usize } else { out.len() / rows };
    one(from_f64s(ctx, elem, vec![rows, targets], &out)?)
}

/// The rows and scores of an opset-5 `TreeEnsemble`: every tree routes the
/// row from its root by the node comparisons (LEQ, LT, GTE, GT, EQ, NEQ,
/// MEMBER; NaN goes where `nodes_missing_value_tracks_true` says) to a leaf,
/// whose weight adds to its target; trees combine by the aggregate
/// function, then the post transform applies. Ids are checked as the row
/// walks, with a step bound against cycles.
fn ensemble_v5(ctx: &NodeCtx<'_>) -> Result<(usize, Vec<f64>)> {
    let x = ctx.input(0)?;
    let xv = x.to_f64s().filter(|_| x.is_float()).ok_or_else(|| ctx.err("X must be a float tensor"))?;
    let ints = |name: &str| ctx.attr_ints(name).unwrap_or_default();
    let tensor = |name: &str| -> Result<Vec<f64>> {
        match ctx.attr_tensor(name)? {
            Some(t) => t.to_f64s().ok_or_else(|| ctx.err(format!("{name} must be numeric"))),
            None => Ok(Vec::new()),
        }
    };
    let (feat, modes, splits) = (ints("nodes_featureids"), tensor("nodes_modes")?, tensor("nodes_splits")?);
    let (t_ids, f_ids, t_leaf, f_leaf) =
        (ints("nodes_truenodeids"), ints("nodes_falsenodeids"), ints("nodes_trueleafs"), ints("nodes_falseleafs"));
    let missing = ints("nodes_missing_value_tracks_true");
    let members = tensor("membership_values")?;
    let (leaf_targets, leaf_weights) = (ints("leaf_targetids"), tensor("leaf_weights")?);
    let roots = ints("tree_roots");
    let n_targets = ctx.attr_i("n_targets", 1).max(1) as usize;
    let nodes = feat.len();
    let lists = [
        ("nodes_modes", modes.len()),
        ("nodes_splits", splits.len()),
        ("nodes_truenodeids", t_ids.len()),
        ("nodes_falsenodeids", f_ids.len()),
        ("nodes_trueleafs", t_leaf.len()),
        ("nodes_falseleafs", f_leaf.len()),
    ];
    if let Some((name, len)) = lists.iter().find(|(_, l)| *l != nodes) {
        return Err(ctx.err(format!("{name} has {len} entries but nodes_featureids {nodes}; they must match")));
    }
    if leaf_targets.len() != leaf_weights.len() {
        return Err(ctx.err(format!(
            "leaf_targetids has {} entries but leaf_weights {}; they must match",
            leaf_targets.len(),
            leaf_weights.len()
        )));
    }
    // the membership set of each MEMBER node, in node order, NaN-separated
    let mut sets: Vec<Vec<f64>> = vec![Vec::new(); nodes];
    let mut chunks = members.split(|v| v.is_nan());
    for i in 0..nodes {
        if modes[i] as i64 == 6 {
            sets[i] = chunks.next().unwrap_or(&[]).to_vec();
        }
    }
    let cols = *x.shape.last().ok_or_else(|| ctx.err("X must have rank ≥ 1"))?;
    let rows = if x.rank() == 1 { 1 } else { x.len() / cols.max(1) };
    let agg = ctx.attr_i("aggregate_function", 1);
    let mut out = vec![0.0; rows * n_targets];
    for r in 0..rows {
        let row = &xv[r * cols..(r + 1) * cols];
        let mut acc: Vec<Option<f64>> = vec![None; n_targets];
        for &root in &roots {
            let mut i = usize::try_from(root).map_err(|_| ctx.err("tree_roots: a negative root"))?;
            let mut steps = 0;
            let leaf = loop {
                if i >= nodes || steps > nodes {
                    return Err(
                        ctx.err("nodes_truenodeids/nodes_falsenodeids: a tree refers past its nodes (or loops)")
                    );
                }
                steps += 1;
                let f = usize::try_from(feat[i])
                    .ok()
                    .filter(|&f| f < cols)
                    .ok_or_else(|| ctx.err(format!("nodes_featureids: feature {} is out of range", feat[i])))?;
                let (v, s) = (row[f], splits[i]);
                let go_true = if v.is_nan() {
                    missing.get(i).copied().unwrap_or(0) != 0
                } else {
                    match modes[i] as i64 {
                        0 => v <= s,
                        1 => v < s,
                        2 => v >= s,
                        3 => v > s,
                        4 => v == s,
                        5 => v != s,
                        6 => sets[i].contains(&v),
                        m => return Err(ctx.err(format!("nodes_modes: mode {m}"))),
                    }
                };
                let (next, is_leaf) = if go_true { (t_ids[i], t_leaf[i] != 0) } else { (f_ids[i], f_leaf[i] != 0) };
                let next = usize::try_from(next).map_err(|_| ctx.err("a negative node id"))?;
                if is_leaf {
                    break next;
                }
                i = next;
            };
            let t = leaf_targets.get(leaf).and_then(|&t| usize::try_from(t).ok()).filter(|&t| t < n_targets);
            let t = t.ok_or_else(|| ctx.err("leaf_targetids: a leaf or target id is out of range"))?;
            let w = leaf_weights[leaf];
            acc[t] = Some(match (acc[t], agg) {
                (None, _) => w,
                (Some(a), 2) => a.min(w),
                (Some(a), 3) => a.max(w),
                (Some(a), _) => a + w,
            });
        }
        for t in 0..n_targets {
            let v = acc[t].unwrap_or(0.0);
            out[r * n_targets + t] = if agg == 0 { v / roots.len().max(1) as f64 } else { v };
        }
    }
    match ctx.attr_i("post_transform", 0) {
        0 => {}
        2 => out.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
        p => return Err(ctx.unsupported(format!("post_transform {p}"))),
    }
    Ok((rows, out))
}
