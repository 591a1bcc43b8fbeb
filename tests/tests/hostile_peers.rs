//! Two rows of the authorization matrix (docs/security.md) that need a
//! peer which does not follow the protocol's rules, over real QUIC links
//! between real processes:
//!
//! * an agent, with a real certificate from its relay, reports a cluster
//!   below itself and claims to be a relay under the root: its relay keeps
//!   only what the certificate says, and the root never sees the ghost;
//! * a compromised middle relay (its own keys, at its own address) alters a
//!   slice entry's body, then swaps its bundle id for a bundle of its own:
//!   the edge agent below refuses both, fetches nothing, applies nothing,
//!   and reports the integrity alarm up;
//! * a relay poses as a relay below it to joining nodes, with an issuer it
//!   made in that relay's name, at that relay's address: `edge-agent join`
//!   and `relay join` refuse it by key and hand it nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_node::identity::Identity;
use relaymesh_node::pki;
use relaymesh_node::store::Store;
use relaymesh_node::transport::uplink::{connect_nearest, open_control, Endpoints};
use relaymesh_node::transport::{expect_frame, join, read_frame, write_frame, LinkError};
use relaymesh_protocol::message::{
    BundleReply, DownMessage, Hello, JoinGrant, Open, UpMessage, Welcome,
};
use relaymesh_protocol::{
    BundleId, InventoryUpdate, NodeRecord, PlacementBody, Role, SliceChange, SliceEntry,
    PROTOCOL_VERSION,
};
use relaymesh_root::placement;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{connected_under, kubectl, observe, wait_for, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

fn record(name: &str, role: Role, parent: &str, capacity: &[(&str, &str)]) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        role,
        parent: Some(parent.into()),
        labels: Default::default(),
        addresses: Vec::new(),
        version: "hostile".into(),
        link: None,
        capacity: capacity
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect(),
        refused_entries: 0,
        limit_refusals: BTreeMap::new(),
    }
}

