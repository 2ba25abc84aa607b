//! The replica timeline of one ScaledObject, written at exit as an SVG (hand-written, with
//! labels) and a PNG (drawn pixel by pixel and encoded with the `png` crate: no system fonts,
//! no C library).
//!
//! Both show, over the session's time: the target's replicas (step line, left axis), the first
//! trigger's metric value (right axis) and its thresholds: the target (per replica for
//! `AverageValue`) and the activation threshold; both name the chart, the axes and every series
//! in words (the PNG with a built-in 3 x 5 pixel font). A chart may hold several runs over the
//! same history (`keda-rs simulate --compare`): one replica line per run, and a run's target and
//! activation threshold where they differ from the first run's.

use std::io::Write;
use std::path::{Path, PathBuf};

/// One point of the timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since `dev` started.
    pub t: f64,
    /// The target's replicas.
    pub replicas: i32,
    /// The first trigger's value.
    pub value: Option<f64>,
    /// The first trigger's target.
    pub target: Option<f64>,
    /// The first trigger's activation threshold.
    pub activation: f64,
}

/// The most samples a chart draws per run (about two per pixel column): a longer timeline is
/// thinned by [`thin`].
pub const MAX_CHART_SAMPLES: usize = 2_400;

/// `samples` (in time order) thinned to at most [`MAX_CHART_SAMPLES`]: the timeline is cut
/// into equal buckets, and each keeps, in time order, its first sample and those with the
/// fewest and most replicas and the lowest and highest metric value, so no scale event's
/// extremes and no spike of the metric disappear from the picture.
pub fn thin(samples: &[Sample]) -> Vec<Sample> {
    if samples.len() <= MAX_CHART_SAMPLES {
        return samples.to_vec();
    }
    let buckets = MAX_CHART_SAMPLES / 5;
    let per = samples.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(MAX_CHART_SAMPLES);
    for bucket in samples.chunks(per) {
        let value = |s: &Sample| s.value.unwrap_or(0.0);
        let pick = |better: &dyn Fn(&Sample, &Sample) -> bool| {
            let mut best = 0;
            for (i, s) in bucket.iter().enumerate() {
                if better(s, &bucket[best]) {
                    best = i;
                }
            }
            best
        };
        let mut keep = [
            0,
            pick(&|a, b| a.replicas < b.replicas),
            pick(&|a, b| a.replicas > b.replicas),
            pick(&|a, b| value(a) < value(b)),
            pick(&|a, b| value(a) > value(b)),
        ];
        keep.sort_unstable();
        let mut last = None;
        for i in keep {
            if last != Some(i) {
                out.push(bucket[i]);
                last = Some(i);
            }
        }
    }
    if let (Some(end), Some(kept)) = (samples.last(), out.last())
        && end.t > kept.t
    {
        out.push(*end);
    }
    out
}

/// Why a chart could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: png::EncodingError,
    },
}

const WIDTH: u32 = 800;
const HEIGHT: u32 = 420;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 60.0;
const TOP: f64 = 44.0;
/// Below the plot: the time labels, then the legend rows.
const TICKS_HEIGHT: f64 = 36.0;
const LEGEND_ROW: f64 = 16.0;
/// Width of a legend entry beyond its text: the swatch, its gap and the space to the next.
const LEGEND_PAD: f64 = 40.0;
/// Width of one character in the PNG's font, which the legend's layout assumes for both
/// charts (the SVG's 11 px sans-serif is narrower).
const TEXT_ADVANCE: f64 = 8.0;

const REPLICAS_COLOR: [u8; 3] = [31, 119, 180];
const VALUE_COLOR: [u8; 3] = [255, 127, 14];
const TARGET_COLOR: [u8; 3] = [44, 160, 44];
const ACTIVATION_COLOR: [u8; 3] = [214, 39, 40];
/// The replicas, target and activation threshold of a second run.
const OTHER_REPLICAS_COLOR: [u8; 3] = [148, 103, 189];
const OTHER_TARGET_COLOR: [u8; 3] = [140, 86, 75];
const OTHER_ACTIVATION_COLOR: [u8; 3] = [227, 119, 194];
const AXIS_COLOR: [u8; 3] = [60, 60, 60];
const GRID_COLOR: [u8; 3] = [225, 225, 225];
const TEXT_COLOR: [u8; 3] = [0, 0, 0];

