// Package resolvconf reads a resolver configuration file in the form of resolv.conf(5):
// its nameservers, its search list and its options, as the C libraries' stub resolvers
// read them. The kubelet gives pods with dnsPolicy Default the machine's configuration
// from it, and the cluster DNS forwards names outside the cluster to the machine's
// nameservers it names.
//
// It is a leaf: it imports no kubelab component.
package resolvconf
