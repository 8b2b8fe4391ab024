//! The solver: constraint intake, the worklist loop, variable binding, and
//! the public result.
//!
//! Constraints are processed from a queue. A rule either discharges its
//! constraint (possibly binding variables and emitting derived constraints),
//! reports a conflict, or parks it until a variable it lacks facts about is
//! solved (a *watch*). Binding or merging a variable wakes the constraints
//! watching it. This is the staged fixpoint of seed 000 without any pass that
//! re-substitutes the whole constraint set: terms are resolved lazily against
//! the union-find [`Store`].

use crate::cause::{CauseId, Causes, Origin};
use crate::constraint::Constraint;
use crate::diagnostic::{Code, Diagnostic};
use crate::store::{DimState, RowState, Store};
use diamond_ir::term::{Dim, DimTerm, DimVar, RowTerm, RowVar, Size};
use std::collections::{HashMap, VecDeque};

/// How a tensor's shape closes when the solver leaves it open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Data or a graph input: closes upward to what its uses require; holes become `1`/empty.
    Leaf,
    /// A weight: closes upward, and a hole is an `undetermined-parameter` error.
    Param,
    /// Computed inside the graph: free variables close downward.
    Interior,
}

/// A tensor registered with the solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorId(pub u32);

#[derive(Clone, Debug)]
pub(crate) struct TensorEntry {
    pub(crate) name: String,
    pub(crate) kind: TensorKind,
    pub(crate) row: RowTerm,
    pub(crate) principal: Option<RowTerm>,
    pub(crate) declared: Option<CauseId>,
}

/// A variable a parked constraint waits on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Watch {
    Dim(DimVar),
    Row(RowVar),
}

/// What a rule did with its constraint.
pub(crate) enum Step {
    /// Discharged (satisfied, reported, or replaced by derived constraints).
    Done,
    /// Needs more facts about these variables.
    Wait(Vec<Watch>),
}

/// The constraint solver. See the module documentation.
#[derive(Debug, Default)]
pub struct Solver {
    pub(crate) store: Store,
    pub(crate) causes: Causes,
    queue: VecDeque<Constraint>,
    pending: Vec<Option<Constraint>>,
    dim_watch: HashMap<u32, Vec<usize>>,
    row_watch: HashMap<u32, Vec<usize>>,
    pub(crate) templates: HashMap<(u32, usize, usize), RowTerm>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) tensors: Vec<TensorEntry>,
    dim_names: HashMap<u32, String>,
    row_names: HashMap<u32, String>,
}

/// The outcome of solving and closing.
#[derive(Clone, Debug)]
pub struct Solution {
    /// Each tensor: name, principal shape, closed shape (in row notation).
    pub tensors: Vec<(String, String, String)>,
    /// Each tensor's closed shape as a term, in registration order.
    pub closed: Vec<RowTerm>,
    /// Conflicts and warnings, in the order found.
    pub diagnostics: Vec<Diagnostic>,
}

impl Solver {
    /// An empty solver.
    pub fn new() -> Solver {
        Solver::default()
    }

    /// A fresh dimension variable; `name` is used when printing it.
    pub fn fresh_dim(&mut self, name: Option<&str>) -> DimVar {
        let v = self.store.fresh_dim();
        if let Some(name) = name {
            self.dim_names.insert(v.0, name.to_string());
        }
        v
    }

    /// A fresh row variable; `name` is used when printing it.
    pub fn fresh_row(&mut self, name: Option<&str>) -> RowVar {
        let v = self.store.fresh_row();
        if let Some(name) = name {
            self.row_names.insert(v.0, name.to_string());
        }
        v
    }

    /// A root cause.
    pub fn cause(&mut self, origin: Origin, rule: impl Into<crate::cause::Rule>) -> CauseId {
        self.causes.root(origin, rule)
    }

    /// Registers a named tensor whose shape is `row`, declared by `declared`.
    pub fn add_tensor(&mut self, name: &str, kind: TensorKind, row: RowTerm, declared: Option<CauseId>) -> TensorId {
        self.tensors.push(TensorEntry { name: name.to_string(), kind, row, principal: None, declared });
        TensorId(self.tensors.len() as u32 - 1)
    }

    /// The shape term of a registered tensor.
    pub fn tensor_row(&self, id: TensorId) -> &RowTerm {
        &self.tensors[id.0 as usize].row
    }

