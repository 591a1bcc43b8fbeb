//! What every benchmark writes: a JSON report under `target/bench/NAME.json`
//! with the machine, the date, the parameters, the figures (each with its
//! goal and whether it was met) and the series a plot is drawn from, and one
//! line per figure on stdout.
//!
//! `testbed bench docs` ([`super::docs`]) turns the reports into
//! docs/benchmarks.md, so every figure there comes from a run.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a report could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file or directory could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A report is not valid JSON of this shape.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// One benchmark run's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// The benchmark's name (`fanout`), also the file's stem.
    pub benchmark: String,
    /// What it does, for docs/benchmarks.md.
    #[serde(default)]
    pub description: String,
    /// When it ran (RFC 3339, UTC).
    pub date: String,
    /// Where it ran.
    pub machine: Machine,
    /// What it was asked to do.
    pub parameters: Value,
    /// What it measured.
    pub figures: Vec<Figure>,
    /// Data to plot.
    #[serde(default)]
    pub series: Vec<Series>,
    /// Notes a reader needs to read the figures right.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Everything else the benchmark measured, in its own shape.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

/// One measured value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// What it is (`all applied, N = 10000`).
    pub name: String,
    /// The value, in `unit`.
    pub value: f64,
    /// Its unit (`s`, `ms`, `bytes`, `ratio`, `KiB`).
    pub unit: String,
    /// The goal it is held against, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<Goal>,
}

/// A goal and whether the figure met it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Goal {
    /// The goal as people say it (`under 10 s`).
    pub text: String,
    /// Whether the figure met it.
    pub met: bool,
}

/// Points to plot, with an optional reference line (the ideal).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// The plot's title.
    pub title: String,
    /// The x axis.
    pub x_label: String,
    /// The y axis.
    pub y_label: String,
    /// Named lines of (x, y) points.
    pub lines: Vec<Line>,
}

/// One line of a [`Series`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Line {
    /// Its legend.
    pub label: String,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// The machine a report was made on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// Logical cores.
    pub cores: usize,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// The CPU's model name.
    pub cpu: String,
    /// The kernel release.
    pub kernel: String,
}

impl Machine {
    /// This machine, from `/proc`.
    pub fn this() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .and_then(|rest| rest.split(':').nth(1))
            .map_or_else(|| "unknown".to_string(), |name| name.trim().to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib = meminfo
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<f64>().ok())
            .unwrap_or(0.0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_string(), |text| text.trim().to_string());
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_gib: (memory_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            cpu,
            kernel,
        }
    }
}

impl Figure {
    /// A figure without a goal.
    pub fn new(name: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value,
            unit: unit.into(),
            goal: None,
        }
    }

    /// The figure held against `goal`, met when `met(value)`.
    pub fn with_goal(mut self, goal: impl Into<String>, met: impl FnOnce(f64) -> bool) -> Self {
        self.goal = Some(Goal {
            text: goal.into(),
            met: met(self.value),
        });
        self
    }

    /// The figure as one line: `name: value unit (goal: met)`.
    pub fn line(&self) -> String {
        let goal = match &self.goal {
            Some(goal) => format!(
                " (goal {}: {})",
                goal.text,
                if goal.met { "met" } else { "NOT met" }
            ),
            None => String::new(),
        };
        format!(
            "{}: {} {}{goal}",
            self.name,
            format_value(self.value),
            self.unit
        )
    }
}

impl Report {
    /// An empty report of `benchmark` run now on this machine.
    pub fn new(benchmark: &str, parameters: Value) -> Self {
        Self {
            benchmark: benchmark.to_string(),
            description: String::new(),
            date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            machine: Machine::this(),
            parameters,
            figures: Vec::new(),
            series: Vec::new(),
            notes: Vec::new(),
            details: Value::Null,
        }
    }

    /// Adds a figure and prints its line.
    pub fn figure(&mut self, figure: Figure) {
        println!("{} | {}", self.benchmark, figure.line());
        self.figures.push(figure);
    }