/// The root's `relayctl get clusters -o json` items.
fn clusters(mesh: &Mesh) -> anyhow::Result<Vec<Value>> {
    let output = mesh.relayctl(&["get", "clusters", "-o", "json"])?;
    anyhow::ensure!(
        output.status.success(),
        "relayctl get clusters: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let list: Value = serde_json::from_slice(&output.stdout)?;
    observe(&list);
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

#[test]
fn an_agent_speaks_only_for_itself_over_its_link() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let eu = mesh.add_relay("eu", "root")?;
    wait_for("eu under the root", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let token = mesh.token("agent", "edge", Some("eu"), "10m")?;

    // A hostile agent: a real join and a real certificate for cluster
    // `edge`, then its own messages on the control stream.
    let runtime = tokio::runtime::Runtime::new()?;
    let _link = runtime.block_on(async {
        let joined = join::join(&token, "edge", Role::Agent).await?;
        let config = pki::quic_client_config(&joined.identity)?;
        let (connection, _) =
            connect_nearest(&joined.parent, &config, &mut Endpoints::default()).await?;
        let hello = Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            resume: None,
        };
        let mut control = open_control(&connection, hello).await?;
        // It claims to be a relay right under the root, with a cluster of
        // its own below it...
        let forged = UpMessage::Inventory(InventoryUpdate::Delta {
            upserts: vec![
                record("edge", Role::Relay, "root", &[]),
                record("ghost", Role::Agent, "edge", &[]),
            ],
            removals: vec![],
        });
        write_frame(&mut control.send, &forged).await?;
        // ...then says what it may say: its own capacity. Once the root
        // shows that, it has had everything eu made of the forgery.
        let honest = UpMessage::Inventory(InventoryUpdate::Delta {
            upserts: vec![record("edge", Role::Agent, "eu", &[("cpu", "7")])],
            removals: vec![],
        });
        write_frame(&mut control.send, &honest).await?;
        anyhow::Ok((connection, control))
    })?;

    let edge = wait_for("edge's capacity at the root", SETTLE, || {
        Ok(clusters(&mesh)?.into_iter().find(|item| {
            item["metadata"]["name"] == "edge" && item["status"]["capacity"]["cpu"] == "7"
        }))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(
        edge["status"]["relayPath"],
        serde_json::json!(["root", "eu"])
    );
    assert_eq!(edge["status"]["connected"], true, "{edge}");
    let names: Vec<Value> = clusters(&mesh)?
        .iter()
        .map(|item| item["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![Value::from("edge")], "only the real cluster");

    let tree = mesh.tree()?;
    let (node, parent) = relaymesh_tests::find_node(&tree, "edge").context("edge in the tree")?;
    assert_eq!(parent, Some("eu"), "{tree}");
    assert_eq!(node["role"], "agent", "{tree}");
    assert!(
        relaymesh_tests::find_node(&tree, "ghost").is_none(),
        "{tree}"
    );
    let log = std::fs::read_to_string(&eu.log)?;
    assert!(
        log.contains("refused a node reported below an agent") && log.contains("ghost"),
        "eu logs the refusal:\n{log}"
    );
    Ok(())
}

const SETTINGS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {owner: root}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: settings, namespace: shop}
spec:
  workloads: [{kind: ConfigMap, names: [settings]}]
  clusters: {names: [edge]}
"#;

/// What the impostor saw of the agent below it.
#[derive(Debug, Default)]
struct Seen {
    /// Where the agent said it stood in its parent's history.
    resume: Option<(u64, u64)>,
    /// The newest revision the agent acknowledged.
    acked: Option<u64>,
    /// The agent's own integrity alarm count, as it reported it.
    refused_entries: Option<u64>,
    /// Every bundle the agent asked for.
    bundle_requests: Vec<BundleId>,
}

/// What the impostor sends in place of the root's decision.
#[derive(Clone)]
struct Forgery {
    /// The real entry with its body changed.
    altered_body: SliceEntry,
    /// The real entry with its bundle id swapped for the impostor's.
    altered_bundle: SliceEntry,
    /// The impostor's bundle, served to anyone who asks.
    bundle: Vec<u8>,
}

/// A relay that follows the protocol's framing but not its honesty: it
/// welcomes the child where it stands and sends it the two forgeries.
async fn impostor(endpoint: quinn::Endpoint, forgery: Forgery, seen: Arc<Mutex<Seen>>) {
    while let Some(incoming) = endpoint.accept().await {
        let Ok(connection) = incoming.await else {
            continue;
        };
        let (forgery, seen) = (forgery.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((send, mut recv)) = connection.accept_bi().await {
                let Ok(open) = expect_frame::<Open>(&mut recv).await else {
                    continue;
                };
                let (forgery, seen) = (forgery.clone(), seen.clone());
                tokio::spawn(async move {
                    let served = match open {
                        Open::Control(hello) => control(send, recv, hello, forgery, seen).await,
                        Open::Bundle(request) => bundle(send, request.id, forgery, seen).await,
                        _ => Ok(()),
                    };
                    if let Err(error) = served {
                        observe(format_args!("impostor stream ended: {error}"));
                    }
                });
            }
        });
    }
}

async fn control(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    hello: Hello,
    forgery: Forgery,
    seen: Arc<Mutex<Seen>>,
) -> Result<(), LinkError> {
    let Some(resume) = hello.resume else {
        return Err(LinkError::Local("the agent did not resume".into()));
    };
    if let Ok(mut seen) = seen.lock() {
        seen.resume = Some((resume.epoch, resume.revision));
    }
    let welcome = Welcome {
        version: PROTOCOL_VERSION,
        parent: "eu".into(),
        epoch: resume.epoch,
        ancestors: vec!["root".into()],
    };
    write_frame(&mut send, &DownMessage::Welcome(welcome)).await?;
    let base = resume.revision;
    for (at, entry) in [forgery.altered_body, forgery.altered_bundle]
        .into_iter()
        .enumerate()
    {
        let at = base + at as u64;
        let delta = DownMessage::Delta {
            base: at,
            revision: at + 1,
            changes: vec![SliceChange::Upsert(entry)],
        };
        write_frame(&mut send, &delta).await?;
    }
    while let Some(message) = read_frame::<UpMessage>(&mut recv).await? {
        let own = match message {
            UpMessage::Ack { revision } => {
                if let Ok(mut seen) = seen.lock() {
                    seen.acked = Some(revision);
                }
                continue;
            }
            UpMessage::Ping { nonce } => {
                write_frame(&mut send, &DownMessage::Pong { nonce }).await?;
                continue;
            }
            UpMessage::Inventory(InventoryUpdate::Delta { upserts, .. }) => upserts,
            UpMessage::Inventory(InventoryUpdate::Full { records, .. }) => records,
            UpMessage::Status(_) | UpMessage::Answer { .. } | UpMessage::Leaving { .. } => continue,
        };
        if let Some(edge) = own.iter().find(|record| record.name == "edge") {
            if let Ok(mut seen) = seen.lock() {
                seen.refused_entries = Some(edge.refused_entries);
            }
        }
    }
    Ok(())
}

async fn bundle(
    mut send: quinn::SendStream,
    id: BundleId,
    forgery: Forgery,
    seen: Arc<Mutex<Seen>>,
) -> Result<(), LinkError> {
    if let Ok(mut seen) = seen.lock() {
        seen.bundle_requests.push(id);
    }
    let reply = if id == BundleId::of(&forgery.bundle) {
        BundleReply::Found {
            id,
            len: forgery.bundle.len() as u64,
        }
    } else {
        BundleReply::Missing { id }
    };
    let found = matches!(reply, BundleReply::Found { .. });
    write_frame(&mut send, &reply).await?;
    if found {
        send.write_all(&forgery.bundle).await?;
    }
    let _ = send.finish();
    Ok(())
}

/// The `owner` of ConfigMap shop/settings on the cluster.
fn owner(kubeconfig: &Path) -> anyhow::Result<Option<String>> {
    let output = kubectl(
        kubeconfig,
        &["get", "configmap", "settings", "-n", "shop", "-o", "json"],
        None,
    )?;
    if !output.status.success() {
        return Ok(None);
    }
    let map: Value = serde_json::from_slice(&output.stdout)?;
    Ok(map["data"]["owner"].as_str().map(str::to_string))
}

#[test]
fn an_agent_refuses_what_a_compromised_relay_altered() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let mut eu = mesh.add_relay("eu", "root")?;
    wait_for("eu under the root", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "eu", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge",
        &mesh.dir.path().join("cluster-edge"),
        SimulatorOptions::default(),
    ))?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    let edge = mesh.add_agent_for("edge", "eu", "region=eu", &kubeconfig)?;
    let output = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(SETTINGS))?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    wait_for("the root's ConfigMap on the cluster", SETTLE, || {
        Ok(owner(&kubeconfig)?.filter(|owner| owner == "root"))
    })
    .with_context(|| mesh.logs())?;

    // eu is compromised: its keys and its store are the attacker's, and it
    // answers at its own address.
    let listen: SocketAddr = mesh.advertised_address("eu")?.parse()?;
    eu.stop()?;
    let store = Store::open(&mesh.data_dir("eu"))?;
    let identity = store.identity()?.context("eu has an identity")?;
    let (_, real) = store
        .load()?
        .entries
        .remove("placement/shop/settings")
        .context("eu holds the settings placement")?;
    drop(store);

    let mut body = PlacementBody::from_entry(&real)
        .context("a placement entry")?
        .context("its body decodes")?;
    body.adopt = true;
    let evil = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop"},
        "data": {"owner": "impostor"},
    });
    let bundle = placement::pack(&[&evil]);
    let evil_id = BundleId::of(&bundle);
    let forgery = Forgery {
        altered_body: SliceEntry {
            body: body.encode()?,
            ..real.clone()
        },
        altered_bundle: SliceEntry {
            bundles: vec![evil_id],
            // A newer serial, as a forger would claim, so that only the
            // signature stands in its way.
            serial: real.serial + 1,
            ..real.clone()
        },
        bundle,
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let _impostor = {
        let _guard = runtime.enter();
        let endpoint = quinn::Endpoint::server(pki::quic_server_config(&identity)?, listen)?;
        runtime.spawn(impostor(endpoint, forgery, seen.clone()))
    };

    // The agent comes back to "eu", takes both deltas (it acknowledges
    // them: they are withheld, not stuck) and raises two alarms.
    let (resume, acked) = wait_for("the agent's two integrity alarms", SETTLE, || {
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        observe(format_args!("{seen:?}"));
        Ok(match (seen.resume, seen.acked, seen.refused_entries) {
            // A reconnect would resume after the forgeries and get them
            // again: more alarms, each refused the same way.
            (Some((_, base)), Some(acked), Some(refused)) if acked == base + 2 && refused >= 2 => {
                Some((base, acked))
            }
            _ => None,
        })
    })
    .with_context(|| mesh.logs())?;
    observe(format_args!("resumed at {resume}, acknowledged {acked}"));
    let requests = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .bundle_requests
        .clone();
    assert!(
        !requests.contains(&evil_id),
        "the agent fetched the impostor's bundle: {requests:?}"
    );
    assert_eq!(owner(&kubeconfig)?.as_deref(), Some("root"));
    let log = std::fs::read_to_string(&edge.log)?;
    assert!(
        log.matches("integrity alarm: refused a slice entry from the parent")
            .count()
            >= 2,
        "{log}"
    );
    Ok(())
}

