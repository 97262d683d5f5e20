"""deploy/kubernetes: probes on the metrics port, grace period against the drain,
Service, ServiceMonitor, PDB, HPA, Secret keys, the StatefulSet variant
against the Deployment, and every core resource against Kubernetes' schemas."""

import copy
import os
import urllib.parse

import yaml

from .common import K8S, Skipped, Collector, rel, load_yaml, load_all, port_of, relay_settings, env_name_for_app, known_environment, check_env_name, alert_job


def k8s_documents():
    documents = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in load_all(path):
            if isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion", "").startswith("kustomize."):
                continue
            if isinstance(doc, dict) and doc.get("kind"):
                documents.append((path, doc))
    return documents


def find(documents, kind, name=None):
    return [(p, d) for p, d in documents if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_kubernetes():
    c = Collector()
    documents = k8s_documents()
    c.expect(find(documents, "Deployment"), "deploy/kubernetes: no Deployment")
    summary = []
    for path, workload in find(documents, "Deployment") + find(documents, "StatefulSet"):
        line = check_workload(c, documents, path, workload)
        if line:
            summary.append(line)
    check_statefulset_variant(c, documents)
    job = check_service_and_monitoring(c, documents)
    check_kustomization(c)
    return c.done("; ".join(summary) + f"; Service/ServiceMonitor/PDB/HPA consistent, job {job!r}")


def check_workload(c, documents, path, workload):
    """One Deployment or StatefulSet against its ConfigMap and Secret; its summary, or None when it cannot be read."""
    where = f"{rel(path)} {workload['kind']}"
    spec = workload["spec"]["template"]["spec"]
    relay = check_pod(c, where, workload)
    if relay is None:
        return None
    env = {e["name"]: e for e in relay.get("env") or []}
    mounts = {m["mountPath"]: m["name"] for m in relay.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    config = mounted_config(c, documents, where, env, mounts, volumes)
    if config is None:
        return None
    ingress, metrics, drain = relay_settings(config)
    for variable, port in (("APNS_RELAY_INGRESS_LISTEN", ingress), ("APNS_RELAY_METRICS_LISTEN", metrics)):
        value = (env.get(variable) or {}).get("value")
        if value:
            c.expect(port_of(value) == port, f"{where}: {variable}={value} disagrees with the ConfigMap's port {port}")
    known = known_environment()
    apps = {a["name"] for a in config.get("apps") or []}
    for variable in env:
        check_env_name(variable, apps, known, f"{where} env", c)
    check_ports_and_probes(c, where, relay, ingress, metrics)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    c.expect(grace > drain, f"{where}: terminationGracePeriodSeconds {grace} must exceed drain_timeout_seconds {drain}")
    # The spool: where the config puts it, on a volume.
    spool = (env.get("APNS_RELAY_SPOOL_DIRECTORY") or {}).get("value") or (config.get("audit") or {}).get("spool_directory")
    c.expect(spool in mounts, f"{where}: the spool {spool} is not a mounted volume")
    check_secrets_and_keys(c, documents, where, config, env, mounts, volumes)
    exporter = check_tracing_settings(c, where, config, env)
    return f"{workload['kind']} probes on {metrics}, grace {grace} s > drain {drain} s, spans {exporter}"


def check_tracing_settings(c, where, config, env):
    """With `tracing.exporter: otlp` the pod must say where the collector is
    (OTEL_EXPORTER_OTLP_ENDPOINT, or tracing.endpoint), as an http(s) base URL
    with a port: the relay appends /v1/traces itself. Returns the exporter."""
    tracing = config.get("tracing") or {}
    exporter = tracing.get("exporter", "log")
    c.expect(exporter in ("otlp", "log", "none"), f"{where}: tracing.exporter {exporter!r} is not otlp, log or none")
    if exporter != "otlp":
        return exporter
    endpoint = (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or {}).get("value") or tracing.get("endpoint") or ""
    parsed = urllib.parse.urlsplit(endpoint)
    c.expect(parsed.scheme in ("http", "https") and parsed.hostname and parsed.port and parsed.path in ("", "/"),
             f"{where}: tracing.exporter is otlp but the collector endpoint {endpoint!r} is not an http(s)://host:port base URL "
             "(set OTEL_EXPORTER_OTLP_ENDPOINT or tracing.endpoint; /v1/traces is appended)")
    c.expect((env.get("OTEL_SERVICE_NAME") or {}).get("value"), f"{where}: tracing.exporter is otlp but OTEL_SERVICE_NAME is not set")
    return f"otlp to {endpoint}"


def check_pod(c, where, workload):
    """Selector, volumes, requests and images of the pod; its relay container (None when there is none)."""
    pod = workload["spec"]["template"]
    spec = pod["spec"]
    labels = pod["metadata"].get("labels") or {}
    c.expect(selects(workload["spec"]["selector"]["matchLabels"], labels), f"{where}: selector does not match the pod labels")
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    claim_names = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates") or []}
    relay = next((x for x in spec["containers"] if x["name"] == "relay"), None)
    if not c.expect(relay, f"{where}: no container named relay"):
        return None
    for container in spec.get("initContainers", []) + spec["containers"]:
        for mount in container.get("volumeMounts") or []:
            c.expect(mount["name"] in volumes or mount["name"] in claim_names,
                     f"{where}: {container['name']} mounts {mount['name']}, which is no volume")
        c.expect((container.get("resources") or {}).get("requests"), f"{where}: {container['name']} has no resource requests")
        c.expect(container.get("image", "").split(":")[0].split("/")[-1] == "apns-relay",
                 f"{where}: {container['name']} image {container.get('image')} is not apns-relay")
    return relay


def mounted_config(c, documents, where, env, mounts, volumes):
    """The configuration the relay reads: the ConfigMap mounted at APNS_RELAY_CONFIG's directory (None when it is not)."""
    configmaps = {d["metadata"]["name"]: d for _, d in find(documents, "ConfigMap")}
    config_path = (env.get("APNS_RELAY_CONFIG") or {}).get("value") or "/etc/apns-relay/config.yaml"
    config_volume = volumes.get(mounts.get(os.path.dirname(config_path), ""), {})
    configmap = configmaps.get((config_volume.get("configMap") or {}).get("name"))
    if not c.expect(configmap and os.path.basename(config_path) in configmap["data"],
                    f"{where}: {config_path} is not a key of a ConfigMap mounted at {os.path.dirname(config_path)}"):
        return None
    return yaml.safe_load(configmap["data"][os.path.basename(config_path)])


def check_ports_and_probes(c, where, relay, ingress, metrics):
    ports = {p["name"]: p["containerPort"] for p in relay.get("ports") or []}
    c.expect(sorted(ports.values()) == sorted([ingress, metrics]),
             f"{where}: container ports {ports} != config ports {[ingress, metrics]}")

    def probe_port(probe_name):
        probe = relay.get(probe_name) or {}
        get = probe.get("httpGet") or {}
        port = get.get("port")
        return get.get("path"), ports.get(port, port if isinstance(port, int) else None)

    for probe_name, wanted_path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe_path, port = probe_port(probe_name)
        c.expect(probe_path == wanted_path and port == metrics,
                 f"{where}: {probe_name} is {probe_path} on port {port}, want {wanted_path} on the metrics port {metrics}")
    if relay.get("startupProbe"):
        _, port = probe_port("startupProbe")
        c.expect(port == metrics, f"{where}: startupProbe port {port} is not the metrics port {metrics}")


def check_secrets_and_keys(c, documents, where, config, env, mounts, volumes):
    """The database URL and the keys come from the one Secret, the keys reach key_path."""
    secrets = {d["metadata"]["name"]: d for _, d in find(documents, "Secret")}
    for variable in env.values():
        ref = ((variable.get("valueFrom") or {}).get("secretKeyRef")) or None
        if ref:
            secret = secrets.get(ref["name"])
            c.expect(secret and ref["key"] in (secret.get("stringData") or secret.get("data") or {}),
                     f"{where}: {variable['name']} reads {ref['name']}/{ref['key']}, which secret.example.yaml lacks")
    key_files = {}
    for volume in volumes.values():
        if "secret" in volume:
            secret = secrets.get(volume["secret"]["secretName"])
            keys = (secret or {}).get("stringData") or (secret or {}).get("data") or {}
            for item in volume["secret"].get("items") or []:
                c.expect(item["key"] in keys, f"{where}: volume {volume['name']} takes {item['key']}, which secret.example.yaml lacks")
                key_files[item["path"]] = item["key"]
    for app in config.get("apps") or []:
        key_path = (env.get(f"APNS_RELAY_APP_{env_name_for_app(app['name'])}_KEY_PATH") or {}).get("value") or app.get("key_path", "")
        directory, name = os.path.split(key_path)
        c.expect(directory in mounts and name in key_files,
                 f"{where}: app {app['name']} key_path {key_path} is not a mounted key file (have {sorted(key_files)} via the init container)")


def check_statefulset_variant(c, documents):
    """The StatefulSet variant runs the Deployment's pod but for the spool volume."""
    deployments, statefulsets = find(documents, "Deployment"), find(documents, "StatefulSet")
    if not (deployments and statefulsets):
        return
    pod = copy.deepcopy(deployments[0][1]["spec"]["template"])
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "spool"]
    c.expect(pod == statefulsets[0][1]["spec"]["template"],
             f"{rel(statefulsets[0][0])}: pod template differs from deployment.yaml's (other than the spool volume)")
    c.expect(statefulsets[0][1]["spec"]["selector"] == deployments[0][1]["spec"]["selector"],
             f"{rel(statefulsets[0][0])}: selector differs from the Deployment's")


def check_service_and_monitoring(c, documents):
    """Service, ServiceMonitor, PDB and HPA point at the relay pods and its metrics port; returns the job name."""
    deployments = find(documents, "Deployment")
    pod_labels = deployments[0][1]["spec"]["template"]["metadata"]["labels"] if deployments else {}
    container_ports = {}
    if deployments:
        for container in deployments[0][1]["spec"]["template"]["spec"]["containers"]:
            container_ports.update({p["name"]: p["containerPort"] for p in container.get("ports") or []})
    services = {d["metadata"]["name"]: d for _, d in find(documents, "Service")}
    job = alert_job()
    service = services.get(job)
    if c.expect(service, f"deploy/kubernetes: no Service named {job!r} (the ServiceMonitor's job label, watched by APNsRelayDown)"):
        c.expect(selects(service["spec"]["selector"], pod_labels), f"Service {job}: selector does not match the relay pods")
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            c.expect(target in container_ports or target in container_ports.values(),
                     f"Service {job}: targetPort {target} is no container port ({container_ports})")
    for path, monitor in find(documents, "ServiceMonitor"):
        matched = [s for s in services.values() if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"].get("labels") or {})]
        c.expect([s["metadata"]["name"] for s in matched] == [job],
                 f"{rel(path)}: selects Services {[s['metadata']['name'] for s in matched]}, want exactly [{job}]")
        for endpoint in monitor["spec"]["endpoints"]:
            names = {p.get("name") for s in matched for p in s["spec"]["ports"]}
            c.expect(endpoint.get("port") in names, f"{rel(path)}: endpoint port {endpoint.get('port')} is not a port of the Service")
            service_ports = {p.get("name"): p for s in matched for p in s["spec"]["ports"]}
            target = (service_ports.get(endpoint.get("port")) or {}).get("targetPort")
            c.expect(target == "metrics" or target == container_ports.get("metrics"),
                     f"{rel(path)}: endpoint port {endpoint.get('port')} does not lead to the relay's metrics port")
            c.expect(endpoint.get("path", "/metrics") == "/metrics", f"{rel(path)}: the relay serves /metrics")
    for path, pdb in find(documents, "PodDisruptionBudget"):
        c.expect(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), f"{rel(path)}: selector does not match the relay pods")
    for path, hpa in find(documents, "HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        c.expect(find(documents, target["kind"], target["name"]), f"{rel(path)}: scales {target['kind']}/{target['name']}, which is not defined")
        c.expect(hpa["spec"].get("minReplicas", 1) >= 2, f"{rel(path)}: minReplicas below 2 leaves no relay during a rollout or drain")
    return job


def check_kustomization(c):
    """kustomization.yaml lists every manifest but the Secret example and the component's."""
    kustomization = load_yaml(K8S / "kustomization.yaml")
    listed = set(kustomization.get("resources") or [])
    for name in listed:
        c.expect((K8S / name).exists(), f"deploy/kubernetes/kustomization.yaml: {name} does not exist")
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    c.expect(on_disk <= listed, f"deploy/kubernetes/kustomization.yaml: does not list {sorted(on_disk - listed)}")
    c.expect("secret.example.yaml" not in listed, "deploy/kubernetes/kustomization.yaml: must not apply secret.example.yaml")
    images = {i["name"] for i in kustomization.get("images") or []}
    c.expect("apns-relay" in images, "deploy/kubernetes/kustomization.yaml: no images: entry for apns-relay")
    component = load_yaml(K8S / "persistent-spool" / "kustomization.yaml")
    for name in component.get("resources") or []:
        c.expect((K8S / "persistent-spool" / name).exists(), f"deploy/kubernetes/persistent-spool: {name} does not exist")


def check_kubernetes_schema():
    try:
        import kubernetes_validate
    except ImportError:
        raise Skipped("Python package kubernetes-validate not installed")
    c = Collector()
    versions = ["1.29.0", "1.37.0"]
    count = 0
    for path, doc in k8s_documents():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # CRDs: no schema in the package; check_kubernetes covers them
        for version in versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                c.expect(False, f"{rel(path)} {doc['kind']}/{doc['metadata'].get('name')} (Kubernetes {version}): "
                         f"{error.message} at {'/'.join(map(str, error.path))}")
            except Exception as error:  # SchemaNotFoundError and friends
                c.expect(False, f"{rel(path)} {doc['kind']} (Kubernetes {version}): {type(error).__name__} {error}")
        count += 1
    return c.done(f"{count} resources valid (strict) against Kubernetes {' and '.join(v.rsplit('.', 1)[0] for v in versions)}")
