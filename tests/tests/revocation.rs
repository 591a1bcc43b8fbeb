//! Revocation end to end: `relayctl revoke` cuts a connected relay off, it
//! cannot come back, and its children return only with new tokens under
//! another parent; `relayctl token revoke` voids a token no relay has seen.
//! Real `relay` processes on loopback, real sled directories.

use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use relaymesh_tests::{connected_under, find_node, observe, wait_for, Mesh, RelayProcess};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(30);

/// What the issue asks of a revocation: the link is gone within this.
const CUT_OFF: Duration = Duration::from_secs(5);

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Whether `process`'s log holds `needle`.
fn logged(process: &RelayProcess, needle: &str) -> anyhow::Result<bool> {
    let log = std::fs::read_to_string(&process.log)?;
    let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join("\n");
    observe(format_args!("{} log, last lines: {tail}", process.name));
    Ok(log.contains(needle))
}

/// `relayctl token list -o json`.
fn tokens(mesh: &Mesh) -> anyhow::Result<Vec<Value>> {
    let output = mesh.relayctl(&["token", "list", "-o", "json"])?;
    anyhow::ensure!(output.status.success(), "{}", text(&output));
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// The listed token for `name`, which must be the only one.
fn token_for<'a>(tokens: &'a [Value], name: &str) -> anyhow::Result<&'a Value> {
    let mut found = tokens.iter().filter(|token| token["spec"]["name"] == name);
    match (found.next(), found.next()) {
        (Some(token), None) => Ok(token),
        _ => anyhow::bail!("expected one token for {name}: {tokens:?}"),
    }
}

