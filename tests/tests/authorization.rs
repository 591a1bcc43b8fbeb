//! The authorization matrix: each test is an attack over real sockets, with
//! real processes and real kubectl, that must be refused. docs/security.md
//! holds the table of rows and where each is tested.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_node::config::NodeConfig;
use relaymesh_node::identity::Identity;
use relaymesh_node::pki;
use relaymesh_node::store::Store;
use relaymesh_protocol::Role;
use relaymesh_root::kubeconfig;
use relaymesh_tests::{binary, kubectl, wait_for, Mesh};

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The identity in a node's data directory (the node must not be running).
fn identity_of(dir: &Path) -> anyhow::Result<Identity> {
    Store::open(dir)?
        .identity()?
        .context("the node has an identity")
}

/// A kubeconfig for the root's API with a client certificate chain and key
/// made elsewhere.
fn forged_kubeconfig(mesh: &Mesh, name: &str, chain: &[Vec<u8>], key_der: &[u8]) -> PathBuf {
    let admin = kubeconfig::load_file(&mesh.kubeconfig(), None).expect("the admin kubeconfig");
    let cert_pem: String = chain
        .iter()
        .map(|der| pki::der_to_pem(der, "CERTIFICATE"))
        .collect();
    let text = kubeconfig::admin_kubeconfig(
        name,
        &admin.server,
        admin.ca_pem.as_deref().unwrap_or_default(),
        &cert_pem,
        &pki::der_to_pem(key_der, "PRIVATE KEY"),
    );
    let path = mesh.dir.path().join(format!("{name}.kubeconfig"));
    kubeconfig::write_private(&path, &text).expect("written");
    path
}

/// Relay `minter`'s issuer makes a relay identity called `name`: what a
/// compromised relay can make.
fn forge_relay(minter: &Identity, name: &str) -> anyhow::Result<Identity> {
    let issuer = minter.issuer.as_ref().context("a relay has an issuer")?;
    let keys = pki::new_node_keys(name, Role::Relay)?;
    let leaf = pki::sign_node_cert(
        issuer,
        &keys.tls_csr_der,
        name,
        Role::Relay,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )?;
    let mut chain = vec![leaf, issuer.cert_der.clone()];
    chain.extend(issuer.chain_der.iter().cloned());
    Ok(Identity {
        name: name.into(),
        role: Role::Relay,
        ca_cert_der: minter.ca_cert_der.clone(),
        extra_anchors_der: Vec::new(),
        tls_chain_der: chain,
        tls_key_der: keys.tls_key_der,
        issuer: None,
        previous_issuer: None,
        token_key: minter.token_key.clone(),
        token_signing_key: None,
    })
}

/// Writes a data directory `dir` whose relay has `identity` and listens on
/// `listen`, so that `relay run` serves the forged certificate.
fn impostor_dir(mesh: &Mesh, dir: &str, identity: &Identity, listen: &str) -> anyhow::Result<()> {
    let store = Store::create(&mesh.data_dir(dir))?;
    let config = NodeConfig {
        advertise: vec![listen.to_string()],
        listen: Some(listen.to_string()),
        api_listen: None,
        parent: None,
        labels: Default::default(),
        capacity: Default::default(),
    };
    store.initialize(identity, &config, 1)?;
    Ok(())
}

