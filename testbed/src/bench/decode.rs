//! `testbed bench decode`: what deep nesting costs the API (issue 29).
//!
//! * In process: the decoders the API server runs on request bodies
//!   ([`body::json`], [`body::yaml`], and [`protobuf::decode`] followed by
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use relaymesh_apiserver::http::MAX_JSON_BODY;
use relaymesh_apiserver::{body, depth, protobuf};
use serde_json::json;

use super::report::{cpu_seconds, quantile, Figure, Line, Report, Series};
use crate::up::{plan::ROOT, Fleet, UpOptions};

/// Where the benchmark posts its bodies.
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// How often `/healthz` is asked.
const HEALTHZ_EVERY: Duration = Duration::from_millis(100);
/// How long one request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The goal for `/healthz` under load, from issue 29.
const HEALTHZ_GOAL_SECS: f64 = 1.0;
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

/// A body format the API decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// Kubernetes protobuf; its nesting is the raw JSON of a
    /// `managedFields[].fieldsV1`, the one place protobuf carries JSON of
    /// any shape in a ConfigMap.
    Protobuf,
}

/// Why a decoder refused a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Refused for its depth: the API's limit, or serde_json's own
    /// recursion limit (128) on JSON inside protobuf, which is met first
    /// there.
    pub too_deep: bool,
    /// The decoder's words.
    pub message: String,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 3] = [Format::Json, Format::Yaml, Format::Protobuf];

    /// Its name in figures.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
            Format::Protobuf => "protobuf",
        }
    }

    /// The `Content-Type` it is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => protobuf::MEDIA_TYPE,
        }
    }

    /// A ConfigMap body whose deepest list is `depth` levels deep (at
    /// least 2, as its metadata is): the API reads it when `depth` is at
    /// most [`depth::MAX_DEPTH`] and refuses it otherwise.
    pub fn nested(self, depth: usize) -> Vec<u8> {
        let depth = depth.max(2);
        match self {
            // The object is level 1, its lists the rest.
            Format::Json => {
                let mut text = format!("{{{JSON_HEAD}\"x\":").into_bytes();
                text.extend(brackets(depth - 1));
                text.push(b'}');
                text
            }
            Format::Yaml => {
                let mut text = format!("{YAML_HEAD}x: ").into_bytes();
                text.extend(brackets(depth - 1));
                text.push(b'\n');
                text
            }
            // fieldsV1 is counted from its own root.
            Format::Protobuf => configmap_protobuf(&brackets(depth)),
        }
    }

    /// A ConfigMap body of exactly `size` bytes (at least 4 KiB) full of
    /// lists nested to the limit. With `over_limit`, one of them goes one
    /// level deeper, placed where this format's decoder meets it last (the
    /// end of a JSON body, scanned as a stream; the first list of a YAML or
    /// protobuf body, whose value is built whole and then walked from its
    /// last child to its first); without, the API reads the body.
    pub fn filled(self, size: usize, over_limit: bool) -> Vec<u8> {
        let limit = depth::MAX_DEPTH;
        match self {
            Format::Json => {
                let head = format!("{{{JSON_HEAD}\"x\":[");
                fill(
                    &head,
                    "]}",
                    size,
                    limit - 2,
                    over_limit.then_some(Place::Last),
                )
            }
            Format::Yaml => {
                let head = format!("{YAML_HEAD}x: [");
                fill(
                    &head,
                    "]\n",
                    size,
                    limit - 2,
                    over_limit.then_some(Place::First),
                )
            }
            Format::Protobuf => {
                let place = over_limit.then_some(Place::First);
                protobuf_of_size(size, |room| fill("[", "]", room, limit - 1, place))
            }
        }
    }

    /// Decodes `bytes` as the API server decodes a create's body of this
    /// format.
    pub fn decode(self, bytes: &[u8]) -> Result<(), Refusal> {
        let decoded = match self {
            Format::Json => body::json(bytes),
            Format::Yaml => body::yaml(bytes),
            Format::Protobuf => {
                let object = protobuf::decode(bytes).map_err(|error| {
                    let message = error.to_string();
                    Refusal {
                        too_deep: message.contains("recursion limit"),
                        message,
                    }
                })?;
                depth::check_value(&object)
                    .map(|()| object)
                    .map_err(body::BodyError::from)
            }
        };
        match decoded {
            Ok(_) => Ok(()),
            Err(error) => Err(Refusal {
                too_deep: matches!(error, body::BodyError::TooDeep(_)),
                message: error.to_string(),
            }),
        }
    }
}

