{{/* Chart name, overridable. */}}
{{- define "gpuready.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: fullnameOverride, else the release name when
it already contains the chart name, else "<release>-<chart>".
*/}}
{{- define "gpuready.fullname" -}}
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

{{- define "gpuready.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "gpuready.labels" -}}
helm.sh/chart: {{ include "gpuready.chart" . }}
{{ include "gpuready.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuready
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the controller pods (immutable once deployed). */}}
{{- define "gpuready.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of the probe's objects; its pods must not match the controller's selector. */}}
{{- define "gpuready.probeLabels" -}}
helm.sh/chart: {{ include "gpuready.chart" . }}
{{ include "gpuready.probeSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuready
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gpuready.probeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuready.name" . }}-probe
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: probe
{{- end }}

{{- define "gpuready.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpuready.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpuready.leaseName" -}}
{{- default (include "gpuready.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is set. */}}
{{- define "gpuready.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The probe's image: repository:tag, or repository@digest. */}}
{{- define "gpuready.probeImage" -}}
{{- if .Values.probe.image.digest }}
{{- printf "%s@%s" .Values.probe.image.repository .Values.probe.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.probe.image.repository (default .Chart.AppVersion .Values.probe.image.tag) }}
{{- end }}
{{- end }}

{{/*
The probe's affinity: probe.affinity, and with probe.maintenance.stepAside the
GPU operator's client label (nvidia.com/gpu.deploy.client) required absent or
"true". Node selector terms are ORed and a term's expressions ANDed, so each of
the user's required terms becomes two: itself and DoesNotExist, itself and
In [true] (no term: those two alone). The DaemonSet controller then deletes the
probe's pod when the driver manager or mig-manager sets the label to a
paused-for-* value, and recreates it when the label is "true" again
(docs/probe.md, "Maintenance").
*/}}
{{- define "gpuready.probeAffinity" -}}
{{- $affinity := deepCopy (.Values.probe.affinity | default (dict)) }}
{{- /* dig: a release upgraded with --reuse-values from a chart before these values has none */}}
{{- if dig "maintenance" "stepAside" true .Values.probe }}
{{- $key := "nvidia.com/gpu.deploy.client" }}
{{- $node := get $affinity "nodeAffinity" | default (dict) }}
{{- $required := get $node "requiredDuringSchedulingIgnoredDuringExecution" | default (dict) }}
{{- $terms := get $required "nodeSelectorTerms" | default (list (dict)) }}
{{- $clauses := list (dict "key" $key "operator" "DoesNotExist") (dict "key" $key "operator" "In" "values" (list "true")) }}
{{- $merged := list }}
{{- range $term := $terms }}
{{- range $clause := $clauses }}
{{- $t := deepCopy $term }}
{{- $_ := set $t "matchExpressions" (append (get $term "matchExpressions" | default (list)) $clause) }}
{{- $merged = append $merged $t }}
{{- end }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $merged }}
{{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ := set $affinity "nodeAffinity" $node }}
{{- end }}
{{- with $affinity }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The NFD CRDs gpuready may install or upgrade (--nfd-crds=apply). */}}
{{- define "gpuready.nfdCrdNames" -}}
- nodefeatures.nfd.k8s-sigs.io
- nodefeaturerules.nfd.k8s-sigs.io
- nodefeaturegroups.nfd.k8s-sigs.io
{{- end }}

{{/*
Readiness taint keys the pods tolerate: gpuready's default and the default of earlier
releases (gpuready.io/not-ready, still on nodes registered with it), every key a profile
of this chart sets, and extraReadinessTaintKeys. One key per line, sorted, unique.
*/}}
{{- define "gpuready.readinessTaintKeys" -}}
{{- $keys := list "readiness.k8s.io/gpuready-not-ready" "gpuready.io/not-ready" }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ with .taint }}{{ with .key }}
{{- $keys = append $keys . }}
{{- end }}{{ end }}{{ end }}
{{- end }}
{{- $keys = concat $keys .Values.extraReadinessTaintKeys }}
{{- range $keys | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/* Fails rendering on combinations the schema cannot express. */}}
{{- define "gpuready.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: replicas would all write to nodes. Enable leader election or set replicaCount: 1." (int .Values.replicaCount)) }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (gt (int .Values.replicaCount) 1) (ge (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicaCount)) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%d) must be lower than replicaCount (%d), or no node running gpuready could ever be drained." (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicaCount)) }}
{{- end }}
{{- end }}

{{/* A list of strings as a CEL list body: 'a', 'b'. */}}
{{- define "gpuready.quoteList" -}}
{{- $out := list }}
{{- range . }}{{ if . }}{{ $out = append $out (squote .) }}{{ end }}{{ end }}
{{- join ", " $out }}
{{- end }}

{{/*
CEL over the key KEY: whether a GpuNodeProfile may name it as `taint.key`. The
very rule the CRD puts on `taint.key` (generated from keys.rs: reserved domains,
autoscaler prefixes): a key the chart's values list is written only if a
profile could name it too. tests/admission_policy.rs keeps the two equal.
*/}}
{{- define "gpuready.cel.profileTaintKey" -}}
(!KEY.matches('^([^/]*\\.)?(kubernetes\\.io|k8s\\.io|x-k8s\\.io|nvidia\\.com|karpenter\\.sh|karpenter\\.k8s\\.aws|azure\\.com|cloud\\.google\\.com|gke\\.io|amazonaws\\.com|oraclecloud\\.com)/') || KEY.startsWith('readiness.k8s.io/') || KEY.startsWith('startup-taint.cluster-autoscaler.kubernetes.io/') || KEY.startsWith('ignore-taint.cluster-autoscaler.kubernetes.io/'))
{{- end }}

{{/*
CEL over the key KEY: whether a GpuNodeProfile may name it in `readyLabels` —
the CRD's reserved-domain rule on readyLabels keys (kept equal by the same test).
*/}}
{{- define "gpuready.cel.readyLabelKey" -}}
(!KEY.matches('^([^/]*\\.)?(kubernetes\\.io|k8s\\.io|x-k8s\\.io|nvidia\\.com|karpenter\\.sh|karpenter\\.k8s\\.aws|azure\\.com|cloud\\.google\\.com|gke\\.io|amazonaws\\.com|oraclecloud\\.com)/'))
{{- end }}

{{/*
The node condition types gpuready writes, by exact name: GpuReady, the probe's
GpuReadyProbe and one GpuReady<Layer> per layer (keys.rs, layer.rs; the test
keeps the list equal to what the engine writes).
*/}}
{{- define "gpuready.conditionTypes" -}}
'GpuReady', 'GpuReadyProbe', 'GpuReadyNode', 'GpuReadyHardware', 'GpuReadyDriver', 'GpuReadyDevicePlugin', 'GpuReadyFeatureDiscovery', 'GpuReadyProfile', 'GpuReadyCompatibility', 'GpuReadyHealth', 'GpuReadyFabric', 'GpuReadyExternal'
{{- end }}

{{/*
The node label and annotation keys gpuready writes, by exact name, never by
prefix (keys.rs NODE_LABELS_WRITTEN / NODE_ANNOTATIONS_WRITTEN; the chart test
keeps them equal). Other gpuready.io/ keys on a node are not gpuready's to
write: an operator's gpuready.io/repaired-at, an admin's gpuready.io/ taint.
*/}}
{{- define "gpuready.nodeLabelsWritten" -}}
'gpuready.io/not-ready-deadline-exceeded', 'gpuready.io/profile', 'gpuready.io/ready'
{{- end }}
{{- define "gpuready.nodeAnnotationsWritten" -}}
'gpuready.io/labels', 'gpuready.io/released-at', 'gpuready.io/taint', 'gpuready.io/timeline'
{{- end }}

{{/*
Taint keys gpuready's ServiceAccount may add with effect NoExecute (evicting
pods): those of the chart's profiles that declare it or escalate (issue 30's
`escalation`), and
admissionPolicy.noExecuteTaintKeys. One key per line, sorted, unique.
*/}}
{{- define "gpuready.noExecuteTaintKeys" -}}
{{- $keys := list }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ if or (eq (toString (dig "taint" "effect" "" .)) "NoExecute") .escalation }}
{{- $keys = append $keys (dig "taint" "key" "readiness.k8s.io/gpuready-not-ready" .) }}
{{- end }}{{ end }}
{{- end }}
{{- $keys = concat $keys .Values.admissionPolicy.noExecuteTaintKeys }}
{{- range $keys | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/*
The profiles whose node taint gpuready may turn or remove NoExecute, each with
the key: "name=key", one per line, sorted, unique. The chart's profiles that
declare NoExecute or escalate (their own key), and each name of
admissionPolicy.noExecuteProfiles with each key of
admissionPolicy.noExecuteTaintKeys (issue 49: a profile label naming no such
profile, one that does not exist included, never carries NoExecute).
*/}}
{{- define "gpuready.noExecuteProfileKeys" -}}
{{- $pairs := list }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ if or (eq (toString (dig "taint" "effect" "" .)) "NoExecute") .escalation }}
{{- $pairs = append $pairs (printf "%s=%s" $name (dig "taint" "key" "readiness.k8s.io/gpuready-not-ready" .)) }}
{{- end }}{{ end }}
{{- end }}
{{- range $name := .Values.admissionPolicy.noExecuteProfiles }}
{{- range $key := $.Values.admissionPolicy.noExecuteTaintKeys }}
{{- $pairs = append $pairs (printf "%s=%s" $name $key) }}
{{- end }}
{{- end }}
{{- range $pairs | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/*
The profiles gpuready may write DeviceTaintRules for: the chart's profiles
with deviceGating and admissionPolicy.deviceGatingProfiles. One per line.
*/}}
{{- define "gpuready.deviceGatingProfiles" -}}
{{- $names := list }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ if hasKey . "deviceGating" }}
{{- $names = append $names $name }}
{{- end }}{{ end }}
{{- end }}
{{- $names = concat $names .Values.admissionPolicy.deviceGatingProfiles }}
{{- range $names | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/*
Of those, the profiles whose DeviceTaintRules may be NoExecute (and whose
escalation rules, named -noexecute, may exist): the chart's with
deviceGating.effect NoExecute or escalation, and
admissionPolicy.noExecuteProfiles. One per line.
*/}}
{{- define "gpuready.deviceNoExecuteProfiles" -}}
{{- $names := list }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ if and (hasKey . "deviceGating") (or (eq (toString (dig "deviceGating" "effect" "" .)) "NoExecute") .escalation) }}
{{- $names = append $names $name }}
{{- end }}{{ end }}
{{- end }}
{{- $names = concat $names .Values.admissionPolicy.noExecuteProfiles }}
{{- range $names | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/*
readyLabels keys gpuready's ServiceAccount may set: those of the chart's
profiles and admissionPolicy.extraLabelKeys. One key per line, sorted, unique.
*/}}
{{- define "gpuready.readyLabelKeys" -}}
{{- $keys := list }}
{{- range $name, $spec := .Values.profiles }}
{{- with $spec }}{{ with .readyLabels }}
{{- $keys = concat $keys (keys .) }}
{{- end }}{{ end }}
{{- end }}
{{- $keys = concat $keys .Values.admissionPolicy.extraLabelKeys }}
{{- range $keys | uniq | sortAlpha }}
{{ . }}
{{- end }}
{{- end }}

{{/*
CEL over the schema S (a JSONSchemaProps of a CRD version, read as a map):
true when neither S nor anything below it, to DEPTH levels of properties,
items and additionalProperties, preserves unknown fields or embeds a resource,
uses a combinator (allOf/anyOf/oneOf/not: NFD's releases use none) or an array
of item schemas, and nothing lies deeper. CEL has no recursion, so the levels
are unrolled here; the children of each level are one list, so the text grows
linearly with DEPTH. Dashed keys are read by index: `x__dash__…` names a
field only in typed (CRD-schema) CEL, never in a map like this one.
*/}}
{{- define "gpuready.cel.closedSchema" -}}
{{- $s := .s }}{{ $d := int .d -}}
(!{{ $s }}[?'x-kubernetes-preserve-unknown-fields'].orValue(false) && !{{ $s }}[?'x-kubernetes-embedded-resource'].orValue(false) && ['allOf', 'anyOf', 'oneOf', 'not'].all(c, !(c in {{ $s }})) && (!has({{ $s }}.items) || type({{ $s }}.items) == map) &&
{{- if eq $d 0 }} !has({{ $s }}.properties) && !has({{ $s }}.items) && (!has({{ $s }}.additionalProperties) || type({{ $s }}.additionalProperties) == bool))
{{- else }} ({{ $s }}.?properties.orValue({}).map(k, {{ $s }}.properties[k]) + (has({{ $s }}.items) ? [{{ $s }}.items] : []) + (has({{ $s }}.additionalProperties) && type({{ $s }}.additionalProperties) == map ? [{{ $s }}.additionalProperties] : [])).all(s{{ $d }}, {{ include "gpuready.cel.closedSchema" (dict "s" (printf "s%d" $d) "d" (sub $d 1)) }}))
{{- end }}
{{- end }}