/// root ─┬─ eu ── eu-west
///       └─ us
#[test]
fn a_revoked_relay_is_cut_off_and_its_children_return_only_with_new_tokens() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let eu = mesh.add_relay("eu", "root")?;
    let _us = mesh.add_relay("us", "root")?;
    wait_for("eu and us in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "eu", "root") && connected_under(&tree, "us", "root"))
                .then_some(()),
        )
    })?;
    let mut west = mesh.add_relay("eu-west", "eu")?;
    wait_for("eu-west under eu", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu-west", "eu").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    // A token for eu that was never used: a thief holding it must not
    // bring eu back.
    let spare = mesh.token("relay", "eu", None, "10m")?;

    let started = Instant::now();
    let revoked = mesh.relayctl(&["revoke", "eu"])?;
    assert!(revoked.status.success(), "{}", text(&revoked));
    let said = text(&revoked);
    assert!(said.contains("revoked \"eu\""), "{said}");
    assert!(
        said.contains("removed from the tree: eu, eu-west"),
        "{said}"
    );

    // The root closed eu's link, and eu and its subtree left the inventory.
    wait_for("the root to cut eu off", CUT_OFF, || {
        let tree = mesh.tree()?;
        let gone = find_node(&tree, "eu").is_none() && find_node(&tree, "eu-west").is_none();
        Ok((gone && logged(&eu, "was revoked by the root")?).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    eprintln!(
        "eu was cut off {:?} after relayctl revoke",
        started.elapsed()
    );

    // eu keeps dialing and is refused for its certificate, not let back in.
    wait_for("eu's reconnection to be refused", SETTLE, || {
        Ok(logged(&eu, "a certificate issued to it at")?.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let tree = mesh.tree()?;
    assert!(find_node(&tree, "eu").is_none(), "{tree}");
    assert!(connected_under(&tree, "us", "root"), "{tree}");

    // eu's tokens went with it, the unused one included.
    let listed = tokens(&mesh)?;
    let of_eu: Vec<&Value> = listed
        .iter()
        .filter(|token| token["spec"]["name"] == "eu")
        .collect();
    assert_eq!(of_eu.len(), 2, "{listed:?}");
    assert!(
        of_eu
            .iter()
            .all(|token| token["status"]["state"] == "Revoked"),
        "{listed:?}"
    );
    assert_eq!(token_for(&listed, "eu-west")?["status"]["state"], "Valid");
    let spare_join = mesh.join_in("eu-thief", "eu", &spare)?;
    assert!(!spare_join.status.success());
    assert!(
        text(&spare_join).contains("was revoked"),
        "{}",
        text(&spare_join)
    );

    // eu-west's old identity names eu as its parent and chains to eu's
    // revoked issuer: it reaches no other relay (the root's and every
    // relay's deny list would refuse the chain too; see deny_list's tests).
    west.stop()?;
    let us_address = mesh.advertised_address("us")?;
    let stray = mesh.start_with("eu-west", &["--parent-address", &us_address])?;
    wait_for("eu-west's old identity to fail at us", SETTLE, || {
        Ok(logged(&stray, "certificate not valid for name \"eu\"")?.then_some(()))
    })?;
    drop(stray);
    assert!(find_node(&mesh.tree()?, "eu-west").is_none());

    // With a new token, under a new parent, eu-west is back.
    let token = mesh.token("relay", "eu-west", Some("us"), "10m")?;
    let joined = mesh.join_in("eu-west-again", "eu-west", &token)?;
    assert!(joined.status.success(), "{}", text(&joined));
    let _west = mesh.start("eu-west-again")?;
    wait_for("eu-west under us", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu-west", "us").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    let listed = mesh.relayctl(&["revoke", "--list"])?;
    assert!(listed.status.success(), "{}", text(&listed));
    let said = text(&listed);
    assert!(
        said.lines()
            .any(|line| line.starts_with("node") && line.contains("eu ")),
        "{said}"
    );
    Ok(())
}

#[test]
fn a_revoked_token_joins_no_one() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let token = mesh.token("agent", "edge-1", None, "10m")?;
    let listed = tokens(&mesh)?;
    let entry = token_for(&listed, "edge-1")?;
    assert_eq!(entry["status"]["state"], "Valid");
    assert_eq!(entry["spec"]["parent"], "root");
    let id = entry["metadata"]["name"]
        .as_str()
        .context("the token has an id")?
        .to_string();

    let revoked = mesh.relayctl(&["token", "revoke", &id])?;
    assert!(revoked.status.success(), "{}", text(&revoked));
    let listed = tokens(&mesh)?;
    assert_eq!(token_for(&listed, "edge-1")?["status"]["state"], "Revoked");
    let unknown = mesh.relayctl(&["token", "revoke", &"0".repeat(32)])?;
    assert!(!unknown.status.success());
    assert!(text(&unknown).contains("not found"), "{}", text(&unknown));

    // The token still verifies; the root's deny list refuses it.
    let output = std::process::Command::new(relaymesh_tests::binary("edge-agent")?)
        .arg("join")
        .arg("--data-dir")
        .arg(mesh.data_dir("edge-1"))
        .args(["--name", "edge-1", "--token", &token, "--no-cluster"])
        .output()?;
    assert!(!output.status.success());
    assert!(text(&output).contains("was revoked"), "{}", text(&output));
    let tree = mesh.tree()?;
    assert!(find_node(&tree, "edge-1").is_none(), "{tree}");
    Ok(())
}

/// The number after `field=` in a log line, if it has one.
fn field(line: &str, field: &str) -> Option<u64> {
    let (_, rest) = line.split_once(&format!(" {field}="))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The lines of `process`'s log that hold `needle`.
fn lines_with(process: &RelayProcess, needle: &str) -> anyhow::Result<Vec<String>> {
    let log = std::fs::read_to_string(&process.log)?;
    Ok(log
        .lines()
        .filter(|line| line.contains(needle))
        .map(str::to_string)
        .collect())
}

/// root ── eu, then eu revoked: eu keeps dialing, but each refusal makes
/// it wait longer (it says how long), and the root logs its refusals once
/// per interval (5 s here, by flag) with a count, not once per attempt.
#[test]
fn a_revoked_relay_backs_off_and_its_parent_logs_it_once_per_interval() -> anyhow::Result<()> {
    let (mesh, root) = Mesh::init_with(&["--refusal-log-interval", "5s"])?;
    let eu = mesh.add_relay("eu", "root")?;
    wait_for("eu under the root", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let revoked = mesh.relayctl(&["revoke", "eu"])?;
    assert!(revoked.status.success(), "{}", text(&revoked));

    // The delays eu announces after each refusal, in order.
    let announced = || -> anyhow::Result<Vec<u64>> {
        let lines = lines_with(&eu, "refused by the parent (revoked)")?;
        observe(format_args!("eu's refusals: {lines:?}"));
        lines
            .iter()
            .map(|line| field(line, "next_attempt_ms").context("a refusal names its next attempt"))
            .collect()
    };
    // Refusal ceilings 1 s, 2 s, 4 s, 8 s, 16 s: the fifth waits 8 s at
    // least, after about 15 s of attempts.
    let delays = wait_for(
        "eu to announce a wait of 8 s or more",
        Duration::from_secs(90),
        || {
            let delays = announced()?;
            Ok(delays.iter().any(|delay| *delay >= 8_000).then_some(delays))
        },
    )
    .with_context(|| mesh.logs())?;
    eprintln!("eu's announced waits after each refusal, in ms: {delays:?}");
    assert!(delays.len() >= 4, "{delays:?}");
    // Each delay is drawn from [ceiling/2, ceiling] and the ceiling
    // doubles, so they never shrink.
    assert!(
        delays.windows(2).all(|pair| pair[0] <= pair[1]),
        "refusal delays shrank: {delays:?}"
    );
    assert!(
        delays[0] <= 1_000,
        "the first refusal waits at most 1 s: {delays:?}"
    );

    // The root refused eu at every attempt but wrote a line per interval:
    // the first at once, a later one counting the attempts since.
    let lines: Vec<String> = lines_with(&root, "refused a revoked node")?
        .into_iter()
        .filter(|line| line.contains("node=eu"))
        .collect();
    let times: Vec<u64> = lines
        .iter()
        .map(|line| field(line, "times").context("a refusal line counts"))
        .collect::<anyhow::Result<_>>()?;
    let refusals = announced()?.len();
    eprintln!("the root's lines about eu's {refusals} refusals: times={times:?}");
    assert_eq!(times.first(), Some(&1), "{lines:#?}");
    assert!(
        times.iter().any(|times| *times >= 2),
        "a line stands for several refusals: {lines:#?}"
    );
    assert!(
        lines.len() <= refusals,
        "{} lines at the root for {refusals} refusals: {lines:#?}",
        lines.len()
    );
    Ok(())
}
