#!/usr/bin/env bash
# Offline checks of the Kubernetes manifests (default: deploy/k8s and the
# cluster overlay deploy/k8s-cluster): every file parses as YAML, and every
# object has what tensord's deployment promises. No cluster and no kubectl
# needed (kubectl's own validation wants an API server for schemas, so it is
# not used).
# Usage: scripts/check-manifests.sh [DIR...]
#        scripts/check-manifests.sh --self-test   (checks that it catches broken manifests)
#
# A folder's objects are its files' documents; where its Kustomization lists
# folders (an overlay), their objects too, with the overlay's patches applied
# (strategic merge, the subset kustomize uses for containers, env, volumes,
# mounts and ports; Kustomization fields that could rename or rewrite
# objects are refused, so the check sees what kubectl apply -k would).
#
# Checked, per object:
# - apiVersion, kind and metadata.name are set, no kind/name twice (a
#   Kustomization needs no name; every file it lists must exist);
# - workloads (Deployment, DaemonSet, StatefulSet, Job, Pod): the selector
#   matches the pod labels; hostIPC/hostPID/hostNetwork are not used; every
#   container has an image, cpu and memory requests and limits, and
#   securityContext runAsNonRoot (pod or container), readOnlyRootFilesystem
#   and allowPrivilegeEscalation false; regular containers have readiness and
#   liveness probes. An init container may run as root only when it drops
#   ALL capabilities;
# - volumeMounts name declared volumes (or a StatefulSet's
#   volumeClaimTemplates); ConfigMaps and Secrets referenced by envFrom, env
#   and volumes exist in DIR (unless marked optional); every $(VAR) in
#   command, args and env values names a variable defined before it (else
#   Kubernetes leaves the text as it is);
# - prometheus.io/port names a declared containerPort;
# - a Service or PodDisruptionBudget selects some workload, and a Service's
#   named targetPorts exist there.
# An etcd StatefulSet (a container given --initial-cluster), as flags or
# ETCD_* variables:
# - its serviceName is a headless Service in DIR that selects it and has
#   publishNotReadyAddresses (members resolve each other before ready), and
#   podManagementPolicy is Parallel (a member is ready only with a quorum);
# - --initial-cluster lists exactly the StatefulSet's pods NAME-0..NAME-(replicas-1),
#   each at POD.SERVICE.<namespace>.svc on a containerPort; --name is the pod's
#   name and --initial-advertise-peer-urls is its own --initial-cluster URL;
#   --advertise-client-urls is the pod's name on a containerPort; no loopback
#   --listen-*-urls; --data-dir is on a volumeClaimTemplates volume;
# - a PodDisruptionBudget selects its pods with minAvailable from the quorum to
#   replicas-1.
# A tensord container given --etcd-endpoints (flag, env or ConfigMap):
# - the endpoints are every pod of the folder's etcd StatefulSets, each once,
#   by its headless-Service name, with etcd's client scheme and port;
# - --advertise-address is $(POD_IP):PORT (downward API status.podIP), PORT
#   is the container's "grpc" port, and tensord listens on it at 0.0.0.0 (or
#   the pod IP), not loopback (the image's default);
# - --node-name is spec.nodeName in a DaemonSet, metadata.name (or unset)
#   elsewhere.
set -euo pipefail
# shellcheck source=scripts/lib/command-line.sh
source "$(dirname "$0")/lib/command-line.sh"
reject_unknown_options --self-test -- "$@"

