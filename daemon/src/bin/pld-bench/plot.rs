//! `--plot DIR`: latency and bandwidth against message size, pld beside
//! the same run's baselines — the transport's raw floor, and MPI with
//! `--mpi` — drawn as SVG and PNG with plotters. Labels need a TrueType
//! font, read from the system (DejaVu Sans, or `PLD_PLOT_FONT`).

use crate::report::{Baselines, Figure};
use anyhow::{Context, anyhow, bail};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::register_font;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Pixels of one chart.
const SIZE: (u32, u32) = (960, 600);

/// Where a font for the labels is looked for, after `PLD_PLOT_FONT`.
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The ops each chart draws, in legend order, with their colours.
const LATENCY: [(&str, RGBColor); 4] = [
    ("put_lat", RGBColor(31, 119, 180)),
    ("get_lat", RGBColor(214, 39, 40)),
    ("acc_lat", RGBColor(44, 160, 44)),
    ("fetch_add_lat", RGBColor(148, 103, 189)),
];
/// The raw floor's colour where it stands for no one op.
const GREY: RGBColor = RGBColor(110, 110, 110);
const BANDWIDTH: [(&str, RGBColor); 2] = [
    ("put_bw", RGBColor(31, 119, 180)),
    ("get_bw", RGBColor(214, 39, 40)),
];

/// One line of a chart.
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    /// A baseline (MPI): dashed.
    dashed: bool,
}

/// One chart: its lines and the horizontal floors (raw transport).
struct Chart {
    name: &'static str,
    title: String,
    y_desc: &'static str,
    series: Vec<Series>,
    floors: Vec<(String, f64, RGBColor)>,
}

/// Draws `DIR/latency.{svg,png}` and `DIR/bandwidth.{svg,png}` from the
/// figures that have them; returns the files written.
pub(crate) fn draw(
    dir: &Path,
    figs: &[Figure],
    base: &Baselines,
    transport: &str,
    progress: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    load_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let how = format!("over {transport}, progress {progress}");
    let mut latency = chart(
        "latency",
        format!("pld latency {how}"),
        "latency (us, one op and its completion)",
        &LATENCY,
        figs,
        base,
    );
    if let Some(rtt) = base.raw_rtt_us {
        latency
            .floors
            .push((format!("raw {transport} round trip, 8 B"), rtt, GREY));
    }
    let mut bandwidth = chart(
        "bandwidth",
        format!("pld bandwidth {how}"),
        "bandwidth (MB/s, a window of ops then quiet)",
        &BANDWIDTH,
        figs,
        base,
    );
    for (what, v, color) in [
        ("put", base.raw_bw_put, BANDWIDTH[0].1),
        ("get", base.raw_bw_get, BANDWIDTH[1].1),
    ] {
        if let Some(v) = v {
            let label = format!("raw {transport} stream ({what} direction)");
            bandwidth.floors.push((label, v, color));
        }
    }
    let mut written = Vec::new();
    for c in [latency, bandwidth] {
        if c.series.is_empty() {
            continue;
        }
        let svg = dir.join(format!("{}.svg", c.name));
        render(SVGBackend::new(&svg, SIZE).into_drawing_area(), &c)
            .map_err(|e| anyhow!("drawing {}: {e}", svg.display()))?;
        written.push(svg);
        let png = dir.join(format!("{}.png", c.name));
        let mut rgb = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        render(
            BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area(),
            &c,
        )
        .map_err(|e| anyhow!("drawing {}: {e}", png.display()))?;
        write_png(&png, &rgb)?;
        written.push(png);
    }
    if written.is_empty() {
        bail!(
            "--plot: no latency or bandwidth figures to draw (ask for put_lat, get_lat, put_bw or get_bw)"
        );
    }
    Ok(written)
}

