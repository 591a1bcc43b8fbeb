//! Server-side apply of one object at a time, with kinds resolved through
//! discovery: the field manager is always `relaymesh` and conflicts are
//! forced, so the agent owns the fields its bundles set and nothing else.
//!
//! Also the few other writes an apply pass needs: creating a namespace the
//! bundle uses but does not carry, waiting for a CRD to be Established, and
//! reading or deleting an applied object.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde_json::{json, Value};

use crate::cluster::{Kind, Kinds};
use crate::manifest::{Manifest, ObjectRef};

/// The one field manager the agent applies with.
pub const FIELD_MANAGER: &str = "relaymesh";

/// The label on namespaces the agent created because a bundle used them.
pub const CREATED_BY_LABEL: &str = "relaymesh.dev/created-by";

/// How long an apply pass waits for a CRD to be Established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why one object could not be applied (or read, or deleted).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The cluster does not serve the object's kind.
    #[error("the cluster does not serve {api_version} {kind}: {source}")]
    UnknownKind {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// What discovery said.
        #[source]
        source: kube::Error,
    },
    /// The cluster refused the request (validation, admission, conflict).
    #[error("{reason} ({code}): {message}")]
    Refused {
        /// The HTTP status code.
        code: u16,
        /// The Kubernetes reason (`Invalid`, `Forbidden`, ...).
        reason: String,
        /// The cluster's message.
        message: String,
    },
    /// The request failed on the way (connection, TLS, decoding).
    #[error("request failed: {0}")]
    Request(#[source] kube::Error),
    /// A CRD was not Established in time.
    #[error("CustomResourceDefinition {0} not Established within {ESTABLISH_TIMEOUT:?}")]
    NotEstablished(String),
}

impl ApplyError {
    /// Whether trying again without a change to the object may help.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Refused { code, .. } => *code >= 500 || *code == 409 || *code == 429,
            Self::UnknownKind { .. } | Self::Request(_) | Self::NotEstablished(_) => true,
        }
    }
}

impl From<kube::Error> for ApplyError {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Self::Refused {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => Self::Request(other),
        }
    }
}

/// Applies objects to one cluster.
#[derive(Clone)]
pub struct Applier {
    client: Client,
    kinds: Kinds,
    /// The namespaces it found or created, so that each pass does not ask
    /// for them again (a request per namespace per pass was a twentieth
    /// of a fanout's agents, docs/performance.md). Forgotten when it
    /// deletes one, and when a write into one fails: it may be gone.
    namespaces: BTreeSet<String>,
}