if [[ ${1:-} == --self-test ]]; then
  script=$(readlink -f "$0")
  root=$(cd "$(dirname "$script")/.." && pwd)
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  expect() {  # expect PASS|FAIL FILE SED-SCRIPT MESSAGE: the overlay with FILE edited
    rm -rf "${scratch:?}/deploy" && mkdir "$scratch/deploy"
    cp -r "$root/deploy/k8s" "$root/deploy/k8s-cluster" "$scratch/deploy/"
    if [[ -n $3 ]]; then
      sed -i -e "$3" "$scratch/deploy/$2"
      if cmp -s "$root/deploy/$2" "$scratch/deploy/$2"; then
        echo "check-manifests self-test: '$3' changes nothing in $2" >&2
        exit 1
      fi
    fi
    local output got
    if output=$("$script" "$scratch/deploy/k8s-cluster" 2>&1); then got=PASS; else got=FAIL; fi
    if [[ $got != "$1" || $output != *"$4"* ]]; then
      echo "check-manifests self-test: '$3' in $2 gave $got, expected $1 saying '$4':" >&2
      echo "$output" >&2
      exit 1
    fi
  }
  ds=k8s-cluster/daemonset-cluster.yaml
  sts=k8s-cluster/etcd-statefulset.yaml
  expect PASS $sts '' 'look right'
  expect FAIL $sts 's/replicas: 3/replicas: 4/' 'missing ['"'"'tensord-etcd-3'"'"']'
  expect FAIL $sts 's/,tensord-etcd-2=[^,]*$//' 'missing ['"'"'tensord-etcd-2'"'"']'
  expect FAIL $sts 's/tensord-etcd-1=http:\/\/tensord-etcd-1\.tensord-etcd\./tensord-etcd-1=http:\/\/tensord-etcd-1.etcd./'     'the headless Service tensord-etcd gives pod tensord-etcd-1'
  expect FAIL $sts 's/--name=$(POD_NAME)/--name=etcd/' '--name is not $(POD_NAME)'
  expect FAIL $sts 's/--data-dir=.*/--data-dir=\/tmp\/etcd/' 'volumeClaimTemplates'
  expect FAIL $sts '/podManagementPolicy/d' 'podManagementPolicy'
  expect FAIL $sts 's/listen-peer-urls=http:\/\/0.0.0.0/listen-peer-urls=http:\/\/127.0.0.1/' 'loopback'
  expect FAIL k8s-cluster/etcd-service.yaml '/publishNotReadyAddresses/d' 'publishNotReadyAddresses'
  expect FAIL k8s-cluster/etcd-pdb.yaml 's/minAvailable: 2/minAvailable: 3/' 'minAvailable 3'
  expect FAIL $ds 's/,http:\/\/tensord-etcd-2[^,]*$//' 'leave out ['"'"'tensord-etcd-2'"'"']'
  expect FAIL $ds 's/tensord-etcd-1\.tensord-etcd\./tensord-etcd-1.tensord-etcd-client./'     'the headless Service tensord-etcd gives pod tensord-etcd-1'
  expect FAIL $ds 's/etcd-0\.tensord-etcd\.$(POD_NAMESPACE)/etcd-0.tensord-etcd.default/' "namespace 'default'"
  expect FAIL $ds 's/svc:2379$/svc:2380/' "etcd serves clients on http://HOST:2379"
  expect FAIL $ds 's/value: $(POD_IP):50051/value: $(POD_IP):50052/' 'is not the container'"'"'s '"'"'grpc'"'"' port'
  expect FAIL $ds 's/value: $(POD_IP):50051/value: $(MY_IP):50051/' 'which no variable defined before it sets'
  expect FAIL $ds 's/fieldPath: spec.nodeName/fieldPath: metadata.name/' 'spec.nodeName'
  expect FAIL k8s/configmap.yaml 's/"0.0.0.0:50051,/"127.0.0.1:50051,/' 'cannot reach at the pod IP'
  expect FAIL k8s-cluster/kustomization.yaml 's/^kind: Kustomization/&\nnamespace: tensord/' "field 'namespace'"
  expect FAIL k8s-cluster/kustomization.yaml 's/- \.\.\/k8s$/- ..\/k8s-missing/' 'does not exist'
  echo "check-manifests self-test: every broken manifest was caught"
  exit 0
fi

