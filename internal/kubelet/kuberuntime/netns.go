package kuberuntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	goruntime "runtime"
	"strconv"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pods' addresses are on a node bridge the host has no route to, so network probes and
// hooks connect from inside the pod's network namespace: a socket belongs to the
// namespace of the thread that created it, wherever it is used afterwards.

// dialFunc opens a connection (net.Dialer.DialContext's signature).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialInNetNS connects to addr over network from the network namespace at nsPath ("":
// this process's own). Host names are resolved here first, so that only the connect
// happens in the namespace. The socket is created on a thread of its own that joins the
// namespace and leaves it again; a thread that cannot go back is never given back to the
// Go scheduler (it ends with its goroutine).
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
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		conn, err, restored := dialFromThread(ctx, nsPath, network, addr)
		if restored {
			goruntime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// dialFromThread dials from the calling thread (locked to its goroutine) after moving it
// into the namespace at nsPath, and moves it back; restored says whether the thread is in
// its own namespace again.
func dialFromThread(ctx context.Context, nsPath, network, addr string) (conn net.Conn, err error, restored bool) {
	own, err := os.Open("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err), true
	}
	defer own.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err), true
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter network namespace %s: %w", nsPath, err), true
	}
	// One address and no happy eyeballs: the socket is made here, on this thread.
	d := net.Dialer{FallbackDelay: -1}
	conn, err = d.DialContext(ctx, network, addr)
	if serr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); serr != nil {
		return conn, err, false
	}
	return conn, err, true
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