/// The fields every ConfigMap body here starts with, as JSON.
const JSON_HEAD: &str =
    "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"deep\",\"namespace\":\"default\"},";
/// The same as YAML.
const YAML_HEAD: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: default}\n";

/// `depth` nested empty lists: `[[…]]`.
fn brackets(depth: usize) -> Vec<u8> {
    let mut text = vec![b'['; depth];
    text.resize(2 * depth, b']');
    text
}

/// Where the list one level over the limit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    First,
    Last,
}

/// `head`, then lists nested `depth` deep separated by commas (one of them
/// one deeper at `over`), then `tail`, then spaces up to `size` bytes.
fn fill(head: &str, tail: &str, size: usize, depth: usize, over: Option<Place>) -> Vec<u8> {
    let unit = brackets(depth);
    let deeper = brackets(depth + 1);
    let mut text = head.as_bytes().to_vec();
    let first = if over == Some(Place::First) {
        &deeper
    } else {
        &unit
    };
    text.extend_from_slice(first);
    let reserve = tail.len()
        + if over == Some(Place::Last) {
            deeper.len() + 1
        } else {
            0
        };
    while text.len() + 1 + unit.len() + reserve <= size {
        text.push(b',');
        text.extend_from_slice(&unit);
    }
    if over == Some(Place::Last) {
        text.push(b',');
        text.extend_from_slice(&deeper);
    }
    text.extend_from_slice(tail.as_bytes());
    if text.len() < size {
        text.resize(size, b' ');
    }
    text
}

/// A protobuf ConfigMap `default/deep` whose one managed-fields entry holds
/// `fields_v1` as its raw JSON, in Kubernetes' envelope (`k8s\0`, then a
/// `runtime.Unknown`). Field numbers from apiserver/proto.
fn configmap_protobuf(fields_v1: &[u8]) -> Vec<u8> {
    let fields = message(&[(1, fields_v1)]);
    let entry = message(&[
        (1, b"bench".as_slice()),
        (2, b"Update".as_slice()),
        (3, b"v1".as_slice()),
        (6, b"FieldsV1".as_slice()),
        (7, fields.as_slice()),
    ]);
    let metadata = message(&[
        (1, b"deep".as_slice()),
        (3, b"default".as_slice()),
        (17, entry.as_slice()),
    ]);
    let configmap = message(&[(1, metadata.as_slice())]);
    let type_meta = message(&[(1, b"v1".as_slice()), (2, b"ConfigMap".as_slice())]);
    let unknown = message(&[(1, type_meta.as_slice()), (2, configmap.as_slice())]);
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown);
    body
}

/// A [`configmap_protobuf`] of `size` bytes (or just under, should a
/// varint's length make it unreachable) whose raw JSON `fields_v1(room)`
/// makes of `room` bytes.
fn protobuf_of_size(size: usize, fields_v1: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut room = size.saturating_sub(configmap_protobuf(&[]).len());
    let mut best = Vec::new();
    for _ in 0..8 {
        let body = configmap_protobuf(&fields_v1(room));
        match body.len().cmp(&size) {
            std::cmp::Ordering::Equal => return body,
            std::cmp::Ordering::Less => {
                room += size - body.len();
                best = body;
            }
            std::cmp::Ordering::Greater => room = room.saturating_sub(body.len() - size),
        }
    }
    best
}

