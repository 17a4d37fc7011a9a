{{/*
Labels every object carries besides its own: which chart and release
made it. The objects' own labels and every selector are deploy/'s, so
that the chart can take over objects `kubectl apply -k deploy/` made
without a pod being replaced.
*/}}
{{- define "shardns.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The replicas' labels: app.kubernetes.io/name: shardns and the chart's. */}}
{{- define "shardns.labels" -}}
app.kubernetes.io/name: shardns
{{ include "shardns.helmLabels" . }}
{{- end }}

{{/* The node-local tier's labels. */}}
{{- define "shardns.nodeLocalLabels" -}}
app.kubernetes.io/name: shardns-nodelocal
{{ include "shardns.helmLabels" . }}
{{- end }}

{{/*
The name kustomize's configMapGenerator gives a ConfigMap: name-<hash>,
the hash being the first ten hex digits of the SHA-256 of
{"data":…,"kind":"ConfigMap","name":""} with 0, 1, 3, a and e spelled
g, h, k, m and t (sigs.k8s.io/kustomize/api/hasher; its lookup of
"metadata/name" finds nothing, so the name it hashes is empty). The same
name as deploy/'s for the same content, and a new one for a changed
configuration, which rolls the pods as it does there.
Takes a dict with name and data.
*/}}
{{- define "shardns.generatedName" -}}
{{- $hash := dict "kind" "ConfigMap" "name" "" "data" .data | toJson | sha256sum | trunc 10 -}}
{{- printf "%s-%s" .name ($hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t") -}}
{{- end }}

{{/*
The replicas' shardns.yaml: the shipped file, or its keys with
.Values.config merged over them.
*/}}
{{- define "shardns.config" -}}
{{- if .Values.config -}}
{{- $config := include "shardns.configFile" . | fromYaml -}}
{{- include "shardns.merge" (dict "dst" $config "src" (deepCopy .Values.config)) -}}
{{- toYaml $config }}
{{ else -}}
{{- include "shardns.configFile" . -}}
{{- end -}}
{{- end }}

{{/*
Merges the map src into the map dst, in place: maps key by key, any other
value (a list, false, 0) replacing dst's whole. Takes a dict with dst and
src.
*/}}
{{- define "shardns.merge" -}}
{{- $dst := .dst -}}
{{- range $key, $value := .src -}}
{{- if and (kindIs "map" $value) (kindIs "map" (get $dst $key)) -}}
{{- include "shardns.merge" (dict "dst" (get $dst $key) "src" $value) -}}
{{- else -}}
{{- $_ := set $dst $key $value -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The node-local processes' shardns.yaml, as shardns.config. */}}
{{- define "shardns.nodeLocalConfig" -}}
{{- if .Values.nodeLocal.config -}}
{{- $config := include "shardns.nodeLocalConfigFile" . | fromYaml -}}
{{- include "shardns.merge" (dict "dst" $config "src" (deepCopy .Values.nodeLocal.config)) -}}
{{- toYaml $config }}
{{ else -}}
{{- include "shardns.nodeLocalConfigFile" . -}}
{{- end -}}
{{- end }}

{{/* The replicas' ConfigMap data and generated name. */}}
{{- define "shardns.configData" -}}
{{- dict "shardns.yaml" (include "shardns.config" .) | toJson -}}
{{- end }}
{{- define "shardns.configName" -}}
{{- include "shardns.generatedName" (dict "name" "shardns" "data" (include "shardns.configData" . | fromJson)) -}}
{{- end }}

{{/* The node-local ConfigMap data and generated name. */}}
{{- define "shardns.nodeLocalConfigData" -}}
{{- dict "shardns.yaml" (include "shardns.nodeLocalConfig" .) | toJson -}}
{{- end }}
{{- define "shardns.nodeLocalConfigName" -}}
{{- include "shardns.generatedName" (dict "name" "shardns-nodelocal" "data" (include "shardns.nodeLocalConfigData" . | fromJson)) -}}
{{- end }}

{{/*
Every object lives in kube-system, where kube-dns is: the namespace
kubelet's clusterDNS Service has in every distribution, and the one the
configuration names (cluster.joinService, cluster.secret).
*/}}
{{- define "shardns.namespace" -}}
{{- if ne .Release.Namespace "kube-system" -}}
{{- fail (printf "shardns is the cluster DNS and lives in kube-system, beside kube-dns: install with -n kube-system (the release's namespace is %q)" .Release.Namespace) -}}
{{- end -}}
kube-system
{{- end }}