    /// Adds a constraint (processed by the next [`Solver::solve`]).
    pub fn add(&mut self, constraint: Constraint) {
        self.queue.push_back(constraint);
    }

    /// Runs the rules to a fixpoint.
    pub fn solve(&mut self) {
        while let Some(constraint) = self.queue.pop_front() {
            match self.apply(&constraint) {
                Step::Done => {}
                Step::Wait(watches) => self.park(constraint, watches),
            }
        }
    }

    /// Solves, records principal shapes, closes, and returns the result.
    pub fn finish(mut self) -> Solution {
        self.solve();
        for i in 0..self.tensors.len() {
            let row = self.tensors[i].row.clone();
            self.tensors[i].principal = Some(self.store.row(&row));
        }
        self.close();
        // Report in source order; within a line, in the order found.
        self.diagnostics.sort_by_key(|d| d.line.unwrap_or(u32::MAX));
        let mut closed_rows = Vec::with_capacity(self.tensors.len());
        let tensors = (0..self.tensors.len())
            .map(|i| {
                let entry = self.tensors[i].clone();
                let closed = self.store.row(&entry.row);
                let principal = entry.principal.unwrap_or_else(|| entry.row.clone());
                let shown = (entry.name, self.show_row(&principal), self.show_row(&closed));
                closed_rows.push(closed);
                shown
            })
            .collect();
        Solution { tensors, closed: closed_rows, diagnostics: self.diagnostics }
    }

    fn apply(&mut self, c: &Constraint) -> Step {
        match c {
            Constraint::DimEq(a, b, cause) => self.dim_eq(a, b, *cause),
            Constraint::DimLe(a, b, cause) => self.dim_le(a, b, *cause),
            Constraint::RowEq(a, b, cause) => self.row_eq(a, b, *cause),
            Constraint::RowLe(a, b, cause) => self.row_le(a, b, *cause),
            Constraint::Numel(a, b, cause) => self.numel(a, b, *cause),
            Constraint::Affine { out, input, kernel, pads, stride, dilation, ceil, cause } => {
                self.affine(out, input, kernel, *pads, *stride, *dilation, *ceil, *cause)
            }
            Constraint::Sum { total, parts, cause } => self.sum(total, parts, *cause),
        }
    }

    fn park(&mut self, constraint: Constraint, watches: Vec<Watch>) {
        let slot = self.pending.len();
        self.pending.push(Some(constraint));
        for w in watches {
            match w {
                Watch::Dim(v) => {
                    let root = self.store.find_dim(v);
                    self.dim_watch.entry(root.0).or_default().push(slot);
                }
                Watch::Row(v) => {
                    let root = self.store.find_row(v);
                    self.row_watch.entry(root.0).or_default().push(slot);
                }
            }
        }
    }

    fn wake(&mut self, slots: Vec<usize>) {
        for slot in slots {
            if let Some(c) = self.pending.get_mut(slot).and_then(Option::take) {
                self.queue.push_back(c);
            }
        }
    }

    /// Parked constraints that are still waiting.
    pub(crate) fn parked(&self) -> impl Iterator<Item = &Constraint> {
        self.pending.iter().flatten()
    }

    pub(crate) fn enqueue(&mut self, c: Constraint) {
        self.queue.push_back(c);
    }

    /// Binds the free dimension variable `v` to `value`.
    pub(crate) fn bind_dim(&mut self, v: DimVar, value: Dim, cause: CauseId) {
        let root = self.store.find_dim(v);
        let upper = match self.store.dim_state(root) {
            DimState::Free { upper } => upper.clone(),
            DimState::Solved { .. } => return,
        };
        self.store.set_dim(root, DimState::Solved { value: value.clone(), cause });
        if let Some((bound, bound_cause)) = upper {
            let c = self.causes.derived(bound_cause, "the variable was bounded above here");
            self.enqueue(Constraint::DimLe(DimTerm::Dim(value), DimTerm::Dim(bound), c));
        }
        let woken = self.dim_watch.remove(&root.0).unwrap_or_default();
        self.wake(woken);
    }

