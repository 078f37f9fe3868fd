{{/*
Names, labels and the pieces every service's pod shares. One template per service (gateway.yaml,
schema.yaml, records.yaml, projector.yaml) builds its Deployment from these.
*/}}

{{- define "pushbase.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pushbase.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The name of one service's objects: <fullname>-<component>. */}}
{{- define "pushbase.componentName" -}}
{{- printf "%s-%s" (include "pushbase.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pushbase.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "pushbase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pushbase
{{- end }}

{{/* Selector labels of one service ({root, component}). */}}
{{- define "pushbase.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pushbase.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "pushbase.componentLabels" -}}
{{ include "pushbase.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "pushbase.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pushbase.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the admin token, the gRPC token and the bootstrap API keys. */}}
{{- define "pushbase.secretName" -}}
{{- default (printf "%s-auth" (include "pushbase.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{/*
PUSHBASE_GRPC_TOKEN, the same for the gateway (it sends it) and the gRPC services (they refuse calls
without it; listening on 0.0.0.0, they refuse to start without it).
*/}}
{{- define "pushbase.grpcTokenEnv" -}}
- name: PUSHBASE_GRPC_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "pushbase.secretName" . }}
      key: {{ .Values.auth.grpcTokenKey }}
{{- end }}

{{- define "pushbase.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
Seconds to wait past a service's own shutdown before Kubernetes kills it: the drain (health NOT_SERVING),
then the calls in flight (PUSHBASE_SHUTDOWN_TIMEOUT_MS), plus a margin for closing Kafka and Redis.
*/}}
{{- define "pushbase.grpcGracePeriod" -}}
{{- add (div (add .drainMs .shutdownTimeoutMs 999) 1000) 10 }}
{{- end }}

{{/* The pod-level security context: non-root, the image's user unless told otherwise. */}}
{{- define "pushbase.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.podSecurity.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.podSecurity.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
{{- with .Values.podSecurity.fsGroup }}
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Every container's security context; fixed, not a value, so no values file can weaken it. */}}
{{- define "pushbase.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* Pod settings every service shares. */}}
{{- define "pushbase.podCommon" -}}
serviceAccountName: {{ include "pushbase.serviceAccountName" . }}
# pushbase calls no Kubernetes API.
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "pushbase.podSecurityContext" . | nindent 2 }}
{{- end }}

{{/* Scheduling settings of one service's values ({svc}). */}}
{{- define "pushbase.scheduling" -}}
{{- with .svc.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A URL from a value or, when its Secret is named, from that Secret. */}}
{{- define "pushbase.urlEnv" -}}
- name: {{ .name }}
{{- if .secret.name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret.name }}
      key: {{ .secret.key }}
{{- else }}
  value: {{ .url | quote }}
{{- end }}
{{- end }}

{{- define "pushbase.kafkaEnv" -}}
- name: PUSHBASE_KAFKA_BROKERS
  value: {{ .Values.kafka.brokers | quote }}
- name: PUSHBASE_KAFKA_TOPIC
  value: {{ .Values.kafka.topic | quote }}
{{- end }}

{{- define "pushbase.clickhouseEnv" -}}
{{ include "pushbase.urlEnv" (dict "name" "PUSHBASE_CLICKHOUSE_URL" "url" .Values.clickhouse.url "secret" .Values.clickhouse.urlSecret) }}
- name: PUSHBASE_CLICKHOUSE_DATABASE
  value: {{ .Values.clickhouse.database | quote }}
{{- end }}

{{- define "pushbase.redisEnv" -}}
{{ include "pushbase.urlEnv" (dict "name" "PUSHBASE_REDIS_URL" "url" .Values.redis.url "secret" .Values.redis.urlSecret) }}
- name: PUSHBASE_REDIS_PREFIX
  value: {{ .Values.redis.prefix | quote }}
{{- end }}

{{/* The writable places of a read-only root filesystem: /tmp for every service. */}}
{{- define "pushbase.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{- define "pushbase.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/* The stateless gRPC services' probes: the standard grpc.health.v1 service they serve, checked natively. */}}
{{- define "pushbase.grpcProbes" -}}
startupProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 2
  failureThreshold: 60
# Seen well within the drain: NOT_SERVING takes the pod out of the Service before the listener closes.
readinessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 2
  failureThreshold: 1
livenessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end }}

{{/*
Prometheus's annotation-based discovery of a pod's /metrics (metrics.podAnnotations): ({root, port}).
*/}}
{{- define "pushbase.metricsAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{/*
The metrics listener of a pod without an HTTP listener of its own (schema, records, projector): its
variables. 0.0.0.0, so Prometheus reaches the pod's address; the NetworkPolicy decides who may.
*/}}
{{- define "pushbase.metricsEnv" -}}
- name: PUSHBASE_METRICS_HOST
  value: "0.0.0.0"
- name: PUSHBASE_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
{{- end }}