/// The axes' names, drawn above each axis.
pub const LEFT_AXIS_NAME: &str = "replicas";
pub const RIGHT_AXIS_NAME: &str = "metric value";
pub const TIME_AXIS_NAME: &str = "time since start (s)";

/// One timeline of a chart: `name` tells runs apart in the legend (empty for a chart of one).
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    pub name: &'a str,
    pub samples: &'a [Sample],
}

/// One line of a chart, in pixels, with its legend entry.
struct Line {
    name: String,
    points: Vec<(f64, f64)>,
    color: [u8; 3],
    dashed: bool,
}

/// The scales of one chart: data to pixels.
struct Frame {
    t_max: f64,
    replicas_max: f64,
    value_max: f64,
    /// The plot's bottom edge, above the time labels and the legend.
    bottom: f64,
}

impl Frame {
    fn of(runs: &[Run<'_>], legend_rows: usize) -> Frame {
        let all = || runs.iter().flat_map(|r| r.samples.iter());
        let t_max = all().map(|s| s.t).fold(1.0, f64::max);
        // A multiple of the 4 grid steps, so every replica tick is a whole number.
        let replicas_max =
            (all().map(|s| f64::from(s.replicas)).fold(1.0, f64::max) / 4.0).ceil() * 4.0;
        let value_max = all()
            .flat_map(|s| {
                [
                    s.value.unwrap_or(0.0),
                    s.target.unwrap_or(0.0),
                    s.activation,
                ]
            })
            .filter(|v| v.is_finite())
            .fold(1.0, f64::max)
            * 1.1;
        #[allow(clippy::cast_precision_loss, reason = "a handful of legend rows")]
        let legend = legend_rows as f64 * LEGEND_ROW;
        Frame {
            t_max,
            replicas_max,
            value_max,
            bottom: f64::from(HEIGHT) - TICKS_HEIGHT - legend - 6.0,
        }
    }

    fn plot_width() -> f64 {
        f64::from(WIDTH) - LEFT - RIGHT
    }

    fn plot_height(&self) -> f64 {
        self.bottom - TOP
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max * Self::plot_width()
    }

    fn y_replicas(&self, r: f64) -> f64 {
        TOP + self.plot_height() * (1.0 - r / self.replicas_max)
    }

    fn y_value(&self, v: f64) -> f64 {
        TOP + self.plot_height() * (1.0 - (v / self.value_max).clamp(0.0, 1.0))
    }
}

/// The lines of a chart in legend order (drawn in reverse, so replicas end on top): each run's
/// replicas, the first run's metric value, its target and activation threshold, and another
/// run's target or activation threshold where it differs from the first run's.
fn chart_lines(runs: &[Run<'_>], frame: &Frame) -> Vec<Line> {
    let several = runs.len() > 1;
    let named = |what: &str, run: &Run<'_>| {
        if several && !run.name.is_empty() {
            format!("{what}: {}", run.name)
        } else {
            what.to_string()
        }
    };
    let line = |samples: &[Sample], f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|v| (frame.x(s.t), frame.y_value(v))))
            .collect()
    };
    let mut out = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let mut points = Vec::new();
        for (j, s) in run.samples.iter().enumerate() {
            let y = frame.y_replicas(f64::from(s.replicas));
            if j > 0 {
                // A step: the count holds until the next sample.
                let prev = frame.y_replicas(f64::from(run.samples[j - 1].replicas));
                points.push((frame.x(s.t), prev));
            }
            points.push((frame.x(s.t), y));
        }
        out.push(Line {
            name: format!("{} (left axis)", named("replicas", run)),
            points,
            color: if i == 0 {
                REPLICAS_COLOR
            } else {
                OTHER_REPLICAS_COLOR
            },
            // Where two runs agree the second, dashed, still shows.
            dashed: i > 0,
        });
    }
    let Some(first) = runs.first() else {
        return out;
    };
    out.push(Line {
        name: format!("{} (right axis)", RIGHT_AXIS_NAME),
        points: line(first.samples, &|s| s.value),
        color: VALUE_COLOR,
        dashed: false,
    });
    let differs = |run: &Run<'_>, f: &dyn Fn(&Sample) -> Option<f64>| {
        run.samples.len() != first.samples.len()
            || run
                .samples
                .iter()
                .zip(first.samples)
                .any(|(a, b)| f(a) != f(b))
    };
    let target = |s: &Sample| s.target;
    let activation = |s: &Sample| Some(s.activation);
    let targets_differ = runs.iter().skip(1).any(|r| differs(r, &target));
    let activations_differ = runs.iter().skip(1).any(|r| differs(r, &activation));
    for (i, run) in runs.iter().enumerate() {
        if i == 0 || differs(run, &target) {
            out.push(Line {
                name: if targets_differ {
                    named("target", run)
                } else {
                    "target".to_string()
                },
                points: line(run.samples, &target),
                color: if i == 0 {
                    TARGET_COLOR
                } else {
                    OTHER_TARGET_COLOR
                },
                dashed: true,
            });
        }
    }
    for (i, run) in runs.iter().enumerate() {
        if i == 0 || differs(run, &activation) {
            out.push(Line {
                name: if activations_differ {
                    named("activation threshold", run)
                } else {
                    "activation threshold".to_string()
                },
                points: line(run.samples, &activation),
                color: if i == 0 {
                    ACTIVATION_COLOR
                } else {
                    OTHER_ACTIVATION_COLOR
                },
                dashed: true,
            });
        }
    }
    out
}

