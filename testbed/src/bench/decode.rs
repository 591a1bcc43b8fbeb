//! `testbed bench decode`: what deep nesting costs the API (issue 29).
//!
//! * In process: the decoders the API server runs on request bodies
//!   ([`relaymesh_apiserver::body::json`], [`relaymesh_apiserver::body::yaml`],
//!   and [`relaymesh_apiserver::protobuf::decode`] followed by
//!   [`depth::check_value`], as `crud.rs` does) on ConfigMap bodies nested
//!   16 to 1,000,000 levels deep, each timed as the median of several runs.
//!   A body up to [`depth::MAX_DEPTH`] must be read and every deeper one
//!   refused for its depth; anything else fails the benchmark. Then the
//!   worst body of the API's largest size ([`MAX_JSON_BODY`]) for each
//!   format: nesting at the limit all through it and one level over it
//!   where the decoder finds it last.
//! * Over HTTPS: a root relay process, three client threads posting the
//!   largest worst-case bodies (those, the deepest nesting, and YAML
//!   aliases) to `/api/v1/namespaces/default/configmaps` for ten seconds,
//!   and one more thread asking `/healthz` every 100 ms. Every post must be
//!   refused with a 4xx, and the root must still answer afterwards.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use relaymesh_apiserver::depth;
use relaymesh_apiserver::http::MAX_JSON_BODY;
use serde_json::json;

use super::report::{quantile, Figure, Line, Report, Series};

mod bodies;
mod https;

pub use bodies::{Format, Refusal};

/// Where the benchmark posts its bodies.
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// The most the decode time may grow with depth: t ∝ depth^k with k at
/// most this (1 is linear, 2 quadratic).
const MAX_EXPONENT: f64 = 1.1;

/// What to run.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Nesting depths of the in-process bodies.
    pub depths: Vec<usize>,
    /// Timed decodes of each in-process body; the median is reported.
    pub runs: usize,
    /// Client threads posting worst-case bodies to the root at once.
    pub clients: usize,
    /// How long they post.
    pub duration: Duration,
    /// Where the root lives while it runs.
    pub dir: PathBuf,
    /// Where the `relay`, `relayctl` and `edge-agent` binaries are.
    pub bin_dir: PathBuf,
}

/// Runs both parts and returns the `decode` report, whose goals may be
/// unmet ([`unmet_goals`]): a post answered otherwise than with a 4xx is
/// one. Fails when a decoder reads a body deeper than the limit or refuses
/// one within it (or not for its depth), or when the root does not answer
/// `/healthz` and a list after the load.
pub fn run(options: &DecodeOptions) -> anyhow::Result<Report> {
    let mut report = Report::new(
        "decode",
        json!({"depths": options.depths, "runs": options.runs, "clients": options.clients,
            "seconds": options.duration.as_secs_f64(), "bodyBytes": MAX_JSON_BODY,
            "depthLimit": depth::MAX_DEPTH}),
    );
    report.description = format!(
        "Decode time against nesting depth, in process, with the API server's own decoders for \
         request bodies (JSON: depth scan, then serde_json; YAML: serde-saphyr under a budget, \
         then serde_yaml, then the depth check; protobuf: prost-reflect, then the depth check) \
         on ConfigMap bodies nested {:?} levels deep (lists; for protobuf, in the JSON of a \
         managedFields entry), each the median of {} runs. Every body deeper than {} levels must \
         be refused for its depth and every other read, or the benchmark fails. The growth \
         exponent k is the slope of a least-squares line through log(time) against log(depth) \
         over the depths past the limit: time grows as depth^k, so 1 is linear and 2 quadratic \
         (a decoder that stops at the limit stays near 0). Then, per format, the worst body of \
         the API's largest size ({} bytes): lists nested to the limit all through it and one \
         level deeper where the decoder meets it last. Then over HTTPS against a root relay \
         process (release build): {} client threads post the largest worst-case bodies (those \
         three, the deepest nesting that fits in JSON, flow and block YAML and protobuf, and \
         YAML with nine levels of aliases) to {CONFIGMAPS} for {} s, one after another, while \
         one more thread asks /healthz every 100 ms; every post must be refused with a 4xx and \
         the root must answer afterwards.",
        options.depths,
        options.runs,
        depth::MAX_DEPTH,
        MAX_JSON_BODY,
        options.clients,
        options.duration.as_secs_f64()
    );
    in_process(options, &mut report)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(https::over_https(options, &mut report))?;
    Ok(report)
}

