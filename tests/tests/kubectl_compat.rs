//! kubectl's everyday commands against a real root, each checked against
//! what a real kube-apiserver answers: the generators (`create deployment`,
//! `run`, `expose`, ...), changes in place (`scale`, `set image`, `label`,
//! `annotate`, `edit`, the three kinds of `patch`, `replace`), reads (`get`
//! with its output formats, pages, field selectors and a filtered watch,
//! `describe`, `explain`), previews (`diff`, `--dry-run=server`), server-side
//! apply's conflicts, pruning with an ApplySet, `wait`, and deletion.
//!
//! One test and one root (a root costs seconds to start): each step is a
//! function named for what it shows, all in one namespace, and each reads
//! back what the server stored instead of trusting kubectl's message alone.
//! What `kubectl.rs` and `manifest_corpus.rs` show already (apply, CRDs,
//! `get -w`, owner references with orphan and background cascades,
//! finalizers, kustomize, every kind's round trip) is not repeated.
//!
//! The root runs no controllers and no kubelets: a Deployment gets no
//! ReplicaSet and a Pod never runs, so nothing here waits for readiness;
//! where `wait` needs a condition, the test writes it through the status
//! subresource as a controller would.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_tests::{kubectl_cache_dir, observe, wait_for, Mesh};
use serde_json::{json, Value};

const KUBECTL: &str = "/usr/bin/kubectl";

/// The namespace the test creates and works in (its kubeconfig's default).
const NAMESPACE: &str = "compat";

/// How long a spawned kubectl (`wait`, `get -w`) or an asynchronous
/// deletion may take to show what it must.
const SETTLE: Duration = Duration::from_secs(60);

/// The steps, in order, each with its name for the log.
macro_rules! steps {
    ($($step:ident),* $(,)?) => {
        [$((stringify!($step), $step as fn(&Kubectl) -> anyhow::Result<()>)),*]
    };
}

#[test]
fn everyday_kubectl_commands_get_kube_apiserver_answers() -> anyhow::Result<()> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return Ok(());
    }
    let (mesh, _root) = Mesh::init()?;
    let kubectl = Kubectl::for_mesh(&mesh)?;
    let steps = steps![
        create_namespace,
        create_generators,
        run_and_expose,
        scale_and_set_image,
        label_and_annotate,
        edit_through_kube_editor,
        patch_three_ways,
        replace_objects,
        get_output_formats,
        watch_with_field_selector,
        explain_and_describe,
        diff_and_dry_run,
        server_side_apply_conflicts,
        prune_with_applyset,
        wait_for_conditions,
        delete_cascade_and_all,
    ];
    for (name, step) in steps {
        eprintln!("step {name}");
        step(&kubectl).with_context(|| format!("step {name}\nroot logs:{}", mesh.logs()))?;
    }
    Ok(())
}

/// `create namespace`, which the rest works in.
fn create_namespace(kubectl: &Kubectl) -> anyhow::Result<()> {
    let created = kubectl.ok(&format!("create namespace {NAMESPACE}"))?;
    assert_eq!(created.trim(), format!("namespace/{NAMESPACE} created"));
    let phase = kubectl.ok(&format!(
        "get namespace {NAMESPACE} -o jsonpath={{.status.phase}}"
    ))?;
    assert_eq!(phase, "Active");
    Ok(())
}

