//! Drawing a [`Scene`] as a static inline SVG: operator boxes (op type over node name), value labels (name over
//! inferred type and shape) on the edges between them, the diagnostic's node in red, the clashing operand's edge in
//! red and its axis's dim in bold red. Sizes come from the label lengths in a monospace font, positions from
//! [`layout`](super::layout); every string is escaped and every presentation attribute is inline, so a picture reads
//! the same cut out of the page.

use super::escape;
use super::layout::{layout, Rect};
use super::neighbourhood::{Item, Role, Scene};
use std::fmt::Write;

/// Width of one character at 12px in a monospace font (0.6 em), with a little slack.
const CHAR: f64 = 7.4;
/// Width of one bold character at 13px.
const BOLD_CHAR: f64 = 8.2;
/// Horizontal padding inside a box.
const PAD: f64 = 10.0;
/// Names longer than this are shortened in the middle (the full name is the tooltip).
const MAX_LABEL: usize = 44;
/// Red, for what the diagnostic is about.
const RED: &str = "#c62828";
const FONT: &str = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace";

/// The SVG picture of `scene`; `id` makes its marker ids unique in the page; `title` is its accessible name.
pub fn draw(scene: &Scene, id: &str, title: &str) -> String {
    let labels: Vec<Label> = scene.items.iter().map(Label::of).collect();
    let sizes: Vec<(f64, f64)> = labels.iter().map(Label::size).collect();
    let geometry = layout(&sizes, &scene.edges);
    let mut svg = String::new();
    let (w, h) = (geometry.width.ceil(), geometry.height.ceil());
    let _ = write!(
        svg,
        r#"<svg class="neighbourhood" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" font-family="{FONT}" font-size="12"><title>{}</title>"#,
        escape(title)
    );
    let _ = write!(
        svg,
        r##"<defs><marker id="arrow-{id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#777"/></marker><marker id="arrow-hl-{id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{RED}"/></marker></defs>"##
    );
    for (e, route) in geometry.routes.iter().enumerate() {
        if route.len() < 2 {
            continue;
        }
        let hl = scene.highlighted.contains(&e);
        let (stroke, width, marker) = if hl { (RED, 2.5, "arrow-hl-") } else { ("#777", 1.2, "arrow-") };
        let _ = write!(
            svg,
            r#"<path class="{}" d="{}" fill="none" stroke="{stroke}" stroke-width="{width}" marker-end="url(#{marker}{id})"/>"#,
            if hl { "edge operand" } else { "edge" },
            path(route)
        );
    }
    for (label, rect) in labels.iter().zip(&geometry.boxes) {
        label.draw(&mut svg, rect);
    }
    svg.push_str("</svg>");
    svg
}

/// A smooth path through the route's points: vertical tangents at each point.
fn path(points: &[(f64, f64)]) -> String {
    let mut d = format!("M{:.1},{:.1}", points[0].0, points[0].1);
    for pair in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        let my = (y0 + y1) / 2.0;
        let _ = write!(d, " C{x0:.1},{my:.1} {x1:.1},{my:.1} {x1:.1},{y1:.1}");
    }
    d
}

/// `name` shortened in the middle to at most [`MAX_LABEL`] characters.
fn clip(name: &str) -> String {
    let count = name.chars().count();
    if count <= MAX_LABEL {
        return name.to_string();
    }
    let keep = (MAX_LABEL - 1) / 2;
    let head: String = name.chars().take(keep).collect();
    let tail: String = name.chars().skip(count - keep).collect();
    format!("{head}…{tail}")
}

/// What one item shows.
struct Label<'s> {
    item: &'s Item,
    /// First line (bold for operators).
    top: String,
    /// Second line.
    bottom: String,
}