cd "$(dirname "$0")/.."
if (( $# == 0 )); then
  set -- deploy/k8s deploy/k8s-cluster
fi
python=/usr/bin/python3  # Debian's python3-yaml is installed for this one
if ! "$python" -c 'import yaml' 2>/dev/null; then
  echo "check-manifests: needs $python with PyYAML (apt-get install python3-yaml)" >&2
  exit 2
fi

exec "$python" - "$@" <<'PYTHON'
import os
import re
import sys

import yaml

WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "Pod"}
# Kustomization fields this check follows. Anything else (namespace,
# namePrefix, images, replacements...) could rename or rewrite objects behind
# its back, so it is refused rather than ignored.
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "metadata", "resources", "patches", "labels"}
# Strategic merge: the key that identifies an item of these lists (the rest
# are replaced whole, as Kubernetes does for lists without a merge key).
MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
              "volumeMounts": "mountPath", "ports": ("containerPort", "port"),
              "imagePullSecrets": "name"}


def where(path, obj):
    return f"{path}: {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def pod_template(obj):
    if obj.get("kind") == "Pod":
        return obj
    return (obj.get("spec") or {}).get("template") or {}


def pod_spec(obj):
    return pod_template(obj).get("spec") or {}


def pod_labels(obj):
    return (pod_template(obj).get("metadata") or {}).get("labels") or {}


def pod_annotations(obj):
    return (pod_template(obj).get("metadata") or {}).get("annotations") or {}


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class Unsupported(Exception):
    pass