/// `points` without the points in the middle of a horizontal or vertical run (a flat target, a
/// replica count held for hours): the same picture in far fewer points.
fn simplify(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        if out.len() >= 2 {
            let (a, b) = (out[out.len() - 2], out[out.len() - 1]);
            #[allow(clippy::float_cmp, reason = "the same computed pixel, exactly")]
            let straight = (a.1 == b.1 && b.1 == p.1) || (a.0 == b.0 && b.0 == p.0);
            if straight {
                out.pop();
            }
        }
        out.push(p);
    }
    out
}

/// Where each legend entry goes (the swatch's left edge and the row's top), and the number of
/// rows: entries left to right, a new row when the next would pass the right edge; the rows
/// end 6 pixels above the bottom.
fn legend_layout(names: &[&str]) -> (Vec<(f64, f64)>, usize) {
    let mut cells = Vec::new();
    let (mut x, mut row) = (LEFT, 0u32);
    for name in names {
        #[allow(clippy::cast_precision_loss, reason = "a legend entry's length")]
        let width = (name.chars().count() as f64 * TEXT_ADVANCE + LEGEND_PAD).max(170.0);
        if x > LEFT && x + width - LEGEND_PAD / 2.0 > f64::from(WIDTH) {
            x = LEFT;
            row += 1;
        }
        cells.push((x, row));
        x += width;
    }
    let rows = if names.is_empty() { 0 } else { row + 1 };
    let top = f64::from(HEIGHT) - 6.0 - f64::from(rows) * LEGEND_ROW;
    let at = cells
        .into_iter()
        .map(|(x, row)| (x, top + f64::from(row) * LEGEND_ROW))
        .collect();
    (at, usize::try_from(rows).unwrap_or(0))
}

