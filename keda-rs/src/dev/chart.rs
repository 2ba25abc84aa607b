//! The replica timeline of one ScaledObject, written at exit as an SVG (hand-written, with
//! labels) and a PNG (drawn pixel by pixel and encoded with the `png` crate: no system fonts,
//! no C library).
//!
//! Both show, over the session's time: the target's replicas (step line, left axis), the first
//! trigger's metric value (right axis) and its thresholds: the target (per replica for
//! `AverageValue`) and the activation threshold.

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
const HEIGHT: u32 = 400;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 60.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

const REPLICAS_COLOR: [u8; 3] = [31, 119, 180];
const VALUE_COLOR: [u8; 3] = [255, 127, 14];
const TARGET_COLOR: [u8; 3] = [44, 160, 44];
const ACTIVATION_COLOR: [u8; 3] = [214, 39, 40];
const AXIS_COLOR: [u8; 3] = [60, 60, 60];
const GRID_COLOR: [u8; 3] = [225, 225, 225];

/// The scales of one chart: data to pixels.
struct Frame {
    t_max: f64,
    replicas_max: f64,
    value_max: f64,
}

impl Frame {
    fn of(samples: &[Sample]) -> Frame {
        let t_max = samples.iter().map(|s| s.t).fold(1.0, f64::max);
        // A multiple of the 4 grid steps, so every replica tick is a whole number.
        let replicas_max = (samples
            .iter()
            .map(|s| f64::from(s.replicas))
            .fold(1.0, f64::max)
            / 4.0)
            .ceil()
            * 4.0;
        let value_max = samples
            .iter()
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
        Frame {
            t_max,
            replicas_max,
            value_max,
        }
    }

    fn plot_width() -> f64 {
        f64::from(WIDTH) - LEFT - RIGHT
    }

    fn plot_height() -> f64 {
        f64::from(HEIGHT) - TOP - BOTTOM
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max * Self::plot_width()
    }

    fn y_replicas(&self, r: f64) -> f64 {
        TOP + Self::plot_height() * (1.0 - r / self.replicas_max)
    }

    fn y_value(&self, v: f64) -> f64 {
        TOP + Self::plot_height() * (1.0 - (v / self.value_max).clamp(0.0, 1.0))
    }
}

/// One polyline of a chart, in pixels: `(points, color, dashed)`.
type Series = (Vec<(f64, f64)>, [u8; 3], bool);

/// The polylines of a chart.
fn series(samples: &[Sample], frame: &Frame) -> Vec<Series> {
    let mut replicas = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let y = frame.y_replicas(f64::from(s.replicas));
        if i > 0 {
            // A step: the count holds until the next sample.
            let prev = frame.y_replicas(f64::from(samples[i - 1].replicas));
            replicas.push((frame.x(s.t), prev));
        }
        replicas.push((frame.x(s.t), y));
    }
    let line = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|v| (frame.x(s.t), frame.y_value(v))))
            .collect()
    };
    vec![
        (line(&|s| s.target), TARGET_COLOR, true),
        (line(&|s| Some(s.activation)), ACTIVATION_COLOR, true),
        (line(&|s| s.value), VALUE_COLOR, false),
        (replicas, REPLICAS_COLOR, false),
    ]
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

/// The chart as SVG text.
pub fn svg(title: &str, samples: &[Sample]) -> String {
    let frame = Frame::of(samples);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    );
    let bottom = TOP + Frame::plot_height();
    let right = LEFT + Frame::plot_width();
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + Frame::plot_height() * (1.0 - f);
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
            bottom + 16.0,
            label(frame.t_max * f)
        ));
    }
    out.push_str(&format!(
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n<line x1=\"{right}\" y1=\"{TOP}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"{axis}\"/>\n",
        axis = rgb(AXIS_COLOR)
    ));
    for (points, color, dashed) in series(samples, &frame) {
        if points.is_empty() {
            continue;
        }
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        out.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
            rgb(color),
            if dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            },
            path.join(" ")
        ));
    }
    let legend = [
        ("replicas (left axis)", REPLICAS_COLOR),
        ("metric value (right axis)", VALUE_COLOR),
        ("target", TARGET_COLOR),
        ("activation threshold", ACTIVATION_COLOR),
    ];
    let mut x = LEFT;
    for (name, color) in legend {
        out.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{name}</text>\n",
            f64::from(HEIGHT) - 16.0,
            rgb(color),
            x + 16.0,
            f64::from(HEIGHT) - 11.0,
        ));
        x += 170.0;
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