def strategic_merge(base, patch):
    """The subset of Kubernetes' strategic merge patch that a patch adding or
    changing fields, containers, env, volumes and mounts needs."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    merged = dict(base)
    for key, value in patch.items():
        if key.startswith("$"):
            raise Unsupported(f"directive {key}")
        if value is None:
            merged.pop(key, None)
        elif key not in merged:
            merged[key] = value
        elif isinstance(value, dict):
            merged[key] = strategic_merge(merged[key], value)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(merged[key], list):
            merged[key] = merge_list(key, merged[key], value)
        else:
            merged[key] = value
    return merged


def merge_list(field, base, patch):
    keys = MERGE_KEYS[field] if isinstance(MERGE_KEYS[field], tuple) else (MERGE_KEYS[field],)
    items = base + patch
    key = next((k for k in keys if all(isinstance(i, dict) and k in i for i in items)), None)
    if key is None:
        raise Unsupported(f"a {field} list whose items do not all have {' or '.join(keys)}")
    merged = list(base)
    for item in patch:
        index = next((i for i, old in enumerate(merged) if old[key] == item[key]), None)
        if index is None:
            merged.append(item)
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


def read_documents(path, error):
    try:
        with open(path) as stream:
            documents = [d for d in yaml.safe_load_all(stream) if d is not None]
    except (OSError, yaml.YAMLError) as problem:
        error(path, f"not valid YAML: {problem}")
        return []
    kept = []
    for document in documents:
        if isinstance(document, dict):
            kept.append(document)
        else:
            error(path, "a document is not a mapping")
    return kept


def load_directory(directory, error, visiting=()):
    """(objects, files): every document of the directory's .yaml files, and,
    where it has a Kustomization, the objects of the directories it lists as
    resources with its patches applied. Files used as patches are not objects."""
    real = os.path.realpath(directory)
    if real in visiting:
        error(directory, "Kustomization resources form a cycle")
        return [], []
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory)
                   if f.endswith((".yaml", ".yml")))
    documents = {path: read_documents(path, error) for path in files}
    objects, patch_files, patches = [], set(), []
    for path, docs in documents.items():
        for kustomization in (d for d in docs if d.get("kind") == "Kustomization"):
            for field in sorted(set(kustomization) - KUSTOMIZATION_FIELDS):
                error(path, f"Kustomization field '{field}' is not followed by this check")
            for resource in kustomization.get("resources") or []:
                target = os.path.normpath(os.path.join(directory, resource))
                if not os.path.exists(target):
                    error(path, f"Kustomization lists {resource}, which does not exist")
                elif os.path.isdir(target):
                    more, more_files = load_directory(target, error, visiting + (real,))
                    objects += more
                    files += more_files
                elif not os.path.realpath(target).startswith(real + os.sep):
                    error(path, f"Kustomization lists {resource}, outside its folder (kustomize refuses it)")
                elif os.path.realpath(os.path.dirname(target)) != real:  # in a subfolder
                    objects += [(target, d) for d in read_documents(target, error)]
                    files.append(target)
            for patch in kustomization.get("patches") or []:
                if not isinstance(patch, dict) or set(patch) != {"path"}:
                    error(path, f"patch {patch}: only 'path:' strategic-merge patches are followed by this check")
                    continue
                target = os.path.join(directory, patch["path"])
                if not os.path.isfile(target):
                    error(path, f"Kustomization patch {patch['path']} does not exist")
                    continue
                patch_files.add(os.path.realpath(target))
                patches += [(target, d) for d in (documents.get(target) or read_documents(target, error))]
    for path, docs in documents.items():
        if os.path.realpath(path) not in patch_files:
            objects += [(path, d) for d in docs]
    for patch_path, patch in patches:
        kind, name = patch.get("kind"), (patch.get("metadata") or {}).get("name")
        matches = [i for i, (_, obj) in enumerate(objects)
                   if obj.get("kind") == kind and (obj.get("metadata") or {}).get("name") == name]
        if not matches:
            error(patch_path, f"patch for {kind}/{name}, which no resource defines")
            continue
        for index in matches:
            path, obj = objects[index]
            try:
                objects[index] = (f"{path} (patched by {patch_path})", strategic_merge(obj, patch))
            except Unsupported as problem:
                error(patch_path, f"not followed by this check: {problem}")
    return objects, files


# $(VAR) references, as Kubernetes expands them in command, args and env
# values ($$(VAR) is a literal "$(VAR)").
VARIABLE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class Container:
    """A container's variables as Kubernetes resolves them: values are plain
    text or, for the downward API, a token <PATH> (dots as dashes, to keep
    host names parseable)."""

    def __init__(self, container, config_maps, problem):
        self.raw = container
        self.variables = {}  # name -> resolved value, or None where unknown (secrets...)
        # envFrom a Secret (or a ConfigMap not in the folder) may define any name.
        self.open_ended = False
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix") or ""
            name = (source.get("configMapRef") or {}).get("name")
            if name not in config_maps:
                self.open_ended = True
            for key, value in (config_maps.get(name) or {}).items():
                self.variables[prefix + key] = str(value)
        for variable in container.get("env") or []:
            name = variable.get("name")
            if "value" in variable:
                self.variables[name] = self.expand(str(variable["value"]), problem, f"env {name}")
            else:
                field = ((variable.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                self.variables[name] = f"<{field.replace('.', '-')}>" if field else None

    def expand(self, text, problem=None, place=""):
        def substitute(match):
            if match.group(0) == "$$":
                return "$"
            name = match.group(1)
            if name not in self.variables:
                if problem and not self.open_ended:
                    problem(f"{place} uses $({name}), which no variable defined before it "
                            f"sets: Kubernetes leaves the text '$({name})' there")
                return match.group(0)
            value = self.variables[name]
            return value if value is not None else f"<{name}>"
        return VARIABLE.sub(substitute, text)

    def arguments(self, problem=None):
        return [self.expand(str(a), problem, "command/args")
                for a in (self.raw.get("command") or []) + (self.raw.get("args") or [])]

    def flag(self, name, environment_prefix):
        """The value of --NAME (command line first, as tensord and etcd take
        it), else of its environment variable; None when unset."""
        arguments = self.arguments()
        value = None
        for i, argument in enumerate(arguments):
            if argument.startswith(f"--{name}="):
                value = argument.split("=", 1)[1]
            elif argument == f"--{name}" and i + 1 < len(arguments):
                value = arguments[i + 1]
        if value is not None:
            return value
        return self.variables.get(environment_prefix + name.upper().replace("-", "_"))

    def port_numbers(self):
        return {p.get("containerPort") for p in self.raw.get("ports") or []}


def split_url(url):
    """(scheme, host, port) of scheme://host:port, or None."""
    match = re.fullmatch(r"(https?)://(\[[^\]]+\]|[^:/]+):(\d+)/?", url or "")
    return (match.group(1), match.group(2), int(match.group(3))) if match else None


