{{/*
The replicas' shardns.yaml: deploy/base/shardns.yaml as shipped, with the
values it depends on put in. The chart tests compare the default with
that file, so keep the two alike.
*/}}
{{- define "shardns.configFile" -}}
# shardns configuration of the StatefulSet in deploy/ (mounted at
# /etc/shardns/shardns.yaml). Every key is described in
# docs/configuration.md; keys left out take their defaults.
mode: replica
dns:
  # Every address of the pod, so both the kube-dns ClusterIP (through
  # kube-proxy) and the pod IP are answered. Hosts must be IP addresses.
  listen: ["0.0.0.0:53"]
http:
  # /health (liveness), /ready (readiness), /metrics; /debug/ring to this
  # pod's loopback only (`kubectl exec shardns-0 -- /shardns ring`), or
  # to the networks of http.debug (deploy/README.md, "Monitoring").
  listen: "0.0.0.0:8080"
  # On SIGTERM /ready fails this long before the listeners stop, while the
  # pod leaves the kube-dns endpoints. terminationGracePeriodSeconds in
  # statefulset.yaml is longer.
  lameduck: 5s
kubernetes:
  enabled: true
  kubeconfig: ""                   # in-cluster: the pod's service account
  zones: [cluster.local]           # the cluster domain (kubelet --cluster-domain)
  reverseZones: [in-addr.arpa, ip6.arpa]
  ttl: 30
  pods: insecure                   # CoreDNS's default in kubeadm clusters
  fallthrough: [in-addr.arpa, ip6.arpa]
forward:
  # The node's resolv.conf: the pod runs with dnsPolicy: Default, so this
  # is the node's upstream, never shardns itself.
  upstreams: [/etc/resolv.conf]
cache:
  enabled: true
  maxTTL: 30
cluster:
  # nodeName is left out: shardns defaults it to the hostname, which in a
  # StatefulSet is the stable pod name (shardns-0, shardns-1, ...), so a
  # restarted pod rejoins under the same name.
  bind: "0.0.0.0:7946"             # memberlist gossip, UDP and TCP
  remote: "0.0.0.0:8090"           # queries forwarded to a zone's owners
  # Peers are found through the headless Service in services.yaml, which
  # publishes pods before they are ready.
  joinService: kube-system/shardns-peers
  # Only those pods may join and own zones. The node-local DaemonSet's
  # pods (components/nodelocal) may connect to the remote port to ask.
  admitServices: [kube-system/shardns-nodelocal-peers]
  # The gossip key, generated into this Secret by the first replica
  # (base/trust.yaml); it also authenticates the remote port.
  secret: kube-system/shardns-gossip
  # The node-local credential, derived from that key and written here for
  # the node-local DaemonSet (components/nodelocal), which may read only
  # this Secret: it may ask the replicas, never answer for a zone.
  nodeLocalSecret: kube-system/shardns-nodelocal-credential
  # Each zone lives on 2 replicas: one may restart or be drained (the
  # PodDisruptionBudget allows one at a time) without losing a zone.
  replicationFactor: {{ .Values.replicationFactor }}
log:
  level: info
  format: json
{{ end }}

{{/*
The node-local processes' shardns.yaml: deploy/components/nodelocal/nodelocal.yaml
with the values it depends on put in.
*/}}
{{- define "shardns.nodeLocalConfigFile" -}}
# shardns configuration of the node-local DaemonSet (mounted at
# /etc/shardns/shardns.yaml). It owns no zone: cluster names are asked of
# the replicas that own them, and cached here.
mode: nodelocal
dns:
  # The link-local address of NodeLocal DNSCache: on the host network, set
  # up on a dummy interface by the DaemonSet's init container. Point
  # kubelet's clusterDNS at it.
  listen: ["{{ .Values.nodeLocal.address }}:53"]
http:
  # Host network: a port of its own beside the node's other daemons.
  listen: "0.0.0.0:9254"
  lameduck: 2s
kubernetes:
  # Must match the replicas' (deploy/base/shardns.yaml): the zones tell
  # which names are cluster names; the API itself is not watched here.
  zones: [cluster.local]
  reverseZones: [in-addr.arpa, ip6.arpa]
  pods: insecure
  fallthrough: [in-addr.arpa, ip6.arpa]
forward:
  # Other names go to the node's resolvers, as NodeLocal DNSCache does.
  # Istio ServiceEntry hosts are asked of their owners directly (the
  # replicas tell their names with the ring). Names the replicas answer
  # outside cluster.local from zone files or stub domains go to the
  # replicas through kube-dns: list them here with the kube-dns ClusterIP
  # of your cluster, e.g.
  #   stubs: [{zones: [example.internal], upstreams: ["10.96.0.10"]}]
  upstreams: [/etc/resolv.conf]
cache:
  # Bounds the cache of the replicas' answers too; each answer is kept for
  # its own TTL (30 s for cluster names), negative answers as well.
  enabled: true
  maxTTL: 30
  denialMaxTTL: 30
  size: 10000
# Autopath for the pods of this node: the first search-path expansion of
# a name (name.<namespace>.svc.cluster.local) is answered with the name
# the pod's search path finds, in one question, as CoreDNS's autopath.
# The process watches only its own node's pods (NODE_NAME, from the
# DaemonSet), and may read pods only with the component nodelocal-clients
# added beside this one; the replicas need no pods: verified. Opt in with:
#   autopath: {enabled: true}
# and, to answer AAAA questions of pods without an IPv6 address with
# NODATA at once:
#   nodeLocal: {aaaa: nodata}
# and, to answer ServiceEntries exported to some namespaces only
# (exportTo) to this node's pods of those namespaces:
#   nodeLocal: {meshNamespaces: true}
cluster:
  # nodeName is not set: on the host network the hostname is the node's.
  # The node's address, as the replicas admit it: this pod's endpoint in
  # shardns-nodelocal-peers. The DaemonSet's init container writes it in
  # place of NODE_IP when the pod starts. Left to itself, shardns on the
  # host network would advertise the host's first interface address,
  # which is not the node's on every node, and the replicas would refuse
  # its connections (remote-connection).
  advertise: NODE_IP
  # Port 0: a port the system gives, advertised to the replicas, which
  # admit the node's address at any port. A new pod starts beside the old
  # one on the node during a rollout (maxSurge), so no fixed port.
  remote: "0.0.0.0:0"
  # A node-local process does not gossip: it reads the ring from the
  # replicas, found through joinService at the port its EndpointSlices
  # name tcp-remote.
  joinService: kube-system/shardns-peers
  # Its credential, which the replicas derive from their key and write
  # here (it waits for them): it may ask the replicas, never answer, own
  # a zone or join the ring. It never holds the replicas' key.
  nodeLocalSecret: kube-system/shardns-nodelocal-credential
  # The replicas' factor, for the order owners are asked in.
  replicationFactor: {{ .Values.replicationFactor }}
log:
  level: info
  format: json
{{ end }}