/// `kubectl create <kind>` for each generator: the server stores the
/// object with the fields the flags set, and kubectl says `KIND/NAME
/// created`. Deployment, Job, CronJob, Service, Ingress and Role bodies are
/// protobuf, where an unset field and a zero one look alike: the server
/// stores neither as a field, as Go's JSON leaves out empty `omitempty`
/// fields.
fn create_generators(kubectl: &Kubectl) -> anyhow::Result<()> {
    kubectl.created(
        "create deployment web --image=nginx:1.25 --replicas=2 --port=80",
        "deployment.apps/web",
    )?;
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(at(&web, "/metadata/labels"), json!({"app": "web"}), "{web}");
    assert_eq!(at(&web, "/spec/replicas"), 2, "{web}");
    assert_eq!(
        at(&web, "/spec/selector/matchLabels"),
        json!({"app": "web"}),
        "{web}"
    );
    assert_eq!(
        at(&web, "/spec/template/metadata/labels"),
        json!({"app": "web"}),
        "{web}"
    );
    let container = at(&web, "/spec/template/spec/containers/0");
    assert_eq!(at(&container, "/name"), "nginx", "{web}");
    assert_eq!(at(&container, "/image"), "nginx:1.25", "{web}");
    assert_eq!(at(&container, "/ports/0/containerPort"), 80, "{web}");
    // A Deployment's strategy starts its generation at 1; its status is
    // empty until a controller writes it.
    assert_eq!(at(&web, "/metadata/generation"), 1, "{web}");
    assert_eq!(at(&web, "/status/observedGeneration"), Value::Null, "{web}");

    kubectl.created(
        "create configmap settings --from-literal=color=blue --from-literal=size=3",
        "configmap/settings",
    )?;
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&settings, "/data"),
        json!({"color": "blue", "size": "3"}),
        "{settings}"
    );

    kubectl.created(
        "create secret generic creds --from-literal=password=hunter2",
        "secret/creds",
    )?;
    let creds = kubectl.stored("secret", "creds")?;
    // Secrets default to Opaque.
    assert_eq!(at(&creds, "/type"), "Opaque", "{creds}");
    assert_eq!(at(&creds, "/data/password"), "aHVudGVyMg==", "{creds}");

    kubectl.created(
        "create secret docker-registry regcred --docker-server=registry.example.com \
         --docker-username=robot --docker-password=s3cret",
        "secret/regcred",
    )?;
    let regcred = kubectl.stored("secret", "regcred")?;
    assert_eq!(
        at(&regcred, "/type"),
        "kubernetes.io/dockerconfigjson",
        "{regcred}"
    );
    assert!(
        at(&regcred, "/data/.dockerconfigjson")
            .as_str()
            .is_some_and(|data| !data.is_empty()),
        "{regcred}"
    );

    kubectl.created(
        "create job once --image=busybox:1.36 -- echo hello",
        "job.batch/once",
    )?;
    let once = kubectl.stored("job", "once")?;
    let pod = at(&once, "/spec/template/spec");
    assert_eq!(at(&pod, "/restartPolicy"), "Never", "{once}");
    assert_eq!(at(&pod, "/containers/0/name"), "once", "{once}");
    assert_eq!(at(&pod, "/containers/0/image"), "busybox:1.36", "{once}");
    assert_eq!(
        at(&pod, "/containers/0/command"),
        json!(["echo", "hello"]),
        "{once}"
    );

    kubectl.created(
        "create cronjob nightly --image=busybox:1.36 --schedule=@daily -- date",
        "cronjob.batch/nightly",
    )?;
    let nightly = kubectl.stored("cronjob", "nightly")?;
    assert_eq!(at(&nightly, "/spec/schedule"), "@daily", "{nightly}");
    let pod = at(&nightly, "/spec/jobTemplate/spec/template/spec");
    assert_eq!(at(&pod, "/restartPolicy"), "OnFailure", "{nightly}");
    assert_eq!(
        at(&pod, "/containers/0/command"),
        json!(["date"]),
        "{nightly}"
    );

    // A Job from the CronJob's template, owned by it.
    kubectl.created(
        "create job from-cron --from=cronjob/nightly",
        "job.batch/from-cron",
    )?;
    let from_cron = kubectl.stored("job", "from-cron")?;
    assert_eq!(
        at(
            &from_cron,
            "/metadata/annotations/cronjob.kubernetes.io~1instantiate"
        ),
        "manual",
        "{from_cron}"
    );
    let owner = at(&from_cron, "/metadata/ownerReferences/0");
    assert_eq!(at(&owner, "/kind"), "CronJob", "{from_cron}");
    assert_eq!(at(&owner, "/name"), "nightly", "{from_cron}");
    assert_eq!(
        at(&owner, "/uid"),
        at(&nightly, "/metadata/uid"),
        "{from_cron}"
    );
    assert_eq!(at(&owner, "/controller"), true, "{from_cron}");
    assert_eq!(
        at(&from_cron, "/spec/template/spec/containers/0/command"),
        json!(["date"]),
        "{from_cron}"
    );

    kubectl.created(
        "create service clusterip web-svc --tcp=80:8080",
        "service/web-svc",
    )?;
    let web_svc = kubectl.stored("service", "web-svc")?;
    assert_eq!(at(&web_svc, "/spec/type"), "ClusterIP", "{web_svc}");
    assert_eq!(
        at(&web_svc, "/spec/selector"),
        json!({"app": "web-svc"}),
        "{web_svc}"
    );
    assert_eq!(
        at(&web_svc, "/spec/ports/0"),
        json!({"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}),
        "{web_svc}"
    );

    kubectl.created(
        "create service externalname docs --external-name=docs.example.com",
        "service/docs",
    )?;
    let docs = kubectl.stored("service", "docs")?;
    assert_eq!(at(&docs, "/spec/type"), "ExternalName", "{docs}");
    assert_eq!(
        at(&docs, "/spec/externalName"),
        "docs.example.com",
        "{docs}"
    );

    kubectl.created(
        "create ingress shop --rule=shop.example.com/=web-svc:80",
        "ingress.networking.k8s.io/shop",
    )?;
    let shop = kubectl.stored("ingress", "shop")?;
    assert_eq!(
        at(&shop, "/spec/rules"),
        json!([{
            "host": "shop.example.com",
            "http": {"paths": [{
                "path": "/",
                "pathType": "Exact",
                "backend": {"service": {"name": "web-svc", "port": {"number": 80}}},
            }]},
        }]),
        "{shop}"
    );

    kubectl.created(
        "create role reader --verb=get,list --resource=pods,configmaps",
        "role.rbac.authorization.k8s.io/reader",
    )?;
    let reader = kubectl.stored("role", "reader")?;
    assert_eq!(
        at(&reader, "/rules"),
        json!([{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]}]),
        "{reader}"
    );

    kubectl.created(
        "create rolebinding reader --role=reader --user=alice",
        "rolebinding.rbac.authorization.k8s.io/reader",
    )?;
    let binding = kubectl.stored("rolebinding", "reader")?;
    assert_eq!(
        at(&binding, "/roleRef"),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}),
        "{binding}"
    );
    assert_eq!(
        at(&binding, "/subjects"),
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]),
        "{binding}"
    );
    Ok(())
}

/// `kubectl run` stores a Pod (Pending: nothing schedules it) and
/// `kubectl expose` a Service selecting what it exposes.
fn run_and_expose(kubectl: &Kubectl) -> anyhow::Result<()> {
    let ran = kubectl
        .ok("run solo --image=nginx:1.25 --port=80 --labels=app=solo,tier=web --env=MODE=test")?;
    assert_eq!(ran.trim(), "pod/solo created");
    let solo = kubectl.stored("pod", "solo")?;
    assert_eq!(
        at(&solo, "/metadata/labels"),
        json!({"app": "solo", "tier": "web"}),
        "{solo}"
    );
    assert_eq!(at(&solo, "/spec/restartPolicy"), "Always", "{solo}");
    let container = at(&solo, "/spec/containers/0");
    assert_eq!(at(&container, "/name"), "solo", "{solo}");
    assert_eq!(at(&container, "/image"), "nginx:1.25", "{solo}");
    assert_eq!(at(&container, "/ports/0/containerPort"), 80, "{solo}");
    assert_eq!(
        at(&container, "/env"),
        json!([{"name": "MODE", "value": "test"}]),
        "{solo}"
    );
    // The pod strategy's PrepareForCreate sets every new Pod's phase.
    assert_eq!(at(&solo, "/status/phase"), "Pending", "{solo}");

    let exposed = kubectl.ok("expose pod solo --port=8080 --target-port=80 --name=solo-svc")?;
    assert_eq!(exposed.trim(), "service/solo-svc exposed");
    let solo_svc = kubectl.stored("service", "solo-svc")?;
    assert_eq!(
        at(&solo_svc, "/spec/selector"),
        json!({"app": "solo", "tier": "web"}),
        "{solo_svc}"
    );
    assert_eq!(at(&solo_svc, "/spec/ports/0/port"), 8080, "{solo_svc}");
    assert_eq!(at(&solo_svc, "/spec/ports/0/targetPort"), 80, "{solo_svc}");

    // A Deployment is exposed by its selector; the target port defaults to
    // the port.
    let exposed = kubectl.ok("expose deployment web --port=80")?;
    assert_eq!(exposed.trim(), "service/web exposed");
    let service = kubectl.stored("service", "web")?;
    assert_eq!(
        at(&service, "/spec/selector"),
        json!({"app": "web"}),
        "{service}"
    );
    assert_eq!(at(&service, "/spec/ports/0/port"), 80, "{service}");
    assert_eq!(at(&service, "/spec/ports/0/targetPort"), 80, "{service}");
    Ok(())
}