def check_directory(directory):
    errors = []

    def error(place, message):
        errors.append(f"{place}: {message}")

    if not os.path.isdir(directory):
        print(f"check-manifests: {directory} is not a folder", file=sys.stderr)
        return False
    objects, files = load_directory(directory, error)
    if not files:
        error(directory, "no .yaml files")

    names = {}
    for path, obj in objects:
        for field in ("apiVersion", "kind"):
            if not obj.get(field):
                error(path, f"an object has no {field}")
        if obj.get("kind") == "Kustomization":
            continue
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            error(path, f"a {obj.get('kind')} has no metadata.name")
            continue
        if name in names.setdefault(obj.get("kind"), set()):
            error(path, f"{obj.get('kind')}/{name} is defined twice")
        names[obj.get("kind")].add(name)
    config_maps = {(o.get("metadata") or {}).get("name"): o.get("data") or {}
                   for _, o in objects if o.get("kind") == "ConfigMap"}

    def check_reference(place, kind, name, optional):
        if optional:
            return
        if not name:
            error(place, f"a {kind} reference has no name")
        elif name not in names.get(kind, set()):
            error(place, f"{kind} '{name}' is not defined in {directory}")

    def check_container(place, container, obj, init):
        spec = pod_spec(obj)
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
        if obj.get("kind") == "StatefulSet":
            volumes |= {(c.get("metadata") or {}).get("name")
                        for c in (obj.get("spec") or {}).get("volumeClaimTemplates") or []}
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
        # Every $(VAR) must be defined (earlier, for env values).
        Container(container, config_maps, lambda message: error(place, message)).arguments(
            lambda message: error(place, message))

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
                check_container(f"{place} container {container.get('name')}", container, obj, init)
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
        if obj.get("kind") not in ("Service", "PodDisruptionBudget"):
            continue
        place = where(path, obj)
        selector = (obj.get("spec") or {}).get("selector") or {}
        if obj.get("kind") == "PodDisruptionBudget":
            selector = selector.get("matchLabels") or {}
        matches = [ports for labels, ports in workload_ports if selects(selector, labels)]
        if not matches:
            error(place, f"selector {selector} matches no workload in {directory}")
            continue
        for port in (obj.get("spec") or {}).get("ports") or []:
            target = port.get("targetPort")
            if isinstance(target, str) and not any(target in ports for ports in matches):
                error(place, f"targetPort '{target}' is not a port name of the selected workload")

    members = check_etcd(objects, config_maps, error)
    check_cluster_nodes(objects, config_maps, members, error)

    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"check-manifests: {len(errors)} problem(s) in {directory}", file=sys.stderr)
        return False
    print(f"check-manifests: {len(objects)} objects in {len(files)} files under {directory} look right")
    return True


NAMESPACE = "<metadata-namespace>"
POD_NAME = "<metadata-name>"
POD_IP = "<status-podIP>"
NODE_NAME = "<spec-nodeName>"


