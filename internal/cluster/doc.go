// Package cluster is `kubelab up`: it starts and stops a whole cluster on this machine,
// every component of the flow from `kubectl apply` to a running pod with its EBS volume
// mounted, in the order they start:
//
//   - the control plane: embedded etcd (or an external one) and the API server, which
//     writes the admin kubeconfig, with the pod identity webhook on loopback (the
//     MutatingWebhookConfiguration pod-identity-webhook, podidentity.go); the service
//     account issuer is the API server's URL on the VPC (or its loopback port);
//   - the cloud: the EC2/EBS-compatible API (real loop devices, or hollow);
//   - the CSI driver ebs.csi.aws.com's controller plugin on RUN-DIR/csi/controller.sock
//     (the cluster's sockets are in its run directory, /run/kubelab/<hash of DATA-DIR>:
//     sockets.go),
//     reaching the cloud only through the EC2 API, and its sidecars (external-provisioner,
//     external-attacher, external-resizer, external-snapshotter, livenessprobe) on that
//     socket;
//   - the add-ons an EKS cluster with the EBS CSI add-on has: the CSIDriver object
//     (attachRequired), the default StorageClass gp2 (WaitForFirstConsumer), and the
//     service accounts and RBAC of the driver, the cluster DNS and the network agents;
//   - the controller-manager and the scheduler;
//   - the nodes: for each, an instance launched in the cloud with RunInstances (zones
//     round-robin; found again by its kubelab.dev/node-slot tag when the cluster restarts
//     on the same data dir), named after its private DNS name as on EKS, and its kubelet
//     (hollow: a fake runtime and mounter); a real node is also a network namespace on
//     the cluster's VPC (package vpc) with its metadata service, its containerd and CNI
//     configuration, the CSI node plugin, the overlay agent (or, with the vpc pod network,
//     aws-node's IP address manager, package ipamd), the NetworkPolicy agent and the
//     service proxy; the EC2 endpoint and the cluster DNS listen on the VPC.
//
// The rule of the wire holds inside the one process: each component gets its own client
// (its own user agent and connection, protobuf where upstream uses it) or its own gRPC
// connection to the driver's socket, and no component calls into another. Each client is
// the component's own identity, a client certificate of the cluster CA (identity.go): the
// scheduler system:kube-scheduler, the controller-manager system:kube-controller-manager
// with each controller its service account kube-system/<controller>, a kubelet
// system:node:<node> in system:nodes, kube-proxy system:kube-proxy, the CSI sidecars
// kube-system/ebs-csi-controller-sa, the cluster DNS kube-system/coredns, the overlay and
// NetworkPolicy agents kube-system/kubelab-overlay and kube-system/kubelab-netpol; the
// add-ons' roles and bindings (rbac.go) are created before any component starts. Only
// kubelab up's own client, for the add-ons, is the admin (system:masters). Each runs under a supervisor: Stop and Start end and restart one (e.g.
// "scheduler", "controller-manager", "csi-provisioner", "kubelet/<node>") from scratch,
// as a restarted process would, which is how the tests kill components mid-flow.
//
// Once the nodes are Ready, the addon-pods unit shows the CSI driver and its sidecars as
// the kube-system pods an EKS cluster has (ebs-csi-controller, ebs-csi-node): mirror pods
// whose containers' logs are the components' own, served by the nodes' kubelets
// (addonpods.go); deleting one restarts its components.
//
// Ready is closed once every node is Ready. Run returns when its context ends, after
// every component has stopped; the API server stops before etcd.
package cluster