/// What relay `parent` makes with its own issuer when it admits a relay
/// `name` on its own: a new issuer certificate named after `name` and a
/// certificate for `name`, both valid against the mesh CA.
fn admitted_by(parent: &Identity, name: &str) -> anyhow::Result<Identity> {
    let issuer = parent.issuer.as_ref().context("a relay has an issuer")?;
    let keys = pki::new_node_keys(name, Role::Relay)?;
    let leaf = pki::sign_node_cert(
        issuer,
        &keys.tls_csr_der,
        name,
        Role::Relay,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )?;
    let issuer_csr = keys
        .issuer_csr_der
        .clone()
        .context("a relay's issuer request")?;
    let own_issuer = pki::sign_issuer_cert(issuer, &issuer_csr, name)?;
    let mut above = vec![issuer.cert_der.clone()];
    above.extend(issuer.chain_der.iter().cloned());
    let grant = JoinGrant {
        ca_cert_der: parent.ca_cert_der.clone(),
        tls_chain_der: std::iter::once(leaf).chain(above.clone()).collect(),
        issuer_chain_der: Some(std::iter::once(own_issuer).chain(above).collect()),
        token_key: parent.token_key.clone(),
        parent: parent.name.clone(),
    };
    Ok(pki::identity_from_grant(name, Role::Relay, keys, &grant)?)
}