    /// Merges two free dimension variables.
    pub(crate) fn union_dim(&mut self, a: DimVar, b: DimVar, cause: CauseId) {
        let (ra, rb) = (self.store.find_dim(a), self.store.find_dim(b));
        let (upper_a, upper_b) = (self.dim_upper(ra), self.dim_upper(rb));
        let (root, _) = self.store.union_dims(ra, rb);
        let child = if root == ra { rb } else { ra };
        self.inherit_name(root.0, child.0, true);
        let merged = match (upper_a, upper_b) {
            (Some(x), Some(y)) if x.0 != y.0 => {
                let c = self.causes.derived(cause, format!("upper bounds {} and {} meet at _", x.0, y.0));
                self.store.set_dim(root, DimState::Free { upper: None });
                self.merge_dim_watchers(ra, rb, root);
                self.bind_dim(root, Dim::unit(), c);
                return;
            }
            (Some(x), _) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
        self.store.set_dim(root, DimState::Free { upper: merged });
        self.merge_dim_watchers(ra, rb, root);
    }

    /// Moves the watchers of two merged classes to the new root. They are not
    /// woken: merging adds no ground fact, and whatever binds the class later
    /// wakes them all.
    fn merge_dim_watchers(&mut self, a: DimVar, b: DimVar, root: DimVar) {
        let mut slots = self.dim_watch.remove(&a.0).unwrap_or_default();
        slots.extend(self.dim_watch.remove(&b.0).unwrap_or_default());
        if !slots.is_empty() {
            self.dim_watch.entry(root.0).or_default().extend(slots);
        }
    }

    fn dim_upper(&mut self, v: DimVar) -> Option<(Dim, CauseId)> {
        match self.store.dim_state(v) {
            DimState::Free { upper } => upper.clone(),
            DimState::Solved { .. } => None,
        }
    }

    /// Records `v ⊑ bound`; a second, different bound collapses `v` to `_`.
    pub(crate) fn bound_dim(&mut self, v: DimVar, bound: Dim, cause: CauseId) {
        if bound.is_unit() {
            self.bind_dim(v, Dim::unit(), cause);
            return;
        }
        match self.dim_upper(v) {
            None => self.store.set_dim(v, DimState::Free { upper: Some((bound, cause)) }),
            Some((old, _)) if old == bound => {}
            Some((old, _)) => {
                let c = self.causes.derived(cause, format!("upper bounds {old} and {bound} meet at _"));
                self.bind_dim(v, Dim::unit(), c);
            }
        }
    }

    /// Binds the free row variable `v` to `value` (already resolved).
    pub(crate) fn bind_row(&mut self, v: RowVar, value: RowTerm, cause: CauseId) {
        let root = self.store.find_row(v);
        let upper = match self.store.row_state(root) {
            RowState::Free { upper } => upper.clone(),
            RowState::Solved { .. } => return,
        };
        self.store.set_row(root, RowState::Solved { value: value.clone(), cause });
        if let Some((bound, bound_cause)) = upper {
            let c = self.causes.derived(bound_cause, "the row variable was bounded above here");
            self.enqueue(Constraint::RowLe(value, bound, c));
        }
        let woken = self.row_watch.remove(&root.0).unwrap_or_default();
        self.wake(woken);
    }

    /// Merges two free row variables.
    pub(crate) fn union_row(&mut self, a: RowVar, b: RowVar, cause: CauseId) {
        let (ra, rb) = (self.store.find_row(a), self.store.find_row(b));
        let (upper_a, upper_b) = (self.row_upper(ra), self.row_upper(rb));
        let (root, _) = self.store.union_rows(ra, rb);
        let child = if root == ra { rb } else { ra };
        self.inherit_name(root.0, child.0, false);
        let merged = match (upper_a, upper_b) {
            (Some(x), Some(y)) => Some((crate::rules::meet_rows(&x.0, &y.0), cause)),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
        self.store.set_row(root, RowState::Free { upper: merged });
        let mut slots = self.row_watch.remove(&ra.0).unwrap_or_default();
        slots.extend(self.row_watch.remove(&rb.0).unwrap_or_default());
        if !slots.is_empty() {
            self.row_watch.entry(root.0).or_default().extend(slots);
        }
    }

    pub(crate) fn row_upper(&mut self, v: RowVar) -> Option<(RowTerm, CauseId)> {
        match self.store.row_state(v) {
            RowState::Free { upper } => upper.clone(),
            RowState::Solved { .. } => None,
        }
    }

    /// Records `v ⊑ bound`; a second bound is met with the first.
    pub(crate) fn bound_row(&mut self, v: RowVar, bound: RowTerm, cause: CauseId) {
        let merged = match self.row_upper(v) {
            None => bound,
            Some((old, _)) => crate::rules::meet_rows(&old, &bound),
        };
        self.store.set_row(v, RowState::Free { upper: Some((merged, cause)) });
    }

    fn inherit_name(&mut self, root: u32, child: u32, dim: bool) {
        let names = if dim { &mut self.dim_names } else { &mut self.row_names };
        if !names.contains_key(&root) {
            if let Some(name) = names.get(&child).cloned() {
                names.insert(root, name);
            }
        }
    }

    /// Records a diagnostic for the failed constraint `cause`, with `facts`
    /// explaining each clashing term.
    pub(crate) fn report(&mut self, code: Code, message: String, cause: CauseId, facts: Vec<String>) {
        let mut notes = facts;
        notes.push(format!("required by {}", self.causes.chain_text(cause)));
        self.diagnostics.push(Diagnostic {
            severity: code.severity(),
            code,
            message,
            line: self.causes.line(cause),
            notes,
        });
    }

    /// How a term's value came about, for diagnostics: `'a is 3 because ...`.
    pub(crate) fn explain_dim(&mut self, t: &DimTerm) -> Option<String> {
        let DimTerm::Var(v) = t else { return None };
        let name = self.dim_name(*v);
        match self.store.dim_state(*v).clone() {
            DimState::Solved { value, cause } => {
                Some(format!("{name} is {value} because of {}", self.causes.chain_text(cause)))
            }
            DimState::Free { .. } => None,
        }
    }

    /// Names a variable made for `base` (a template's fresh variables are
    /// named after the row variable they grew from: `c.0`, `c.r`).
    pub(crate) fn name_derived(&mut self, base: RowVar, dim: Option<DimVar>, row: Option<RowVar>, suffix: &str) {
        let root = self.store.find_row(base);
        let base = self.row_names.get(&root.0).or_else(|| self.row_names.get(&base.0)).cloned();
        let base = base.unwrap_or_else(|| format!("_{}", root.0));
        if let Some(d) = dim {
            self.dim_names.insert(d.0, format!("{base}.{suffix}"));
        }
        if let Some(r) = row {
            self.row_names.insert(r.0, format!("{base}.{suffix}"));
        }
    }

    /// The printed name of a dimension variable.
    pub(crate) fn dim_name(&mut self, v: DimVar) -> String {
        let root = self.store.find_dim(v);
        match self.dim_names.get(&root.0).or_else(|| self.dim_names.get(&v.0)) {
            Some(name) => format!("'{name}"),
            None => format!("'_{}", root.0),
        }
    }

    /// The printed name of a row variable.
    pub(crate) fn row_name(&mut self, v: RowVar) -> String {
        let root = self.store.find_row(v);
        match self.row_names.get(&root.0).or_else(|| self.row_names.get(&v.0)) {
            Some(name) => format!("..{name}"),
            None => format!(".._{}", root.0),
        }
    }

    /// A dimension term in row notation, with variable names.
    pub(crate) fn show_dim(&mut self, t: &DimTerm) -> String {
        match t {
            DimTerm::Dim(d) => d.to_string(),
            DimTerm::Var(v) => self.dim_name(*v),
        }
    }

    /// A row term in row notation, with variable names.
    pub(crate) fn show_row(&mut self, r: &RowTerm) -> String {
        let mut dims = |ds: &[DimTerm]| ds.iter().map(|d| self.show_dim(d)).collect::<Vec<_>>().join(", ");
        let (leading, trailing) = (dims(&r.leading), dims(&r.trailing));
        match r.var {
            None if r.leading.is_empty() => format!("[{trailing}]"),
            Some(v) if r.leading.is_empty() && r.trailing.is_empty() => format!("[{}]", self.row_name(v)),
            var => {
                let marker = match var {
                    Some(v) => format!("<{}>", self.row_name(v)),
                    None => "<>".to_string(),
                };
                let sep = |s: &str| if s.is_empty() { "" } else { " " };
                format!("[{leading}{}{marker}{}{trailing}]", sep(&leading), sep(&trailing))
            }
        }
    }
}

/// Whether a dimension is a rigid symbol (or an expression over them).
pub(crate) fn is_rigid(d: &Dim) -> bool {
    matches!(d.size, Size::Symbolic(_))
}
