//! `relayctl apply`, `relayctl get` and `relayctl events`: objects at
//! the root, and one cluster's live copy and events asked of its agent.

use anyhow::Context as _;
use relaymesh_root::client::{cluster, manifests, resources, Client};

use super::GetFormat;

/// `relayctl apply -f FILE…`.
pub(super) async fn apply(
    client: &Client,
    files: &[String],
    namespace: &str,
) -> anyhow::Result<()> {
    let mut objects = Vec::new();
    for file in files {
        objects.extend(manifests::read(file).with_context(|| format!("cannot read {file}"))?);
    }
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let applied = client
            .apply(object, namespace)
            .await
            .with_context(|| format!("cannot apply {kind} {name:?}"))?;
        let version = applied["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("?");
        println!("{kind}/{name} applied (resourceVersion {version})");
    }
    Ok(())
}

/// `relayctl get KIND[/NAME] --cluster CLUSTER`: one object, or (without
/// a name) every one of the kind relaymesh manages there, in `namespace`
/// (`None`: every namespace).
pub(super) async fn get_from(
    client: &Client,
    cluster: &str,
    resource: &str,
    namespace: Option<&str>,
    output: GetFormat,
) -> anyhow::Result<()> {
    let (kind, name) = resource.split_once('/').unwrap_or((resource, ""));
    let kind_ref = cluster::kind_ref(kind).with_context(|| {
        format!(
            "unknown kind {kind:?}: use one of {} (or plural.group), or Kind.version.group",
            cluster::known_kinds()
        )
    })?;
    let reply = client
        .cluster_object(cluster, &kind_ref, namespace, name)
        .await
        .with_context(|| format!("cannot read {resource} from cluster {cluster}"))?;
    if let Some(note) = cluster::stale_note(&reply) {
        eprintln!("{note}");
    }
    let object = &reply["object"];
    match output {
        GetFormat::Json => println!("{}", serde_json::to_string_pretty(object)?),
        GetFormat::Yaml => print!("{}", serde_yaml::to_string(object)?),
        GetFormat::Table | GetFormat::Wide => {
            // As `kubectl get` on the cluster prints it; a stale copy was
            // said so on stderr above.
            let view = resources::TableView {
                namespaces: name.is_empty() && namespace.is_none(),
                wide: output == GetFormat::Wide,
                ..Default::default()
            };
            let objects = match object["kind"].as_str() {
                Some("List") => object["items"].as_array().cloned().unwrap_or_default(),
                _ => vec![object.clone()],
            };
            if objects.is_empty() {
                eprintln!("No resources found in {cluster} that relaymesh manages.");
                return Ok(());
            }
            let table = cluster::object_table(&kind_ref, &objects);
            print!("{}", resources::render_table_as(&table, &view));
            if let Some(left_out) = object["metadata"]["remainingItemCount"].as_u64() {
                eprintln!("{left_out} more not shown: name one, or narrow with -n");
            }
        }
    }
    Ok(())
}

/// `relayctl events --cluster CLUSTER`.
pub(super) async fn events(
    client: &Client,
    cluster: &str,
    namespace: Option<&str>,
    limit: u32,
    output: GetFormat,
) -> anyhow::Result<()> {
    let reply = client
        .cluster_events(cluster, namespace, limit)
        .await
        .with_context(|| format!("cannot read the events of cluster {cluster}"))?;
    if let Some(note) = cluster::stale_note(&reply) {
        eprintln!("{note}");
    }
    match output {
        GetFormat::Json => println!("{}", serde_json::to_string_pretty(&reply)?),
        GetFormat::Yaml => print!("{}", serde_yaml::to_string(&reply)?),
        GetFormat::Table | GetFormat::Wide => print!(
            "{}",
            cluster::render_events(&reply, std::time::SystemTime::now())
        ),
    }
    Ok(())
}

/// `relayctl get RESOURCE [-n NS | -A]` at the root.
pub(super) async fn get(
    client: &Client,
    resource: &str,
    namespace: &str,
    view: resources::TableView,
    output: GetFormat,
) -> anyhow::Result<()> {
    let resource = known_resource(resource);
    let namespace = (!view.namespaces).then_some(namespace);
    match output {
        GetFormat::Table | GetFormat::Wide => {
            let table = client
                .table(&resource, namespace)
                .await
                .with_context(|| format!("cannot list {}", resource.plural))?;
            print!("{}", resources::render_table_as(&table, &view));
        }
        GetFormat::Json | GetFormat::Yaml => {
            let list = client
                .list_resource(&resource, namespace)
                .await
                .with_context(|| format!("cannot list {}", resource.plural))?;
            if output == GetFormat::Json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                print!("{}", serde_yaml::to_string(&list)?);
            }
        }
    }
    Ok(())
}

/// The resources relayctl knows by name; anything else is looked up as a
/// plural in the core group, then relaymesh's.
fn known_resource(name: &str) -> resources::Resource {
    let relaymesh = |plural: &str, namespaced: bool| resources::Resource {
        group: "relaymesh.dev".into(),
        version: "v1alpha1".into(),
        plural: plural.into(),
        namespaced,
    };
    match name {
        "placements" | "placement" | "pl" => relaymesh("placements", true),
        "clusters" | "cluster" => relaymesh("clusters", false),
        "relays" | "relay" => relaymesh("relays", false),
        "clusterprofiles" | "clusterprofile" => resources::Resource {
            group: "multicluster.x-k8s.io".into(),
            version: "v1alpha1".into(),
            plural: "clusterprofiles".into(),
            namespaced: false,
        },
        other => resources::Resource {
            group: String::new(),
            version: "v1".into(),
            plural: other.into(),
            namespaced: !matches!(other, "namespaces" | "nodes"),
        },
    }
}
