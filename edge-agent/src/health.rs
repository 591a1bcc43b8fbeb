//! Whether one live object is doing what its spec asks: the rules the
//! ecosystem agrees on, those of kstatus (kubernetes-sigs/cli-utils, the
//! library behind `kubectl wait`-style tools, Flux and kpt), read per kind.
//!
//! kstatus says *Current*, *InProgress* or *Failed*; here they are
//! [`Health::Ready`], [`Health::Progressing`] and [`Health::Failed`]. The
//! order of the checks is kstatus's: first whether the controller has seen
//! the latest spec at all (`status.observedGeneration` behind
//! `metadata.generation` means whatever the status says is about an older
//! spec), then the kind's own rules, and for kinds without rules the
//! conventional `Stalled`, `Reconciling` and `Ready` conditions. Where kstatus
//! calls something InProgress that will not recover on its own (a Deployment
//! past its progress deadline, a Job past its backoff limit, a Pod crash
//! looping) it is Failed, with the controller's own message, so the tree
//! counts it as a failure and shows why.

use serde_json::Value;

/// How one applied object is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Doing what its spec asks (kstatus: Current).
    Ready,
    /// Applied; its controller has not caught up yet (kstatus: InProgress).
    Progressing,
    /// It failed and will not recover by itself, with the reason.
    Failed(String),
}

/// The health of a live object of `group`/`kind`.
pub fn health(group: &str, kind: &str, object: &Value) -> Health {
    let status = object.get("status").unwrap_or(&Value::Null);
    if behind_generation(object, status) {
        return Health::Progressing;
    }
    match (group, kind) {
        ("apps", "Deployment") => deployment(object, status),
        ("apps", "StatefulSet") => stateful_set(object, status),
        ("apps", "ReplicaSet") => replica_set(object, status),
        ("apps", "DaemonSet") => daemon_set(object, status),
        ("batch", "Job") => job(status),
        ("", "Pod") => pod(status),
        ("", "PersistentVolumeClaim") => {
            progressing_unless(status.get("phase").and_then(Value::as_str) == Some("Bound"))
        }
        ("", "Service") => service(object, status),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            progressing_unless(condition(status, "Established") == Some(true))
        }
        // Kinds that hold data or policy have no controller to wait for.
        ("", "ConfigMap" | "Secret" | "Namespace" | "ServiceAccount")
        | ("batch", "CronJob")
        | ("rbac.authorization.k8s.io", _) => Health::Ready,
        _ => by_conditions(status),
    }
}

/// kstatus's first check: the controller reported on an older generation.
/// Lenient, as kstatus is: an object without either field passes.
fn behind_generation(object: &Value, status: &Value) -> bool {
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = status.get("observedGeneration").and_then(Value::as_i64);
    matches!((generation, observed), (Some(generation), Some(observed)) if observed < generation)
}

fn deployment(object: &Value, status: &Value) -> Health {
    // The controller sets this once the progress deadline passed without
    // progress: it will not get better by waiting.
    if let Some(progressing) = find_condition(status, "Progressing") {
        if progressing.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded") {
            let why = condition_message(status, "Available")
                .filter(|_| condition(status, "Available") == Some(false))
                .or_else(|| condition_message(status, "Progressing"))
                .unwrap_or_else(|| "progress deadline exceeded".into());
            return Health::Failed(why);
        }
    }
    let wanted = desired_replicas(object);
    let count = |field| int(status, field);
    let replicas = count("replicas");
    let updated = count("updatedReplicas");
    let caught_up = wanted <= replicas
        && wanted <= updated
        && replicas <= wanted
        && updated <= count("availableReplicas")
        && wanted <= count("readyReplicas");
    if !caught_up {
        return Health::Progressing;
    }
    // With a progress deadline (the default), the controller also says so
    // in its conditions; kstatus waits for them.
    let deadline = object.pointer("/spec/progressDeadlineSeconds");
    let no_deadline = deadline.and_then(Value::as_i64) == Some(i64::from(i32::MAX));
    let progressed = no_deadline
        || find_condition(status, "Progressing").is_some_and(|found| {
            found.get("status").and_then(Value::as_str) == Some("True")
                && found.get("reason").and_then(Value::as_str) == Some("NewReplicaSetAvailable")
        });
    progressing_unless(progressed && condition(status, "Available") == Some(true))
}