#[test]
fn a_relay_cannot_mint_users_and_each_group_gets_only_its_rights() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let token = mesh.token("relay", "mallory", None, "10m")?;
    let joined = mesh.join("mallory", &token)?;
    assert!(joined.status.success(), "{}", text(&joined));
    let mallory = identity_of(&mesh.data_dir("mallory"))?;
    let issuer = mallory.issuer.clone().context("an issuer")?;

    // Row: a relay's issuer key mints an admin certificate and calls the
    // API, both as a user (CN admin, O admins) and as a mesh identity
    // (spiffe://relaymesh/admin/admin), which the API once accepted.
    let key = pki::new_user_key("admin")?;
    let as_user = pki::sign_user_cert(
        &pki::ApiAuthority {
            cert_der: issuer.cert_der.clone(),
            key_der: issuer.key_der.clone(),
        },
        &key.csr_der,
        "admin",
        &["admins"],
        Duration::from_secs(3600),
    )?;
    let as_mesh_admin = pki::sign_node_cert(
        &issuer,
        &key.csr_der,
        "admin",
        Role::Admin,
        pki::DEFAULT_NODE_CERT_VALIDITY,
    )?;
    for (name, leaf) in [("minted-user", as_user), ("minted-admin", as_mesh_admin)] {
        let mut chain = vec![leaf, issuer.cert_der.clone()];
        chain.extend(issuer.chain_der.iter().cloned());
        let forged = forged_kubeconfig(&mesh, name, &chain, &key.key_der);
        let output = kubectl(&forged, &["get", "namespaces"], None)?;
        assert!(!output.status.success(), "{}", text(&output));
        // kubectl words a 401 as "You must be logged in to the server".
        assert!(
            text(&output).contains("provide credentials"),
            "{}",
            text(&output)
        );
        let output = std::process::Command::new(binary("relayctl")?)
            .arg("--kubeconfig")
            .arg(&forged)
            .args(["token", "create", "--role", "relay", "--name", "evil"])
            .output()?;
        assert!(!output.status.success(), "{}", text(&output));
        assert!(text(&output).contains("Unauthorized"), "{}", text(&output));
    }

    // Users in each group, from relayctl user create.
    let vera = mesh.user_kubeconfig("vera", "viewers")?;
    let otto = mesh.user_kubeconfig("otto", "operators")?;

    // Row: a viewer creates a Deployment.
    let output = kubectl(
        &vera,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "-n",
            "default",
        ],
        None,
    )?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains(
            "deployments.apps is forbidden: User \"vera\" cannot create resource \"deployments\""
        ),
        "{}",
        text(&output)
    );
    let output = kubectl(&vera, &["get", "deployments", "-A"], None)?;
    assert!(output.status.success(), "{}", text(&output));
    // kubectl auth can-i answers truthfully for each.
    for (who, verb, resource, expected) in [
        (&vera, "create", "deployments", "no"),
        (&vera, "list", "deployments", "yes"),
        (&otto, "create", "deployments", "yes"),
        (&otto, "delete", "placements.relaymesh.dev", "yes"),
        (&mesh.kubeconfig(), "create", "deployments", "yes"),
    ] {
        let output = kubectl(who, &["auth", "can-i", verb, resource], None)?;
        // "yes", or "no - <the reason>".
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert_eq!(
            stdout.split_whitespace().next().unwrap_or_default(),
            expected,
            "{verb} {resource}: {}",
            text(&output)
        );
    }
    let output = kubectl(&vera, &["auth", "whoami", "-o", "json"], None)?;
    let whoami: serde_json::Value =
        serde_json::from_slice(&output.stdout).with_context(|| text(&output))?;
    assert_eq!(whoami["status"]["userInfo"]["username"], "vera");
    assert_eq!(whoami["status"]["userInfo"]["groups"][0], "viewers");

    // An operator changes workloads but hands out no access.
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n";
    let output = kubectl(&otto, &["apply", "-f", "-"], Some(deployment))?;
    assert!(output.status.success(), "{}", text(&output));
    let output = std::process::Command::new(binary("relayctl")?)
        .arg("--kubeconfig")
        .arg(&otto)
        .args(["token", "create", "--role", "agent", "--name", "edge-9"])
        .output()?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("Forbidden"), "{}", text(&output));
    let output = std::process::Command::new(binary("relayctl")?)
        .arg("--kubeconfig")
        .arg(&otto)
        .args(["user", "create", "eve", "--group", "admins", "-o", "-"])
        .output()?;
    assert!(!output.status.success(), "{}", text(&output));

    // Every write is in the audit log with its user and outcome.
    let audit = std::fs::read_to_string(mesh.data_dir("root").join("audit.log"))?;
    let lines: Vec<serde_json::Value> = audit
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let find = |user: &str, code: u64| {
        lines.iter().any(|line| {
            line["user"] == user
                && line["code"] == code
                && line["method"] == "POST"
                && line["path"]
                    .as_str()
                    .is_some_and(|path| path.ends_with("/deployments"))
        })
    };
    assert!(find("vera", 403), "{audit}");
    assert!(find("otto", 201), "{audit}");
    assert!(
        lines
            .iter()
            .any(|line| line["user"] == "system:unauthenticated" && line["code"] == 401),
        "{audit}"
    );
    Ok(())
}

