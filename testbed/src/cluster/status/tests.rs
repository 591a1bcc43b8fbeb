use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::*;

fn deployment(image: &str, replicas: i64, generation: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "generation": generation},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    })
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

#[test]
fn a_healthy_deployment_becomes_available_with_every_replica() {
    let object = deployment("nginx:1.27", 3, 2);
    let status = desired_status(WorkloadKind::Deployment, &object, None, 3, at(0));
    assert_eq!(status["observedGeneration"], 2);
    for field in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        assert_eq!(status[field], 3, "{field}");
    }
    assert_eq!(condition(&status, "Available")["status"], "True");
    assert_eq!(
        condition(&status, "Available")["reason"],
        "MinimumReplicasAvailable"
    );
    assert_eq!(condition(&status, "Progressing")["status"], "True");
}

#[test]
fn an_image_containing_fail_makes_the_deployment_unavailable() {
    let object = deployment("registry.example/fail-on-start:1", 2, 1);
    let failed = failure(&object, "edge-1", &[]);
    assert_eq!(
        failed.as_ref().map(|f| f.reason.as_str()),
        Some("ImagePullBackOff")
    );
    let status = desired_status(WorkloadKind::Deployment, &object, failed.as_ref(), 3, at(0));
    assert_eq!(status["readyReplicas"], 0);
    assert_eq!(status["unavailableReplicas"], 2);
    let available = condition(&status, "Available");
    assert_eq!(available["status"], "False");
    assert_eq!(available["reason"], "MinimumReplicasUnavailable");
    assert!(available["message"]
        .as_str()
        .is_some_and(|m| m.contains("ImagePullBackOff")));
}

#[test]
fn a_failure_rule_fails_a_deterministic_share_of_clusters() {
    let object = deployment("nginx:1.27", 1, 1);
    let rules = [FailureRule {
        workload: "shop/web".into(),
        fraction: 0.25,
    }];
    let clusters: Vec<String> = (0..400).map(|i| format!("edge-{i}")).collect();
    let failing: Vec<&String> = clusters
        .iter()
        .filter(|name| failure(&object, name, &rules).is_some())
        .collect();
    // Roughly a quarter, and the same clusters every time.
    assert!((60..140).contains(&failing.len()), "{}", failing.len());
    let again: Vec<&String> = clusters
        .iter()
        .filter(|name| failure(&object, name, &rules).is_some())
        .collect();
    assert_eq!(failing, again);
    // Other workloads are not affected; a bare name matches too.
    let mut other = object.clone();
    other["metadata"]["name"] = json!("api");
    assert!(clusters
        .iter()
        .all(|name| failure(&other, name, &rules).is_none()));
    let by_name = [FailureRule {
        workload: "web".into(),
        fraction: 1.0,
    }];
    assert!(failure(&object, "edge-1", &by_name).is_some());
}

#[test]
fn a_settled_status_is_a_fixed_point_so_writes_do_not_loop() {
    let mut object = deployment("nginx:1.27", 2, 1);
    let first = desired_status(WorkloadKind::Deployment, &object, None, 3, at(0));
    object["status"] = first.clone();
    let later = desired_status(WorkloadKind::Deployment, &object, None, 3, at(60));
    assert_eq!(first, later, "nothing changed, so nothing is rewritten");
}

#[test]
fn a_spec_change_is_simulated_again_keeping_unchanged_transition_times() {
    let mut object = deployment("nginx:1.27", 2, 1);
    object["status"] = desired_status(WorkloadKind::Deployment, &object, None, 3, at(0));
    let old_progressing = condition(&object["status"], "Progressing").clone();
    object["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    object["metadata"]["generation"] = json!(2);
    let status = desired_status(WorkloadKind::Deployment, &object, None, 3, at(60));
    assert_eq!(status["observedGeneration"], 2);
    let progressing = condition(&status, "Progressing");
    // A new ReplicaSet progressed: new message, same status since t=0.
    assert_ne!(progressing["message"], old_progressing["message"]);
    assert_eq!(
        progressing["lastTransitionTime"],
        old_progressing["lastTransitionTime"]
    );
    assert_ne!(
        progressing["lastUpdateTime"],
        old_progressing["lastUpdateTime"]
    );
    assert_eq!(
        without_times(&condition(&status, "Available").clone()),
        without_times(&condition(&object["status"], "Available").clone())
    );
}

#[test]
fn statefulsets_replicasets_and_daemonsets_report_their_own_fields() {
    let mut object = deployment("nginx:1.27", 2, 4);
    let sts = desired_status(WorkloadKind::StatefulSet, &object, None, 3, at(0));
    assert_eq!(sts["currentReplicas"], 2);
    assert_eq!(sts["availableReplicas"], 2);
    assert_eq!(sts["observedGeneration"], 4);
    assert_eq!(sts["currentRevision"], sts["updateRevision"]);
    let rs = desired_status(WorkloadKind::ReplicaSet, &object, None, 3, at(0));
    assert_eq!(rs["fullyLabeledReplicas"], 2);
    assert_eq!(rs["readyReplicas"], 2);
    object["spec"]
        .as_object_mut()
        .map(|spec| spec.remove("replicas"));
    let ds = desired_status(WorkloadKind::DaemonSet, &object, None, 5, at(0));
    assert_eq!(ds["desiredNumberScheduled"], 5);
    assert_eq!(ds["numberReady"], 5);
    let failed = Failure {
        reason: "ImagePullBackOff".into(),
        message: "no".into(),
    };
    let ds = desired_status(WorkloadKind::DaemonSet, &object, Some(&failed), 5, at(0));
    assert_eq!(ds["numberReady"], 0);
    assert_eq!(ds["numberUnavailable"], 5);
    assert_eq!(condition(&ds, "Available")["status"], "False");
}

#[test]
fn jobs_complete_or_fail_after_their_backoff_limit() {
    let job = json!({
        "metadata": {"name": "migrate", "namespace": "shop", "generation": 1},
        "spec": {
            "completions": 3,
            "backoffLimit": 2,
            "template": {"spec": {"containers": [{"name": "m", "image": "migrate:1"}]}},
        },
    });
    let status = desired_status(WorkloadKind::Job, &job, None, 3, at(0));
    assert_eq!(status["succeeded"], 3);
    assert_eq!(condition(&status, "Complete")["status"], "True");
    assert!(status["completionTime"].is_string());

    let mut failing = job.clone();
    failing["spec"]["template"]["spec"]["containers"][0]["image"] = json!("migrate:fail");
    let failed = failure(&failing, "edge-1", &[]);
    let status = desired_status(WorkloadKind::Job, &failing, failed.as_ref(), 3, at(0));
    assert_eq!(status["failed"], 3);
    assert_eq!(condition(&status, "Failed")["status"], "True");
    assert_eq!(condition(&status, "Complete"), &Value::Null);
    assert!(status.get("completionTime").is_none());
}

#[test]
fn kinds_are_recognised_by_group_and_resource() {
    let key = |group: &str, resource: &str| ObjectKey::new(group, resource, Some("a"), "b");
    assert_eq!(
        WorkloadKind::of(&key("apps", "deployments")),
        Some(WorkloadKind::Deployment)
    );
    assert_eq!(
        WorkloadKind::of(&key("batch", "jobs")),
        Some(WorkloadKind::Job)
    );
    assert_eq!(WorkloadKind::of(&key("", "configmaps")), None);
    assert_eq!(WorkloadKind::of(&key("batch", "cronjobs")), None);
}
