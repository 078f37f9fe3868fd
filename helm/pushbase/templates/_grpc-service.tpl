{{/*
The Deployment and Service of a stateless gRPC service (schema.yaml, records.yaml): ({root, component,
svc, portVariable, env}), env being the service's own variables as a list of {name, value}. Listens on
0.0.0.0 so the gateways (and the kubelet's gRPC probes) reach it; on SIGTERM its health turns NOT_SERVING
for PUSHBASE_GRPC_DRAIN_MS, so readiness fails and the endpoint leaves the Service, then the calls in
flight finish within PUSHBASE_SHUTDOWN_TIMEOUT_MS; the grace period covers both.
*/}}
{{- define "pushbase.grpcService" -}}
{{- $root := .root -}}
{{- $svc := .svc -}}
{{- $ctx := dict "root" $root "component" .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "pushbase.componentName" $ctx }}
  labels:
    {{- include "pushbase.componentLabels" $ctx | nindent 4 }}
spec:
  {{- if not $svc.autoscaling.enabled }}
  replicas: {{ $svc.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "pushbase.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "pushbase.componentLabels" $ctx | nindent 8 }}
      {{- /* A changed gRPC token in the chart's Secret rolls these pods with the gateways (all read it at start). */}}
      {{- $checksum := dict "checksum/auth" (include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum) }}
      {{- $annotations := merge (dict) ($svc.podAnnotations | default dict) (include "pushbase.metricsAnnotations" (dict "root" $root "port" $root.Values.metrics.port) | fromYaml | default dict) $checksum }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "pushbase.podCommon" $root | nindent 6 }}
      terminationGracePeriodSeconds: {{ include "pushbase.grpcGracePeriod" $svc }}
      containers:
        - name: {{ .component }}
          image: {{ include "pushbase.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: [{{ .component | quote }}]
          ports:
            - name: grpc
              containerPort: {{ $svc.grpcPort }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
          env:
            - name: PUSHBASE_GRPC_HOST
              value: "0.0.0.0"
            - name: {{ .portVariable }}
              value: {{ $svc.grpcPort | quote }}
            - name: PUSHBASE_GRPC_DRAIN_MS
              value: {{ $svc.drainMs | quote }}
            - name: PUSHBASE_SHUTDOWN_TIMEOUT_MS
              value: {{ $svc.shutdownTimeoutMs | quote }}
            {{- include "pushbase.grpcTokenEnv" $root | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- include "pushbase.metricsEnv" $root | nindent 12 }}
            {{- include "pushbase.kafkaEnv" $root | nindent 12 }}
            {{- include "pushbase.redisEnv" $root | nindent 12 }}
            {{- /* A keyed write of unknown outcome is settled once the projector's group has read its partition. */}}
            - name: PUSHBASE_PROJECTOR_GROUP
              value: {{ $root.Values.projector.group | quote }}
            {{- with $svc.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "pushbase.grpcProbes" (dict "port" $svc.grpcPort) | nindent 10 }}
          resources:
            {{- toYaml $svc.resources | nindent 12 }}
          securityContext:
            {{- include "pushbase.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            {{- include "pushbase.tmpVolumeMount" $root | nindent 12 }}
      volumes:
        {{- include "pushbase.tmpVolume" $root | nindent 8 }}
      {{- include "pushbase.scheduling" (dict "svc" $svc) | nindent 6 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pushbase.componentName" $ctx }}
  labels:
    {{- include "pushbase.componentLabels" $ctx | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "pushbase.selectorLabels" $ctx | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $svc.grpcPort }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
{{- end }}