#[test]
fn a_relay_cannot_pose_as_the_root_or_a_sibling() -> anyhow::Result<()> {
    let (mesh, mut root) = Mesh::init()?;
    let mut eu = mesh.add_relay("eu", "root")?;
    let token = mesh.token("relay", "mallory", None, "10m")?;
    let joined = mesh.join("mallory", &token)?;
    assert!(joined.status.success(), "{}", text(&joined));
    let mallory = identity_of(&mesh.data_dir("mallory"))?;
    wait_for("eu connected", Duration::from_secs(30), || {
        let tree = mesh.tree()?;
        Ok(relaymesh_tests::connected_under(&tree, "eu", "root").then_some(()))
    })?;

    // Row: a relay poses as a sibling to a joining node. The token is for a
    // node under eu; mallory serves a certificate for "eu" that its own
    // issuer made, at eu's address.
    let token = mesh.token("relay", "newcomer", Some("eu"), "10m")?;
    let eu_address = mesh.advertised_address("eu")?;
    let root_address = mesh.advertised_address("root")?;
    eu.stop()?;
    impostor_dir(&mesh, "fake-eu", &forge_relay(&mallory, "eu")?, &eu_address)?;
    let mut fake_eu = mesh.start("fake-eu")?;
    let output = mesh.join("newcomer", &token)?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("posing"), "{}", text(&output));
    fake_eu.stop()?;

    // Row: a relay poses as the root to the root's children: eu dials the
    // root's address and finds mallory's certificate for "root" there.
    root.stop()?;
    impostor_dir(
        &mesh,
        "fake-root",
        &forge_relay(&mallory, "root")?,
        &root_address,
    )?;
    let mut fake_root = mesh.start("fake-root")?;
    let mut eu = mesh.start("eu")?;
    wait_for("eu to refuse the impostor", Duration::from_secs(30), || {
        let log = std::fs::read_to_string(&eu.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(6).collect();
        relaymesh_tests::observe(tail.join("\n"));
        Ok(log.contains("posing").then_some(()))
    })?;
    eu.stop()?;
    fake_root.stop()?;
    let impostor_log = std::fs::read_to_string(&fake_root.log)?;
    assert!(!impostor_log.contains("child connected"), "{impostor_log}");

    // Row: an agent joins under another cluster's name.
    let mut root = mesh.start("root")?;
    mesh.wait_for_api()?;
    let token = mesh.token("agent", "edge-a", None, "10m")?;
    let output = std::process::Command::new(binary("edge-agent")?)
        .arg("join")
        .arg("--data-dir")
        .arg(mesh.data_dir("edge-b"))
        .args(["--name", "edge-b", "--token", &token, "--no-cluster"])
        .output()?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("token is for name edge-a, not edge-b"),
        "{}",
        text(&output)
    );
    root.stop()?;
    Ok(())
}

/// A `kubectl get --raw` of a watch, running until stopped; what it
/// receives goes to a file.
struct RawWatch {
    child: std::process::Child,
    out: PathBuf,
}