/// The figures whose goals were not met, by name.
pub fn unmet_goals(report: &Report) -> Vec<String> {
    report
        .figures
        .iter()
        .filter(|figure| figure.goal.as_ref().is_some_and(|goal| !goal.met))
        .map(|figure| figure.name.clone())
        .collect()
}

/// Part one: decode time against depth, and the worst bodies.
fn in_process(options: &DecodeOptions, report: &mut Report) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    for format in Format::ALL {
        let mut points = Vec::new();
        for &depth in &options.depths {
            let body = format.nested(depth);
            let outcome = format.decode(&body);
            check_outcome(format, depth.max(2), &outcome)?;
            let micros = median_micros(options.runs, || format.decode(&body));
            report.figure(Figure::new(
                format!("{} decode, depth {depth}", format.name()),
                micros,
                "µs",
            ));
            points.push((depth as f64, micros));
        }
        let past: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(depth, _)| *depth > depth::MAX_DEPTH as f64)
            .collect();
        if let Some(exponent) = growth_exponent(&past) {
            report.figure(
                Figure::new(
                    format!("{} growth exponent k past the limit", format.name()),
                    exponent,
                    "exponent",
                )
                .with_goal(format!("at most {MAX_EXPONENT} (linear or better)"), |k| {
                    k <= MAX_EXPONENT
                }),
            );
        }
        lines.push(Line {
            label: format.name().to_string(),
            points,
        });
    }
    report.series.push(Series {
        title: "Decode time against nesting depth".into(),
        x_label: "nesting depth (levels)".into(),
        y_label: "µs (median)".into(),
        lines,
    });
    let size = MAX_JSON_BODY as usize;
    for format in Format::ALL {
        let within = format.filled(size, false);
        if let Err(refusal) = format.decode(&within) {
            bail!(
                "{} refused a {size}-byte body nested to the limit: {}",
                format.name(),
                refusal.message
            );
        }
        let over = format.filled(size, true);
        check_outcome(format, depth::MAX_DEPTH + 1, &format.decode(&over))?;
        let runs = options.runs.clamp(1, 5);
        let millis = median_micros(runs, || format.decode(&over)) / 1000.0;
        report.figure(Figure::new(
            format!("{} worst body of {size} bytes, decode", format.name()),
            millis,
            "ms",
        ));
    }
    Ok(())
}

/// Whether `outcome` is what a body of `depth` must get: read within the
/// limit, refused for its depth past it.
fn check_outcome(
    format: Format,
    depth: usize,
    outcome: &Result<(), Refusal>,
) -> anyhow::Result<()> {
    match outcome {
        Ok(()) if depth > depth::MAX_DEPTH => {
            bail!("{} read a body nested {depth} levels deep", format.name())
        }
        Err(refusal) if depth <= depth::MAX_DEPTH => bail!(
            "{} refused a body nested {depth} levels deep: {}",
            format.name(),
            refusal.message
        ),
        Err(refusal) if !refusal.too_deep => bail!(
            "{} refused a body nested {depth} levels deep, but not for its depth: {}",
            format.name(),
            refusal.message
        ),
        _ => Ok(()),
    }
}

/// The median time of `runs` calls of `decode`, in µs.
fn median_micros<T>(runs: usize, mut decode: impl FnMut() -> T) -> f64 {
    let mut times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(decode());
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    quantile(&mut times, 0.5)
}

/// The slope of the least-squares line through `(ln x, ln y)`: y grows as
/// x to that power. `None` with fewer than two distinct x.
pub fn growth_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let mean_x = logs.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = logs.iter().map(|(_, y)| y).sum::<f64>() / n;
    let spread: f64 = logs.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    if spread <= f64::EPSILON {
        return None;
    }
    let covariance: f64 = logs.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    Some(covariance / spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_growth_exponent_tells_linear_from_quadratic() {
        let linear: Vec<(f64, f64)> = [1e3, 1e4, 1e5].iter().map(|x| (*x, 3.0 * x)).collect();
        let quadratic: Vec<(f64, f64)> = [1e3, 1e4, 1e5].iter().map(|x| (*x, x * x)).collect();
        let flat = [(1e3, 5.0), (1e6, 5.0)];
        assert!((growth_exponent(&linear).expect("points") - 1.0).abs() < 1e-9);
        assert!((growth_exponent(&quadratic).expect("points") - 2.0).abs() < 1e-9);
        assert!(growth_exponent(&flat).expect("points").abs() < 1e-9);
        assert_eq!(growth_exponent(&[(1e3, 5.0)]), None);
    }
}
