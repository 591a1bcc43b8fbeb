"""The official Kubernetes Python client against the relaymesh root.

Run by tests/tests/python_client.rs with the root's admin kubeconfig:

    python client_compat.py KUBECONFIG

Each step is what a platform team's script does with the client: typed
creates and replaces (bodies without apiVersion/kind), a merge patch, the
scale subresource, a list by label, a watch from a resourceVersion, a
collection delete, an access review, and the dynamic client on relaymesh's
own kinds. A step that a real API server would answer and the root does not
raises, and the script exits non-zero. On success it prints one JSON line
of facts for the Rust test to check against kubectl.
"""

import json
import sys

from kubernetes import client, config, dynamic, watch


def main(kubeconfig):
    api_client = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    facts = {}

    # Typed creates: the client sends no apiVersion or kind.
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py")))
    for name, tier in [("a", "web"), ("b", "web"), ("c", "db")]:
        core.create_namespaced_config_map(
            "py",
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, labels={"tier": tier}),
                data={"owner": "python"},
            ),
        )

    # A typed replace, then a merge patch.
    current = core.read_namespaced_config_map("c", "py")
    current.data = {"owner": "python, replaced"}
    core.replace_namespaced_config_map("c", "py", current)
    patched = core.patch_namespaced_config_map("c", "py", {"data": {"patched": "yes"}})
    facts["c"] = patched.data

    # A Deployment, scaled through its scale subresource.
    apps.create_namespaced_deployment(
        "py",
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web", labels={"app": "web"}),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels={"app": "web"}),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels={"app": "web"}),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="web", image="nginx:1.27")]
                    ),
                ),
            ),
        ),
    )
    apps.patch_namespaced_deployment_scale("web", "py", {"spec": {"replicas": 3}})
    scale = apps.read_namespaced_deployment_scale("web", "py")
    facts["scale"] = {"replicas": scale.spec.replicas, "selector": scale.status.selector}

    # A list by label, then a watch from its resourceVersion that sees a
    # ConfigMap created after the list.
    listed = core.list_namespaced_config_map("py", label_selector="tier=web")
    facts["listed"] = sorted(item.metadata.name for item in listed.items)
    core.create_namespaced_config_map(
        "py", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late"))
    )
    seen = []
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "py",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=30,
    )
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if event["object"].metadata.name == "late":
            break
    facts["watched"] = seen

    # A collection delete by label.
    core.delete_collection_namespaced_config_map("py", label_selector="tier=web")
    left = core.list_namespaced_config_map("py")
    facts["left"] = sorted(item.metadata.name for item in left.items)

    # What the caller may do.
    review = client.AuthorizationV1Api(api_client).create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    namespace="py", verb="create", group="apps", resource="deployments"
                )
            )
        )
    )
    facts["allowed"] = review.status.allowed

    # relaymesh's own kinds through the dynamic client (discovery included).
    dyn = dynamic.DynamicClient(api_client)
    placements = dyn.resources.get(api_version="relaymesh.dev/v1alpha1", kind="Placement")
    placements.create(
        namespace="py",
        body={
            "apiVersion": "relaymesh.dev/v1alpha1",
            "kind": "Placement",
            "metadata": {"name": "web"},
            "spec": {
                "workloads": [{"kind": "Deployment", "names": ["web"]}],
                "clusters": {"names": ["edge"]},
            },
        },
    )
    facts["placements"] = [item.metadata.name for item in placements.get(namespace="py").items]
    relays = dyn.resources.get(api_version="relaymesh.dev/v1alpha1", kind="Relay")
    facts["relays"] = sorted(item.metadata.name for item in relays.get().items)

    print(json.dumps(facts, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
