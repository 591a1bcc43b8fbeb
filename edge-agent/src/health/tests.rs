//! The kstatus rules, kind by kind, on statuses as the controllers write
//! them.

use serde_json::{json, Value};

use super::*;

fn deployment(replicas: i64, status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "generation": 2},
        "spec": {"replicas": replicas},
        "status": status,
    })
}

fn rolled_out(replicas: i64) -> Value {
    json!({
        "observedGeneration": 2, "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    })
}

#[test]
fn a_deployment_past_its_progress_deadline_failed() {
    // What the issue found counted as "applied" for ever.
    let status = json!({
        "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
        "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": 3,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
             "message": "Deployment does not have minimum availability: ImagePullBackOff: no such image"},
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": "ReplicaSet \"web-5d9\" has timed out progressing."},
        ],
    });
    let Health::Failed(why) = health("apps", "Deployment", &deployment(3, status)) else {
        panic!("not failed");
    };
    assert!(why.contains("ImagePullBackOff: no such image"), "{why}");
}

#[test]
fn a_deployment_is_ready_only_when_every_count_and_condition_caught_up() {
    assert_eq!(
        health("apps", "Deployment", &deployment(3, rolled_out(3))),
        Health::Ready
    );
    assert_eq!(
        health("apps", "Deployment", &deployment(3, json!({}))),
        Health::Progressing
    );
    // Each count short of the spec keeps it in progress.
    for field in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        let mut status = rolled_out(3);
        status[field] = json!(2);
        assert_eq!(
            health("apps", "Deployment", &deployment(3, status)),
            Health::Progressing,
            "{field}"
        );
    }
    // Old pods still terminating.
    let mut status = rolled_out(3);
    status["replicas"] = json!(4);
    assert_eq!(
        health("apps", "Deployment", &deployment(3, status)),
        Health::Progressing
    );
    // Available but the new ReplicaSet is still progressing.
    let mut status = rolled_out(3);
    status["conditions"][1]["reason"] = json!("ReplicaSetUpdated");
    assert_eq!(
        health("apps", "Deployment", &deployment(3, status)),
        Health::Progressing
    );
    // A status about the previous generation says nothing about this one.
    let mut status = rolled_out(3);
    status["observedGeneration"] = json!(1);
    assert_eq!(
        health("apps", "Deployment", &deployment(3, status)),
        Health::Progressing
    );
    // spec.replicas defaults to 1.
    let mut object = deployment(1, rolled_out(1));
    object["spec"] = json!({});
    assert_eq!(health("apps", "Deployment", &object), Health::Ready);
}

#[test]
fn stateful_sets_follow_replicas_revisions_and_partitions() {
    let object = |spec: Value, status: Value| json!({"metadata": {"generation": 1}, "spec": spec, "status": status});
    let settled = json!({
        "observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
        "updatedReplicas": 2, "currentRevision": "db-1", "updateRevision": "db-1",
    });
    let spec = json!({"replicas": 2});
    assert_eq!(
        health(
            "apps",
            "StatefulSet",
            &object(spec.clone(), settled.clone())
        ),
        Health::Ready
    );
    let mut rolling = settled.clone();
    rolling["updateRevision"] = json!("db-2");
    assert_eq!(
        health("apps", "StatefulSet", &object(spec.clone(), rolling)),
        Health::Progressing
    );
    let mut short = settled.clone();
    short["readyReplicas"] = json!(1);
    assert_eq!(
        health("apps", "StatefulSet", &object(spec, short)),
        Health::Progressing
    );
    // A partition holds back pods below it on purpose.
    let partitioned = json!({"replicas": 2, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}});
    let mut part = settled.clone();
    part["updatedReplicas"] = json!(1);
    part["updateRevision"] = json!("db-2");
    assert_eq!(
        health("apps", "StatefulSet", &object(partitioned, part)),
        Health::Ready
    );
    let on_delete = json!({"replicas": 2, "updateStrategy": {"type": "OnDelete"}});
    assert_eq!(
        health("apps", "StatefulSet", &object(on_delete, json!({}))),
        Health::Ready
    );
}