impl RawWatch {
    fn start(kubeconfig: &Path, path: &str, out: PathBuf) -> anyhow::Result<Self> {
        let child = std::process::Command::new("kubectl")
            .env(
                "KUBECACHEDIR",
                relaymesh_tests::kubectl_cache_dir(kubeconfig)?,
            )
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["get", "--raw", path])
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("cannot run kubectl")?;
        Ok(Self { child, out })
    }

    fn received(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for RawWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn viewers_read_no_secrets_watches_are_capped_and_crds_keep_out_of_relaymesh_dev(
) -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init_with(&["--max-api-watches-per-user", "3"])?;
    let admin = mesh.kubeconfig();
    let vera = mesh.user_kubeconfig("vera", "viewers")?;
    let otto = mesh.user_kubeconfig("otto", "operators")?;

    // Row: a viewer reads Secrets.
    let output = kubectl(
        &admin,
        &[
            "create",
            "secret",
            "generic",
            "db",
            "-n",
            "default",
            "--from-literal=password=hunter2",
        ],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    for args in [
        &["get", "secret", "-n", "default"][..],
        &["get", "secrets", "-A"],
        &["get", "secret", "db", "-n", "default", "-o", "yaml"],
        &[
            "get",
            "secrets",
            "-n",
            "default",
            "-w",
            "--request-timeout=5s",
        ],
    ] {
        let output = kubectl(&vera, args, None)?;
        assert!(!output.status.success(), "{args:?}: {}", text(&output));
        // kube-apiserver names the object when the request does:
        // `secrets "db" is forbidden: ...`.
        assert!(
            text(&output).contains("secrets is forbidden: User \"vera\" cannot")
                || text(&output).contains("secrets \"db\" is forbidden: User \"vera\" cannot"),
            "{args:?}: {}",
            text(&output)
        );
        // "hunter2", base64-encoded.
        assert!(!text(&output).contains("aHVudGVyMg"), "{}", text(&output));
    }
    for (who, verb, resource, expected) in [
        (&vera, "get", "secrets", "no"),
        (&vera, "list", "secrets", "no"),
        (&vera, "watch", "secrets", "no"),
        (&vera, "get", "configmaps", "yes"),
        (&otto, "get", "secrets", "yes"),
        (&admin, "list", "secrets", "yes"),
    ] {
        let output = kubectl(
            who,
            &["auth", "can-i", verb, resource, "-n", "default"],
            None,
        )?;
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert_eq!(
            stdout.split_whitespace().next().unwrap_or_default(),
            expected,
            "{verb} {resource}: {}",
            text(&output)
        );
    }
    let output = kubectl(
        &otto,
        &["get", "secret", "db", "-n", "default", "-o", "yaml"],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("aHVudGVyMg"), "{}", text(&output));

    // Row: a viewer opens one watch more than the cap (3 here).
    let output = kubectl(
        &admin,
        &[
            "create",
            "configmap",
            "seen",
            "-n",
            "default",
            "--from-literal=a=b",
        ],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    let watch_path = "/api/v1/namespaces/default/configmaps?watch=1";
    let mut watches = Vec::new();
    for n in 0..3 {
        let out = mesh.dir.path().join(format!("watch-{n}.json"));
        let watch = RawWatch::start(&vera, watch_path, out)?;
        // Its first event says the server took the watch.
        wait_for("a viewer's watch to start", Duration::from_secs(30), || {
            Ok(watch.received().contains("\"seen\"").then_some(()))
        })?;
        watches.push(watch);
    }
    // kubectl retries a 429 as Retry-After says, then gives up with it.
    let output = kubectl(&vera, &["get", "--raw", watch_path], None)?;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("too many watches: user \"vera\" has 3 open"),
        "{}",
        text(&output)
    );
    // Another user still watches (a watch that ends after a second).
    let output = kubectl(
        &admin,
        &["get", "--raw", &format!("{watch_path}&timeoutSeconds=1")],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("\"seen\""), "{}", text(&output));
    let counted = wait_for("the refusal at the root", Duration::from_secs(30), || {
        let tree = mesh.tree()?;
        Ok((tree["limitRefusals"]["api-watches-per-user"].as_u64() >= Some(1)).then_some(()))
    });
    if let Err(error) = counted {
        anyhow::bail!("{error:#}\n{}", mesh.logs());
    }
    // Once the watching processes are gone, their slots come back.
    drop(watches);
    wait_for("a viewer's watch again", Duration::from_secs(30), || {
        let output = kubectl(
            &vera,
            &["get", "--raw", &format!("{watch_path}&timeoutSeconds=1")],
            None,
        )?;
        Ok((output.status.success() && text(&output).contains("\"seen\"")).then_some(()))
    })?;

    // Row: an admin makes CRDs named like relaymesh's own kinds.
    for (plural, kind) in [
        ("placements", "Placement"),
        ("clusters", "Cluster"),
        ("jointokens", "JoinToken"),
    ] {
        let crd = format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.relaymesh.dev}}\nspec:\n  group: relaymesh.dev\n  scope: Namespaced\n  names: {{plural: {plural}, kind: {kind}}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
        );
        let output = kubectl(&admin, &["apply", "-f", "-"], Some(&crd))?;
        assert!(!output.status.success(), "{plural}: {}", text(&output));
        assert!(
            text(&output).contains("the relaymesh.dev group is reserved"),
            "{}",
            text(&output)
        );
    }
    let output = kubectl(&admin, &["get", "crds", "-o", "name"], None)?;
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        !text(&output).contains("relaymesh.dev"),
        "{}",
        text(&output)
    );
    let output = kubectl(
        &admin,
        &["api-resources", "--api-group=relaymesh.dev", "-o", "name"],
        None,
    )?;
    assert!(output.status.success(), "{}", text(&output));
    let names: Vec<&str> = std::str::from_utf8(&output.stdout)?.lines().collect();
    assert_eq!(
        names
            .iter()
            .filter(|name| name.starts_with("placements."))
            .count(),
        1,
        "{names:?}"
    );
    assert!(
        !names.iter().any(|name| name.starts_with("jointokens.")),
        "{names:?}"
    );
    // The root still serves Placements.
    let output = kubectl(&admin, &["get", "placements", "-A"], None)?;
    assert!(output.status.success(), "{}", text(&output));
    Ok(())
}