/// Issue 29, finding 3, over real processes: root -> eu -> eu-west. eu
/// makes itself an "eu-west" (an issuer certificate named `relaymesh issuer
/// eu-west` and a leaf for eu-west, chained through eu exactly as the real
/// ones are) and serves it at eu-west's address once eu-west is down. The
/// tokens for nodes under eu-west name eu-west's issuer key, as the root
/// recorded it: `edge-agent join` and `relay join` refuse the impostor,
/// saying the key does not match, and it never hears a join.
#[test]
fn a_relay_cannot_pose_as_a_relay_below_it_with_an_issuer_in_its_name() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let mut eu = mesh.add_relay_connected("eu", "root", SETTLE)?;
    let mut eu_west = mesh.add_relay_connected("eu-west", "eu", SETTLE)?;
    let agent_token = mesh.token("agent", "edge-x", Some("eu-west"), "10m")?;
    let relay_token = mesh.token("relay", "newcomer", Some("eu-west"), "10m")?;
    let address = mesh.advertised_address("eu-west")?;
    // eu's keys, as a compromised eu holds them (read once it stopped: its
    // store is locked while it runs). eu-west is down.
    eu.stop()?;
    eu_west.stop()?;
    let identity_of = |name: &str| -> anyhow::Result<Identity> {
        Store::open(&mesh.data_dir(name))?
            .identity()?
            .with_context(|| format!("{name} has an identity"))
    };
    let eu_identity = identity_of("eu")?;
    let real = identity_of("eu-west")?;

    let impostor = admitted_by(&eu_identity, "eu-west")?;
    let issuer_names = |identity: &Identity| -> anyhow::Result<Vec<String>> {
        let issuer = identity.issuer.as_ref().context("an issuer")?;
        let chain: Vec<Vec<u8>> = std::iter::once(issuer.cert_der.clone())
            .chain(issuer.chain_der.iter().cloned())
            .collect();
        pki::chain_issuer_path(&chain, &identity.anchors()).map_err(anyhow::Error::msg)
    };
    assert_eq!(
        issuer_names(&impostor)?,
        issuer_names(&real)?,
        "by issuer names the impostor is eu-west"
    );
    let store = Store::create(&mesh.data_dir("fake-eu-west"))?;
    store.initialize(
        &impostor,
        &relaymesh_node::config::NodeConfig {
            advertise: vec![address.clone()],
            listen: Some(address.clone()),
            api_listen: None,
            parent: None,
            labels: Default::default(),
            capacity: Default::default(),
        },
        1,
    )?;
    drop(store);
    let mut fake = mesh.start("fake-eu-west")?;

    let agent = mesh
        .command("edge-agent", "edge-x")?
        .arg("join")
        .arg("--data-dir")
        .arg(mesh.data_dir("edge-x"))
        .args(["--name", "edge-x", "--token", &agent_token, "--no-cluster"])
        .output()?;
    let relay = mesh.join("newcomer", &relay_token)?;
    for (who, output) in [("edge-agent join", agent), ("relay join", relay)] {
        let stderr = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        observe(format!("{who}: {stderr}"));
        assert!(
            !output.status.success(),
            "{who} joined the impostor: {stderr}"
        );
        assert!(stderr.contains("issuer key mismatch"), "{who}: {stderr}");
        assert!(stderr.contains("eu-west"), "{who}: {stderr}");
    }
    fake.stop()?;
    let heard = std::fs::read_to_string(&fake.log)?;
    for line in ["admitted a node", "refused a join", "edge-x", "newcomer"] {
        assert!(!heard.contains(line), "the impostor heard a join: {heard}");
    }
    Ok(())
}
