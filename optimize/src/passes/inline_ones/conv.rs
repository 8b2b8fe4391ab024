//! `Conv(x, W, B)` with a uniform kernel `W` (every weight `c`) sums a
//! window: each output channel of a group-1 Conv is the same sum of all
//! input channels over the window, and a depthwise Conv (`group` = input
//! channels = output channels) sums each channel's window. It becomes
//! - a ReduceSum over the channels (group 1; a ReduceMean when that makes
//!   the scale 1), then
//! - an AveragePool over the window with `count_include_pad = 1` (the
//!   Conv's kernel, strides and pads; the average over the zero-padded
//!   window times its size is the Conv's sum), when the window is not a
//!   single element at stride 1,
//! - times `c` and the window size (when that is not 1),
//! - plus the bias (a scalar when uniform, a stored `[M, 1, ...]` copy
//!   otherwise), expanded to the `M` output channels when the bias did not.
//!
//! Every shape comes from the analysis: the kernel's sizes and `M` must be
//! known and its channels the input's; `auto_pad` other than NOTSET/VALID,
//! other groupings, and dilations before opset 19 (when AveragePool takes
//! them) are left alone.

use super::addend::addend;
use super::chain::Chain;
use super::dims::{expand_target, same, shape_of, text};
use super::{int, ints, is_float, is_reciprocal, quoted, Note, Rewrite};
use crate::rewrite::{int_attr, ints_attr};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{Model, NodeId};

/// The rewrite of Conv node `nid`, when its kernel is uniform.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.inputs.len() < 2 {
        return None;
    }
    let (x, w) = (n.inputs[0], n.inputs[1]);
    let bias = n.inputs.get(2).copied().filter(|&v| !graph.value_name(v).is_empty());
    let u = uniform(model, a, w)?;
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    let (x_shape, w_shape, out_shape) = (shape_of(model, a, x)?, shape_of(model, a, w)?, shape_of(model, a, out)?);
    let rank = x_shape.len();
    if rank < 3 || w_shape.len() != rank || out_shape.len() != rank || !is_float(dtype) {
        return None;
    }
    let known = |d: &DimReport| match d {
        DimReport::Known(k) => Some(*k),
        _ => None,
    };
    let kernel: Vec<u64> = w_shape[2..].iter().map(known).collect::<Option<_>>()?;
    if ints(n, "kernel_shape").is_some_and(|k| k.iter().zip(&kernel).any(|(&p, &q)| p as u64 != q)) {
        return None;
    }
    let m = known(&w_shape[0])?;
    let channels = &x_shape[1];
    let group = int(n, "group", 1);
    let depthwise =
        group > 1 && known(channels) == Some(group as u64) && m == group as u64 && w_shape[1] == DimReport::Known(1);
    if !(group == 1 && same(&w_shape[1], channels) || depthwise) {
        return None;
    }
    let window = Window::of(n, kernel, opset)?;
    // `c = 1/K` (to the type's precision) over a window of K is its mean: AveragePool alone.
    let size = window.size() as f64;
    let scale = if is_reciprocal(u.value, size, dtype) { 1.0 } else { u.value * size };
    let mut chain = Chain::new(graph, nid, x, opset);
    let mut factor = scale;
    // What the chain has computed so far: the output's positions, one channel (group 1) or all.
    let mut reached = out_shape.clone();
    if !depthwise {
        reached[1] = DimReport::Known(1);
        if *channels != DimReport::Known(1) {
            let mean = scale != 1.0 && known(channels).is_some_and(|c| is_reciprocal(scale, c as f64, dtype));
            chain.reduce(if mean { "ReduceMean" } else { "ReduceSum" }, &[1], true);
            if mean {
                factor = 1.0;
            }
        }
    }
    if !window.single() {
        chain.step("AveragePool", "window", 0, Vec::new(), window.attributes());
    }
    chain.scale(dtype, factor)?;
    if let Some(b) = bias {
        let shape: Vec<usize> = std::iter::once(m as usize).chain(std::iter::repeat_n(1, rank - 2)).collect();
        let (term, scalar) = addend(model, a, &mut chain, b, 1.0, Some(shape))?;
        chain.step("Add", "biased", 0, vec![term], Vec::new());
        if !scalar {
            reached[1] = DimReport::Known(m);
        }
    }
    chain.expand(expand_target(&reached, &out_shape)?.as_deref());
    let mut rewrite = chain.finish(model, a, nid, out)?;
    let what = match (window.single(), depthwise) {
        (true, true) => "scale each channel".to_string(),
        (true, false) => format!("sum {} channels", text(channels)),
        (false, true) => format!("sum a {} window of each channel", window.text()),
        (false, false) => format!("sum a {} window over {} channels", window.text(), text(channels)),
    };
    rewrite.note = Some(Note::multiplies(model, a, w, u.value, &format!("{what} of {}", quoted(model, a, x))));
    Some(rewrite)
}

