"""The fields each object of deploy/ may hold, for checking rendered manifests without an API
server. Field names are taken from the published API references (Kubernetes' API reference for
the core kinds; KServe's for InferenceService and ServingRuntime, serving.kserve.io v1beta1 and
v1alpha1), written out here for the parts deploy/ uses: a field outside these lists is a typo or
a field the API does not have, which a cluster would drop or refuse.

A schema is a dict of field → schema, ANY for a value not looked into (a map of names, a
quantity, a free-form object), or [schema] for a list of such objects.
"""

ANY = None

METADATA = {"name": ANY, "namespace": ANY, "labels": ANY, "annotations": ANY,
            "generateName": ANY}
SELECTOR = {"matchLabels": ANY, "matchExpressions": ANY}
HTTP_GET = {"path": ANY, "port": ANY, "host": ANY, "scheme": ANY, "httpHeaders": ANY}
PROBE = {"httpGet": HTTP_GET, "exec": {"command": ANY}, "tcpSocket": {"port": ANY, "host": ANY},
         "grpc": {"port": ANY, "service": ANY}, "initialDelaySeconds": ANY,
         "periodSeconds": ANY, "timeoutSeconds": ANY, "successThreshold": ANY,
         "failureThreshold": ANY, "terminationGracePeriodSeconds": ANY}
ENV_VAR = {"name": ANY, "value": ANY,
           "valueFrom": {"secretKeyRef": {"name": ANY, "key": ANY, "optional": ANY},
                         "configMapKeyRef": {"name": ANY, "key": ANY, "optional": ANY},
                         "fieldRef": {"fieldPath": ANY, "apiVersion": ANY},
                         "resourceFieldRef": {"resource": ANY, "containerName": ANY,
                                              "divisor": ANY}}}
SECURITY_CONTEXT = {"allowPrivilegeEscalation": ANY, "readOnlyRootFilesystem": ANY,
                    "capabilities": {"add": ANY, "drop": ANY}, "privileged": ANY,
                    "runAsNonRoot": ANY, "runAsUser": ANY, "runAsGroup": ANY,
                    "seccompProfile": {"type": ANY, "localhostProfile": ANY}}
CONTAINER = {
    "name": ANY, "image": ANY, "imagePullPolicy": ANY, "command": ANY, "args": ANY,
    "workingDir": ANY, "env": [ENV_VAR], "envFrom": ANY,
    "ports": [{"name": ANY, "containerPort": ANY, "protocol": ANY, "hostPort": ANY,
               "hostIP": ANY}],
    "resources": {"requests": ANY, "limits": ANY, "claims": ANY},
    "volumeMounts": [{"name": ANY, "mountPath": ANY, "readOnly": ANY, "subPath": ANY,
                      "mountPropagation": ANY, "subPathExpr": ANY}],
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "lifecycle": {"preStop": {"exec": {"command": ANY}, "httpGet": HTTP_GET, "sleep": ANY},
                  "postStart": {"exec": {"command": ANY}, "httpGet": HTTP_GET}},
    "securityContext": SECURITY_CONTEXT, "terminationMessagePath": ANY,
    "terminationMessagePolicy": ANY, "stdin": ANY, "tty": ANY,
}
VOLUME = {"name": ANY,
          "configMap": {"name": ANY, "items": ANY, "defaultMode": ANY, "optional": ANY},
          "secret": {"secretName": ANY, "items": ANY, "defaultMode": ANY, "optional": ANY},
          "emptyDir": {"medium": ANY, "sizeLimit": ANY},
          "hostPath": {"path": ANY, "type": ANY},
          "persistentVolumeClaim": {"claimName": ANY, "readOnly": ANY}}
POD_SPEC = {
    "containers": [CONTAINER], "initContainers": [CONTAINER], "volumes": [VOLUME],
    "terminationGracePeriodSeconds": ANY, "serviceAccountName": ANY, "nodeSelector": ANY,
    "tolerations": [{"key": ANY, "operator": ANY, "value": ANY, "effect": ANY,
                     "tolerationSeconds": ANY}],
    "affinity": ANY, "runtimeClassName": ANY, "priorityClassName": ANY,
    "imagePullSecrets": ANY, "restartPolicy": ANY,
    "securityContext": {"runAsNonRoot": ANY, "runAsUser": ANY, "runAsGroup": ANY,
                        "fsGroup": ANY, "supplementalGroups": ANY,
                        "seccompProfile": {"type": ANY, "localhostProfile": ANY},
                        "fsGroupChangePolicy": ANY},
    "topologySpreadConstraints": ANY, "automountServiceAccountToken": ANY,
}
POD_TEMPLATE = {"metadata": METADATA, "spec": POD_SPEC}

