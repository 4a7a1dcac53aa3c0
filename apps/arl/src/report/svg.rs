//! Figures as inline SVG, written by hand: line charts over steps and interval charts. No
//! plotting crate, no fonts to ship: the browser draws the text.

use std::fmt::Write;

/// Series colours (Tableau 10), run `i` takes `PALETTE[i % 10]`.
pub const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

const W: f64 = 450.0;
const H: f64 = 240.0;
const LEFT: f64 = 74.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// One line: `(x, y)` points; a missing or non-finite y breaks the line.
pub struct Series {
    pub label: String,
    pub color: String,
    pub points: Vec<(f64, Option<f64>)>,
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
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

/// About five round tick values covering `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    (0..)
        .map(|i| first + i as f64 * step)
        .take_while(|t| *t <= hi + step * 1e-9)
        .map(|t| if t.abs() < step * 1e-9 { 0.0 } else { t })
        .collect()
}

/// Tick labels for `ticks`: as many decimals as the tick step needs, the same for every tick.
pub fn fmt_ticks(t: &[f64]) -> Vec<String> {
    let step = t.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    let biggest = t.iter().fold(0f64, |m, v| m.max(v.abs()));
    if !step.is_finite() || step <= 0.0 {
        return t.iter().map(|&v| fmt_num(v)).collect();
    }
    if !(1e-3..1e5).contains(&biggest) {
        // Scientific, with the digits that tell neighbouring ticks apart.
        let p = (((biggest.log10() + 1e-9).floor() - (step.log10() + 1e-9).floor()) as i64).clamp(1, 6) as usize;
        return t.iter().map(|v| if *v == 0.0 { "0".into() } else { format!("{v:.p$e}") }).collect();
    }
    let exp = (step.log10() + 1e-9).floor();
    let decimals = (-exp as i64 + i64::from((step / 10f64.powf(exp) - 2.5).abs() < 1e-6)).max(0) as usize;
    t.iter().map(|v| format!("{v:.decimals$}")).collect()
}

