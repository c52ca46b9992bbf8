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
        if !path.is_empty() {
            svg += &format!("<path class=\"line {}\" d=\"{}\"/>", escape(s.class), path.trim_end());
        }
        svg += &dots;
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
}