impl Applier {
    /// An applier on `client`.
    pub fn new(client: Client) -> Self {
        Self {
            kinds: Kinds::new(client.clone()),
            client,
            namespaces: BTreeSet::new(),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The served kind of `reference`.
    pub async fn kind(&mut self, reference: &ObjectRef) -> Result<Kind, ApplyError> {
        self.kinds
            .resolve(&reference.gvk())
            .await
            .map_err(|source| ApplyError::UnknownKind {
                api_version: reference.api_version(),
                kind: reference.kind.clone(),
                source,
            })
    }

    /// An `Api` for `reference`'s kind, in its namespace if it has one.
    pub async fn api(&mut self, reference: &ObjectRef) -> Result<Api<DynamicObject>, ApplyError> {
        let kind = self.kind(reference).await?;
        Ok(match (&reference.namespace, kind.namespaced) {
            (Some(namespace), true) => {
                Api::namespaced_with(self.client.clone(), namespace, &kind.resource)
            }
            (None, true) => Api::default_namespaced_with(self.client.clone(), &kind.resource),
            (_, false) => Api::all_with(self.client.clone(), &kind.resource),
        })
    }

    /// The namespace `reference` lands in: its own, or for a namespaced
    /// kind written without one, the client's default namespace (which is
    /// the agent's own pod namespace when it runs in the cluster); `None`
    /// for a cluster-scoped kind.
    pub async fn namespace_of(
        &mut self,
        reference: &ObjectRef,
    ) -> Result<Option<String>, ApplyError> {
        if let Some(namespace) = &reference.namespace {
            return Ok(Some(namespace.clone()));
        }
        let kind = self.kind(reference).await?;
        Ok(kind
            .namespaced
            .then(|| self.client.default_namespace().to_string()))
    }

    /// Applies `manifest` (server-side apply, forced) and returns the live
    /// object; a create-only object that exists is left as it is.
    pub async fn apply(&mut self, manifest: &Manifest) -> Result<DynamicObject, ApplyError> {
        let api = self.api(&manifest.reference).await?;
        let name = &manifest.reference.name;
        if manifest.create_only {
            if let Some(live) = api.get_opt(name).await? {
                return Ok(live);
            }
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = api
            .patch(name, &params, &Patch::Apply(&manifest.body))
            .await;
        if applied.is_err() {
            if let Some(namespace) = &manifest.reference.namespace {
                self.namespaces.remove(namespace);
            }
        }
        Ok(applied?)
    }

    /// The live object `reference`, if it exists.
    pub async fn get(
        &mut self,
        reference: &ObjectRef,
    ) -> Result<Option<DynamicObject>, ApplyError> {
        let api = self.api(reference).await?;
        Ok(api.get_opt(&reference.name).await?)
    }

    /// Deletes `reference` (in the background); a missing object is fine.
    pub async fn delete(&mut self, reference: &ObjectRef) -> Result<(), ApplyError> {
        if reference.group.is_empty() && reference.kind == "Namespace" {
            self.namespaces.remove(&reference.name);
        }
        let kind = self.kind(reference).await?;
        let namespace = self.namespace_of(reference).await?;
        let url = <DynamicObject as kube::Resource>::url_path(&kind.resource, namespace.as_deref());
        let mut request = kube::core::Request::new(url)
            .delete(&reference.name, &DeleteParams::background())
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("delete");
        // The reply is the deleted object, which nothing here needs: it is
        // read (so the connection can be reused) but not parsed, which for
        // a 100 KB object was most of a prune's cost (docs/performance.md).
        match self.client.request_text(request).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes label `key` from the live object `reference` (a JSON merge
    /// patch, so nothing else of it changes); a missing object is fine.
    pub async fn remove_label(
        &mut self,
        reference: &ObjectRef,
        key: &str,
    ) -> Result<(), ApplyError> {
        let api = self.api(reference).await?;
        let patch = json!({"metadata": {"labels": {key: null}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        match api
            .patch(&reference.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Whether namespace `name` holds no object of any listable kind, other
    /// than what Kubernetes puts in every namespace (the `default`
    /// ServiceAccount, the `kube-root-ca.crt` ConfigMap) and events. Deleting
    /// a namespace deletes everything in it, so relaymesh deletes one it
    /// created only when this holds: nobody else's objects go with it.
    pub async fn namespace_is_empty(&mut self, name: &str) -> Result<bool, ApplyError> {
        let client = self.client.clone();
        let discovery = kube::discovery::Discovery::new(client.clone())
            .run()
            .await?;
        for group in discovery.groups() {
            for (resource, capabilities) in group.recommended_resources() {
                let listable = capabilities.scope == kube::discovery::Scope::Namespaced
                    && capabilities.supports_operation(kube::discovery::verbs::LIST);
                if !listable || resource.plural == "events" {
                    continue;
                }
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), name, &resource);
                let list = api
                    .list(&kube::api::ListParams::default().limit(10))
                    .await?;
                let foreign = list.items.iter().any(|item| {
                    let name = item.metadata.name.as_deref().unwrap_or_default();
                    !matches!(
                        (resource.kind.as_str(), name),
                        ("ServiceAccount", "default") | ("ConfigMap", "kube-root-ca.crt")
                    )
                });
                if foreign {
                    tracing::info!(namespace = name, kind = %resource.kind, "namespace still holds objects");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Creates namespace `name`, labelled as created by relaymesh, unless it
    /// exists; returns whether it was created. Asks the cluster only about
    /// a namespace it has not found or created since it last deleted one or
    /// a write into it failed, and then with one request: a create, which
    /// a namespace that exists refuses (a GET first cost a fresh cluster two
    /// requests per namespace). An agent not allowed to create namespaces
    /// looks for it instead.
    pub async fn ensure_namespace(&mut self, name: &str) -> Result<bool, ApplyError> {
        if self.namespaces.contains(name) {
            return Ok(false);
        }
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some([(CREATED_BY_LABEL.to_string(), FIELD_MANAGER.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let created = Api::<Namespace>::all(self.client.clone())
            .create(&params, &namespace)
            .await;
        match created {
            Ok(_) => {
                self.namespaces.insert(name.to_string());
                tracing::info!(namespace = name, "created namespace the bundle uses");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                self.namespaces.insert(name.to_string());
                Ok(false)
            }
            Err(kube::Error::Api(status)) if status.is_forbidden() => {
                if self.get(&namespace_ref(name)).await?.is_some() {
                    self.namespaces.insert(name.to_string());
                    return Ok(false);
                }
                Err(kube::Error::Api(status).into())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Waits (bounded) until CRD `name` is Established, then forgets what
    /// discovery knew of its kinds.
    pub async fn wait_established(&mut self, name: &str) -> Result<(), ApplyError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let wait = await_condition(api, name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISH_TIMEOUT, wait).await {
            Ok(Ok(Some(definition))) => {
                let spec = &definition.spec;
                for version in &spec.versions {
                    self.kinds.forget(&kube::core::GroupVersionKind::gvk(
                        &spec.group,
                        &version.name,
                        &spec.names.kind,
                    ));
                }
                Ok(())
            }
            Ok(Ok(None)) | Err(_) => Err(ApplyError::NotEstablished(name.to_string())),
            Ok(Err(error)) => {
                tracing::warn!(crd = name, %error, "watching the CRD failed");
                Err(ApplyError::NotEstablished(name.to_string()))
            }
        }
    }
}

/// The reference of namespace `name`.
pub fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: name.to_string(),
    }
}

/// The object's JSON (type, metadata and body), for comparing and status:
/// what serializing it gives, with its body moved rather than copied (a
/// 100 KB ConfigMap was copied once more for every apply and every watch
/// event, docs/performance.md).
pub fn into_value(object: DynamicObject) -> Value {
    let DynamicObject {
        types,
        metadata,
        data,
    } = object;
    let Value::Object(body) = data else {
        // Not an object: serialized as it is (a body that is no map does
        // not serialize, which is `null`).
        let object = DynamicObject {
            types,
            metadata,
            data,
        };
        return serde_json::to_value(&object).unwrap_or(Value::Null);
    };
    let mut fields = serde_json::Map::new();
    if let Some(types) = types {
        fields.insert("apiVersion".into(), Value::String(types.api_version));
        fields.insert("kind".into(), Value::String(types.kind));
    }
    match serde_json::to_value(&metadata) {
        Ok(metadata) => fields.insert("metadata".into(), metadata),
        Err(_) => return Value::Null,
    };
    // The body's fields come after, as the flattened serialization writes
    // them: a body field of the same name wins.
    fields.extend(body);
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(body: Value) -> DynamicObject {
        let mut object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7",
                         "labels": {"app": "web"}},
        }))
        .expect("an object");
        object.data = body;
        object
    }

    #[test]
    fn into_value_is_what_serializing_gives() {
        let bodies = [
            json!({"data": {"payload": "x".repeat(1000)}}),
            json!({}),
            json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 1}}),
            json!({"metadata": {"name": "inside"}, "kind": "Other"}),
            Value::Null,
            json!([1, 2]),
        ];
        for body in bodies {
            let mut with_types = object(body.clone());
            let serialized = serde_json::to_value(&with_types).unwrap_or(Value::Null);
            assert_eq!(into_value(with_types.clone()), serialized, "{body}");
            with_types.types = None;
            let serialized = serde_json::to_value(&with_types).unwrap_or(Value::Null);
            assert_eq!(into_value(with_types), serialized, "no types, {body}");
        }
    }
}
