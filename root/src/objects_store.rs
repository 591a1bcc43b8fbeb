//! Where the root's API keeps its objects, as `relay init --store` chose:
//! the node's sled store, or an etcd cluster (`relaymesh_apiserver::etcd`).
//! Opening, and the checks `relay init` makes before it puts a root on
//! etcd.

use relaymesh_apiserver::etcd::{Certificate, Etcd, EtcdConfig, Identity, TlsOptions};
use relaymesh_apiserver::objects::{BackendError, ObjectError, ObjectStore};
use relaymesh_node::config::{EtcdStore, ObjectsStore};
use relaymesh_node::store::{Store, StoreError};

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
    #[error("etcd: {0}")]
    Etcd(#[from] BackendError),
    /// The object store could not open.
    #[error(transparent)]
    Objects(#[from] ObjectError),
    /// The prefix already holds another root's objects.
    #[error("etcd already holds keys under {prefix:?}: another root's objects? Choose another --etcd-prefix, or empty it")]
    NotEmpty {
        /// The prefix.
        prefix: String,
    },
}

/// Opens the object store the node's configuration names.
pub fn open(store: &Store) -> Result<ObjectStore, ObjectsStoreError> {
    match store.objects_store()? {
        ObjectsStore::Sled => Ok(ObjectStore::open(store.open_tree("objects")?)?),
        ObjectsStore::Etcd(config) => {
            let etcd = connect(&config)?;
            Ok(ObjectStore::open_on(Box::new(etcd))?)
        }
    }
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