impl<'s> Label<'s> {
    fn of(item: &'s Item) -> Label<'s> {
        match item {
            Item::Op { op, name, .. } => Label { item, top: clip(op), bottom: clip(name) },
            Item::Value { name, dtype, dims, .. } => Label { item, top: clip(name), bottom: shape_text(dtype, dims) },
        }
    }

    fn size(&self) -> (f64, f64) {
        let width = |s: &str, c: f64| s.chars().count() as f64 * c;
        match self.item {
            Item::Op { .. } => (width(&self.top, BOLD_CHAR).max(width(&self.bottom, CHAR)) + 2.0 * PAD, 40.0),
            Item::Value { .. } => (width(&self.top, CHAR).max(width(&self.bottom, CHAR)) + 2.0 * PAD, 34.0),
        }
    }

    fn draw(&self, svg: &mut String, r: &Rect) {
        let (x, y, w, h, cx) = (r.x, r.y, r.w, r.h, r.cx());
        match self.item {
            Item::Op { op, name, focus } => {
                let (fill, stroke, width) = if *focus { ("#fdecea", RED, 2.5) } else { ("#eef3fb", "#5b7db8", 1.2) };
                let _ = write!(
                    svg,
                    r##"<g class="{}"><title>{} '{}'</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" rx="4" fill="{fill}" stroke="{stroke}" stroke-width="{width}"/><text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-weight="bold" font-size="13">{}</text><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text></g>"##,
                    if *focus { "op focus" } else { "op" },
                    escape(op),
                    escape(name),
                    y + 16.0,
                    escape(&self.top),
                    y + 32.0,
                    escape(&self.bottom),
                );
            }
            Item::Value { name, dtype, dims, role, operand, axis } => {
                let (fill, stroke, dash) = match role {
                    Role::Inner => ("#ffffff", "none", ""),
                    Role::Input => ("#e8f5e9", "#388e3c", ""),
                    Role::Output => ("#fff8e1", "#b28704", ""),
                    Role::Initializer => ("#f5f5f5", "#9e9e9e", r#" stroke-dasharray="3,2""#),
                    Role::Outside => ("#ffffff", "#9e9e9e", r#" stroke-dasharray="3,2""#),
                };
                let stroke = if *operand { RED } else { stroke };
                let role_name = match role {
                    Role::Inner => "value",
                    Role::Input => "graph input",
                    Role::Output => "graph output",
                    Role::Initializer => "initializer",
                    Role::Outside => "produced outside the picture",
                };
                let _ = write!(
                    svg,
                    r##"<g class="{}"><title>{} ({role_name}): {}</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" rx="{:.1}" fill="{fill}" fill-opacity="0.92" stroke="{stroke}"{dash}/><text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#555">"##,
                    if *operand { "value operand" } else { "value" },
                    escape(name),
                    escape(&shape_text(dtype, dims)),
                    if *role == Role::Inner { 3.0 } else { h / 2.0 },
                    y + 14.0,
                    escape(&self.top),
                    y + 28.0,
                );
                write_shape(svg, dtype, dims.as_deref(), *axis);
                svg.push_str("</text></g>");
            }
        }
    }
}

/// `float [3, 4]`, `? ?` when nothing is known.
fn shape_text(dtype: &str, dims: &Option<Vec<String>>) -> String {
    match dims {
        Some(d) => format!("{dtype} [{}]", d.join(", ")),
        None => format!("{dtype} ?"),
    }
}

/// The shape line's content, the dim at `axis` in bold red.
fn write_shape(svg: &mut String, dtype: &str, dims: Option<&[String]>, axis: Option<usize>) {
    let Some(dims) = dims else {
        let _ = write!(svg, "{} ?", escape(dtype));
        return;
    };
    let _ = write!(svg, "{} [", escape(dtype));
    for (i, d) in dims.iter().enumerate() {
        if i > 0 {
            svg.push_str(", ");
        }
        if Some(i) == axis {
            let _ = write!(svg, r#"<tspan class="axis" font-weight="bold" fill="{RED}">{}</tspan>"#, escape(d));
        } else {
            svg.push_str(&escape(d));
        }
    }
    svg.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, operand: bool, axis: Option<usize>) -> Item {
        Item::Value {
            name: name.into(),
            dtype: "float".into(),
            dims: Some(vec!["3".into(), "4".into()]),
            role: Role::Inner,
            operand,
            axis,
        }
    }

    #[test]
    fn the_operand_axis_is_bold_red_and_names_are_escaped() {
        let scene = Scene {
            items: vec![
                Item::Op { op: "Add".into(), name: "<add&1>".into(), focus: true },
                value("y\"", true, Some(1)),
                value("z", false, None),
            ],
            edges: vec![(1, 0), (0, 2)],
            highlighted: vec![0],
            omitted: 0,
        };
        let svg = draw(&scene, "d0", "around 'add'");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r##"<tspan class="axis" font-weight="bold" fill="#c62828">4</tspan>"##), "{svg}");
        assert!(svg.contains("&lt;add&amp;1&gt;") && !svg.contains("<add&1>"));
        assert!(svg.contains("y&quot;"));
        assert_eq!(svg.matches("class=\"edge operand\"").count(), 1);
        assert_eq!(svg.matches("<path class=\"edge").count(), 2);
    }

    #[test]
    fn long_names_are_shortened_in_the_middle() {
        let long = "a".repeat(30) + &"b".repeat(30);
        let short = clip(&long);
        assert!(short.chars().count() <= MAX_LABEL);
        assert!(short.starts_with("aaa") && short.ends_with("bbb") && short.contains('…'));
    }
}