/// `kubectl scale` through the scale subresource, with kubectl's
/// preconditions (`--current-replicas`, `--resource-version`) checked
/// against what the subresource reports, and `kubectl set image` on a
/// Deployment (a spec change: the generation moves on) and on a Pod.
fn scale_and_set_image(kubectl: &Kubectl) -> anyhow::Result<()> {
    let scaled = kubectl.ok("scale deployment web --current-replicas=2 --replicas=3")?;
    assert_eq!(scaled.trim(), "deployment.apps/web scaled");
    assert_eq!(
        at(&kubectl.stored("deployment", "web")?, "/spec/replicas"),
        3
    );

    let refused = kubectl.fails("scale deployment web --current-replicas=2 --replicas=5")?;
    assert!(
        refused.contains("Expected replicas to be 2, was 3"),
        "{refused}"
    );
    let stale = kubectl.fails("scale deployment web --resource-version=1 --replicas=5")?;
    assert!(
        stale.contains("Expected resource version to be 1"),
        "{stale}"
    );
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(at(&web, "/spec/replicas"), 3, "{web}");

    let generation = at(&web, "/metadata/generation")
        .as_i64()
        .with_context(|| format!("a generation: {web}"))?;
    let updated = kubectl.ok("set image deployment/web nginx=nginx:1.27")?;
    assert_eq!(updated.trim(), "deployment.apps/web image updated");
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(
        at(&web, "/spec/template/spec/containers/0/image"),
        "nginx:1.27",
        "{web}"
    );
    assert!(
        at(&web, "/metadata/generation").as_i64() > Some(generation),
        "a spec change moves the generation on from {generation}: {web}"
    );

    let updated = kubectl.ok("set image pod/solo solo=nginx:1.27")?;
    assert_eq!(updated.trim(), "pod/solo image updated");
    let solo = kubectl.stored("pod", "solo")?;
    assert_eq!(
        at(&solo, "/spec/containers/0/image"),
        "nginx:1.27",
        "{solo}"
    );
    Ok(())
}

/// `kubectl label` and `annotate`: setting, refusing to overwrite without
/// `--overwrite`, removing with `key-`, and a stale `--resource-version`
/// (sent in the patch) refused by the server with a conflict.
fn label_and_annotate(kubectl: &Kubectl) -> anyhow::Result<()> {
    let labeled = kubectl.ok("label configmap settings team=shop")?;
    assert_eq!(labeled.trim(), "configmap/settings labeled");
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(at(&settings, "/metadata/labels/team"), "shop", "{settings}");

    let refused = kubectl.fails("label configmap settings team=ops")?;
    assert!(
        refused.contains("'team' already has a value (shop)"),
        "{refused}"
    );
    kubectl.ok("label --overwrite configmap settings team=ops")?;
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(at(&settings, "/metadata/labels/team"), "ops", "{settings}");

    let annotated = kubectl.ok("annotate configmap settings note=reviewed")?;
    assert_eq!(annotated.trim(), "configmap/settings annotated");
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&settings, "/metadata/annotations/note"),
        "reviewed",
        "{settings}"
    );

    let stale = kubectl.fails("annotate configmap settings stale=yes --resource-version=1")?;
    assert!(is_conflict(&stale), "{stale}");

    let unlabeled = kubectl.ok("label configmap settings team-")?;
    assert_eq!(unlabeled.trim(), "configmap/settings unlabeled");
    kubectl.ok("annotate configmap settings note-")?;
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&settings, "/metadata/labels/team"),
        Value::Null,
        "{settings}"
    );
    assert_eq!(
        at(&settings, "/metadata/annotations/note"),
        Value::Null,
        "{settings}"
    );
    assert_eq!(
        at(&settings, "/metadata/annotations/stale"),
        Value::Null,
        "the refused annotate changed nothing: {settings}"
    );
    Ok(())
}

/// `kubectl edit` with `KUBE_EDITOR` a script that changes a field: the
/// change is stored; an editor that changes nothing cancels the edit and
/// leaves the object as it was.
fn edit_through_kube_editor(kubectl: &Kubectl) -> anyhow::Result<()> {
    let editor = kubectl.write(
        "edit-color.sh",
        "#!/bin/sh\nsed -i 's/^  color: blue$/  color: green/' \"$1\"\n",
    )?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755))?;
    }
    // kubectl runs in the directory the script is in.
    let edited = kubectl.ok_with(
        &[("KUBE_EDITOR", "./edit-color.sh")],
        "edit configmap/settings",
    )?;
    assert_eq!(edited.trim(), "configmap/settings edited");
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(at(&settings, "/data/color"), "green", "{settings}");

    let untouched = kubectl.run_with(&[("KUBE_EDITOR", "true")], "edit configmap/settings")?;
    let stderr = text(&untouched.stderr);
    assert!(untouched.status.success(), "{stderr}");
    assert!(
        stderr.contains("Edit cancelled, no changes made."),
        "{stderr}"
    );
    let after = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&after, "/metadata/resourceVersion"),
        at(&settings, "/metadata/resourceVersion"),
        "{after}"
    );
    Ok(())
}

