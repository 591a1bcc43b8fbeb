//! Several replicas of one root on etcd. Every replica serves the API
//! from etcd; the leader ([`election`]) also runs the root's node: its
//! core, its children, the placement controller. The node's own state
//! (identity, keys, slice log, serials, bundles) is journaled to etcd by
//! the leader ([`mirror`]) and loaded by the next one, so serials keep
//! growing and no child applies anything twice.
//!
//! A replica's life in [`run`]: standby (the API, no children) until it
//! takes the leader key; then the mirror's state replaces its own and it
//! leads until it stops or etcd ends its lease, when it exits for its
//! supervisor to start it again as a standby.

pub mod election;
pub mod mirror;

use std::path::Path;
use std::sync::Arc;

use relaymesh_apiserver::etcd::Etcd;
use relaymesh_apiserver::objects::BackendError;
use relaymesh_node::config::{EtcdStore, NodeConfig, ObjectsStore};
use relaymesh_node::daemon::{self, DaemonError, RunOptions};
use relaymesh_node::store::{Store, StoreError};
use relaymesh_protocol::codec;
use tokio_util::sync::CancellationToken;

use crate::objects_store::{connect, ObjectsStoreError};
use crate::state::{SecretsError, SecretsKey, SECRETS_KEY_FILE};
use election::{Election, Role};
use mirror::EtcdMirror;

/// How long a link to a replica's child may stay silent: shorter than a
/// relay's (`pki::IDLE_TIMEOUT`), so that children find a killed leader
/// gone, and dial the next, within a few seconds. Shorter than a child's
/// keep-alive too, so the replica pings its children itself.
pub const LINK_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

/// Where replicas record the addresses children may dial them at.
const REPLICAS_PREFIX: &str = "r/replicas/";

/// Why a replica stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The replica's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// etcd could not be reached or refused.
    #[error("cannot use etcd: {0}")]
    Etcd(#[from] BackendError),
    /// The objects store or its configuration could not be used.
    #[error(transparent)]
    ObjectsStore(#[from] ObjectsStoreError),
    /// The secrets key could not be read or copied.
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    /// The node failed.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// A mirrored value does not open or decode.
    #[error("etcd holds a corrupt {key}: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The root is not on etcd.
    #[error(
        "this root keeps its objects in sled; replicas need etcd (relay migrate-store --to etcd)"
    )]
    NotOnEtcd,
    /// Nothing is mirrored yet: the first replica never ran.
    #[error("etcd holds no root under this prefix yet: run the first replica (relay run) before joining another")]
    NoRootYet,
    /// etcd ended this replica's lease: another may lead now.
    #[error(
        "this replica lost the root's leader lease; it stops, to be started again as a standby"
    )]
    Lost,
}

/// What [`run`] needs beyond the store.
pub struct Replica {
    /// The options of the leader's daemon (the root's services in them).
    pub options: RunOptions,
    /// The root's services at a standby.
    pub standby: daemon::Root,
}

/// Runs the replica in `data_dir` until `shutdown`: standby until it
/// leads, then the root.
pub async fn run(
    data_dir: &Path,
    store: Store,
    shutdown: CancellationToken,
    replica: Replica,
) -> Result<(), ReplicaError> {
    let ObjectsStore::Etcd(etcd_config) = store.objects_store()? else {
        return Err(ReplicaError::NotOnEtcd);
    };
    let etcd = connect(&etcd_config)?;
    let key = Arc::new(SecretsKey::load(&store.dir().join(SECRETS_KEY_FILE))?);
    let config = store.config()?.ok_or_else(|| DaemonError::NotInitialized {
        dir: data_dir.display().to_string(),
    })?;
    register(&etcd, &config)?;
    let me = format!(
        "{}/{:016x}",
        config.api_listen.clone().unwrap_or_default(),
        rand::random::<u64>()
    );
    let election = Election::start(etcd.clone(), me.clone());
    let mut role = election.role();

    // Standby: the API, no children, until this replica leads.
    let standby_stop = shutdown.child_token();
    let elected = {
        let (mut role, stop) = (role.clone(), standby_stop.clone());
        tokio::spawn(async move {
            let _ = role.wait_for(|role| *role == Role::Leader).await;
            stop.cancel();
        })
    };
    tracing::info!(replica = %me, "standing by");
    let mut options = replica.options;
    options.link_idle_timeout = options.link_idle_timeout.min(LINK_IDLE_TIMEOUT);
    let standby = RunOptions {
        standby: true,
        root: Some(replica.standby),
        ..options.clone()
    };
    daemon::run_with_store(data_dir, store.clone(), standby_stop, None, standby).await?;
    elected.abort();
    if shutdown.is_cancelled() {
        return Ok(());
    }

    // Leader: the mirror's state is the node's, then the node runs.
    take_over(&etcd, &key, &store, &me)?;
    let leader_stop = shutdown.child_token();
    let lost = {
        let stop = leader_stop.clone();
        tokio::spawn(async move {
            let lost = role.wait_for(|role| *role == Role::Lost).await.is_ok();
            stop.cancel();
            lost
        })
    };
    let result = daemon::run_with_store(data_dir, store, leader_stop, None, options).await;
    drop(election);
    if !lost.is_finished() {
        lost.abort();
        result?;
        return Ok(());
    }
    if lost.await.unwrap_or(false) && !shutdown.is_cancelled() {
        return Err(ReplicaError::Lost);
    }
    result?;
    Ok(())
}

