//! Unmodified kubectl against a real root relay: namespaces, built-in kinds,
//! CRDs and custom objects, client- and server-side apply, tables, watch,
//! kustomize, and relaymesh's own kinds.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_tests::{kubectl_cache_dir, observe, wait_for, Mesh};

/// How long a watch may take to show what it must.
const WATCH: Duration = Duration::from_secs(30);

const KUBECTL: &str = "/usr/bin/kubectl";

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: shop}
data: {color: blue}
---
apiVersion: v1
kind: Secret
metadata: {name: web-secret, namespace: shop}
stringData: {password: hunter2}
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {size: 3}
"#;

struct Kubectl {
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(KUBECTL);
        if let Ok(cache) = kubectl_cache_dir(&self.kubeconfig) {
            command.env("KUBECACHEDIR", cache);
        }
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(&self.dir);
        command
    }

    fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        Ok(self.command(args).output()?)
    }

    /// Runs kubectl, which must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(args)?;
        if !output.status.success() {
            bail!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn write(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

fn kubectl_for(mesh: &Mesh) -> anyhow::Result<Kubectl> {
    let dir = mesh.dir.path().join("manifests");
    std::fs::create_dir_all(&dir)?;
    Ok(Kubectl {
        kubeconfig: mesh.kubeconfig(),
        dir,
    })
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().context("a UTF-8 path")
}

#[test]
fn kubectl_manages_objects_on_the_root() -> anyhow::Result<()> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return Ok(());
    }
    let (mesh, _root) = Mesh::init()?;
    let kubectl = kubectl_for(&mesh)?;

    assert!(kubectl
        .ok(&["create", "namespace", "shop"])?
        .contains("namespace/shop created"));
    let app = kubectl.write("app.yaml", APP)?;
    let applied = kubectl.ok(&["apply", "-f", path_str(&app)?])?;
    assert!(applied.contains("deployment.apps/web created"), "{applied}");
    assert!(applied.contains("secret/web-secret created"), "{applied}");

    // A CRD makes its kind servable; then an object of it.
    let crd = kubectl.write("crd.yaml", CRD)?;
    kubectl.ok(&["apply", "-f", path_str(&crd)?])?;
    let widget = kubectl.write("widget.yaml", WIDGET)?;
    kubectl.ok(&["apply", "-f", path_str(&widget)?])?;
    let resources = kubectl.ok(&["api-resources"])?;
    assert!(
        resources
            .lines()
            .any(|line| line.contains("widgets") && line.contains("Widget")),
        "{resources}"
    );
    let widgets = kubectl.ok(&["get", "wg", "-n", "shop"])?;
    assert!(
        widgets.contains("SIZE") && widgets.contains("w1"),
        "{widgets}"
    );

    // Client-side apply of a changed image (a strategic merge patch).
    kubectl.write("app.yaml", &APP.replace("nginx:1.25", "nginx:1.27"))?;
    kubectl.ok(&["apply", "-f", path_str(&app)?])?;
    let image = kubectl.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        "shop",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])?;
    assert_eq!(image, "nginx:1.27");

    // Server-side apply.
    kubectl.write("app.yaml", &APP.replace("replicas: 2", "replicas: 3"))?;
    let applied = kubectl.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        path_str(&app)?,
    ])?;
    assert!(applied.contains("serverside-applied"), "{applied}");
    let yaml = kubectl.ok(&["get", "deploy", "web", "-n", "shop", "-o", "yaml"])?;
    assert!(yaml.contains("replicas: 3"), "{yaml}");
    assert!(yaml.contains("image: nginx:1.25"), "{yaml}");
    assert!(yaml.contains("resourceVersion:"), "{yaml}");

    // Server-side printing.
    let table = kubectl.ok(&["get", "deploy", "-n", "shop"])?;
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(table.contains("0/3"), "{table}");
    let namespaces = kubectl.ok(&["get", "ns"])?;
    assert!(
        namespaces.contains("shop") && namespaces.contains("Active"),
        "{namespaces}"
    );

    // The scale subresource, as `kubectl scale` uses it.
    let scaled = kubectl.ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"])?;
    assert!(scaled.contains("deployment.apps/web scaled"), "{scaled}");
    let replicas = kubectl.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        "shop",
        "-o",
        "jsonpath={.spec.replicas}",
    ])?;
    assert_eq!(replicas, "5");
    let scale: serde_json::Value = serde_json::from_str(&kubectl.ok(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/shop/deployments/web/scale",
    ])?)?;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["selector"], "app=web");

    watch_sees_changes(&kubectl)?;

    // Validation and errors.
    let missing = kubectl.run(&["get", "cm", "nope", "-n", "shop"])?;
    assert!(String::from_utf8_lossy(&missing.stderr).contains("NotFound"));
    let nowhere = kubectl.run(&["create", "configmap", "x", "-n", "nowhere"])?;
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).contains("namespaces \"nowhere\" not found"),
        "{}",
        String::from_utf8_lossy(&nowhere.stderr)
    );

    // Kustomize.
    kubectl.write(
        "kust/kustomization.yaml",
        "namespace: shop\nlabels:\n- pairs: {team: shop}\nresources: [cm.yaml]\nconfigMapGenerator:\n- name: generated\n  literals: [x=1]\n",
    )?;
    kubectl.write(
        "kust/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-kust}\ndata: {k: v}\n",
    )?;
    let kustomized = kubectl.ok(&["apply", "-k", path_str(&kubectl.dir.join("kust"))?])?;
    assert!(
        kustomized.contains("configmap/from-kust created"),
        "{kustomized}"
    );
    let labelled = kubectl.ok(&[
        "get",
        "cm",
        "-n",
        "shop",
        "-l",
        "team in (shop)",
        "-o",
        "name",
    ])?;
    assert_eq!(labelled.lines().count(), 2, "{labelled}");

    // relaymesh's own kinds.
    kubectl.ok(&["get", "placements", "-A"])?;
    kubectl.ok(&["get", "clusters"])?;
    kubectl.ok(&["get", "clusterprofiles"])?;
    let relays = kubectl.ok(&["get", "relays"])?;
    assert!(
        relays.contains("root") && relays.contains("CONNECTED"),
        "{relays}"
    );

    // `all` is upstream's category (plus Placements): workloads, not the
    // Namespace, Secrets, ConfigMaps or custom kinds without categories.
    let all = kubectl.ok(&["get", "all", "-n", "shop", "-o", "name"])?;
    assert!(
        all.lines().any(|line| line == "deployment.apps/web"),
        "{all}"
    );
    for not_in_all in ["namespace/", "secret/", "configmap/", "widget."] {
        assert!(
            all.lines().all(|line| !line.starts_with(not_in_all)),
            "{not_in_all} in {all}"
        );
    }

    // Deleting.
    cascades_and_finalizers(&kubectl)?;
    let deleted = kubectl.ok(&["delete", "-f", path_str(&app)?])?;
    assert!(
        deleted.contains("deployment.apps \"web\" deleted"),
        "{deleted}"
    );
    kubectl.ok(&["delete", "namespace", "shop"])?;
    let left = kubectl.ok(&["get", "widgets", "-A", "-o", "name"])?;
    assert!(left.trim().is_empty(), "{left}");

    // No client certificate: 401.
    let config = std::fs::read_to_string(&kubectl.kubeconfig)?;
    let anonymous: String = config
        .lines()
        .filter(|line| {
            !line.contains("client-certificate-data") && !line.contains("client-key-data")
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let anonymous_path = kubectl.write("anonymous.kubeconfig", &anonymous)?;
    let refused = Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&anonymous_path)
        // Without any credential kubectl would prompt for a password.
        .args(["--token", "not-a-credential", "get", "ns"])
        .output()?;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("You must be logged in"), "{stderr}");
    Ok(())
}

