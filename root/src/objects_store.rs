//! Where the root's API keeps its objects, as `relay init --store` chose:
//! the node's sled store, or an etcd cluster (`relaymesh_apiserver::etcd`).
//! Opening, and the checks `relay init` makes before it puts a root on
//! etcd.

use relaymesh_apiserver::etcd::{Certificate, Etcd, EtcdConfig, Identity, TlsOptions};
use relaymesh_apiserver::objects::{BackendError, ObjectError, ObjectStore, OBJECT_PREFIX};
use relaymesh_node::config::{EtcdStore, ObjectsStore};
use std::sync::Arc;

use relaymesh_node::store::{ApiCertificate, Store, StoreError};

use crate::state::{EtcdState, RootState, SecretsError, SecretsKey, StateError, SECRETS_KEY_FILE};

/// The key prefix of a root on etcd unless `--etcd-prefix` says otherwise.
pub const DEFAULT_ETCD_PREFIX: &str = "/relaymesh/";

/// Why the objects store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsStoreError {
    /// The node's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A TLS file for etcd could not be read.
    #[error("cannot read {path}: {source}")]
    TlsFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// etcd could not be reached or answered an error.
    #[error("cannot use etcd")]
    Etcd(#[from] BackendError),
    /// The object store could not open.
    #[error(transparent)]
    Objects(#[from] ObjectError),
    /// `migrate-store` was asked of a root already on etcd.
    #[error("this root's objects are on etcd already ({endpoints})")]
    AlreadyOnEtcd {
        /// Its endpoints.
        endpoints: String,
    },
    /// `--etcd-endpoints` was given to a root on sled.
    #[error(
        "this root's objects are in its sled store, not on etcd: use relay migrate-store --to etcd"
    )]
    NotOnEtcd,
    /// etcd does not hold every object copied.
    #[error("etcd holds {found} objects after the copy, not {expected}; the root stays on sled")]
    Incomplete {
        /// How many were copied.
        expected: usize,
        /// How many etcd holds.
        found: usize,
    },
    /// The secrets key could not be made or read.
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    /// The root's state could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// The prefix already holds another root's objects.
    #[error("etcd already holds keys under {prefix:?}: another root's objects? Choose another --etcd-prefix, or empty it")]
    NotEmpty {
        /// The prefix.
        prefix: String,
    },
}

/// What the root's API keeps: its objects and its own state.
pub struct Opened {
    /// The objects the API serves.
    pub objects: ObjectStore,
    /// Users, tokens, the API's certificates.
    pub state: Arc<dyn RootState>,
}

/// Opens the object store and the root's state the node's configuration
/// names: both in the node's sled store, or both on etcd (the state's
/// secrets sealed with the data directory's `secrets.key`).
pub fn open(store: &Store) -> Result<Opened, ObjectsStoreError> {
    match store.objects_store()? {
        ObjectsStore::Sled => Ok(Opened {
            objects: ObjectStore::open(store.open_tree("objects")?)?,
            state: Arc::new(store.clone()),
        }),
        ObjectsStore::Etcd(config) => {
            let key = SecretsKey::load(&store.dir().join(SECRETS_KEY_FILE))?;
            let etcd = connect(&config)?;
            Ok(Opened {
                state: Arc::new(EtcdState::new(&etcd, store.clone(), key)),
                objects: ObjectStore::open_on(Box::new(etcd))?,
            })
        }
    }
}

/// Puts a new root on etcd (`relay init --store etcd`): records the
/// choice, makes the secrets key (0600) and stores the API's certificate
/// in etcd, sealed. [`check_new`] must have passed.
pub fn init_on_etcd(
    store: &Store,
    config: &EtcdStore,
    certificate: &ApiCertificate,
) -> Result<(), ObjectsStoreError> {
    let key = SecretsKey::create(&store.dir().join(SECRETS_KEY_FILE))?;
    let etcd = connect(config)?;
    EtcdState::new(&etcd, store.clone(), key).set_api_certificates(certificate, None)?;
    store.set_objects_store(&ObjectsStore::Etcd(config.clone()))?;
    Ok(())
}

