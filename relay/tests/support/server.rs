//! A running API server on a fake backend, shared by the integration tests.

// Each test crate uses a different part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use relaymesh_apiserver::objects::ObjectStore;
use relaymesh_node::limits::Limit;
use relaymesh_protocol::{BundleId, LinkStatus, NodeRecord, Role};
use relaymesh_root::api::{self, ApiError, ApiTls, Backend, Inventory, IssuedToken, TokenRequest};
use relaymesh_root::client::Client;
use relaymesh_root::kubeconfig::ClientCredentials;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::pki::{Leaf, Pki};

/// A backend that remembers what it was asked.
#[derive(Default)]
pub struct FakeBackend {
    /// The inventory; tests change it to see what watches make of it.
    pub nodes: Mutex<Vec<NodeRecord>>,
    pub token_requests: Mutex<Vec<TokenRequest>>,
    pub bundles: Mutex<Vec<(String, Vec<u8>)>>,
    /// The limits the API counted refusals of, in order.
    pub limit_refusals: Mutex<Vec<Limit>>,
}

impl Backend for FakeBackend {
    fn inventory(&self) -> Inventory {
        let records = lock(&self.nodes).clone();
        // Tests change the records in place: the version is their digest.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        format!("{records:?}").hash(&mut hasher);
        Inventory {
            version: hasher.finish(),
            records: std::sync::Arc::new(records.into_iter().map(std::sync::Arc::new).collect()),
            measured: Default::default(),
            annotations: Default::default(),
        }
    }

    fn create_token(&self, request: TokenRequest) -> Result<IssuedToken, ApiError> {
        if request.name == "taken" {
            return Err(ApiError::Conflict("a node named \"taken\" exists".into()));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_secs())
            .unwrap_or(0);
        let issued = IssuedToken {
            token: format!("token-for-{}", request.name),
            expires_unix: now + request.ttl.as_secs(),
            candidates: Vec::new(),
        };
        lock(&self.token_requests).push(request);
        Ok(issued)
    }

    async fn push_bundle(&self, name: String, bytes: Vec<u8>) -> Result<BundleId, ApiError> {
        let id = BundleId::of(&bytes);
        lock(&self.bundles).push((name, bytes));
        Ok(id)
    }

    fn count_limit_refusal(&self, limit: Limit) {
        lock(&self.limit_refusals).push(limit);
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn node(name: &str, role: Role, parent: Option<&str>, connected: bool) -> NodeRecord {
    NodeRecord {
        capacity: Default::default(),
        refused_entries: 0,
        limit_refusals: Default::default(),
        name: name.into(),
        role,
        parent: parent.map(Into::into),
        labels: BTreeMap::from([("region".to_string(), "eu".to_string())]).into(),
        addresses: vec![format!("{name}.example:7443")],
        version: "0.1.0".into(),
        link: parent.map(|_| LinkStatus {
            connected,
            rtt_micros: 400,
            changed_unix_ms: 1_795_305_000_000,
            ..LinkStatus::default()
        }),
    }
}

/// A running API server and what a test needs to talk to it.
pub struct Server {
    pub pki: Pki,
    pub address: SocketAddr,
    pub backend: Arc<FakeBackend>,
    /// The object store the server serves, on a temporary sled database.
    pub objects: ObjectStore,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ApiError>>,
    _dir: tempfile::TempDir,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with_nodes(vec![
            node("root", Role::Relay, None, true),
            node("eu", Role::Relay, Some("root"), true),
            node("us", Role::Relay, Some("root"), true),
            node("eu-west", Role::Relay, Some("eu"), false),
            node("edge-1", Role::Agent, Some("eu-west"), true),
        ])
        .await
    }

    /// A server whose backend knows these nodes.
    pub async fn start_with_nodes(nodes: Vec<NodeRecord>) -> Self {
        let pki = Pki::new();
        let backend = Arc::new(FakeBackend {
            nodes: Mutex::new(nodes),
            ..FakeBackend::default()
        });
        let tls = ApiTls::new(
            relaymesh_node::pki::ApiAuthority {
                cert_der: pki.ca_der.clone(),
                key_der: pki.ca_key_der.clone(),
            },
            vec![pki.server.cert_der.clone()],
            pki.server.key_der.clone(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("an address");
        let (stop, stopped) = oneshot::channel::<()>();
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path().join("store")).expect("sled opens");
        let objects = ObjectStore::open(db.open_tree("objects").expect("a tree")).expect("opens");
        let task = tokio::spawn(api::serve(
            listener,
            tls,
            backend.clone(),
            objects.clone(),
            Default::default(),
            None,
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            pki,
            address,
            backend,
            objects,
            stop: Some(stop),
            _dir: dir,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.address.port())
    }

    pub fn credentials(&self, leaf: Option<&Leaf>) -> ClientCredentials {
        ClientCredentials {
            server: self.url(""),
            ca_pem: Some(self.pki.ca_pem.clone()),
            cert_pem: leaf.map(|leaf| leaf.cert_pem.clone()),
            key_pem: leaf.map(|leaf| leaf.key_pem.clone()),
            insecure_skip_tls_verify: false,
        }
    }

    pub fn client(&self, leaf: &Leaf) -> Client {
        Client::new(&self.credentials(Some(leaf))).expect("a client")
    }

    /// A plain reqwest client, with `leaf` as its client certificate if given.
    pub fn raw(&self, leaf: Option<&Leaf>) -> reqwest::Client {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.pki.ca_der.clone().into())
            .expect("the CA is a valid root");
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("default versions")
            .with_root_certificates(roots);
        let mut config = match leaf {
            Some(leaf) => builder
                .with_client_auth_cert(
                    vec![leaf.cert_der.clone().into()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(leaf.key_der.clone().into()),
                )
                .expect("a usable client certificate"),
            None => builder.with_no_client_auth(),
        };
        // A preconfigured TLS config keeps its ALPN: offer h2 as reqwest would.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .build()
            .expect("a reqwest client")
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("the server stops");
        assert!(matches!(result, Ok(Ok(()))), "{result:?}");
    }
}