KUBERNETES = {
    "Deployment": {"spec": {
        "replicas": ANY, "selector": SELECTOR, "template": POD_TEMPLATE,
        "strategy": {"type": ANY, "rollingUpdate": {"maxUnavailable": ANY, "maxSurge": ANY}},
        "minReadySeconds": ANY, "revisionHistoryLimit": ANY, "progressDeadlineSeconds": ANY}},
    "Service": {"spec": {
        "type": ANY, "selector": ANY, "clusterIP": ANY,
        "ports": [{"name": ANY, "port": ANY, "targetPort": ANY, "protocol": ANY,
                   "appProtocol": ANY, "nodePort": ANY}]}},
    "ConfigMap": {"data": ANY, "binaryData": ANY, "immutable": ANY},
    "PodDisruptionBudget": {"spec": {"selector": SELECTOR, "minAvailable": ANY,
                                     "maxUnavailable": ANY}},
    "HorizontalPodAutoscaler": {"spec": {
        "scaleTargetRef": {"apiVersion": ANY, "kind": ANY, "name": ANY},
        "minReplicas": ANY, "maxReplicas": ANY, "metrics": ANY,
        "behavior": {"scaleUp": ANY, "scaleDown": ANY}}},
    "ServiceMonitor": {"spec": {"selector": SELECTOR, "endpoints": ANY,
                                "namespaceSelector": ANY, "jobLabel": ANY}},
}

# KServe: ModelSpec is a Container plus these fields; PredictorSpec a PodSpec plus the
# component extension's.
KSERVE_MODEL = dict(CONTAINER, modelFormat={"name": ANY, "version": ANY}, runtime=ANY,
                    protocolVersion=ANY, storageUri=ANY,
                    storage={"key": ANY, "path": ANY, "schemaPath": ANY, "parameters": ANY})
KSERVE_PREDICTOR = dict(POD_SPEC, model=KSERVE_MODEL, minReplicas=ANY, maxReplicas=ANY,
                        scaleTarget=ANY, scaleMetric=ANY, containerConcurrency=ANY,
                        timeout=ANY, canaryTrafficPercent=ANY, logger=ANY, batcher=ANY,
                        labels=ANY, annotations=ANY, deploymentStrategy=ANY)
KSERVE = {
    "InferenceService": {"spec": {"predictor": KSERVE_PREDICTOR, "transformer": ANY,
                                  "explainer": ANY}},
    "ServingRuntime": {"spec": dict(
        {k: v for k, v in POD_SPEC.items() if k != "initContainers"},
        supportedModelFormats=[{"name": ANY, "version": ANY, "autoSelect": ANY,
                                "priority": ANY}],
        protocolVersions=ANY, multiModel=ANY, disabled=ANY, annotations=ANY, labels=ANY,
        grpcEndpoint=ANY, grpcDataEndpoint=ANY, httpDataEndpoint=ANY, replicas=ANY,
        storageHelper={"disabled": ANY}, builtInAdapter=ANY, hostIPC=ANY, workerSpec=ANY)},
}

TOP = {"apiVersion": ANY, "kind": ANY, "metadata": METADATA}


def unknown_fields(obj):
    """The paths of the fields of `obj` (one rendered object) that its kind does not have."""
    kind = obj.get("kind")
    schema = KUBERNETES.get(kind) or KSERVE.get(kind)
    if schema is None:
        return [f"{kind}: a kind the schemas do not know"]
    out = []
    # An explicit stack: the depth of a manifest is not ours to trust.
    stack = [(obj, dict(TOP, **schema), kind)]
    while stack:
        value, schema, path = stack.pop()
        if schema is ANY:
            continue
        if isinstance(schema, list):
            if not isinstance(value, list):
                out.append(f"{path}: expected a list")
                continue
            stack.extend((item, schema[0], f"{path}[{i}]") for i, item in enumerate(value))
            continue
        if not isinstance(value, dict):
            out.append(f"{path}: expected an object")
            continue
        for key, item in value.items():
            if key not in schema:
                out.append(f"{path}.{key}")
            else:
                stack.append((item, schema[key], f"{path}.{key}"))
    return out