/// A 3 x 5 pixel font for the PNG's axis labels: digits, `.`, `-` and `s` are all they need
/// (no font file, no system font).
fn glyph(c: char) -> Option<[&'static str; 5]> {
    Some(match c {
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
        '.' => ["...", "...", "...", "...", ".#."],
        '-' => ["...", "...", "###", "...", "..."],
        's' => [".##", "#..", ".#.", "..#", "##."],
        _ => return None,
    })
}

/// Pixels per font pixel.
const TEXT_SCALE: i64 = 2;
/// Width of one character with its spacing, in pixels.
const CHAR_WIDTH: i64 = 4 * TEXT_SCALE;

impl Canvas {
    /// `text` with its top-left corner at (`x`, `y`); unknown characters leave a gap.
    fn text(&mut self, x: i64, y: i64, text: &str, color: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let Some(rows) = glyph(c) else { continue };
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

/// The chart as PNG bytes: the geometry and axis labels of [`svg`] (a built-in pixel font);
/// the legend is colour swatches in the SVG's order: replicas, value, target, activation.
///
/// # Errors
/// Encoding failures of the `png` crate.
pub fn png_bytes(samples: &[Sample]) -> Result<Vec<u8>, png::EncodingError> {
    let frame = Frame::of(samples);
    let mut canvas = Canvas::new();
    let right = LEFT + Frame::plot_width();
    let bottom = TOP + Frame::plot_height();
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + Frame::plot_height() * (1.0 - f);
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
            px(bottom) + 8,
            &seconds,
            AXIS_COLOR,
        );
    }
    canvas.line((LEFT, bottom), (right, bottom), AXIS_COLOR, 1, false);
    canvas.line((LEFT, TOP), (LEFT, bottom), AXIS_COLOR, 1, false);
    canvas.line((right, TOP), (right, bottom), AXIS_COLOR, 1, false);
    for (points, color, dashed) in series(samples, &frame) {
        for pair in points.windows(2) {
            canvas.line(pair[0], pair[1], color, 2, dashed);
        }
    }
    let swatch_y = i64::from(HEIGHT) - 20;
    for (i, color) in [REPLICAS_COLOR, VALUE_COLOR, TARGET_COLOR, ACTIVATION_COLOR]
        .into_iter()
        .enumerate()
    {
        let x = 60 + 170 * i64::try_from(i).unwrap_or(0);
        canvas.rect(x, swatch_y, 24, 8, color);
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

/// Writes `<dir>/<namespace>-<name>.svg` and `.png`; returns both paths.
///
/// # Errors
/// A file that cannot be written or encoded.
pub fn write_charts(
    dir: &Path,
    namespace: &str,
    name: &str,
    samples: &[Sample],
) -> Result<(PathBuf, PathBuf), ChartError> {
    let stem = format!("{namespace}-{name}");
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    let title = format!("ScaledObject {namespace}/{name}: replicas and metric over time");
    std::fs::write(&svg_path, svg(&title, samples)).map_err(|source| ChartError::Write {
        path: svg_path.clone(),
        source,
    })?;
    let bytes = png_bytes(samples).map_err(|source| ChartError::Encode {
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

    #[test]
    fn the_svg_is_well_formed_xml_with_four_series() {
        let text = svg("ScaledObject a/<b>", &samples());
        let doc = roxmltree::Document::parse(&text).expect("well-formed");
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert_eq!(lines, 4);
        assert!(text.contains("a/&lt;b&gt;"));
    }

    #[test]
    fn the_png_decodes_to_the_chart_size() {
        let bytes = png_bytes(&samples()).expect("encodes");
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().expect("decodes");
        assert_eq!((reader.info().width, reader.info().height), (WIDTH, HEIGHT));
    }

    #[test]
    fn an_empty_timeline_still_draws() {
        assert!(svg("x", &[]).contains("</svg>"));
        assert!(png_bytes(&[]).is_ok());
    }
}