fn stateful_set(object: &Value, status: &Value) -> Health {
    let strategy = object
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str);
    if strategy == Some("OnDelete") {
        // Updates wait for someone to delete pods: nothing to wait for here.
        return Health::Ready;
    }
    let wanted = desired_replicas(object);
    let count = |field| int(status, field);
    let replicas = count("replicas");
    if wanted > replicas || wanted > count("readyReplicas") || replicas > wanted {
        return Health::Progressing;
    }
    let partition = object
        .pointer("/spec/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64);
    if let Some(partition) = partition {
        return progressing_unless(count("updatedReplicas") >= wanted - partition);
    }
    let revisions = (status.get("currentRevision"), status.get("updateRevision"));
    progressing_unless(wanted <= count("currentReplicas") && revisions.0 == revisions.1)
}

fn replica_set(object: &Value, status: &Value) -> Health {
    if condition(status, "ReplicaFailure") == Some(true) {
        return Health::Progressing;
    }
    let wanted = desired_replicas(object);
    let count = |field| int(status, field);
    progressing_unless(
        wanted <= count("fullyLabeledReplicas")
            && wanted <= count("availableReplicas")
            && wanted <= count("readyReplicas")
            && count("replicas") <= wanted,
    )
}

fn daemon_set(object: &Value, status: &Value) -> Health {
    // The controller always writes these once it acted; without them it
    // has not.
    let seen = object.pointer("/metadata/generation").is_none()
        || status.get("observedGeneration").is_some();
    let Some(wanted) = status.get("desiredNumberScheduled").and_then(Value::as_i64) else {
        return Health::Progressing;
    };
    let count = |field| int(status, field);
    progressing_unless(
        seen && [
            "currentNumberScheduled",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberReady",
        ]
        .into_iter()
        .all(|field| count(field) >= wanted),
    )
}

fn job(status: &Value) -> Health {
    if condition(status, "Failed") == Some(true) {
        let reason = condition_message(status, "Failed").unwrap_or_else(|| "the job failed".into());
        return Health::Failed(reason);
    }
    progressing_unless(condition(status, "Complete") == Some(true))
}

fn pod(status: &Value) -> Health {
    match status.get("phase").and_then(Value::as_str) {
        // A finished pod is as done as it will be (kstatus: Current).
        Some("Succeeded" | "Failed") => Health::Ready,
        Some("Running") if condition(status, "Ready") == Some(true) => Health::Ready,
        Some("Running") => {
            let looping: Vec<&str> = status
                .get("containerStatuses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|container| {
                    container
                        .pointer("/state/waiting/reason")
                        .and_then(Value::as_str)
                        == Some("CrashLoopBackOff")
                })
                .filter_map(|container| container.get("name").and_then(Value::as_str))
                .collect();
            if looping.is_empty() {
                Health::Progressing
            } else {
                Health::Failed(format!(
                    "containers in CrashLoopBackOff: {}",
                    looping.join(", ")
                ))
            }
        }
        _ => Health::Progressing,
    }
}

fn service(object: &Value, status: &Value) -> Health {
    // Only a load balancer has something to wait for: its address.
    if object.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
        return Health::Ready;
    }
    let ingress = status
        .pointer("/loadBalancer/ingress")
        .and_then(Value::as_array);
    progressing_unless(ingress.is_some_and(|ingress| !ingress.is_empty()))
}

/// Custom resources and kinds without rules: the conventions kstatus reads
/// (`Stalled` and `Reconciling` "abnormal-true" conditions, and `Ready`).
fn by_conditions(status: &Value) -> Health {
    if condition(status, "Stalled") == Some(true) {
        let why = condition_message(status, "Stalled").unwrap_or_else(|| "stalled".into());
        return Health::Failed(why);
    }
    if condition(status, "Reconciling") == Some(true) || condition(status, "Ready") == Some(false) {
        return Health::Progressing;
    }
    Health::Ready
}

fn progressing_unless(done: bool) -> Health {
    if done {
        Health::Ready
    } else {
        Health::Progressing
    }
}

/// `spec.replicas`, 1 when absent, as the controllers default it.
fn desired_replicas(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn int(status: &Value, field: &str) -> i64 {
    status.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn condition(status: &Value, kind: &str) -> Option<bool> {
    let found = find_condition(status, kind)?;
    match found.get("status").and_then(Value::as_str) {
        Some("True") => Some(true),
        Some("False") => Some(false),
        _ => None,
    }
}

fn condition_message(status: &Value, kind: &str) -> Option<String> {
    let found = find_condition(status, kind)?;
    found
        .get("message")
        .or_else(|| found.get("reason"))
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

fn find_condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|found| found.get("type").and_then(Value::as_str) == Some(kind))
}

#[cfg(test)]
mod tests;
