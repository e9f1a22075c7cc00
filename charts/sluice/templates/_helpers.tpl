{{/* The prefix of every object's name: the release's name, with "sluice" added unless it has it. */}}
{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace the manager compiles and the gateways run in. */}}
{{- define "sluice.watchNamespace" -}}
{{- .Values.manager.watchNamespace | default .Release.Namespace -}}
{{- end -}}

{{/* The configuration Secret the manager writes. Its name is fixed: the generated Role may
update that name only. */}}
{{- define "sluice.configSecret" -}}sluice-gateway-config{{- end -}}

{{/* How many tenant Secrets the manager writes beside the configuration Secret: its TenantShards. */}}
{{- define "sluice.tenantShards" -}}8{{- end -}}

{{/* How many ConfigMaps of the durable record the manager writes beside the configuration Secret,
named after it: its RecordShards. */}}
{{- define "sluice.recordShards" -}}8{{- end -}}

{{/* Labels of every object; "sluice.labels" takes a list of the root context and a component. */}}
{{- define "sluice.labels" -}}
{{- $root := index . 0 -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: sluice-{{ index . 1 }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
{{- end -}}

{{/* The gateway Pods' label selector, as the manager and the adapter take it. */}}
{{- define "sluice.gatewaySelector" -}}
app.kubernetes.io/name=sluice-gateway,app.kubernetes.io/instance={{ .Release.Name }}
{{- end -}}

{{/* A container's image. */}}
{{- define "sluice.image" -}}
image: {{ printf "%s:%s" .repository .tag | quote }}
imagePullPolicy: {{ .pullPolicy }}
{{- end -}}

{{/* The hardening every container carries. */}}
{{- define "sluice.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* A component's Pod labels and annotations: the chart's, and under them, never replacing one, the
component's podLabels and podAnnotations. "sluice.podMetadata" takes a list of the root context,
the component, its values and the chart's annotations (a dict). */}}
{{- define "sluice.podMetadata" -}}
{{- $values := index . 2 -}}
{{- $labels := include "sluice.labels" (list (index . 0) (index . 1)) | fromYaml -}}
labels:
  {{- merge $labels ($values.podLabels | default (dict)) | toYaml | nindent 2 }}
annotations:
  {{- merge (index . 3) ($values.podAnnotations | default (dict)) | toYaml | nindent 2 }}
{{- end -}}

{{/* Where a component's Pods run, from its values: each field only when set. A topology spread
constraint without a labelSelector spreads the component's own Pods. "sluice.podScheduling" takes
a list of the root context, the component and its values, and is empty when none is set. */}}
{{- define "sluice.podScheduling" -}}
{{- $values := index . 2 -}}
{{- $spec := dict -}}
{{- range $key := list "priorityClassName" "imagePullSecrets" "nodeSelector" "affinity" "tolerations" -}}
{{- with get $values $key }}{{ $_ := set $spec $key . }}{{ end -}}
{{- end -}}
{{- with $values.topologySpreadConstraints -}}
{{- $selector := dict "matchLabels" (include "sluice.selectorLabels" (list (index $ 0) (index $ 1)) | fromYaml) -}}
{{- $spread := list -}}
{{- range . -}}
{{- $constraint := deepCopy . -}}
{{- if not (hasKey $constraint "labelSelector") }}{{ $_ := set $constraint "labelSelector" $selector }}{{ end -}}
{{- $spread = append $spread $constraint -}}
{{- end -}}
{{- $_ := set $spec "topologySpreadConstraints" $spread -}}
{{- end -}}
{{- with $spec }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- define "sluice.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{/* The rules of one kind (ClusterRole or Role) in files/manager-role.yaml, which make
chart-manifests copies from the generated config/rbac/role.yaml. */}}
{{- define "sluice.managerRules" -}}
{{- $kind := index . 1 -}}
{{- range splitList "\n---\n" ((index . 0).Files.Get "files/manager-role.yaml") -}}
{{- $doc := fromYaml . -}}
{{- if eq (toString $doc.kind) $kind }}
{{- toYaml $doc.rules }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The manager's base configuration: the store, from the redis values. */}}
{{- define "sluice.baseConfig" -}}
apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
{{- with .Values.gateway.server }}
server: {{ toJson . }}
{{- end }}
{{- with .Values.gateway.jobs }}
jobs: {{ toJson . }}
{{- end }}
store:
{{- if .Values.redis.enabled }}
  type: redis
  redis:
    {{- if .Values.redis.sentinel.masterName }}
    sentinel: {{ dict "masterName" .Values.redis.sentinel.masterName "addresses" .Values.redis.sentinel.addresses | toJson }}
    {{- else if .Values.redis.cluster.addresses }}
    cluster: {{ dict "addresses" .Values.redis.cluster.addresses | toJson }}
    {{- else }}
    address: {{ .Values.redis.address | quote }}
    {{- end }}
    db: {{ int64 .Values.redis.db }}
    failMode: {{ .Values.redis.failMode }}
    replicas: {{ include "sluice.gatewayReplicas" . }}
    {{- with .Values.redis.username }}
    username: {{ . | quote }}
    {{- end }}
    {{- if .Values.redis.passwordSecret }}
    passwordFile: {{ include "sluice.redisPasswordFile" . }}
    {{- end }}
    {{- if .Values.redis.tls.enabled }}
    {{- $tls := dict }}
    {{- if .Values.redis.tls.caSecret }}{{ $_ := set $tls "caFile" (include "sluice.redisCAFile" .) }}{{ end }}
    {{- with .Values.redis.tls.serverName }}{{ $_ := set $tls "serverName" . }}{{ end }}
    tls: {{ toJson $tls }}
    {{- end }}
{{- else }}
  type: memory
{{- end }}
{{- end -}}

{{/* The gateways' replicas: one without Redis, since each would keep limits of its own. */}}
{{- define "sluice.gatewayReplicas" -}}
{{- if .Values.redis.enabled }}{{ int64 .Values.gateway.replicas }}{{ else }}1{{ end -}}
{{- end -}}

{{/* Where the gateways find the Redis password, mounted from redis.passwordSecret. */}}
{{- define "sluice.redisPasswordFile" -}}
/etc/sluice-redis/password
{{- end -}}

{{/* Where the gateways find the authorities of Redis's certificate, mounted from redis.tls.caSecret. */}}
{{- define "sluice.redisCAFile" -}}
/etc/sluice-redis-ca/ca.crt
{{- end -}}

{{/* The Secret of the release's serving certificate: tls.secret, or sluice-serving-cert, which the
manager or cert-manager fills. */}}
{{- define "sluice.servingCertSecret" -}}
{{- .Values.tls.secret | default "sluice-serving-cert" -}}
{{- end -}}

{{/* Whether the manager issues the serving certificate itself: neither cert-manager nor a Secret of
yours does. */}}
{{- define "sluice.issuesServingCert" -}}
{{- if not (or .Values.tls.certManager .Values.tls.secret) }}true{{ end -}}
{{- end -}}

{{/* Where the serving certificate's Secret is mounted, in the manager and in the adapter. */}}
{{- define "sluice.servingCertDir" -}}
/var/run/sluice-serving-cert
{{- end -}}

{{/* The names the serving certificate is for, one a line: the adapter's Service and the manager's
metrics Service. */}}
{{- define "sluice.servingCertDNSNames" -}}
{{- $fullname := include "sluice.fullname" . -}}
{{- range $service := list "metrics-adapter" "manager-metrics" }}
{{- range $suffix := list "svc" "svc.cluster.local" }}
{{ printf "%s-%s.%s.%s" $fullname $service $.Release.Namespace $suffix }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The APIServices the adapter serves, as JSON. */}}
{{- define "sluice.apiServices" -}}
{{- $apiServices := list }}
{{- if .Values.metricsAdapter.enabled }}
{{- if .Values.metricsAdapter.apiServices.custom }}
{{- $apiServices = concat $apiServices (list "v1beta1.custom.metrics.k8s.io" "v1beta2.custom.metrics.k8s.io") }}
{{- end }}
{{- if .Values.metricsAdapter.apiServices.external }}
{{- $apiServices = append $apiServices "v1beta1.external.metrics.k8s.io" }}
{{- end }}
{{- end }}
{{- toJson $apiServices }}
{{- end -}}

{{/* The serving certificate's Secret as the volume serving-cert, tls.crt and tls.key only; optional
for the manager (list . true), which fills it itself after it starts. */}}
{{- define "sluice.servingCertVolume" -}}
{{- $ := index . 0 -}}
- name: serving-cert
  secret:
    secretName: {{ include "sluice.servingCertSecret" $ }}
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
    {{- if index . 1 }}
    optional: true
    {{- end }}
{{- end -}}

{{/* How Prometheus verifies the serving certificate of the Service (list . "<component>"): the CA
in its Secret, for the Service's name. */}}
{{- define "sluice.scrapeTLS" -}}
{{- $ := index . 0 -}}
ca:
  secret:
    name: {{ include "sluice.servingCertSecret" $ }}
    key: ca.crt
serverName: {{ printf "%s-%s.%s.svc" (include "sluice.fullname" $) (index . 1) $.Release.Namespace }}
{{- end -}}

{{/* The Secret of the gateways' admin token: gateway.adminToken.existingSecret, or the chart's. */}}
{{- define "sluice.adminTokenSecret" -}}
{{- .Values.gateway.adminToken.existingSecret | default (printf "%s-gateway-admin-token" (include "sluice.fullname" .)) -}}
{{- end -}}

{{/* Where the gateways, the manager and the adapter find the admin token, mounted from its Secret. */}}
{{- define "sluice.adminTokenFile" -}}
/etc/sluice-admin-token/token
{{- end -}}

{{/* The admin token's volume, for a Pod's volumes, when gateway.adminToken.enabled. */}}
{{- define "sluice.adminTokenVolume" -}}
{{- if .Values.gateway.adminToken.enabled -}}
- name: admin-token
  secret:
    secretName: {{ include "sluice.adminTokenSecret" . | quote }}
    items:
      - key: token
        path: {{ include "sluice.adminTokenFile" . | base }}
{{- end -}}
{{- end -}}

{{/* The admin token's mount, for a container's volumeMounts, when gateway.adminToken.enabled. */}}
{{- define "sluice.adminTokenMount" -}}
{{- if .Values.gateway.adminToken.enabled -}}
- name: admin-token
  mountPath: {{ include "sluice.adminTokenFile" . | dir }}
  readOnly: true
{{- end -}}
{{- end -}}
