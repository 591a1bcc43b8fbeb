//! A rotation of the mesh CA on a three-level tree:
//! root ── {eu ── eu-west ── edge-2, edge-1}. `relayctl rotate mesh-ca
//! start --wait` returns once every node's chain reaches the new CA, every
//! node trusts both, every relay's issuer key is a new one and every node
//! is signed by its parent's new key; `finish --wait` once every node
//! trusts the new CA alone. Through both, no link drops and no cluster is
//! asked to change anything. Afterwards, handshakes work on the new CA and
//! the relays' new keys alone: a relay restarts and a new agent joins with
//! a token naming its parent's new key.
//!
//! The token-signing key on the same tree: start, finish, and afterwards
//! a new revision arrives through entries the new key signed, a token the
//! old key signed is refused and one the new key signed joins.
//!
//! And the root's API serving certificate, replaced by `relayctl rotate
//! api-cert now`: what a TLS client gets from then on, verified against
//! the API CA in the admin's kubeconfig, after a restart too. And the API
//! CA: every kubeconfig works while it rotates, and only those made
//! since it started work once it finished.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    audited, connected_under, kubectl_get, observe, relayctl_as, wait_for, web_image, web_workload,
    Mesh, RelayProcess,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

/// Each node and its parent.
const TREE: [(&str, &str); 4] = [
    ("eu", "root"),
    ("eu-west", "eu"),
    ("edge-1", "root"),
    ("edge-2", "eu-west"),
];

/// How often `process` lost its parent link, by its log.
fn links_lost(process: &RelayProcess) -> anyhow::Result<usize> {
    Ok(std::fs::read_to_string(&process.log)?
        .matches("parent link lost")
        .count())
}