/// A number label: short, without float noise.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !(1e-3..1e5).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A line chart of several series over the step axis, with a legend when there is more than one.
pub fn line_chart(title: &str, series: &[Series]) -> String {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.1.filter(|y| y.is_finite())));
    let (xlo, xhi) = bounds(xs);
    let (mut ylo, mut yhi) = bounds(ys);
    if ylo == yhi {
        let pad = if ylo == 0.0 { 1.0 } else { ylo.abs() * 0.1 };
        (ylo, yhi) = (ylo - pad, yhi + pad);
    }
    let (xlo, xhi) = if xlo == xhi { (xlo - 1.0, xhi + 1.0) } else { (xlo, xhi) };
    let sx = |x: f64| LEFT + (x - xlo) / (xhi - xlo) * (W - LEFT - RIGHT);
    let sy = |y: f64| H - BOTTOM - (y - ylo) / (yhi - ylo) * (H - TOP - BOTTOM);
    let legend_h = if series.len() > 1 { 14.0 * series.len() as f64 + 4.0 } else { 0.0 };
    let height = H + legend_h;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="fig" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img">"#
    );
    let _ = write!(s, r#"<title>{}</title><rect width="{W}" height="{height}" fill="white"/>"#, escape(title));
    let _ = write!(s, r#"<text x="{LEFT}" y="16" font-size="13" font-weight="600">{}</text>"#, escape(title));
    axes(&mut s, &ticks(xlo, xhi), &ticks(ylo, yhi), &sx, &sy, "step");
    for ser in series {
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for &(x, y) in &ser.points {
            match y.filter(|y| y.is_finite()) {
                Some(y) => runs.last_mut().expect("one run").push((sx(x), sy(y))),
                None if !runs.last().expect("one run").is_empty() => runs.push(Vec::new()),
                None => {}
            }
        }
        for run in runs.iter().filter(|r| !r.is_empty()) {
            if run.len() == 1 {
                let _ = write!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#, run[0].0, run[0].1, ser.color);
                continue;
            }
            let pts: Vec<String> = run.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(s, r#"<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}"/>"#, ser.color, pts.join(" "));
        }
    }
    if series.len() > 1 {
        legend(&mut s, series.iter().map(|x| (x.label.as_str(), x.color.as_str())));
    }
    s.push_str("</svg>");
    s
}

/// One row of an interval chart: a point with its interval, in a colour.
pub struct Interval {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    pub color: String,
}

/// A horizontal interval chart: one labelled row per item, each with one or more intervals
/// (e.g. before and after), on a shared axis `[xlo, xhi]`; `legend` names the colours.
pub fn interval_chart(title: &str, rows: &[(String, Vec<Interval>)], xlo: f64, xhi: f64, legend_items: &[(&str, &str)]) -> String {
    let row_h = 16.0;
    let label_w = 170.0;
    let width = 560.0;
    let height = TOP + 18.0 + rows.len() as f64 * row_h + BOTTOM;
    let sx = |x: f64| label_w + (x - xlo) / (xhi - xlo) * (width - label_w - RIGHT);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="fig" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">"#
    );
    let _ = write!(s, r#"<title>{}</title><rect width="{width}" height="{height}" fill="white"/>"#, escape(title));
    let _ = write!(s, r#"<text x="8" y="16" font-size="13" font-weight="600">{}</text>"#, escape(title));
    let axis_y = TOP + 18.0 + rows.len() as f64 * row_h;
    let xt = ticks(xlo, xhi);
    for (&t, label) in xt.iter().zip(fmt_ticks(&xt)) {
        let x = sx(t);
        let _ = write!(s, r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{axis_y}" stroke="#e5e5e5"/>"##, TOP + 10.0);
        let _ = write!(s, r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{label}</text>"#, axis_y + 14.0);
    }
    if xlo < 0.0 && xhi > 0.0 {
        let x = sx(0.0);
        let _ = write!(s, r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{axis_y}" stroke="#888"/>"##, TOP + 10.0);
    }
    for (i, (label, ivs)) in rows.iter().enumerate() {
        let y0 = TOP + 18.0 + i as f64 * row_h;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y0 + row_h * 0.7,
            escape(&short(label, 26))
        );
        let n = ivs.len().max(1) as f64;
        for (k, iv) in ivs.iter().enumerate() {
            let y = y0 + row_h * (k as f64 + 1.0) / (n + 1.0);
            let _ = write!(
                s,
                r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}" stroke-width="1.5"/><circle cx="{:.1}" cy="{y:.1}" r="3" fill="{c}"/>"#,
                sx(iv.lo.clamp(xlo, xhi)),
                sx(iv.hi.clamp(xlo, xhi)),
                sx(iv.value.clamp(xlo, xhi)),
                c = iv.color
            );
        }
    }
    if !legend_items.is_empty() {
        let mut x = label_w;
        for (name, color) in legend_items {
            let _ = write!(s, r#"<circle cx="{x:.1}" cy="{:.1}" r="4" fill="{color}"/>"#, TOP + 2.0);
            let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#, x + 8.0, TOP + 6.0, escape(name));
            x += 16.0 + 7.0 * name.chars().count() as f64;
        }
    }
    s.push_str("</svg>");
    s
}

/// At most `n` characters, an ellipsis marking a cut.
pub fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
}

fn axes(s: &mut String, xt: &[f64], yt: &[f64], sx: &dyn Fn(f64) -> f64, sy: &dyn Fn(f64) -> f64, xlabel: &str) {
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    for (&t, label) in yt.iter().zip(fmt_ticks(yt)) {
        let y = sy(t);
        let _ = write!(s, r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e5e5e5"/>"##);
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"#, x0 - 5.0, y + 4.0);
    }
    for (&t, label) in xt.iter().zip(fmt_ticks(xt)) {
        let x = sx(t);
        let _ = write!(s, r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{label}</text>"#, y0 + 14.0);
    }
    let _ = write!(s, r##"<polyline fill="none" stroke="#444" points="{x0},{y1} {x0},{y0} {x1},{y0}"/>"##);
    let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{xlabel}</text>"#, (x0 + x1) / 2.0, H - 6.0);
}

fn legend<'a>(s: &mut String, items: impl Iterator<Item = (&'a str, &'a str)>) {
    for (i, (label, color)) in items.enumerate() {
        let y = H + 4.0 + i as f64 * 14.0;
        let _ = write!(
            s,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="3"/>"#,
            LEFT + 8.0,
            LEFT + 22.0
        );
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#, LEFT + 26.0, y + 3.5, escape(&short(label, 64)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(1.0, 30.0), vec![10.0, 20.0, 30.0]);
        let t = ticks(-0.013, 0.021);
        assert!(t.first().unwrap() >= &-0.013 && t.last().unwrap() <= &0.021 && t.len() >= 3, "{t:?}");
        assert_eq!(fmt_num(0.6000000000000001), "0.6");
        assert_eq!(fmt_num(2.5e-6), "2.5e-6");
        assert_eq!(fmt_ticks(&ticks(11.9179, 11.9183)), ["11.9179", "11.9180", "11.9181", "11.9182", "11.9183"]);
        assert_eq!(fmt_ticks(&ticks(0.0, 1.0)), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        assert_eq!(fmt_ticks(&[0.0, 2.5, 5.0]), ["0.0", "2.5", "5.0"]);
        assert_eq!(fmt_ticks(&ticks(1.0, 30.0)), ["10", "20", "30"]);
        assert_eq!(fmt_ticks(&[4.40e-6, 4.45e-6, 4.50e-6]), ["4.40e-6", "4.45e-6", "4.50e-6"]);
    }

    #[test]
    fn a_gap_breaks_the_line_and_every_point_is_drawn() {
        let ser = Series {
            label: "a".into(),
            color: "#000".into(),
            points: vec![(1.0, Some(1.0)), (2.0, Some(2.0)), (3.0, None), (4.0, Some(f64::NAN)), (5.0, Some(3.0))],
        };
        let svg = line_chart("t <x>", &[ser]);
        assert_eq!(svg.matches("<polyline fill=\"none\" stroke=\"#000\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 1, "the lone last point");
        assert!(svg.contains("t &lt;x&gt;"));
    }
}