def check_member_host(place, what, host, pod, service, namespaces, error):
    """host must be POD.SERVICE[.NAMESPACE[.svc[.DOMAIN]]]: the name the
    headless Service gives that pod. namespaces: how the etcd pods'
    namespace may be written there (NAMESPACE: $(POD_NAMESPACE) of a pod in
    the same namespace)."""
    parts = host.split(".")
    if parts[:2] != [pod, service]:
        error(place, f"{what} '{host}' is not {pod}.{service}.<namespace>.svc, the name "
                     f"the headless Service {service} gives pod {pod}")
    elif len(parts) == 2 and NAMESPACE not in namespaces:
        error(place, f"{what} '{host}' has no namespace, but the etcd pods are in another one")
    elif len(parts) > 2 and parts[2] not in namespaces:
        error(place, f"{what} '{host}': namespace '{parts[2]}' is not the etcd pods'; use "
                     + (" or ".join(f"'{n}'" for n in namespaces if n != NAMESPACE) or
                        "$(POD_NAMESPACE), from the downward API's metadata.namespace"))
    elif len(parts) > 3 and parts[3] != "svc":
        error(place, f"{what} '{host}' is not a Service name (...<namespace>.svc)")


def check_etcd(objects, config_maps, error):
    """The StatefulSets running etcd (a container given --initial-cluster):
    its members can find each other and form exactly the cluster intended.
    Returns what tensord nodes need to reach them."""
    found = []
    for path, obj in objects:
        if obj.get("kind") != "StatefulSet":
            continue
        place = where(path, obj)
        spec = obj.get("spec") or {}
        for raw in pod_spec(obj).get("containers") or []:
            container = Container(raw, config_maps, None)
            initial_cluster = container.flag("initial-cluster", "ETCD_")
            if initial_cluster is None:
                continue
            cplace = f"{place} container {raw.get('name')}"
            name = (obj.get("metadata") or {}).get("name")
            replicas = spec.get("replicas", 1)
            service_name = spec.get("serviceName")
            namespace = (obj.get("metadata") or {}).get("namespace")
            namespaces = {NAMESPACE, namespace} - {None}
            pods = [f"{name}-{i}" for i in range(replicas)]
            ports = container.port_numbers()
            # The governing Service: headless, and publishing members before
            # they are ready (they are ready only once they found each other).
            services = [o for _, o in objects if o.get("kind") == "Service"
                        and (o.get("metadata") or {}).get("name") == service_name]
            if not services:
                error(place, f"serviceName '{service_name}' is not a Service in this folder")
            for service in services:
                sspec = service.get("spec") or {}
                if sspec.get("clusterIP") != "None":
                    error(place, f"Service {service_name} is not headless (clusterIP: None), so "
                                 "the members get no DNS names of their own")
                if sspec.get("publishNotReadyAddresses") is not True:
                    error(place, f"Service {service_name} lacks publishNotReadyAddresses: true: "
                                 "members could not resolve each other before they are ready, "
                                 "and are not ready before they have")
                if not selects(sspec.get("selector") or {}, pod_labels(obj)):
                    error(place, f"Service {service_name} does not select this StatefulSet's pods")
            if replicas > 1 and spec.get("podManagementPolicy") != "Parallel":
                error(place, "podManagementPolicy is not Parallel: with OrderedReady the second "
                             "member waits for the first to be ready, which needs a quorum")
            if container.flag("name", "ETCD_") != POD_NAME:
                error(cplace, "--name is not $(POD_NAME) from the downward API's metadata.name, "
                              "so it is not the member's name in --initial-cluster")
            # --initial-cluster names exactly the StatefulSet's pods.
            entries = {}
            for entry in initial_cluster.split(","):
                member, _, url = entry.partition("=")
                if member in entries:
                    error(cplace, f"--initial-cluster lists {member} twice")
                entries[member] = url
            missing = [p for p in pods if p not in entries]
            extra = [m for m in entries if m not in pods]
            if missing or extra:
                error(cplace, f"--initial-cluster members {sorted(entries)} are not the "
                              f"StatefulSet's {replicas} pods {pods}"
                              + (f" (missing {missing})" if missing else "")
                              + (f" (not pods: {extra})" if extra else ""))
            peer = None
            for member, url in entries.items():
                parts = split_url(url)
                if parts is None:
                    error(cplace, f"--initial-cluster: {member}'s URL '{url}' is not http[s]://host:port")
                    continue
                if member in pods:
                    check_member_host(cplace, f"--initial-cluster: {member}'s host", parts[1], member,
                                      service_name, namespaces, error)
                if peer is None:
                    peer = (parts[0], parts[2])
                elif (parts[0], parts[2]) != peer:
                    error(cplace, f"--initial-cluster: {member}'s URL uses another scheme or port")
            if peer and peer[1] not in ports:
                error(cplace, f"--initial-cluster's peer port {peer[1]} is not a containerPort")
            # Each member announces the URL the others have for it.
            advertised_peer = container.flag("initial-advertise-peer-urls", "ETCD_") or ""
            for pod in pods:
                url = advertised_peer.replace(POD_NAME, pod)
                if pod in entries and url != entries[pod]:
                    error(cplace, f"--initial-advertise-peer-urls for {pod} is '{url}', "
                                  f"but --initial-cluster has '{entries[pod]}' for it")
            client = split_url(container.flag("advertise-client-urls", "ETCD_"))
            if client is None:
                error(cplace, "--advertise-client-urls is not one http[s]://host:port")
            else:
                if client[1].split(".")[0] != POD_NAME:
                    error(cplace, f"--advertise-client-urls host '{client[1]}' does not start with "
                                  "$(POD_NAME), the member's own name")
                for pod in pods:
                    check_member_host(cplace, "--advertise-client-urls host", client[1].replace(POD_NAME, pod),
                                      pod, service_name, namespaces, error)
                if client[2] not in ports:
                    error(cplace, f"--advertise-client-urls port {client[2]} is not a containerPort")
            for flag in ("listen-client-urls", "listen-peer-urls"):
                for url in (container.flag(flag, "ETCD_") or "").split(","):
                    parts = split_url(url)
                    if parts and (parts[1] in ("localhost", "[::1]") or parts[1].startswith("127.")):
                        error(cplace, f"--{flag} '{url}' is loopback: other pods cannot reach it")
            # The data directory outlives the pod only on a claimed volume.
            data_dir = container.flag("data-dir", "ETCD_") or ""
            claims = {(c.get("metadata") or {}).get("name") for c in spec.get("volumeClaimTemplates") or []}
            on_claim = any(m.get("name") in claims and
                           (data_dir + "/").startswith(m.get("mountPath", "").rstrip("/") + "/")
                           for m in raw.get("volumeMounts") or [])
            if not on_claim:
                error(cplace, f"--data-dir '{data_dir}' is not on a volumeClaimTemplates volume: "
                              "a restarted member would come back empty")
            # Voluntary disruptions leave a quorum.
            quorum = replicas // 2 + 1
            budgets = [o for _, o in objects if o.get("kind") == "PodDisruptionBudget" and
                       selects(((o.get("spec") or {}).get("selector") or {}).get("matchLabels") or {},
                               pod_labels(obj))]
            if replicas > 1 and not budgets:
                error(place, f"no PodDisruptionBudget keeps a quorum ({quorum}) of its members")
            for budget in budgets:
                minimum = (budget.get("spec") or {}).get("minAvailable")
                if not isinstance(minimum, int) or not quorum <= minimum < replicas:
                    error(place, f"PodDisruptionBudget {budget['metadata'].get('name')}: minAvailable "
                                 f"{minimum} is not an integer from the quorum ({quorum}) to one less "
                                 f"than the members ({replicas}), so drains either break the quorum "
                                 "or can never proceed")
            found.append({"name": name, "pods": pods, "service": service_name,
                          "namespace": (obj.get("metadata") or {}).get("namespace"),
                          "client": client})
    return found


