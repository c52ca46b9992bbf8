//! Charts as SVG written on the server: no script, no library to fetch, and
//! they work offline. Every text in them is escaped.

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 160.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 30.0;

pub struct Series<'a> {
    pub label: &'a str,
    /// a CSS class of the stylesheet, which gives the line its colour
    pub class: &'a str,
    /// (ms since the epoch, value); None leaves a gap
    pub points: Vec<(i64, Option<f64>)>,
}

/// Text for SVG (XML): the five characters that mean something escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn short(value: f64) -> String {
    if value >= 1000.0 { format!("{:.1}k", value / 1000.0) } else if value >= 10.0 { format!("{value:.0}") } else { format!("{value:.1}") }
}

/// A line chart of `series` over [from_ms, to_ms], titled `title`, the y
/// axis in `unit`.
pub fn line_chart(title: &str, unit: &str, from_ms: i64, to_ms: i64, series: &[Series]) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |ms: i64| LEFT + (ms - from_ms) as f64 / span * (WIDTH - LEFT - 8.0);
    let y = |v: f64| TOP + (1.0 - v / max) * (HEIGHT - TOP - BOTTOM);
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        escape(title)
    );
    svg += &format!("<text class=\"title\" x=\"{LEFT}\" y=\"12\">{}</text>", escape(title));
    svg += &format!(
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
        HEIGHT - BOTTOM,
        WIDTH - 8.0,
        HEIGHT - BOTTOM
    );
    svg += &format!("<line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{}\"/>", HEIGHT - BOTTOM);
    svg += &format!("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} {}</text>", LEFT - 4.0, TOP + 4.0, short(max), escape(unit));
    svg += &format!("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>", LEFT - 4.0, HEIGHT - BOTTOM);
    let time = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%H:%M").to_string()).unwrap_or_default();
    svg += &format!("<text class=\"tick\" x=\"{LEFT}\" y=\"{}\">{}</text>", HEIGHT - 4.0, time(from_ms));
    svg += &format!("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} UTC</text>", WIDTH - 8.0, HEIGHT - 4.0, time(to_ms));
    for (i, s) in series.iter().enumerate() {
        let mut path = String::new();
        let mut dots = String::new();
        let mut pen_down = false;
        for (i, &(ms, value)) in s.points.iter().enumerate() {
            match value {
                Some(v) => {
                    path += &format!("{}{:.1},{:.1} ", if pen_down { "L" } else { "M" }, x(ms), y(v));
                    // a value with no neighbour draws no line: a dot shows it
                    let next = s.points.get(i + 1).is_some_and(|p| p.1.is_some());
                    if !pen_down && !next {
                        dots += &format!("<circle class=\"dot {}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"/>", escape(s.class), x(ms), y(v));
                    }
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        // each series in a group that carries its figures (its highest
        // value and how many points it has), which the tests read
        let values: Vec<f64> = s.points.iter().filter_map(|p| p.1).collect();
        let most = values.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        svg += &format!(
            "<g class=\"series\" data-series=\"{}\" data-max=\"{}\" data-points=\"{}\">",
            escape(s.label),
            most.map(|m| format!("{m:.3}")).unwrap_or_default(),
            values.len()
        );
        if !path.is_empty() {
            svg += &format!("<path class=\"line {}\" d=\"{}\"/>", escape(s.class), path.trim_end());
        }
        svg += &dots;
        svg += "</g>";
        // the key, right-aligned on the second line
        let legend_x = WIDTH - 8.0 - (series.len() - i) as f64 * 80.0;
        svg += &format!(
            "<rect class=\"key {}\" x=\"{legend_x}\" y=\"16\" width=\"10\" height=\"10\"/><text class=\"tick\" x=\"{}\" y=\"25\">{}</text>",
            escape(s.class),
            legend_x + 14.0,
            escape(s.label)
        );
    }
    svg + "</svg>"
}

/// A job of a workflow's graph.
pub struct GraphNode<'a> {
    pub id: &'a str,
    pub queue: &'a str,
    pub status: &'a str,
    /// where it links to
    pub href: String,
}

const NODE_W: f64 = 150.0;
const NODE_H: f64 = 38.0;
const GAP_X: f64 = 20.0;
const GAP_Y: f64 = 36.0;
/// The most nodes side by side in a graph's line.
const GRAPH_COLUMNS: usize = 8;

/// A workflow as a layered graph: each job in the row of its depth (the
/// longest chain of parents above it among the nodes given), its parents'
/// edges drawn to it. `edges` are (child index, parent index). Each node is
/// a link, coloured by its status's class and naming it in text too.
pub fn graph(nodes: &[GraphNode], edges: &[(usize, usize)]) -> String {
    // depths: a parent is enqueued before its child, but a round per node at
    // most settles any order (a cycle, which raquel cannot make, stops there)
    let mut depth = vec![0usize; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for &(child, parent) in edges {
            if depth[child] < depth[parent] + 1 && depth[parent] + 1 < nodes.len() {
                depth[child] = depth[parent] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut layers: Vec<Vec<usize>> = Vec::new();
    for (i, &d) in depth.iter().enumerate() {
        if layers.len() <= d {
            layers.resize(d + 1, Vec::new());
        }
        layers[d].push(i);
    }
    // a layer wider than GRAPH_COLUMNS goes on over more lines, so that the
    // picture stays as wide as a page
    let mut place = vec![(0.0, 0.0); nodes.len()];
    let mut line = 0usize;
    for layer in &layers {
        for chunk in layer.chunks(GRAPH_COLUMNS) {
            for (column, &i) in chunk.iter().enumerate() {
                place[i] = (8.0 + column as f64 * (NODE_W + GAP_X), 8.0 + line as f64 * (NODE_H + GAP_Y));
            }
            line += 1;
        }
    }
    let widest = layers.iter().map(|l| l.len().min(GRAPH_COLUMNS)).max().unwrap_or(0).max(1);
    let width = 16.0 + widest as f64 * (NODE_W + GAP_X) - GAP_X;
    let height = 16.0 + line.max(1) as f64 * (NODE_H + GAP_Y) - GAP_Y;
    let mut svg = format!(
        "<svg class=\"graph\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"workflow graph\">"
    );
    for &(child, parent) in edges {
        let (px, py) = place[parent];
        let (cx, cy) = place[child];
        svg += &format!(
            "<line class=\"edge\" data-child=\"{}\" data-parent=\"{}\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>",
            escape(nodes[child].id),
            escape(nodes[parent].id),
            px + NODE_W / 2.0,
            py + NODE_H,
            cx + NODE_W / 2.0,
            cy
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let (x, y) = place[i];
        // the status as a class name: only its letters, so no value can
        // leave the attribute or name another class
        let class: String = n.status.chars().filter(|c| c.is_ascii_lowercase()).collect();
        let short: String = n.id.chars().take(8).collect();
        let queue: String = n.queue.chars().take(20).collect();
        svg += &format!(
            "<a class=\"node\" href=\"{}\" data-id=\"{}\" data-status=\"{}\" data-depth=\"{}\"><title>{} ({}, {})</title>\
             <rect class=\"status-{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"4\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} {}</text><text class=\"status\" x=\"{:.1}\" y=\"{:.1}\">{}</text></a>",
            escape(&n.href),
            escape(n.id),
            escape(n.status),
            depth[i],
            escape(n.id),
            escape(n.queue),
            escape(n.status),
            x + 6.0,
            y + 15.0,
            escape(&short),
            escape(&queue),
            x + 6.0,
            y + 31.0,
            escape(n.status)
        );
    }
    svg + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_gaps_lift_the_pen() {
        let svg = line_chart(
            "<q> & \"x\"",
            "ms",
            0,
            180_000,
            &[Series { label: "<b>", class: "a", points: vec![(0, Some(1.0)), (60_000, None), (120_000, Some(3.0)), (180_000, Some(2.0))] }],
        );
        assert!(svg.contains("&lt;q&gt; &amp; &quot;x&quot;"));
        assert!(svg.contains("&lt;b&gt;"));
        assert!(!svg.contains("<b>"));
        let d = svg.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(svg.matches("<circle").count(), 1, "the lone first value is a dot");
    }

    #[test]
    fn a_graph_puts_children_below_their_parents_and_escapes_its_text() {
        let node = |id: &'static str, status: &'static str| GraphNode { id, queue: "<q>", status, href: format!("/jobs/{id}") };
        let nodes = [node("a", "success"), node("b", "queued"), node("c", "blocked\"><script>")];
        // c waits for a and b; b for a
        let svg = graph(&nodes, &[(2, 0), (2, 1), (1, 0)]);
        assert!(svg.contains("data-id=\"a\" data-status=\"success\" data-depth=\"0\""), "{svg}");
        assert!(svg.contains("data-id=\"b\" data-status=\"queued\" data-depth=\"1\""), "{svg}");
        assert!(svg.contains("data-depth=\"2\""), "{svg}");
        assert_eq!(svg.matches("<line class=\"edge\"").count(), 3);
        assert!(!svg.contains("<script>") && !svg.contains("<q>"), "{svg}");
        assert!(svg.contains("class=\"status-blockedscript\""), "{svg}");
    }
}
