#!/usr/bin/env bash
# Offline checks of the Kubernetes manifests (default: deploy/k8s): every
# file parses as YAML, and every object has what tensord's deployment
# promises. No cluster and no kubectl needed (kubectl's own validation wants
# an API server for schemas, so it is not used).
# Usage: scripts/check-manifests.sh [DIR]
#
# Checked, per object:
# - apiVersion, kind and metadata.name are set (a Kustomization needs no
#   name; every file it lists must exist);
# - workloads (Deployment, DaemonSet, StatefulSet, Job, Pod): the selector
#   matches the pod labels; hostIPC/hostPID/hostNetwork are not used; every
#   container has an image, cpu and memory requests and limits, and
#   securityContext runAsNonRoot (pod or container), readOnlyRootFilesystem
#   and allowPrivilegeEscalation false; regular containers have readiness and
#   liveness probes. An init container may run as root only when it drops
#   ALL capabilities;
# - volumeMounts name declared volumes; ConfigMaps and Secrets referenced by
#   envFrom, env and volumes exist in DIR (unless marked optional);
# - prometheus.io/port names a declared containerPort;
# - a Service selects some workload and its named targetPorts exist there.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-deploy/k8s}
python=/usr/bin/python3  # Debian's python3-yaml is installed for this one
if ! "$python" -c 'import yaml' 2>/dev/null; then
  echo "check-manifests: needs $python with PyYAML (apt-get install python3-yaml)" >&2
  exit 2
fi

exec "$python" - "$dir" <<'PYTHON'
import os
import sys

import yaml

WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "Pod"}
directory = sys.argv[1]
errors = []
objects = []  # (file, document)


def error(where, message):
    errors.append(f"{where}: {message}")


files = sorted(f for f in os.listdir(directory) if f.endswith((".yaml", ".yml")))
if not files:
    error(directory, "no .yaml files")
for name in files:
    path = os.path.join(directory, name)
    try:
        with open(path) as stream:
            documents = [d for d in yaml.safe_load_all(stream) if d is not None]
    except yaml.YAMLError as problem:
        error(path, f"not valid YAML: {problem}")
        continue
    for document in documents:
        if not isinstance(document, dict):
            error(path, "a document is not a mapping")
            continue
        objects.append((path, document))


def where(path, obj):
    return f"{path}: {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def pod_spec(obj):
    if obj.get("kind") == "Pod":
        return obj.get("spec") or {}
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def pod_labels(obj):
    if obj.get("kind") == "Pod":
        return (obj.get("metadata") or {}).get("labels") or {}
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def pod_annotations(obj):
    if obj.get("kind") == "Pod":
        return (obj.get("metadata") or {}).get("annotations") or {}
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}


names = {}
for path, obj in objects:
    for field in ("apiVersion", "kind"):
        if not obj.get(field):
            error(path, f"an object has no {field}")
    if obj.get("kind") == "Kustomization":
        for resource in obj.get("resources") or []:
            if not os.path.exists(os.path.join(directory, resource)):
                error(path, f"Kustomization lists {resource}, which does not exist")
        continue
    name = (obj.get("metadata") or {}).get("name")
    if not name:
        error(path, f"a {obj.get('kind')} has no metadata.name")
        continue
    names.setdefault(obj.get("kind"), set()).add(name)


def check_reference(place, kind, name, optional):
    if optional:
        return
    if not name:
        error(place, f"a {kind} reference has no name")
    elif name not in names.get(kind, set()):
        error(place, f"{kind} '{name}' is not defined in {directory}")