/// The chart of `ops`: pld's figures, and MPI's beside them where measured.
fn chart(
    name: &'static str,
    title: String,
    y_desc: &'static str,
    ops: &[(&str, RGBColor)],
    figs: &[Figure],
    base: &Baselines,
) -> Chart {
    let mut series = Vec::new();
    for &(op, color) in ops {
        let points: Vec<(f64, f64)> = figs
            .iter()
            .filter(|f| f.op == op && f.value > 0.0)
            .map(|f| (f.size as f64, f.value))
            .collect();
        if points.is_empty() {
            continue;
        }
        let mpi: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|(s, _)| {
                let m = base.mpi.get(&(op.to_string(), *s as u64))?;
                (*m > 0.0).then_some((*s, *m))
            })
            .collect();
        series.push(Series {
            label: format!("pld {op}"),
            points,
            color,
            dashed: false,
        });
        if !mpi.is_empty() {
            series.push(Series {
                label: format!("MPI {op}"),
                points: mpi,
                color,
                dashed: true,
            });
        }
    }
    Chart {
        name,
        title,
        y_desc,
        series,
        floors: Vec::new(),
    }
}

/// `(lo, hi)` of `values`, widened for a log axis.
fn span(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (1.0, 10.0);
    }
    (lo / pad, hi * pad)
}

/// `1000` -> `1k`, `1048576` -> `1.0M`: the log axis's key points.
fn si(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{}G", v / 1e9),
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v if v >= 1.0 => format!("{v}"),
        v => format!("{v:.2}"),
    }
}

fn render<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    c: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&WHITE)?;
    let points = || c.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = span(points().map(|p| p.0), 1.5);
    let (y0, y1) = span(
        points()
            .map(|p| p.1)
            .chain(c.floors.iter().map(|(_, v, _)| *v)),
        2.0,
    );
    let mut chart = ChartBuilder::on(&area)
        .caption(&c.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(c.y_desc)
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .x_label_formatter(&|x| si(*x))
        .y_label_formatter(&|y| si(*y))
        .draw()?;
    for s in &c.series {
        let style = s.color.stroke_width(2);
        if s.dashed {
            let legend =
                move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 24, y)], 7, 4, style);
            chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, style))?
                .label(&s.label)
                .legend(legend);
        } else {
            let legend = move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))?
                .label(&s.label)
                .legend(legend);
        }
        chart.draw_series(
            s.points
                .iter()
                .map(|p| Circle::new(*p, 4, s.color.filled())),
        )?;
    }
    // Dotted, in the op's colour, paler: a floor, not a measurement.
    for (label, v, color) in &c.floors {
        let style = color.mix(0.6).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new([(x0, *v), (x1, *v)], 3, 4, style))?
            .label(label)
            .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 24, y)], 3, 4, style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    area.present()
}

fn write_png(path: &Path, rgb: &[u8]) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), SIZE.0, SIZE.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc
        .write_header()
        .with_context(|| format!("writing {}", path.display()))?;
    w.write_image_data(rgb)
        .with_context(|| format!("writing {}", path.display()))?;
    w.finish()
        .with_context(|| format!("writing {}", path.display()))
}

/// Registers the labels' font once: `PLD_PLOT_FONT`, or the first of
/// [`FONTS`] that exists.
fn load_font() -> anyhow::Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let candidates: Vec<PathBuf> = std::env::var_os("PLD_PLOT_FONT")
                .map(PathBuf::from)
                .into_iter()
                .chain(FONTS.iter().map(PathBuf::from))
                .collect();
            let Some((path, bytes)) = candidates
                .iter()
                .find_map(|p| std::fs::read(p).ok().map(|b| (p, b)))
            else {
                return Err(format!(
                    "--plot needs a TrueType font for its labels and found none of {}: install one (Debian: apt-get install fonts-dejavu-core) or set PLD_PLOT_FONT=FILE.ttf",
                    FONTS.join(", ")
                ));
            };
            // Registered fonts live as long as the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("--plot: {} is not a TrueType font", path.display()))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_labels_read_as_sizes() {
        assert_eq!(si(8.0), "8");
        assert_eq!(si(1000.0), "1k");
        assert_eq!(si(10_000_000.0), "10M");
    }

    #[test]
    fn a_span_leaves_room_around_every_value() {
        assert_eq!(span([8.0, 1000.0].into_iter(), 2.0), (4.0, 2000.0));
        assert_eq!(span(std::iter::empty(), 2.0), (1.0, 10.0));
    }
}