    /// Writes the report to `dir/BENCHMARK.json` and returns the path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(format!("{}.json", self.benchmark));
        let json = serde_json::to_string_pretty(self).map_err(|source| ReportError::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&path, json + "\n").map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Reads a report written by [`Report::write`].
    pub fn read(path: &Path) -> Result<Self, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ReportError::Json {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// A value with as many digits as a reader needs: integers whole, small
/// values to three significant digits.
pub fn format_value(value: f64) -> String {
    if (value.fract() == 0.0 && value.abs() < 1e15) || value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else if value.abs() >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The `q` quantile (0..=1) of `values` by nearest rank; 0 when empty.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// The largest of `values` (the last receiver's time), its median and its
/// 99th percentile by nearest rank; zeros when empty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The largest value.
    pub all: f64,
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// The [`Spread`] of `values` (which it sorts).
pub fn spread(values: &mut [f64]) -> Spread {
    Spread {
        all: quantile(values, 1.0),
        p50: quantile(values, 0.5),
        p99: quantile(values, 0.99),
    }
}

/// This process's peak resident memory (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib(
        &std::fs::read_to_string("/proc/self/status").ok()?,
        "VmHWM:",
    )
}

/// The summed resident memory (`VmRSS`, KiB) of `pids` once it holds:
/// sampled every 250 ms until it moved under 0.5 % over a window longer
/// than two looks of the daemons' heap trimmer (`relaymesh_node::heap`),
/// so a burst's freed heap is counted as the daemons return it, not as
/// the burst left it; at most 30 s.
pub async fn settled_rss_kib(pids: &[u32]) -> u64 {
    use std::time::Duration;
    let sample = || -> u64 { pids.iter().filter_map(|pid| rss_kib(*pid)).sum() };
    let window = 2 * relaymesh_node::heap::PERIOD + Duration::from_millis(250);
    let step = Duration::from_millis(250);
    let needed = (window.as_millis() / step.as_millis()) as usize + 1;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut samples = vec![sample()];
    loop {
        let recent = &samples[samples.len().saturating_sub(needed)..];
        let (low, high) = recent.iter().fold((u64::MAX, 0), |(low, high), &kib| {
            (low.min(kib), high.max(kib))
        });
        let last = samples.last().copied().unwrap_or_default();
        if recent.len() >= needed && (high - low) * 200 <= high
            || tokio::time::Instant::now() >= deadline
        {
            return last;
        }
        tokio::time::sleep(step).await;
        samples.push(sample());
    }
}

/// A process's resident memory now (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "VmRSS:",
    )
}

/// The CPU time a process has used so far (user and system), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime of a `/proc/PID/stat` line. The command name may hold
/// spaces and parentheses, so fields are counted after its last `)`; the
/// kernel reports them in USER_HZ, which is 100 on every Linux ABI.
fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// Datagrams this host's UDP sockets dropped so far because their receive
/// buffer was full (`RcvbufErrors` in `/proc/net/snmp`): every one was
/// sent again after its sender found it lost. Host-wide, so a benchmark's
/// count holds whatever else ran meanwhile.
pub fn udp_receive_drops() -> Option<u64> {
    snmp_udp_field(
        &std::fs::read_to_string("/proc/net/snmp").ok()?,
        "RcvbufErrors",
    )
}

/// The datagrams [`udp_receive_drops`] counted since it read `before`.
pub fn udp_receive_drops_since(before: Option<u64>) -> Option<u64> {
    udp_receive_drops()
        .zip(before)
        .map(|(after, before)| after.saturating_sub(before))
}

/// A field of the `Udp:` lines of `/proc/net/snmp`: a line of names, then
/// a line of values.
fn snmp_udp_field(snmp: &str, field: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|line| line.starts_with("Udp:"));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names.split_whitespace().position(|name| name == field)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_counter_is_read_by_its_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 89419030 34874 7334055 96773459 7334055 0\n\
                    UdpLite: InDatagrams RcvbufErrors\nUdpLite: 0 0\n";
        assert_eq!(snmp_udp_field(snmp, "RcvbufErrors"), Some(7_334_055));
        assert_eq!(snmp_udp_field(snmp, "InDatagrams"), Some(89_419_030));
        assert_eq!(snmp_udp_field(snmp, "Missing"), None);
    }

    #[test]
    fn this_host_counts_udp_drops() {
        assert!(udp_receive_drops().is_some());
    }

    #[test]
    fn cpu_time_is_read_after_the_command_name() {
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1";
        assert_eq!(stat_cpu_seconds(stat), Some(3.0));
        assert_eq!(stat_cpu_seconds("garbage"), None);
        assert!(cpu_seconds(std::process::id()).is_some());
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut values, 0.5), 50.0);
        assert_eq!(quantile(&mut values, 0.99), 99.0);
        assert_eq!(quantile(&mut values, 1.0), 100.0);
        assert_eq!(quantile(&mut [7.0], 0.99), 7.0);
        assert_eq!(quantile(&mut [], 0.5), 0.0);
        let mut values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let expected = Spread {
            all: 100.0,
            p50: 50.0,
            p99: 99.0,
        };
        assert_eq!(spread(&mut values), expected);
        let none = Spread {
            all: 0.0,
            p50: 0.0,
            p99: 0.0,
        };
        assert_eq!(spread(&mut []), none);
    }

    #[test]
    fn a_report_round_trips_and_says_whether_goals_were_met() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut report = Report::new("fanout", serde_json::json!({"agents": [1000]}));
        report.figure(Figure::new("all applied", 8.25, "s").with_goal("under 10 s", |v| v < 10.0));
        report.figure(Figure::new("p99", 12.0, "s").with_goal("under 10 s", |v| v < 10.0));
        assert!(report.figures[0].line().ends_with("(goal under 10 s: met)"));
        assert!(report.figures[1].line().contains("NOT met"));
        let path = report.write(dir.path())?;
        assert_eq!(path, dir.path().join("fanout.json"));
        assert_eq!(Report::read(&path)?, report);
        assert!(report.machine.cores >= 1);
        Ok(())
    }
}