/// A Placement whose status rule's CEL does not parse is refused at
/// `kubectl apply` with `422 Invalid`, naming the field, the rule and
/// where in the expression; fixed, it is accepted.
#[test]
fn kubectl_apply_refuses_a_status_rule_that_does_not_parse() -> anyhow::Result<()> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return Ok(());
    }
    let (mesh, _root) = Mesh::init()?;
    let kubectl = kubectl_for(&mesh)?;
    let placement = r#"
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: default}
spec:
  workloads: [{kind: Deployment}]
  clusters: {names: [edge-1]}
  statusRules:
  - {name: objects, aggregate: count}
  - {name: ready, select: "object.status.", aggregate: sum}
"#;
    let file = kubectl.write("placement.yaml", placement)?;
    let refused = kubectl.run(&["apply", "-f", path_str(&file)?])?;
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{error}");
    assert!(
        error.contains("spec.statusRules[1].select: rule \"ready\": Syntax error at 1:15: "),
        "{error}"
    );
    kubectl.write(
        "placement.yaml",
        &placement.replace("object.status.", "object.status.readyReplicas"),
    )?;
    let applied = kubectl.ok(&["apply", "-f", path_str(&file)?])?;
    assert!(
        applied.contains("placement.relaymesh.dev/web created"),
        "{applied}"
    );
    Ok(())
}

