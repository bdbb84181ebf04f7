// Package archtest holds kubelab's import rule and the check that keeps it: components
// meet only on the wire.
//
// kubelab runs in one binary the programs a Kubernetes cluster is made of, and each of
// them talks to the others only the way the real ones do: through the API server, CRI,
// CSI gRPC, CNI, the kubelet's HTTPS server, the EC2 API, nftables. Reading one of them
// should never need reading another's Go code, and a change inside one should never break
// another at compile time. So:
//
//   - Components are the programs: apiserver, each controller under internal/controller
//     (attachdetach, deployment, …), scheduler, kubelet, csi/driver, each CSI sidecar
//     under internal/csi/sidecar (attacher, provisioner, …), cloud, cni, proxy, netpol,
//     overlay, ipamd, natgateway, dns, vpc, image, containerd, trace and
//     podidentitywebhook. A component's subpackages belong to
//     it (internal/kubelet/pluginmanager is the kubelet). A component imports no other
//     component.
//   - Composers start components and wire them together: internal/cluster,
//     internal/app, internal/controllermanager, internal/cloudcontrollermanager and the
//     commands under cmd. They may import anything.
//   - Everything else is a leaf: a fact or a helper several components share, defined
//     once (internal/util/*, internal/csi/client, internal/hollow, version,
//     resourceversion, storageclass, leaderelection, etcd, the shared controller helpers
//     internal/controller/expectations and controllertest, test helper packages, and any
//     package not named here). A leaf imports no component and no composer, so that
//     importing it never brings a component along.
//
// One exception is allowed and named with its reason: the replication controller is the
// replicaset controller run over ReplicationControllers (as upstream's is), so
// internal/controller/replication imports internal/controller/replicaset.
//
// Only non-test code is checked: a test may start several components to watch them
// meet on the wire.
//
// Check applies the rule to an import graph and names each pair that breaks it
// ("internal/kubelet imports internal/controller/attachdetach: components meet only on
// the wire"); Load reads the graph of the module's packages with go/build. The package's
// test runs both on the module in `go test ./...`, so a new cross import fails the suite.
// The rule is upstream's too, kept there by import-restriction files checked in CI.
package archtest
