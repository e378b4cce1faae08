{{/* The chart name, or nameOverride. */}}
{{- define "cxlab.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: the release name, with the chart name unless the release holds it. */}}
{{- define "cxlab.fullname" -}}
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

{{- define "cxlab.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "cxlab.labels" -}}
helm.sh/chart: {{ include "cxlab.chart" . }}
app.kubernetes.io/name: {{ include "cxlab.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cxlab
{{- end }}

{{/* What selects the operator Pod. The component keeps trial Pods (which carry
app.kubernetes.io/name=cxlab and instance=<experiment>) out of the selection. */}}
{{- define "cxlab.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cxlab.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "cxlab.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cxlab.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "cxlab.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end }}

{{- define "cxlab.runnerImage" -}}
{{- printf "%s:%s" .Values.runnerImage.repository (toString .Values.runnerImage.tag) }}
{{- end }}

{{/* The operator's RBAC rules, as in manifests/rbac/operator.yaml (a test fails when they
differ). Cluster-scoped reads: kopf discovers the resources it serves and namespaces. */}}
{{- define "cxlab.clusterRules" -}}
# kopf discovers the resources it serves and the namespaces it watches
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
# the queue for capacity: what the nodes can hold (allocatable, labels, taints)
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list]
# spec.service: the copy's counters from the kubelets (/stats/summary, /metrics/cadvisor)
- apiGroups: [""]
  resources: [nodes/proxy]
  verbs: [get]
{{- end }}

{{/* Rules on namespaced resources: granted cluster-wide, or per watched namespace. */}}
{{- define "cxlab.namespacedRules" -}}
# the experiments: read, patch status (results), finalizers and annotations, TTL deletion
- apiGroups: [cxlab.dev]
  resources: [concurrencyexperiments]
  verbs: [get, list, watch, patch, update, delete]
- apiGroups: [cxlab.dev]
  resources: [concurrencyexperiments/status]
  verbs: [get, patch, update]
# the schedules: their runs are experiments it creates; status holds their history
- apiGroups: [cxlab.dev]
  resources: [concurrencyexperiments]
  verbs: [create]
- apiGroups: [cxlab.dev]
  resources: [experimentschedules]
  verbs: [get, list, watch, patch, update]
- apiGroups: [cxlab.dev]
  resources: [experimentschedules/status]
  verbs: [get, patch, update]
# trial Pods and delay targets
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete, deletecollection]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# the full trial entries, in ConfigMaps beside each experiment (its status keeps compact ones)
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, create, patch]
# spec.service: each variant's copy of the user's Deployment, behind a Service of its own
# (the user's are read, never changed; the copies' Pods come with the pods rule above)
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, create, delete]
# ... and when its Service routes to every replica (its trials start then)
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list]
{{- end }}

{{/* The namespace of the helm test's experiment: the release's if the operator watches it. */}}
{{- define "cxlab.testNamespace" -}}
{{- if or (not .Values.watchNamespaces) (has .Release.Namespace .Values.watchNamespaces) }}
{{- .Release.Namespace }}
{{- else }}
{{- first .Values.watchNamespaces }}
{{- end }}
{{- end }}