/// A Conv's window: kernel sizes, strides, explicit pads and dilations.
struct Window {
    kernel: Vec<u64>,
    strides: Vec<i64>,
    pads: Vec<i64>,
    dilations: Vec<i64>,
}

impl Window {
    /// The window of Conv node `n` with `kernel`; `None` for what AveragePool cannot repeat.
    fn of(n: &diamond_ir::Node, kernel: Vec<u64>, opset: i64) -> Option<Window> {
        let s = kernel.len();
        let auto_pad = match n.attribute("auto_pad").and_then(|at| at.value()) {
            Some(diamond_ir::AttrValue::String(p)) => String::from_utf8_lossy(p).into_owned(),
            _ => "NOTSET".to_string(),
        };
        let pads = match auto_pad.as_str() {
            "NOTSET" | "" => ints(n, "pads").unwrap_or_else(|| vec![0; 2 * s]),
            "VALID" => vec![0; 2 * s],
            _ => return None,
        };
        let strides = ints(n, "strides").unwrap_or_else(|| vec![1; s]);
        let dilations = ints(n, "dilations").unwrap_or_else(|| vec![1; s]);
        let positive = |v: &[i64]| v.iter().all(|&x| x >= 1);
        if pads.len() != 2 * s || strides.len() != s || dilations.len() != s {
            return None;
        }
        if pads.iter().any(|&p| p < 0) || !positive(&strides) || !positive(&dilations) {
            return None;
        }
        let window = Window { kernel, strides, pads, dilations };
        // AveragePool takes dilations from opset 19.
        if window.dilated() && opset < 19 {
            return None;
        }
        Some(window)
    }

    /// Whether a dilation spreads a kernel axis longer than 1.
    fn dilated(&self) -> bool {
        self.kernel.iter().zip(&self.dilations).any(|(&k, &d)| k > 1 && d != 1)
    }

    /// Whether the window is one element at stride 1 without padding: the Conv scales each position.
    fn single(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1) && self.strides.iter().all(|&s| s == 1) && self.pads.iter().all(|&p| p == 0)
    }

    /// How many elements it covers.
    fn size(&self) -> u64 {
        self.kernel.iter().product()
    }

    /// `3x3`.
    fn text(&self) -> String {
        self.kernel.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
    }

    /// The attributes of the AveragePool that sums it (as a mean over every position, pads included).
    fn attributes(&self) -> Vec<diamond_ir::Attribute> {
        let kernel: Vec<i64> = self.kernel.iter().map(|&k| k as i64).collect();
        let mut attributes = vec![
            ints_attr("kernel_shape", &kernel),
            ints_attr("strides", &self.strides),
            ints_attr("pads", &self.pads),
            int_attr("count_include_pad", 1),
        ];
        if self.dilated() {
            attributes.push(ints_attr("dilations", &self.dilations));
        }
        attributes
    }
}
