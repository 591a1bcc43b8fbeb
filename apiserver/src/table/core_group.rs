//! The columns of the core group's kinds other than pods: namespaces,
//! config maps, secrets and services, with the cells of a Service that
//! Go's printers work out from its type.

use serde_json::{json, Value};

use super::cells::{array, count, labels, text};
use super::column::{column, wide, KindColumns};

/// Namespaces: their phase.
pub(super) fn namespaces() -> KindColumns {
    (
        vec![column("Status", "string", |o, _| {
            text(o, "/status/phase", "Active")
        })],
        vec![],
    )
}

/// ConfigMaps: how many keys they hold, text and binary.
pub(super) fn config_maps() -> KindColumns {
    (
        vec![column("Data", "integer", |o, _| {
            json!(count(o, "/data") + count(o, "/binaryData"))
        })],
        vec![],
    )
}

/// Secrets: their type and how many keys they hold.
pub(super) fn secrets() -> KindColumns {
    (
        vec![
            column("Type", "string", |o, _| text(o, "/type", "Opaque")),
            column("Data", "integer", |o, _| json!(count(o, "/data"))),
        ],
        vec![],
    )
}

/// Services: their type, addresses and ports; the selector when wide.
pub(super) fn services() -> KindColumns {
    (
        vec![
            column("Type", "string", |o, _| text(o, "/spec/type", "ClusterIP")),
            column("Cluster-IP", "string", |o, _| {
                text(o, "/spec/clusterIP", "<none>")
            }),
            column("External-IP", "string", |o, _| json!(external_ip(o))),
            column("Port(s)", "string", |o, _| json!(ports(o))),
        ],
        vec![wide("Selector", "string", |o, _| {
            json!(labels(o.pointer("/spec/selector")))
        })],
    )
}

/// A Service's ports as Go's `makePortString` writes them:
/// `port[:nodePort]/protocol`, joined with commas.
fn ports(object: &Value) -> String {
    let ports: Vec<String> = array(object, "/spec/ports")
        .iter()
        .map(|port| {
            let number = port["port"].as_i64().unwrap_or(0);
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            match port["nodePort"].as_i64().filter(|node_port| *node_port > 0) {
                Some(node_port) => format!("{number}:{node_port}/{protocol}"),
                None => format!("{number}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

/// A Service's External-IP cell, by its type, as Go's
/// `getServiceExternalIP` writes it.
fn external_ip(object: &Value) -> String {
    let external: Vec<&str> = array(object, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match object.pointer("/spec/type").and_then(Value::as_str) {
        None | Some("" | "ClusterIP" | "NodePort") if external.is_empty() => "<none>".into(),
        None | Some("" | "ClusterIP" | "NodePort") => external.join(","),
        Some("LoadBalancer") => {
            let mut addresses: Vec<&str> = array(object, "/status/loadBalancer/ingress")
                .iter()
                .filter_map(|ingress| {
                    ingress["ip"]
                        .as_str()
                        .filter(|ip| !ip.is_empty())
                        .or_else(|| ingress["hostname"].as_str())
                })
                .collect();
            addresses.extend(external);
            if addresses.is_empty() {
                "<pending>".into()
            } else {
                addresses.join(",")
            }
        }
        Some("ExternalName") => object
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Some(_) => "<unknown>".into(),
    }
}