/// The legend and the frame of a chart of `runs`.
fn layout(runs: &[Run<'_>]) -> (Frame, Vec<Line>, Vec<(f64, f64)>) {
    // The legend's names do not depend on the frame: lay it out with a provisional one.
    let names: Vec<String> = chart_lines(runs, &Frame::of(runs, 0))
        .into_iter()
        .map(|l| l.name)
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (at, rows) = legend_layout(&refs);
    let frame = Frame::of(runs, rows);
    let lines = chart_lines(runs, &frame);
    (frame, lines, at)
}

fn rgb(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The chart of `runs` (over the same history) as SVG text.
pub fn svg(title: &str, runs: &[Run<'_>]) -> String {
    let (frame, mut lines, legend) = layout(runs);
    for line in &mut lines {
        line.points = simplify(std::mem::take(&mut line.points));
    }
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    );
    let bottom = frame.bottom;
    let right = LEFT + Frame::plot_width();
    out.push_str(&format!(
        "<text x=\"{LEFT}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{LEFT_AXIS_NAME}</text>\n<text x=\"{right}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{RIGHT_AXIS_NAME}</text>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{TIME_AXIS_NAME}</text>\n",
        TOP - 8.0,
        rgb(REPLICAS_COLOR),
        TOP - 8.0,
        rgb(VALUE_COLOR),
        LEFT + Frame::plot_width() / 2.0,
        bottom + 28.0,
    ));
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + frame.plot_height() * (1.0 - f);
        out.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" y2=\"{y:.1}\" stroke=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{}\">{}</text>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\">{}</text>\n",
            rgb(GRID_COLOR),
            LEFT - 6.0,
            y + 4.0,
            rgb(REPLICAS_COLOR),
            label(frame.replicas_max * f),
            right + 6.0,
            y + 4.0,
            rgb(VALUE_COLOR),
            label(frame.value_max * f),
        ));
        let x = LEFT + Frame::plot_width() * f;
        out.push_str(&format!(
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>\n",
            bottom + 14.0,
            label(frame.t_max * f)
        ));
    }
    out.push_str(&format!(
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n<line x1=\"{right}\" y1=\"{TOP}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n",
        axis = rgb(AXIS_COLOR)
    ));
    for line in lines.iter().rev() {
        if line.points.is_empty() {
            continue;
        }
        let path: Vec<String> = line
            .points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        out.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
            rgb(line.color),
            if line.dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            },
            path.join(" ")
        ));
    }
    for (line, (x, y)) in lines.iter().zip(&legend) {
        out.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            y + 4.0,
            rgb(line.color),
            x + 16.0,
            y + 9.0,
            escape(&line.name),
        ));
    }
    out.push_str("</svg>\n");
    out
}

/// An RGB canvas.
struct Canvas {
    pixels: Vec<u8>,
}