/// `kubectl patch` of each type: a strategic merge patch merges a list by
/// its key, a JSON merge patch replaces the list and deletes with `null`, a
/// JSON patch applies its operations in order and fails whole on a failed
/// `test`; a patch that changes nothing leaves the resourceVersion alone,
/// so kubectl says `(no change)`.
fn patch_three_ways(kubectl: &Kubectl) -> anyhow::Result<()> {
    let container_names = |deployment: &Value| -> Vec<String> {
        let mut names: Vec<String> = at(deployment, "/spec/template/spec/containers")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|container| container["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };

    let patched = kubectl.ok(
        r#"patch deployment web -p {"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}"#,
    )?;
    assert_eq!(patched.trim(), "deployment.apps/web patched");
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(container_names(&web), ["nginx", "sidecar"], "{web}");

    let patched = kubectl.ok(
        r#"patch deployment web --type=merge -p {"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28","ports":[{"containerPort":80}]}]}}}}"#,
    )?;
    assert_eq!(patched.trim(), "deployment.apps/web patched");
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(container_names(&web), ["nginx"], "{web}");
    assert_eq!(
        at(&web, "/spec/template/spec/containers/0/image"),
        "nginx:1.28",
        "{web}"
    );

    kubectl
        .ok(r#"patch configmap settings --type=merge -p {"data":{"size":null,"shape":"round"}}"#)?;
    let settings = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&settings, "/data"),
        json!({"color": "green", "shape": "round"}),
        "{settings}"
    );

    let patched = kubectl.ok(
        r#"patch deployment web --type=json -p [{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/labels/tier","value":"front"}]"#,
    )?;
    assert_eq!(patched.trim(), "deployment.apps/web patched");
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(at(&web, "/spec/replicas"), 4, "{web}");
    assert_eq!(at(&web, "/metadata/labels/tier"), "front", "{web}");

    kubectl.fails(
        r#"patch deployment web --type=json -p [{"op":"replace","path":"/spec/replicas","value":9},{"op":"test","path":"/spec/replicas","value":99}]"#,
    )?;
    let after = kubectl.stored("deployment", "web")?;
    assert_eq!(at(&after, "/spec/replicas"), 4, "{after}");
    assert_eq!(
        at(&after, "/metadata/resourceVersion"),
        at(&web, "/metadata/resourceVersion"),
        "a failed JSON patch stores nothing: {after}"
    );

    let unchanged =
        kubectl.ok(r#"patch configmap settings --type=merge -p {"data":{"shape":"round"}}"#)?;
    assert_eq!(unchanged.trim(), "configmap/settings patched (no change)");
    let after = kubectl.stored("configmap", "settings")?;
    assert_eq!(
        at(&after, "/metadata/resourceVersion"),
        at(&settings, "/metadata/resourceVersion"),
        "{after}"
    );
    Ok(())
}

/// `kubectl replace` of a changed read-back object; the same file again is
/// stale (409); `--force` deletes and creates, so the uid changes.
fn replace_objects(kubectl: &Kubectl) -> anyhow::Result<()> {
    kubectl.ok("create configmap replaced --from-literal=version=1")?;
    let original = kubectl.stored("configmap", "replaced")?;
    let live = kubectl.ok("get configmap replaced -o yaml")?;
    assert!(live.contains("version: \"1\""), "{live}");
    kubectl.write(
        "replaced-2.yaml",
        &live.replace("version: \"1\"", "version: \"2\""),
    )?;
    let replaced = kubectl.ok("replace -f replaced-2.yaml")?;
    assert_eq!(replaced.trim(), "configmap/replaced replaced");
    let stored = kubectl.stored("configmap", "replaced")?;
    assert_eq!(at(&stored, "/data/version"), "2", "{stored}");
    assert_ne!(
        at(&stored, "/metadata/resourceVersion"),
        at(&original, "/metadata/resourceVersion"),
        "{stored}"
    );

    let stale = kubectl.fails("replace -f replaced-2.yaml")?;
    assert!(is_conflict(&stale), "{stale}");

    kubectl.write(
        "replaced-3.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: replaced}\ndata: {version: \"3\"}\n",
    )?;
    let forced = kubectl.ok("replace --force -f replaced-3.yaml")?;
    assert!(
        forced.contains("configmap \"replaced\" deleted")
            && forced.contains("configmap/replaced replaced"),
        "{forced}"
    );
    let recreated = kubectl.stored("configmap", "replaced")?;
    assert_eq!(at(&recreated, "/data/version"), "3", "{recreated}");
    assert_ne!(
        at(&recreated, "/metadata/uid"),
        at(&original, "/metadata/uid"),
        "{recreated}"
    );
    Ok(())
}

/// `kubectl get` output: `--chunk-size` pages (and the server's own pages
/// through `limit` and `continue`), `-o jsonpath`, `custom-columns` and
/// `wide`, and field selectors: `metadata.name` on any kind and each
/// kind's own (`status.phase` on pods, `type` on secrets, `spec.type` on
/// services); a field a kind is not selected by is a bad request.
fn get_output_formats(kubectl: &Kubectl) -> anyhow::Result<()> {
    let pages: String = (1..=5)
        .map(|page| {
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: page-{page}}}\n")
        })
        .collect();
    kubectl.write("pages.yaml", &pages)?;
    kubectl.ok("apply -f pages.yaml")?;

    let all = kubectl.names("get configmaps --chunk-size=0")?;
    for page in 1..=5 {
        assert!(all.contains(&format!("configmap/page-{page}")), "{all:?}");
    }
    assert_eq!(kubectl.names("get configmaps --chunk-size=2")?, all);
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let mut path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps?limit=2");
        if !token.is_empty() {
            path.push_str(&format!("&continue={}", query_escape(&token)));
        }
        let page: Value = serde_json::from_str(&kubectl.ok(&format!("get --raw {path}"))?)?;
        let items = at(&page, "/items");
        let items = items.as_array().context("a page's items")?;
        assert!(items.len() <= 2, "{page}");
        paged.extend(
            items
                .iter()
                .filter_map(|item| item["metadata"]["name"].as_str())
                .map(|name| format!("configmap/{name}")),
        );
        token = at(&page, "/metadata/continue")
            .as_str()
            .unwrap_or_default()
            .to_string();
        if token.is_empty() {
            break;
        }
        assert_eq!(items.len(), 2, "a page before the last is full: {page}");
    }
    assert_eq!(paged, all);

    let names = kubectl.ok("get configmaps -o jsonpath={.items[*].metadata.name}")?;
    let names: Vec<String> = names
        .split_whitespace()
        .map(|name| format!("configmap/{name}"))
        .collect();
    assert_eq!(names, all);
    let color = kubectl.ok("get configmap settings -o jsonpath={.data.color}")?;
    assert_eq!(color, "green");

    let columns = kubectl.ok("get configmap settings \
         -o custom-columns=NAME:.metadata.name,COLOR:.data.color,TEAM:.metadata.labels.team")?;
    let rows: Vec<Vec<&str>> = columns
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [["NAME", "COLOR", "TEAM"], ["settings", "green", "<none>"]],
        "{columns}"
    );

    // Server-side tables with kube-apiserver's columns; `-o wide` adds
    // the priority-1 ones.
    let wide = kubectl.ok("get deployment web -o wide")?;
    let (header, row) = header_and_row(&wide)?;
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{wide}"
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..4], ["web", "0/4", "0", "0"], "{wide}");
    assert_eq!(cells[5..], ["nginx", "nginx:1.28", "app=web"], "{wide}");

    let pods = kubectl.ok("get pods")?;
    let (header, row) = header_and_row(&pods)?;
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{pods}"
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..4], ["solo", "0/1", "Pending", "0"], "{pods}");
    let wide = kubectl.ok("get pod solo -o wide")?;
    let (header, row) = header_and_row(&wide)?;
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ],
        "{wide}"
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[5..], ["<none>"; 4], "{wide}");

    let wide = kubectl.ok("get service web-svc -o wide")?;
    let (header, row) = header_and_row(&wide)?;
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{wide}"
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    // The root allocates no cluster IPs (docs/api.md, "Built-in kinds").
    assert_eq!(
        cells[..5],
        ["web-svc", "ClusterIP", "<none>", "<none>", "80/TCP"],
        "{wide}"
    );
    assert_eq!(cells[6..], ["app=web-svc"], "{wide}");

    let by_name = kubectl.names("get configmaps --field-selector metadata.name=settings")?;
    assert_eq!(by_name, ["configmap/settings"]);
    let others: Vec<String> = all
        .iter()
        .filter(|name| *name != "configmap/settings")
        .cloned()
        .collect();
    let but_name = kubectl.names("get configmaps --field-selector metadata.name!=settings")?;
    assert_eq!(but_name, others);
    let pending = kubectl.names("get pods --field-selector status.phase=Pending")?;
    assert_eq!(pending, ["pod/solo"]);
    let running = kubectl.names("get pods --field-selector status.phase=Running")?;
    assert!(running.is_empty(), "{running:?}");
    let docker =
        kubectl.names("get secrets --field-selector type=kubernetes.io/dockerconfigjson")?;
    assert_eq!(docker, ["secret/regcred"]);
    let opaque = kubectl.names("get secrets --field-selector type=Opaque")?;
    assert_eq!(opaque, ["secret/creds"]);
    let external = kubectl.names("get services --field-selector spec.type=ExternalName")?;
    assert_eq!(external, ["service/docs"]);
    let unknown = kubectl.fails("get configmaps --field-selector data.color=green")?;
    assert!(
        unknown.contains("BadRequest") && unknown.contains("data.color"),
        "{unknown}"
    );
    Ok(())
}