#[test]
fn replica_sets_and_daemon_sets_count_what_they_run() {
    let rs = |status: Value| json!({"spec": {"replicas": 2}, "status": status});
    let full = json!({"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2});
    assert_eq!(
        health("apps", "ReplicaSet", &rs(full.clone())),
        Health::Ready
    );
    let mut failing = full;
    failing["conditions"] = json!([{"type": "ReplicaFailure", "status": "True"}]);
    assert_eq!(
        health("apps", "ReplicaSet", &rs(failing)),
        Health::Progressing
    );

    let ds = |status: Value| json!({"metadata": {"generation": 3}, "status": status});
    let all = json!({
        "observedGeneration": 3, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3,
    });
    assert_eq!(health("apps", "DaemonSet", &ds(all.clone())), Health::Ready);
    let mut updating = all.clone();
    updating["updatedNumberScheduled"] = json!(2);
    assert_eq!(
        health("apps", "DaemonSet", &ds(updating)),
        Health::Progressing
    );
    // Never seen by its controller.
    let mut unseen = all;
    unseen
        .as_object_mut()
        .map(|status| status.remove("observedGeneration"));
    assert_eq!(
        health("apps", "DaemonSet", &ds(unseen)),
        Health::Progressing
    );
    assert_eq!(health("apps", "DaemonSet", &json!({})), Health::Progressing);
}

#[test]
fn jobs_pods_claims_services_and_definitions() {
    let with = |status: Value| json!({"status": status});
    let condition = |kind: &str, status: &str| json!({"conditions": [{"type": kind, "status": status, "message": "backoff limit"}]});
    assert_eq!(
        health("batch", "Job", &with(condition("Complete", "True"))),
        Health::Ready
    );
    assert_eq!(
        health("batch", "Job", &with(condition("Failed", "True"))),
        Health::Failed("backoff limit".into())
    );
    assert_eq!(
        health("batch", "Job", &with(json!({"active": 1}))),
        Health::Progressing
    );

    let running_ready =
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    assert_eq!(health("", "Pod", &with(running_ready)), Health::Ready);
    assert_eq!(
        health("", "Pod", &with(json!({"phase": "Succeeded"}))),
        Health::Ready
    );
    assert_eq!(
        health("", "Pod", &with(json!({"phase": "Pending"}))),
        Health::Progressing
    );
    let looping = json!({"phase": "Running", "containerStatuses": [
        {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        {"name": "sidecar", "state": {"running": {}}},
    ]});
    assert_eq!(
        health("", "Pod", &with(looping)),
        Health::Failed("containers in CrashLoopBackOff: app".into())
    );

    assert_eq!(
        health(
            "",
            "PersistentVolumeClaim",
            &with(json!({"phase": "Bound"}))
        ),
        Health::Ready
    );
    assert_eq!(
        health(
            "",
            "PersistentVolumeClaim",
            &with(json!({"phase": "Pending"}))
        ),
        Health::Progressing
    );

    let lb = |ingress: Value| json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": ingress}}});
    assert_eq!(health("", "Service", &lb(json!([]))), Health::Progressing);
    assert_eq!(
        health("", "Service", &lb(json!([{"ip": "10.0.0.1"}]))),
        Health::Ready
    );
    assert_eq!(
        health("", "Service", &json!({"spec": {"type": "ClusterIP"}})),
        Health::Ready
    );

    let crd = "apiextensions.k8s.io";
    assert_eq!(
        health(
            crd,
            "CustomResourceDefinition",
            &with(condition("Established", "True"))
        ),
        Health::Ready
    );
    assert_eq!(
        health(crd, "CustomResourceDefinition", &with(json!({}))),
        Health::Progressing
    );
    assert_eq!(health("", "ConfigMap", &json!({})), Health::Ready);
}

#[test]
fn other_kinds_follow_the_conventional_conditions() {
    let widget = |conditions: Value, observed: i64| json!({"metadata": {"generation": 4}, "status": {"observedGeneration": observed, "conditions": conditions}});
    let one = |kind: &str, status: &str| json!([{"type": kind, "status": status, "message": "quota exceeded"}]);
    assert_eq!(
        health("example.com", "Widget", &widget(json!([]), 4)),
        Health::Ready
    );
    assert_eq!(
        health("example.com", "Widget", &widget(json!([]), 3)),
        Health::Progressing
    );
    assert_eq!(
        health(
            "example.com",
            "Widget",
            &widget(one("Reconciling", "True"), 4)
        ),
        Health::Progressing
    );
    assert_eq!(
        health("example.com", "Widget", &widget(one("Ready", "False"), 4)),
        Health::Progressing
    );
    assert_eq!(
        health("example.com", "Widget", &widget(one("Ready", "True"), 4)),
        Health::Ready
    );
    assert_eq!(
        health("example.com", "Widget", &widget(one("Stalled", "True"), 4)),
        Health::Failed("quota exceeded".into())
    );
}