impl Canvas {
    fn new() -> Canvas {
        Canvas {
            pixels: vec![255; usize_of(WIDTH) * usize_of(HEIGHT) * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, color: [u8; 3]) {
        let (Ok(x), Ok(y)) = (u32::try_from(x), u32::try_from(y)) else {
            return;
        };
        if x >= WIDTH || y >= HEIGHT {
            return;
        }
        let at = (usize_of(y) * usize_of(WIDTH) + usize_of(x)) * 3;
        if let Some(px) = self.pixels.get_mut(at..at + 3) {
            px.copy_from_slice(&color);
        }
    }

    /// A line `width` pixels wide; dashed lines draw 6 pixels of every 10.
    fn line(&mut self, from: (f64, f64), to: (f64, f64), color: [u8; 3], width: i64, dashed: bool) {
        let (dx, dy) = (to.0 - from.0, to.1 - from.1);
        let steps = dx.abs().max(dy.abs()).ceil().max(1.0);
        let n = keda_api::num::f64_to_i64_saturating(steps);
        for i in 0..=n {
            if dashed && (i % 10) >= 6 {
                continue;
            }
            #[allow(clippy::cast_precision_loss, reason = "i <= a pixel count")]
            let f = i as f64 / steps;
            let x = keda_api::num::f64_to_i64_saturating((from.0 + dx * f).round());
            let y = keda_api::num::f64_to_i64_saturating((from.1 + dy * f).round());
            for ox in 0..width {
                for oy in 0..width {
                    self.set(x + ox - width / 2, y + oy - width / 2, color);
                }
            }
        }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
        for i in 0..w {
            for j in 0..h {
                self.set(x + i, y + j, color);
            }
        }
    }
}

/// A 3 x 5 pixel font for the PNG's words and numbers: printable ASCII, letters in one case
/// (no font file, no system font). Anything else is drawn as `?`.
fn glyph(c: char) -> [&'static str; 5] {
    match c.to_ascii_uppercase() {
        ' ' => ["...", "...", "...", "...", "..."],
        '0' => ["###", "#.#", "#.#", "#.#", "###"],
        '1' => [".#.", "##.", ".#.", ".#.", "###"],
        '2' => ["###", "..#", "###", "#..", "###"],
        '3' => ["###", "..#", "###", "..#", "###"],
        '4' => ["#.#", "#.#", "###", "..#", "..#"],
        '5' => ["###", "#..", "###", "..#", "###"],
        '6' => ["###", "#..", "###", "#.#", "###"],
        '7' => ["###", "..#", "..#", "..#", "..#"],
        '8' => ["###", "#.#", "###", "#.#", "###"],
        '9' => ["###", "#.#", "###", "..#", "###"],
        'A' => [".#.", "#.#", "###", "#.#", "#.#"],
        'B' => ["##.", "#.#", "##.", "#.#", "##."],
        'C' => [".##", "#..", "#..", "#..", ".##"],
        'D' => ["##.", "#.#", "#.#", "#.#", "##."],
        'E' => ["###", "#..", "##.", "#..", "###"],
        'F' => ["###", "#..", "##.", "#..", "#.."],
        'G' => [".##", "#..", "#.#", "#.#", ".##"],
        'H' => ["#.#", "#.#", "###", "#.#", "#.#"],
        'I' => ["###", ".#.", ".#.", ".#.", "###"],
        'J' => ["..#", "..#", "..#", "#.#", ".#."],
        'K' => ["#.#", "#.#", "##.", "#.#", "#.#"],
        'L' => ["#..", "#..", "#..", "#..", "###"],
        'M' => ["#.#", "###", "#.#", "#.#", "#.#"],
        'N' => ["##.", "#.#", "#.#", "#.#", "#.#"],
        'O' => [".#.", "#.#", "#.#", "#.#", ".#."],
        'P' => ["##.", "#.#", "##.", "#..", "#.."],
        'Q' => [".#.", "#.#", "#.#", "##.", ".##"],
        'R' => ["##.", "#.#", "##.", "#.#", "#.#"],
        'S' => [".##", "#..", ".#.", "..#", "##."],
        'T' => ["###", ".#.", ".#.", ".#.", ".#."],
        'U' => ["#.#", "#.#", "#.#", "#.#", "###"],
        'V' => ["#.#", "#.#", "#.#", "#.#", ".#."],
        'W' => ["#.#", "#.#", "#.#", "###", "#.#"],
        'X' => ["#.#", "#.#", ".#.", "#.#", "#.#"],
        'Y' => ["#.#", "#.#", ".#.", ".#.", ".#."],
        'Z' => ["###", "..#", ".#.", "#..", "###"],
        '.' => ["...", "...", "...", "...", ".#."],
        ',' => ["...", "...", "...", ".#.", "#.."],
        ':' => ["...", ".#.", "...", ".#.", "..."],
        ';' => ["...", ".#.", "...", ".#.", "#.."],
        '-' => ["...", "...", "###", "...", "..."],
        '_' => ["...", "...", "...", "...", "###"],
        '/' => ["..#", "..#", ".#.", "#..", "#.."],
        '\\' => ["#..", "#..", ".#.", "..#", "..#"],
        '(' => [".#.", "#..", "#..", "#..", ".#."],
        ')' => [".#.", "..#", "..#", "..#", ".#."],
        '[' => ["##.", "#..", "#..", "#..", "##."],
        ']' => [".##", "..#", "..#", "..#", ".##"],
        '{' => [".##", ".#.", "##.", ".#.", ".##"],
        '}' => ["##.", ".#.", ".##", ".#.", "##."],
        '%' => ["#.#", "..#", ".#.", "#..", "#.#"],
        '+' => ["...", ".#.", "###", ".#.", "..."],
        '=' => ["...", "###", "...", "###", "..."],
        '<' => ["..#", ".#.", "#..", ".#.", "..#"],
        '>' => ["#..", ".#.", "..#", ".#.", "#.."],
        '\'' => [".#.", ".#.", "...", "...", "..."],
        '"' => ["#.#", "#.#", "...", "...", "..."],
        '`' => ["#..", ".#.", "...", "...", "..."],
        '!' => [".#.", ".#.", ".#.", "...", ".#."],
        '*' => ["#.#", ".#.", "#.#", "...", "..."],
        '#' => ["#.#", "###", "#.#", "###", "#.#"],
        '&' => [".#.", "#.#", ".#.", "#.#", ".##"],
        '@' => [".#.", "#.#", "#.#", "#..", ".##"],
        '|' => [".#.", ".#.", ".#.", ".#.", ".#."],
        '^' => [".#.", "#.#", "...", "...", "..."],
        '~' => ["...", "##.", "..#", "...", "..."],
        '$' => [".##", "##.", ".#.", ".##", "##."],
        _ => ["##.", "..#", ".#.", "...", ".#."],
    }
}

/// Pixels per font pixel.
const TEXT_SCALE: i64 = 2;
/// Width of one character with its spacing, in pixels.
const CHAR_WIDTH: i64 = 4 * TEXT_SCALE;

impl Canvas {
    /// `text` with its top-left corner at (`x`, `y`).
    fn text(&mut self, x: i64, y: i64, text: &str, color: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let rows = glyph(c);
            let left = x + i64::try_from(i).unwrap_or(0) * CHAR_WIDTH;
            for (row, bits) in (0i64..).zip(rows) {
                for (col, bit) in (0i64..).zip(bits.chars()) {
                    if bit == '#' {
                        self.rect(
                            left + col * TEXT_SCALE,
                            y + row * TEXT_SCALE,
                            TEXT_SCALE,
                            TEXT_SCALE,
                            color,
                        );
                    }
                }
            }
        }
    }

    fn text_width(text: &str) -> i64 {
        i64::try_from(text.chars().count()).unwrap_or(0) * CHAR_WIDTH
    }
}

fn px(v: f64) -> i64 {
    keda_api::num::f64_to_i64_saturating(v.round())
}

fn usize_of(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The chart of `runs` as PNG bytes: the geometry and the words of [`svg`] (title, axis
/// names, tick labels, legend), drawn with a built-in pixel font.
///
/// # Errors
/// Encoding failures of the `png` crate.
pub fn png_bytes(title: &str, runs: &[Run<'_>]) -> Result<Vec<u8>, png::EncodingError> {
    let (frame, lines, legend) = layout(runs);
    let mut canvas = Canvas::new();
    let right = LEFT + Frame::plot_width();
    let bottom = frame.bottom;
    canvas.text(px(LEFT), 8, title, TEXT_COLOR);
    canvas.text(
        px(LEFT) - Canvas::text_width(LEFT_AXIS_NAME) / 2,
        px(TOP) - 16,
        LEFT_AXIS_NAME,
        REPLICAS_COLOR,
    );
    canvas.text(
        px(right) - Canvas::text_width(RIGHT_AXIS_NAME) / 2,
        px(TOP) - 16,
        RIGHT_AXIS_NAME,
        VALUE_COLOR,
    );
    canvas.text(
        px(LEFT + Frame::plot_width() / 2.0) - Canvas::text_width(TIME_AXIS_NAME) / 2,
        px(bottom) + 20,
        TIME_AXIS_NAME,
        AXIS_COLOR,
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + frame.plot_height() * (1.0 - f);
        canvas.line((LEFT, y), (right, y), GRID_COLOR, 1, false);
        // The labels of the SVG: replicas left, metric right, seconds below.
        let left_label = label(frame.replicas_max * f);
        canvas.text(
            px(LEFT) - 6 - Canvas::text_width(&left_label),
            px(y) - 5,
            &left_label,
            REPLICAS_COLOR,
        );
        canvas.text(
            px(right) + 6,
            px(y) - 5,
            &label(frame.value_max * f),
            VALUE_COLOR,
        );
        let seconds = format!("{}s", label(frame.t_max * f));
        let x = LEFT + Frame::plot_width() * f;
        canvas.text(
            px(x) - Canvas::text_width(&seconds) / 2,
            px(bottom) + 6,
            &seconds,
            AXIS_COLOR,
        );
    }
    canvas.line((LEFT, bottom), (right, bottom), AXIS_COLOR, 1, false);
    canvas.line((LEFT, TOP), (LEFT, bottom), AXIS_COLOR, 1, false);
    canvas.line((right, TOP), (right, bottom), AXIS_COLOR, 1, false);
    for line in lines.iter().rev() {
        for pair in line.points.windows(2) {
            canvas.line(pair[0], pair[1], line.color, 2, line.dashed);
        }
    }
    for (line, (x, y)) in lines.iter().zip(&legend) {
        canvas.rect(px(*x), px(*y) + 3, 12, 4, line.color);
        canvas.text(px(*x) + 16, px(*y), &line.name, TEXT_COLOR);
    }
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, WIDTH, HEIGHT);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&canvas.pixels)?;
        writer.finish()?;
    }
    Ok(bytes)
}

/// Writes `<dir>/<stem>.svg` and `.png` with `title`; returns both paths.
///
/// # Errors
/// A file that cannot be written or encoded.
pub fn write_chart_files(
    dir: &Path,
    stem: &str,
    title: &str,
    runs: &[Run<'_>],
) -> Result<(PathBuf, PathBuf), ChartError> {
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    let thinned: Vec<Vec<Sample>> = runs.iter().map(|r| thin(r.samples)).collect();
    let runs: Vec<Run<'_>> = runs
        .iter()
        .zip(&thinned)
        .map(|(r, samples)| Run {
            name: r.name,
            samples,
        })
        .collect();
    let runs = &runs[..];
    std::fs::write(&svg_path, svg(title, runs)).map_err(|source| ChartError::Write {
        path: svg_path.clone(),
        source,
    })?;
    let bytes = png_bytes(title, runs).map_err(|source| ChartError::Encode {
        path: png_path.clone(),
        source,
    })?;
    std::fs::File::create(&png_path)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|source| ChartError::Write {
            path: png_path.clone(),
            source,
        })?;
    Ok((svg_path, png_path))
}

/// Writes `<dir>/<namespace>-<name>.svg` and `.png` for one timeline; returns both paths.
///
/// # Errors
/// A file that cannot be written or encoded.
pub fn write_charts(
    dir: &Path,
    namespace: &str,
    name: &str,
    samples: &[Sample],
) -> Result<(PathBuf, PathBuf), ChartError> {
    write_chart_files(
        dir,
        &format!("{namespace}-{name}"),
        &format!("ScaledObject {namespace}/{name}: replicas and metric over time"),
        &[Run { name: "", samples }],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Sample> {
        (0..20)
            .map(|i| Sample {
                t: f64::from(i),
                replicas: if i < 5 { 0 } else { i / 3 },
                value: Some(f64::from(i * 2)),
                target: Some(5.0),
                activation: 1.0,
            })
            .collect()
    }

    fn one(samples: &[Sample]) -> [Run<'_>; 1] {
        [Run { name: "", samples }]
    }

    /// The PNG's pixels, row by row, RGB.
    fn decode(bytes: Vec<u8>) -> Vec<u8> {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .expect("decodes");
        assert_eq!((reader.info().width, reader.info().height), (WIDTH, HEIGHT));
        let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
        reader.next_frame(&mut pixels).expect("the image decodes");
        pixels
    }

    /// The pixels of the rectangle `(x, y, w, h)` that have `color`.
    fn count(pixels: &[u8], (x, y, w, h): (i64, i64, i64, i64), color: [u8; 3]) -> usize {
        let mut n = 0;
        for j in y..y + h {
            for i in x..x + w {
                let at = usize::try_from((j * i64::from(WIDTH) + i) * 3).expect("inside");
                if pixels[at..at + 3] == color {
                    n += 1;
                }
            }
        }
        n
    }

    #[test]
    fn the_svg_is_well_formed_xml_with_four_series_named_in_the_legend() {
        let text = svg("ScaledObject a/<b>", &one(&samples()));
        let doc = roxmltree::Document::parse(&text).expect("well-formed");
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert_eq!(lines, 4);
        assert!(text.contains("a/&lt;b&gt;"));
        for name in [
            "replicas (left axis)",
            "metric value (right axis)",
            ">target<",
            "activation threshold",
            TIME_AXIS_NAME,
        ] {
            assert!(text.contains(name), "{name} in {text}");
        }
    }

    #[test]
    fn the_png_writes_the_legend_words_beside_each_swatch() {
        let samples = samples();
        let runs = one(&samples);
        let pixels = decode(png_bytes("title", &runs).expect("encodes"));
        let (_, lines, legend) = layout(&runs);
        assert_eq!(lines.len(), 4);
        for (line, (x, y)) in lines.iter().zip(&legend) {
            // The swatch, and the entry's words in text colour to its right, as many pixels as
            // the font draws for them.
            assert_eq!(count(&pixels, (px(*x), px(*y) + 3, 12, 4), line.color), 48);
            let width = Canvas::text_width(&line.name);
            let mut words = Canvas::new();
            words.text(0, 0, &line.name, TEXT_COLOR);
            let expected = count(&words.pixels, (0, 0, width, 10), TEXT_COLOR);
            assert!(expected > 100, "{}: {expected}", line.name);
            assert_eq!(
                count(&pixels, (px(*x) + 16, px(*y), width, 10), TEXT_COLOR),
                expected,
                "{}",
                line.name
            );
        }
    }

    #[test]
    fn different_words_draw_different_pixels() {
        let samples = samples();
        let a = decode(png_bytes("ScaledObject a/x", &one(&samples)).expect("encodes"));
        let b = decode(png_bytes("ScaledObject b/x", &one(&samples)).expect("encodes"));
        assert_ne!(a, b);
        // Every glyph of the font is its own picture, so words do not collide.
        let printable: Vec<char> = (' '..='~').filter(|c| !c.is_ascii_lowercase()).collect();
        for (i, c) in printable.iter().enumerate() {
            for d in &printable[i + 1..] {
                assert_ne!(glyph(*c), glyph(*d), "{c:?} and {d:?}");
            }
        }
        assert_eq!(glyph('a'), glyph('A'));
    }

    #[test]
    fn a_compared_run_gets_its_own_line_and_legend_entry() {
        let first = samples();
        let mut second = samples();
        for s in &mut second {
            s.replicas += 1;
            s.target = Some(8.0);
        }
        let runs = [
            Run {
                name: "before",
                samples: &first,
            },
            Run {
                name: "after",
                samples: &second,
            },
        ];
        let text = svg("t", &runs);
        let doc = roxmltree::Document::parse(&text).expect("well-formed");
        // Two replica lines, the value, two targets, one activation (the same in both).
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert_eq!(lines, 6);
        for name in [
            "replicas: before (left axis)",
            "replicas: after (left axis)",
            "target: before",
            "target: after",
            ">activation threshold<",
        ] {
            assert!(text.contains(name), "{name}");
        }
        let pixels = decode(png_bytes("t", &runs).expect("encodes"));
        assert!(count(&pixels, (0, 0, 800, 420), OTHER_REPLICAS_COLOR) > 100);
    }

    #[test]
    fn a_long_timeline_is_thinned_keeping_every_bucket_extreme() {
        // A year of 15 s syncs, one spike of 9 replicas and one of the metric.
        let mut long: Vec<Sample> = (0..2_102_400)
            .map(|i| Sample {
                t: f64::from(i) * 15.0,
                replicas: 1,
                value: Some(3.0),
                target: Some(5.0),
                activation: 1.0,
            })
            .collect();
        long[1_000_001].replicas = 9;
        long[2_000_003].value = Some(77.0);
        let thinned = thin(&long);
        assert!(thinned.len() <= MAX_CHART_SAMPLES, "{}", thinned.len());
        assert!(thinned.windows(2).all(|w| w[0].t < w[1].t));
        assert!(thinned.iter().any(|s| s.replicas == 9));
        assert!(thinned.iter().any(|s| s.value == Some(77.0)));
        assert_eq!(thinned.last().map(|s| s.t), long.last().map(|s| s.t));
        assert_eq!(thin(&samples()), samples());
    }

    #[test]
    fn runs_of_equal_x_or_y_keep_their_ends_only() {
        let points = vec![
            (0.0, 5.0),
            (1.0, 5.0),
            (2.0, 5.0),
            (2.0, 3.0),
            (2.0, 1.0),
            (3.0, 2.0),
        ];
        assert_eq!(
            simplify(points),
            vec![(0.0, 5.0), (2.0, 5.0), (2.0, 1.0), (3.0, 2.0)]
        );
    }

    #[test]
    fn an_empty_timeline_still_draws() {
        assert!(svg("x", &one(&[])).contains("</svg>"));
        assert!(png_bytes("x", &one(&[])).is_ok());
        assert!(png_bytes("x", &[]).is_ok());
    }
}
