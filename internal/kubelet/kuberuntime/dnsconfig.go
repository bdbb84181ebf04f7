package kuberuntime

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/util/resolvconf"
)

// Limits of a pod's resolver configuration (those of the API's validation, which the
// resolvers of the C libraries share).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLen       = 253
)

// Event reasons about a pod's DNS configuration.
const (
	eventMissingClusterDNS = "MissingClusterDNS"
	eventDNSConfigForming  = "DNSConfigForming"
)

// hostResolvConf is the node's resolver configuration, which pods with dnsPolicy Default
// (and host-network ClusterFirst pods) get.
var hostResolvConf = "/etc/resolv.conf"

// clusterDNSOptions are the options of ClusterFirst pods: names with fewer than 5 dots
// are tried with the search list first (a Service name has 4 dots).
var clusterDNSOptions = []string{"ndots:5"}

// dnsWarning is a warning event about a pod's DNS configuration.
type dnsWarning struct{ reason, message string }

// podDNS is the resolver configuration of the pod's sandbox; its warnings become events.
func (r *Runtime) podDNS(pod *corev1.Pod) *runtimeapi.DNSConfig {
	host, err := readResolvConf(hostResolvConf)
	if err != nil {
		r.log.Warn("read the node's resolver configuration", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		host = &runtimeapi.DNSConfig{}
	}
	cfg, warnings := podDNSConfig(pod, r.cfg.ClusterDNS, r.cfg.ClusterDomain, host)
	for _, w := range warnings {
		r.event(pod, "", corev1.EventTypeWarning, w.reason, "%s", w.message)
	}
	return cfg
}

// podDNSConfig is the resolver configuration of a pod by its dnsPolicy:
//   - ClusterFirst (the default) and ClusterFirstWithHostNet: nameservers clusterDNS,
//     search <namespace>.svc.<domain> svc.<domain> <domain>, options ndots:5. A
//     host-network pod with ClusterFirst uses the node's configuration (Default), and so
//     does every pod when clusterDNS is empty (with a MissingClusterDNS warning).
//   - Default: the node's configuration, host.
//   - None: nothing but the pod's spec.dnsConfig.
//
// spec.dnsConfig is merged in: its nameservers and searches appended (without
// duplicates), its options replacing those of the same name. Nameservers beyond 3 and
// search domains beyond 32 (or beyond 2048 characters together, or longer than 253) are
// left out with a DNSConfigForming warning. host is not modified.
func podDNSConfig(pod *corev1.Pod, clusterDNS []string, domain string, host *runtimeapi.DNSConfig) (*runtimeapi.DNSConfig, []dnsWarning) {
	var warnings []dnsWarning
	hostCopy := func() *runtimeapi.DNSConfig {
		return &runtimeapi.DNSConfig{Servers: append([]string(nil), host.GetServers()...),
			Searches: append([]string(nil), host.GetSearches()...), Options: append([]string(nil), host.GetOptions()...)}
	}
	var cfg *runtimeapi.DNSConfig
	switch policy := pod.Spec.DNSPolicy; {
	case policy == corev1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case policy == corev1.DNSDefault, policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork:
		cfg = hostCopy()
	case len(clusterDNS) == 0:
		// ClusterFirst, ClusterFirstWithHostNet (and unknown policies, as ClusterFirst).
		warnings = append(warnings, dnsWarning{eventMissingClusterDNS, fmt.Sprintf("pod: %q. kubelet does not have ClusterDNS IP "+
			"configured and cannot create Pod using %q policy. Falling back to %q policy.",
			pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", corev1.DNSClusterFirst, corev1.DNSDefault)})
		cfg = hostCopy()
	default:
		cfg = &runtimeapi.DNSConfig{Servers: append([]string(nil), clusterDNS...), Options: append([]string(nil), clusterDNSOptions...)}
		if domain = strings.TrimSuffix(domain, "."); domain != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = withoutDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = withoutDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, dnsWarning{eventDNSConfigForming, "Nameserver limits were exceeded, some nameservers have " +
			"been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	if searches, cut := fitSearches(cfg.Searches); cut {
		cfg.Searches = searches
		warnings = append(warnings, dnsWarning{eventDNSConfigForming, "Search Line limits were exceeded, some search paths have " +
			"been omitted, the applied search line is: " + strings.Join(cfg.Searches, " ")})
	}
	return cfg, warnings
}

// fitSearches keeps the first 32 search domains not longer than 253 characters, then
// drops the last ones until the search line fits in 2048 characters; cut reports whether
// any was left out.
func fitSearches(searches []string) (out []string, cut bool) {
	for _, s := range searches {
		if len(s) > maxDNSSearchLen || len(out) == maxDNSSearchPaths {
			cut = true
			continue
		}
		out = append(out, s)
	}
	for len(out) > 0 && len(strings.Join(out, " ")) > maxDNSSearchListChars {
		out = out[:len(out)-1]
		cut = true
	}
	return out, cut
}

func withoutDuplicates(in []string) []string {
	out := in[:0:0]
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeDNSOptions sets the pod's options over resolver options ("name" or "name:value"):
// one of the same name is replaced in place, others are appended.
func mergeDNSOptions(options []string, podOptions []corev1.PodDNSConfigOption) []string {
	out := append([]string(nil), options...)
	for _, o := range podOptions {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		out = setDNSOption(out, opt)
	}
	return out
}

// setDNSOption replaces the option of the same name as opt in options, or appends opt.
func setDNSOption(options []string, opt string) []string { return resolvconf.SetOption(options, opt) }

// readResolvConf reads a resolver configuration file (resolvconf.Read) as CRI's DNSConfig.
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	cfg, err := resolvconf.Read(path)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.DNSConfig{Servers: cfg.Nameservers, Searches: cfg.Searches, Options: cfg.Options}, nil
}