/// Makes `store` the node the mirror holds (or, at the first leader of a
/// root, puts its node in the mirror), advertises every replica's
/// addresses, and journals from now on.
fn take_over(
    etcd: &Etcd,
    key: &Arc<SecretsKey>,
    store: &Store,
    me: &str,
) -> Result<(), ReplicaError> {
    let mirror = match mirror::load(etcd, key)? {
        Some((head, ops)) => {
            store.replace_image(&ops)?;
            tracing::info!(
                log = head.seq,
                ops = ops.len(),
                "took over the root from etcd"
            );
            EtcdMirror::new(etcd.clone(), key.clone(), me, head)
        }
        None => {
            let mirror = EtcdMirror::new(etcd.clone(), key.clone(), me, mirror::Head::default());
            mirror
                .checkpoint(&store.image()?, 0)
                .map_err(|error| BackendError::Unavailable(error.to_string()))?;
            tracing::info!("the root's first leader: its node is in etcd now");
            mirror
        }
    };
    if let Some(mut config) = store.config()? {
        config.advertise = advertised(etcd, &config)?;
        store.set_config(&config)?;
    }
    store.set_mirror(Arc::new(mirror));
    Ok(())
}

/// Records the addresses this replica takes children at, so that the
/// leader names every replica to the root's children.
fn register(etcd: &Etcd, config: &NodeConfig) -> Result<(), ReplicaError> {
    let Some(first) = config.advertise.first() else {
        return Ok(());
    };
    let value = codec::encode(&config.advertise).map_err(|error| ReplicaError::Corrupt {
        key: REPLICAS_PREFIX.into(),
        reason: error.to_string(),
    })?;
    etcd.put(format!("{REPLICAS_PREFIX}{first}").as_bytes(), value)?;
    Ok(())
}

/// This replica's addresses, then every other replica's.
fn advertised(etcd: &Etcd, config: &NodeConfig) -> Result<Vec<String>, ReplicaError> {
    let mut addresses = config
        .advertise
        .iter()
        .filter(|address| !address.is_empty())
        .cloned()
        .collect::<Vec<_>>();
    let own = addresses.first().cloned();
    let (replicas, _) = etcd.range(REPLICAS_PREFIX.as_bytes(), None)?;
    for (_, value, _) in replicas {
        let theirs: Vec<String> = codec::decode(&value).map_err(|error| ReplicaError::Corrupt {
            key: REPLICAS_PREFIX.into(),
            reason: error.to_string(),
        })?;
        if theirs.first() == own.as_ref() {
            continue;
        }
        for address in theirs {
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
    }
    Ok(addresses)
}

/// What `relay init --join-root` gives a new replica.
pub struct Joining<'a> {
    /// Where the root's etcd is.
    pub etcd: EtcdStore,
    /// A copy of the root's secrets key file.
    pub secrets_key: &'a Path,
    /// The new replica's own configuration (listen, API and advertised
    /// addresses).
    pub config: NodeConfig,
}

/// Makes the empty store `store` a replica of the root in etcd: the
/// secrets key copied (0600), the node's state loaded from the mirror,
/// the replica's own configuration and addresses recorded.
pub fn join(store: &Store, joining: Joining<'_>) -> Result<(), ReplicaError> {
    let key = SecretsKey::load(joining.secrets_key)?;
    let etcd = connect(&joining.etcd)?;
    let Some((_, ops)) = mirror::load(&etcd, &key)? else {
        return Err(ReplicaError::NoRootYet);
    };
    SecretsKey::copy(joining.secrets_key, &store.dir().join(SECRETS_KEY_FILE))?;
    store.replace_image(&ops)?;
    store.set_config(&joining.config)?;
    store.set_objects_store(&ObjectsStore::Etcd(joining.etcd))?;
    register(&etcd, &joining.config)?;
    Ok(())
}