def check_container(place, container, spec, init):
    pod_security = spec.get("securityContext") or {}
    security = container.get("securityContext") or {}
    if not container.get("image"):
        error(place, "no image")
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            if not (resources.get(section) or {}).get(resource):
                error(place, f"no resources.{section}.{resource}")
    if not init:
        for probe in ("readinessProbe", "livenessProbe"):
            if not container.get(probe):
                error(place, f"no {probe}")
    non_root = security.get("runAsNonRoot", pod_security.get("runAsNonRoot"))
    drops_all = "ALL" in ((security.get("capabilities") or {}).get("drop") or [])
    if non_root is not True and not (init and drops_all):
        error(place, "securityContext.runAsNonRoot is not true"
                     + (" (an init container running as root must drop ALL capabilities)" if init else ""))
    if security.get("readOnlyRootFilesystem") is not True:
        error(place, "securityContext.readOnlyRootFilesystem is not true")
    if security.get("allowPrivilegeEscalation") is not False:
        error(place, "securityContext.allowPrivilegeEscalation is not false")
    if security.get("privileged"):
        error(place, "runs privileged")
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        if mount.get("name") not in volumes:
            error(place, f"volumeMount '{mount.get('name')}' names no volume of the pod")
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            ref = source["configMapRef"] or {}
            check_reference(place, "ConfigMap", ref.get("name"), ref.get("optional"))
        if "secretRef" in source:
            ref = source["secretRef"] or {}
            check_reference(place, "Secret", ref.get("name"), ref.get("optional"))
    for variable in container.get("env") or []:
        value_from = variable.get("valueFrom") or {}
        if "configMapKeyRef" in value_from:
            ref = value_from["configMapKeyRef"] or {}
            check_reference(place, "ConfigMap", ref.get("name"), ref.get("optional"))
        if "secretKeyRef" in value_from:
            ref = value_from["secretKeyRef"] or {}
            check_reference(place, "Secret", ref.get("name"), ref.get("optional"))


workload_ports = []  # (labels, set of port names)
for path, obj in objects:
    if obj.get("kind") not in WORKLOADS:
        continue
    place = where(path, obj)
    spec = pod_spec(obj)
    labels = pod_labels(obj)
    if obj.get("kind") != "Pod":
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not selector:
            error(place, "no spec.selector.matchLabels")
        for key, value in selector.items():
            if labels.get(key) != value:
                error(place, f"selector {key}={value} does not match the pod template's labels")
    for host_field in ("hostIPC", "hostPID", "hostNetwork"):
        if spec.get(host_field):
            error(place, f"uses {host_field} (tensord's handoff needs none)")
    containers = spec.get("containers") or []
    if not containers:
        error(place, "no containers")
    port_names, port_numbers = set(), set()
    for init, group in ((True, spec.get("initContainers") or []), (False, containers)):
        for container in group:
            check_container(f"{place} container {container.get('name')}", container, spec, init)
            for port in container.get("ports") or []:
                port_names.add(port.get("name"))
                port_numbers.add(port.get("containerPort"))
    for volume in spec.get("volumes") or []:
        if "configMap" in volume:
            ref = volume["configMap"] or {}
            check_reference(place, "ConfigMap", ref.get("name"), ref.get("optional"))
        if "secret" in volume:
            ref = volume["secret"] or {}
            check_reference(place, "Secret", ref.get("secretName"), ref.get("optional"))
    scrape_port = str(pod_annotations(obj).get("prometheus.io/port", ""))
    if scrape_port and (not scrape_port.isdigit() or int(scrape_port) not in port_numbers):
        error(place, f"prometheus.io/port {scrape_port} is not a containerPort")
    workload_ports.append((labels, port_names))

for path, obj in objects:
    if obj.get("kind") != "Service":
        continue
    place = where(path, obj)
    selector = (obj.get("spec") or {}).get("selector") or {}
    matches = [ports for labels, ports in workload_ports
               if selector and all(labels.get(k) == v for k, v in selector.items())]
    if not matches:
        error(place, f"selector {selector} matches no workload in {directory}")
        continue
    for port in (obj.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort")
        if isinstance(target, str) and not any(target in ports for ports in matches):
            error(place, f"targetPort '{target}' is not a port name of the selected workload")

if errors:
    print("\n".join(errors), file=sys.stderr)
    print(f"check-manifests: {len(errors)} problem(s) in {directory}", file=sys.stderr)
    sys.exit(1)
print(f"check-manifests: {len(objects)} objects in {len(files)} files under {directory} look right")
PYTHON
