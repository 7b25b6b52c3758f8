//! `--plot FILE.svg`: throughput over time as an SVG line chart (plotters, SVG
//! backend: no system libraries, no fonts to find).

use std::path::Path;

use plotters::prelude::*;

use super::report::Report;
use crate::error::CliError;

fn plot_err<E: std::fmt::Display>(e: E) -> CliError {
    CliError::Plot(e.to_string())
}

/// Labels on the time axis, at most.
const X_LABELS: usize = 10;

/// The decimals a time axis over `span` seconds needs so that its labels, at most
/// [`X_LABELS`] of them at a round step (1, 2 or 5 times a power of ten, as the chart
/// picks them), all differ: the decimals of that step.
pub(crate) fn axis_decimals(span: f64) -> usize {
    let raw = span / X_LABELS as f64;
    if !(raw.is_finite() && raw > 0.0) {
        return 1;
    }
    let mut power = 10f64.powf(raw.log10().floor());
    let step = loop {
        if let Some(s) = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * power)
            .find(|s| *s >= raw * (1.0 - 1e-9))
        {
            break s;
        }
        power *= 10.0;
    };
    let exponent = step.log10().floor();
    if exponent >= 0.0 {
        0
    } else {
        (-exponent) as usize
    }
}

/// Draws items finished per second against seconds since the measurement started. The
/// last, partial bucket is drawn at the rate it had up to the end of the measurement.
pub(crate) fn write_svg(path: &Path, report: &Report) -> Result<(), CliError> {
    let t = &report.throughput;
    let mut points = t.points.clone();
    if let Some(&(start, rate)) = t.points.last() {
        points.push((t.end_s.max(start), rate));
    }
    let x_max = t.end_s.max(t.bucket_s);
    let y_max = points.iter().map(|(_, v)| *v).fold(1.0, f64::max) * 1.1;
    let decimals = axis_decimals(x_max);
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(report.title(), ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_labels(X_LABELS)
        .x_desc("seconds")
        .y_desc("items finished per second")
        .x_label_formatter(&|x| format!("{x:.decimals$}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(points, &BLUE))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_labels_of_short_and_long_runs_are_all_distinct() {
        for span in [0.07, 0.35, 1.0, 3.5, 12.0, 35.0, 350.0] {
            let d = axis_decimals(span);
            // Every step the chart may pick at this span is at least the round step
            // above span / X_LABELS: its labels must differ at `d` decimals.
            let raw = span / X_LABELS as f64;
            let labels: Vec<String> = (0..=X_LABELS)
                .map(|k| format!("{:.d$}", k as f64 * raw.max(10f64.powi(-(d as i32)))))
                .collect();
            let mut unique = labels.clone();
            unique.dedup();
            assert_eq!(unique, labels, "span {span}: {labels:?}");
        }
        assert_eq!(axis_decimals(0.35), 2);
        assert_eq!(axis_decimals(3.5), 1);
        assert_eq!(axis_decimals(35.0), 0);
    }
}