/// `kubectl get -w --output-watch-events --field-selector
/// metadata.name=NAME` shows that object's events (added, modified,
/// deleted) and none of another's.
fn watch_with_field_selector(kubectl: &Kubectl) -> anyhow::Result<()> {
    kubectl.ok("create configmap watched --from-literal=a=1")?;
    let mut watcher = kubectl
        .command(
            &[],
            "get configmaps -w --output-watch-events \
             --field-selector metadata.name=watched --request-timeout=0",
        )?
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = watcher.stdout.take().context("the watcher's stdout")?;
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(mut lines) = lines.lock() {
                    lines.push(line);
                }
            }
        })
    };
    // (event, name) of each line below the header.
    let events = || -> anyhow::Result<Vec<(String, String)>> {
        let lines = lines
            .lock()
            .map_err(|_| anyhow::anyhow!("the reader panicked"))?;
        observe(lines.join("\n"));
        Ok(lines
            .iter()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                Some((words.next()?.to_string(), words.next()?.to_string()))
            })
            .filter(|(event, _)| event != "EVENT")
            .collect())
    };
    let seen = |event: &str| -> anyhow::Result<bool> {
        Ok(events()?
            .iter()
            .any(|(seen, name)| seen == event && name == "watched"))
    };
    wait_for("the watch's initial list", SETTLE, || {
        Ok(seen("ADDED")?.then_some(()))
    })?;
    // Another object's event would come before the watched one's next.
    kubectl.ok("create configmap unwatched")?;
    kubectl.ok(r#"patch configmap watched --type=merge -p {"data":{"a":"2"}}"#)?;
    kubectl.ok("delete configmap watched")?;
    wait_for("the watch to show a change and a deletion", SETTLE, || {
        Ok((seen("MODIFIED")? && seen("DELETED")?).then_some(()))
    })?;
    watcher.kill()?;
    watcher.wait()?;
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader panicked"))?;
    let events = events()?;
    assert!(
        events.iter().all(|(_, name)| name == "watched"),
        "{events:?}"
    );
    kubectl.ok("delete configmap unwatched")?;
    Ok(())
}

/// `kubectl explain` prints a field's type and description from the
/// server's OpenAPI; `kubectl describe` names the object and shows what
/// it holds.
fn explain_and_describe(kubectl: &Kubectl) -> anyhow::Result<()> {
    let replicas = kubectl.ok("explain deployment.spec.replicas")?;
    assert!(
        replicas.contains("KIND:") && replicas.contains("Deployment"),
        "{replicas}"
    );
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    let data = kubectl.ok("explain configmap.data")?;
    assert!(data.contains("FIELD: data <map[string]string>"), "{data}");
    assert!(
        data.contains("Data contains the configuration data"),
        "{data}"
    );

    let web = kubectl.ok("describe deployment web")?;
    assert_eq!(described(&web, "Name"), Some("web"), "{web}");
    assert_eq!(described(&web, "Namespace"), Some(NAMESPACE), "{web}");
    assert_eq!(described(&web, "Selector"), Some("app=web"), "{web}");
    assert!(
        described(&web, "Replicas").is_some_and(|replicas| replicas.starts_with("4 desired")),
        "{web}"
    );
    assert_eq!(described(&web, "Image"), Some("nginx:1.28"), "{web}");

    let solo = kubectl.ok("describe pod solo")?;
    assert_eq!(described(&solo, "Name"), Some("solo"), "{solo}");
    assert_eq!(described(&solo, "Image"), Some("nginx:1.27"), "{solo}");
    assert_eq!(described(&solo, "Status"), Some("Pending"), "{solo}");

    let settings = kubectl.ok("describe configmap settings")?;
    assert_eq!(described(&settings, "Name"), Some("settings"), "{settings}");
    let lines: Vec<&str> = settings.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(3)
            .any(|lines| lines == ["color:", "----", "green"]),
        "{settings}"
    );
    Ok(())
}

