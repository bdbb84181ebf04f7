package kuberuntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// Pods' addresses are on a node bridge the host has no route to, so network probes and
// hooks connect from inside the pod's network namespace: a socket belongs to the
// namespace of the thread that created it, wherever it is used afterwards.

// dialFunc opens a connection (net.Dialer.DialContext's signature).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialInNetNS connects to addr over network from the network namespace at nsPath ("":
// this process's own). Host names are resolved here first, so that only the connect
// happens in the namespace (netns.Do: on a thread that joins the namespace and leaves it
// again).
func dialInNetNS(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if nsPath == "" {
		return d.DialContext(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("lookup %s: no addresses", host)
		}
		addr = net.JoinHostPort(ips[0].IP.String(), port)
	}
	var conn net.Conn
	err = netns.Do(nsPath, func() (err error) {
		// One address and no happy eyeballs: the socket is made here, on this thread.
		d := net.Dialer{FallbackDelay: -1}
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// sandboxInfo is what the runtime reads of containerd's verbose sandbox status: the pause
// process and the namespaces of its runtime spec.
type sandboxInfo struct {
	Pid         uint32 `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

var errNoNetNS = errors.New("sandbox status names no network namespace")

// netNSPath is where a sandbox's network namespace can be opened, from the "info" of its
// verbose status: the network namespace path of its runtime spec, else its pause
// process's namespace.
func netNSPath(info map[string]string) (string, error) {
	raw, ok := info["info"]
	if !ok {
		return "", errNoNetNS
	}
	var si sandboxInfo
	if err := json.Unmarshal([]byte(raw), &si); err != nil {
		return "", fmt.Errorf("sandbox status info: %w", err)
	}
	for _, ns := range si.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	if si.Pid > 0 {
		return "/proc/" + strconv.FormatUint(uint64(si.Pid), 10) + "/ns/net", nil
	}
	return "", errNoNetNS
}

// podNetwork is how to reach a pod: its address and a dialer from inside its network
// namespace.
type podNetwork struct {
	ip    string
	netns string
	dial  dialFunc
}

// containerNetwork finds the network of the pod that runs container id: the sandbox's
// address (the node's for a host-network pod) and network namespace.
func (r *Runtime) containerNetwork(ctx context.Context, id string) (podNetwork, error) {
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return podNetwork{}, fmt.Errorf("find container %s: %w", id, err)
	}
	if len(cs.GetContainers()) == 0 {
		return podNetwork{}, fmt.Errorf("container %s not found", id)
	}
	sb := cs.GetContainers()[0].GetPodSandboxId()
	st, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb, Verbose: true})
	if err != nil {
		return podNetwork{}, fmt.Errorf("status of sandbox %s: %w", sb, err)
	}
	ns, err := netNSPath(st.GetInfo())
	if err != nil {
		return podNetwork{}, fmt.Errorf("sandbox %s: %w", sb, err)
	}
	n := podNetwork{ip: st.GetStatus().GetNetwork().GetIp(), netns: ns}
	if n.ip == "" { // on the node's network
		n.ip = r.cfg.NodeIP
		if n.ip == "" {
			n.ip = "127.0.0.1"
		}
	}
	dial := r.dialPod
	if dial == nil {
		dial = dialInNetNS
	}
	n.dial = func(ctx context.Context, network, addr string) (net.Conn, error) { return dial(ctx, ns, network, addr) }
	return n, nil
}
