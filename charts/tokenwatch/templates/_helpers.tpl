{{/* Name of the chart (app.kubernetes.io/name). */}}
{{- define "tokenwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of every object: fullnameOverride, else the release name when it contains the chart name, else <release>-<name>. */}}
{{- define "tokenwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "tokenwatch.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "tokenwatch.labels" -}}
app.kubernetes.io/name: {{ include "tokenwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Metadata labels + annotations block of an object; pass (dict "ctx" $ "component" "server") or (dict "ctx" $). */}}
{{- define "tokenwatch.metadata" -}}
labels:
  {{- include "tokenwatch.labels" .ctx | nindent 2 }}
  {{- with .component }}
  app.kubernetes.io/component: {{ . }}
  {{- end }}
{{- with .ctx.Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Pod selector of the server pods (the same as the kustomize install's, whose release is "tokenwatch"): name, component
and instance, so two releases in one namespace never select each other's pods. Deployment selectors are immutable:
changing these labels needs the Deployment deleted and recreated (docs/install.md "Upgrading").
*/}}
{{- define "tokenwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tokenwatch.name" . }}
app.kubernetes.io/component: server
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the `helm test` pod, the one peer the NetworkPolicy admits besides metricsFrom/slackFrom/webhook.from. */}}
{{- define "tokenwatch.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tokenwatch.name" . }}
app.kubernetes.io/component: test
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Pod selector of the node probe pods: name, component probe and instance. */}}
{{- define "tokenwatch.probeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tokenwatch.name" . }}
app.kubernetes.io/component: probe
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The container image: repository@digest, else repository:tag (tag default: appVersion). */}}
{{- define "tokenwatch.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount's user name, as the API server sees it. */}}
{{- define "tokenwatch.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "tokenwatch.fullname" . }}
{{- end -}}

{{/* The config file: .Values.config, with kubernetes.secretMetadata set on every cluster with API access when rbac.secretMetadata. */}}
{{- /*
The buttons follow the writer RBAC, for every cluster reached in-cluster (the pod's ServiceAccount is what the RBAC
binds; other clusters have their own): with writes bound per namespace and no `slack.namespaces.allow` of its own, a
cluster's actions are allowed in exactly `rbac.writer.namespaces`; an allow list naming a namespace without a
RoleBinding there fails the render, naming both; with no writes (`rbac.writer.enabled: false`, or no namespaces)
only the actions that write nothing (snooze) are offered.
*/ -}}
{{- define "tokenwatch.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $writer := .Values.rbac.writer -}}
{{- $writes := and $writer.enabled (or $writer.clusterWide (gt (len (default list $writer.namespaces)) 0)) -}}
{{- range $i, $c := $config.clusters -}}
{{- if and $c.slack $c.kubernetes $c.kubernetes.inCluster -}}
{{- if not $writes -}}
{{- $_ := set $c.slack "actions" (without (default (list "restart" "recreate-serviceaccount" "snooze") $c.slack.actions) "restart" "recreate-serviceaccount") -}}
{{- else if not $writer.clusterWide -}}
{{- $ns := default dict $c.slack.namespaces -}}
{{- if $ns.allow -}}
{{- range $ns.allow -}}
{{- if not (has . $writer.namespaces) -}}
{{- fail (printf "config.clusters[%d].slack.namespaces.allow offers actions in %q, but rbac.writer.namespaces %v has no RoleBinding there: a restart would fail its dry run with \"forbidden\". Add it to rbac.writer.namespaces, remove it from the allow list, or set rbac.writer.clusterWide" $i . $writer.namespaces) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $_ := set $ns "allow" $writer.namespaces -}}
{{- $_ := set $c.slack "namespaces" $ns -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.rbac.secretMetadata -}}
{{- range $config.clusters -}}
{{- if and .kubernetes (not .kubernetes.none) -}}
{{- $_ := set .kubernetes "secretMetadata" true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The Slack HTTP port in HTTP mode, else empty. */}}
{{- define "tokenwatch.slackHttpPort" -}}
{{- $slack := default dict .Values.config.slack -}}
{{- if and $slack.enabled (eq (default "socket" $slack.mode) "http") -}}
{{- default 3000 $slack.port -}}
{{- end -}}
{{- end -}}

{{/* The port of /healthz, /readyz and /metrics (config http.port, default 8080). */}}
{{- define "tokenwatch.httpPort" -}}
{{- (default dict .Values.config.http).port | default 8080 -}}
{{- end -}}

{{/* A list as a ConfigMap value, one item per line (the admission policy's CEL reads lines): a YAML string. */}}
{{- define "tokenwatch.lines" -}}
{{- if . -}}
{{- printf "%s\n" (join "\n" .) | toJson -}}
{{- else -}}
""
{{- end -}}
{{- end -}}

{{/* "true" when the config uses the PostgreSQL store (config.store.postgres), else empty. */}}
{{- define "tokenwatch.postgres" -}}
{{- if and (kindIs "map" .Values.config.store) .Values.config.store.postgres -}}true{{- end -}}
{{- end -}}

{{/* Replicas: the `replicas` value with the PostgreSQL store; one with the embedded SQLite store (a file on one volume). */}}
{{- define "tokenwatch.replicas" -}}
{{- if include "tokenwatch.postgres" . -}}{{ int .Values.replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{/* TCP port of the PostgreSQL server (config.store.postgres port, or the url's, default 5432), for the NetworkPolicy. */}}
{{- define "tokenwatch.postgresPort" -}}
{{- $pg := .Values.config.store.postgres -}}
{{- if $pg.port -}}{{ int $pg.port }}
{{- else if and $pg.url (regexMatch ":[0-9]+$" (urlParse $pg.url).host) -}}{{ regexFind "[0-9]+$" (urlParse $pg.url).host }}
{{- else -}}5432{{- end -}}
{{- end -}}
