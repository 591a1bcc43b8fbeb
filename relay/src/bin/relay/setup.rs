//! Making a node's data directory: `relay init` (a new mesh and its root),
//! `relay init --join-root` (another replica of a root on etcd) and `relay
//! join` (a node below an existing one). Running one is `main`'s.

use std::path::Path;

use anyhow::{bail, Context as _};
use relaymesh_node::config::{NodeConfig, ObjectsStore};
use relaymesh_node::store::{ApiCertificate, Store};
use relaymesh_node::{logging, pki, transport};
use relaymesh_protocol::Role;
use relaymesh_root::kubeconfig;

use super::StoreArgs;

pub(super) fn init(
    data_dir: &Path,
    name: &str,
    listen: String,
    api_listen: String,
    advertise: Vec<String>,
    api_hosts: Vec<String>,
    objects_store: ObjectsStore,
) -> anyhow::Result<()> {
    relaymesh_protocol::name::validate(name).context("--name")?;
    logging::set_node(name);
    if let ObjectsStore::Etcd(etcd) = &objects_store {
        // Before anything is written: a root must not take over another
        // root's keys, nor start on an etcd it cannot reach.
        relaymesh_root::objects_store::check_new(etcd).context("--store etcd")?;
    }
    let store = open_new_store(data_dir)?;
    let api_address: std::net::SocketAddr = api_listen
        .parse()
        .with_context(|| format!("--api-listen {api_listen:?} is not an IP:port"))?;
    let mut hosts = api_hosts;
    if !api_address.ip().is_unspecified() {
        hosts.push(api_address.ip().to_string());
    }
    let mesh = pki::create_mesh(name, &hosts).context("cannot create the mesh CA")?;
    let config = root_config(listen, api_listen, advertise);
    let api_certificate = ApiCertificate {
        chain_der: mesh.api_cert.chain_der.clone(),
        key_der: mesh.api_cert.key_der.clone(),
        authority: mesh.api_authority.clone(),
    };
    match &objects_store {
        ObjectsStore::Sled => store.set_api_certificate(&api_certificate)?,
        // In etcd, sealed with a new secrets key in the data directory.
        ObjectsStore::Etcd(etcd) => {
            relaymesh_root::objects_store::init_on_etcd(&store, etcd, &api_certificate)
                .context("--store etcd")?
        }
    }
    store.initialize(&mesh.identity, &config, rand::random())?;
    let server_host = if api_address.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        api_address.ip().to_string()
    };
    let server = format!(
        "https://{}",
        std::net::SocketAddr::new(
            server_host.parse().unwrap_or(api_address.ip()),
            api_address.port()
        )
    );
    let kubeconfig_path = data_dir.join("admin.kubeconfig");
    let contents = kubeconfig::admin_kubeconfig(
        "relaymesh",
        &server,
        &mesh.admin.ca_pem,
        &mesh.admin.cert_pem,
        &mesh.admin.key_pem,
    );
    kubeconfig::write_private(&kubeconfig_path, &contents)
        .with_context(|| format!("cannot write {}", kubeconfig_path.display()))?;
    println!("initialized root relay {name:?} in {}", data_dir.display());
    println!("admin kubeconfig: {}", kubeconfig_path.display());
    println!("next: relay run --data-dir {}", data_dir.display());
    Ok(())
}

/// A root's (or root replica's) configuration: children dial `advertise`,
/// or `listen` if none is given.
pub(super) fn root_config(
    listen: String,
    api_listen: String,
    advertise: Vec<String>,
) -> NodeConfig {
    NodeConfig {
        advertise: if advertise.is_empty() {
            vec![listen.clone()]
        } else {
            advertise
        },
        listen: Some(listen),
        api_listen: Some(api_listen),
        parent: None,
        labels: Default::default(),
        capacity: Default::default(),
    }
}

/// `relay init --join-root`: a new replica of a root on etcd.
pub(super) fn join_root(
    data_dir: &Path,
    listen: String,
    api_listen: String,
    advertise: Vec<String>,
    secrets_key: &Path,
    store_args: StoreArgs,
) -> anyhow::Result<()> {
    let ObjectsStore::Etcd(etcd) = store_args.objects_store()? else {
        bail!("--join-root needs --store etcd and the root's --etcd-* options");
    };
    let store = open_new_store(data_dir)?;
    let config = root_config(listen, api_listen.clone(), advertise);
    relaymesh_root::replicas::join(
        &store,
        relaymesh_root::replicas::Joining {
            etcd,
            secrets_key,
            config,
        },
    )
    .context("--join-root")?;
    let name = store
        .identity()?
        .map(|identity| identity.name)
        .unwrap_or_default();
    println!(
        "joined root {name:?} as a replica in {}; its API will listen on {api_listen}",
        data_dir.display()
    );
    println!("admin kubeconfig: the first replica's, with its server set to this replica");
    println!("next: relay run --data-dir {}", data_dir.display());
    Ok(())
}

pub(super) async fn join(
    data_dir: &Path,
    name: &str,
    token: &str,
    listen: String,
    advertise: Vec<String>,
) -> anyhow::Result<()> {
    relaymesh_protocol::name::validate(name).context("--name")?;
    logging::set_node(name);
    let store = open_new_store(data_dir)?;
    let joined = transport::join::join(token.trim(), name, Role::Relay).await?;
    let config = NodeConfig {
        advertise: if advertise.is_empty() {
            vec![listen.clone()]
        } else {
            advertise
        },
        listen: Some(listen),
        api_listen: None,
        parent: Some(joined.parent.clone()),
        labels: relaymesh_node::store::with_join_token_label(Default::default(), &joined.token_id),
        capacity: Default::default(),
    };
    store.initialize(&joined.identity, &config, rand::random())?;
    // It fails over among them once its parent is silent for longer than
    // `relay run --parent-grace` (docs/operations.md).
    store.set_candidates(&joined.candidates)?;
    let chosen = if joined.candidates.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = joined
            .candidates
            .iter()
            .map(|candidate| candidate.name.as_str())
            .collect();
        format!(" (the nearest of {} that admitted it)", names.join(", "))
    };
    println!(
        "joined as relay {name:?} under {:?}{chosen}; data in {}",
        joined.parent.name,
        data_dir.display()
    );
    println!("next: relay run --data-dir {}", data_dir.display());
    Ok(())
}

/// Opens the store of a node about to be created; refuses one that already
/// holds an identity, so an `init` or `join` never overwrites a node.
fn open_new_store(data_dir: &Path) -> anyhow::Result<Store> {
    let store = Store::create(data_dir).with_context(|| {
        format!(
            "cannot open the store in {} (is a node running on it?)",
            data_dir.display()
        )
    })?;
    if store.identity()?.is_some() {
        bail!(
            "{} already holds a relay; run it with `relay run --data-dir {}` or choose another directory",
            data_dir.display(),
            data_dir.display()
        );
    }
    Ok(store)
}
