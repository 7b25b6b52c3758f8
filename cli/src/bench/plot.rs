//! `--plot FILE.svg`: throughput over time as an SVG line chart (plotters, SVG
//! backend: no system libraries, no fonts to find).

use std::path::Path;

use plotters::prelude::*;

use super::report::Report;
use crate::error::CliError;

fn plot_err<E: std::fmt::Display>(e: E) -> CliError {
    CliError::Plot(e.to_string())
}

/// Draws items finished per second against seconds since the measurement started.
pub(crate) fn write_svg(path: &Path, report: &Report) -> Result<(), CliError> {
    let points = &report.throughput.points;
    let x_max = points
        .last()
        .map_or(1.0, |(t, _)| t + report.throughput.bucket_s);
    let y_max = points.iter().map(|(_, v)| *v).fold(1.0, f64::max) * 1.1;
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
        .x_desc("seconds")
        .y_desc("items finished per second")
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(points.iter().copied(), &BLUE))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
