//! SVG charts: throughput over time, and latency percentile curves.

use crate::live::Series;
use crate::report::Phase;
use plotters::prelude::*;
use std::path::Path;

pub fn write(dir: &Path, series: &Series, phases: &[&Phase]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    throughput(&dir.join("throughput.svg"), series).map_err(|e| e.to_string())?;
    latency(&dir.join("latency.svg"), phases).map_err(|e| e.to_string())?;
    Ok(())
}

/// MB/s per 100 ms sample, appends and polls.
fn throughput(path: &Path, series: &Series) -> Result<(), Box<dyn std::error::Error>> {
    let mut points_a = Vec::new();
    let mut points_p = Vec::new();
    for w in series.windows(2) {
        let dt = w[1].0 - w[0].0;
        if dt <= 0.0 {
            continue;
        }
        points_a.push((w[1].0, (w[1].1 - w[0].1) as f64 / dt / 1e6));
        points_p.push((w[1].0, (w[1].2 - w[0].2) as f64 / dt / 1e6));
    }
    let t_max = series.last().map(|s| s.0).unwrap_or(1.0).max(0.1);
    let y_max = points_a
        .iter()
        .chain(&points_p)
        .map(|p| p.1)
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("throughput over time (100 ms samples)", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("MB/s")
        .draw()?;
    chart
        .draw_series(LineSeries::new(points_a, &BLUE))?
        .label("append")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(points_p, &RED))?
        .label("poll")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Latency by percentile, x in "nines" (0 = p0, 1 = p90, 2 = p99, ...).
fn latency(path: &Path, phases: &[&Phase]) -> Result<(), Box<dyn std::error::Error>> {
    let curve = |p: &Phase| -> Vec<(f64, f64)> {
        (0..=50)
            .map(|i| {
                let nines = i as f64 / 10.0;
                let q = 1.0 - 10f64.powf(-nines);
                (
                    nines,
                    p.latency.value_at_quantile(q.min(1.0)) as f64 / 1000.0,
                )
            })
            .collect()
    };
    let y_max = phases
        .iter()
        .map(|p| p.latency.max() as f64 / 1000.0)
        .fold(1.0f64, f64::max)
        * 1.2;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "latency by percentile (x: 1 = p90, 2 = p99, 3 = p99.9, 4 = p99.99)",
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..5.0, (1.0..y_max).log_scale())?;
    chart.configure_mesh().x_desc("nines").y_desc("µs").draw()?;
    let colors = [BLUE, RED, GREEN, MAGENTA];
    for (i, p) in phases.iter().enumerate() {
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(
                curve(p).into_iter().map(|(x, y)| (x, y.max(1.0))),
                &color,
            ))?
            .label(p.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