/// Connects to the etcd cluster `config` names.
pub fn connect(config: &EtcdStore) -> Result<Etcd, ObjectsStoreError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|source| ObjectsStoreError::TlsFile {
            path: path.display().to_string(),
            source,
        })
    };
    let tls = if config.ca_file.is_some() || config.cert_file.is_some() {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &config.ca_file {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        if let (Some(cert), Some(key)) = (&config.cert_file, &config.key_file) {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        Some(tls)
    } else {
        None
    };
    Ok(Etcd::connect(&EtcdConfig {
        endpoints: config.endpoints.clone(),
        tls,
        prefix: config.prefix.clone(),
    })?)
}

/// Checks that a new root may take `config`'s prefix: etcd answers and
/// nothing is stored under it yet.
pub fn check_new(config: &EtcdStore) -> Result<(), ObjectsStoreError> {
    let etcd = connect(config)?;
    let (entries, _) = etcd.range(b"", None)?;
    if !entries.is_empty() {
        return Err(ObjectsStoreError::NotEmpty {
            prefix: config.prefix.clone(),
        });
    }
    Ok(())
}

/// How many keys one etcd transaction of a migration writes: below etcd's
/// default limit of 128 operations per transaction.
const MIGRATION_BATCH: usize = 100;

/// What [`migrate_to_etcd`] moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// How many objects were copied.
    pub objects: usize,
}

/// Copies the objects of a root on sled into etcd, byte for byte (uids,
/// generations and every field as they were, so the placement controller
/// decides nothing new and no cluster re-applies anything), checks that
/// etcd holds every one of them, copies the root's users, tokens and API
/// certificates (sealed with the data directory's secrets key, made if
/// missing), and only then points the root at etcd. The sled copy stays in
/// the data directory, unused, as it was at the migration. The root must be
/// stopped (its store is locked while it runs).
pub fn migrate_to_etcd(store: &Store, to: &EtcdStore) -> Result<Migrated, ObjectsStoreError> {
    if let ObjectsStore::Etcd(current) = store.objects_store()? {
        return Err(ObjectsStoreError::AlreadyOnEtcd {
            endpoints: current.endpoints.join(","),
        });
    }
    check_new(to)?;
    let etcd = connect(to)?;
    let tree = store.open_tree("objects")?;
    let mut batch = Vec::with_capacity(MIGRATION_BATCH);
    let mut objects = 0;
    for item in tree.scan_prefix(OBJECT_PREFIX.as_bytes()) {
        let (key, value) = item.map_err(|error| ObjectError::Storage(BackendError::from(error)))?;
        batch.push((key.to_vec(), Some(value.to_vec())));
        objects += 1;
        if batch.len() == MIGRATION_BATCH {
            etcd.apply_all(std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        etcd.apply_all(batch)?;
    }
    let (copied, _) = etcd.range(OBJECT_PREFIX.as_bytes(), None)?;
    if copied.len() != objects {
        return Err(ObjectsStoreError::Incomplete {
            expected: objects,
            found: copied.len(),
        });
    }
    // The root's own state goes with them, its secrets sealed.
    let key_path = store.dir().join(SECRETS_KEY_FILE);
    let key = match SecretsKey::load(&key_path) {
        Ok(key) => key,
        Err(SecretsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            SecretsKey::create(&key_path)?
        }
        Err(error) => return Err(error.into()),
    };
    let state = EtcdState::new(&etcd, store.clone(), key);
    let sled: &dyn RootState = store;
    for user in sled.users()? {
        state.record_user(&user)?;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    for token in sled.issued_tokens()? {
        state.record_issued_token(&token, now)?;
    }
    if let Some(certificate) = sled.api_certificate()? {
        state.set_api_certificates(&certificate, sled.previous_api_ca()?.as_ref())?;
    }
    store.set_objects_store(&ObjectsStore::Etcd(to.clone()))?;
    Ok(Migrated { objects })
}

/// Points a root on etcd at other endpoints of its cluster (members
/// replaced, or a cluster restored from a snapshot), keeping its prefix and
/// TLS files. Nothing is copied.
pub fn set_etcd_endpoints(store: &Store, endpoints: Vec<String>) -> Result<(), ObjectsStoreError> {
    let ObjectsStore::Etcd(mut config) = store.objects_store()? else {
        return Err(ObjectsStoreError::NotOnEtcd);
    };
    config.endpoints = endpoints;
    store.set_objects_store(&ObjectsStore::Etcd(config))?;
    Ok(())
}