/// The root's `MeshCARotation` status, as `relayctl rotate mesh-ca status
/// -o json` prints it.
fn rotation(mesh: &Mesh, args: &[&str]) -> anyhow::Result<Value> {
    let mut all = vec!["rotate", "mesh-ca"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let text = mesh.relayctl_ok(&all)?;
    Ok(serde_json::from_str::<Value>(&text)?["status"].clone())
}

/// The issuer key relay `name` reports, as the root's Relay object says.
fn issuer_key(mesh: &Mesh, name: &str) -> anyhow::Result<Value> {
    let relay = kubectl_get(&mesh.kubeconfig(), &["relays", name])?
        .with_context(|| format!("no relay {name}"))?;
    Ok(relay["metadata"]["labels"]["relaymesh.dev/issuer-key"].clone())
}

fn all_connected(mesh: &Mesh) -> anyhow::Result<bool> {
    let tree = mesh.tree()?;
    Ok(TREE
        .iter()
        .all(|(name, parent)| connected_under(&tree, name, parent)))
}

fn ready_at_root(root: &Path) -> anyhow::Result<Option<()>> {
    let clusters = kubectl_get(root, &["placements", "web", "-n", "shop"])?
        .map(|placement| placement["status"]["clusters"].clone())
        .unwrap_or_default();
    observe(&clusters);
    Ok((clusters["selected"] == 2 && clusters["ready"] == 2).then_some(()))
}

#[test]
fn the_mesh_ca_rotates_with_every_link_up_and_no_cluster_asked_anything() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, root) = Mesh::init()?;
    let eu = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut west = mesh.add_relay_connected("eu-west", "eu", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, parent) in [("edge-1", "root"), ("edge-2", "eu-west")] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, parent, "region=eu", cluster.kubeconfig())?);
        clusters.push(cluster);
    }
    wait_for("the tree", SETTLE, || {
        Ok(all_connected(&mesh)?.then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.apply(&web_workload(
        "nginx:1.27",
        2,
        "{labelSelector: {matchLabels: {region: eu}}}",
        "",
    ))?;
    for cluster in &clusters {
        wait_for(&format!("web on {}", cluster.name()), SETTLE, || {
            Ok((web_image(cluster.kubeconfig())?.as_deref() == Some("nginx:1.27")).then_some(()))
        })
        .with_context(|| mesh.logs())?;
    }
    wait_for("both ready at the root", SETTLE, || {
        ready_at_root(&mesh.kubeconfig())
    })
    .with_context(|| mesh.logs())?;
    let audit_before: Vec<usize> = clusters
        .iter()
        .map(|cluster| audited(cluster.audit_log()).map(|lines| lines.len()))
        .collect::<Result<_, _>>()?;
    let processes: Vec<&RelayProcess> = [&root, &eu, &west].into_iter().chain(&agents).collect();
    let lost_before: Vec<usize> = processes
        .iter()
        .map(|process| links_lost(process))
        .collect::<Result<_, _>>()?;

    // Before any rotation: one CA, every node on it.
    let steady = wait_for("every node reports its mesh CA", SETTLE, || {
        let status = rotation(&mesh, &["status"])?;
        observe(&status);
        Ok((status["nodes"]["total"] == 4 && status["nodes"]["pending"] == 0).then_some(status))
    })?;
    assert_eq!(steady["phase"], "Steady");
    let old = steady["signer"].clone();
    assert_eq!(steady["trusted"], serde_json::json!([old.clone()]));
    let keys_before = [issuer_key(&mesh, "eu")?, issuer_key(&mesh, "eu-west")?];
    assert!(keys_before.iter().all(Value::is_string), "{keys_before:?}");
    let refused = mesh.relayctl(&["rotate", "mesh-ca", "finish"])?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("no rotation of the mesh CA is under way"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Start: every node moves over to the new CA and trusts both.
    let started =
        rotation(&mesh, &["start", "--wait", "--timeout", "3m"]).with_context(|| mesh.logs())?;
    observe(&started);
    assert_eq!(started["phase"], "Rotating");
    let new = started["signer"].clone();
    assert_ne!(new, old);
    assert_eq!(
        started["trusted"],
        serde_json::json!([old.clone(), new.clone()])
    );
    assert_eq!(started["nodes"]["movedOver"], 4);
    // Every relay's issuer key is a new one, and the root recorded it.
    let keys_started = [issuer_key(&mesh, "eu")?, issuer_key(&mesh, "eu-west")?];
    for (before, after) in keys_before.iter().zip(&keys_started) {
        assert!(after.is_string() && after != before, "{before} → {after}");
    }
    let again = mesh.relayctl(&["rotate", "mesh-ca", "start"])?;
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("under way; finish it first"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // Finish: every node trusts the new CA alone.
    let finished =
        rotation(&mesh, &["finish", "--wait", "--timeout", "3m"]).with_context(|| mesh.logs())?;
    observe(&finished);
    assert_eq!(finished["phase"], "Steady");
    assert_eq!(finished["signer"], new);
    assert_eq!(finished["trusted"], serde_json::json!([new.clone()]));
    assert_eq!(finished["nodes"]["movedOver"], 4);
    assert_eq!(
        [issuer_key(&mesh, "eu")?, issuer_key(&mesh, "eu-west")?],
        keys_started
    );

    // No link dropped, and no cluster was asked anything.
    assert!(all_connected(&mesh)?, "{}", mesh.logs());
    for (process, before) in processes.iter().zip(&lost_before) {
        assert_eq!(
            links_lost(process)?,
            *before,
            "{} lost its parent link during the rotation",
            process.name
        );
    }
    for (cluster, before) in clusters.iter().zip(&audit_before) {
        let after = audited(cluster.audit_log())?;
        assert_eq!(
            after.len(),
            *before,
            "{} was asked to change something during the rotation: {:?}",
            cluster.name(),
            &after[(*before).min(after.len())..]
        );
    }
    ready_at_root(&mesh.kubeconfig())?.context("both still ready at the root")?;

    // New handshakes rest on the new CA and the new issuer keys alone:
    // eu-west dials eu again, edge-2 dials eu-west again, and a new agent
    // joins below it with a token that pins the new CA and names
    // eu-west's new key (eu-west no longer serves anything the old one
    // signed).
    west.stop()?;
    let _west = mesh.start("eu-west")?;
    let _late = mesh.add_agent("late", "eu-west", "region=us")?;
    wait_for("eu-west back and late below it", SETTLE, || {
        let tree = mesh.tree()?;
        Ok((all_connected(&mesh)? && connected_under(&tree, "late", "eu-west")).then_some(()))
    })
    .with_context(|| mesh.logs())?;
    for mut agent in agents {
        agent.stop()?;
    }
    for cluster in clusters {
        runtime.block_on(cluster.shutdown())?;
    }
    Ok(())
}

/// The leaf certificate the root's API serves now, from a TLS handshake
/// that verifies it against the API CA the admin's kubeconfig trusts.
fn served_api_leaf(mesh: &Mesh) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Runtime::new()?;
    let kubeconfig = kube::config::Kubeconfig::read_from(mesh.kubeconfig())?;
    let config = runtime.block_on(kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    ))?;
    let mut roots = rustls::RootCertStore::empty();
    for der in config.root_cert.context("the kubeconfig names a CA")? {
        roots.add(der.into())?;
    }
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut connection = rustls::ClientConnection::new(Arc::new(client), "127.0.0.1".try_into()?)?;
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", mesh.api_port))?;
    while connection.is_handshaking() {
        connection.complete_io(&mut socket)?;
    }
    let leaf = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .context("the API presented no certificate")?;
    Ok(relaymesh_node::pki::hex(&relaymesh_node::pki::sha256(leaf)))
}

/// `relayctl rotate api-cert ACTION -o json`'s `status.sha256`.
fn api_cert(mesh: &Mesh, action: &str) -> anyhow::Result<String> {
    let text = mesh.relayctl_ok(&["rotate", "api-cert", action, "-o", "json"])?;
    let object: Value = serde_json::from_str(&text)?;
    Ok(object["status"]["sha256"]
        .as_str()
        .context("a fingerprint")?
        .to_string())
}

#[test]
fn the_api_serving_certificate_rotates_and_kubeconfigs_keep_working() -> anyhow::Result<()> {
    let (mesh, mut root) = Mesh::init()?;
    let before = served_api_leaf(&mesh)?;
    assert_eq!(api_cert(&mesh, "status")?, before);

    // Only a holder of the verb `rotate` may.
    let operator = mesh.user_kubeconfig("op", "operators")?;
    let refused = relayctl_as(&operator, &["rotate", "api-cert", "now"])?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(served_api_leaf(&mesh)?, before);

    let rotated = api_cert(&mesh, "now")?;
    assert_ne!(rotated, before);
    assert_eq!(served_api_leaf(&mesh)?, rotated);
    // The admin's kubeconfig, unchanged, still works.
    kubectl_get(&mesh.kubeconfig(), &["clusters"])?;

    // A restart serves what was rotated.
    root.stop()?;
    let _root = mesh.start("root")?;
    wait_for("the API back with the rotated certificate", SETTLE, || {
        Ok(served_api_leaf(&mesh)
            .ok()
            .filter(|served| *served == rotated)
            .map(|_| ()))
    })
    .with_context(|| mesh.logs())?;
    Ok(())
}

/// relayctl with `kubeconfig`; its stdout as JSON, or an error with its
/// stderr.
fn relayctl_json(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    let output = relayctl_as(kubeconfig, &all)?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Whether `kubectl get clusters` works with `kubeconfig`.
fn works(kubeconfig: &Path) -> anyhow::Result<bool> {
    Ok(
        relaymesh_tests::kubectl(kubeconfig, &["get", "clusters"], None)?
            .status
            .success(),
    )
}

#[test]
fn the_api_ca_rotates_and_only_kubeconfigs_made_since_its_start_outlive_it() -> anyhow::Result<()> {
    let (mesh, mut root) = Mesh::init()?;
    let old_admin = mesh.kubeconfig();
    let early = mesh.user_kubeconfig_by(&old_admin, "early", "viewers")?;
    let steady = relayctl_json(&old_admin, &["rotate", "api-ca", "status"])?;
    assert_eq!(steady["status"]["phase"], "Steady");
    let old_ca = steady["status"]["signingCA"].clone();
    let refused = relayctl_as(&old_admin, &["rotate", "api-ca", "finish"])?;
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no rotation of the API CA"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let started = relayctl_json(&old_admin, &["rotate", "api-ca", "start"])?;
    assert_eq!(started["status"]["phase"], "Rotating");
    assert_eq!(started["status"]["retiringCA"], old_ca);
    assert_ne!(started["status"]["signingCA"], old_ca);
    assert_eq!(
        started["status"]["servingCertificate"], steady["status"]["servingCertificate"],
        "the API keeps serving the old CA's certificate"
    );
    // Every kubeconfig works while the CA rotates, and new users get
    // certificates of the new CA in kubeconfigs that trust both.
    assert!(works(&old_admin)? && works(&early)?);
    let admin = mesh.user_kubeconfig_by(&old_admin, "admin-2", "admins")?;
    let late = mesh.user_kubeconfig_by(&old_admin, "late", "viewers")?;
    assert!(works(&admin)? && works(&late)?);

    let finished = relayctl_json(&admin, &["rotate", "api-ca", "finish"])?;
    assert_eq!(finished["status"]["phase"], "Steady");
    assert_eq!(
        finished["status"]["signingCA"],
        started["status"]["signingCA"]
    );
    assert_ne!(
        finished["status"]["servingCertificate"],
        steady["status"]["servingCertificate"]
    );
    // Kubeconfigs made before the start trust only the old CA, and their
    // certificates come from it: refused. Those made since work.
    assert!(!works(&old_admin)? && !works(&early)?);
    assert!(works(&admin)? && works(&late)?);

    // After a restart too.
    root.stop()?;
    let _root = mesh.start("root")?;
    wait_for("the API back", SETTLE, || Ok(works(&admin)?.then_some(())))
        .with_context(|| mesh.logs())?;
    assert!(!works(&old_admin)?);
    let after = relayctl_json(&admin, &["rotate", "api-ca", "status"])?;
    assert_eq!(after["status"], finished["status"]);
    Ok(())
}

#[test]
fn the_token_key_rotates_and_the_tree_takes_only_the_new_one_after() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, root) = Mesh::init()?;
    let eu = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let west = mesh.add_relay_connected("eu-west", "eu", SETTLE)?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-2",
        &mesh.dir.path().join("cluster-edge-2"),
        SimulatorOptions::default(),
    ))?;
    let mut agent = mesh.add_agent_for("edge-2", "eu-west", "region=eu", cluster.kubeconfig())?;
    let placed = |tag: &str| {
        let image = format!("nginx:{tag}");
        wait_for(&format!("{image} on edge-2"), SETTLE, || {
            Ok((web_image(cluster.kubeconfig())?.as_deref() == Some(image.as_str())).then_some(()))
        })
        .with_context(|| mesh.logs())
    };
    let placement = |tag: &str| {
        web_workload(
            &format!("nginx:{tag}"),
            1,
            "{labelSelector: {matchLabels: {region: eu}}}",
            "",
        )
    };
    mesh.apply(&placement("1.27"))?;
    placed("1.27")?;
    let audit_before = audited(cluster.audit_log())?.len();
    let processes = [&root, &eu, &west, &agent];
    let lost_before: Vec<usize> = processes
        .iter()
        .map(|process| links_lost(process))
        .collect::<Result<_, _>>()?;
    let status = |args: &[&str]| -> anyhow::Result<Value> {
        let mut all = vec!["rotate", "token-key"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        Ok(serde_json::from_str::<Value>(&mesh.relayctl_ok(&all)?)?["status"].clone())
    };

    let steady = wait_for("every node reports its token key", SETTLE, || {
        let steady = status(&["status"])?;
        observe(&steady);
        Ok((steady["nodes"]["total"] == 3 && steady["nodes"]["pending"] == 0).then_some(steady))
    })?;
    assert_eq!(steady["phase"], "Steady");
    let old = steady["signer"].clone();
    let refused = mesh.relayctl(&["rotate", "token-key", "finish"])?;
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no rotation of the token-signing key"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let started = status(&["start", "--wait", "--timeout", "3m"]).with_context(|| mesh.logs())?;
    assert_eq!(started["phase"], "Rotating");
    assert_eq!(started["signer"], old, "the old key signs until the finish");
    let new = started["accepted"][1].clone();
    assert_eq!(
        started["accepted"],
        serde_json::json!([old.clone(), new.clone()])
    );
    // A token the old key signs now, used after the finish.
    let early = mesh.token("relay", "early", Some("eu-west"), "10m")?;

    let finished = status(&["finish", "--wait", "--timeout", "3m"]).with_context(|| mesh.logs())?;
    assert_eq!(finished["phase"], "Steady");
    assert_eq!(finished["signer"], new);
    assert_eq!(finished["accepted"], serde_json::json!([new.clone()]));
    assert_eq!(
        audited(cluster.audit_log())?.len(),
        audit_before,
        "entries signed again must not apply anything"
    );
    for (process, before) in processes.iter().zip(&lost_before) {
        assert_eq!(
            links_lost(process)?,
            *before,
            "{} lost its parent link",
            process.name
        );
    }

    // What the new key signs reaches the cluster through every relay.
    mesh.apply(&placement("1.28"))?;
    placed("1.28")?;
    // The old key's token is refused; the new key's joins.
    let joined = mesh.join("early", &early)?;
    let said = String::from_utf8_lossy(&joined.stderr);
    assert!(
        !joined.status.success() && said.contains("signature"),
        "a token the old key signed: {said}"
    );
    let _late = mesh.add_relay_connected("late", "eu-west", SETTLE)?;
    agent.stop()?;
    runtime.block_on(cluster.shutdown())?;
    Ok(())
}
