// Package agent is the rig's node agent: a small kubelet and container runtime in one process that
// runs the pods the real kube-scheduler binds to its Node as real local processes.
//
// What it does, and the Kubernetes behaviour each part stands in for:
//
//   - Node: registers a Ready Node with a finite capacity and renews its Lease in kube-node-lease, so
//     the real node-lifecycle controller keeps it schedulable (node.go).
//   - Pod sandbox: each pod gets its own loopback address 127.0.X.Y (X is a /24 claimed per rig with a
//     lock file, so rigs of concurrent test packages never collide), its own cgroup (v2, when
//     available) and a directory for its volumes (pod.go, ipam.go).
//   - Containers: every container process starts in a private mount and UTS namespace in which the
//     pod's volumes are bind-mounted at their mount paths, the hostname is the pod's hostname and
//     /etc/hosts maps the cluster's DNS names to pod addresses, kept current in place as pods come,
//     go and change address, while /etc/resolv.conf keeps every other lookup off the host's
//     resolver (runtime.go, volumes.go, hosts.go).
//     For the official mariadb image the agent supplies the image's files — docker-entrypoint.sh,
//     healthcheck.sh and /etc/mysql — and runs the host's mariadbd; the only setting it changes is
//     bind-address, which becomes the pod's address (image.go). One build serves every tag: a tag
//     of another version than the host's makes the server report it (mariadb:11.4 reports
//     11.4.0-MariaDB-rig through mariadbd --version=…), and MARIADB_AUTO_UPGRADE runs that build's
//     mariadb-upgrade with its version check skipped when the data directory's mysql_upgrade_info
//     names another version, as the image does on a new series. mysqlctl's own image
//     (mysqlctl:latest, which manifests/watch runs) is the mysqlctl binary the rig was given,
//     mounted at the image's entrypoint /mysqlctl, with HOME=/ (the image has no /etc/passwd); a
//     --metrics-addr on every address becomes the pod's address, the one argument changed.
//     Containers of other images run their command with the host's binaries, which is enough for
//     init containers that are shell scripts.
//   - API access: every container gets KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (the
//     API server's own loopback address, in place of the kubernetes Service's cluster IP), and
//     the projected volume the ServiceAccount admission plugin adds holds a token of the pod's
//     ServiceAccount obtained with the TokenRequest API and bound to the pod (renewed at 80% of
//     its lifetime), ca.crt and namespace, at /var/run/secrets/kubernetes.io/serviceaccount as
//     a kubelet mounts them: client-go's in-cluster configuration works in a pod (volumes.go).
//   - Status: phase, pod IP, conditions, container states, restart counts and readiness from the
//     probes the pod spec declares (exec, tcpSocket, httpGet), written through the pod status
//     subresource like a kubelet; restarts follow restartPolicy with the kubelet's back-off; deletion
//     runs preStop, SIGTERM, the grace period, SIGKILL, and then deletes the pod with grace period 0
//     (pod.go, probe.go, status.go).
//   - Storage: a StorageClass whose PersistentVolumeClaims it provisions as directories (one per
//     claim, kept while the claim exists), bound by the real PV controller (provisioner.go).
//   - Services: the API server refuses loopback addresses in EndpointSlices, so the real
//     EndpointSlice controller cannot publish the rig's pods. The agent publishes, for every Service
//     with a selector, EndpointSlices of address type FQDN (the pods' DNS names, which the rig's
//     /etc/hosts resolves) with the same conditions the controller would set (endpoints.go).
//   - Kubelet API: the node serves what the API server proxies to a kubelet, port-forward (SPDY,
//     and WebSocket for clients that reach a node directly; the API server tunnels its own
//     WebSocket clients over SPDY), exec and containerLogs, with Kubernetes' own server side
//     (k8s.io/cri-streaming), over TLS on the node's address and port 10250. Its serving
//     certificate is signed by the control plane's kubelet CA, which the API server checks, and
//     only clients that CA signed (the API server's kubelet client) are served. The Node publishes
//     that address as its InternalIP and the port as its kubelet endpoint; the API server prefers
//     InternalIP, so no node name is ever resolved. Port-forward connects from the node's address
//     to the pod's, as a kubelet connects inside the pod's network namespace: a network cut of
//     the pod spares that path, a frozen server holds it (kubelet.go).
//   - Faults: kill -9, freeze (SIGSTOP) and thaw, network cut and restore (iptables rules in a chain
//     of the rig's own: packets to and from the pod's address and from the pod's cgroup are dropped,
//     except to and from the node address the probes come from), losing a pod (its processes die and
//     the agent forgets it while the pod object stays) and wiping a claim's data (faults.go,
//     network.go).
//
// Everything the agent starts is a child process with Pdeathsig, signalled only by its own PID or
// process group; Stop kills every pod process and removes the iptables chain, the cgroups and the
// mount points it had to create.
package agent
