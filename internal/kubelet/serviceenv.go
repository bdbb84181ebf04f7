package kubelet

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// masterService is the Service of the API server, whose variables every container gets.
const masterService = "kubernetes"

// serviceEnv is the Service variables of a container of a pod in namespace ns, from
// services (those of ns and of the default namespace): the "kubernetes" Service of the
// default namespace always, and, when enableServiceLinks, every Service of ns (one of ns
// wins over the default namespace's of the same name). Services without a cluster IP
// (headless, ExternalName) give none. Each Service gives <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT (its first port), <NAME>_SERVICE_PORT_<PORTNAME> for named ports and
// the Docker link variables <NAME>_PORT, <NAME>_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR};
// NAME is the Service's name upper-cased with dashes as underscores.
func serviceEnv(ns string, enableServiceLinks bool, services []*corev1.Service) map[string]string {
	chosen := map[string]*corev1.Service{}
	for _, s := range services {
		if !serviceIPSet(s) {
			continue
		}
		switch {
		case s.Namespace == ns && enableServiceLinks:
			chosen[s.Name] = s
		case s.Namespace == metav1.NamespaceDefault && s.Name == masterService:
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]string{}
	for _, n := range names {
		for k, v := range serviceVars(chosen[n]) {
			out[k] = v
		}
	}
	return out
}

// serviceIPSet says whether the Service has a cluster IP (not headless, not ExternalName).
func serviceIPSet(s *corev1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone && len(s.Spec.Ports) > 0
}

// serviceVars is the variables of one Service.
func serviceVars(s *corev1.Service) map[string]string {
	prefix := envVarName(s.Name)
	ip := s.Spec.ClusterIP
	out := map[string]string{
		prefix + "_SERVICE_HOST": ip,
		prefix + "_SERVICE_PORT": strconv.Itoa(int(s.Spec.Ports[0].Port)),
	}
	for i, p := range s.Spec.Ports {
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+envVarName(p.Name)] = strconv.Itoa(int(p.Port))
		}
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		addr := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
		if i == 0 {
			out[prefix+"_PORT"] = addr
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out[pp] = addr
		out[pp+"_PROTO"] = strings.ToLower(proto)
		out[pp+"_PORT"] = strconv.Itoa(int(p.Port))
		out[pp+"_ADDR"] = ip
	}
	return out
}

func envVarName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