/// `kubectl diff` (a server-side dry run) exits 0 when the file matches
/// what is stored and 1 showing only the change when it does not; every
/// `--dry-run=server` (apply, create, delete) answers as if done and
/// stores nothing.
fn diff_and_dry_run(kubectl: &Kubectl) -> anyhow::Result<()> {
    let manifest = |color: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: diffed}}\ndata: {{color: {color}}}\n"
        )
    };
    kubectl.write("diffed-blue.yaml", &manifest("blue"))?;
    kubectl.write("diffed-red.yaml", &manifest("red"))?;
    kubectl.ok("apply -f diffed-blue.yaml")?;
    let before = kubectl.stored("configmap", "diffed")?;

    let same = kubectl.run("diff -f diffed-blue.yaml")?;
    let shown = text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{shown}{}", text(&same.stderr));
    assert!(shown.is_empty(), "{shown}");

    let changed = kubectl.run("diff -f diffed-red.yaml")?;
    let shown = text(&changed.stdout);
    assert_eq!(
        changed.status.code(),
        Some(1),
        "{shown}{}",
        text(&changed.stderr)
    );
    let changes: Vec<&str> = shown
        .lines()
        .filter(|line| {
            (line.starts_with('+') || line.starts_with('-'))
                && !line.starts_with("+++")
                && !line.starts_with("---")
        })
        .collect();
    // The data change and nothing else: a ConfigMap has no generation to
    // move on.
    assert_eq!(changes, ["-  color: blue", "+  color: red"], "{shown}");

    kubectl.write(
        "fresh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {k: v}\n",
    )?;
    let new = kubectl.run("diff -f fresh.yaml")?;
    let shown = text(&new.stdout);
    assert_eq!(new.status.code(), Some(1), "{shown}{}", text(&new.stderr));
    assert!(shown.contains("+  name: fresh"), "{shown}");
    assert!(kubectl.absent("configmap", "fresh")?, "diff created fresh");

    let applied = kubectl.ok("apply --dry-run=server -f diffed-red.yaml")?;
    assert_eq!(
        applied.trim(),
        "configmap/diffed configured (server dry run)"
    );
    let created = kubectl.ok("create configmap ghost --dry-run=server")?;
    assert_eq!(created.trim(), "configmap/ghost created (server dry run)");
    assert!(
        kubectl.absent("configmap", "ghost")?,
        "the dry run created ghost"
    );
    let created = kubectl.ok("create deployment ghost --image=nginx:1.25 --dry-run=server")?;
    assert_eq!(
        created.trim(),
        "deployment.apps/ghost created (server dry run)"
    );
    assert!(
        kubectl.absent("deployment", "ghost")?,
        "the dry run created ghost"
    );
    // kubectl sends this dry run in the DeleteOptions body, not the query.
    let deleted = kubectl.ok("delete configmap diffed --dry-run=server")?;
    assert_eq!(
        deleted.trim(),
        "configmap \"diffed\" deleted (server dry run)"
    );
    let after = kubectl.stored("configmap", "diffed")?;
    assert_eq!(at(&after, "/data/color"), "blue", "{after}");
    assert_eq!(
        at(&after, "/metadata/resourceVersion"),
        at(&before, "/metadata/resourceVersion"),
        "dry runs store nothing: {after}"
    );
    Ok(())
}

/// `kubectl apply --server-side`: another field manager's change to an
/// owned field is a conflict naming the field and its owner;
/// `--force-conflicts` takes the field over.
fn server_side_apply_conflicts(kubectl: &Kubectl) -> anyhow::Result<()> {
    let manifest = |color: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: owned}}\ndata: {{color: {color}}}\n"
        )
    };
    kubectl.write("owned-blue.yaml", &manifest("blue"))?;
    kubectl.write("owned-red.yaml", &manifest("red"))?;
    let applied = kubectl.ok("apply --server-side -f owned-blue.yaml")?;
    assert_eq!(applied.trim(), "configmap/owned serverside-applied");

    let conflict =
        kubectl.fails("apply --server-side --field-manager=intruder -f owned-red.yaml")?;
    assert!(
        conflict.contains("Apply failed with 1 conflict")
            && conflict.contains("conflict with \"kubectl\"")
            && conflict.contains(".data.color"),
        "{conflict}"
    );
    let owned = kubectl.stored("configmap", "owned")?;
    assert_eq!(at(&owned, "/data/color"), "blue", "{owned}");

    kubectl
        .ok("apply --server-side --field-manager=intruder --force-conflicts -f owned-red.yaml")?;
    let owned: Value =
        serde_json::from_str(&kubectl.ok("get configmap owned -o json --show-managed-fields")?)?;
    assert_eq!(at(&owned, "/data/color"), "red", "{owned}");
    let managers = at(&owned, "/metadata/managedFields");
    let managers = managers.as_array().context("managedFields")?;
    let owns_color = |entry: &Value| entry["fieldsV1"]["f:data"].get("f:color").is_some();
    assert!(
        managers.iter().any(|entry| entry["manager"] == "intruder"
            && entry["operation"] == "Apply"
            && owns_color(entry)),
        "{owned}"
    );
    assert!(
        managers
            .iter()
            .all(|entry| entry["manager"] == "intruder" || !owns_color(entry)),
        "the forced apply took the field over: {owned}"
    );
    Ok(())
}

/// `kubectl apply --prune --applyset=configmaps/NAME`: the parent records
/// the set's id and kinds, members carry the part-of label, and objects
/// dropped from the files are pruned while objects outside the set stay.
fn prune_with_applyset(kubectl: &Kubectl) -> anyhow::Result<()> {
    let prune = |file: &str| {
        kubectl.ok_with(
            &[("KUBECTL_APPLYSET", "true")],
            &format!("apply --prune --applyset=configmaps/set -n {NAMESPACE} -f {file}"),
        )
    };
    let kept = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\ndata: {k: v}\n";
    kubectl.write(
        "set-full.yaml",
        &format!(
            "{kept}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: dropped}}\n\
             ---\napiVersion: v1\nkind: Secret\nmetadata: {{name: dropped-secret}}\n\
             stringData: {{k: v}}\n"
        ),
    )?;
    kubectl.write("set-kept.yaml", kept)?;

    let applied = prune("set-full.yaml")?;
    for line in [
        "configmap/kept created",
        "configmap/dropped created",
        "secret/dropped-secret created",
    ] {
        assert!(applied.contains(line), "{applied}");
    }
    let parent = kubectl.stored("configmap", "set")?;
    let id = at(&parent, "/metadata/labels/applyset.kubernetes.io~1id");
    let id = id.as_str().context("the parent's applyset id")?;
    assert!(id.starts_with("applyset-"), "{parent}");
    assert!(
        at(
            &parent,
            "/metadata/annotations/applyset.kubernetes.io~1tooling"
        )
        .as_str()
        .is_some_and(|tooling| tooling.starts_with("kubectl/")),
        "{parent}"
    );
    let group_kinds = "/metadata/annotations/applyset.kubernetes.io~1contains-group-kinds";
    assert_eq!(at(&parent, group_kinds), "ConfigMap,Secret", "{parent}");
    for (resource, name) in [("configmap", "kept"), ("secret", "dropped-secret")] {
        let member = kubectl.stored(resource, name)?;
        assert_eq!(
            at(&member, "/metadata/labels/applyset.kubernetes.io~1part-of"),
            id,
            "{member}"
        );
    }

    let applied = prune("set-kept.yaml")?;
    for line in [
        "configmap/kept unchanged",
        "configmap/dropped pruned",
        "secret/dropped-secret pruned",
    ] {
        assert!(applied.contains(line), "{applied}");
    }
    wait_for("the pruned objects to be gone", SETTLE, || {
        Ok((kubectl.absent("configmap", "dropped")?
            && kubectl.absent("secret", "dropped-secret")?)
        .then_some(()))
    })?;
    assert!(!kubectl.absent("configmap", "kept")?);
    assert!(
        !kubectl.absent("configmap", "settings")?,
        "an object outside the set is never pruned"
    );
    let parent = kubectl.stored("configmap", "set")?;
    assert_eq!(at(&parent, group_kinds), "ConfigMap", "{parent}");
    Ok(())
}