/// A protobuf message of length-delimited fields (strings, bytes and
/// messages), in the order given.
fn message(fields: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (number, bytes) in fields {
        varint(&mut out, (number << 3) | 2);
        varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    out
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A YAML body of about `size` bytes that expands aliases nine levels deep
/// (a billion laughs), then a comment up to `size`.
fn yaml_aliases(size: usize) -> Vec<u8> {
    let mut text =
        format!("{YAML_HEAD}data:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let previous = format!("*a{}", level - 1);
        let items = [previous.as_str(); 10].join(", ");
        text.push_str(&format!("  a{level}: &a{level} [{items}]\n"));
    }
    text.push('#');
    let mut text = text.into_bytes();
    if text.len() < size {
        text.resize(size, b'x');
    }
    text
}

/// The bodies the clients post: each of the API's largest size.
fn worst_bodies() -> Vec<Body> {
    let size = MAX_JSON_BODY as usize;
    let deep = |head: &str| {
        let mut text = head.as_bytes().to_vec();
        text.resize(size, b'[');
        Bytes::from(text)
    };
    let protobuf_deep = protobuf_of_size(size, |room| vec![b'['; room]);
    vec![
        (
            "JSON at the limit",
            Format::Json.content_type(),
            Bytes::from(Format::Json.filled(size, true)),
        ),
        ("JSON deepest", Format::Json.content_type(), deep("{\"x\":")),
        (
            "YAML at the limit",
            Format::Yaml.content_type(),
            Bytes::from(Format::Yaml.filled(size, true)),
        ),
        (
            "YAML deepest flow",
            Format::Yaml.content_type(),
            deep("x: "),
        ),
        ("YAML deepest block", Format::Yaml.content_type(), {
            let mut text = b"x:\n".to_vec();
            while text.len() + 2 <= size {
                text.extend_from_slice(b"- ");
            }
            text.resize(size, b'0');
            Bytes::from(text)
        }),
        (
            "YAML aliases",
            Format::Yaml.content_type(),
            Bytes::from(yaml_aliases(size)),
        ),
        (
            "protobuf at the limit",
            Format::Protobuf.content_type(),
            Bytes::from(Format::Protobuf.filled(size, true)),
        ),
        (
            "protobuf deepest",
            Format::Protobuf.content_type(),
            Bytes::from(protobuf_deep),
        ),
    ]
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
    runtime.block_on(over_https(options, &mut report))?;
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

/// What the clients and the `/healthz` thread saw.
#[derive(Debug, Default)]
struct Load {
    /// The posts of each body, by its name.
    posts: BTreeMap<&'static str, Posts>,
    /// Posts that got no answer (connection errors, timeouts), with why.
    unanswered: Vec<String>,
    /// Each `/healthz` request: seconds since the start, seconds it took,
    /// and whether it answered 200.
    healthz: Vec<(f64, f64, bool)>,
}

/// The answered posts of one body.
#[derive(Debug, Default)]
struct Posts {
    /// How many got each status code.
    codes: BTreeMap<u16, u64>,
    /// Seconds each took, sending included.
    seconds: Vec<f64>,
}

impl Load {
    /// Adds `other`'s posts and unanswered requests to this one's.
    fn absorb(&mut self, other: Load) {
        for (name, posts) in other.posts {
            let mine = self.posts.entry(name).or_default();
            for (code, count) in posts.codes {
                *mine.codes.entry(code).or_default() += count;
            }
            mine.seconds.extend(posts.seconds);
        }
        self.unanswered.extend(other.unanswered);
    }

    /// Answered posts, and those answered with a 4xx.
    fn counts(&self) -> (u64, u64) {
        let codes = self.posts.values().flat_map(|posts| &posts.codes);
        codes.fold((0, 0), |(all, refused), (code, count)| {
            let is_4xx = (400..500).contains(code);
            (all + count, refused + if is_4xx { *count } else { 0 })
        })
    }
}

/// A body the clients post: its name, `Content-Type` and bytes.
type Body = (&'static str, &'static str, Bytes);

/// Part two: the root under worst-case bodies.
async fn over_https(options: &DecodeOptions, report: &mut Report) -> anyhow::Result<()> {
    let up = UpOptions::fresh(
        options.dir.join("decode"),
        Vec::new(),
        0,
        true,
        options.bin_dir.clone(),
    )?;
    println!("decode | starting a root");
    let fleet = Fleet::start(&up).await?;
    let result = load_root(&fleet, options, report).await;
    fleet.shutdown().await;
    result
}

async fn load_root(
    fleet: &Fleet,
    options: &DecodeOptions,
    report: &mut Report,
) -> anyhow::Result<()> {
    let root_pid = fleet
        .daemon_pids()
        .into_iter()
        .find(|(name, _)| name == ROOT)
        .map(|(_, pid)| pid)
        .context("the root is not running")?;
    let bodies = worst_bodies();
    let kubeconfig = fleet.root_kubeconfig();
    let (clients, duration) = (options.clients, options.duration);
    println!(
        "decode | {clients} clients post {} kinds of {MAX_JSON_BODY}-byte bodies for {duration:?}",
        bodies.len()
    );
    let cpu_before = cpu_seconds(root_pid).unwrap_or(0.0);
    let load = tokio::task::spawn_blocking(move || {
        put_under_load(&kubeconfig, &bodies, clients, duration)
    })
    .await??;
    let cpu = cpu_seconds(root_pid).unwrap_or(0.0) - cpu_before;

    // The root still answers, its API as well as its health.
    let client = fleet.root_client().await?;
    let (healthz, _) = request(&client, "GET", "/healthz", None).await?;
    let (list, _) = request(&client, "GET", CONFIGMAPS, None).await?;

    let (posts, refused) = load.counts();
    let mut latencies: Vec<f64> = load.healthz.iter().map(|(_, took, _)| *took).collect();
    let failed_healthz = load.healthz.iter().filter(|(_, _, ok)| !ok).count();
    let max = latencies.iter().copied().fold(0.0, f64::max);
    report.figure(
        Figure::new(
            format!("/healthz max, {clients} clients posting worst-case bodies"),
            max * 1000.0,
            "ms",
        )
        .with_goal("under 1 s", |ms| ms < HEALTHZ_GOAL_SECS * 1000.0),
    );
    report.figure(Figure::new(
        format!("/healthz p99, {clients} clients posting worst-case bodies"),
        quantile(&mut latencies, 0.99) * 1000.0,
        "ms",
    ));
    report.figure(Figure::new(
        "/healthz requests",
        load.healthz.len() as f64,
        "requests",
    ));
    report.figure(Figure::new(
        format!("worst-case bodies posted in {} s", duration.as_secs_f64()),
        posts as f64,
        "requests",
    ));
    let others = (posts - refused) as f64 + load.unanswered.len() as f64;
    report.figure(
        Figure::new(
            "posts answered otherwise than with a 4xx, or not at all",
            others,
            "requests",
        )
        .with_goal("none", |count| count == 0.0),
    );
    report.figure(
        Figure::new(
            "/healthz answers other than 200",
            failed_healthz as f64,
            "requests",
        )
        .with_goal("none", |count| count == 0.0),
    );
    report.figure(Figure::new("root CPU meanwhile", cpu, "s"));
    let mut table = String::from(
        "Each worst-case body posted to the root: its answers by status, and the median time \
         of a post, sending included.\n\n| body | posts | answers | median post |\n\
         |---|---:|---|---:|\n",
    );
    for (name, posted) in &load.posts {
        let codes: Vec<String> = posted
            .codes
            .iter()
            .map(|(code, count)| format!("{count} × {code}"))
            .collect();
        let mut seconds = posted.seconds.clone();
        table.push_str(&format!(
            "| {name} | {} | {} | {:.0} ms |\n",
            seconds.len(),
            codes.join(", "),
            quantile(&mut seconds, 0.5) * 1000.0
        ));
    }
    report.notes.push(table.trim_end().to_string());
    report.series.push(Series {
        title: format!("/healthz while {clients} clients post worst-case bodies"),
        x_label: "seconds into the run".into(),
        y_label: "ms".into(),
        lines: vec![Line {
            label: "/healthz".into(),
            points: load
                .healthz
                .iter()
                .map(|(at, took, _)| (*at, took * 1000.0))
                .collect(),
        }],
    });
    report.details = json!({"unanswered": load.unanswered,
        "afterwards": {"healthz": healthz, "list": list}});
    if healthz != 200 || list != 200 {
        bail!("after the load the root answers /healthz {healthz} and a list {list}");
    }
    Ok(())
}

/// `clients` threads post `bodies` in turn for `duration`, and one more
/// asks `/healthz` every 100 ms meanwhile; each thread with its own runtime
/// and connection, so none waits for another.
fn put_under_load(
    kubeconfig: &Path,
    bodies: &[Body],
    clients: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    let start = Instant::now();
    let deadline = start + duration;
    std::thread::scope(|scope| {
        let posters: Vec<_> = (0..clients)
            .map(|index| {
                scope.spawn(move || {
                    on_own_runtime(kubeconfig, |client| async move {
                        let mut load = Load::default();
                        let mut next = index;
                        while Instant::now() < deadline {
                            let (name, content_type, body) = &bodies[next % bodies.len()];
                            next += 1;
                            let posted = Instant::now();
                            let answer = tokio::time::timeout(
                                REQUEST_TIMEOUT,
                                request(&client, "POST", CONFIGMAPS, Some((*content_type, body))),
                            )
                            .await;
                            match answer {
                                Ok(Ok((code, _))) => {
                                    let posts = load.posts.entry(*name).or_default();
                                    *posts.codes.entry(code).or_default() += 1;
                                    posts.seconds.push(posted.elapsed().as_secs_f64());
                                }
                                Ok(Err(error)) => {
                                    load.unanswered.push(format!("{name}: {error:#}"));
                                }
                                Err(_) => load
                                    .unanswered
                                    .push(format!("{name}: no answer in {REQUEST_TIMEOUT:?}")),
                            }
                        }
                        Ok(load)
                    })
                })
            })
            .collect();
        let healthz = scope.spawn(move || {
            on_own_runtime(kubeconfig, |client| async move {
                let mut load = Load::default();
                // Connected first, so the first time is not a handshake's.
                request(&client, "GET", "/healthz", None).await?;
                let mut ticks = tokio::time::interval(HEALTHZ_EVERY);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while Instant::now() < deadline {
                    ticks.tick().await;
                    let asked = Instant::now();
                    let answer = tokio::time::timeout(
                        REQUEST_TIMEOUT,
                        request(&client, "GET", "/healthz", None),
                    )
                    .await;
                    let ok = matches!(answer, Ok(Ok((200, _))));
                    load.healthz.push((
                        asked.duration_since(start).as_secs_f64(),
                        asked.elapsed().as_secs_f64(),
                        ok,
                    ));
                }
                Ok(load)
            })
        });
        let mut all = Load::default();
        for poster in posters {
            let load = poster
                .join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
            all.absorb(load);
        }
        all.healthz = healthz
            .join()
            .map_err(|_| anyhow::anyhow!("the /healthz thread panicked"))??
            .healthz;
        Ok(all)
    })
}

/// Runs `work` with a root client on a runtime of this thread's own.
fn on_own_runtime<F, Fut>(kubeconfig: &Path, work: F) -> anyhow::Result<Load>
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Load>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = root_client(kubeconfig).await?;
        work(client).await
    })
}

