//! `--log-format json`: every line a relay or an edge agent writes on
//! stderr is one JSON object with unique keys (checked key by key, as
//! serde_json's own `Value` keeps the last of two equal keys silently), with
//! the node's name and role at the top level.
//!
//! Real processes: a root, a relay below it and an edge agent below that,
//! applying a placement to a simulated cluster, all logging JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, observe, wait_for, web_workload, Mesh};
use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

const SETTLE: Duration = Duration::from_secs(60);
const JSON: [&str; 2] = ["--log-format", "json"];

#[test]
fn every_json_log_line_is_one_object_naming_its_node_and_role() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, mut root) = Mesh::init_with(&JSON)?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let mut mid = mesh.add_relay_with("mid", "root", &JSON)?;
    wait_for("mid in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "mid", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let mut agent =
        mesh.add_agent_for_with("edge-1", "mid", "region=eu", cluster.kubeconfig(), &JSON)?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "mid").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    // A placement, so the agent logs inside its placement spans too.
    mesh.apply(&web_workload(
        "nginx:1.26",
        1,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    wait_for("web ready on edge-1", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == 1).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    for process in [&mut agent, &mut mid, &mut root] {
        process.stop()?;
    }

    let expected = [("root", "relay"), ("mid", "relay"), ("edge-1", "agent")];
    for (node, role) in expected {
        let log = std::fs::read_to_string(mesh.dir.path().join(format!("{node}.log")))?;
        let mut spans = BTreeMap::new();
        let mut lines = 0;
        for (number, line) in log.lines().enumerate() {
            let object = unique_keys_object(line)
                .with_context(|| format!("{node}.log line {}: {line}", number + 1))?;
            let field = |key: &str| object.get(key).cloned().unwrap_or_default();
            assert_eq!(field("node"), node, "{node}.log: {line}");
            assert_eq!(field("role"), role, "{node}.log: {line}");
            assert!(field("fields").is_object(), "{node}.log: {line}");
            for span in field("spans").as_array().into_iter().flatten() {
                if let Some(name) = span["name"].as_str() {
                    *spans.entry(name.to_string()).or_insert(0) += 1;
                }
            }
            lines += 1;
        }
        observe(format!("{node}.log: {lines} lines, spans {spans:?}"));
        assert!(lines > 3, "{node}.log logged: {log}");
        // The lines that once repeated the key: the daemon's span, with the
        // node's name in it.
        assert!(spans.contains_key("relay"), "{node}.log spans: {spans:?}");
    }
    let agent_log = std::fs::read_to_string(mesh.dir.path().join("edge-1.log"))?;
    assert!(
        agent_log.contains(r#""name":"placement""#),
        "the agent logged inside a placement span: {agent_log}"
    );
    Ok(())
}

/// `line` as a JSON object, refused if any object in it has a key twice.
fn unique_keys_object(line: &str) -> anyhow::Result<Map<String, Value>> {
    let UniqueKeys(value) = serde_json::from_str(line)?;
    match value {
        Value::Object(object) => Ok(object),
        other => anyhow::bail!("not an object: {other}"),
    }
}

/// A JSON value whose objects, at every depth, have unique keys.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("JSON whose objects have unique keys")
    }

    fn visit_bool<E>(self, value: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(value.into()))
    }

    fn visit_i64<E>(self, value: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(value.into()))
    }

    fn visit_str<E>(self, value: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(value.into()))
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(UniqueKeys(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let UniqueKeys(value) = map.next_value()?;
            if object.insert(key.clone(), value).is_some() {
                return Err(A::Error::custom(format!("the key {key:?} appears twice")));
            }
        }
        Ok(UniqueKeys(Value::Object(object)))
    }
}

#[test]
fn the_check_refuses_a_repeated_key() {
    let repeated = r#"{"span":{"name":"relay","name":"x1"}}"#;
    let error = unique_keys_object(repeated)
        .err()
        .map(|error| error.to_string());
    assert!(
        error
            .as_deref()
            .is_some_and(|error| error.contains(r#"the key "name" appears twice"#)),
        "{error:?}"
    );
    assert!(unique_keys_object(r#"{"a":{"b":[{"c":1}]}}"#).is_ok());
}