/// `kubectl wait`: `--for=condition` on a condition written through the
/// status subresource (which changes status only, as the main resource
/// changes everything but status), `--for=jsonpath`, and `--for=delete`
/// on an object a finalizer holds. A wait whose condition stays false
/// times out.
fn wait_for_conditions(kubectl: &Kubectl) -> anyhow::Result<()> {
    let waiting = kubectl.spawn("wait --for=condition=Available deployment/web --timeout=60s")?;
    kubectl.ok(
        r#"patch deployment web --subresource=status --type=merge -p {"spec":{"replicas":9},"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}}"#,
    )?;
    let waited = finish(waiting, "kubectl wait --for=condition=Available")?;
    assert!(waited.status.success(), "{}", text(&waited.stderr));
    assert_eq!(
        text(&waited.stdout).trim(),
        "deployment.apps/web condition met"
    );
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(
        at(&web, "/spec/replicas"),
        4,
        "the status subresource leaves spec alone: {web}"
    );
    kubectl.ok(r#"patch deployment web --type=merge -p {"status":{"conditions":null}}"#)?;
    let web = kubectl.stored("deployment", "web")?;
    assert_eq!(
        at(&web, "/status/conditions/0/type"),
        "Available",
        "the main resource leaves status alone: {web}"
    );

    kubectl.ok("create configmap flag --from-literal=ready=no")?;
    let timed_out =
        kubectl.fails("wait --for=jsonpath={.data.ready}=yes configmap/flag --timeout=1s")?;
    assert!(timed_out.contains("timed out"), "{timed_out}");
    let waiting =
        kubectl.spawn("wait --for=jsonpath={.data.ready}=yes configmap/flag --timeout=60s")?;
    kubectl.ok(r#"patch configmap flag --type=merge -p {"data":{"ready":"yes"}}"#)?;
    let waited = finish(waiting, "kubectl wait --for=jsonpath")?;
    assert!(waited.status.success(), "{}", text(&waited.stderr));
    assert_eq!(text(&waited.stdout).trim(), "configmap/flag condition met");

    kubectl.write(
        "held.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n",
    )?;
    kubectl.ok("apply -f held.yaml")?;
    kubectl.ok("delete configmap held --wait=false")?;
    let timed_out = kubectl.fails("wait --for=delete configmap/held --timeout=1s")?;
    assert!(timed_out.contains("timed out"), "{timed_out}");
    // kubectl says nothing for an object that is gone before it looks, as
    // it does against kube-apiserver: the finalizer goes only once it
    // watches (its `-v=6` log names the watch request on stderr).
    let mut waiting = kubectl.spawn("wait --for=delete configmap/held --timeout=60s -v=6")?;
    let log = waiting.stderr.take().context("the waiter's stderr")?;
    let log_lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log_reader = {
        let log_lines = Arc::clone(&log_lines);
        std::thread::spawn(move || {
            for line in BufReader::new(log).lines().map_while(Result::ok) {
                if let Ok(mut log_lines) = log_lines.lock() {
                    log_lines.push(line);
                }
            }
        })
    };
    wait_for("kubectl wait to watch configmap/held", SETTLE, || {
        let log_lines = log_lines
            .lock()
            .map_err(|_| anyhow::anyhow!("the log reader panicked"))?;
        Ok(log_lines
            .iter()
            .any(|line| line.contains("watch=true"))
            .then_some(()))
    })?;
    kubectl.ok(r#"patch configmap held --type=merge -p {"metadata":{"finalizers":null}}"#)?;
    let waited = finish(waiting, "kubectl wait --for=delete")?;
    log_reader
        .join()
        .map_err(|_| anyhow::anyhow!("the log reader panicked"))?;
    let log = log_lines
        .lock()
        .map_err(|_| anyhow::anyhow!("the log reader panicked"))?
        .join("\n");
    assert!(waited.status.success(), "{log}");
    assert_eq!(text(&waited.stdout).trim(), "configmap/held condition met");
    assert!(kubectl.absent("configmap", "held")?);
    Ok(())
}

/// `kubectl delete --cascade=foreground` deletes the owner's dependents
/// too (and only them); `kubectl delete KINDS --all` empties each kind in
/// the namespace; deleting the namespace removes it.
fn delete_cascade_and_all(kubectl: &Kubectl) -> anyhow::Result<()> {
    let deleted = kubectl.ok("delete cronjob nightly --cascade=foreground")?;
    assert_eq!(deleted.trim(), "cronjob.batch \"nightly\" deleted");
    wait_for("the CronJob and its Job to be gone", SETTLE, || {
        Ok(
            (kubectl.absent("cronjob", "nightly")? && kubectl.absent("job", "from-cron")?)
                .then_some(()),
        )
    })?;
    assert!(
        !kubectl.absent("job", "once")?,
        "a Job the CronJob does not own stays"
    );

    let configmaps = kubectl.names("get configmaps")?;
    assert!(configmaps.len() >= 5, "{configmaps:?}");
    let deleted = kubectl.ok("delete configmaps --all")?;
    for name in &configmaps {
        let name = name.trim_start_matches("configmap/");
        assert!(
            deleted.contains(&format!("configmap \"{name}\" deleted")),
            "{deleted}"
        );
    }
    let left = kubectl.names("get configmaps")?;
    assert!(left.is_empty(), "{left:?}");

    let kinds = "deployments,pods,services,jobs,secrets,ingresses,roles,rolebindings";
    kubectl.ok(&format!("delete {kinds} --all"))?;
    let left = kubectl.names(&format!("get {kinds}"))?;
    assert!(left.is_empty(), "{left:?}");

    let deleted = kubectl.ok(&format!("delete namespace {NAMESPACE}"))?;
    assert_eq!(deleted.trim(), format!("namespace \"{NAMESPACE}\" deleted"));
    wait_for("the namespace to be gone", SETTLE, || {
        let output = kubectl.run(&format!("get namespace {NAMESPACE}"))?;
        Ok(text(&output.stderr).contains("NotFound").then_some(()))
    })?;
    Ok(())
}

/// kubectl with a kubeconfig of its own whose context's namespace is
/// [`NAMESPACE`], run in a directory that holds the files it is given.
///
/// Commands are written as command lines and split at whitespace, with no
/// quoting: no argument here holds a space, and files are named relative
/// to the directory.
struct Kubectl {
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    /// A copy of the mesh's admin kubeconfig, defaulting to [`NAMESPACE`].
    fn for_mesh(mesh: &Mesh) -> anyhow::Result<Self> {
        let dir = mesh.dir.path().join("kubectl-compat");
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::copy(mesh.kubeconfig(), &kubeconfig)?;
        let kubectl = Self { kubeconfig, dir };
        kubectl.ok(&format!(
            "config set-context --current --namespace={NAMESPACE}"
        ))?;
        Ok(kubectl)
    }

    /// `kubectl COMMAND` with `env` added, and without the caller's
    /// settings that change what these commands do.
    fn command(&self, env: &[(&str, &str)], command_line: &str) -> anyhow::Result<Command> {
        let mut command = Command::new(KUBECTL);
        command
            .env("KUBECACHEDIR", kubectl_cache_dir(&self.kubeconfig)?)
            .env_remove("KUBE_EDITOR")
            .env_remove("EDITOR")
            .env_remove("KUBECTL_APPLYSET")
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .envs(env.iter().copied())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(command_line.split_whitespace())
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        Ok(command)
    }

    fn run(&self, command_line: &str) -> anyhow::Result<Output> {
        self.run_with(&[], command_line)
    }

    fn run_with(&self, env: &[(&str, &str)], command_line: &str) -> anyhow::Result<Output> {
        let output = self.command(env, command_line)?.output()?;
        observe(format_args!(
            "kubectl {command_line}: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        ));
        Ok(output)
    }

    /// Runs kubectl, which must succeed; returns its stdout.
    fn ok(&self, command_line: &str) -> anyhow::Result<String> {
        self.ok_with(&[], command_line)
    }

    fn ok_with(&self, env: &[(&str, &str)], command_line: &str) -> anyhow::Result<String> {
        let output = self.run_with(env, command_line)?;
        if !output.status.success() {
            bail!(
                "kubectl {command_line} failed: {}{}",
                text(&output.stdout),
                text(&output.stderr)
            );
        }
        Ok(text(&output.stdout))
    }

    /// Runs kubectl, which must fail; returns its stderr.
    fn fails(&self, command_line: &str) -> anyhow::Result<String> {
        let output = self.run(command_line)?;
        if output.status.success() {
            bail!(
                "kubectl {command_line} succeeded, and should not have: {}",
                text(&output.stdout)
            );
        }
        Ok(text(&output.stderr))
    }

    /// Runs a generator, which must say `NAME created`.
    fn created(&self, command_line: &str, name: &str) -> anyhow::Result<()> {
        let created = self.ok(command_line)?;
        assert_eq!(created.trim(), format!("{name} created"));
        Ok(())
    }

    /// `kubectl get RESOURCE NAME -o json`: the object as stored, which has
    /// what the server sets on every object.
    fn stored(&self, resource: &str, name: &str) -> anyhow::Result<Value> {
        let object: Value =
            serde_json::from_str(&self.ok(&format!("get {resource} {name} -o json"))?)?;
        assert_eq!(at(&object, "/metadata/name"), name, "{object}");
        assert_eq!(at(&object, "/metadata/namespace"), NAMESPACE, "{object}");
        for field in ["uid", "resourceVersion", "creationTimestamp"] {
            assert!(
                object["metadata"][field]
                    .as_str()
                    .is_some_and(|value| !value.is_empty()),
                "the server sets {field}: {object}"
            );
        }
        Ok(object)
    }

    /// Whether `kubectl get RESOURCE NAME` says NotFound.
    fn absent(&self, resource: &str, name: &str) -> anyhow::Result<bool> {
        let output = self.run(&format!("get {resource} {name} -o name"))?;
        if output.status.success() {
            return Ok(false);
        }
        let stderr = text(&output.stderr);
        if stderr.contains("NotFound") {
            return Ok(true);
        }
        bail!("kubectl get {resource} {name}: {stderr}")
    }

    /// `kubectl COMMAND -o name`: one `kind/name` per object.
    fn names(&self, command_line: &str) -> anyhow::Result<Vec<String>> {
        Ok(self
            .ok(&format!("{command_line} -o name"))?
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Starts kubectl with its output piped, for [`finish`].
    fn spawn(&self, command_line: &str) -> anyhow::Result<Child> {
        Ok(self
            .command(&[], command_line)?
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?)
    }

    /// Writes a file into kubectl's working directory; returns its path.
    fn write(&self, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(name);
        std::fs::write(&path, contents)?;
        Ok(path)
    }
}

/// Waits for a spawned kubectl to exit; returns its output.
fn finish(mut child: Child, what: &str) -> anyhow::Result<Output> {
    wait_for(what, SETTLE, || Ok(child.try_wait()?.map(|_| ())))?;
    let output = child.wait_with_output()?;
    observe(format_args!(
        "{what}: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    ));
    Ok(output)
}

/// The value at a JSON pointer, or null.
fn at(object: &Value, pointer: &str) -> Value {
    object.pointer(pointer).cloned().unwrap_or(Value::Null)
}

/// Whether kubectl's error is the server's 409 for a stale resourceVersion.
fn is_conflict(stderr: &str) -> bool {
    stderr.contains("Operation cannot be fulfilled")
        && stderr.contains("the object has been modified")
}

/// What `kubectl describe` prints after `Field:` on the first line that
/// starts with it (after indentation).
fn described<'a>(description: &'a str, field: &str) -> Option<&'a str> {
    description.lines().find_map(|line| {
        line.trim_start()
            .strip_prefix(field)?
            .strip_prefix(':')
            .map(str::trim)
    })
}

/// The header and first row of a table kubectl printed.
fn header_and_row(table: &str) -> anyhow::Result<(&str, &str)> {
    let mut lines = table.lines();
    match (lines.next(), lines.next()) {
        (Some(header), Some(row)) => Ok((header, row)),
        _ => bail!("a header and a row: {table}"),
    }
}

/// `text` escaped for a URL's query, as Go's `url.QueryEscape` does.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