/// A client of the root with the admin kubeconfig at `path`.
async fn root_client(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .with_context(|| format!("cannot use {}", path.display()))?;
    Ok(kube::Client::try_from(config)?)
}

/// One request; its status code and body.
async fn request(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<(&str, &Bytes)>,
) -> anyhow::Result<(u16, Bytes)> {
    let mut builder = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, "application/json");
    let payload = match body {
        Some((content_type, bytes)) => {
            builder = builder.header(http::header::CONTENT_TYPE, content_type);
            kube::client::Body::from(bytes.clone())
        }
        None => kube::client::Body::empty(),
    };
    let response = client.send(builder.body(payload)?).await?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await?;
    Ok((code, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_within_the_limit_are_read_and_one_level_more_is_refused() {
        for format in Format::ALL {
            assert_eq!(
                format.decode(&format.nested(depth::MAX_DEPTH)),
                Ok(()),
                "{format:?}"
            );
            for depth in [depth::MAX_DEPTH + 1, 1000] {
                let refusal = format
                    .decode(&format.nested(depth))
                    .expect_err("a body past the limit");
                assert!(
                    refusal.too_deep,
                    "{format:?} at {depth}: {}",
                    refusal.message
                );
            }
        }
    }

    #[test]
    fn filled_bodies_have_the_size_asked_and_only_the_deeper_list_is_refused() {
        let size = 64 * 1024;
        for format in Format::ALL {
            let within = format.filled(size, false);
            let over = format.filled(size, true);
            assert_eq!((within.len(), over.len()), (size, size), "{format:?}");
            assert_eq!(format.decode(&within), Ok(()), "{format:?}");
            let refusal = format.decode(&over).expect_err("one list past the limit");
            assert!(refusal.too_deep, "{format:?}: {}", refusal.message);
        }
    }

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