def check_cluster_nodes(objects, config_maps, members, error):
    """tensord containers given --etcd-endpoints: they reach every etcd member
    of this folder by its stable name, and advertise an address other pods
    can reach."""
    for path, obj in objects:
        if obj.get("kind") not in WORKLOADS:
            continue
        place = where(path, obj)
        for raw in pod_spec(obj).get("containers") or []:
            container = Container(raw, config_maps, None)
            endpoints = container.flag("etcd-endpoints", "TENSORD_")
            if not endpoints:
                continue
            cplace = f"{place} container {raw.get('name')}"
            own_namespace = (obj.get("metadata") or {}).get("namespace")
            listed = [e.strip() for e in endpoints.split(",") if e.strip()]
            for member in members:
                # $(POD_NAMESPACE) is right where both are in one namespace.
                namespaces = {member["namespace"]} - {None}
                if own_namespace == member["namespace"]:
                    namespaces.add(NAMESPACE)
                named = []
                for endpoint in listed:
                    parts = split_url(endpoint)
                    if parts is None:
                        error(cplace, f"etcd endpoint '{endpoint}' is not http[s]://host:port")
                        continue
                    pod = parts[1].split(".")[0]
                    if pod not in member["pods"]:
                        error(cplace, f"etcd endpoint '{endpoint}' names none of StatefulSet "
                                      f"{member['name']}'s pods {member['pods']}")
                        continue
                    named.append(pod)
                    check_member_host(cplace, f"etcd endpoint '{endpoint}' host", parts[1], pod,
                                      member["service"], namespaces, error)
                    if member["client"] and (parts[0], parts[2]) != (member["client"][0], member["client"][2]):
                        error(cplace, f"etcd endpoint '{endpoint}': etcd serves clients on "
                                      f"{member['client'][0]}://HOST:{member['client'][2]}")
                missing = [p for p in member["pods"] if p not in named]
                if missing:
                    error(cplace, f"etcd endpoints leave out {missing}: tensord could not fail over to them")
                if len(named) != len(set(named)):
                    error(cplace, "etcd endpoints list a member twice")
            # The advertised address: the pod IP and the gRPC port tensord
            # listens on there.
            advertise = container.flag("advertise-address", "TENSORD_")
            grpc_ports = {p.get("containerPort") for p in raw.get("ports") or [] if p.get("name") == "grpc"}
            match = re.fullmatch(r"\[?" + POD_IP + r"\]?:(\d+)", advertise or "")
            if not match:
                error(cplace, f"advertise address '{advertise}' is not $(POD_IP):PORT with POD_IP "
                              "from the downward API's status.podIP: other nodes dial it")
            else:
                port = int(match.group(1))
                if grpc_ports != {port}:
                    error(cplace, f"advertise address port {port} is not the container's 'grpc' "
                                  f"port {sorted(grpc_ports) or '(none)'}")
                listen = (container.flag("listen", "TENSORD_") or "127.0.0.1:50051").split(",")
                hosts = [a.rsplit(":", 1)[0] for a in listen
                         if not a.startswith("unix:") and a.rsplit(":", 1)[-1] == str(port)]
                if not hosts:
                    error(cplace, f"tensord listens on no TCP port {port} (listen: {','.join(listen)})")
                for host in hosts:
                    if host not in ("0.0.0.0", "[::]", POD_IP, f"[{POD_IP}]"):
                        error(cplace, f"tensord listens on {host}:{port}, which other pods "
                                      "cannot reach at the pod IP")
            # Unique among live nodes: a DaemonSet's pod per node takes the
            # node's name (it stays when the pod is replaced); other pods
            # their own name (tensord's default, the host name, is that too).
            node_name = container.flag("node-name", "TENSORD_")
            if obj.get("kind") == "DaemonSet" and node_name != NODE_NAME:
                error(cplace, f"node name '{node_name}' is not the downward API's spec.nodeName: "
                              "one pod per node, so the node's name is unique and stays when "
                              "the pod is replaced")
            elif obj.get("kind") != "DaemonSet" and node_name not in (None, POD_NAME):
                error(cplace, f"node name '{node_name}' is not the downward API's metadata.name: "
                              "every replica would claim the same name")


ok = all([check_directory(directory) for directory in sys.argv[1:]])
sys.exit(0 if ok else 1)
PYTHON