/// Owner references and finalizers, as the garbage collector treats them:
/// `--cascade=orphan` keeps a dependent, `--cascade=background` deletes it,
/// and a finalizer holds an object (marked) until it is patched away.
fn cascades_and_finalizers(kubectl: &Kubectl) -> anyhow::Result<()> {
    let owner_uid = |name: &str| -> anyhow::Result<String> {
        kubectl.ok(&[
            "get",
            "configmap",
            name,
            "-n",
            "shop",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let dependent = |name: &str, owner: &str, uid: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\n  \
             ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: {owner}\n    uid: {uid}\n"
        )
    };
    for cascade in ["orphan", "background"] {
        let owner = format!("owner-{cascade}");
        let child = format!("child-{cascade}");
        kubectl.ok(&["create", "configmap", &owner, "-n", "shop"])?;
        let uid = owner_uid(&owner)?;
        let file = kubectl.write("child.yaml", &dependent(&child, &owner, &uid))?;
        kubectl.ok(&["apply", "-f", path_str(&file)?])?;
        kubectl.ok(&[
            "delete",
            "configmap",
            &owner,
            "-n",
            "shop",
            &format!("--cascade={cascade}"),
        ])?;
        let left = kubectl.run(&["get", "configmap", &child, "-n", "shop", "-o", "json"])?;
        match cascade {
            "orphan" => {
                let kept: serde_json::Value = serde_json::from_slice(&left.stdout)?;
                assert_eq!(kept["metadata"]["ownerReferences"], serde_json::json!([]));
            }
            _ => assert!(
                String::from_utf8_lossy(&left.stderr).contains("NotFound"),
                "a background cascade deletes the dependent"
            ),
        }
    }

    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: shop\n  \
                finalizers: [example.com/hold]\n";
    let file = kubectl.write("held.yaml", held)?;
    kubectl.ok(&["apply", "-f", path_str(&file)?])?;
    kubectl.ok(&["delete", "configmap", "held", "-n", "shop", "--wait=false"])?;
    let marked = kubectl.ok(&[
        "get",
        "configmap",
        "held",
        "-n",
        "shop",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ])?;
    assert!(
        !marked.trim().is_empty(),
        "a finalizer holds the object, marked"
    );
    kubectl.ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])?;
    let gone = kubectl.run(&["get", "configmap", "held", "-n", "shop"])?;
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "removing the last finalizer completes the deletion"
    );
    Ok(())
}

/// `kubectl get -w` sees a config map come and go.
fn watch_sees_changes(kubectl: &Kubectl) -> anyhow::Result<()> {
    let mut watcher = kubectl
        .command(&["get", "cm", "-n", "shop", "-w", "--request-timeout=0"])
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
    let seen = |prefix: &str| -> anyhow::Result<usize> {
        let lines = lines
            .lock()
            .map_err(|_| anyhow::anyhow!("the reader panicked"))?;
        observe(lines.join("\n"));
        Ok(lines.iter().filter(|line| line.starts_with(prefix)).count())
    };
    // The initial list is printed before the watch starts, from that list's
    // resourceVersion, so nothing created after it printed can be missed.
    wait_for("the watch's initial list", WATCH, || {
        Ok((seen("web-config")? > 0).then_some(()))
    })?;
    kubectl.ok(&[
        "create",
        "configmap",
        "watched",
        "-n",
        "shop",
        "--from-literal=a=b",
    ])?;
    kubectl.ok(&["delete", "configmap", "watched", "-n", "shop"])?;
    // Added, then deleted (a watch may also show the deletion's update).
    wait_for(
        "the watch to show the config map come and go",
        WATCH,
        || Ok((seen("watched")? >= 2).then_some(())),
    )?;
    watcher.kill()?;
    watcher.wait()?;
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader panicked"))?;
    Ok(())
}
