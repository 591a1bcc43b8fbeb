//! Part two of `testbed bench decode`: a root relay process under client
//! threads posting worst-case bodies, while one more thread times
//! `/healthz`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use relaymesh_apiserver::http::MAX_JSON_BODY;
use serde_json::json;

use super::super::report::{cpu_seconds, quantile, Figure, Line, Report, Series};
use super::bodies::{worst_bodies, Body};
use super::{DecodeOptions, CONFIGMAPS};
use crate::up::{kube_client, plan::ROOT, Fleet, UpOptions};

/// How often `/healthz` is asked.
const HEALTHZ_EVERY: Duration = Duration::from_millis(100);
/// How long one request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The goal for `/healthz` under load, from issue 29.
const HEALTHZ_GOAL_SECS: f64 = 1.0;

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

/// Part two: the root under worst-case bodies.
pub(super) async fn over_https(options: &DecodeOptions, report: &mut Report) -> anyhow::Result<()> {
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
        let client = kube_client(kubeconfig).await?;
        work(client).await
    })
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
