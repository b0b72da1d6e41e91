{{/* Chart name, at most 63 characters (a DNS label). */}}
{{- define "profleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every resource name: "<release>-<chart>", or the release name when it already
contains the chart name, or fullnameOverride. */}}
{{- define "profleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* helm.sh/chart label value. */}}
{{- define "profleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels of every object; call with (dict "ctx" $ "component" "controller"). */}}
{{- define "profleet.labels" -}}
helm.sh/chart: {{ include "profleet.chart" .ctx }}
{{ include "profleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: profleet
{{- end -}}

{{/* Labels that select a component's pods; same argument as profleet.labels. */}}
{{- define "profleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "profleet.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image reference: repository:tag, the tag defaulting to appVersion; call with
(dict "ctx" $ "image" .Values.controller.image). */}}
{{- define "profleet.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{- define "profleet.controllerName" -}}
{{- printf "%s-controller" (include "profleet.fullname" .) -}}
{{- end -}}

{{- define "profleet.agentName" -}}
{{- printf "%s-agent" (include "profleet.fullname" .) -}}
{{- end -}}

{{- define "profleet.serviceAccountName" -}}
{{- default (include "profleet.agentName" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Secret with the admin-token and agent-token keys. */}}
{{- define "profleet.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "profleet.fullname" .)) .Values.tokens.existingSecret -}}
{{- end -}}

{{/* Secret with the controller's tls.crt, tls.key and ca.crt. */}}
{{- define "profleet.tlsSecret" -}}
{{- default (printf "%s-controller-tls" (include "profleet.fullname" .)) .Values.controller.tls.secretName -}}
{{- end -}}

{{- define "profleet.scheme" -}}
{{- if .Values.controller.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* The controller's URL inside the cluster (http or https; agents turn it into ws/wss). */}}
{{- define "profleet.controllerURL" -}}
{{- if .Values.agent.controllerURL -}}
{{- .Values.agent.controllerURL -}}
{{- else -}}
{{- printf "%s://%s.%s.svc:%d" (include "profleet.scheme" .) (include "profleet.controllerName" .) .Release.Namespace (int .Values.controller.service.port) -}}
{{- end -}}
{{- end -}}

{{/* Refuses value combinations the controller cannot run. */}}
{{- define "profleet.validate" -}}
{{- if and (gt (int .Values.controller.replicas) 1) (ne .Values.store.type "postgres") -}}
{{- fail "controller.replicas > 1 needs store.type postgres (replicas share the fleet tables in PostgreSQL; the embedded sqlite store is one file per pod); use 1 or set store.type postgres" -}}
{{- end -}}
{{- if and (eq .Values.store.type "postgres") (not .Values.store.postgres.host) (not .Values.store.postgres.urlSecret.name) -}}
{{- fail "store.type postgres needs store.postgres.host or store.postgres.urlSecret.name" -}}
{{- end -}}
{{- if and .Values.controller.tls.enabled (not .Values.controller.tls.secretName) (not .Values.controller.tls.certManager.enabled) -}}
{{- fail "controller.tls.enabled needs controller.tls.secretName or controller.tls.certManager.enabled" -}}
{{- end -}}
{{- if and .Values.controller.tls.certManager.enabled (not (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
{{- fail "controller.tls.certManager.enabled: cert-manager (cert-manager.io/v1) is not installed in this cluster" -}}
{{- end -}}
{{- if and .Values.controller.tls.certManager.enabled (not .Values.controller.tls.certManager.issuerRef.name) -}}
{{- fail "controller.tls.certManager.issuerRef.name is required with certManager.enabled" -}}
{{- end -}}
{{- if and (not .Values.controller.enabled) .Values.agent.enabled (not .Values.agent.controllerURL) -}}
{{- fail "agent.controllerURL is required when controller.enabled is false" -}}
{{- end -}}
{{- end -}}

{{/* The controller's --store flag for store.type postgres: from the URL Secret (expanded by
Kubernetes from the PROFLEET_STORE_URL variable), else built from host, port, database, user
and sslMode; the password travels in PGPASSWORD, which libpq reads. */}}
{{- define "profleet.storeArg" -}}
{{- $pg := .Values.store.postgres -}}
{{- if $pg.urlSecret.name -}}
--store=$(PROFLEET_STORE_URL)
{{- else -}}
{{- printf "--store=postgres://%s@%s:%d/%s?sslmode=%s" $pg.user $pg.host (int $pg.port) $pg.database $pg.sslMode -}}
{{- end -}}
{{- end -}}
